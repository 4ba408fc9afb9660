"""k-core decomposition: the core number of every vertex, by iterative peeling (Graphene §4.7).

Computes: `core_number` int64[n]: the largest k such that the vertex belongs to the k-core (the
maximal subgraph in which every vertex has degree >= k). Degree = in + out on directed datasets
(NetworkX's convention for DiGraph), the number of neighbours on undirected ones; self-loops and
duplicate edges were dropped at partition time. With `k=K` also `in_k_core` (bool[n], core >= K).
Returns: KCoreResult(core_number, max_core, k, in_k_core, rounds, supersteps, seconds).

Algorithm: Graphene's peeling ("remove vertices with degree < k, update the degree array"), run for
*all* k in one pass (the C++ prototype handles one k per run): starting from k = min degree, the
vertices of degree <= k are removed in rounds; each round is one superstep that streams the removed
vertices' lists and decrements their alive neighbours' degrees. Decrements go to per-thread buffers
plus per-thread "touched" lists (indexed by compute thread id: no atomics), so merging costs
O(touched), not O(n): vertices whose degree dropped to <= k form the next round's frontier. When a
round removes nothing, k jumps to the minimum degree among the vertices still alive. Removed
vertices with no alive neighbours left (degree 0 by now) are not read at all. The removed
vertices of level k all get core number k (Matula-Beck / Batagelj-Zaversnik peeling order).
The dense cores of power-law graphs need one round per level at the end (hundreds of tiny
supersteps): once the alive vertices hold at most `tail_edges` incidences (default n, so memory
stays O(|V|)), their lists are read once and the peeling finishes in memory (Batagelj-Zaversnik
bucket peeling); `tail_edges=0` peels to the end on the SSD path.
Directed datasets need both directions: the frontier's out-lists and in-lists are streamed. Without
in-edge partitions a round instead streams every alive vertex's out-list (Frontier.all) and counts,
per vertex, its removed out-neighbours (one full pass per round; partition with --in-edges).
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit

from ..errors import GrapheneError

from .common import Result


class KCoreResult(Result):
    MAIN = "core_number"


# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _removing(v, state):
    return state[0][v] == 1


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _decrement(v, nbrs, wts, tid, state):
    """Every alive neighbour u of a removed vertex v loses one degree (per-thread buffers)."""
    status, dec, touched, ntouched = state
    drow = dec[tid]
    trow = touched[tid]
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if status[u] == 0:
            if drow[u] == 0:
                trow[ntouched[tid]] = u
                ntouched[tid] += 1
            drow[u] += 1


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


# ---------------------------------------------------------------------------------------------
def _open(graph, direction, in_memory, runtime):
    from ..iterator import IoIterator
    return IoIterator(graph, direction, in_memory=in_memory, weights=False, **runtime)


def _frontier():
    from ..iterator import Frontier
    return Frontier


def run(graph, *, device="cpu", in_memory=False, k=None, tail_edges=None, **runtime) -> KCoreResult:
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    if k is not None and int(k) < 0:
        raise GrapheneError(f"k must be >= 0 (got {k})")
    t0 = time.perf_counter()
    Frontier = _frontier()
    n = graph.num_vertices
    steps = []
    has_in = graph.in_partitions is not None
    deg = graph.degrees("out")
    if graph.directed:
        if has_in:
            deg = deg + graph.degrees("in")
            dirs = ["out", "in"]
        else:
            dirs = ["out"]
            deg = deg + _in_degrees(graph, in_memory, runtime, steps, progress)
    else:
        dirs = ["out"]
    full_scan = graph.directed and not has_in
    core = np.zeros(n, dtype=np.int64)
    status = np.zeros(n, dtype=np.uint8)     # 0 alive, 1 being removed this round, 2 removed
    rounds = 0
    its = [_open(graph, d, in_memory, runtime) for d in dirs] if n else []
    try:
        T = max([it.threads for it in its] or [1])
        dec = np.zeros((T, n), dtype=np.int64)
        touched = np.empty((T, n), dtype=np.int64)
        ntouched = np.zeros(T, dtype=np.int64)
        alive = np.arange(n, dtype=np.int64)
        level = 0
        ones = np.ones(n, dtype=np.uint8)
        budget = n if tail_edges is None else int(tail_edges)
        while True:
            alive, lo = _next_level(deg, status, alive)
            if len(alive) == 0:
                break
            if budget > 0 and int(deg[alive].sum()) <= budget:
                _finish_in_memory(its, alive, deg, status, core, full_scan, steps, progress, level)
                rounds += 1
                break
            level = max(level, int(lo))
            frontier = _select(deg, status, alive, level)
            while len(frontier):
                state = (status, dec, touched, ntouched)
                need = frontier[deg[frontier] > 0]   # the others have no alive neighbours left
                if len(need) == 0:
                    pass
                elif full_scan:
                    st = its[0].run(_always, _decrement_both, state, Frontier.all(n))
                    _record(steps, progress, st, level, len(frontier))
                else:
                    fr = Frontier.from_queue(need, n)
                    for it in its:
                        st = it.run(_removing, _decrement, state, fr)
                        _record(steps, progress, st, level, len(frontier))
                rounds += 1
                frontier = _apply(deg, status, dec, touched, ntouched, level, core, frontier)
    finally:
        for it in its:
            it.close()
    in_k = None if k is None else core >= int(k)
    return KCoreResult(core_number=core, max_core=int(core.max()) if n else 0,
                       k=None if k is None else int(k), in_k_core=in_k, rounds=rounds,
                       supersteps=steps, seconds=time.perf_counter() - t0)


@njit(cache=True)
def _alive(v, state):
    return state[0][v] == 0


@njit(cache=True)
def _gather(v, nbrs, wts, tid, state):
    """Append (v, u) for every alive neighbour u; with `both`, also (u, v) (out-only datasets)."""
    status, ga, gb, tail, both = state
    c = 0
    for i in range(len(nbrs)):
        if status[np.int64(nbrs[i])] == 0:
            c += 1
    if c == 0:
        return
    k = _add(tail, 0, np.int64(c * (2 if both else 1)))
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if status[u] == 0:
            ga[k] = v
            gb[k] = u
            k += 1
            if both:
                ga[k] = u
                gb[k] = v
                k += 1


from ..iterator.atomics import atomic_add as _add  # noqa: E402


def _finish_in_memory(its, alive, deg, status, core, full_scan, steps, progress, level):
    """The alive subgraph has at most `tail_edges` (default n) incidences: read it once (one
    superstep per direction), then finish the peeling in memory with Batagelj-Zaversnik. Every
    alive vertex has degree > level here, so its core number in the remaining subgraph is its core
    number in the graph (the peeling below continues exactly where the rounds stopped)."""
    from ..iterator import Frontier
    n = len(deg)
    m = int(deg[alive].sum())
    ga = np.empty(m, dtype=np.int64)
    gb = np.empty(m, dtype=np.int64)
    tail = np.zeros(1, dtype=np.int64)
    state = (status, ga, gb, tail, full_scan)
    if full_scan:
        st = its[0].run(_alive, _gather, state, Frontier.all(n))
        _record(steps, progress, st, level, 0)
    else:
        fr = Frontier.from_queue(alive, n)
        for it in its:
            st = it.run(_alive, _gather, state, fr)
            _record(steps, progress, st, level, 0)
    if int(tail[0]) != m:
        raise GrapheneError(f"k-core: gathered {int(tail[0])} incidences of the remaining "
                            f"subgraph, expected {m} (dataset degrees and lists disagree)")
    sub = _peel_serial(n, ga, gb)
    core[alive] = sub[alive]
    status[alive] = 2


def _record(steps, progress, st, level, removed):
    st = dict(st)
    st.update(k=level, removing=int(removed))
    steps.append(st)
    if progress is not None:
        progress(st)


@njit(cache=True)
def _count_in(v, nbrs, wts, tid, state):
    row = state[0][tid]
    for i in range(len(nbrs)):
        row[np.int64(nbrs[i])] += 1


def _in_degrees(graph, in_memory, runtime, steps, progress):
    """In-degrees from one streamed pass over the out-lists (directed datasets without in-edges)."""
    n = graph.num_vertices
    with _open(graph, "out", in_memory, runtime) as it:
        cnt = np.zeros((it.threads, n), dtype=np.int64)
        st = it.run(_always, _count_in, (cnt,), _frontier().all(n))
        _record(steps, progress, st, 0, 0)
    return cnt.sum(axis=0)


def verify(graph, result, **_ignored) -> list:
    """Independent serial check: Batagelj-Zaversnik O(m) bucket peeling over the stored edges (both
    directions on directed datasets) must give the same core numbers."""
    n = graph.num_vertices
    core = np.asarray(result.core_number)
    if core.shape != (n,):
        return [f"core_number has shape {core.shape}, expected ({n},)"]
    src, dst = graph.edges("out")
    if graph.directed:
        a = np.concatenate([src, dst])
        b = np.concatenate([dst, src])
    else:
        a, b = src, dst
    ref = _peel_serial(n, a, b)
    problems = []
    bad = np.flatnonzero(ref != core)
    if len(bad):
        v = int(bad[0])
        problems.append(f"{len(bad)} core numbers wrong (vertex {v}: {int(core[v])}, expected "
                        f"{int(ref[v])})")
    if result.k is not None and not np.array_equal(result.in_k_core, ref >= result.k):
        problems.append(f"in_k_core differs from core_number >= {result.k}")
    return problems


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


CLI_OPTIONS = [
    click.Option(["--k", "k"], type=int, default=None,
                 help="Also report membership of the K-core (core number >= K)."),
]
