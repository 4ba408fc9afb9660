"""Assembling one CSR from the partitions of a 2D grid (Graph.to_csr): each partition's lists are
copied to their vertex's slot in one pass, behind the pieces of the columns before it."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def fill_rows(out, fill, row_lo, off, src):
    """Append the lists of rows row_lo.. (off: the partition's offsets, src: its adjacency or
    weights) at fill[v] in out, advancing fill[v]."""
    for i in range(off.shape[0] - 1):
        v = row_lo + i
        s = np.int64(off[i])
        e = np.int64(off[i + 1])
        d = fill[v]
        for j in range(e - s):
            out[d + j] = src[s + j]
        fill[v] = d + e - s
