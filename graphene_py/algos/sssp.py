"""Single-source shortest paths by delta-stepping (Meyer & Sanders, J. Algorithms 2003; GAPBS sssp).

Computes: `dist` float64[n], the shortest-path distance from `src` over the weighted out-edges
(np.inf = unreached). Needs a weighted dataset with non-negative weights.
Returns: SSSPResult(dist, src, delta, n_reached, buckets, supersteps, seconds).

Algorithm (GAPBS's): a vertex whose distance dropped goes into the bin of its new bucket
[i*delta, (i+1)*delta). Each superstep takes the lowest non-empty bin (skipping entries whose vertex
has dropped to a lower bucket since, and duplicates) and relaxes every out-edge of its vertices
(no light/heavy split, so every list is read once per processing): distances drop in place by an
atomic min on the float's bits (weights are >= 0, so bits order as values), and the first drop of
a vertex in a superstep queues it; after the superstep the queued vertices join their bins
(`Bins`: per bucket, the arrays of the supersteps that fed it; O(dropped vertices) per superstep,
never a pass over all pending vertices). The current bucket is re-processed until its bin stays
empty, then the next one.
Label-correcting, so the result is exact for any delta; delta trades supersteps (small delta: many
nearly-empty buckets) against re-relaxations (large delta: Bellman-Ford-like). The default
(`default_delta`) is the dataset's largest weight, capped at twice the mean weight (both recorded
when it was partitioned; DEFAULT_DELTA = 256 on older datasets); tune with --delta.
"""
from __future__ import annotations

import heapq
import time

import click
import numpy as np
from ..jit import njit

from ..errors import GrapheneError

from .common import Result, checked_source, pick_source, real_range, vertex_dtype

#: Bucket width where the dataset does not record its weights. On SSDs fewer, fuller supersteps
#: beat saving re-relaxations: with GAPBS's weights 1..255 on a symmetrized Kronecker scale-20
#: graph (2 threads, O_DIRECT) one SSSP took 16.7 s at delta 8, 6.6 s at 32, 4.9 s at 128, 3.5 s
#: at 255, 3.3 s at 512 and 4.6 s at infinity (Bellman-Ford): about the largest edge weight is
#: best. GAPBS's kron22 with its bins (BENCHMARKS.md): 8 and 256 within noise with the adjacency
#: cache; without it every superstep that scans costs a pass, and fewer buckets win.
DEFAULT_DELTA = 256.0


def default_delta(graph):
    """The bucket width of a run without --delta: the dataset's largest edge weight, at most twice
    its mean weight (a few heavy edges do not make every bucket Bellman-Ford), from the stats its
    partitioning recorded; DEFAULT_DELTA where they are missing (older datasets) or not > 0."""
    st = getattr(graph, "stats", None) or {}
    hi, mean = st.get("weight_max"), st.get("weight_mean")
    try:
        d = min(float(hi), 2.0 * float(mean))
    except (TypeError, ValueError):
        return DEFAULT_DELTA
    return d if d > 0 and np.isfinite(d) else DEFAULT_DELTA


def ram_delta(graph):
    """The bucket width of a run whose lists are in RAM (no --delta): default_delta / 64 (4 for
    GAPBS's weights 1..255; kron22: 3.6-3.9 s at widths 1-8 against 6.1 s at 256, where each
    superstep costs little more than its edges)."""
    return default_delta(graph) / RAM_DELTA_DIVISOR


CLUSTER = True     # runs on a cluster (every superstep through the engine contract)
READS_WEIGHTS = True   # its run opens the dataset with its weights (the CLI's set-up does too)

#: vertices per claim of a thread in a superstep walked in RAM (at most; a small frontier is cut
#: into 4 claims per thread)
RAM_CHUNK = 64

#: default_delta / this = the bucket width in RAM (ram_delta)
RAM_DELTA_DIVISOR = 64.0

#: a bucket's vertices are walked in ID order from this many on: their offsets, lists and weights
#: are then read in file order (kron22w in RAM, warm: the supersteps under 10 M edges 0.24-0.26 s
#: against 0.29-0.30 s in bucket order, the larger ones 0.47-0.49 against 0.51-0.53 s)
SORT_FROM = 1024

#: how many entries of a list ahead _relax asks for the distance it will read
AHEAD = 32


#: an unreached vertex's distance where distances are 4-byte integers (int_distances)
UNREACHED32 = np.uint32(0xFFFFFFFF)


class SSSPResult(Result):
    MAIN = "dist"


def int_distances(graph) -> bool:
    """Whether a run's distances can be exact 4-byte unsigned integers, as GAPBS's are: the
    dataset's partitioning recorded that every weight is a whole number >= 0 (weight_integral), and
    no simple path can reach UNREACHED32 ((|V| - 1) x the largest weight is below it; a tentative
    distance of a label-correcting run is always a simple path's length). Half the bytes of
    float64 in the random reads of every relaxation: kron22's 4 M distances are 16 MB, inside this
    CPU's L3 (BENCHMARKS.md). The result is float64 either way."""
    st = getattr(graph, "stats", None) or {}
    if not st.get("weight_integral"):
        return False
    try:
        lo, hi = float(st["weight_min"]), float(st["weight_max"])
    except (KeyError, TypeError, ValueError):
        return False
    return lo >= 0 and hi * max(0, graph.num_vertices - 1) < float(UNREACHED32)


# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _active(v, state):
    return state[0][v] == 1


@njit(cache=True)
def _relax(v, nbrs, wts, tid, state):
    """The engine's compute function (RELAX): v's whole list, by _relax_span."""
    inq, dist, dbits, hit, ids, tail, cur, neg = state
    _relax_span(v, nbrs, wts, 0, len(nbrs), 0, tid, dist, dbits, hit, ids, tail, cur, neg)


@njit(cache=True, inline="always")
def _relax_span(v, nbrs, wts, a, b, wa, tid, dist, dbits, hit, ids, tail, cur, neg):
    """v's out-neighbours nbrs[a:b] (weights wts[wa:]): dist[u] = min(dist[u], dist[v] + w) by
    an atomic min on the float's bits (weights >= 0, so bits order as values; as GAPBS, in place:
    a later list of the same superstep sees the lower distance); the first improvement of u this
    superstep queues it. Distances in uint32 (int_distances) add the weight as an integer and
    take the min on the value itself. The arrays come whole, with the span's bounds: a view cut
    per list, or the state's tuple unpacked per list, cost numba's reference calls (if only on
    arrays without an owner) for every vertex: 13% of a walk's samples."""
    dv = dist[v]
    for i in range(a, min(b, a + AHEAD)):
        _prefetch(dist, nbrs[i])
    d = wa - a
    for i in range(a, b):
        if i + AHEAD < b:                     # a hub's list: its random reads overlap
            _prefetch(dist, nbrs[i + AHEAD])
        w = wts[i + d]
        if w < 0.0:
            neg[0] = 1
            continue
        u = np.int64(nbrs[i])
        nd = dv + _cast(dv, w)                # in the distances' own kind (float64 or uint32)
        if nd < dist[u]:                      # plain read first: most candidates lose
            c = _key(nd, dbits)
            if c < _amin(dbits, u, c):
                if hit[u] == 0 and _or(hit, u, np.uint8(1)) == 0:
                    push(ids, tail, cur, tid, u)


from ..iterator.atomics import (atomic_add as _add, atomic_min as _amin,  # noqa: E402
                                atomic_or as _or, cast_like as _cast, order_key as _key,
                                prefetch as _prefetch, unowned as _unowned,
                                unowned_all as _unowned_all)
from ..iterator.edgemap import Update  # noqa: E402
from ..iterator.queue import push  # noqa: E402
from ..iterator.ramlists import RamLists, list_span, row_of, step_stats  # noqa: E402

#: one superstep: distances combine by min (on their bits), hits by or, the hit vertices queue
#: (slot 1 is slot 2 as floats: one array, read as floats and lowered as bits)
RELAX = Update(_active, _relax, combine="min", writes=(2, (3, "or"), (7, "or")), queue=(4, 5, 6))


@njit(cache=True)
def _none(v, state):
    return False


@njit(cache=True)
def _nothing(v, nbrs, wts, tid, state):
    pass


#: the pass that reads every list into the read-through cache (nothing is computed)
LOAD = Update(_none, _nothing, combine="sum", writes=())


@njit(cache=True, inline="always")
def _ask(stage, u, buf, offs, row_lo, row_part, pbase, plo, ebase, wbuf, wbase, dist):
    """Ask for one step of vertex u's reads ahead of them: 0 its offsets, 1 its lists and
    weights, 2 the distance of each list's first neighbour (each step reads the one before)."""
    r = row_of(row_lo, u)
    for j in range(row_part[r], row_part[r + 1]):
        if stage == 0:
            _prefetch(offs, pbase[j] + u - plo[j])
        elif ebase[j] >= 0:
            s, e = list_span(offs, pbase, plo, j, u)
            if stage == 1:
                _prefetch(buf, ebase[j] + s)
                _prefetch(wbuf, wbase[j] + s)
            elif e > s:
                _prefetch(dist, buf[ebase[j] + s])


@njit(cache=True, nogil=True)
def _relax_ram(tid, counter, chunk, frontier, buf, offs, row_lo, row_part, pbase, plo, ebase,
               wbuf, wbase, state, out):
    """Thread tid's share of one superstep in RAM (RamLists): the frontier's lists walked
    directly, `chunk` vertices per claim, each relaxed by _relax_span; out[tid, 0] = edges relaxed.
    The lists' views and the state's arrays take no reference (atomics.unowned): each was an
    atomic add and subtract on a counter both threads' cores share, for every vertex."""
    buf, wbuf, frontier, offs, row_lo, row_part, pbase, plo, ebase, wbase = _unowned_all(
        (buf, wbuf, frontier, offs, row_lo, row_part, pbase, plo, ebase, wbase))
    inq, dist, dbits, hit, ids, tail, cur, neg = _unowned_all(state)
    m = frontier.shape[0]
    edges = 0
    while True:
        lo = _add(counter, 0, np.int64(1)) * chunk
        if lo >= m:
            break
        hi = min(m, lo + chunk)
        for k in range(lo, hi):
            # a vertex's reads wait on each other (its offsets, then its list, then the
            # distances the list names); the vertices ahead get each step asked for early
            if k + 8 < m:
                _ask(0, np.int64(frontier[k + 8]), buf, offs, row_lo, row_part, pbase, plo,
                     ebase, wbuf, wbase, dist)
            if k + 4 < m:
                _ask(1, np.int64(frontier[k + 4]), buf, offs, row_lo, row_part, pbase, plo,
                     ebase, wbuf, wbase, dist)
            if k + 2 < m:
                _ask(2, np.int64(frontier[k + 2]), buf, offs, row_lo, row_part, pbase, plo,
                     ebase, wbuf, wbase, dist)
            v = np.int64(frontier[k])
            r = row_of(row_lo, v)
            for j in range(row_part[r], row_part[r + 1]):
                eb = ebase[j]
                if eb >= 0:
                    s, e = list_span(offs, pbase, plo, j, v)
                    wb = wbase[j]
                    _relax_span(v, buf[eb + s:eb + e], wbuf[wb + s:wb + e], 0, e - s, 0, tid,
                                dist, dbits, hit, ids, tail, cur, neg)
                    edges += e - s
    out[tid, 0] = edges


def _ram_step(rl, weights, frontier, state):
    """One superstep over the frontier's lists in RAM (weights: IoIterator.ram_weights()): the
    engine's stats keys."""
    t0 = time.perf_counter()
    buf, offs, row_lo, row_part, pbase, plo, ebase = rl.table
    wbuf, wbase = weights
    chunk = max(1, min(RAM_CHUNK, len(frontier) // (4 * rl.threads)))
    c = rl.counter

    def job(tid):
        _relax_ram(tid, c, chunk, frontier, buf, offs, row_lo, row_part, pbase, plo, ebase,
                   wbuf, wbase, state, rl.out)
    res = rl.run(job)
    return step_stats(len(frontier), int(res[:, 0].sum()), time.perf_counter() - t0, "queue",
                      walk="ram")


@njit(cache=True)
def _take(ids, dist, inq, delta, b):
    """The vertices of bin b still in bucket b (an entry goes stale when its vertex dropped to a
    lower bucket since, which processed it there), each once: they get inq; returns the count,
    moved to the front of ids."""
    m = 0
    for j in range(ids.shape[0]):
        v = ids[j]
        if inq[v] == 0 and np.floor(dist[v] / delta) == b:
            inq[v] = 1
            ids[m] = v
            m += 1
    return m


@njit(cache=True)
def _counting_order(keys, k0, span):
    """The stable order of keys (whole numbers in k0 .. k0 + span - 1) and the count of each."""
    cnt = np.zeros(span, dtype=np.int64)
    for j in range(keys.shape[0]):
        cnt[np.int64(keys[j] - k0)] += 1
    at = np.empty(span, dtype=np.int64)
    t = 0
    for i in range(span):
        at[i] = t
        t += cnt[i]
    order = np.empty(keys.shape[0], dtype=np.int64)
    for j in range(keys.shape[0]):
        i = np.int64(keys[j] - k0)
        order[at[i]] = j
        at[i] += 1
    return order, cnt


@njit(cache=True)
def _settle(frontier, inq, dist, hit, q, nq, delta, like):
    """After a superstep, in one pass: the frontier leaves the bucket (inq), and the queued
    vertices (q[:nq], hit cleared) are grouped by their new bucket floor(dist / delta), stably, by
    a counting sort when their buckets span a few times their count. Returns (sorted, vertices,
    buckets, counts): vertices (like's dtype) in bucket order, each distinct bucket and its count;
    sorted False (a wide span: Bins.add sorts) leaves them empty and `buckets` the keys of q."""
    for j in range(frontier.shape[0]):
        inq[frontier[j]] = 0
    keys = np.empty(nq)
    k0 = np.inf
    k1 = -np.inf
    for j in range(nq):
        u = q[j]
        hit[u] = 0
        k = np.floor(dist[u] / delta)
        keys[j] = k
        k0 = min(k0, k)
        k1 = max(k1, k)
    if nq == 0 or not k1 - k0 < 4 * nq + 1024:
        return False, np.empty(0, like.dtype), keys, np.empty(0, np.int64)
    order, cnt = _counting_order(keys, k0, np.int64(k1 - k0) + 1)
    vs = np.empty(nq, like.dtype)
    for j in range(nq):
        vs[j] = q[order[j]]
    m = 0
    for i in range(cnt.shape[0]):
        if cnt[i]:
            m += 1
    ks = np.empty(m)
    cs = np.empty(m, np.int64)
    m = 0
    for i in range(cnt.shape[0]):
        if cnt[i]:
            ks[m] = k0 + i
            cs[m] = cnt[i]
            m += 1
    return True, vs, ks, cs


class Bins:
    """GAPBS's bucket bins: bucket number -> the vertices that dropped into it (arrays appended per
    superstep; a vertex may sit in several, stale ones are skipped when a bin is taken). Buckets
    are taken lowest first; a superstep only adds to the current bucket or later ones."""

    def __init__(self, n):
        self.dtype = vertex_dtype(n)
        self.keys = []                  # a heap of bucket numbers that have a bin
        self.bins = {}                  # bucket -> [arrays]
        self.held = 0                   # vertex entries held (stale ones included)
        self.most = 0                   # ... at the most

    def add(self, verts, keys):
        """verts[j] joins bin keys[j] (both arrays of one superstep)."""
        if len(verts) == 0:
            return
        if keys[0] == keys[-1] and (keys == keys[0]).all():
            self._put(float(keys[0]), verts.astype(self.dtype))
            return
        k0, k1 = float(keys.min()), float(keys.max())
        if k1 - k0 < 4 * len(keys) + 1024:       # a few buckets ahead: a counting sort
            order, cnt = _counting_order(keys, k0, int(k1 - k0) + 1)
            vs = verts[order].astype(self.dtype, copy=False)
            ends = np.cumsum(cnt)
            for i in np.flatnonzero(cnt).tolist():
                self._put(k0 + i, vs[ends[i] - cnt[i]:ends[i]])
            return
        order = np.argsort(keys, kind="stable")
        ks = keys[order]
        vs = verts[order].astype(self.dtype, copy=False)
        cut = np.flatnonzero(ks[1:] != ks[:-1]) + 1
        lo = 0
        for hi in (*cut.tolist(), len(ks)):
            self._put(float(ks[lo]), vs[lo:hi])
            lo = hi

    def add_grouped(self, verts, keys, counts):
        """verts (in bucket order, this bins' dtype) join the bins keys[i], counts[i] each."""
        lo = 0
        for k, c in zip(keys.tolist(), counts.tolist()):
            self._put(k, verts[lo:lo + c])
            lo += c

    def _put(self, k, arr):
        got = self.bins.get(k)
        if got is None:
            self.bins[k] = [arr]
            heapq.heappush(self.keys, k)
        else:
            got.append(arr)
        self.held += len(arr)
        self.most = max(self.most, self.held)

    def pop(self):
        """(bucket, its vertex entries) of the lowest bin, or None when none is left."""
        if not self.keys:
            return None
        k = heapq.heappop(self.keys)
        arrs = self.bins.pop(k)
        ids = arrs[0] if len(arrs) == 1 else np.concatenate(arrs)
        self.held -= len(ids)
        return k, ids


# ---------------------------------------------------------------------------------------------
def run_gpu(graph, *, src=None, delta=None, gpu_mem=None, progress=None,
            **_ignored) -> SSSPResult:
    """Delta-stepping on the GPU."""
    from ..gpu import algorithms as A
    from ..gpu.resident import gpu_steps, timed
    dg, t_load = timed(graph, gpu_mem)
    if dg.weights is None:
        raise GrapheneError(f"{graph.name}: SSSP needs a weighted dataset (partition with --weighted)")
    t0 = time.perf_counter()
    src = pick_source(graph) if src is None else int(src)
    st: dict = {"tier": dg.tier()} if dg.tiered else {}   # (mode gpu-mixed, gpu-host)
    dist = A.sssp(dg, src, delta=default_delta(graph) if delta is None else delta, stats=st)
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
    delta = float(default_delta(graph) if delta is None else delta)
    if not (delta > 0 and np.isfinite(delta)):
        raise GrapheneError(f"delta must be a positive number (got {delta})")
    return checked_source(graph, src, "SSSP"), delta


def precheck(graph, opts):
    """`graphene run`'s check before its setup: weights, delta and a given source, as run()
    checks them (no source given: only that there is a vertex; none is drawn here)."""
    src = opts.get("src")
    check(graph, 0 if src is None else src, opts.get("delta"))


HYBRID = True       # run(device="auto") starts on the CPU; the GPU may take the buckets left
HANDOFF = True      # ... once a thread of its own has loaded the dataset (gpu/handoff.py SSSPPart)

#: relaxations a run makes, as a multiple of the edges, for the CPU's estimate of what is left
#: at a hand-off point: walked in RAM at its narrow width (kron22w: 140.5 M for 128.3 M edges),
#: and in supersteps from the disks at the wide one (kron22w at width 256: 291 M, BENCHMARKS.md)
RELAX_PER_EDGE = 1.1
RELAX_PER_EDGE_DISK = 2.3


def _handoff(graph, gpu_mem, handoff_at):
    """(Handoff or None, note) for device="auto": the GPU's part (the dataset loaded: gpu/handoff.py
    SSSPPart) is made on a thread of its own while the CPU runs."""
    from .registry import gpu_may_be_available
    why = gpu_may_be_available()     # (no CuPy here: it starts on the load's thread)
    if why:
        return None, f"no GPU ({why})"
    from ..gpu.handoff import Handoff, sssp_part
    load, feed = sssp_part(graph, gpu_mem)
    ho = Handoff(load, state_bytes=8 * graph.num_vertices, force_at=handoff_at)
    ho.feed = feed       # the CPU's lists in RAM after its first pass, or None (the files)
    return ho, "hybrid CPU/GPU: the GPU takes the buckets left once it is ready"


def _feed(ho, graph, rl, weights):
    """Hand the GPU's part what it loads from: a one-partition grid's lists and weights as the
    CPU holds them in RAM (4-byte IDs, fewer than 2^31 vertices), else None (the files)."""
    feed = getattr(ho, "feed", None)
    if feed is None:
        return
    arrays = None
    if rl is not None and rl.csr is not None and graph.num_vertices < 2 ** 31 - 1:
        buf, offs, row_lo, row_part, pbase, plo, ebase = rl.table
        wbuf, wbase = weights
        n, m = graph.num_vertices, graph.num_edges
        if buf.dtype.itemsize == 4 and m and wbase[0] >= 0:
            arrays = (offs[pbase[0]:pbase[0] + n + 1], buf[ebase[0]:ebase[0] + m],
                      wbuf[wbase[0]:wbase[0] + m])
    feed(arrays)


def handoff_prep_seconds(graph, opts):
    """None: the plan does not pick SSSP's hand-off; a forced hand-off point (the tests,
    tools/bench_auto_device.py's "handoff") still runs it. Measured on the H200 machine it lost
    to both whole runs (BENCHMARKS.md, "SSSP handed over in mid-run"):
    - loading its part from the dataset's files, at Kronecker scale 24: 10.3-11.6 s against
      7.0-7.2 s on either device. The load and the CPU's first pass read the same disk (the
      load took 6.7 s instead of 4.9), and the CPU had done little more than read when the GPU
      took over;
    - copying its part from the CPU's lists in RAM after that first pass (SSSPPart.from_ram):
      the part was ready 6.7-8.2 s in, the CPU (slowed by CuPy's start beside it, 8.0-9.4 s own
      against 5.7-6.2 alone) had nearly finished, and the run never moved: 10.2-11.7 s
      against 6.3-7.4 s. At scale 22 the same: 4.3-4.5 s against the CPU's 2.3-2.6 s.
    Until a hand-off is measured to pay, the whole runs decide."""
    return None


def _cpu_rest(graph, done, secs, ram) -> float:
    """The CPU's estimate for the rest of its run: the relaxations still due (RELAX_PER_EDGE x
    the edges when it walks in RAM, RELAX_PER_EDGE_DISK from the disks; less the `done` ones) at
    the rate of its supersteps so far (`secs` for them). (With the RAM walk's count for a run from
    the disks, a probe on the H200 machine estimated 0 s left with supersteps of over a second
    still to come.)"""
    if done <= 0 or secs <= 0:
        return float("inf")
    per = RELAX_PER_EDGE if ram else RELAX_PER_EDGE_DISK
    return max(per * graph.num_edges - done, 0.0) * secs / done


def run(graph, *, device="cpu", in_memory=False, src=None, delta=None, gpu_mem=None,
        gpu_tier=None, handoff_at=None, **runtime) -> SSSPResult:
    """Delta-stepping on the CPU path. device="auto" (dispatch's "hybrid"): the CPU runs while a
    thread loads the dataset into GPU memory; after each superstep, once it is there, the GPU
    takes the rest from the distances so far when its estimate is below the CPU's
    (gpu/handoff.py): every distance below the lowest bucket still held is final then.
    handoff_at: move after that CPU superstep, waiting there for the load (tests). gpu_tier:
    the GPU's part is resident either way."""
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    asked = delta
    src, delta = check(graph, src, delta)
    t0 = time.perf_counter()
    ho, note = _handoff(graph, gpu_mem, handoff_at) if device == "auto" else (None, "")
    try:
        return _run(graph, in_memory, src, delta, asked, runtime, progress, ho, note, t0)
    finally:
        if ho is not None:
            ho.finish()


def _run(graph, in_memory, src, delta, asked, runtime, progress, ho, note, t0) -> SSSPResult:
    n = graph.num_vertices
    from ..iterator.edgemap import EdgeMap
    from ..iterator.memory import track, track_bytes
    from ..iterator.queue import NextQueue
    ints = int_distances(graph)
    if ints:
        dist = np.full(n, UNREACHED32)
        keys = dist.view(np.uint32)              # lowered by "umin" on the values themselves
    else:
        dist = np.full(n, np.inf)
        keys = dist.view(np.int64)               # lowered by "min" on the floats' bits
    dist[src] = 0
    inq = np.zeros(n, dtype=np.uint8)
    neg = np.zeros(1, dtype=np.uint8)
    steps = []
    buckets = set()
    bins = Bins(n)
    with EdgeMap(graph, weights=True, in_memory=in_memory, **runtime) as em:
        hit = np.zeros(n, dtype=np.uint8)
        q = NextQueue(n, em.threads)
        track("distances", dist)
        track("flags (active, hit)", inq, hit)
        track("hit queue", q.ids)
        state = (inq, dist, keys, hit, q.ids, q.tail, q.cur, neg)
        # in memory, the frontier's lists are walked directly (no plan, no extents: a superstep
        # costs its own edges, which is what makes small buckets pay); a read-through cache with
        # room for every list gets them all in one pass first (read at the disks' full speed,
        # in large extents) and then serves the same walk
        rl = RamLists.of(em, "out")
        it = em.its.get("out") if em.local else None
        if (rl is None and it is not None and getattr(it, "cached", None) is not None
                and it.cached.all() and it.cache_partial is None):
            st = em.dense((), LOAD, "out", again=True)
            rl = RamLists.of(em, "out", held=True)
            st = dict(st)
            st.update(phase="load", bucket=-1, relaxed=0, bins_held=0)
            if ho is not None:
                ho.mark(st)
            steps.append(st)
            if progress is not None:
                progress(st)
        weights = None
        if rl is not None:
            weights = em.its["out"].ram_weights()
            if asked is None:
                delta = ram_delta(graph)
        if ho is not None:
            _feed(ho, graph, rl, weights)
        bins.add(np.array([src], dtype=np.int64), np.array([np.floor(0.0 / delta)]))
        like = np.empty(0, bins.dtype)
        relaxed = [0, 0.0]          # (edges relaxed, their supersteps' seconds): _cpu_rest
        while True:
            got = bins.pop()
            if got is None:
                break
            b, ids = got
            m = _take(ids, dist, inq, float(delta), b)
            if m == 0:                           # every entry went stale
                continue
            frontier = ids[:m]
            if m >= SORT_FROM:
                frontier.sort()
            buckets.add(b)
            st = (_ram_step(rl, weights, frontier, state) if rl is not None else
                  em.edge_map(state, frontier, push=RELAX))
            nq = q.close()
            if neg[0]:
                raise GrapheneError(f"{graph.name}: negative edge weight found; delta-stepping "
                                    f"needs weights >= 0")
            grouped, vs, ks, cs = _settle(frontier, inq, dist, hit, q.ids, nq, float(delta), like)
            if grouped:
                bins.add_grouped(vs, ks, cs)
            else:
                bins.add(q.ids[:nq], ks)
            st = dict(st)
            st.update(bucket=int(b) if b < 2**62 else float(b), relaxed=int(m),
                      bins_held=bins.held)
            move = False
            if ho is not None:
                ho.mark(st)
                # between supersteps every distance below the lowest bucket still held is
                # final: the GPU may go on from there (none held: the run is over)
                if bins.keys:
                    relaxed[0] += int(st.get("active_edges", 0))
                    relaxed[1] += float(st.get("seconds", 0.0))
                    move = ho.after(st, ho.cpu_steps, 0.0, cpu_s=_cpu_rest(
                        graph, relaxed[0], relaxed[1], st.get("walk") == "ram"))
            steps.append(st)
            if progress is not None:
                progress(st)
            if move:
                lo = bins.keys[0] * float(delta)
                break
        track_bytes("bucket bins (at the most)", bins.most * np.dtype(bins.dtype).itemsize)
    if ints:
        dist = np.where(dist == UNREACHED32, np.inf, dist)
    extra = {"device_note": note} if note else {}
    n_buckets = len(buckets)
    if ho is not None and ho.moved:
        from ..gpu.resident import gpu_steps
        gst: dict = {}
        dist = np.asarray(ho.load.value.run(dist, lo, default_delta(graph), gst))
        gsteps = gpu_steps(gst, progress)
        steps.extend(gsteps)
        n_buckets += int(gst.get("buckets", 0))
        extra.update(ho.summary(len(gsteps)), device="cpu+gpu")
    elif ho is not None:
        extra.update(ho.summary(0), device="cpu")
    stages = getattr(getattr(ho, "load", None), "stages", None)
    if stages:
        extra["gpu_part_stages"] = dict(stages)
    return SSSPResult(dist=dist, src=src, delta=float(delta),
                      n_reached=int(np.count_nonzero(np.isfinite(dist))), buckets=n_buckets,
                      supersteps=steps, seconds=time.perf_counter() - t0, **extra)


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
    click.Option(["--delta"], type=real_range(0.0, min_open=True), default=None,
                 help="Bucket width of delta-stepping (> 0) (default: the dataset's largest edge "
                      "weight, at most twice its mean; 256 on datasets partitioned before "
                      "weights were recorded)."),
]
