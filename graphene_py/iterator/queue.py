"""The next frontier as a shared append-only queue, filled by compute threads during a superstep.

    q = NextQueue(n, threads)            # q.ids, q.tail, q.cur: pass them in the kernel's state
    push(ids, tail, cur, tid, u)         # in a compute function: append vertex u
    size = q.close()                     # after the superstep: q.ids[:size] is the queue

Each thread claims 64-slot blocks with one fetch-and-add on the shared tail, so threads do not
fight over one counter's cache line per vertex; the unfilled slots of each thread's last block are
squeezed out at close. A vertex appears once when the caller claims it first (BFS: a fetch-or on
its visited bit; betweenness: a compare-and-swap on its depth).
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from .atomics import atomic_add

BLOCK = 64


@njit(cache=True, inline="always")
def push(ids, tail, cur, tid, u):
    """Append u (thread tid's next slot; a new 64-slot block when its block is full)."""
    if cur[tid, 0] == cur[tid, 1]:
        b = atomic_add(tail, 0, np.int64(BLOCK))
        cur[tid, 0] = b
        cur[tid, 1] = b + BLOCK
    ids[cur[tid, 0]] = u
    cur[tid, 0] += 1


@njit(cache=True)
def squeeze(ids, tail, cur):
    """Drop every thread's unfilled slots; returns the queue's size (ids[:size])."""
    return squeeze_from(ids, tail, cur, 0)


@njit(cache=True)
def squeeze_from(ids, tail, cur, start):
    """squeeze() for a queue appended from ids[start] on (tail[0] was start when the superstep
    began): returns its size, ids[start:start + size]. One array then holds every level of a BFS
    one after the other (each vertex enters once: n slots, plus one block per thread)."""
    t = tail[0]
    for k in range(cur.shape[0]):
        for j in range(cur[k, 0], cur[k, 1]):
            ids[j] = -1
        cur[k, 0] = 0
        cur[k, 1] = 0
    m = start
    for j in range(start, t):
        if ids[j] >= 0:
            ids[m] = ids[j]
            m += 1
    return m - start


class NextQueue:
    """Room for n vertices (+ one block per thread) and the claim cursors."""

    def __init__(self, n: int, threads: int):
        self.ids = np.empty(n + threads * BLOCK, dtype=np.int64)
        self.tail = np.zeros(1, dtype=np.int64)
        self.cur = np.zeros((threads, 8), dtype=np.int64)    # per-thread cursor (64-byte rows)

    def close(self) -> int:
        size = int(squeeze(self.ids, self.tail, self.cur))
        self.tail[0] = 0
        return size
