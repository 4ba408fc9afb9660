"""Small graphs: the whole graph in RAM, numpy only (no numba, no IO engine).

A fresh `graphene run` on a graph of a few thousand edges spent most of its second importing numba
and loading cached kernels (0.3-0.9 s) for work that takes milliseconds. Graphs of at most
`limit()` stored edges (GRAPHENE_SMALL_EDGES, default SMALL_EDGES) therefore run here instead, when
the run is on this machine's CPU: the out-edge lists are read whole (each file's CRC32 and every
neighbour ID checked, as `--in-memory` does) into a CSR during setup, and the algorithm runs as a
few vectorized numpy passes per level or iteration. The results are the same arrays, in the same
Result classes, as the engine's: BFS depths (any valid parents), WCC labels (the smallest ID of
each component), SpMV's y, k-core numbers and membership, PageRank within its tolerance (both
variants run GAPBS's pull iteration here, and say so: `variant` "pull"), SSSP's distances (the
same delta-stepping buckets), MS-BFS/APSP's depths and closeness (while edges x sources is
small too: PAIRS_PER_EDGE_LIMIT), betweenness (Brandes per source, the same rescaling).

GRAPHENE_SMALL_EDGES=0 turns this path off (the test suite does, so its small graphs exercise the
engine; tests/test_small.py runs both paths and compares them).
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..errors import GrapheneError

#: default largest graph (stored edges, out-lists) run here. Fresh processes, this project's 2-vCPU
#: machine (BENCHMARKS.md, "Small graphs without numba"): numpy was 2-3x faster than the engine
#: with numba's import at 0.2 M and 1.8 M edges on every algorithm here, and slower at 7.6 M
#: (reading and building the CSR dominates). Memory: about 16 bytes per edge plus temporaries.
SMALL_EDGES = 1 << 21
#: the algorithms with a whole-graph numpy path (registry names)
ALGORITHMS = ("bfs", "wcc", "spmv", "pagerank", "pagerank-pull", "kcore", "sssp", "msbfs", "apsp",
              "bc")
#: multi-source BFS (and betweenness) runs here while edges x sources stays within this many times
#: limit(): its levels move (source, vertex) pairs, so its work grows with the sources (the
#: engine's bit-parallel kernels take 64 sources per word; betweenness is one BFS per source there
#: too). Measured (BENCHMARKS.md, "Small graphs without
#: numba"): 32 sources on 0.2 M edges (6.5 M pairs) took 0.58 s of numpy against the engine's
#: 0.05 s plus its start, and 209 MiB against 160: 2 keeps it to about half of that.
PAIRS_PER_EDGE_LIMIT = 2


def limit() -> int:
    v = os.environ.get("GRAPHENE_SMALL_EDGES")
    if v is None or v.strip() == "":
        return SMALL_EDGES
    try:
        return max(0, int(v))
    except ValueError:
        raise GrapheneError(f"GRAPHENE_SMALL_EDGES={v!r} is not a number of edges") from None


def eligible(name: str, graph, where: str = "cpu", opts: dict = None) -> bool:
    """Whether `name` on `graph` with options `opts` runs here: the CPU of this machine, a graph of
    at most limit() edges, an algorithm with a numpy path (multi-source BFS: edges x sources within
    PAIRS_PER_EDGE_LIMIT x limit())."""
    if where != "cpu" or name not in ALGORITHMS or getattr(graph, "cluster", None) is not None:
        return False
    cap = limit()
    if cap <= 0 or graph.num_edges > cap:
        return False
    if name in ("msbfs", "apsp", "bc"):
        opts = opts or {}
        srcs = opts.get("sources")
        if srcs is not None:
            k = len(str(srcs).split(",")) if isinstance(srcs, str) else len(srcs)
        elif name == "bc":          # k sampled sources; every vertex when k is None or exact
            k = graph.num_vertices if opts.get("exact") or opts.get("k") is None else \
                min(int(opts["k"]), graph.num_vertices)
        else:
            from .msbfs.result import DEFAULT_SOURCES
            k = int(opts.get("num_sources") or DEFAULT_SOURCES)
        return graph.num_edges * max(1, k) <= cap * PAIRS_PER_EDGE_LIMIT
    return True


class CSR:
    """The out-edge lists of a dataset: indptr int64[n+1], indices int64[m], sorted by (source,
    neighbour), and `src` int64[m] (each edge's source)."""

    def __init__(self, indptr, indices, weights=None):
        self.indptr = indptr
        self.indices = indices
        self.weights = weights
        self.n = len(indptr) - 1
        self.deg = np.diff(indptr)
        self.src = np.repeat(np.arange(self.n, dtype=np.int64), self.deg)

    def edges_of(self, vs):
        """(position in vs of each edge's source, the edge's index) of the out-lists of vs."""
        starts = self.indptr[vs]
        lens = self.indptr[vs + 1] - starts
        total = int(lens.sum())
        if total == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(vs), dtype=np.int64), lens)
        first = np.cumsum(lens) - lens
        return owner, np.repeat(starts - first, lens) + np.arange(total, dtype=np.int64)

    def gather(self, vs):
        """(position in vs of each edge's source, neighbour) of the out-lists of vertices vs."""
        owner, idx = self.edges_of(vs)
        return owner, self.indices[idx]

    def symmetric(self) -> "CSR":
        """Every edge in both directions (an undirected dataset's lists already are)."""
        s = np.concatenate([self.src, self.indices])
        d = np.concatenate([self.indices, self.src])
        order = np.lexsort((d, s))
        indptr = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(np.bincount(s, minlength=self.n), out=indptr[1:])
        return CSR(indptr, d[order])


def load(graph) -> tuple:
    """(CSR of the out-lists, bytes read), read once per Graph object and kept on it."""
    got = getattr(graph, "_small_csr", None)
    if got is not None:
        return got
    n = graph.num_vertices
    parts = sorted(graph.parts("out"), key=lambda p: (p.row, p.col))
    deg = np.zeros(n, dtype=np.int64)
    offs = []
    nbytes = 0
    for p in parts:
        off = p.offsets().astype(np.int64)         # checked: CRC32, monotone, the edge count
        offs.append(off)
        deg[p.row_lo:p.row_hi] += np.diff(off)
        nbytes += off.nbytes
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    weights = np.empty(len(indices), dtype=np.float32) if graph.weighted else None
    fill = indptr[:-1].copy()
    # a row's partitions hold disjoint, increasing column ranges: appending them in column order
    # keeps every list sorted
    for p, off in zip(parts, offs):
        if p.num_edges == 0:
            continue
        lens = np.diff(off)
        pos = (np.repeat(fill[p.row_lo:p.row_hi] - off[:-1], lens)
               + np.arange(p.num_edges, dtype=np.int64))
        adj = p.adjacency()                        # checked: CRC32, IDs in the column range
        indices[pos] = adj
        nbytes += adj.nbytes
        if weights is not None:
            w = p.weights()
            weights[pos] = w
            nbytes += w.nbytes
        fill[p.row_lo:p.row_hi] += lens
    got = (CSR(indptr, indices, weights), nbytes)
    graph._small_csr = got
    return got


def _step(steps, progress, t, **st):
    st.update(seconds=time.perf_counter() - t, mode="memory", device="cpu")
    steps.append(st)
    if progress is not None:
        progress(st)


def run(name: str, graph, mod, *, progress=None, **opts):
    """Run registry algorithm `name` (its module `mod`, whose Result class it returns: this module
    imports no algorithm module) on the whole graph in RAM."""
    from ..iterator.memory import track
    csr, _ = load(graph)
    track("partitions in RAM (a small graph's lists)", csr.indptr, csr.indices, csr.src,
          *([csr.weights] if csr.weights is not None else []))
    t0 = time.perf_counter()
    fn = {"bfs": _bfs, "wcc": _wcc, "spmv": _spmv, "pagerank": _pagerank,
          "pagerank-pull": _pagerank, "kcore": _kcore, "sssp": _sssp, "msbfs": _msbfs,
          "apsp": _msbfs, "bc": _bc}[name]
    res = fn(graph, csr, mod, progress, t0, **opts)
    res.small = True
    return res


# -- BFS -------------------------------------------------------------------------------------------
def _levels(csr, src, steps=None, progress=None, parent=None):
    """BFS depths (int32, -1 unreached) from src, top-down by whole levels; parents (the first
    edge that found each vertex) into `parent` when given."""
    n = csr.n
    depth = np.full(n, -1, dtype=np.int32)
    depth[src] = 0
    if parent is not None:
        parent[src] = src
    front = np.array([src], dtype=np.int64)
    level = 0
    while front.size:
        t = time.perf_counter()
        owner, nb = csr.gather(front)
        new = depth[nb] < 0
        nb, owner = nb[new], owner[new]
        nxt, first = np.unique(nb, return_index=True)
        depth[nxt] = level + 1
        if parent is not None:
            parent[nxt] = front[owner[first]]
        if steps is not None:
            _step(steps, progress, t, frontier=int(front.size), active_edges=int(new.size),
                  level=level, found=int(nxt.size))
        front = nxt
        level += 1
    return depth


def _bfs(graph, csr, mod, progress, t0, src=None, **_ignored):
    from .common import vertex_dtype
    n = graph.num_vertices
    src = mod.source(graph, src)
    parent = np.full(n, -1, dtype=vertex_dtype(n))
    steps = []
    depth = _levels(csr, src, steps, progress, parent)
    return mod.BFSResult(parent=parent, depth=depth, n_reached=int(np.count_nonzero(depth >= 0)),
                     src=src, levels=int(depth.max()) + 1, supersteps=steps, setup_seconds=0.0,
                     seconds=time.perf_counter() - t0)


# -- WCC ---------------------------------------------------------------------------------------------
def _wcc(graph, csr, mod, progress, t0, **_ignored):
    """Labels: the smallest vertex ID of each weak component (hook every edge's two labels onto
    their minimum, then compress to roots, until no label moves); `bfs_reached` as the engine's
    first phase counts it (the max-degree vertex's BFS: along out-edges only on a directed dataset
    without in-edge partitions)."""
    from .common import vertex_dtype
    n = graph.num_vertices
    steps = []
    label = np.arange(n, dtype=np.int64)
    if graph.num_edges == 0 or n == 0:
        return mod.WCCResult(labels=label.astype(vertex_dtype(n)), n_components=n,
                         bfs_reached=min(n, 1), supersteps=steps, seconds=time.perf_counter() - t0)
    u, v = csr.src, csr.indices
    step = 0
    while True:
        t = time.perf_counter()
        before = label.copy()
        lu, lv = label[u], label[v]
        m = np.minimum(lu, lv)
        np.minimum.at(label, lu, m)
        np.minimum.at(label, lv, m)
        while True:
            up = label[label]
            if np.array_equal(up, label):
                break
            label = up
        changed = int(np.count_nonzero(label != before))
        _step(steps, progress, t, frontier=n, active_edges=int(len(u)), phase="lp", step=step,
              changed=changed)
        step += 1
        if not changed:
            break
    has_in = graph.directed and graph.in_partitions is not None
    deg = csr.deg + (np.bincount(v, minlength=n) if has_in else 0)
    root = int(np.argmax(deg))
    if graph.directed and not has_in:
        reached = int(np.count_nonzero(_levels(csr, root) >= 0))
    else:
        reached = int(np.count_nonzero(label == label[root]))
    return mod.WCCResult(labels=label.astype(vertex_dtype(n)),
                     n_components=int(np.count_nonzero(label == np.arange(n))),
                     bfs_reached=reached, supersteps=steps, seconds=time.perf_counter() - t0)


# -- SpMV --------------------------------------------------------------------------------------------
def _spmv(graph, csr, mod, progress, t0, x="ones", **_ignored):
    n = graph.num_vertices
    xv = mod.make_x(n, x)
    steps = []
    if n == 0 or graph.num_edges == 0:
        return mod.SpMVResult(y=np.zeros(n), x=xv, supersteps=steps, seconds=time.perf_counter() - t0)
    t = time.perf_counter()
    vals = xv[csr.indices]
    if csr.weights is not None:
        vals = vals * csr.weights
    y = np.bincount(csr.src, weights=vals, minlength=n)
    _step(steps, progress, t, frontier=n, active_edges=int(len(vals)))
    return mod.SpMVResult(y=y, x=xv, supersteps=steps, seconds=time.perf_counter() - t0)


# -- PageRank ----------------------------------------------------------------------------------------
def _pagerank(graph, csr, mod, progress, t0, variant="delta", alpha=None, tolerance=None,
              max_iter=None, **_ignored):
    """GAPBS's pull iteration (Jacobi; dangling mass spread over all vertices) for both variants,
    with the engine's stop rule: the L1 change of an iteration below `tolerance`, or max_iter."""
    from .. import config
    alpha = config.PR_ALPHA if alpha is None else float(alpha)
    tolerance = config.PR_TOLERANCE if tolerance is None else float(tolerance)
    max_iter = config.PR_MAX_ITERS if max_iter is None else int(max_iter)
    mod.check(variant, alpha, max_iter)
    n = graph.num_vertices
    steps = []
    if n == 0:
        return mod.PageRankResult(scores=np.zeros(0), iterations=0, error=0.0, variant="pull",
                              converged=True, tolerance=tolerance, supersteps=steps,
                              seconds=time.perf_counter() - t0)
    outdeg = csr.deg.astype(np.float64)
    dangling = csr.deg == 0
    inv = np.divide(1.0, outdeg, out=np.zeros(n), where=~dangling)
    p = np.full(n, 1.0 / n)
    err, it = 0.0, 0
    while it < max_iter:
        t = time.perf_counter()
        sums = np.bincount(csr.indices, weights=(p * inv)[csr.src], minlength=n)
        new = (1.0 - alpha) / n + alpha * (sums + p[dangling].sum() / n)
        err = float(np.abs(new - p).sum())
        p = new
        it += 1
        _step(steps, progress, t, frontier=n, active_edges=int(len(csr.indices)), error=err)
        if err < tolerance:
            break
    return mod.PageRankResult(scores=p, iterations=it, error=err, variant="pull",
                          converged=bool(err < tolerance or err == 0), tolerance=tolerance,
                          supersteps=steps, seconds=time.perf_counter() - t0)


# -- k-core ------------------------------------------------------------------------------------------
def _kcore(graph, csr, mod, progress, t0, k=None, membership_only=False, **_ignored):
    """Peeling by levels: at level k every alive vertex of degree <= k goes (core number k), and
    the vertices its removal takes to <= k follow in the same level. Degree = in + out on a
    directed dataset (every edge in both directions), the list length on an undirected one."""
    from .common import vertex_dtype
    if k is not None and int(k) < 0:
        raise GrapheneError(f"k must be >= 0 (got {k})")
    if membership_only and k is None:
        raise GrapheneError("membership_only needs k (which core to compute: --k K)")
    n = graph.num_vertices
    adj = csr.symmetric() if graph.directed else csr
    deg = adj.deg.copy()
    alive = np.ones(n, dtype=bool)
    core = np.zeros(n, dtype=vertex_dtype(n))
    steps = []
    rounds = 0
    level = 0 if not membership_only else int(k) - 1        # membership: peel degree < K only
    left = n
    while left:
        cand = np.flatnonzero(alive & (deg <= level))
        if cand.size == 0:
            if membership_only:
                break
            level = int(deg[alive].min())
            continue
        while cand.size:
            t = time.perf_counter()
            core[cand] = max(level, 0)
            alive[cand] = False
            left -= cand.size
            _, nb = adj.gather(cand)
            nb = nb[alive[nb]]
            np.subtract.at(deg, nb, 1)
            _step(steps, progress, t, frontier=int(cand.size), active_edges=int(nb.size),
                  k=max(level, 0), removing=int(cand.size))
            rounds += 1
            cand = np.unique(nb[deg[nb] <= level])
    if membership_only:
        return mod.KCoreResult(core_number=None, max_core=None, k=int(k), in_k_core=alive,
                           k_core_size=int(np.count_nonzero(alive)), membership_only=True,
                           rounds=rounds, kept_lists=0, supersteps=steps,
                           seconds=time.perf_counter() - t0)
    return mod._result(core, k, rounds, steps, t0, kept_lists=0)


# -- SSSP ----------------------------------------------------------------------------------------------
def _sssp(graph, csr, mod, progress, t0, src=None, delta=None, **_ignored):
    """Delta-stepping as the engine runs it: each step relaxes every out-edge of the pending
    vertices of the lowest non-empty bucket [b*delta, (b+1)*delta); the vertices whose distance
    dropped are pending again (label-correcting: exact for any delta)."""
    src, delta = mod.check(graph, src, delta)
    n = graph.num_vertices
    dist = np.full(n, np.inf)
    dist[src] = 0.0
    pending = np.zeros(n, dtype=bool)
    pending[src] = True
    steps = []
    buckets = set()
    while True:
        pend = np.flatnonzero(pending)
        if pend.size == 0:
            break
        t = time.perf_counter()
        # buckets as the engine's bins number them (floor(d / delta), sssp.Bins): comparing d
        # with (b + 1) * delta instead can take nobody (d = 1.0, delta = 0.1: 1.0 // 0.1 = 9,
        # yet 10 * 0.1 is not above 1.0) and loop forever
        key = np.floor(dist[pend] / delta)
        b = key.min()
        front = pend[key == b]
        pending[front] = False
        buckets.add(b)
        owner, idx = csr.edges_of(front)
        nb, w = csr.indices[idx], csr.weights[idx].astype(np.float64)
        if w.size and w.min() < 0.0:
            raise GrapheneError(f"{graph.name}: negative edge weight found; delta-stepping "
                                f"needs weights >= 0")
        cand = dist[front][owner] + w
        better = cand < dist[nb]
        nb, cand = nb[better], cand[better]
        np.minimum.at(dist, nb, cand)
        pending[nb] = True
        _step(steps, progress, t, frontier=int(front.size), active_edges=int(w.size),
              bucket=int(b) if b < 2**62 else float(b), relaxed=int(front.size))
    return mod.SSSPResult(dist=dist, src=src, delta=delta,
                          n_reached=int(np.count_nonzero(np.isfinite(dist))), buckets=len(buckets),
                          supersteps=steps, seconds=time.perf_counter() - t0)


# -- MS-BFS / APSP -------------------------------------------------------------------------------------
def _msbfs(graph, csr, mod, progress, t0, sources=None, num_sources=None, closeness=False,
           output=None, **_ignored):
    """Every source's BFS at once, level by level over (source, vertex) pairs: depths[k, v] for
    source k (int32, -1 unreached), as the engine's bit-parallel levels give them."""
    n = graph.num_vertices
    src = mod._sources(graph, sources, num_sources or mod.DEFAULT_SOURCES) if n else \
        np.zeros(0, dtype=np.int64)
    if len(src) and (src.min() < 0 or src.max() >= n):
        raise GrapheneError(f"source vertex out of range 0..{n - 1}: "
                            f"{int(src[(src < 0) | (src >= n)][0])}")
    S = len(src)
    depths = np.full((S, n), -1, dtype=np.int32)
    steps = []
    fk = np.arange(S, dtype=np.int64)
    fv = src.astype(np.int64)
    depths[fk, fv] = 0
    level = 0
    while fv.size:
        t = time.perf_counter()
        pairs = int(fv.size)            # (source, vertex) pairs in this level
        owner, nb = csr.gather(fv)
        kk = fk[owner]
        new = depths[kk, nb] < 0
        key = np.unique(kk[new] * n + nb[new])
        fk, fv = key // n, key % n
        depths[fk, fv] = level + 1
        _step(steps, progress, t, frontier=pairs, active_edges=int(nb.size), level=level,
              discovered=int(key.size), direction="top-down")
        level += 1
    reached = (depths >= 0).sum(axis=1).astype(np.int64)
    sums = np.where(depths > 0, depths, 0).sum(axis=1).astype(np.float64)
    clo = mod.closeness_of(reached, sums, n) if closeness else None
    if output is not None:
        np.save(output, depths)
    return mod.MSBFSResult(sources=src, depths=depths, reached=reached, closeness=clo, passes=1,
                           supersteps=steps, seconds=time.perf_counter() - t0)


# -- betweenness -------------------------------------------------------------------------------------
def _bc(graph, csr, mod, progress, t0, k=None, sources=None, seed=None, normalized=True,
        endpoints=False, exact=False, **_ignored):
    """Brandes per source as the engine runs it: forward levels counting shortest paths (sigma),
    then dependencies (delta) from the deepest level up, summed into bc and rescaled as NetworkX
    does."""
    n = graph.num_vertices
    if exact:
        k = None
    src = [int(x) for x in (mod.pick_sources(n, k, seed) if sources is None else sources)]
    if any(not 0 <= x < n for x in src):
        raise GrapheneError(f"source vertex out of range 0..{n - 1}")
    bc = np.zeros(n)
    steps = []
    for s in src:
        depth = np.full(n, -1, dtype=np.int64)
        sigma = np.zeros(n)
        depth[s], sigma[s] = 0, 1.0
        levels = [np.array([s], dtype=np.int64)]
        while True:
            t = time.perf_counter()
            front, lv = levels[-1], len(levels) - 1
            owner, nb = csr.gather(front)
            nxt = np.unique(nb[depth[nb] < 0])
            depth[nxt] = lv + 1
            on = depth[nb] == lv + 1           # edges to the next level: shortest paths
            np.add.at(sigma, nb[on], sigma[front[owner[on]]])
            _step(steps, progress, t, frontier=int(front.size), active_edges=int(nb.size),
                  source=s, level=lv, phase="forward", found=int(nxt.size))
            if nxt.size == 0:
                break
            levels.append(nxt)
        delta = np.zeros(n)
        for lv in range(len(levels) - 2, -1, -1):   # the deepest level has no successors
            t = time.perf_counter()
            front = levels[lv]
            owner, nb = csr.gather(front)
            on = depth[nb] == lv + 1
            v, w = front[owner[on]], nb[on]
            np.add.at(delta, v, sigma[v] / sigma[w] * (1.0 + delta[w]))
            _step(steps, progress, t, frontier=int(front.size), active_edges=int(nb.size),
                  source=s, level=lv, phase="backward")
        reached = np.concatenate(levels)
        rest = reached[reached != s]
        bc[rest] += delta[rest] + (1.0 if endpoints else 0.0)
        if endpoints:
            bc[s] += len(reached) - 1
    sampled = None if len(src) == n else src
    bc = mod.rescale(bc, n, normalized, graph.directed, endpoints, sampled)
    return mod.BCResult(bc=bc, sources=np.asarray(src, dtype=np.int64),
                        normalized=bool(normalized), endpoints=bool(endpoints), supersteps=steps,
                        seconds=time.perf_counter() - t0)
