"""Multi-source BFS / APSP sampling, bit-parallel (iBFS, Liu et al. SIGMOD'16; Graphene §4.7 APSP).

Computes: BFS depths from S sources at once over out-edges: `depths` int32[S, n] (-1 = unreached;
an `np.memmap` .npy file when `output=` is given), `sources` int64[S], `reached` int64[S], and with
`closeness=True` the closeness of every source (outgoing distances, Wasserman-Faust scaled like
NetworkX: ((r-1)/(n-1)) * ((r-1)/sum of depths), r = vertices reached including the source).
Returns: MSBFSResult(sources, depths, reached, closeness, passes, supersteps, seconds).

Algorithm: up to 64 sources per pass share every traversal: bit i of a vertex's word means
"source i" (uint32 words when a pass has <= 32 sources, else uint64: half the memory traffic).
`frontier[v]` holds the sources that reached v in the previous level, `visited[v]` all that reached
v before it, `nxt[v]` those found in the current level. One superstep per level, in one of two
directions (iBFS's top-down / bottom-up, Beamer's direction optimisation):
- top-down: the lists of the vertices with a non-zero frontier word are streamed once (one IO for
  all the BFSs, the point of iBFS) and frontier[v] & ~visited[u] is atomically ORed into nxt[u]
  (after a plain read shows it adds bits);
- bottom-up (iBFS's "bottom-up with early termination"): every vertex v that still wants bits
  (live & ~visited[v] != 0, `live` = the sources with a non-empty frontier) reads its in-list (the
  out-list on an undirected dataset) and ORs frontier[u] over it, stopping as soon as every wanted
  bit is found; the bits go into nxt[v] with one atomic OR (another chunk of v's list may race).
The level runs bottom-up when it reads fewer bytes by bfs.py's IO cost model (deg*id_width + one
512-byte block per list piece, capped at the adjacency bytes), ties included (bottom-up also
computes less: early exit, no scattered writes); directed datasets without in-edges stay top-down.
On Kronecker scale 22 with 32 sources the dense middle levels read the whole file either way, but
bottom-up scans half the edges or fewer there, and the late levels read 210 MB instead of 513 MB.
The thread whose atomic OR sets a bit records that depth and counts it (per-thread counters), so
every (source, vertex) is recorded exactly once on any chunking; a serial pass per level then moves
nxt into frontier/visited and builds both candidate masks with their costs. Sources beyond 64 run
in further passes. Default sources: 32 random vertices of non-zero out-degree from config.SEED
(GAPBS's habit), distinct; `sources=[...]` picks them.
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros as _ctz

from .. import config
from ..errors import GrapheneError
from ..iterator.atomics import atomic_or as _or

from .common import Result

DEFAULT_SOURCES = 32


class MSBFSResult(Result):
    MAIN = "depths"


# ---------------------------------------------------------------------------------------------
# state = (frontier, visited, nxt, drow, counts, live, level)
#   drow: the pass's rows of depths (int32[k, n]); counts: int64[T, 72] per-thread per-bit tallies
#   (a 576-byte row per thread); live: uint64[1]; level: the depth being discovered (int32)
@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True, inline="always")
def _record(drow, counts, tid, v, got, level):
    """The caller's atomic OR set the bits `got` of v: record their depth, count them."""
    while got != np.uint64(0):
        b = _ctz(got)
        drow[b, v] = level
        counts[tid, b] += 1
        got &= got - np.uint64(1)


@njit(cache=True)
def _push(v, nbrs, wts, tid, state):
    """Top-down: v's sources reach its out-neighbours."""
    frontier, visited, nxt, drow, counts, live, level = state
    f = np.uint64(frontier[v])
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        new = f & ~np.uint64(visited[u])
        if new != np.uint64(0) and new & ~np.uint64(nxt[u]) != np.uint64(0):
            got = new & ~np.uint64(_or(nxt, u, new))
            if got != np.uint64(0):
                _record(drow, counts, tid, u, got, level)


@njit(cache=True)
def _pull(v, nbrs, wts, tid, state):
    """Bottom-up: v collects the frontier bits of its in-neighbours it still wants; early exit."""
    frontier, visited, nxt, drow, counts, live, level = state
    want = live[0] & ~np.uint64(visited[v]) & ~np.uint64(nxt[v])
    if want == np.uint64(0):
        return
    acc = np.uint64(0)
    for i in range(nbrs.shape[0]):
        acc |= np.uint64(frontier[np.int64(nbrs[i])])
        if acc & want == want:
            break
    got = acc & want
    if got != np.uint64(0):
        got &= ~np.uint64(_or(nxt, v, got))
        if got != np.uint64(0):
            _record(drow, counts, tid, v, got, level)


@njit(cache=True)
def _advance(nxt, frontier, visited, live, deg_out, deg_in, w, cols_out, cols_in, m_td, m_bu, up):
    """End of a level: nxt becomes the frontier (frontier is zeroed to serve as the next nxt),
    visited |= nxt; m_td / m_bu: who is active for a top-down / bottom-up next level (m_bu only
    when `up`), with their estimated bytes (deg*w + 512 per list piece). Returns
    (#vertices discovered, top-down bytes, bottom-up bytes)."""
    cnt = 0
    c_td = 0
    c_bu = 0
    for v in range(nxt.shape[0]):
        f = nxt[v]
        frontier[v] = 0
        a = np.uint8(0)
        if f != 0:
            vis = visited[v] | f
            visited[v] = vis
            cnt += 1
            d = deg_out[v]
            if d > 0:
                c_td += d * w + 512 * min(d, cols_out)
                a = np.uint8(1)
        else:
            vis = visited[v]
        m_td[v] = a
        if up:
            b = np.uint8(0)
            if live & ~np.uint64(vis) != np.uint64(0):
                d = deg_in[v]
                if d > 0:
                    c_bu += d * w + 512 * min(d, cols_in)
                    b = np.uint8(1)
            m_bu[v] = b
    return cnt, c_td, c_bu


@njit(cache=True)
def _or_rows(counts, k):
    """OR of the bits with a non-zero tally (the sources still alive after this level)."""
    live = np.uint64(0)
    for b in range(k):
        for t in range(counts.shape[0]):
            if counts[t, b] != 0:
                live |= np.uint64(1) << np.uint64(b)
                break
    return live


# ---------------------------------------------------------------------------------------------
def pick_sources(graph, count=DEFAULT_SOURCES, seed=config.SEED):
    """`count` distinct random vertices with out-degree > 0 (all of them when fewer exist)."""
    deg = graph.degrees("out")
    cand = np.flatnonzero(deg > 0)
    if len(cand) <= count:
        return cand.astype(np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(cand, size=count, replace=False)).astype(np.int64)


def _degrees(it, graph, direction, dtype):
    if hasattr(it, "degrees"):
        return it.degrees(dtype)
    return graph.degrees(direction).astype(dtype)   # a stand-in iterator (tests)


def run(graph, *, device="cpu", in_memory=False, sources=None, num_sources=DEFAULT_SOURCES,
        closeness=False, output=None, bottom_up=True, **runtime) -> MSBFSResult:
    """bottom_up: run a level bottom-up whenever the cost model says it reads no more bytes (needs
    in-edges, or an undirected dataset); "always": every level (tests); False: top-down only."""
    from ..iterator import Frontier, IoIterator
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    t0 = time.perf_counter()
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
    dplain = np.asarray(depths)     # a plain ndarray view (of the memmap) for the kernels
    sums = np.zeros(S, dtype=np.int64)
    reached = np.zeros(S, dtype=np.int64)
    steps = []
    passes = 0
    up_dir = None
    if bottom_up:
        if not graph.directed:
            up_dir = "out"
        elif graph.in_partitions is not None:
            up_dir = "in"
    its = {}
    try:
        if S and n:
            its["out"] = IoIterator(graph, "out", in_memory=in_memory, weights=False, **runtime)
            T = its["out"].threads
            ddt = np.int32 if graph.num_edges < (1 << 31) else np.int64
            deg_out = _degrees(its["out"], graph, "out", ddt)
            deg_in = deg_out
            if up_dir == "in":
                its["in"] = IoIterator(graph, "in", in_memory=in_memory, weights=False, **runtime)
                deg_in = _degrees(its["in"], graph, "in", ddt)
            w = graph.id_width
            cap_out = sum(p.adj_bytes for p in graph.partitions)
            cols_out = max(1, graph.num_cols)
            if up_dir is not None:
                cap_in = sum(p.adj_bytes for p in graph.parts(up_dir))
                cols_in = max(1, len(graph.parts(up_dir)) // max(1, graph.num_rows))
            else:
                cap_in, cols_in = 0, 1
            m_td = np.zeros(n, dtype=np.uint8)
            m_bu = np.zeros(n, dtype=np.uint8)
            counts = np.zeros((T, 72), dtype=np.int64)
            live = np.zeros(1, dtype=np.uint64)
            for base in range(0, S, 64):
                chunk = src[base:base + 64]
                k = len(chunk)
                wdt = np.uint32 if k <= 32 else np.uint64
                frontier = np.zeros(n, dtype=wdt)
                visited = np.zeros(n, dtype=wdt)
                nxt = np.zeros(n, dtype=wdt)
                drow = dplain[base:base + k]
                for i, s in enumerate(chunk):
                    nxt[s] |= wdt(1) << wdt(i)
                    drow[i, s] = 0
                reached[base:base + k] += 1
                live[0] = _or_rows(np.ones((1, k), np.int64), k)
                _, c_td, c_bu = _advance(nxt, frontier, visited, live[0], deg_out, deg_in, w,
                                         cols_out, cols_in, m_td, m_bu, up_dir is not None)
                frontier, nxt = nxt, frontier
                level = 0
                while True:
                    level += 1
                    pull = up_dir is not None and (
                        bottom_up == "always" or min(c_bu, cap_in) <= min(c_td, cap_out))
                    state = (frontier, visited, nxt, drow, counts, live, np.int32(level))
                    if pull:
                        st = its[up_dir].run(_always, _pull, state, Frontier.from_mask(m_bu))
                    else:
                        st = its["out"].run(_always, _push, state, Frontier.from_mask(m_td))
                    t1 = time.perf_counter()
                    got = counts[:, :k].sum(axis=0)
                    live[0] = _or_rows(counts, k)
                    counts[:] = 0
                    reached[base:base + k] += got
                    sums[base:base + k] += level * got
                    cnt, c_td, c_bu = _advance(nxt, frontier, visited, live[0], deg_out, deg_in,
                                               w, cols_out, cols_in, m_td, m_bu,
                                               up_dir is not None)
                    frontier, nxt = nxt, frontier
                    st = dict(st)
                    st.update(pass_=passes, level=level, discovered=int(cnt),
                              direction="bottom-up" if pull else "top-down",
                              merge_seconds=time.perf_counter() - t1)
                    steps.append(st)
                    if progress is not None:
                        progress(st)
                    if cnt == 0:
                        break
                passes += 1
    finally:
        for it in its.values():
            it.close()
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
    click.Option(["--top-down", "bottom_up"], flag_value=False, default=True,
                 help="Top-down levels only (no bottom-up levels)."),
]
