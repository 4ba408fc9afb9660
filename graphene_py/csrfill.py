"""Assembling one CSR from the partitions of a 2D grid (Graph.to_csr): each partition's lists are
copied to their vertex's slot in one pass, behind the pieces of the columns before it."""
from __future__ import annotations

import numpy as np
from .jit import njit


@njit(cache=True, nogil=True)
def fill_rows(out, fill, off, src):
    """Append the i-th list of a partition (off: its offsets, src: its adjacency or weights) at
    fill[i] in out, advancing fill[i] (fill: the slots of the partition's rows)."""
    for i in range(off.shape[0] - 1):
        s = np.int64(off[i])
        e = np.int64(off[i + 1])
        d = fill[i]
        for j in range(e - s):
            out[d + j] = src[s + j]
        fill[i] = d + e - s
