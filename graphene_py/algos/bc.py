"""Betweenness centrality (Brandes, J. Math. Sociol. 2001) from SSD, exact or sampled.

Computes: `bc` float64[n]: for each vertex v, the sum over source-target pairs (s, t), s != v != t,
of the fraction of shortest s-t paths through v — NetworkX's `betweenness_centrality` with its
normalization (`normalized`, `endpoints`; undirected graphs count each pair once) and its sampling
(`k` sources: the result is rescaled as NetworkX does). Unweighted (hop) distances.
Returns: BCResult(bc, sources, normalized, endpoints, supersteps, seconds).

Algorithm, per source s, written against the engine contract (iterator/edgemap.py):
1. forward: level-synchronous BFS that also counts shortest paths: reading the out-lists of level
   L, a neighbour u first reached claims depth L+1 (compare-and-swap) and joins the next level,
   and every u at depth L+1 adds sigma[v] to sigma[u] (an atomic float add: combine "sum");
2. backward: the levels from the deepest up: reading the out-lists of level L again,
   delta[v] = sum over successors w (depth L+1) of sigma[v] / sigma[w] * (1 + delta[w])
   (chunks of one list add partial sums: "sum");
3. bc[w] += delta[w] for every reached w != s (endpoints: + 1, and bc[s] += reached - 1).
Two reads of the reached vertices' lists per source; only the touched vertices are reset.
"""
from __future__ import annotations

import math
import random
import time

import click
import numpy as np
from ..jit import njit

from ..errors import GrapheneError
from ..iterator.atomics import atomic_cas, atomic_fadd
from ..iterator.edgemap import EdgeMap, Update
from ..iterator.memory import track
from ..iterator.queue import NextQueue, push
from .common import Result


CLUSTER = True     # runs on a cluster (every superstep through the engine contract)

class BCResult(Result):
    MAIN = "bc"


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _forward(v, nbrs, wts, tid, state):
    depth, sigma, ids, tail, cur, level = state
    nd = np.int32(level + 1)
    sv = sigma[v]
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        d = depth[u]
        if d == -1:
            if atomic_cas(depth, u, np.int32(-1), nd) == -1:
                push(ids, tail, cur, tid, u)
            d = nd            # whoever won, only depth L+1 is written in this superstep
        if d == nd:
            atomic_fadd(sigma, u, sv)


@njit(cache=True)
def _backward(v, nbrs, wts, tid, state):
    depth, sigma, delta = state
    dv = depth[v] + 1
    s = 0.0
    for i in range(nbrs.shape[0]):
        w = np.int64(nbrs[i])
        if depth[w] == dv:
            s += (1.0 + delta[w]) / sigma[w]
    if s != 0.0:
        atomic_fadd(delta, v, sigma[v] * s)


#: the forward and backward supersteps; partial updates of one vertex add up
#: (forward state: depth, sigma, ids, tail, cur, level — every writer of a depth writes L+1)
FORWARD = Update(_always, _forward, combine="sum", writes=((0, "max"), 1), queue=(2, 3, 4))
BACKWARD = Update(_always, _backward, combine="sum", writes=(2,))


@njit(cache=True)
def _accumulate(bc, order, reached, delta, s, endpoints, depth, sigma):
    """bc += this source's dependencies; reset the touched state for the next source."""
    for k in range(reached):
        w = order[k]
        if w != s:
            bc[w] += delta[w] + (1.0 if endpoints else 0.0)
        depth[w] = -1
        sigma[w] = 0.0
        delta[w] = 0.0
    if endpoints:
        bc[s] += reached - 1


def rescale(bc, n, normalized, directed, endpoints, sampled=None):
    """NetworkX's scaling: per pair of (s, t) that could pass through v; undirected pairs once;
    sampled sources scaled up to all of them (source vertices apart without endpoints)."""
    k = None if sampled is None else len(sampled)
    N = n if endpoints else n - 1
    if N < 2:
        return bc
    K = N if k is None else k
    if k is None or endpoints:
        if normalized:
            scale = 1.0 / (K * (N - 1))
        else:
            scale = N / (K * (1 if directed else 2))
        return bc * scale
    if normalized:
        src_scale = 1.0 / ((K - 1) * (N - 1)) if K > 1 else math.nan
        other = 1.0 / (K * (N - 1))
    else:
        c = 1 if directed else 2
        src_scale = N / ((K - 1) * c) if K > 1 else math.nan
        other = N / (K * c)
    out = bc * other
    idx = np.asarray(sorted(set(int(x) for x in sampled)), dtype=np.int64)
    out[idx] = bc[idx] * src_scale
    return out


def pick_sources(n, k, seed):
    """k distinct random vertices (random.Random(seed).sample, as NetworkX samples), or all."""
    if k is None or k >= n:
        return list(range(n))
    rng = seed if hasattr(seed, "sample") else random.Random(seed)
    return rng.sample(range(n), int(k))


def run(graph, *, device="cpu", in_memory=False, k=None, sources=None, seed=None,
        normalized=True, endpoints=False, exact=False, progress=None, **runtime) -> BCResult:
    """Betweenness of every vertex from `sources` (vertex IDs), or `k` sampled ones, or all
    (k=None or exact=True)."""
    runtime.pop("device", None)
    t0 = time.perf_counter()
    n = graph.num_vertices
    if exact:
        k = None
    if sources is None:
        sources = pick_sources(n, k, seed)
    src = [int(s) for s in sources]
    if any(not 0 <= s < n for s in src):
        raise GrapheneError(f"source vertex out of range 0..{n - 1}")
    sampled = None if len(src) == n else src
    bc = np.zeros(n)
    depth = np.full(n, -1, dtype=np.int32)
    sigma = np.zeros(n)
    delta = np.zeros(n)
    order = np.empty(max(1, n), dtype=np.int64)
    track("bc, sigma, delta", bc, sigma, delta)
    track("depth", depth)
    track("level order", order)
    steps = []
    with EdgeMap(graph, in_memory=in_memory, **runtime) as em:
        q = NextQueue(n, em.threads)
        track("next queue", q.ids)
        for s in src:
            depth[s] = 0
            sigma[s] = 1.0
            order[0] = s
            starts = [0, 1]
            level = 0
            while starts[-1] > starts[-2]:
                frontier = order[starts[-2]:starts[-1]]
                st = em.edge_map((depth, sigma, q.ids, q.tail, q.cur, np.int64(level)), frontier,
                                 push=FORWARD)
                size = q.close()
                order[starts[-1]:starts[-1] + size] = q.ids[:size]
                starts.append(starts[-1] + size)
                st.update(source=s, level=level, phase="forward", found=size)
                steps.append(st)
                if progress is not None:
                    progress(st)
                level += 1
            for lv in range(len(starts) - 3, -1, -1):   # the deepest level has no successors
                st = em.edge_map((depth, sigma, delta), order[starts[lv]:starts[lv + 1]],
                                 push=BACKWARD)
                st.update(source=s, level=lv, phase="backward")
                steps.append(st)
                if progress is not None:
                    progress(st)
            _accumulate(bc, order, starts[-1], delta, s, bool(endpoints), depth, sigma)
    bc = rescale(bc, n, normalized, graph.directed, endpoints, sampled)
    return BCResult(bc=bc, sources=np.asarray(src, dtype=np.int64), normalized=bool(normalized),
                    endpoints=bool(endpoints), supersteps=steps, seconds=time.perf_counter() - t0)


def verify(graph, result, **_ignored) -> list:
    """A plain serial Brandes (algos/reference.py) from the same sources, scaled the same way."""
    from .reference import serial_brandes
    n = graph.num_vertices
    indptr, indices, _ = graph.to_csr("out")
    src = np.asarray(result.sources, dtype=np.int64)
    raw = serial_brandes(indptr, indices, src, n, bool(result.endpoints))
    ref = rescale(raw, n, result.normalized, graph.directed, result.endpoints,
                  None if len(src) == n else src)
    bad = np.flatnonzero(~np.isclose(np.asarray(result.bc), ref, rtol=1e-9, atol=1e-12,
                                     equal_nan=True))
    if len(bad):
        v = int(bad[0])
        return [f"{len(bad)} betweenness values wrong (vertex {v}: {result.bc[v]!r}, expected "
                f"{ref[v]!r})"]
    return []


CLI_OPTIONS = [
    click.Option(["--num-sources", "-k", "k"], type=click.IntRange(1, None), default=32,
                 show_default=True,
                 help="Sampled sources (NetworkX's k), scaled up to all of them; see --exact."),
    click.Option(["--exact"], is_flag=True, help="Every vertex as a source (n BFS pairs: slow)."),
    click.Option(["--seed"], type=int, default=None, help="Seed of the source sample."),
    click.Option(["--raw", "normalized"], flag_value=False, default=True,
                 help="Not normalized (NetworkX normalized=False)."),
    click.Option(["--endpoints"], is_flag=True, help="Count the path endpoints too."),
]
