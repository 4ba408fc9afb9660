"""Multi-source BFS / APSP sampling, bit-parallel (iBFS, Liu et al. SIGMOD'16; Graphene §4.7 APSP).

Computes: BFS depths from S sources at once over out-edges: `depths` int32[S, n] (-1 = unreached;
an `np.memmap` .npy file when `output=` is given), `sources` int64[S], `reached` int64[S], and with
`closeness=True` the closeness of every source (outgoing distances, Wasserman-Faust scaled like
NetworkX: ((r-1)/(n-1)) * ((r-1)/sum of depths), r = vertices reached including the source).
Returns: MSBFSResult(sources, depths, reached, closeness, passes, supersteps, seconds).

Algorithm: up to 64 sources per pass share every traversal: bit i of a vertex's uint64 words means
"source i". `frontier[v]` holds the sources that reached v in the previous level, `visited[v]` all
that ever reached v. A level streams the lists of vertices with a non-zero frontier word once (one
IO for all 64 BFSs, the point of iBFS) and ORs frontier[v] & ~visited[u] into next[u] -- into
per-thread words indexed by compute thread id, so concurrent ORs are never lost. After the level the
per-thread words are merged, new bits become visited and are recorded as depths. Sources beyond 64
run in further passes. Default sources: 32 random vertices of non-zero out-degree from config.SEED
(GAPBS's habit), distinct; `sources=[...]` picks them.
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit

from .. import config
from ..errors import GrapheneError

from .common import Result

DEFAULT_SOURCES = 32


class MSBFSResult(Result):
    MAIN = "depths"


# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _active(v, state):
    return state[0][v] != 0


@njit(cache=True)
def _expand(v, nbrs, wts, tid, state):
    frontier, visited, nxt = state
    f = frontier[v]
    row = nxt[tid]
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        new = f & ~visited[u]
        if new != 0:
            row[u] |= new


@njit(cache=True)
def _merge(nxt, visited, frontier, depths, base, level, sums, reached):
    """frontier = OR of per-thread words minus visited; record depths; returns #vertices touched."""
    n = visited.shape[0]
    T = nxt.shape[0]
    cnt = 0
    for v in range(n):
        w = np.uint64(0)
        for t in range(T):
            w |= nxt[t, v]
            nxt[t, v] = 0
        w &= ~visited[v]
        frontier[v] = w
        if w != 0:
            visited[v] |= w
            cnt += 1
            while w != 0:
                low = w & (~w + np.uint64(1))
                b = 0
                x = low
                while x > np.uint64(1):
                    x >>= np.uint64(1)
                    b += 1
                depths[base + b, v] = level
                sums[base + b] += level
                reached[base + b] += 1
                w ^= low
    return cnt


# ---------------------------------------------------------------------------------------------
def _open(graph, in_memory, runtime):
    from ..iterator import IoIterator
    return IoIterator(graph, "out", in_memory=in_memory, weights=False, **runtime)


def _frontier():
    from ..iterator import Frontier
    return Frontier


def pick_sources(graph, count=DEFAULT_SOURCES, seed=config.SEED):
    """`count` distinct random vertices with out-degree > 0 (all of them when fewer exist)."""
    deg = graph.degrees("out")
    cand = np.flatnonzero(deg > 0)
    if len(cand) <= count:
        return cand.astype(np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(cand, size=count, replace=False)).astype(np.int64)


def run(graph, *, device="cpu", in_memory=False, sources=None, num_sources=DEFAULT_SOURCES,
        closeness=False, output=None, **runtime) -> MSBFSResult:
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    t0 = time.perf_counter()
    Frontier = _frontier()
    n = graph.num_vertices
    if sources is None:
        src = pick_sources(graph, int(num_sources))
    else:
        if isinstance(sources, str):
            sources = [int(x) for x in sources.replace(" ", "").split(",") if x]
        src = np.asarray(sources, dtype=np.int64).ravel()
        if len(src) and (src.min() < 0 or src.max() >= n):
            raise GrapheneError(f"source vertex out of range 0..{n - 1}: "
                                f"{int(src[(src < 0) | (src >= n)][0])}")
    S = len(src)
    if output is not None:
        depths = np.lib.format.open_memmap(output, mode="w+", dtype=np.int32, shape=(S, n))
        depths[:] = -1
    else:
        depths = np.full((S, n), -1, dtype=np.int32)
    sums = np.zeros(S, dtype=np.int64)
    reached = np.zeros(S, dtype=np.int64)
    steps = []
    passes = 0
    if S and n:
        with _open(graph, in_memory, runtime) as it:
            nxt = np.zeros((it.threads, n), dtype=np.uint64)
            for base in range(0, S, 64):
                chunk = src[base:base + 64]
                frontier = np.zeros(n, dtype=np.uint64)
                visited = np.zeros(n, dtype=np.uint64)
                for i, s in enumerate(chunk):
                    bit = np.uint64(1) << np.uint64(i)
                    frontier[s] |= bit
                    visited[s] |= bit
                    depths[base + i, s] = 0
                    reached[base + i] += 1
                level = 0
                while True:
                    active = frontier != 0
                    st = it.run(_active, _expand, (frontier, visited, nxt),
                                Frontier.from_mask(active.view(np.uint8)))
                    level += 1
                    cnt = _merge(nxt, visited, frontier, depths, base, level, sums, reached)
                    st = dict(st)
                    st.update(pass_=passes, level=level, discovered=int(cnt))
                    steps.append(st)
                    if progress is not None:
                        progress(st)
                    if cnt == 0:
                        break
                passes += 1
    if output is not None:
        depths.flush()
    clo = None
    if closeness:
        clo = np.zeros(S)
        ok = sums > 0
        if n > 1:
            clo[ok] = ((reached[ok] - 1) / (n - 1)) * ((reached[ok] - 1) / sums[ok])
    return MSBFSResult(sources=src, depths=depths, reached=reached, closeness=clo, passes=passes,
                       supersteps=steps, seconds=time.perf_counter() - t0)


def verify(graph, result, **_ignored) -> list:
    """One plain serial queue BFS per source from the stored edges; depths must match exactly."""
    n = graph.num_vertices
    indptr, indices, _ = graph.to_csr("out")
    problems = []
    for i, s in enumerate(np.asarray(result.sources)):
        ref = _bfs(indptr, indices, int(s), n)
        got = np.asarray(result.depths[i])
        bad = np.flatnonzero(ref != got)
        if len(bad):
            v = int(bad[0])
            problems.append(f"source {int(s)}: {len(bad)} depths wrong (vertex {v}: {int(got[v])}, "
                            f"expected {int(ref[v])})")
    return problems


@njit(cache=True)
def _bfs(indptr, indices, s, n):
    depth = np.full(n, -1, dtype=np.int32)
    q = np.empty(n, dtype=np.int64)
    depth[s] = 0
    q[0] = s
    head, tail = 0, 1
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


def _sources_option(ctx, param, value):
    if value is None:
        return None
    try:
        return [int(x) for x in value.replace(" ", "").split(",") if x]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated vertex IDs, got {value!r}")


CLI_OPTIONS = [
    click.Option(["--sources"], type=str, default=None, callback=_sources_option,
                 help="Comma-separated source vertices (default: random non-zero-degree ones)."),
    click.Option(["--num-sources"], type=int, default=DEFAULT_SOURCES, show_default=True,
                 help="How many random sources when --sources is not given."),
    click.Option(["--closeness"], is_flag=True, help="Also report each source's closeness."),
]
