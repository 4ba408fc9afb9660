"""Full k-core decomposition of a directed dataset without in-edge partitions: every round streams
every alive vertex's out-list and counts its removed out-neighbours (see the package docstring)."""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...errors import GrapheneError
from ...iterator.atomics import atomic_add as _add
from ...iterator.edgemap import EdgeMap, Update
from ..common import vertex_dtype
from .base import _always, _peel_serial, _record, _result


def _run_scan(graph, budget, in_memory, runtime, progress, t0, k):
    """Rounds of level k stream every alive vertex's out-list (in-neighbours are not stored); the
    rest is gathered and finished in RAM once it has at most `budget` incidences."""
    n = graph.num_vertices
    steps = []
    deg = graph.degrees("out") + _in_degrees(graph, in_memory, runtime, steps, progress)
    core = np.zeros(n, dtype=vertex_dtype(n))      # core numbers < n: 4 bytes while IDs are
    status = np.zeros(n, dtype=np.uint8)     # 0 alive, 1 being removed this round, 2 removed
    rounds = 0
    em = EdgeMap(graph, in_memory=in_memory, **runtime) if n else None
    try:
        T = em.threads if em is not None else 1
        dec = np.zeros((T, n), dtype=np.int64)
        touched = np.empty((T, n), dtype=np.int64)
        ntouched = np.zeros(T, dtype=np.int64)
        alive = np.arange(n, dtype=np.int64)
        level = 0
        while True:
            alive, lo = _next_level(deg, status, alive)
            if len(alive) == 0:
                break
            if budget > 0 and int(deg[alive].sum()) <= budget:
                _finish_in_memory(em, alive, deg, status, core, steps, progress, level)
                rounds += 1
                break
            level = max(level, int(lo))
            frontier = _select(deg, status, alive, level)
            while len(frontier):
                if int(deg[frontier].max()) > 0:   # else no alive neighbours left: nothing to do
                    st = em.dense((status, dec, touched, ntouched), DECREMENT)
                    _record(steps, progress, st, level, len(frontier))
                rounds += 1
                frontier = _apply(deg, status, dec, touched, ntouched, level, core, frontier)
    finally:
        if em is not None:
            em.close()
    return _result(core, k, rounds, steps, t0, keep_edges=int(budget))


@njit(cache=True)
def _decrement_both(v, nbrs, wts, tid, state):
    """Out-edges only, every vertex streamed: a removed v decrements its alive out-neighbours (edge
    v->u counts in u's in-degree); an alive v loses one degree per removed out-neighbour."""
    status, dec, touched, ntouched = state
    drow = dec[tid]
    trow = touched[tid]
    if status[v] == 1:
        for i in range(len(nbrs)):
            u = np.int64(nbrs[i])
            if status[u] == 0:
                if drow[u] == 0:
                    trow[ntouched[tid]] = u
                    ntouched[tid] += 1
                drow[u] += 1
    elif status[v] == 0:
        c = 0
        for i in range(len(nbrs)):
            if status[np.int64(nbrs[i])] == 1:
                c += 1
        if c > 0:
            if drow[v] == 0:
                trow[ntouched[tid]] = v
                ntouched[tid] += 1
            drow[v] += c


#: per-thread decrement rows and lists of the touched vertices (not mergeable across machines:
#: this mode does not run on a cluster)
DECREMENT = Update(_always, _decrement_both, combine="sum")


@njit(cache=True)
def _apply(deg, status, dec, touched, ntouched, k, core, removing):
    """Removing vertices become dead (status 2) with core k; decrements applied; returns the alive
    touched vertices whose degree is now <= k (the next frontier), marked status 1."""
    for i in range(removing.shape[0]):
        v = removing[i]
        status[v] = 2
        core[v] = k
    cnt = 0
    for t in range(dec.shape[0]):
        cnt += ntouched[t]
    out = np.empty(cnt, dtype=np.int64)
    m = 0
    for t in range(dec.shape[0]):
        for j in range(ntouched[t]):
            u = touched[t, j]
            deg[u] -= dec[t, u]
            dec[t, u] = 0
            if status[u] == 0 and deg[u] <= k:
                status[u] = 1
                out[m] = u
                m += 1
        ntouched[t] = 0
    return out[:m]


@njit(cache=True)
def _next_level(deg, status, alive):
    """Compact `alive` to the vertices still alive; return (alive, min degree among them)."""
    m = 0
    lo = np.iinfo(np.int64).max
    for i in range(alive.shape[0]):
        v = alive[i]
        if status[v] == 0:
            alive[m] = v
            m += 1
            if deg[v] < lo:
                lo = deg[v]
    return alive[:m], lo


@njit(cache=True)
def _select(deg, status, alive, k):
    m = 0
    for i in range(alive.shape[0]):
        if deg[alive[i]] <= k:
            m += 1
    out = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(alive.shape[0]):
        v = alive[i]
        if deg[v] <= k:
            status[v] = 1
            out[m] = v
            m += 1
    return out


@njit(cache=True)
def _alive(v, state):
    return state[0][v] == 0


@njit(cache=True)
def _gather(v, nbrs, wts, tid, state):
    """Append (v, u) and (u, v) for every alive out-neighbour u of an alive v."""
    status, ga, gb, tail = state
    c = 0
    for i in range(len(nbrs)):
        if status[np.int64(nbrs[i])] == 0:
            c += 1
    if c == 0:
        return
    k = _add(tail, 0, np.int64(2 * c))
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if status[u] == 0:
            ga[k] = v
            gb[k] = u
            ga[k + 1] = u
            gb[k + 1] = v
            k += 2


GATHER = Update(_alive, _gather, combine="first", reads=0)


def _finish_in_memory(em, alive, deg, status, core, steps, progress, level):
    """The alive subgraph has at most `budget` (default n) incidences: read it once (one streamed
    superstep), then finish the peeling in memory with Batagelj-Zaversnik. Every alive vertex has
    degree > level here, so its core number in the remaining subgraph is its core number in the
    graph (the peeling below continues exactly where the rounds stopped)."""
    m = int(deg[alive].sum())
    ga = np.empty(m, dtype=np.int64)
    gb = np.empty(m, dtype=np.int64)
    tail = np.zeros(1, dtype=np.int64)
    st = em.dense((status, ga, gb, tail), GATHER)
    _record(steps, progress, st, level, 0)
    if int(tail[0]) != m:
        raise GrapheneError(f"k-core: gathered {int(tail[0])} incidences of the remaining "
                            f"subgraph, expected {m} (dataset degrees and lists disagree)")
    sub = _peel_serial(len(deg), ga, gb)
    core[alive] = sub[alive]
    status[alive] = 2


@njit(cache=True)
def _count_in(v, nbrs, wts, tid, state):
    row = state[0][tid]
    for i in range(len(nbrs)):
        row[np.int64(nbrs[i])] += 1


def _in_degrees(graph, in_memory, runtime, steps, progress):
    """In-degrees from one streamed pass over the out-lists (directed datasets without in-edges)."""
    n = graph.num_vertices
    with EdgeMap(graph, in_memory=in_memory, **runtime) as em:
        cnt = np.zeros((em.threads, n), dtype=np.int64)
        st = em.dense((cnt,), COUNT_IN)
        _record(steps, progress, st, 0, 0)
    return cnt.sum(axis=0)


COUNT_IN = Update(_always, _count_in, combine="sum", writes=(0,))
