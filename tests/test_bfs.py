"""BFS vs scipy.sparse.csgraph and a naive Python BFS, on every test graph, grid, engine and mode."""
from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from graphene_py.algos import bfs, common
from graphene_py.errors import GrapheneError
from graphene_py.partition import partition_arrays
from tests import graphs as tg

_CACHE = {}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    def make(gname, R=1, C=1, symmetrize=False, in_edges=False):
        key = (gname, R, C, symmetrize, in_edges)
        if key not in _CACHE:
            g = tg.by_name(gname)
            base = tmp_path_factory.mktemp("bfs")
            disks = [str(base / "d0"), str(base / "d1")]
            for d in disks:
                os.makedirs(d)
            G = partition_arrays(g.src, g.dst, num_vertices=g.n, disks=disks, name="b", rows=R,
                                 cols=C, symmetrize=symmetrize, in_edges=in_edges, register=False)
            _CACHE[key] = (g, G)
        return _CACHE[key]
    return make


def naive_bfs(g, src, symmetrize=False):
    adj = tg.naive_adjacency(g.n, g.src, g.dst, symmetrize)
    return tg.naive_bfs_depth(adj, src), adj


def scipy_depth(g, src, symmetrize=False):
    A = sp.csr_matrix((np.ones(len(g.src)), (g.src, g.dst)), shape=(g.n, g.n))
    if symmetrize:
        A = A + A.T
    dist = csgraph.shortest_path(A, indices=src, unweighted=True, directed=True)
    return np.where(np.isinf(dist), -1, dist).astype(np.int64)


def check(g, res, src, symmetrize=False):
    ref, adj = naive_bfs(g, src, symmetrize)
    assert np.array_equal(res.depth.astype(np.int64), ref)
    assert np.array_equal(ref, scipy_depth(g, src, symmetrize))
    assert res.n_reached == int((ref >= 0).sum())
    assert res.parent[src] == src and res.depth[src] == 0
    assert res.depth.dtype == np.int32 and res.parent.dtype == np.int32   # IDs < 2^31: 4 bytes
    for v in np.flatnonzero(ref > 0):
        p = int(res.parent[v])
        assert ref[p] == ref[v] - 1 and v in adj[p], (v, p)
    assert (res.parent[ref < 0] == -1).all()


def sources(g):
    deg = np.bincount(g.src, minlength=g.n) if g.n else np.zeros(0)
    out = [0] if g.n else []
    if g.n:
        out.append(int(np.argmax(deg)))
        out.append(g.n - 1)
    return sorted(set(out))


# (chain's 5000 levels run on 1x1 here and on 2x2 in test_bfs_chain_thousands_of_levels)
_EVERY = [(f.__name__, grid) for f in tg.ALL if f.__name__ != "empty"
          for grid in [(1, 1), (2, 2), (3, 2)] if f.__name__ != "chain" or grid == (1, 1)]


@pytest.mark.parametrize("gname,grid", _EVERY, ids=[f"{n}-{r}x{c}" for n, (r, c) in _EVERY])
def test_bfs_every_graph(dataset, gname, grid):
    g, G = dataset(gname, *grid)
    for src in sources(g):
        res = bfs.run(G, src=src, threads=2)
        check(g, res, src)
        assert bfs.verify(G, res) == []
        assert res.levels == int(res.depth.max()) + 1
        assert len(res.supersteps) == res.levels
    # in-memory mode: identical depths (parents may differ between valid choices)
    src = sources(g)[0]
    mem = bfs.run(G, src=src, threads=2, in_memory=True)
    check(g, mem, src)


@pytest.mark.parametrize("engine", ["uring", "liburing", "pread"])
@pytest.mark.parametrize("gname,grid,sym", [("powerlaw", (2, 2), False), ("grid", (3, 2), True),
                                             ("star", (1, 1), True)])
def test_bfs_engines(dataset, engine, gname, grid, sym):
    g, G = dataset(gname, *grid, symmetrize=sym)
    for threads in (1, 2):
        src = sources(g)[1]
        res = bfs.run(G, src=src, threads=threads, engine=engine, max_gap=4)
        check(g, res, src, symmetrize=sym)


_UP = [f.__name__ for f in tg.ALL if f.__name__ not in ("empty", "chain")]


@pytest.mark.parametrize("grid", [(1, 1), (3, 2)], ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("gname", _UP)
def test_bfs_bottom_up(dataset, gname, grid):
    """Forced bottom-up levels: over in-edges of a directed dataset, over out-edges of an
    undirected one; plus the cost-model choice (mixed directions) on the directed one."""
    for sym in (False, True):
        g, G = dataset(gname, *grid, symmetrize=sym, in_edges=not sym)
        for src in sources(g):
            res = bfs.run(G, src=src, threads=2, bottom_up="always")
            check(g, res, src, symmetrize=sym)
            assert all(s["direction"] == "bottom-up" for s in res.supersteps)
            assert bfs.verify(G, res) == []
        src = sources(g)[-1]
        res = bfs.run(G, src=src, threads=2)
        check(g, res, src, symmetrize=sym)
        mem = bfs.run(G, src=src, threads=2, bottom_up="always", in_memory=True)
        assert np.array_equal(mem.depth, res.depth)


@pytest.mark.parametrize("gname,grid", [("powerlaw", (3, 2)), ("star", (1, 1)),
                                         ("duplicates", (2, 2)), ("isolated_ends", (1, 1)),
                                         ("chain", (2, 2))])
def test_bfs_kept_lists(dataset, gname, grid):
    """Short lists kept in RAM from the first bottom-up level on (keep_edges: none, a budget
    that holds a few lists, n): later bottom-up levels serve them from RAM on a helper thread
    (thread id = threads, its own queue block) and read the rest; the depths equal the
    references on every budget and thread count, and the kept lists were served."""
    chain = gname == "chain"        # 5,000 bottom-up levels a run: one run, every list kept
    for sym in (True,) if chain else (True, False):
        g, G = dataset(gname, *grid, symmetrize=sym, in_edges=not sym)
        src = sources(g)[0] if chain else sources(g)[-1]
        served = 0
        # (a degree's lists are kept all or none: each costs its count and IDs)
        for keep in (4 * g.n,) if chain else (0, 7, None, 4 * g.n):
            for threads in (2,) if chain else (1, 2):
                res = bfs.run(G, src=src, threads=threads, bottom_up="always", keep_edges=keep)
                check(g, res, src, symmetrize=sym)
                k = sum(s.get("kept_lists", 0) for s in res.supersteps)
                if keep == 0:
                    assert k == 0
                served += k
        if res.levels > 2:
            assert served > 0, (gname, sym)
        if gname == "chain":       # every list kept by the first level: none read again
            assert all(s["bytes_read"] == 0 for s in res.supersteps[1:]), (sym, res.supersteps[1])


def test_bfs_keep_edges_errors(dataset):
    from graphene_py.algos import wcc
    g, G = dataset("powerlaw", 1, 1, symmetrize=True)
    for run in (bfs.run, wcc.run):
        with pytest.raises(GrapheneError, match="keep_edges must be >= 0"):
            run(G, keep_edges=-1)


def test_bfs_direction_choice_reads_less(dataset):
    g, G = dataset("powerlaw", 1, 1, symmetrize=True)
    src = sources(g)[1]
    td = bfs.run(G, src=src, bottom_up=False)
    do = bfs.run(G, src=src)
    assert np.array_equal(td.depth, do.depth)
    assert {s["direction"] for s in td.supersteps} == {"top-down"}
    assert "bottom-up" in {s["direction"] for s in do.supersteps}
    assert do.totals()["bytes_read"] < td.totals()["bytes_read"]


@pytest.mark.parametrize("grid", [(1, 1), (2, 2)])
@pytest.mark.parametrize("kind", ["sym", "in"])
def test_degrees_from_offsets_same_choices(dataset, monkeypatch, kind, grid):
    # the cost model reads degrees from the iterator's compact offsets on every grid (no degree
    # array): every level's direction and bytes equal those chosen with degrees summed into an
    # array first (io/offsets.py of_degrees)
    from graphene_py.io import offsets as co
    from graphene_py.iterator.edgemap import EdgeMap
    g, G = dataset("powerlaw", *grid, symmetrize=kind == "sym", in_edges=kind == "in")
    src = sources(g)[1]
    got = bfs.run(G, src=src)
    assert got.n_reached > 1
    seen = []
    real = EdgeMap.degree_view
    monkeypatch.setattr(EdgeMap, "degree_view", lambda self, d="out": (
        seen.append(real(self, d)[0] is self.its[d].offs), co.of_degrees(self.degree(d)))[1])
    ref = bfs.run(G, src=src)
    assert seen and all(seen)     # the iterators' offsets were in use before the patch
    assert np.array_equal(got.depth, ref.depth)
    key = [(s["direction"], s["bytes_read"]) for s in got.supersteps]
    assert key == [(s["direction"], s["bytes_read"]) for s in ref.supersteps]
    assert len({d for d, _ in key}) == 2      # both directions were chosen


def test_bfs_chain_thousands_of_levels(dataset):
    g, G = dataset("chain", 2, 2)
    res = bfs.run(G, src=0, threads=2)
    assert res.levels == 5000 and res.n_reached == 5000
    assert np.array_equal(res.depth, np.arange(5000))
    assert np.array_equal(res.parent[1:], np.arange(4999))


def test_bfs_repeated_runs_same_depths(dataset):
    g, G = dataset("powerlaw", 3, 2, symmetrize=True)
    src = sources(g)[1]
    runs = [bfs.run(G, src=src, threads=2) for _ in range(3)]
    for r in runs[1:]:
        assert np.array_equal(r.depth, runs[0].depth)
        assert bfs.verify(G, r) == []


def test_verify_catches_wrong_results(dataset):
    g, G = dataset("powerlaw", 2, 2)
    src = sources(g)[1]
    res = bfs.run(G, src=src)
    assert bfs.verify(G, res) == []
    reached = np.flatnonzero(res.depth > 1)
    v = int(reached[0])
    bad = bfs.BFSResult(**{**res.__dict__, "depth": res.depth.copy()})
    bad.depth[v] += 1
    assert any("depth" in p for p in bfs.verify(G, bad))
    bad = bfs.BFSResult(**{**res.__dict__, "parent": res.parent.copy()})
    bad.parent[v] = src if res.depth[v] != 1 else v   # not one level up
    assert bfs.verify(G, bad)
    # a parent one level up but without an edge to v
    ip, ind, _ = G.to_csr()
    same_level = np.flatnonzero(res.depth == res.depth[v] - 1)
    for p in same_level:
        if v not in set(ind[ip[p]:ip[p + 1]].tolist()):
            bad = bfs.BFSResult(**{**res.__dict__, "parent": res.parent.copy()})
            bad.parent[v] = p
            assert any("invalid parent" in x for x in bfs.verify(G, bad))
            break
    bad = bfs.BFSResult(**{**res.__dict__, "n_reached": res.n_reached + 1})
    assert bfs.verify(G, bad)


def test_bfs_errors_and_source_picking(dataset):
    g, G = dataset("isolated_ends", 1, 1)
    with pytest.raises(GrapheneError, match="out of range"):
        bfs.run(G, src=g.n)
    s0 = common.pick_source(G)
    s1 = common.pick_source(G, trial=1)
    deg = G.degrees("out")
    assert deg[s0] > 0 and deg[s1] > 0
    assert common.pick_source(G) == s0   # fixed seed: reproducible
    res = bfs.run(G)                     # no src: the picked one
    assert res.src == s0
    # an isolated source reaches only itself
    res = bfs.run(G, src=0)
    assert res.n_reached == 1 and res.levels == 1


def test_result_json_and_save(dataset, tmp_path):
    g, G = dataset("powerlaw", 1, 1)
    res = bfs.run(G, src=sources(g)[1])
    d = res.to_json(per_superstep=True)
    assert d["n_reached"] == res.n_reached and d["totals"]["supersteps"] == res.levels
    assert len(d["supersteps"]) == res.levels
    p = res.save(str(tmp_path / "parent.npy"))
    assert np.array_equal(np.load(p), res.parent)


# -- the in-memory path's own loop (algos/bfs_ram.py) ------------------------------------------
_RAM = [(f.__name__, grid) for f in tg.ALL if f.__name__ != "empty"
        for grid in [(1, 1), (3, 2)] if f.__name__ != "chain" or grid == (1, 1)]


@pytest.mark.parametrize("gname,grid", _RAM, ids=[f"{n}-{r}x{c}" for n, (r, c) in _RAM])
def test_bfs_in_memory_loop(dataset, gname, grid, monkeypatch):
    """in_memory=True walks the lists in RAM without the engine's supersteps (IoIterator.run is
    never called), in every direction mode, on 1 to 3 threads, over out-lists, in-lists and the
    out-lists of an undirected dataset: depths equal the naive BFS's, every parent is valid."""
    from graphene_py.iterator import IoIterator

    def no_superstep(*a, **k):
        raise AssertionError("the in-memory BFS ran an engine superstep")
    for sym in (False, True):
        g, G = dataset(gname, *grid, symmetrize=sym, in_edges=not sym)
        monkeypatch.setattr(IoIterator, "run", no_superstep)
        # every source with GAPBS's rule on 3 threads; forced bottom-up and top-down once each
        runs = [(src, True, 3) for src in sources(g)]
        runs += [(sources(g)[-1], "always", 1), (sources(g)[0], False, 2)]
        for src, mode, threads in runs:
            res = bfs.run(G, src=src, threads=threads, bottom_up=mode, in_memory=True)
            check(g, res, src, symmetrize=sym)
            assert bfs.verify(G, res) == []
            assert len(res.supersteps) == res.levels
            dirs = {s["direction"] for s in res.supersteps}
            if mode is False:
                assert dirs == {"top-down"}
            elif mode == "always":
                assert dirs == {"bottom-up"}
        monkeypatch.undo()


def test_bfs_in_memory_switches_direction(dataset):
    """The in-memory loop goes bottom-up on a hub's big frontier and back top-down for the tail,
    as GAPBS does, and examines fewer edges than top-down alone."""
    g, G = dataset("powerlaw", 2, 2, symmetrize=True)
    src = sources(g)[1]
    do = bfs.run(G, src=src, in_memory=True, threads=2)
    td = bfs.run(G, src=src, in_memory=True, threads=2, bottom_up=False)
    check(g, do, src, symmetrize=True)
    assert "bottom-up" in {s["direction"] for s in do.supersteps}
    assert do.totals()["active_edges"] < td.totals()["active_edges"]
