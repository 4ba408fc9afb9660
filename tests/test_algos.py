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
    def from_mask(cls, mask):
        mask = np.asarray(mask)
        return cls("mask", np.flatnonzero(mask).astype(np.int64), len(mask))

    @classmethod
    def all(cls, n):
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

    def run(self, is_active, compute, state, frontier):
        deg = np.diff(self.indptr)
        vs = np.flatnonzero(deg > 0) if frontier.kind == "all" else frontier.ids
        vs = vs[deg[vs] > 0]
        pv, plo, phi = [], [], []
        for v in vs:
            a, b = int(self.indptr[v]), int(self.indptr[v + 1])
            k = int(self.rng.integers(0, min(3, b - a - 1) + 1)) if b - a > 1 else 0
            cuts = np.sort(self.rng.choice(np.arange(a + 1, b), size=k, replace=False)) if k else []
            edges = [a, *[int(c) for c in cuts], b]
            for lo, hi in zip(edges[:-1], edges[1:]):
                pv.append(v), plo.append(lo), phi.append(hi)
        order = self.rng.permutation(len(pv))
        pv = np.asarray(pv, dtype=np.int64)[order] if pv else np.zeros(0, np.int64)
        plo = np.asarray(plo, dtype=np.int64)[order] if plo else np.zeros(0, np.int64)
        phi = np.asarray(phi, dtype=np.int64)[order] if phi else np.zeros(0, np.int64)
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


def check_pagerank(g, c, run_kw):
    ref = c.ref("pr", lambda: naive.pagerank(c.n, c.src, c.dst, ALPHA))
    for variant in ("delta", "pull"):
        # tight tolerance: both variants reach the fixed point
        r = pagerank.run(g, variant=variant, tolerance=1e-11, max_iter=500, **run_kw)
        assert r.scores.shape == (c.n,)
        if c.n == 0:
            continue
        assert r.error < 1e-11
        assert abs(r.scores.sum() - 1) < 1e-9
        assert np.abs(r.scores - ref).sum() < 1e-9, variant
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
    r = kcore.run(g, k=2, **run_kw)
    assert np.array_equal(r.core_number, ref)
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
    for s in sources_for(c)[:3]:
        ref = naive.dijkstra(c.n, c.src, c.dst, c.w, s)
        for delta in (1.0, 32.0, 1e9):
            r = sssp.run(g, src=s, delta=delta, **run_kw)
            assert np.array_equal(r.dist, ref), (s, delta)
        assert sssp.verify(g, r) == []


CHECKS = {"pagerank": check_pagerank, "wcc": check_wcc, "kcore": check_kcore,
          "msbfs": check_msbfs, "spmv": check_spmv, "sssp": check_sssp}


# ---------------------------------------------------------------------------------------------
# 1. adversarial chunking, every graph x every kind x every algorithm
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gname", GRAPH_NAMES)
@pytest.mark.parametrize("algo", sorted(CHECKS))
def test_chunked_vs_naive(algo, gname, kind, tmp_root, fake_iterator):
    c = case_of(gname, kind)
    g = dataset(tmp_root, c, (2, 2))
    CHECKS[algo](g, c, {})
