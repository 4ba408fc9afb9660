"""Breadth-first search from one source, level-synchronous, top-down over the out-edges.

Computes: `parent` int64[n] (GAPBS encoding: parent[src] == src, -1 = unreached), `depth` int32[n]
(-1 = unreached) and `n_reached`. No level cap (a chain of any length works; int32 depths).
Returns: BFSResult(parent, depth, n_reached, src, levels, supersteps, seconds).

Algorithm (Graphene §4.7): one superstep per level. The frontier (a queue of the vertices found in
the previous level) is translated into block requests for their adjacency lists; for every list
(chunk) that arrives, each unvisited neighbour u is claimed with one compare-and-swap on depth[u]
(-1 -> level+1): the single winner sets parent[u] and appends u to the next queue (fetch-and-add on
its tail). So every vertex enters the next frontier exactly once, depths are exact on any schedule,
and a parent is always a vertex of the previous level with an edge to u (a valid BFS parent; which
one may differ between runs with several threads).

Verification (`verify`): an independent serial BFS over the whole CSR recomputes every depth; each
reached vertex's parent must be reached one level above and hold an edge to it.
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit

from ..errors import GrapheneError
from .common import Result, pick_source

MAIN = "parent"


class BFSResult(Result):
    MAIN = "parent"


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _visit(v, nbrs, wts, tid, state):
    depth, parent, nxt, tail, level = state
    nd = np.int32(level + 1)
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        if depth[u] < 0:
            if _cas(depth, u, np.int32(-1), nd) == -1:
                parent[u] = v
                k = _add(tail, 0, np.int64(1))
                nxt[k] = u


from ..iterator.atomics import atomic_add as _add, atomic_cas as _cas  # noqa: E402


def run(graph, *, device="cpu", in_memory=False, src=None, **runtime) -> BFSResult:
    from ..iterator import Frontier, IoIterator
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    t0 = time.perf_counter()
    n = graph.num_vertices
    if n == 0:
        raise GrapheneError(f"{graph.name}: BFS needs at least one vertex (graph is empty)")
    if src is None:
        src = pick_source(graph)
    src = int(src)
    if not 0 <= src < n:
        raise GrapheneError(f"source vertex {src} is out of range [0, {n})")
    depth = np.full(n, -1, dtype=np.int32)
    parent = np.full(n, -1, dtype=np.int64)
    qa = np.empty(n, dtype=np.int64)
    qb = np.empty(n, dtype=np.int64)
    tail = np.zeros(1, dtype=np.int64)
    depth[src] = 0
    parent[src] = src
    qa[0] = src
    size = 1
    level = 0
    steps = []
    with IoIterator(graph, "out", in_memory=in_memory, **runtime) as it:
        while size > 0:
            tail[0] = 0
            fr = Frontier("queue", n, ids=qa[:size], count=size)
            st = it.run(_always, _visit, (depth, parent, qb, tail, np.int64(level)), fr)
            st["level"] = level
            steps.append(st)
            if progress is not None:
                progress(st)
            size = int(tail[0])
            qa, qb = qb, qa
            level += 1
    n_reached = int(np.count_nonzero(depth >= 0))
    return BFSResult(parent=parent, depth=depth, n_reached=n_reached, src=src,
                     levels=int(depth.max()) + 1, supersteps=steps,
                     seconds=time.perf_counter() - t0)


# -- verification (independent, serial) --------------------------------------------------------
@njit(cache=True)
def _serial_bfs(indptr, indices, src, n):
    depth = np.full(n, -1, dtype=np.int32)
    q = np.empty(n, dtype=np.int64)
    depth[src] = 0
    q[0] = src
    head = 0
    tail = 1
    while head < tail:
        v = q[head]
        head += 1
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            if depth[u] < 0:
                depth[u] = depth[v] + 1
                q[tail] = u
                tail += 1
    return depth


@njit(cache=True)
def _check_parents(indptr, indices, parent, depth, src):
    """Index of the first vertex whose parent is not a valid BFS parent, else -1."""
    for v in range(parent.shape[0]):
        if depth[v] < 0:
            if parent[v] != -1:
                return v
            continue
        if v == src:
            if parent[v] != src:
                return v
            continue
        p = parent[v]
        if p < 0 or p >= parent.shape[0] or depth[p] != depth[v] - 1:
            return v
        lo = indptr[p]
        hi = indptr[p + 1]
        while lo < hi:   # adjacency lists are sorted: binary search for v
            mid = (lo + hi) >> 1
            if indices[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo >= indptr[p + 1] or indices[lo] != v:
            return v
    return -1


def verify(graph, result, **options) -> list:
    problems = []
    n = graph.num_vertices
    src = int(result.src)
    parent, depth = np.asarray(result.parent), np.asarray(result.depth)
    if parent.shape != (n,) or depth.shape != (n,):
        return [f"result arrays have shapes {parent.shape}/{depth.shape}, want ({n},)"]
    indptr, indices, _ = graph.to_csr("out")
    ref = _serial_bfs(indptr, indices, src, n)
    bad = np.flatnonzero(ref != depth)
    if len(bad):
        v = int(bad[0])
        problems.append(f"{len(bad)} vertices have a wrong depth (first: vertex {v} depth "
                        f"{int(depth[v])}, serial BFS says {int(ref[v])})")
    v = int(_check_parents(indptr, indices, parent, depth, src))
    if v >= 0:
        problems.append(f"vertex {v} has an invalid parent {int(parent[v])} (depth {int(depth[v])})")
    nr = int(np.count_nonzero(ref >= 0))
    if int(result.n_reached) != nr:
        problems.append(f"n_reached is {int(result.n_reached)}, serial BFS reaches {nr}")
    return problems


CLI_OPTIONS = [
    click.Option(["--src", "-r"], type=int, default=None,
                 help="Source vertex (default: a random vertex with out-edges, fixed seed)."),
]
