"""The algorithms other than BFS (PageRank delta + pull, WCC, k-core, MS-BFS, SpMV, SSSP) against the
naive references of tests/naive.py and against scipy / NetworkX, on every graph of tests/graphs.py.

Two iterators run the same algorithm code:
- the real IoIterator (SSD path with the pread and uring engines, and in_memory=True), on datasets of
  1x1, 2x2 and 3x2 partitions;
- `ChunkingIterator`, an adversarial stand-in: every adjacency list is cut into random pieces at
  random points, pieces of all vertices are shuffled together and given random thread ids. Kernels
  must give exact results under any chunking / thread assignment, which this checks independently
  of the real iterator's scheduling.
Datasets: "in" = directed, weighted, with in-edge partitions; "out" = directed, unweighted, no
in-edges (the fallback paths); "sym" = symmetrized (undirected), weighted.
"""
from __future__ import annotations

import contextlib
import os

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as csg
from numba import njit

from graphene_py.algos import kcore, msbfs, pagerank, spmv, sssp, wcc
from graphene_py.errors import GrapheneError
from graphene_py.partition import partition_arrays

from . import graphs, naive

ALPHA = 0.85


# ---------------------------------------------------------------------------------------------
# the adversarial stand-in iterator
class FakeFrontier:
    def __init__(self, kind, ids, n):
        self.kind, self.ids, self.n = kind, ids, n

    @classmethod
    def from_queue(cls, ids, n):
        return cls("queue", np.asarray(ids, dtype=np.int64), n)

    @classmethod
    def from_mask(cls, mask, again=False):
        mask = np.asarray(mask)
        return cls("mask", np.flatnonzero(mask).astype(np.int64), len(mask))

    @classmethod
    def all(cls, n, again=False):
        return cls("all", None, n)


@njit
def _drive(is_active, compute, state, indices, w, pv, plo, phi, ptid):
    for i in range(pv.shape[0]):
        v = pv[i]
        if is_active(v, state):
            compute(v, indices[plo[i]:phi[i]], w[plo[i]:phi[i]], ptid[i], state)


class ChunkingIterator:
    def __init__(self, graph, direction="out", *, in_memory=False, weights=False, threads=3,
                 seed=0, **_ignored):
        self.indptr, self.indices, w = graph.to_csr(direction)
        self.indices = self.indices.astype(np.uint32) if graph.num_vertices < 2**32 else self.indices
        self.w = w if (weights and w is not None) else np.zeros(0, dtype=np.float32)
        if weights and len(self.w) == 0:
            self.w = np.zeros(len(self.indices), dtype=np.float32)
        self.threads = threads
        self.rng = np.random.default_rng(seed)

    def run(self, is_active, compute, state, frontier, keep=None, ahead=None):
        deg = np.diff(self.indptr)
        vs = np.flatnonzero(deg > 0) if frontier.kind == "all" else np.unique(frontier.ids)
        vs = vs[deg[vs] > 0]
        lo, hi = self.indptr[vs], self.indptr[vs + 1]
        cuts = [lo]
        for _ in range(3):       # up to 3 random cut points inside each list of >= 2 edges
            pick = (hi - lo > 1) & (self.rng.random(len(vs)) < 0.5)
            r = self.rng.random(len(vs))
            cuts.append((lo + 1 + (r * (hi - lo - 1)).astype(np.int64))[pick])
        starts = np.unique(np.concatenate(cuts)) if len(vs) else np.zeros(0, np.int64)
        pv = np.searchsorted(self.indptr, starts, side="right") - 1
        ends = np.minimum(np.append(starts[1:], np.iinfo(np.int64).max), self.indptr[pv + 1])
        order = self.rng.permutation(len(starts))
        pv, plo, phi = pv[order].astype(np.int64), starts[order], ends[order]
        ptid = self.rng.integers(0, self.threads, size=len(pv)).astype(np.int64)
        if len(pv):
            _drive(is_active, compute, state, self.indices, self.w, pv, plo, phi, ptid)
        return {"frontier": len(vs), "mode": frontier.kind}

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.fixture
def fake_iterator(monkeypatch):
    import graphene_py.iterator as itmod
    monkeypatch.setattr(itmod, "IoIterator", ChunkingIterator, raising=False)
    monkeypatch.setattr(itmod, "Frontier", FakeFrontier, raising=False)


# ---------------------------------------------------------------------------------------------
# datasets and references (built once per module)
KINDS = ("in", "out", "sym")


class Case:
    def __init__(self, tg, kind):
        self.tg, self.kind = tg, kind
        self.n = tg.n
        sym = kind == "sym"
        weighted = kind != "out"
        self.src, self.dst, w = naive.clean_edges(tg.src, tg.dst, tg.weights, symmetrize=sym)
        self.w = w if weighted else None
        self.weighted = weighted
        self.sym = sym
        self._ref = {}

    def ref(self, key, fn):
        if key not in self._ref:
            self._ref[key] = fn()
        return self._ref[key]


_DATASETS = {}


def dataset(tmp_root, case, grid=(2, 2)):
    key = (case.tg.name, case.kind, grid)
    if key not in _DATASETS:
        tg = case.tg
        R, C = grid
        disks = [os.path.join(tmp_root, f"d{i}") for i in range(R * C if R * C <= 4 else 2)]
        for d in disks:
            os.makedirs(d, exist_ok=True)
        name = f"{tg.name}_{case.kind}_{R}x{C}"
        _DATASETS[key] = partition_arrays(
            tg.src, tg.dst, weights=tg.weights if case.weighted else None, num_vertices=tg.n,
            disks=disks, name=name, rows=R, cols=C, symmetrize=case.sym,
            in_edges=(case.kind == "in"), force=True, register=False)
    return _DATASETS[key]


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("algos_data"))


_CASES = {}


def case_of(gname, kind):
    if (gname, kind) not in _CASES:
        tg = graphs.by_name(gname)
        if gname == "chain" and kind == "out":
            # the out-only fallbacks of WCC and k-core stream the whole graph once per round, and a
            # chain needs one round per vertex: a shorter chain keeps the same shape, less time
            tg = graphs.chain(300)
        _CASES[(gname, kind)] = Case(tg, kind)
    return _CASES[(gname, kind)]


GRAPH_NAMES = [f.__name__ for f in graphs.ALL]


# ---------------------------------------------------------------------------------------------
# checks shared by both iterators
def sources_for(c):
    if c.n == 0:
        return []
    deg = np.bincount(c.src, minlength=c.n)
    if c.tg.name == "chain":        # keep the level count (and the test time) bounded
        return [c.n - 40, c.n - 7, c.n - 1]
    nz = np.flatnonzero(deg > 0)
    pick = list(nz[:3]) + list(nz[-2:]) + [0, c.n - 1]
    return sorted(set(int(x) for x in pick))


def check_pagerank(g, c, run_kw, tight=True):
    ref = c.ref("pr", lambda: naive.pagerank(c.n, c.src, c.dst, ALPHA))
    for variant in ("delta", "pull"):
        # tight tolerance: both variants reach the fixed point
        r = pagerank.run(g, variant=variant, tolerance=1e-9 if tight else 1e-6, max_iter=500,
                         **run_kw)
        assert r.scores.shape == (c.n,)
        if c.n == 0:
            continue
        assert r.error < (1e-9 if tight else 1e-6)
        assert abs(r.scores.sum() - 1) < 1e-12
        assert np.abs(r.scores - ref).sum() <= ALPHA / (1 - ALPHA) * r.error * 1.001 + 1e-12
        # default GAPBS rule: stops early, and the fixed point is within alpha/(1-alpha)*error
        r = pagerank.run(g, variant=variant, **run_kw)
        assert r.iterations <= 20
        assert r.error < 1e-4 or r.iterations == 20
        assert np.abs(r.scores - ref).sum() <= ALPHA / (1 - ALPHA) * r.error * 1.001 + 1e-12
        assert pagerank.verify(g, r) == []


def check_wcc(g, c, run_kw):
    ref = c.ref("wcc", lambda: naive.wcc_labels(c.n, c.src, c.dst))
    r = wcc.run(g, **run_kw)
    assert np.array_equal(r.labels, ref)
    assert r.n_components == len(np.unique(ref))
    assert wcc.verify(g, r) == []


def check_kcore(g, c, run_kw):
    ref = c.ref("core", lambda: naive.core_numbers(c.n, c.src, c.dst, directed=not c.sym))
    # default: peel on the SSD path, finish in memory once the rest has <= n incidences;
    # tail_edges=0: peel to the end; huge: gather the whole graph at once
    for tail in (None, 0, 1 << 40):
        r = kcore.run(g, k=2, tail_edges=tail, **run_kw)
        assert np.array_equal(r.core_number, ref), tail
        assert np.array_equal(r.in_k_core, ref >= 2)
    assert kcore.verify(g, r) == []


def check_msbfs(g, c, run_kw):
    srcs = sources_for(c)
    ref = c.ref("ms", lambda: naive.msbfs_depths(c.n, c.src, c.dst, srcs))
    r = msbfs.run(g, sources=srcs, closeness=True, **run_kw)
    assert np.array_equal(r.depths, ref)
    for i in range(len(srcs)):
        assert r.closeness[i] == pytest.approx(naive.closeness(ref[i]), rel=1e-12, abs=0)
    assert msbfs.verify(g, r) == []


def check_spmv(g, c, run_kw):
    for x in ("ones", "random"):
        xv = spmv.make_x(c.n, x)
        ref = naive.spmv(c.n, c.src, c.dst, c.w, xv)
        r = spmv.run(g, x=x, **run_kw)
        if x == "ones":        # integer-valued sums: exact in any order
            assert np.array_equal(r.y, ref)
        else:
            np.testing.assert_allclose(r.y, ref, rtol=1e-12, atol=0)
        assert spmv.verify(g, r) == []


def check_sssp(g, c, run_kw):
    if not c.weighted:
        with pytest.raises(GrapheneError, match="weights"):
            sssp.run(g, src=0, **run_kw)
        return
    srcs = sources_for(c)
    # 0.7: bucket edges between the integer weights (entries go stale across many bins); None:
    # the default from the dataset's recorded weights
    for i, delta in enumerate([0.7, 1.0, 32.0, 1e9, None] if len(srcs) else []):
        s = srcs[-1 - i % len(srcs)]
        ref = c.ref(("dijkstra", s), lambda: naive.dijkstra(c.n, c.src, c.dst, c.w, s))
        r = sssp.run(g, src=s, delta=delta, **run_kw)
        assert np.array_equal(r.dist, ref), (s, delta)
        assert sssp.verify(g, r) == []
    if len(srcs):       # the weights are whole: distances in uint32; again in float64
        assert sssp.int_distances(g) == (len(c.w) > 0)     # no edges: no weights recorded
        s = srcs[0]
        ref = c.ref(("dijkstra", s), lambda: naive.dijkstra(c.n, c.src, c.dst, c.w, s))
        with _float_distances(g):
            r = sssp.run(g, src=s, delta=0.7, **run_kw)
        assert np.array_equal(r.dist, ref), s


@contextlib.contextmanager
def _float_distances(g):
    """g's SSSP runs with float64 distances (as for fractional weights) while inside."""
    st = g.stats
    g.stats = dict(st, weight_integral=False)
    try:
        assert not sssp.int_distances(g)
        yield
    finally:
        g.stats = st


CHECKS = {"pagerank": check_pagerank, "wcc": check_wcc, "kcore": check_kcore,
          "msbfs": check_msbfs, "spmv": check_spmv, "sssp": check_sssp}


# ---------------------------------------------------------------------------------------------
# 1. adversarial chunking (stand-in iterator), every algorithm x every graph x every dataset kind
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gname", GRAPH_NAMES)
@pytest.mark.parametrize("algo", sorted(CHECKS))
def test_chunked_vs_naive(algo, gname, kind, tmp_root, fake_iterator):
    c = case_of(gname, kind)
    g = dataset(tmp_root, c, (2, 2))
    if algo == "pagerank":     # the stand-in is slow per superstep: a looser tight tolerance
        check_pagerank(g, c, {}, tight=False)
    else:
        CHECKS[algo](g, c, {})


# ---------------------------------------------------------------------------------------------
# 2. the real IoIterator on the SSD path: every algorithm x every graph (uring engine, 2x2), and
#    every dataset kind (in-edges; the out-only fallbacks and undirected datasets with -m slow: the
#    stand-in above covers their code paths in the default run)
SSD = {"engine": "uring", "buffer_mb": 2, "threads": 2}


@pytest.mark.parametrize("kind", ["in", pytest.param("out", marks=pytest.mark.slow),
                                  pytest.param("sym", marks=pytest.mark.slow)])
@pytest.mark.parametrize("gname", GRAPH_NAMES)
@pytest.mark.parametrize("algo", sorted(CHECKS))
def test_ssd_vs_naive(algo, gname, kind, tmp_root):
    c = case_of(gname, kind)
    g = dataset(tmp_root, c, (2, 2))
    CHECKS[algo](g, c, SSD)


# SSSP walks its lists in RAM (algos/sssp.py _relax_ram): in memory, and from a read-through cache
# with room for every list (one pass reads them all in, then the same walk); a cache too small for
# them keeps the engine's supersteps. Every way gives Dijkstra's distances, at any delta.
@pytest.mark.parametrize("grid", [(1, 1), (3, 2)])
@pytest.mark.parametrize("gname", GRAPH_NAMES)
def test_sssp_walk_in_ram(gname, grid, tmp_root, monkeypatch):
    from graphene_py.iterator.memory import CacheBudget
    from graphene_py.iterator.session import drop_memory_cache
    if grid != (1, 1):     # buckets walked in ID order from 2 vertices on (large ones: always)
        monkeypatch.setattr(sssp, "SORT_FROM", 2)
    c = case_of(gname, "sym")
    g = dataset(tmp_root, c, grid)
    srcs = sources_for(c)
    if not len(srcs):
        return
    s = srcs[-1]
    ref = c.ref(("dijkstra", s), lambda: naive.dijkstra(c.n, c.src, c.dst, c.w, s))
    whole = 1 << 40
    ways = [("memory", {"in_memory": True}), ("cache", {"cache": CacheBudget(whole)}),
            ("small cache", {"cache": CacheBudget(512)})]
    if gname == "chain":      # its engine supersteps (one per level): test_ssd_vs_naive's
        ways = ways[:2]
    for how, kw in ways:
        drop_memory_cache()
        # (the chain's thousands of levels: one bucket each at 0.7, ~20 s; its default width
        # makes hundreds already)
        for delta in (None, 1e9) if gname == "chain" else (None, 0.7, 1e9):
            with _float_distances(g) if delta == 1e9 else contextlib.nullcontext():
                r = sssp.run(g, src=s, delta=delta, **SSD, **kw)
            assert np.array_equal(r.dist, ref), (how, delta)
            loads = [st for st in r.supersteps if st.get("phase") == "load"]
            assert len(loads) == (how == "cache" and g.num_edges > 0), how
            walked = how == "memory" or (how == "cache" and g.num_edges > 0)
            assert all((st.get("walk") == "ram") == walked
                       for st in r.supersteps if st.get("phase") != "load"), how
            if delta is None:
                assert r.delta == (sssp.ram_delta(g) if walked else sssp.default_delta(g))
    drop_memory_cache()


# 3. partition grids x engines (a hub spanning partitions, components, duplicates, isolated ends)
@pytest.mark.parametrize("engine", ["pread", "uring"])
@pytest.mark.parametrize("grid", [(1, 1), (3, 2)])
@pytest.mark.parametrize("gname", ["star", "disconnected", "duplicates", "isolated_ends", "powerlaw"])
@pytest.mark.parametrize("algo", sorted(CHECKS))
def test_grids_engines(algo, gname, grid, engine, tmp_root):
    c = case_of(gname, "in")
    g = dataset(tmp_root, c, grid)
    CHECKS[algo](g, c, {"engine": engine, "buffer_mb": 2, "threads": 2})


# 4. in_memory=True gives the same results as the SSD path (pull PageRank within rounding; delta
#    PageRank's Gauss-Seidel sweeps depend on the order chunks arrive in, so both results are
#    within alpha/(1-alpha) * error of the fixed point, hence of each other)
@pytest.mark.parametrize("gname", ["powerlaw", "star", "grid"])
def test_in_memory_equals_ssd(gname, tmp_root):
    c = case_of(gname, "in")
    g = dataset(tmp_root, c, (3, 2))
    runs = {}
    pr_err = []
    for mem in (False, True):
        kw = dict(SSD, in_memory=mem)
        srcs = sources_for(c)
        pr = pagerank.run(g, variant="delta", **kw)
        pr_err.append(pr.error)
        runs[mem] = {
            "pr": pr.scores,
            "prp": pagerank.run(g, variant="pull", **kw).scores,
            "wcc": wcc.run(g, **kw).labels,
            "core": kcore.run(g, **kw).core_number,
            "ms": msbfs.run(g, sources=srcs, **kw).depths,
            "y": spmv.run(g, **kw).y,
            "dist": sssp.run(g, src=srcs[0], **kw).dist,
        }
    for key in runs[False]:
        a, b = runs[False][key], runs[True][key]
        if key == "pr":
            assert np.abs(a - b).sum() <= ALPHA / (1 - ALPHA) * sum(pr_err) * 1.001 + 1e-12
        elif key == "prp":
            assert np.abs(a - b).sum() < 1e-12, key
        else:
            assert np.array_equal(a, b), key


# ---------------------------------------------------------------------------------------------
# 5. against scipy / NetworkX on the same stored edges
def _nx(c):
    G = nx.DiGraph() if not c.sym else nx.Graph()
    G.add_nodes_from(range(c.n))
    G.add_edges_from(zip(c.src.tolist(), c.dst.tolist()))
    return G


def _csr(c, weighted=False):
    data = c.w.astype(np.float64) if (weighted and c.w is not None) else np.ones(len(c.src))
    return sp.csr_matrix((data, (c.src, c.dst)), shape=(c.n, c.n))


@pytest.mark.parametrize("gname", ["powerlaw", "disconnected", "grid", "isolated_ends", "duplicates"])
def test_vs_networkx_scipy(gname, tmp_root):
    c = case_of(gname, "in")
    g = dataset(tmp_root, c, (2, 2))
    # PageRank: NetworkX's default also spreads dangling mass uniformly
    ref = np.array([v for _, v in sorted(nx.pagerank(_nx(c), alpha=ALPHA, tol=1e-13,
                                                     max_iter=1000).items())])
    for variant in ("delta", "pull"):
        r = pagerank.run(g, variant=variant, tolerance=1e-11, max_iter=500, **SSD)
        assert np.abs(r.scores - ref).sum() < 1e-8, variant
    # WCC: scipy weak components, relabelled to the minimum vertex ID
    ncomp, lab = csg.connected_components(_csr(c), directed=True, connection="weak")
    mins = np.full(ncomp, c.n)
    np.minimum.at(mins, lab, np.arange(c.n))
    r = wcc.run(g, **SSD)
    assert np.array_equal(r.labels, mins[lab]) and r.n_components == ncomp
    # k-core: NetworkX core_number (in + out degree on a DiGraph)
    core = nx.core_number(_nx(c))
    r = kcore.run(g, **SSD)
    assert np.array_equal(r.core_number, np.array([core[v] for v in range(c.n)]))
    # MS-BFS: unweighted scipy shortest paths; closeness: NetworkX on the reversed graph
    srcs = sources_for(c)
    d = csg.shortest_path(_csr(c), method="D", unweighted=True, indices=srcs)
    d = np.where(np.isinf(d), -1, d).astype(np.int32)
    r = msbfs.run(g, sources=srcs, closeness=True, **SSD)
    assert np.array_equal(r.depths, d)
    Grev = _nx(c).reverse()
    for i, s in enumerate(srcs):
        assert r.closeness[i] == pytest.approx(nx.closeness_centrality(Grev, u=s), rel=1e-12)
    # SpMV: scipy CSR product with the weights
    x = spmv.make_x(c.n, "random")
    r = spmv.run(g, x="random", **SSD)
    np.testing.assert_allclose(r.y, _csr(c, weighted=True) @ x, rtol=1e-12, atol=0)
    # SSSP: scipy Dijkstra
    dist = csg.dijkstra(_csr(c, weighted=True), indices=srcs[0])
    r = sssp.run(g, src=srcs[0], **SSD)
    assert np.array_equal(r.dist, dist)


@pytest.mark.parametrize("in_memory", [False, True])
def test_sssp_distances_in_four_bytes_when_the_weights_allow(tmp_path, in_memory):
    """Partitioning records whether every weight is whole; SSSP then keeps uint32 distances
    unless (|V| - 1) x the largest weight could reach the unreached mark. Every case gives
    Dijkstra's distances exactly, as float64, with inf where unreached (vertex 3 here)."""
    src = np.array([0, 1, 0, 4], dtype=np.int64)
    dst = np.array([1, 2, 2, 1], dtype=np.int64)
    big = 2.0 ** 31 - 128                  # a float32; twice it is 2^32 - 256: just fits
    cases = [("whole", [3, 4, 9, 1], True), ("quarters", [0.25, 1.5, 2.0, 0.75], False),
             ("near", [big, big, big, big], None), ("zero", [0, 0, 5, 0], True)]
    for name, w, ints in cases:
        w = np.array(w, np.float32)
        n = 5 if ints is not None else 3          # "near": 3 vertices fit, 5 would not
        keep = src < n if ints is not None else np.array([True, True, False, False])
        disk = tmp_path / name
        disk.mkdir()
        g = partition_arrays(src[keep], dst[keep], weights=w[keep], num_vertices=n,
                             disks=[str(disk)], name=name, register=False, durable=False)
        assert g.stats["weight_integral"] == (ints is not False)
        assert sssp.int_distances(g) == (ints is not False)
        ref = naive.dijkstra(n, src[keep], dst[keep], w[keep], 0)
        r = sssp.run(g, src=0, in_memory=in_memory, **SSD)
        assert r.dist.dtype == np.float64
        assert np.array_equal(r.dist, ref), name
        assert np.isinf(r.dist[n - 1]) or name == "near"
        if name == "near":
            assert r.dist[2] == 2 * big
            g.stats = dict(g.stats, weight_max=2.0 ** 31)     # 2 x 2^31 would reach the mark
            assert not sssp.int_distances(g)
            assert np.array_equal(sssp.run(g, src=0, in_memory=in_memory, **SSD).dist, ref)


def test_sssp_default_delta_comes_from_the_recorded_weights(tmp_path):
    """Partitioning records the weights' min, max and mean; SSSP's default bucket width is the
    largest weight, at most twice the mean; a dataset without them gets DEFAULT_DELTA."""
    src = np.array([0, 1, 2, 3, 0], dtype=np.int64)
    dst = np.array([1, 2, 3, 4, 4], dtype=np.int64)
    for w, want in (([2, 4, 6, 8, 10], 10.0), ([1, 1, 1, 1, 96], 40.0)):
        disk = tmp_path / f"dd{int(want)}"
        disk.mkdir()
        g = partition_arrays(src, dst, weights=np.array(w, np.float32), disks=[str(disk)],
                             name=f"dd{int(want)}", register=False, durable=False)
        st = g.stats
        assert (st["weight_min"], st["weight_max"]) == (min(w), max(w))
        assert st["weight_mean"] == pytest.approx(np.mean(w))
        r = sssp.run(g, src=0, **SSD)
        assert r.delta == want
        assert list(r.dist) == list(naive.dijkstra(5, src, dst, np.array(w, np.float32), 0))
        g.stats = {k: v for k, v in st.items() if not k.startswith("weight_")}
        assert sssp.run(g, src=0, **SSD).delta == sssp.DEFAULT_DELTA


def test_sssp_bins_take_the_lowest_bucket_and_skip_stale_entries():
    """Bins hand out the lowest bucket first; _take keeps only the vertices still in that bucket
    (one that dropped lower since went stale) and each once."""
    bins = sssp.Bins(10)
    bins.add(np.array([5, 1, 7, 1, 3]), np.array([2.0, 0.0, 2.0, 0.0, 1.0]))
    bins.add(np.array([7, 9]), np.array([1.0, 2.0]))
    assert bins.held == 7 and bins.most == 7
    dist = np.full(10, np.inf)
    dist[[1, 3, 5, 7, 9]] = [0.5, 1.5, 2.5, 1.2, 2.9]     # 7 dropped from bucket 2 to 1
    inq = np.zeros(10, np.uint8)
    got = []
    while (b := bins.pop()) is not None:
        k, ids = b
        m = sssp._take(ids, dist, inq, 1.0, k)
        got.append((k, sorted(ids[:m].tolist())))
        inq[:] = 0
    assert got == [(0.0, [1]), (1.0, [3, 7]), (2.0, [5, 9])]
    assert bins.held == 0


@pytest.mark.parametrize("spread", [3, 10**7])
def test_sssp_bins_group_like_a_stable_sort(spread):
    """A superstep's vertices join their bins in their own order, by a counting sort when the
    buckets are near each other, else by a stable argsort: both as a stable sort would."""
    rng = np.random.default_rng(spread)
    verts = rng.integers(0, 1000, 5000)
    keys = np.floor(rng.integers(0, spread, 5000) + 17.0)
    bins = sssp.Bins(1000)
    bins.add(verts, keys)
    order = np.argsort(keys, kind="stable")
    want = {}
    for k, v in zip(keys[order], verts[order]):
        want.setdefault(float(k), []).append(int(v))
    got = {}
    while (b := bins.pop()) is not None:
        got[b[0]] = b[1].tolist()
    assert got == want and list(got) == sorted(want)


# ---------------------------------------------------------------------------------------------
# 6. options, errors, verifiers that must catch wrong results
def test_errors_and_options(tmp_root):
    c = case_of("powerlaw", "out")          # unweighted, no in-edges
    g = dataset(tmp_root, c, (2, 2))
    with pytest.raises(GrapheneError, match="weights"):
        sssp.run(g, src=0, **SSD)
    cw = case_of("powerlaw", "in")
    gw = dataset(tmp_root, cw, (2, 2))
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(GrapheneError, match="delta"):
            sssp.run(gw, src=0, delta=bad, **SSD)
    with pytest.raises(GrapheneError, match="out of range"):
        sssp.run(gw, src=cw.n, **SSD)
    with pytest.raises(GrapheneError, match="out of range"):
        msbfs.run(gw, sources=[0, cw.n], **SSD)
    with pytest.raises(GrapheneError, match="variant"):
        pagerank.run(gw, variant="nope")
    with pytest.raises(GrapheneError, match="k must be"):
        kcore.run(gw, k=-1)
    with pytest.raises(GrapheneError, match="entries"):
        spmv.run(gw, x=np.ones(3))
    # defaults: 32 distinct random sources of non-zero out-degree, reproducible
    r1 = msbfs.run(gw, **SSD)
    r2 = msbfs.run(gw, **SSD)
    deg = gw.degrees("out")
    assert len(r1.sources) == 32 and len(set(r1.sources.tolist())) == 32
    assert np.all(deg[r1.sources] > 0) and np.array_equal(r1.sources, r2.sources)
    # more than 64 sources: several passes, still exact
    srcs = list(range(0, cw.n, 40))[:70]
    r = msbfs.run(gw, sources=srcs, **SSD)
    assert r.passes == 2
    assert np.array_equal(r.depths, naive.msbfs_depths(cw.n, cw.src, cw.dst, srcs))


def test_msbfs_output_memmap(tmp_root, tmp_path):
    c = case_of("powerlaw", "in")
    g = dataset(tmp_root, c, (2, 2))
    out = str(tmp_path / "depths.npy")
    srcs = sources_for(c)
    r = msbfs.run(g, sources=srcs, output=out, **SSD)
    back = np.load(out)
    assert np.array_equal(back, naive.msbfs_depths(c.n, c.src, c.dst, srcs))
    assert np.array_equal(np.asarray(r.depths), back)


def test_verifiers_catch_wrong_results(tmp_root):
    c = case_of("powerlaw", "in")
    g = dataset(tmp_root, c, (2, 2))
    r = pagerank.run(g, **SSD)
    r.scores = r.scores.copy()
    r.scores[[0, 1]] = r.scores[[1, 0]] + np.array([1e-3, -1e-3])
    assert pagerank.verify(g, r)
    r = wcc.run(g, **SSD)
    r.labels = r.labels.copy()
    r.labels[np.argmax(r.labels)] = 0
    assert wcc.verify(g, r)
    r = kcore.run(g, k=3, **SSD)
    r.core_number = r.core_number.copy()
    r.core_number[np.argmax(r.core_number)] -= 1
    assert kcore.verify(g, r)
    r = msbfs.run(g, sources=[1, 2], **SSD)
    r.depths = r.depths.copy()
    r.depths[0, np.argmax(r.depths[0])] += 1
    assert msbfs.verify(g, r)
    r = spmv.run(g, **SSD)
    r.y = r.y.copy()
    r.y[np.argmax(r.y)] += 1e-6
    assert spmv.verify(g, r)
    r = sssp.run(g, src=int(np.argmax(g.degrees("out"))), **SSD)
    r.dist = r.dist.copy()
    r.dist[np.flatnonzero(np.isfinite(r.dist))[-1]] += 1
    assert sssp.verify(g, r)


def test_variants_registered_for_cli():
    from graphene_py.algos import load, registry
    assert load("pagerank") is pagerank and registry.entry("pagerank").fixed == {"variant": "delta"}
    assert load("pagerank-pull") is pagerank
    assert registry.entry("pagerank-pull").fixed == {"variant": "pull"}
    assert load("apsp") is msbfs and load("msbfs") is msbfs


def test_one_dispatcher_for_cli_and_api(tmp_root):
    """graphene_py.<algo>() and `graphene run` share registry.dispatch: the same options, the same
    device rules, the same default source (SSSP picked its own before)."""
    import graphene_py as gp
    from graphene_py.algos import common, registry
    c = case_of("powerlaw", "in")
    g = dataset(tmp_root, c, (2, 2))
    assert gp.pagerank_pull(g, in_memory=True).variant == "pull"
    assert gp.pagerank(g, in_memory=True).variant == "delta"
    if g.weighted:
        assert gp.sssp(g, in_memory=True).src == common.pick_source(g)
    assert registry.choose_device("bfs", "auto") in ("hybrid",)
    assert registry.choose_device("bc", "auto") == "cpu"        # no GPU entry
    with pytest.raises(GrapheneError, match="no GPU implementation of 'bc'"):
        registry.choose_device("bc", "gpu")


@pytest.mark.parametrize("in_memory", [False, True])
def test_delta_pagerank_sweeps_are_gauss_seidel(tmp_root, in_memory):
    """A directed cycle 0 -> 1 -> ... -> n-1 -> 0 plus the shortcut 0 -> 2 (no dangling vertex, a
    non-uniform fixed point). Swept in vertex order by one thread, a Gauss-Seidel sweep carries
    every new score around the whole cycle, so the error shrinks by about alpha^n per sweep; a
    Jacobi (power iteration) implementation shrinks it by alpha per iteration (about a hundred
    iterations to 1e-9). Both must land on the same fixed point."""
    n = 300
    src = np.append(np.arange(n), 0)
    dst = np.append((np.arange(n) + 1) % n, 2)
    disks = [os.path.join(tmp_root, f"gs{i}") for i in range(2)]
    for d in disks:
        os.makedirs(d, exist_ok=True)
    g = partition_arrays(src, dst, num_vertices=n, disks=disks, name="gs_cycle",
                         in_edges=True, force=True, register=False)
    kw = dict(tolerance=1e-9, max_iter=500, threads=1, in_memory=in_memory)
    gs = pagerank.run(g, variant="delta", **kw)
    jac = pagerank.run(g, variant="pull", **kw)
    ref = naive.pagerank(n, src, dst, ALPHA)
    assert jac.iterations > 60
    # from SSD a sweep takes the lists as their reads complete: in vertex order on an idle
    # machine (<= 5 sweeps), in another order under load (8 seen in a full parallel suite run),
    # still far from a Jacobi iteration's count
    assert gs.iterations <= (5 if in_memory else jac.iterations // 4), \
        (gs.iterations, jac.iterations)
    for r in (gs, jac):
        assert np.abs(r.scores - ref).sum() <= ALPHA / (1 - ALPHA) * r.error * 1.001 + 1e-12
        assert pagerank.verify(g, r) == []


@pytest.mark.parametrize("threads", [1, 2])
def test_delta_pagerank_counts_pieces_of_high_degree_apart(tmp_root, threads):
    """A sweep counts a split list's IDs in a byte, against the degrees in a byte; a vertex of
    in- or out-degree delta.BIG (255) or more has its degrees and its count in a table of its
    own. Vertices on both sides of that bound, with in-lists split over the 2x2 grid's columns
    and over small extents, and one with a large out-degree only (directed, in-edges: its
    in-degree is small): every score must be the fixed point's, over several sweeps (the
    counts must be cleared for the next)."""
    from graphene_py.algos.pagerank import delta
    D = delta.BIG
    n = 3000
    leaves = np.arange(4, n)
    ring = np.append(leaves[1:], leaves[0])
    src = np.concatenate([leaves[:D - 1], leaves[:D], leaves[:2000], np.full(D + 5, 3), leaves,
                          [0, 1, 2]])
    dst = np.concatenate([np.zeros(D - 1, np.int64), np.ones(D, np.int64),
                          np.full(2000, 2), leaves[-(D + 5):], ring, [5, 6, 7]])
    disks = [os.path.join(tmp_root, f"big{i}") for i in range(2)]
    for d in disks:
        os.makedirs(d, exist_ok=True)
    g = partition_arrays(src, dst, num_vertices=n, disks=disks, name="bigdeg", rows=2, cols=2,
                         in_edges=True, force=True, register=False)
    r = pagerank.run(g, variant="delta", tolerance=1e-10, max_iter=100, threads=threads,
                     max_io=4096)
    assert r.iterations >= 3
    ref = naive.pagerank(n, src, dst, ALPHA)
    assert np.abs(r.scores - ref).sum() <= ALPHA / (1 - ALPHA) * r.error * 1.001 + 1e-12
    for v in (0, 1, 2, 3):       # in-degree 254, 255, 2000; out-degree 260
        assert abs(r.scores[v] - ref[v]) <= 1e-9 * max(1.0, ref[v] * n), v


@pytest.mark.parametrize("budget", [None, 1])
def test_delta_pagerank_pushes_atomically_when_memory_is_short(tmp_root, budget):
    """A directed dataset without in-edges runs delta PageRank by pushes only. With memory to
    spare the two threads push into rows of their own; with none (a run budget of one byte) they
    add into the pending changes atomically. Both land on the reference's fixed point, and with a
    hub (every vertex links to it and from it) the mass each superstep moves is checked by the
    stop rule: a lost push leaves sum(p + r) short of 1 and the error above the tolerance. (Two
    threads rarely push at the same instant on a graph this small: the race itself is not
    provoked here.)"""
    from graphene_py.iterator import memory
    c = case_of("powerlaw", "out")
    pairs = np.unique(np.stack([np.concatenate([c.src, np.zeros(c.n - 1, np.int64),
                                                np.arange(1, c.n)]),
                                np.concatenate([c.dst, np.arange(1, c.n),
                                                np.zeros(c.n - 1, np.int64)])], axis=1), axis=0)
    src, dst = pairs[:, 0], pairs[:, 1]          # the hub's edges without duplicates
    disks = [os.path.join(tmp_root, f"dpush{i}") for i in range(2)]
    for d in disks:
        os.makedirs(d, exist_ok=True)
    g = partition_arrays(src, dst, num_vertices=c.n, disks=disks, name="dpush", force=True,
                         register=False)
    assert g.in_partitions is None and g.directed
    memory.set_run_budget(budget)
    try:
        with memory.ledger() as led:
            r = pagerank.run(g, variant="delta", tolerance=1e-10, max_iter=200, **SSD)
    finally:
        memory.set_run_budget(None)
    assert ("per-thread sums" in led.arrays) == (budget is None)
    assert "shares (float32)" in led.arrays            # the delta supersteps ran
    ref = naive.pagerank(c.n, src, dst, ALPHA)
    assert r.error < 1e-10
    assert np.abs(r.scores - ref).sum() <= ALPHA / (1 - ALPHA) * r.error * 1.001 + 1e-12
    assert pagerank.verify(g, r) == []


def test_wcc_reads_an_undirected_dataset_once(tmp_root):
    """An undirected dataset's in-edge partitions hold its out-edges again: WCC with in-edges must
    read exactly the bytes it reads without them (not twice as many) and give the same labels."""
    c = case_of("powerlaw", "sym")
    runs = []
    for in_edges in (False, True):
        disks = [os.path.join(tmp_root, f"wcc_in{int(in_edges)}_{i}") for i in range(2)]
        for d in disks:
            os.makedirs(d, exist_ok=True)
        g = partition_arrays(c.src, c.dst, num_vertices=c.n, disks=disks, name="wcc_once",
                             symmetrize=True, in_edges=in_edges, force=True, register=False)
        assert (g.in_partitions is not None) == in_edges and not g.directed
        runs.append(wcc.run(g, **SSD))
    assert np.array_equal(runs[0].labels, runs[1].labels)
    assert np.array_equal(runs[0].labels, naive.wcc_labels(c.n, c.src, c.dst))
    assert runs[1].totals()["bytes_read"] == runs[0].totals()["bytes_read"] > 0


@pytest.mark.parametrize("grid", [(1, 1), (3, 2)], ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("gname", GRAPH_NAMES)
def test_wcc_in_memory_undirected(gname, grid, tmp_root, monkeypatch):
    """An undirected dataset in RAM: WCC's first phase is the BFS's own loop over the lists
    (no engine superstep in it: algos/bfs_ram.py, no parents); from SSD it is the engine's
    direction-optimizing levels (bfs.Levels, no parents). The labels equal the naive components'
    and each other's, and the BFS's reach is the hub's component."""
    c = case_of(gname, "sym")
    g = dataset(tmp_root, c, grid)
    ref = c.ref("wcc", lambda: naive.wcc_labels(c.n, c.src, c.dst))
    ssd = wcc.run(g, **SSD)
    from graphene_py.algos import bfs_ram
    calls = []
    real = bfs_ram.levels
    monkeypatch.setattr(bfs_ram, "levels", lambda *a, **k: calls.append(1) or real(*a, **k))
    r = wcc.run(g, in_memory=True, threads=2)
    assert np.array_equal(r.labels, ref) and np.array_equal(r.labels, ssd.labels)
    assert r.bfs_reached == ssd.bfs_reached and r.n_components == ssd.n_components
    assert calls == ([1] if c.n and g.num_edges else [])
    assert wcc.verify(g, r) == []
    if gname in ("star", "powerlaw"):      # a hub's frontier: bottom-up levels over the out-lists
        for run in (r, ssd):              # in RAM (bfs_ram) and through the engine (bfs.Levels)
            assert "bottom-up" in {s.get("direction") for s in run.supersteps
                                   if s["phase"] == "bfs"}


@pytest.mark.parametrize("gname,kind,grid", [("star", "sym", (1, 1)), ("powerlaw", "sym", (2, 2)),
                                             ("powerlaw", "in", (1, 1))])
def test_pagerank_in_float32_keeps_its_bounds(tmp_root, gname, kind, grid):
    """Pull PageRank holds the contributions its edges read in float32 while an iteration's change
    is at least SINGLE_UNTIL, float64 below; delta PageRank's sweeps their y. The symmetrized star swaps mass between its hub and
    its leaves (eigenvalue -alpha: each change is alpha times the last), so verify's bound (one
    exact iteration moves the result by at most alpha * error) is as tight as it gets there.
    Stopping in the float32 stage, the bounds hold; a run to a tight tolerance passes into
    float64 and ends at the reference; the float32 result is within float32 rounding of the same
    iterations in float64 (naive.pagerank's)."""
    from graphene_py.algos.pagerank import pull
    from graphene_py.iterator import memory
    c = case_of(gname, kind)
    g = dataset(tmp_root, c, grid)
    ref = c.ref("pr", lambda: naive.pagerank(c.n, c.src, c.dst, ALPHA))
    for tol in (1e-3, 1e-4, 2 * pull.SINGLE_UNTIL):
        # delta's sweeps too (y in the first half of its float64 row: no ledger entry of its own)
        r = pagerank.run(g, variant="delta", tolerance=tol, max_iter=500, **SSD)
        assert r.error < tol and pagerank.verify(g, r) == []
        assert np.abs(r.scores - ref).sum() <= ALPHA / (1 - ALPHA) * r.error * 1.001 + 1e-12
        with memory.ledger() as led:
            r = pagerank.run(g, variant="pull", tolerance=tol, max_iter=500, **SSD)
        rows = [k for k in led.arrays if "float32 while" in k]
        # y alone (undirected), or with the float64 scores and 1/degree (directed)
        assert rows and led.arrays[rows[0]] == (4 if c.sym else 20) * c.n, led.arrays
        assert not any(k.endswith("(float64)") and "out-degrees" not in k
                       for k in led.arrays), led.arrays
        assert r.error < tol and r.scores.dtype == np.float64
        assert abs(r.scores.sum() - 1) < 1e-12
        assert pagerank.verify(g, r) == []
        assert np.abs(r.scores - ref).sum() <= ALPHA / (1 - ALPHA) * r.error * 1.001 + 1e-12
    # the same number of iterations in float64 throughout: float32's rounding apart, equal
    it = r.iterations
    want = naive.pagerank(c.n, c.src, c.dst, ALPHA, max_iter=it, tol=0)
    assert np.abs(r.scores - want).sum() < 1e-6
    with memory.ledger() as led:
        r = pagerank.run(g, variant="pull", tolerance=1e-11, max_iter=500, **SSD)
    assert any(k.startswith(("scores / out-degree (float64)", "contributions (float64)"))
               for k in led.arrays), led.arrays
    assert r.error < 1e-11 and np.abs(r.scores - ref).sum() < 1e-9
    assert pagerank.verify(g, r) == []
    r = pagerank.run(g, variant="delta", tolerance=1e-11, max_iter=500, **SSD)
    assert r.error < 1e-11 and np.abs(r.scores - ref).sum() < 1e-9


@pytest.mark.parametrize("grid", [(1, 1), (3, 2)], ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("gname", ["star", "powerlaw", "disconnected", "isolated_ends"])
def test_wcc_kept_lists(gname, grid, tmp_root):
    """Short lists kept from the BFS's first bottom-up level (keep_edges: none, a few lists, the
    default, all): the BFS's later levels and the propagation's supersteps take them from RAM on
    a helper thread (the propagation's is_active tests its frontier flags, which stay set for the
    vertices served from RAM). Labels equal the naive components' on every budget."""
    c = case_of(gname, "sym")
    g = dataset(tmp_root, c, grid)
    ref = c.ref("wcc", lambda: naive.wcc_labels(c.n, c.src, c.dst))
    served = {}
    for keep in (0, 7, None, 4 * c.n):
        for threads in (1, 2):
            r = wcc.run(g, keep_edges=keep, **{**SSD, "threads": threads})
            assert np.array_equal(r.labels, ref), (keep, threads)
            for s in r.supersteps:
                if s.get("kept_lists"):
                    served[s["phase"]] = served.get(s["phase"], 0) + s["kept_lists"]
            if keep == 0:
                assert not any(s.get("kept_lists") for s in r.supersteps)
    if gname == "powerlaw":      # bottom-up levels after the first, then propagation
        assert served.get("bfs", 0) > 0 and served.get("lp", 0) > 0, served


class _SerialThreads:
    """A stand-in EdgeMap whose on_threads runs the threads' jobs one after the other, in the
    order given: a pass that depends on the order of its ranges fails one of two orders."""

    def __init__(self, order):
        self.order = order
        self.threads = len(order)

    def on_threads(self, job):
        for t in self.order:
            job(t)


@pytest.mark.parametrize("order", [(0, 1), (1, 0), (2, 0, 1)])
def test_delta_pagerank_widens_float32_scores_in_place_in_any_range_order(order):
    """Delta PageRank's float32 scores become float64 in place (_widen): ranges of the upper half
    first, each split over threads. Odd and even lengths around the serial cut; checked: taking
    the lower half's bound as floor(n/2) fails the order (0, 1) at odd lengths."""
    from graphene_py.algos.pagerank import delta as D
    for n in [0, 1, 5, 17, D.WIDEN_SERIAL, D.WIDEN_SERIAL + 1, 2 * D.WIDEN_SERIAL + 1, 1_000_003]:
        vals = np.random.default_rng(n).random(n).astype(np.float32)
        row = np.zeros(n)
        row.view(np.float32)[:n] = vals
        D._widen(_SerialThreads(order), row)
        assert np.array_equal(row, vals.astype(np.float64)), n
