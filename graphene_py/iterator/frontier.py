"""Frontier: which vertices are active in a superstep (a queue of IDs, a flag mask, or all).

    Frontier.from_queue(ids, n)   int32 or int64 vertex IDs (order free; duplicates tolerated)
    Frontier.from_mask(mask)      uint8/bool flag per vertex (len n)
    Frontier.from_mask(mask, again=True)  ... and a later superstep will read most of these
                                  lists again (MS-BFS's bottom-up levels): the read-through
                                  cache copies them in on this first read, not on the third
    Frontier.all(n)               every vertex with edges: the iterator skips marking and streams
                                  whole adjacency files in large sequential extents
    Frontier.all(n, again=True)   ... and the caller will stream them again (an iterative
                                  algorithm's next pass): the read-through cache copies them in
                                  on this first read, not on the second
"""
from __future__ import annotations

import numpy as np


class Frontier:
    __slots__ = ("kind", "n", "ids", "mask", "_count", "again")

    def __init__(self, kind, n, ids=None, mask=None, count=None, again=False):
        self.kind, self.n, self.ids, self.mask, self._count = kind, int(n), ids, mask, count
        self.again = bool(again)

    @classmethod
    def from_queue(cls, ids, n) -> "Frontier":
        ids = np.ascontiguousarray(ids)
        if ids.dtype not in (np.int32, np.int64):      # 4-byte queues stay 4-byte (no copy)
            ids = ids.astype(np.int64)
        if ids.ndim != 1:
            raise ValueError("frontier queue must be 1-D")
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise ValueError(f"frontier queue holds IDs outside [0, {n})")
        return cls("queue", n, ids=ids, count=len(ids))

    @classmethod
    def from_mask(cls, mask, again=False) -> "Frontier":
        mask = np.ascontiguousarray(mask)
        if mask.ndim != 1:
            raise ValueError("frontier mask must be 1-D")
        if mask.dtype == np.bool_:
            mask = mask.view(np.uint8)
        elif mask.dtype != np.uint8:
            mask = (mask != 0).view(np.uint8)
        return cls("mask", len(mask), mask=mask, again=again)

    @classmethod
    def all(cls, n, again=False) -> "Frontier":
        return cls("all", n, count=int(n), again=again)

    def __len__(self) -> int:
        if self._count is None:
            self._count = int(np.count_nonzero(self.mask))
        return self._count

    def to_ids(self) -> np.ndarray:
        if self.kind == "queue":
            return self.ids
        if self.kind == "mask":
            return np.flatnonzero(self.mask).astype(np.int64)
        return np.arange(self.n, dtype=np.int64)

    def __repr__(self):
        return f"Frontier({self.kind}, n={self.n}, active={len(self)})"
