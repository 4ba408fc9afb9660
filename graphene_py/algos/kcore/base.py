"""What the k-core algorithms share: the result, the budget constants, superstep records, the
degree helpers and the serial peeling (the algorithms: see the package docstring)."""
from __future__ import annotations

import time

import numpy as np
from ...jit import njit

from ..common import Result


class KCoreResult(Result):
    MAIN = "core_number"


#: Full decomposition: default RAM budget for kept lists, in stored neighbour IDs per vertex
#: (4-byte IDs: 16 bytes per vertex).
KEEP_PER_VERTEX = 4
#: One k, SSD path: round 1 also keeps the lists of degree K .. K+KEEP_BAND-1 (lowest first), at
#: most 1/KEEP_SHARE of round 1's edges and at most n entries.
KEEP_SHARE = 16
KEEP_BAND = 16


class Moved:
    """Where a k-core run handed over to the GPU stopped on the CPU (`_run_full`,
    `_run_membership` with a hand-off): the core numbers so far (-1: not removed yet; int32),
    the level reached, and the CPU's supersteps and rounds."""

    def __init__(self, core, level, steps, rounds, kept):
        self.core, self.level, self.steps, self.rounds, self.kept = core, level, steps, rounds, kept


def _result(core, k, rounds, steps, t0, **extra):
    n = len(core)
    in_k = None if k is None else core >= int(k)
    return KCoreResult(core_number=core, max_core=int(core.max()) if n else 0,
                       k=None if k is None else int(k), in_k_core=in_k,
                       k_core_size=None if k is None else int(np.count_nonzero(in_k)),
                       membership_only=False, rounds=rounds, **extra, supersteps=steps,
                       seconds=time.perf_counter() - t0)


def _record(steps, progress, st, level, removed):
    st = dict(st)
    st.update(k=level, removing=int(removed))
    steps.append(st)
    if progress is not None:
        progress(st)


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _peel_serial(n, a, b):
    """Batagelj-Zaversnik O(m) bucket peeling over directed incidence pairs (a -> b)."""
    order = np.argsort(a, kind="mergesort")
    nb = b[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(a.shape[0]):
        ptr[a[i] + 1] += 1
    for v in range(n):
        ptr[v + 1] += ptr[v]
    deg = np.empty(n, dtype=np.int64)
    for v in range(n):
        deg[v] = ptr[v + 1] - ptr[v]
    md = 0
    for v in range(n):
        md = max(md, deg[v])
    bins = np.zeros(md + 2, dtype=np.int64)
    for v in range(n):
        bins[deg[v]] += 1
    start = 0
    for d in range(md + 1):
        c = bins[d]
        bins[d] = start
        start += c
    pos = np.empty(n, dtype=np.int64)
    vert = np.empty(n, dtype=np.int64)
    for v in range(n):
        pos[v] = bins[deg[v]]
        vert[pos[v]] = v
        bins[deg[v]] += 1
    for d in range(md, 0, -1):
        bins[d] = bins[d - 1]
    bins[0] = 0
    for i in range(n):
        v = vert[i]
        for j in range(ptr[v], ptr[v + 1]):
            u = nb[j]
            if deg[u] > deg[v]:
                du = deg[u]
                pu = pos[u]
                pw = bins[du]
                w = vert[pw]
                if u != w:
                    pos[u] = pw
                    vert[pu] = w
                    pos[w] = pu
                    vert[pw] = u
                bins[du] += 1
                deg[u] -= 1
    return deg
