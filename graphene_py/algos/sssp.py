"""Single-source shortest paths by delta-stepping (Meyer & Sanders, J. Algorithms 2003; GAPBS sssp).

Computes: `dist` float64[n], the shortest-path distance from `src` over the weighted out-edges
(np.inf = unreached). Needs a weighted dataset with non-negative weights.
Returns: SSSPResult(dist, src, delta, n_reached, buckets, supersteps, seconds).

Algorithm: vertices whose distance dropped and whose edges have not been relaxed since are *pending*.
Each superstep takes the pending vertices of the lowest non-empty bucket [i*delta, (i+1)*delta)
(GAPBS-style: all edges of a vertex relaxed when it is processed, no light/heavy split, so every
list is read once per processing) and relaxes their out-edges: candidate distances go to one
array by an atomic min on the float's bits (weights are >= 0, so bits order as values), and the
first hit of a vertex queues it (dist itself is only written between supersteps); the merge
walks the queue: O(hit vertices). Improved vertices
become pending again; the bucket is re-processed until empty, then the next non-empty bucket.
Label-correcting, so the result is exact for any delta; delta trades supersteps (small delta: many
nearly-empty buckets) against re-relaxations (large delta: Bellman-Ford-like). The default
(DEFAULT_DELTA = 256) suits integer weights 1..255 (GAPBS's generator); tune with --delta.
"""
from __future__ import annotations

import heapq
import time

import click
import numpy as np
from ..jit import njit

from ..errors import GrapheneError

from .common import Result, pick_source, real_range

#: Bucket width. On SSDs fewer, fuller supersteps beat saving re-relaxations: with GAPBS's weights
#: 1..255 on a symmetrized Kronecker scale-20 graph (2 threads, O_DIRECT) one SSSP took 16.7 s at
#: delta 8, 6.6 s at 32, 4.9 s at 128, 3.5 s at 255, 3.3 s at 512 and 4.6 s at infinity
#: (Bellman-Ford): about the largest edge weight is best.
DEFAULT_DELTA = 256.0


CLUSTER = True     # runs on a cluster (every superstep through the engine contract)

class SSSPResult(Result):
    MAIN = "dist"


# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _active(v, state):
    return state[0][v] == 1


@njit(cache=True)
def _relax(v, nbrs, wts, tid, state):
    """Candidate distances of v's out-neighbours: cand[u] = min(cand[u], dist[v] + w) by an atomic
    min on the float's bits (weights >= 0); the first hit of u this superstep queues it."""
    inq, dist, cbits, hit, ids, tail, cur, neg = state
    dv = dist[v]
    for i in range(len(nbrs)):
        w = np.float64(wts[i])
        if w < 0.0:
            neg[0] = 1
            continue
        u = np.int64(nbrs[i])
        nd = dv + w
        if nd < dist[u]:
            b = _bits(nd)
            if b < cbits[u]:                  # plain read first: most candidates lose
                _amin(cbits, u, b)
                if hit[u] == 0 and _or(hit, u, np.uint8(1)) == 0:
                    push(ids, tail, cur, tid, u)


from ..iterator.atomics import atomic_min as _amin, atomic_or as _or, float_bits as _bits  # noqa: E402
from ..iterator.edgemap import Update  # noqa: E402
from ..iterator.queue import push  # noqa: E402

#: one superstep: candidates combine by min (on their bits), hits by or, the hit vertices queue
RELAX = Update(_active, _relax, combine="min", writes=(2, (3, "or"), (7, "or")), queue=(4, 5, 6))


@njit(cache=True)
def _merge(dist, cand, hit, q, nq, pending, npend, in_pending):
    """Apply the candidates of the queued (hit) vertices; improved ones join `pending`. Returns the
    new pending count."""
    for j in range(nq):
        u = q[j]
        c = cand[u]
        cand[u] = np.inf
        hit[u] = 0
        if c < dist[u]:
            dist[u] = c
            if in_pending[u] == 0:
                in_pending[u] = 1
                pending[npend] = u
                npend += 1
    return npend


@njit(cache=True)
def _take_bucket(dist, pending, npend, in_pending, inq, delta):
    """Remove the pending vertices of the lowest bucket; returns (frontier, new npend, bucket)."""
    lo = np.inf
    for i in range(npend):
        d = dist[pending[i]]
        if d < lo:
            lo = d
    b = np.floor(lo / delta)
    hi = (b + 1.0) * delta
    m = 0
    for i in range(npend):
        if dist[pending[i]] < hi:
            m += 1
    out = np.empty(m, dtype=np.int64)
    k = 0
    keep = 0
    for i in range(npend):
        v = pending[i]
        if dist[v] < hi:
            out[k] = v
            k += 1
            in_pending[v] = 0
            inq[v] = 1
        else:
            pending[keep] = v
            keep += 1
    return out, keep, b


# ---------------------------------------------------------------------------------------------
def run_gpu(graph, *, src=None, delta=DEFAULT_DELTA, gpu_mem=None, progress=None,
            **_ignored) -> SSSPResult:
    """Delta-stepping on the GPU."""
    from ..gpu import algorithms as A
    from ..gpu.resident import gpu_steps, timed
    dg, t_load = timed(graph, gpu_mem)
    if dg.weights is None:
        raise GrapheneError(f"{graph.name}: SSSP needs a weighted dataset (partition with --weighted)")
    t0 = time.perf_counter()
    src = pick_source(graph) if src is None else int(src)
    st: dict = {}
    dist = A.sssp(dg, src, delta=delta, stats=st)
    return SSSPResult(dist=dist, src=src, delta=float(st["delta"]),
                      n_reached=int(np.count_nonzero(np.isfinite(dist))), buckets=st["buckets"],
                      supersteps=gpu_steps(st, progress), seconds=time.perf_counter() - t0,
                      load_seconds=t_load, device="gpu", gpu_tier=dg.tier())


def check(graph, src, delta):
    """(source ID, delta) of a run: clear errors for a dataset without weights, a bad delta, an
    empty graph or a source out of range (also the numpy path's: algos/small.py)."""
    if not graph.weighted:
        raise GrapheneError(f"{graph.name}: SSSP needs edge weights; this dataset has none "
                            f"(partition a weighted edge list, e.g. .wel, with --weighted)")
    delta = float(DEFAULT_DELTA if delta is None else delta)
    if not (delta > 0 and np.isfinite(delta)):
        raise GrapheneError(f"delta must be a positive number (got {delta})")
    n = graph.num_vertices
    if n == 0:
        raise GrapheneError(f"{graph.name}: the graph has no vertices")
    src = pick_source(graph) if src is None else int(src)
    if not 0 <= src < n:
        raise GrapheneError(f"source {src} out of range 0..{n - 1}")
    return src, delta


def run(graph, *, device="cpu", in_memory=False, src=None, delta=DEFAULT_DELTA,
        **runtime) -> SSSPResult:
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    src, delta = check(graph, src, delta)
    t0 = time.perf_counter()
    n = graph.num_vertices
    from ..iterator.edgemap import EdgeMap
    from ..iterator.memory import track
    from ..iterator.queue import NextQueue
    dist = np.full(n, np.inf)
    dist[src] = 0.0
    pending = np.empty(n, dtype=np.int64)
    in_pending = np.zeros(n, dtype=np.uint8)
    inq = np.zeros(n, dtype=np.uint8)
    pending[0] = src
    in_pending[src] = 1
    npend = 1
    neg = np.zeros(1, dtype=np.uint8)
    steps = []
    buckets = set()
    with EdgeMap(graph, weights=True, in_memory=in_memory, **runtime) as em:
        cand = np.full(n, np.inf)
        hit = np.zeros(n, dtype=np.uint8)
        q = NextQueue(n, em.threads)
        track("distances, candidates", dist, cand)
        track("buckets (queue, flags)", pending, in_pending, inq, hit)
        track("hit queue", q.ids)
        state = (inq, dist, cand.view(np.int64), hit, q.ids, q.tail, q.cur, neg)
        while npend:
            frontier, npend, b = _take_bucket(dist, pending, npend, in_pending, inq, float(delta))
            buckets.add(b)
            st = em.edge_map(state, frontier, push=RELAX)
            inq[frontier] = 0
            nq = q.close()
            if neg[0]:
                raise GrapheneError(f"{graph.name}: negative edge weight found; delta-stepping "
                                    f"needs weights >= 0")
            npend = _merge(dist, cand, hit, q.ids, nq, pending, npend, in_pending)
            st = dict(st)
            st.update(bucket=int(b), relaxed=int(len(frontier)))
            steps.append(st)
            if progress is not None:
                progress(st)
    return SSSPResult(dist=dist, src=src, delta=float(delta),
                      n_reached=int(np.count_nonzero(np.isfinite(dist))), buckets=len(buckets),
                      supersteps=steps, seconds=time.perf_counter() - t0)


def verify(graph, result, **_ignored) -> list:
    """GAPBS-style: serial Dijkstra (binary heap) from the stored weighted edges; equal up to 1e-9
    relative (exactly equal for integer weights)."""
    n = graph.num_vertices
    indptr, indices, w = graph.to_csr("out")
    dist = _dijkstra(indptr, indices, w.astype(np.float64), int(result.src), n)
    got = np.asarray(result.dist)
    if got.shape != (n,):
        return [f"dist has shape {got.shape}, expected ({n},)"]
    fin = np.isfinite(dist) & np.isfinite(got)
    same = got == dist
    same[fin] |= np.abs(got[fin] - dist[fin]) <= 1e-9 * np.abs(dist[fin])
    bad = np.flatnonzero(~same)
    if len(bad):
        v = int(bad[0])
        return [f"{len(bad)} distances wrong (vertex {v}: {got[v]}, expected {dist[v]})"]
    return []


@njit(cache=True)
def _dijkstra(indptr, indices, w, s, n):
    dist = np.full(n, np.inf)
    dist[s] = 0.0
    heap = [(0.0, s)]
    while len(heap):
        d, v = heapq.heappop(heap)
        if d > dist[v]:
            continue
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            nd = d + w[j]
            if nd < dist[u]:
                dist[u] = nd
                heapq.heappush(heap, (nd, u))
    return dist


CLI_OPTIONS = [
    click.Option(["--src"], type=str, default=None,
                 help="Source vertex: its ID 0..|V|-1, or its name on a dataset partitioned with "
                      "--labels (--relabel: its original ID) (default: a random vertex of "
                      "non-zero degree from the seed)."),
    click.Option(["--delta"], type=real_range(0.0, min_open=True), default=DEFAULT_DELTA,
                 show_default=True, help="Bucket width of delta-stepping (> 0)."),
]
