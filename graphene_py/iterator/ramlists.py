"""The in-memory path's lists, walked directly by an algorithm's own kernels.

The engine's superstep (plan extents, cut them into rows, a callback per list chunk) is what the
SSD path needs. In RAM it can cost more than the work: on kron22 a bottom-up BFS level took 2.5x
GAPBS's own (every vertex passes the engine's pull mask, the activity callback and an atomic claim;
a level's plan alone took 26 ms). An algorithm that knows its loop walks `RamLists` instead (BFS,
algos/bfs_ram.py; pull PageRank was tried and gained nothing: its engine supersteps are bound by
the same random reads of the scores):

    rl = RamLists.of(em, "in")            # None unless the run is local and in memory
    rl.run(lambda tid: kernel(tid, rl.counter, ..., *rl.table))

`table` is (buf, offs, row_lo, row_part, pbase, plo, ebase), IoIterator.ram_lists(): the rows of
the grid start at row_lo[r] (row_lo[-1] == n), row r's partitions are row_part[r]..row_part[r+1],
and partition j's list of v is buf[ebase[j] + offs[b] : ebase[j] + offs[b + 1]] with
b = pbase[j] + v - plo[j] (ebase[j] < 0: no edges). On a 1x1 grid `csr` is (buf, offs, base):
v's list is buf[base + offs[v] : base + offs[v + 1]]. Kernels take work in chunks by an atomic
add on `counter` (reset by run), one call per compute thread, the iterator's threads.
"""
from __future__ import annotations

import numpy as np

from ..jit import njit


@njit(cache=True, inline="always")
def last_at_most(a, count, x):
    """The last i < count with a[i] <= x (a ascending, a[0] <= x): a binary search."""
    lo = 0
    hi = count - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if a[mid] <= x:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True, inline="always")
def row_of(row_lo, v):
    """The grid row holding vertex v: the last r with row_lo[r] <= v."""
    return last_at_most(row_lo, row_lo.shape[0] - 1, v)


@njit(cache=True, inline="always")
def list_span(offs, pbase, plo, j, v):
    """(start, end) of v's list in partition j of its row, positions in the partition's IDs
    (add ebase[j] for buf, wbase[j] for the weights)."""
    b = pbase[j] + v - plo[j]
    return np.int64(offs[b]), np.int64(offs[b + 1])


@njit(cache=True, inline="always")
def degree(offs, row_lo, row_part, pbase, plo, v):
    """v's list length summed over its row's partitions."""
    r = row_of(row_lo, v)
    d = 0
    for j in range(row_part[r], row_part[r + 1]):
        b = pbase[j] + v - plo[j]
        d += offs[b + 1] - offs[b]
    return d


class RamLists:
    """One direction's lists in RAM and the threads to walk them with."""

    def __init__(self, it, threads: int = 1):
        self.table = it.ram_lists()
        buf, offs, row_lo, row_part, pbase, plo, ebase = self.table
        one = len(row_part) == 2 and row_part[1] == 1 and ebase[0] >= 0
        self.csr = (buf, offs, int(ebase[0])) if one else None
        self.threads = max(1, int(getattr(it, "threads", threads)))
        self.helpers = it._helpers if self.threads > 1 else None
        self.counter = np.zeros(1, dtype=np.int64)
        self.out = np.zeros((self.threads, 2), dtype=np.int64)      # per-thread counts

    @classmethod
    def of(cls, em, direction: str, held: bool = False):
        """The lists of `direction` when em's run is local and every iterator is in memory
        (else None: the engine's supersteps serve it). held: or when the read-through cache of
        every iterator holds all its lists (IoIterator.all_held)."""
        its = getattr(em, "its", None) or {}
        it = its.get(direction)
        if not getattr(em, "local", False) or it is None or not all(
                hasattr(i, "ram_lists") and (getattr(i, "in_memory", False) or
                                             (held and i.all_held()))
                for i in its.values()):
            return None
        return cls(it, em.threads)

    def run(self, job) -> np.ndarray:
        """job(tid) on every compute thread; returns the per-thread counts (out) they left."""
        self.counter[0] = 0
        self.out[:] = 0
        if self.helpers is not None:
            self.helpers.run(job)
        else:
            job(0)
        return self.out


def step_stats(frontier: int, edges: int, seconds: float, mode: str, **more) -> dict:
    """A superstep's stats in the engine's keys, for a step walked in RAM (nothing read)."""
    st = {"frontier": int(frontier), "active_edges": int(edges), "bytes_read": 0,
          "bytes_useful": 0, "io_utility": 1.0, "io_seconds": 0.0, "requests": 0,
          "compute_seconds": float(seconds), "wait_seconds": 0.0, "plan_seconds": 0.0,
          "seconds": float(seconds), "mode": mode}
    st.update(more)
    return st
