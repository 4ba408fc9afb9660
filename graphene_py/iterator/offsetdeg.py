"""Degrees read from the offsets an iterator already holds, instead of an n-entry degree array.

A kernel that walks the vertices in order (PageRank's end-of-iteration pass) can take each
vertex's degree from the offsets of its row's partitions (one difference per column partition):
no O(|V|) degree array at all. `RowGroups(it)` describes the rows; in a kernel:

    for g in range(glo.shape[0]):                      # each row range of the grid
        for v in range(glo[g], ghi[g]):
            d = row_degree(offs, part_base, pidx, gstart[g], gstart[g + 1], v - glo[g])
"""
from __future__ import annotations

import numpy as np
from ..io.offsets import off_at
from ..jit import njit


@njit
def row_degree(offs, part_base, pidx, j0, j1, i):
    """Degree of the i-th vertex of a row range: its list lengths over the row's partitions
    pidx[j0:j1]."""
    d = np.int64(0)
    for j in range(j0, j1):
        b = part_base[pidx[j]] + i
        d += off_at(offs, b + 1) - off_at(offs, b)
    return d


class RowGroups:
    """The row ranges of one direction's partitions: glo/ghi (first and end vertex of each range),
    pidx[gstart[g]:gstart[g+1]] the partitions (indices into the iterator's part_base) of range
    g. `args` = (offs, part_base, pidx, gstart, glo, ghi) for a kernel."""

    def __init__(self, it):
        parts = it.parts
        by = {}
        for i, p in enumerate(parts):
            by.setdefault((p.row_lo, p.row_hi), []).append(i)
        keys = sorted(by)
        self.glo = np.array([k[0] for k in keys], dtype=np.int64)
        self.ghi = np.array([k[1] for k in keys], dtype=np.int64)
        self.gstart = np.zeros(len(keys) + 1, dtype=np.int64)
        self.gstart[1:] = np.cumsum([len(by[k]) for k in keys])
        self.pidx = np.array([i for k in keys for i in by[k]], dtype=np.int64)
        self.args = (it.offs, it.part_base, self.pidx, self.gstart, self.glo, self.ghi)

    def covers(self, n: int) -> bool:
        """Whether the row ranges tile 0..n exactly (every vertex has one)."""
        return (len(self.glo) > 0 and self.glo[0] == 0 and self.ghi[-1] == n
                and bool(np.all(self.glo[1:] == self.ghi[:-1]))) or (n == 0)
