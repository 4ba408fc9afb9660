"""GPU algorithms vs independent CPU references (naive numpy BFS, scipy, networkx).

Every test here is marked `gpu` and skips itself without CuPy or a GPU (conftest.py).
"""
from collections import deque

import numpy as np
import pytest

from tests import graphs as G

pytestmark = pytest.mark.gpu

scipy_sparse = pytest.importorskip("scipy.sparse")
csgraph = pytest.importorskip("scipy.sparse.csgraph")
nx = pytest.importorskip("networkx")


# -- helpers --------------------------------------------------------------------------------------
def to_csr(n, src, dst, w=None, symmetrize=False):
    """Dedupe (keeping the first weight), optionally symmetrize; self-loops kept."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    w = np.ones(len(src), np.float32) if w is None else np.asarray(w, np.float32)
    if symmetrize:
        src, dst, w = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([w, w])
    key = src * max(n, 1) + dst
    key, first = np.unique(key, return_index=True)
    s, d, ww = key // max(n, 1), key % max(n, 1), w[first]
    indptr = np.zeros(n + 1, np.int64)
    np.add.at(indptr, s + 1, 1)
    np.cumsum(indptr, out=indptr)
    return indptr, d.astype(np.int64), ww


def naive_bfs_depth(indptr, indices, src):
    n = len(indptr) - 1
    depth = np.full(n, -1, np.int32)
    depth[src] = 0
    q = deque([src])
    while q:
        u = q.popleft()
        for v in indices[indptr[u]:indptr[u + 1]]:
            if depth[v] < 0:
                depth[v] = depth[u] + 1
                q.append(v)
    return depth


def check_bfs(indptr, indices, src, parent, depth):
    ref = naive_bfs_depth(indptr, indices, src)
    assert depth.dtype == np.int32 and parent.dtype == np.int64
    np.testing.assert_array_equal(depth, ref)
    assert parent[src] == src
    reached = ref >= 0
    assert np.all(parent[~reached] == -1)
    for v in np.flatnonzero(reached):
        if v == src:
            continue
        p = parent[v]
        assert ref[p] == ref[v] - 1, (v, p)
        assert v in indices[indptr[p]:indptr[p + 1]], (p, v)


def make(dg_kind, tg):
    """(DeviceGraph, indptr, indices, weights) for a test graph in one of three layouts."""
    from graphene_py.gpu import DeviceGraph
    sym = dg_kind == "sym"
    indptr, indices, w = to_csr(tg.n, tg.src, tg.dst, tg.weights, symmetrize=sym)
    if dg_kind == "directed_in":
        t_ptr, t_idx, _ = to_csr(tg.n, indices, np.repeat(np.arange(tg.n), np.diff(indptr)))
        dg = DeviceGraph.from_csr(indptr, indices, w, in_indptr=t_ptr, in_indices=t_idx)
    else:
        dg = DeviceGraph.from_csr(indptr, indices, w, symmetric=sym)
    return dg, indptr, indices, w


def sources_of(n, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return sorted(set([0, n - 1] + list(rng.integers(0, n, k))))


NONEMPTY = [f for f in G.ALL if f is not G.empty]
KINDS = ["sym", "directed", "directed_in"]


# -- BFS ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gf", NONEMPTY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", KINDS)
def test_bfs_matches_reference(gf, kind):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, _ = make(kind, tg)
    for s in sources_of(tg.n):
        st = {}
        parent, depth = gpu.bfs(dg, s, stats=st)
        check_bfs(indptr, indices, s, parent, depth)


@pytest.mark.parametrize("variant", [
    dict(direction="push", block_loop=False, push="bins"),
    dict(direction="push", block_loop=False, push="warp"),
    dict(direction="pull", block_loop=False),
    dict(direction="auto", block_loop=False),
    dict(direction="auto", block_loop=True, alpha=1e9),  # never pull
    dict(direction="auto", block_loop=False, alpha=1e-9, beta=1e9),  # pull early, back to push
], ids=str)
@pytest.mark.parametrize("gf", [G.powerlaw, G.star, G.chain, G.grid, G.disconnected, G.only_self_loops],
                         ids=lambda f: f.__name__)
def test_bfs_variants(gf, variant):
    from graphene_py import gpu
    tg = gf()
    for kind in ("sym", "directed"):
        dg, indptr, indices, _ = make(kind, tg)
        for s in sources_of(tg.n, 2, seed=5):
            parent, depth = gpu.bfs(dg, s, **variant)
            check_bfs(indptr, indices, s, parent, depth)


def test_bfs_direction_switch_exercised():
    """A bigger power-law graph: auto mode must go push -> pull -> push and stay exact."""
    from graphene_py import gpu
    tg = G.powerlaw(scale=15, edge_factor=16, seed=9)
    dg, indptr, indices, _ = make("sym", tg)
    deg = np.diff(indptr)
    s = int(np.flatnonzero(deg > 0)[0])
    st = {}
    parent, depth = gpu.bfs(dg, s, block_loop=False, stats=st)
    kinds = [x["kind"] for x in st["supersteps"]]
    assert "pull" in kinds and kinds[0] == "push", kinds
    check_bfs(indptr, indices, s, parent, depth)


def test_bfs_long_chain_device_loop():
    """20,000 levels: the single-block device loop must cover them in a few launches."""
    from graphene_py import gpu
    tg = G.chain(20000)
    dg, indptr, indices, _ = make("directed", tg)
    st = {}
    parent, depth = gpu.bfs(dg, 0, stats=st)
    np.testing.assert_array_equal(depth, np.arange(20000, dtype=np.int32))
    np.testing.assert_array_equal(parent[1:], np.arange(19999))
    assert parent[0] == 0
    assert len(st["supersteps"]) <= 2


def test_bfs_bad_source():
    from graphene_py import gpu
    from graphene_py.errors import GrapheneError
    tg = G.one_edge()
    dg, *_ = make("directed", tg)
    with pytest.raises(GrapheneError):
        gpu.bfs(dg, 2)
    with pytest.raises(GrapheneError):
        gpu.bfs(dg, -1)


# -- PageRank -------------------------------------------------------------------------------------
def naive_pagerank(n, indptr, indices, alpha=0.85, tol=1e-4, max_iter=20):
    outdeg = np.diff(indptr)
    src = np.repeat(np.arange(n), outdeg)
    score = np.full(n, 1.0 / n)
    it, err = 0, np.inf
    for it in range(1, max_iter + 1):
        contrib = np.where(outdeg > 0, score / np.maximum(outdeg, 1), 0.0)
        dangling = score[outdeg == 0].sum()
        new = np.full(n, (1 - alpha) / n + alpha * dangling / n)
        np.add.at(new, indices, alpha * contrib[src])
        err = np.abs(new - score).sum()
        score = new
        if err < tol:
            break
    return score, it


@pytest.mark.parametrize("gf", NONEMPTY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", KINDS)
def test_pagerank_matches_reference(gf, kind):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, _ = make(kind, tg)
    st = {}
    got = gpu.pagerank(dg, stats=st)
    ref, it = naive_pagerank(tg.n, indptr, indices)
    assert abs(got.sum() - 1.0) < 1e-6
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)
    assert abs(st["iterations"] - it) <= 1


@pytest.mark.parametrize("gf", [G.powerlaw, G.star, G.chain, G.uniform], ids=lambda f: f.__name__)
@pytest.mark.parametrize("method", ["tile", "pull"])
def test_pagerank_stops_at_the_iteration_the_rule_names(gf, method):
    """The stop rule reads each iteration's change while the next one already runs: the scores
    returned must be those of the first iteration under tol (a run capped at that many
    iterations; atomics may round differently), not the extra iteration's, with its change."""
    from graphene_py import gpu
    dg, indptr, indices, _ = make("sym", gf())
    for tol in (1e-3, 1e-6):
        st = {}
        got = gpu.pagerank(dg, tol=tol, max_iter=200, method=method, stats=st)
        it = st["iterations"]
        assert st["error"] < tol and it < 200
        capped, later, before = {}, {}, {}
        same = gpu.pagerank(dg, tol=0.0, max_iter=it, method=method, stats=capped)
        nxt = gpu.pagerank(dg, tol=0.0, max_iter=it + 1, method=method, stats=later)
        step = np.abs(nxt - same).sum()
        assert step > 0
        assert np.abs(got - same).sum() < 1e-3 * step
        assert capped["iterations"] == it and abs(capped["error"] - st["error"]) <= 1e-9 * tol
        if it > 1:
            gpu.pagerank(dg, tol=0.0, max_iter=it - 1, method=method, stats=before)
            assert before["error"] >= tol


@pytest.mark.parametrize("gf", [G.powerlaw, G.star, G.disconnected, G.uniform], ids=lambda f: f.__name__)
def test_pagerank_converged_equals_networkx(gf):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, _ = make("directed", tg)
    got = gpu.pagerank(dg, tol=1e-12, max_iter=1000)
    g = nx.DiGraph()
    g.add_nodes_from(range(tg.n))
    g.add_edges_from(zip(np.repeat(np.arange(tg.n), np.diff(indptr)).tolist(), indices.tolist()))
    ref = nx.pagerank(g, alpha=0.85, tol=1e-13, max_iter=10000)
    ref = np.array([ref[i] for i in range(tg.n)])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-9)


@pytest.mark.parametrize("gf", [G.powerlaw, G.star, G.duplicates, G.one_vertex], ids=lambda f: f.__name__)
def test_pagerank_reorder_off_same_result(gf):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, _ = make("directed", tg)
    st1, st2 = {}, {}
    a = gpu.pagerank(dg, reorder=True, stats=st1)
    b = gpu.pagerank(dg, reorder=False, stats=st2)
    assert st1["reordered"] and not st2["reordered"]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-10)
    for bounds in [(4, 32, 1024), (1, 2, 3)]:
        c = gpu.pagerank(dg, hub_cache=True, bounds=bounds, block_threads=512)
        np.testing.assert_allclose(c, b, rtol=1e-5, atol=1e-10)
    np.testing.assert_allclose(a, naive_pagerank(tg.n, indptr, indices)[0], rtol=1e-5, atol=1e-9)


# Small tiles so that the tiny graphs still have many groups, segments and chunks: all edges tiled
# and staged always; sparse tiles left to the per-hub rest lists, never staged, float partial sums;
# everything in the rest lists; no staging buffer at all.
TILE_SMALL = [dict(gbits=2, sbits=3, chunk=5, load_min=0, dense_min=0, stage=True, runs=False),
              dict(gbits=2, sbits=3, chunk=7, load_min=1 << 40, fixed=False, dense_min=3, stage=True,
                   runs=False),
              dict(gbits=1, sbits=15, chunk=1 << 20, load_min=3, threads=64, dense_min=1 << 40,
                   stage=True, runs=False),
              dict(gbits=2, sbits=2, chunk=3, stage=False, dense_min=2, runs=False),
              # hub-major tiles, runs of equal hubs summed per lane and across the warp: chunks
              # cut inside runs and at odd word offsets (the 16-byte loads' alignment)
              dict(gbits=2, sbits=3, chunk=5, dense_min=0, runs=True),
              dict(gbits=3, sbits=12, chunk=37, dense_min=2, runs=True, fixed=False, threads=64),
              dict(gbits=1, sbits=15, chunk=1 << 20, dense_min=0, runs=True)]


@pytest.mark.parametrize("gf", NONEMPTY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", KINDS)
def test_pagerank_tile_equals_pull(gf, kind):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, _ = make(kind, tg)
    ref = naive_pagerank(tg.n, indptr, indices)[0]
    pull = gpu.pagerank(dg, method="pull")
    has_hubs = np.bincount(indices, minlength=tg.n).max(initial=0) >= 3
    for reorder in (True, False):
        for opts in TILE_SMALL:
            st = {}
            got = gpu.pagerank(dg, method="tile", bounds=(1, 2, 3), tile=opts, reorder=reorder, stats=st)
            assert st["method"] == ("tile" if has_hubs else "pull")
            np.testing.assert_allclose(got, pull, rtol=1e-5, atol=1e-10)
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("gbits,sbits,dense_min", [(2, 3, 0), (3, 5, 4), (1, 15, 0)])
def test_hub_tiles_in_hub_order_hold_each_tiles_edges_sorted_by_hub(gbits, sbits, dense_min):
    """order="hub" (pr_tile's runs) keeps every tile's edges, re-sorted by hub then source: the
    warp's reduction relies on equal hubs sitting next to each other."""
    import cupy as cp
    tg = G.powerlaw()
    dg, indptr, indices, _ = make("directed_in", tg)
    iptr, iidx = dg.in_csr()
    deg = cp.diff(iptr)
    hubs = cp.nonzero(deg >= 3)[0].astype(cp.int32)
    a = dg.hub_tiles(("test", 0), iptr, iidx, hubs, gbits, sbits, 5, dense_min, order="source")
    b = dg.hub_tiles(("test", 0), iptr, iidx, hubs, gbits, sbits, 5, dense_min, order="hub")
    assert a is not b and a["tiled_edges"] == b["tiled_edges"] > 0
    assert a["rest_edges"] == b["rest_edges"]
    np.testing.assert_array_equal(cp.asnumpy(a["tile_ptr"]), cp.asnumpy(b["tile_ptr"]))
    np.testing.assert_array_equal(cp.asnumpy(a["rest_idx"]), cp.asnumpy(b["rest_idx"]))
    tp = cp.asnumpy(a["tile_ptr"])
    wa, wb = cp.asnumpy(a["words"]), cp.asnumpy(b["words"])
    G_ = 1 << gbits
    for t in range(tp.size - 1):
        x, y = wa[tp[t]:tp[t + 1]], wb[tp[t]:tp[t + 1]]
        np.testing.assert_array_equal(np.sort(x), np.sort(y))
        hub, src = y & (G_ - 1), y >> gbits
        order = np.lexsort((src, hub))
        np.testing.assert_array_equal(order, np.arange(y.size))
        np.testing.assert_array_equal(np.diff(x.astype(np.int64)) >= 0, True)   # source-major


def _big_hubs(n=150_000, m=600_000, seed=5):
    """Hub 7 is pointed to by every other vertex (in-degree n-1 > 65,536), hub n-3 by 70,000; the
    other edges have heavy-tailed destinations; the last 1,000 vertices have no out-edges."""
    import types
    rng = np.random.default_rng(seed)
    others = np.delete(np.arange(n - 1000), 7)
    s2 = rng.choice(n - 1000, 70_000, replace=False)
    s3 = rng.integers(0, n - 1000, m)
    d3 = (rng.zipf(1.6, m) * 7919) % n
    src = np.concatenate([others, s2, s3])
    dst = np.concatenate([np.full(others.size, 7), np.full(s2.size, n - 3), d3])
    return types.SimpleNamespace(n=n, src=src, dst=dst, weights=None)


@pytest.mark.parametrize("kind", ["directed", "sym"])
def test_pagerank_tile_hubs_over_65536(kind):
    from graphene_py import gpu
    tg = _big_hubs()
    dg, indptr, indices, _ = make(kind, tg)
    assert np.bincount(indices, minlength=tg.n).max() > 65_536
    ref, it = naive_pagerank(tg.n, indptr, indices)
    pull = gpu.pagerank(dg, method="pull")
    np.testing.assert_allclose(pull, ref, rtol=1e-5, atol=1e-9)
    for opts in [None, dict(gbits=3, sbits=10, chunk=4096, dense_min=64, stage=True, runs=False),
                 dict(load_min=0, dense_min=0, stage=True, runs=False), dict(min_degree=2048),
                 dict(gbits=14, sbits=14, threads=1024, stage=True, dense_min=1, runs=False),
                 dict(runs=False),
                 dict(runs=True), dict(runs=True, dense_min=0, chunk=1000, threads=96)]:
        for reorder in (True, False):
            st = {}
            got = gpu.pagerank(dg, method="tile", tile=opts, reorder=reorder, stats=st)
            assert st["method"] == "tile" and st["tile"]["nhubs"] >= 2
            np.testing.assert_allclose(got, pull, rtol=1e-5, atol=1e-10)
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-9)
            assert abs(st["iterations"] - it) <= 1
            assert abs(got.sum() - 1.0) < 1e-6
    for reorder in (True, False):   # the default, "auto": tiles on the renumbered layout only
        st = {}
        got = gpu.pagerank(dg, reorder=reorder, stats=st)
        assert st["reordered"] == reorder
        assert st["method"] == ("tile" if reorder else "pull")
        np.testing.assert_allclose(got, pull, rtol=1e-5, atol=1e-10)


def test_pagerank_bad_method():
    from graphene_py import gpu
    tg = G.uniform()
    dg, _, _, _ = make("directed", tg)
    with pytest.raises(ValueError):
        gpu.pagerank(dg, method="push")
    with pytest.raises(ValueError):
        gpu.pagerank(dg, tile=dict(gbits=16, sbits=16))     # 768 KB of shared memory
    with pytest.raises(ValueError):
        gpu.pagerank(dg, tile=dict(nope=1))


def test_pagerank_empty():
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    dg = DeviceGraph.from_csr(np.zeros(1, np.int64), np.zeros(0, np.int64))
    assert gpu.pagerank(dg).shape == (0,)


# -- WCC ------------------------------------------------------------------------------------------
def ref_wcc(n, indptr, indices):
    a = scipy_sparse.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(n, n))
    _, lab = csgraph.connected_components(a, directed=True, connection="weak")
    mins = np.full(lab.max() + 1 if n else 0, n, np.int64)
    np.minimum.at(mins, lab, np.arange(n))
    return mins[lab]


@pytest.mark.parametrize("method", ["afforest", "full"])
@pytest.mark.parametrize("gf", G.ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", ["sym", "directed", "directed_in"])
def test_wcc_matches_scipy(gf, kind, method):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, _ = make(kind, tg)
    st = {}
    got = gpu.wcc(dg, method=method, stats=st)
    ref = ref_wcc(tg.n, indptr, indices)
    np.testing.assert_array_equal(got, ref)
    assert st["n_components"] == len(np.unique(ref))
    np.testing.assert_array_equal(gpu.wcc(dg, method=method, verify=True), ref)


@pytest.mark.parametrize("method", ["afforest", "full"])
def test_wcc_random_many_components(method):
    from graphene_py import gpu
    rng = np.random.default_rng(11)
    n = 50000
    s = rng.integers(0, n, 30000)
    d = rng.integers(0, n, 30000)
    indptr, indices, _ = to_csr(n, s, d)
    from graphene_py.gpu import DeviceGraph
    got = gpu.wcc(DeviceGraph.from_csr(indptr, indices), method=method)
    np.testing.assert_array_equal(got, ref_wcc(n, indptr, indices))


def _cycle_with_satellites():
    """A giant cycle 5000..5999; satellites s_i = 7000+i, each with two private leaves 100+2i,
    101+2i and one edge to the cycle vertex g_i = 5000+7i. Sorted, s_i's list is [leaf, leaf, g_i]
    and g_i's is [g_i - 1, g_i + 1, s_i]: the edge that joins each satellite to the giant sits at
    position 2 of both lists, so Afforest's neighbour sampling (positions 0 and 1) cannot see it and
    only its last phase (the lists of vertices outside the giant component) can."""
    n, k = 8000, 100
    g = np.arange(5000, 6000)
    src = [g, np.arange(7000, 7000 + k), np.arange(7000, 7000 + k), np.arange(7000, 7000 + k)]
    dst = [np.roll(g, -1), 100 + 2 * np.arange(k), 101 + 2 * np.arange(k), 5000 + 7 * np.arange(k)]
    return n, np.concatenate(src), np.concatenate(dst)


def test_wcc_afforest_links_edges_beyond_the_sample():
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    n, s, d = _cycle_with_satellites()
    indptr, indices, _ = to_csr(n, s, d, symmetrize=True)
    j = indptr[7000]
    assert indices[j + 2] == 5000 and indices[indptr[5000] + 2] == 7000   # the construction holds
    st = {}
    got = gpu.wcc(DeviceGraph.from_csr(indptr, indices, symmetric=True), stats=st)
    ref = ref_wcc(n, indptr, indices)
    np.testing.assert_array_equal(got, ref)
    assert got[7000] == got[100] == 100 and got[5000] == 100   # satellites joined the giant
    assert st["giant"] >= 0


def test_wcc_afforest_directed_needs_in_lists():
    """Directed: giant cycle vertices g_i have a third out-edge to a sink t_i (no out-edges). The
    giant's own lists are skipped and t_i has no list, so only the in-list pass can join t_i."""
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    n = 3000
    g = np.arange(1000, 2000)
    t = 2000 + np.arange(1000)
    src = np.concatenate([g, g, g])
    dst = np.concatenate([np.roll(g, -1), np.roll(g, 1), t])
    indptr, indices, _ = to_csr(n, src, dst)
    for kind in ("plain", "with_in"):
        if kind == "plain":
            dg = DeviceGraph.from_csr(indptr, indices)
        else:
            t_ptr, t_idx, _ = to_csr(n, indices, np.repeat(np.arange(n), np.diff(indptr)))
            dg = DeviceGraph.from_csr(indptr, indices, in_indptr=t_ptr, in_indices=t_idx)
        got = gpu.wcc(dg)
        np.testing.assert_array_equal(got, ref_wcc(n, indptr, indices))
        assert np.all(got[t] == 1000)


# -- multi-source BFS -----------------------------------------------------------------------------
@pytest.mark.parametrize("gf", NONEMPTY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("method,bits", [("bfs", 64), ("bits", 32), ("bits", 64)])
def test_msbfs_matches_single_bfs(gf, method, bits):
    from graphene_py import gpu
    tg = gf()
    if tg.n > 20000:   # star: 70k vertices x sources is fine but keep the naive reference quick
        srcs = [3, 0, 1, 3]
    else:
        rng = np.random.default_rng(4)
        srcs = list(rng.integers(0, tg.n, 40)) + [0, 0]   # > 32 sources (two words) and a repeat
    for kind in ("directed", "sym"):
        dg, indptr, indices, _ = make(kind, tg)
        st = {}
        got = gpu.msbfs(dg, srcs, word_bits=bits, batch_levels=8, method=method, stats=st)
        assert got.shape == (len(srcs), tg.n)
        for j, s in enumerate(srcs):
            np.testing.assert_array_equal(got[j], naive_bfs_depth(indptr, indices, s))
        assert st["levels"] >= got.max()           # every depth was reached in a level run


@pytest.mark.parametrize("gf", NONEMPTY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("count", [5, 40])
def test_gpu_msbfs_from_a_partial_pass(gf, count):
    """gpu msbfs(init=(visited, level)) from the bits a BFS reached by several levels (32- and
    64-bit words) writes exactly the later levels: into the rows so far (depth=) the whole
    depths, into fresh rows only the levels after the cut; a wrong length is refused."""
    from graphene_py import gpu
    from graphene_py.errors import GrapheneError
    cp = pytest.importorskip("cupy")
    tg = gf()
    rng = np.random.default_rng(5)
    srcs = [int(x) for x in rng.integers(0, tg.n, count)] + [0]
    for kind in ("directed", "sym"):
        dg, indptr, indices, _ = make(kind, tg)
        full = np.stack([naive_bfs_depth(indptr, indices, s) for s in srcs])
        for level in sorted({0, 1, int(full.max()) // 2, int(full.max())}):
            seen = (full >= 0) & (full <= level)
            words = np.zeros(tg.n, dtype=np.uint64)
            for i in range(len(srcs)):
                words[seen[i]] |= np.uint64(1) << np.uint64(i)
            so_far = np.where(seen, full, -1).astype(np.int32)
            got = gpu.msbfs(dg, srcs, init=(words, level), depth=cp.asarray(so_far))
            np.testing.assert_array_equal(got, full, err_msg=f"{kind} level {level}")
            got = gpu.msbfs(dg, srcs, init=(words, level))
            np.testing.assert_array_equal(got, np.where(full > level, full, -1),
                                          err_msg=f"{kind} level {level}, fresh rows")
    with pytest.raises(GrapheneError, match="msbfs init"):
        gpu.msbfs(dg, srcs, init=(np.zeros(tg.n + 1, np.uint64), 0))


def test_msbfs_method_checked():
    from graphene_py import gpu
    from graphene_py.errors import GrapheneError
    dg, *_ = make("sym", G.star())
    with pytest.raises(GrapheneError, match="method must be bfs or bits"):
        gpu.msbfs(dg, [0], method="words")


# -- SSSP -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("gf", NONEMPTY, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", ["sym", "directed"])
def test_sssp_matches_dijkstra(gf, kind):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, w = make(kind, tg)
    a = scipy_sparse.csr_matrix((w.astype(np.float64), indices, indptr), shape=(tg.n, tg.n))
    for s in sources_of(tg.n, 2, seed=3):
        ref = csgraph.dijkstra(a, directed=True, indices=s)
        for delta in (None, 1.0, 1e6):
            got = gpu.sssp(dg, s, delta=delta)
            np.testing.assert_allclose(got, ref, rtol=1e-12)
            assert np.array_equal(np.isinf(got), np.isinf(ref))


def test_sssp_fractional_weights():
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    rng = np.random.default_rng(8)
    n = 3000
    s, d = rng.integers(0, n, 20000), rng.integers(0, n, 20000)
    w = rng.random(20000).astype(np.float32) * 3
    w[:50] = 0.0
    indptr, indices, ww = to_csr(n, s, d, w)
    dg = DeviceGraph.from_csr(indptr, indices, ww)
    a = scipy_sparse.csr_matrix((ww.astype(np.float64) + 1e-300, indices, indptr), shape=(n, n))
    ref = csgraph.dijkstra(a, directed=True, indices=int(s[0]))
    got = gpu.sssp(dg, int(s[0]), delta=0.5)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


def test_sssp_negative_weight_rejected():
    from graphene_py import gpu
    from graphene_py.errors import GrapheneError
    from graphene_py.gpu import DeviceGraph
    dg = DeviceGraph.from_csr(np.array([0, 1, 1]), np.array([1]), np.array([-1.0], np.float32))
    with pytest.raises(GrapheneError):
        gpu.sssp(dg, 0)


# -- k-core ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("gf", G.ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", ["sym", "directed"])
@pytest.mark.parametrize("block_loop", [True, False])
def test_kcore_matches_networkx(gf, kind, block_loop):
    from graphene_py import gpu
    tg = gf()
    dg, indptr, indices, _ = make(kind, tg)
    st = {}
    got = gpu.kcore(dg, stats=st, block_loop=block_loop)
    if not block_loop:
        assert st.get("device_loop_rounds", 0) == 0
    elif gf is G.chain:          # two ends peeled a round: every round on the device
        assert st["device_loop_rounds"] == st["rounds"] >= tg.n // 2 - 1
    srcs = np.repeat(np.arange(tg.n), np.diff(indptr))
    g = nx.Graph() if kind == "sym" else nx.DiGraph()
    g.add_nodes_from(range(tg.n))
    g.add_edges_from((int(a), int(b)) for a, b in zip(srcs, indices) if a != b)
    ref = nx.core_number(g)
    np.testing.assert_array_equal(got, np.array([ref[i] for i in range(tg.n)], dtype=np.int32))


# -- DeviceGraph ----------------------------------------------------------------------------------
def test_memory_budget_error():
    from graphene_py.gpu import DeviceGraph, GpuMemoryError
    tg = G.powerlaw()
    indptr, indices, _ = to_csr(tg.n, tg.src, tg.dst)
    with pytest.raises(GpuMemoryError, match="budget"):
        DeviceGraph.from_csr(indptr, indices, gpu_mem="64K")
    DeviceGraph.from_csr(indptr, indices, gpu_mem="64M")   # fits


def test_bad_csr_rejected():
    from graphene_py.errors import GrapheneError
    from graphene_py.gpu import DeviceGraph
    with pytest.raises(GrapheneError):
        DeviceGraph.from_csr(np.array([0, 1, 2]), np.array([0, 5]))      # ID out of range
    with pytest.raises(GrapheneError):
        DeviceGraph.from_csr(np.array([0, 2, 1]), np.array([0]))         # bad indptr


def test_from_graph_roundtrip(tmp_path):
    """DeviceGraph.from_graph on a real dataset, when the partitioner is importable."""
    part = pytest.importorskip("graphene_py.partition")
    if not hasattr(part, "partition_arrays"):
        pytest.skip("graphene_py.partition.partition_arrays not available yet")
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    tg = G.powerlaw()
    for i, (sym, inn) in enumerate([(False, False), (False, True), (True, False)]):
        for x in "ab":
            (tmp_path / f"d{i}{x}").mkdir()
        graph = part.partition_arrays(tg.src, tg.dst, weights=tg.weights, num_vertices=tg.n,
                                      disks=[str(tmp_path / f"d{i}a"), str(tmp_path / f"d{i}b")],
                                      name=f"pl{i}", rows=2, cols=2, symmetrize=sym, in_edges=inn,
                                      register=False)
        dg = DeviceGraph.from_graph(graph)
        assert dg.symmetric == sym and dg.has_in_edges == (sym or inn)
        indptr, indices, w = graph.to_csr("out")
        s = int(np.flatnonzero(np.diff(indptr))[0])
        parent, depth = gpu.bfs(dg, s)
        check_bfs(indptr, indices, s, parent, depth)
        np.testing.assert_array_equal(gpu.wcc(dg), ref_wcc(tg.n, indptr, indices))
        a = scipy_sparse.csr_matrix((w.astype(np.float64), indices, indptr), shape=(tg.n, tg.n))
        np.testing.assert_allclose(gpu.sssp(dg, s), csgraph.dijkstra(a, indices=s), rtol=1e-12)


def test_run_entry_point_matches_cpu_path(tmp_path):
    """The algorithms' GPU entries through the one dispatcher (what `graphene run --device gpu`
    and graphene_py.<algo>(device="gpu") call) equal the CPU path's results."""
    part = pytest.importorskip("graphene_py.partition")
    algos = pytest.importorskip("graphene_py.algos.bfs")
    from graphene_py.algos import registry

    class gpu:   # noqa: N801 - the old gpu.run(name, graph, **options) spelling, on the dispatcher
        @staticmethod
        def run(name, graph, **options):
            return registry.dispatch(name, graph, device="gpu", **options)
    import graphene_py.algos.wcc as cwcc
    import graphene_py.algos.kcore as ckcore
    tg = G.powerlaw()
    for x in "ab":
        (tmp_path / x).mkdir()
    graph = part.partition_arrays(tg.src, tg.dst, weights=tg.weights, num_vertices=tg.n,
                                  disks=[str(tmp_path / "a"), str(tmp_path / "b")], name="r",
                                  rows=2, cols=2, in_edges=True, register=False)
    g = gpu.run("bfs", graph, src=5, threads=2)
    c = algos.run(graph, src=5, in_memory=True)
    np.testing.assert_array_equal(g.depth, c.depth)
    assert g.n_reached == c.n_reached
    np.testing.assert_array_equal(gpu.run("wcc", graph).labels, cwcc.run(graph, in_memory=True).labels)
    np.testing.assert_array_equal(gpu.run("kcore", graph).core_number,
                                  ckcore.run(graph, in_memory=True).core_number)
    pr = gpu.run("pagerank", graph, tolerance=1e-4)
    assert abs(pr.scores.sum() - 1) < 1e-6 and pr.iterations >= 1
    ms = gpu.run("msbfs", graph, sources=[1, 2, 3, 2])
    cms = registry.dispatch("msbfs", graph, sources=[1, 2, 3, 2], in_memory=True)
    # the depths stay in GPU memory until asked for; the counts are the CPU path's already
    assert ms.depths_on_gpu and "depths" not in ms.host_arrays()
    np.testing.assert_array_equal(ms.reached, cms.reached)
    assert ms.to_json()["reached"] == [int(x) for x in cms.reached] and ms.depths_on_gpu
    np.testing.assert_array_equal(ms.depths, cms.depths)        # copied now, once
    assert not ms.depths_on_gpu and ms.depths is ms.depths
    ms2 = gpu.run("apsp", graph, sources=[1, 2, 3, 2])
    ms2.save(str(tmp_path / "d.npz"))                             # save() copies them too
    np.testing.assert_array_equal(np.load(tmp_path / "d.npz")["depths"], cms.depths)
    ms3 = gpu.run("msbfs", graph, sources=[4], output=str(tmp_path / "o.npy"))
    assert not ms3.depths_on_gpu
    np.testing.assert_array_equal(np.load(tmp_path / "o.npy"), ms3.depths)
    ms2.depths = cms.depths[:1]                                   # (a caller's own array)
    assert ms2.depths.shape == (1, tg.n) and not ms2.depths_on_gpu
    sp = gpu.run("sssp", graph, src=5)
    a = scipy_sparse.csr_matrix((graph.to_csr()[2].astype(np.float64), graph.to_csr()[1],
                                 graph.to_csr()[0]), shape=(tg.n, tg.n))
    np.testing.assert_allclose(sp.dist, csgraph.dijkstra(a, indices=5), rtol=1e-12)


def test_out_of_memory_becomes_gpu_memory_error():
    import cupy as cp
    from graphene_py import gpu
    from graphene_py.gpu import GpuMemoryError
    tg = G.star()
    dg, *_ = make("sym", tg)
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    try:
        pool.set_limit(size=pool.total_bytes() + (1 << 20))
        with pytest.raises(GpuMemoryError, match="msbfs"):
            gpu.msbfs(dg, list(range(64)))
    finally:
        pool.set_limit(size=0)
    assert gpu.msbfs(dg, [3]).shape == (1, tg.n)      # works again without the limit


# -- hybrid CPU/GPU BFS (--device auto) ------------------------------------------------------------
class _Schedule:
    """A forced offload schedule with OffloadPolicy's interface: 'alternate' switches device every
    superstep (the state moves every time), 'gpu_first' starts on the GPU and comes back for good
    after two supersteps."""

    def __init__(self, kind):
        self.kind, self.devs = kind, []

    def decide(self, frontier_size, frontier_edges):
        i = len(self.devs)
        if self.kind == "alternate":
            d = "gpu" if i % 2 else "cpu"
        else:
            d = "gpu" if i < 2 else "cpu"
        self.devs.append(d)
        return d

    def summary(self):
        moves = sum(a != b for a, b in zip(["cpu"] + self.devs, self.devs))
        return {"cpu": self.devs.count("cpu"), "gpu": self.devs.count("gpu"), "moves": moves}


def _hybrid_dataset(tmp_path, gname, layout):
    """Graph `gname` partitioned 2x2 on two folders: undirected, directed with in-edges, or not."""
    return G.partitioned(tmp_path, gname, layout)


@pytest.mark.parametrize("sched", ["alternate", "gpu_first", "policy"])
@pytest.mark.parametrize("layout", ["sym", "directed_in", "directed"])
@pytest.mark.parametrize("gname", ["chain", "star", "powerlaw", "disconnected", "isolated_ends"])
def test_hybrid_bfs_equals_cpu_whatever_ran_where(tmp_path, gname, layout, sched):
    from graphene_py.algos import bfs
    g = _hybrid_dataset(tmp_path, gname, layout)
    deg = g.degrees("out")
    src = int(np.flatnonzero(deg)[0]) if gname != "chain" else 0
    ref = bfs.run(g, src=src, threads=2)
    pol = None if sched == "policy" else _Schedule(sched)
    r = bfs.run(g, src=src, threads=2, device="auto", offload_policy=pol)
    np.testing.assert_array_equal(r.depth, ref.depth)
    assert bfs.verify(g, r) == []
    assert r.device_note == "hybrid CPU/GPU"
    devs = [st["device"] for st in r.supersteps]
    assert r.gpu_supersteps == devs.count("gpu") and r.cpu_supersteps == devs.count("cpu")
    if sched == "alternate" and ref.levels > 2:
        # a GPU turn may finish the run (its device-side block loop runs many small levels in one
        # launch, e.g. all of a chain); on the power-law graph the state goes back and forth
        assert r.gpu_supersteps > 0 and r.cpu_supersteps > 0 and r.device_moves >= 1
        if gname == "powerlaw":
            assert r.device_moves >= 2
    if sched == "gpu_first":
        assert devs[0] == "gpu"


@pytest.mark.parametrize("layout", ["sym", "directed_in"])
@pytest.mark.parametrize("gname", ["star", "powerlaw", "isolated_ends"])
def test_hybrid_bfs_past_the_gpu_budget_reads_heads(tmp_path, gname, layout):
    """--device auto with a --gpu-mem below the lists: the hybrid's GPU levels read the lists
    zero-copy through their heads (as many as the budget holds), the state moves every
    superstep, and the depths equal the CPU's."""
    from graphene_py.algos import bfs
    from graphene_py.gpu import resident
    from graphene_py.gpu.device_graph import STATE_BYTES_PER_VERTEX
    g = _hybrid_dataset(tmp_path, gname, layout)
    n, m = g.num_vertices, g.num_edges
    arrays = 2 if g.in_partitions is not None else 1
    budget = (n + 1) * 8 * arrays + STATE_BYTES_PER_VERTEX * n + m * 4 // 2
    src = int(np.flatnonzero(g.degrees("out"))[0])
    ref = bfs.run(g, src=src, threads=2)
    r = bfs.run(g, src=src, threads=2, device="auto", offload_policy=_Schedule("alternate"),
                gpu_mem=budget)
    dg = resident.device_graph(g, budget)
    fit = (m * 4 // 2) // (4 * n * arrays)      # heads the budget holds (a sparse star's: none)
    assert dg.tier() == "host" and dg.head("out")[1] == min(32, fit)
    np.testing.assert_array_equal(r.depth, ref.depth)
    assert bfs.verify(g, r) == []


def test_auto_planned_for_the_gpu_runs_on_the_cpu_when_the_gpu_cannot_hold_it(tmp_path,
                                                                             monkeypatch):
    """`--device auto` whose plan said GPU, under a --gpu-mem too small for the offsets and the
    state (the plan cannot know the card's memory without CuPy): the GPU's load refuses, the
    CPU runs it, and the reason says so; `--device gpu` keeps the error."""
    from graphene_py.algos import bfs, registry
    from graphene_py.errors import GrapheneError
    g = _hybrid_dataset(tmp_path, "powerlaw", "sym")
    src = int(np.flatnonzero(g.degrees("out"))[0])
    ref = bfs.run(g, src=src, threads=2)
    monkeypatch.setattr(registry, "_choose", lambda *a, **k: ("gpu", "test: planned the GPU"))
    r = registry.dispatch("bfs", g, device="auto", src=src, threads=2, gpu_mem="1K")
    np.testing.assert_array_equal(r.depth, ref.depth)
    assert r.device == "cpu" and r.device_reason.startswith("test: planned the GPU; the GPU "
                                                            "could not hold it (")
    assert all(st["device"] == "cpu" for st in r.supersteps)
    with pytest.raises(GrapheneError, match="GPU memory"):
        registry.dispatch("bfs", g, device="gpu", src=src, threads=2, gpu_mem="1K")


# -- tiers: edge arrays in pinned host memory, read zero-copy --------------------------------------
@pytest.mark.parametrize("gf", [G.powerlaw, G.star, G.chain, G.isolated_ends, G.duplicates],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("kind", ["sym", "in", "directed"])
def test_list_heads_resident_and_the_rest_zero_copy(gf, kind):
    """Edge arrays zero-copy, the first H edges of every list in GPU memory (a star's hub list is
    far longer than H; H of 1, 3 and what the budget holds, never more than it holds: a chain's
    budget holds none): every BFS equals the reference and the all-resident run, WCC, k-core and
    MS-BFS (which read heads too) equal the all-resident run, and each head holds its list's
    first edges."""
    import cupy as cp
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    from graphene_py.gpu.device_graph import STATE_BYTES_PER_VERTEX, HEAD_MAX
    tg = gf()
    indptr, indices, _ = to_csr(tg.n, tg.src, tg.dst, symmetrize=(kind == "sym"))
    n, m = tg.n, len(indices)
    t_ptr = t_idx = None
    if kind == "in":
        order = np.lexsort((np.repeat(np.arange(n), np.diff(indptr)), indices))
        t_idx = np.repeat(np.arange(n), np.diff(indptr))[order].astype(np.int32)
        t_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(indices, minlength=n), out=t_ptr[1:])
    vb = (n + 1) * 8 * (2 if kind == "in" else 1) + STATE_BYTES_PER_VERTEX * n
    srcs = [int(v) for v in np.flatnonzero(np.diff(indptr))[:3]]
    ref = DeviceGraph.from_csr(indptr, indices, in_indptr=t_ptr, in_indices=t_idx,
                               symmetric=(kind == "sym"))
    want = {s: gpu.bfs(ref, s)[1] for s in srcs}
    # (a directed CSR without in-edges would build them on the GPU, past this budget)
    others = {} if kind == "directed" else dict(
        wcc=gpu.wcc(ref), core=gpu.kcore(ref), ms=gpu.msbfs(ref, np.array(srcs)))
    for heads in (1, 3, None):
        dg = DeviceGraph.from_csr(indptr, indices, in_indptr=t_ptr, in_indices=t_idx,
                                  symmetric=(kind == "sym"), gpu_mem=vb + m * 4 - 4,
                                  heads=heads)
        assert dg.placement["out"] == "host"
        h = dg.head("out")[1]
        fit = (m * 4 - 4) // (4 * n * (2 if kind == "in" else 1))   # what the budget holds
        assert h == min(HEAD_MAX if heads is None else heads, fit)
        if h:
            assert dg.bytes() >= n * h * 4
            got = cp.asnumpy(dg.head("out")[0]).reshape(n, h)
            for v in range(0, n, max(1, n // 200)):
                lst = indices[indptr[v]:indptr[v + 1]][:h]
                np.testing.assert_array_equal(got[v, :lst.size], lst)
                assert (got[v, lst.size:] == -1).all()
        if kind == "in":
            assert dg.head("in")[1] == h
        for s in srcs:
            for direction in ("auto", "push", "pull"):
                if direction == "pull" and kind == "directed":
                    continue
                parent, depth = gpu.bfs(dg, s, direction=direction)
                check_bfs(indptr, indices, s, parent, depth)
                np.testing.assert_array_equal(depth, want[s], err_msg=(heads, s, direction))
        if others:
            got = dict(wcc=gpu.wcc(dg), core=gpu.kcore(dg), ms=gpu.msbfs(dg, np.array(srcs)))
            for k in others:
                np.testing.assert_array_equal(got[k], others[k], err_msg=(heads, k))


@pytest.mark.parametrize("kind", ["in", "sym"])
def test_tiers_zero_copy_equal_results(kind):
    """Budgets that keep every edge array resident, some of them, or none (offsets and state
    only): the placement follows the budget and every algorithm gives the same answer."""
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    from graphene_py.gpu.device_graph import STATE_BYTES_PER_VERTEX
    tg = G.powerlaw()
    indptr, indices, w = to_csr(tg.n, tg.src, tg.dst, tg.weights, symmetrize=(kind == "sym"))
    n, m = tg.n, len(indices)
    t_ptr = t_idx = None
    if kind == "in":
        order = np.lexsort((np.repeat(np.arange(n), np.diff(indptr)), indices))
        t_idx = np.repeat(np.arange(n), np.diff(indptr))[order]
        t_ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(indices, minlength=n), out=t_ptr[1:])
    vb = (n + 1) * 8 * (2 if kind == "in" else 1) + STATE_BYTES_PER_VERTEX * n
    budgets = {"gpu": None, "mixed": vb + m * 4 + 16, "host": vb + 16}
    results = {}
    for tier, budget in budgets.items():
        dg = DeviceGraph.from_csr(indptr, indices, w, in_indptr=t_ptr, in_indices=t_idx,
                                  symmetric=(kind == "sym"), gpu_mem=budget)
        assert dg.tier() == tier, (tier, dg.placement)
        assert (dg.host_bytes() > 0) == (tier != "gpu")
        s = int(np.flatnonzero(np.diff(indptr))[0])
        parent, depth = gpu.bfs(dg, s)
        check_bfs(indptr, indices, s, parent, depth)
        results[tier] = dict(depth=depth, wcc=gpu.wcc(dg), core=gpu.kcore(dg),
                             pr=gpu.pagerank(dg, tol=1e-10, max_iter=200),
                             ms=gpu.msbfs(dg, np.array([s, 1, 2])), sssp=gpu.sssp(dg, s))
    for tier in ("mixed", "host"):
        for k in ("depth", "wcc", "core", "ms", "sssp"):
            np.testing.assert_array_equal(results[tier][k], results["gpu"][k], err_msg=(tier, k))
        # all resident runs the renumbered/tiled kernels: another summation order
        np.testing.assert_allclose(results[tier]["pr"], results["gpu"]["pr"], rtol=1e-5, atol=1e-10)


def _in_lists(n, indptr, indices):
    order = np.lexsort((np.repeat(np.arange(n), np.diff(indptr)), indices))
    t_idx = np.repeat(np.arange(n), np.diff(indptr))[order].astype(np.int32)
    t_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=t_ptr[1:])
    return t_ptr, t_idx


def _chain_800():
    """A chain of 800 vertices: hundreds of rounds, each planned (the 5,000 of G.chain took
    100-190 s a case on the H200, this one 38-40 s)."""
    return G.chain(800)


@pytest.mark.parametrize("gf", [G.powerlaw, G.star, _chain_800], ids=["powerlaw", "star", "chain"])
@pytest.mark.parametrize("kind", ["sym", "directed", "in"])
def test_staged_chunks_give_the_resident_results(gf, kind):
    """Lists and weights in pinned host memory, chunks of them copied into GPU memory before the
    SSSP relaxations and k-core peel rounds that read them (gpu/chunks.py): forced copies into
    a few slots (rounds run in batches of chunks, slots reused), into slots for every chunk, the
    cost model's choice, and none give
    the all-resident run's distances and core numbers; the forced runs copied chunks; afterwards
    the kernels' chunk table is empty and the lists' heads that SSSP freed come back."""
    import cupy as cp
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph, _module
    from graphene_py.gpu import chunks as C
    from graphene_py.gpu.device_graph import STATE_BYTES_PER_VERTEX
    tg = gf()
    indptr, indices, w = to_csr(tg.n, tg.src, tg.dst, tg.weights, symmetrize=(kind == "sym"))
    n, m = tg.n, len(indices)
    t_ptr = t_idx = None
    if kind == "in":
        t_ptr, t_idx = _in_lists(n, indptr, indices)
    src = int(np.flatnonzero(np.diff(indptr))[0])
    ref = DeviceGraph.from_csr(indptr, indices, w, in_indptr=t_ptr, in_indices=t_idx,
                               symmetric=(kind == "sym"))
    want_d = gpu.sssp(ref, src, delta=40.0)
    want_c = gpu.kcore(ref) if kind != "directed" else None
    vb = (n + 1) * 8 * (2 if kind == "in" else 1) + STATE_BYTES_PER_VERTEX * n
    shift = 8                                   # 256 entries a chunk: many chunks, hubs across
    heads_fit = vb + 2 * 4 * n * (2 if kind == "in" else 1) + 64
    # every array in host memory; with 2 entries of each list as heads; the weights only
    for budget in (vb + 16, heads_fit, vb + m * 4 + 16):
        for mode, slots in (("copy", 5), ("copy", 10 ** 6), ("auto", 64), ("auto", None),
                            ("zero-copy", 64)):
            dg = DeviceGraph.from_csr(indptr, indices, w, in_indptr=t_ptr, in_indices=t_idx,
                                      symmetric=(kind == "sym"), gpu_mem=budget, heads=2)
            hosted = dg.placement["weights"] == "host"     # (a small graph's may all fit)
            assert hosted or budget == heads_fit
            h = dg.head("out")[1]
            if budget == heads_fit and dg.placement["out"] == "host":
                assert h == 2
            st = {}
            sb = None if slots is None else slots * (8 << shift)
            got = gpu.sssp(dg, src, delta=40.0, stats=st, chunks=mode, slot_bytes=sb,
                           chunk_shift=shift)
            np.testing.assert_array_equal(got, want_d, err_msg=(budget, mode, slots))
            if mode == "copy" and hosted:
                assert st["chunks_copied"] > 0 and st["chunk_bytes_copied"] > 0
                assert 0 < st["chunk_slots"] <= C.num_chunks(m, shift)
            if mode == "copy" and slots == 5 and hosted and gf is G.powerlaw:
                assert st["chunk_batched_rounds"] > 0       # more chunks read than slots
            if mode == "zero-copy":
                assert st.get("chunks_copied", 0) == 0
            assert dg.head("out")[1] == h          # built again after SSSP freed them
            if want_c is not None:
                st = {}
                core = gpu.kcore(dg, stats=st, chunks=mode, slot_bytes=sb, chunk_shift=shift,
                                 block_loop=(mode != "copy"))
                np.testing.assert_array_equal(core, want_c, err_msg=(budget, mode, slots))
                if mode == "copy" and dg.placement["out"] == "host" and gf is not G.chain:
                    assert st["chunks_copied"] > 0, st
            n_stage = np.zeros(1, np.int32)
            cp.cuda.runtime.memcpy(n_stage.ctypes.data, _module.module().get_global("g_stage_n").ptr,
                                   4, 2)
            assert n_stage[0] == 0
            del dg
    # a resident run after them reads its own arrays
    np.testing.assert_array_equal(gpu.sssp(ref, src, delta=40.0), want_d)
    cp.get_default_memory_pool().free_all_blocks()
    assert C.MAX_CHUNKS >= C.num_chunks(m, shift)


# -- PageRank handed over to the GPU in mid-run (--device auto, gpu/handoff.py) -------------------
@pytest.mark.parametrize("tier", ["resident", "stream-ssd", "stream-host"])
@pytest.mark.parametrize("layout", ["sym", "directed_in", "directed"])
@pytest.mark.parametrize("variant", ["delta", "pull"])
def test_pagerank_handed_over_equals_the_cpu_run(tmp_path, variant, layout, tier):
    """The CPU runs k iterations (forced hand-off points), the GPU's part in each tier iterates
    on from those scores: the result passes verify (one more exact iteration moves it by at most
    alpha x error), equals the CPU run to within the tolerance's bound, and says where each
    superstep ran. A directed dataset without in-lists cannot stream (pulls over in-lists): its
    load fails and the CPU finishes, with the same scores."""
    from graphene_py.algos import pagerank as PR
    g = _hybrid_dataset(tmp_path, "powerlaw", layout)
    tol = 1e-6
    ref = PR.run(g, variant=variant, tolerance=tol, max_iter=200, threads=2)
    # both within alpha / (1 - alpha) x tol of the fixed point, plus the GPU's float32
    # contributions' rounding (not counted in its error: tests above compare at rtol 1e-5)
    bound = 2 * 0.85 / 0.15 * tol + 1e-6
    for k in (1, 3):
        r = PR.run(g, variant=variant, tolerance=tol, max_iter=200, threads=2, device="auto",
                   handoff_at=k, gpu_tier=tier)
        assert PR.verify(g, r) == [], (k, r.supersteps[-1])
        assert np.abs(r.scores - ref.scores).sum() <= bound
        devs = [st["device"] for st in r.supersteps]
        if layout == "directed" and tier != "resident":
            assert r.device_moves == 0 and devs == ["cpu"] * len(devs)
            assert "the load failed" in r.supersteps[k - 1]["handoff"]
            continue
        assert devs[:k] == ["cpu"] * k and devs[k:] and set(devs[k:]) == {"gpu"}
        assert r.cpu_supersteps == k and r.gpu_supersteps == len(devs) - k
        assert r.device_moves == 1 and r.device == "cpu+gpu" and r.converged
        assert r.supersteps[k - 1]["handoff"] == f"moves here: forced after superstep {k}"
        want = "gpu-resident" if tier == "resident" else f"gpu-{tier}"
        assert all(st["mode"] == want for st in r.supersteps[k:])
        assert r.iterations > k and r.gpu_load_seconds > 0


def test_pagerank_auto_hands_over_through_dispatch(tmp_path, monkeypatch):
    """`--device auto` as the CLI runs it (registry.dispatch), with the plan's rule made to pick
    the hand-off on a small graph: the progress lines say the GPU was loading, then where the
    run moved, then the GPU's supersteps; the scores equal the CPU run's."""
    from graphene_py.algos import registry
    from graphene_py.algos.common import superstep_line
    from graphene_py.gpu import policy
    g = _hybrid_dataset(tmp_path, "powerlaw", "sym")
    monkeypatch.setattr(policy, "plan_handoff", lambda *a, **k: (True, "test: hand off"))
    lines = []
    r = registry.dispatch("pagerank-pull", g, device="auto", tolerance=1e-10, max_iter=100,
                          threads=2, handoff_at=2, gpu_mem="1G",
                          progress=lambda st: lines.append(superstep_line(len(lines), st)))
    ref = registry.dispatch("pagerank-pull", g, tolerance=1e-10, max_iter=100, threads=2)
    assert r.device_reason == "test: hand off" and r.device == "cpu+gpu"
    assert np.abs(r.scores - ref.scores).sum() < 1e-8
    assert "gpu: moves here: forced after superstep 2" in lines[1]
    assert "[gpu-" in lines[-1] and len(lines) == len(r.supersteps)


# -- WCC handed over to the GPU in mid-run (--device auto, gpu/handoff.py WCCPart) ----------------
@pytest.mark.parametrize("tier", ["resident", "stream-ssd", "stream-host"])
@pytest.mark.parametrize("layout", ["sym", "directed_in", "directed"])
@pytest.mark.parametrize("gname", ["powerlaw", "isolated_ends", "disconnected", "star"])
def test_wcc_handed_over_equals_the_cpu_run(tmp_path, gname, layout, tier):
    """The CPU runs k supersteps (forced hand-off points: BFS levels, then propagation), the
    GPU's part in each tier links every edge on top of its labels: the labels equal the CPU
    run's exactly and the supersteps say where they ran."""
    from graphene_py.algos import wcc as W
    g = _hybrid_dataset(tmp_path, gname, layout)
    ref = W.run(g, threads=2)
    assert W.verify(g, ref) == []
    from tests.test_handoff import _wcc_points
    for k in _wcc_points(ref.supersteps):      # (points every run reaches)
        r = W.run(g, threads=2, device="auto", handoff_at=k, gpu_tier=tier)
        np.testing.assert_array_equal(r.labels, ref.labels, err_msg=f"k={k}")
        assert r.labels.dtype == ref.labels.dtype and r.n_components == ref.n_components
        devs = [st["device"] for st in r.supersteps]
        assert devs[:k] == ["cpu"] * k and devs[k:] and set(devs[k:]) == {"gpu"}, devs
        assert r.cpu_supersteps == k and r.device == "cpu+gpu" and r.device_moves == 1
        assert r.supersteps[k - 1]["handoff"] == f"moves here: forced after superstep {k}"
        want = "gpu-resident" if tier == "resident" else f"gpu-{tier}"
        assert all(st["mode"] == want for st in r.supersteps[k:]), r.supersteps[k:]


@pytest.mark.parametrize("layout", ["sym", "directed_in"])
def test_gpu_wcc_from_a_forest(tmp_path, layout):
    """gpu wcc (Afforest and full union-find, resident) and the streamed union-find started
    from a forest of the components (each vertex under a random smaller ID of its component, or
    alone): the same labels as from every vertex alone. The labels follow init: a forest that
    joins two components is not repaired (so the hand-off's must be right)."""
    from graphene_py.algos import wcc as W
    from graphene_py.gpu import DeviceGraph, algorithms as A, streamed
    g = _hybrid_dataset(tmp_path, "disconnected", layout)
    ref = W.run(g, threads=2).labels.astype(np.int64)
    n = g.num_vertices
    rng = np.random.default_rng(5)
    init = np.arange(n, dtype=np.int64)
    for v in range(n):              # a random smaller vertex of v's component, or v itself
        same = np.flatnonzero(ref[:v] == ref[v])
        if len(same) and rng.random() < 0.7:
            init[v] = rng.choice(same)
    dg = DeviceGraph.from_graph(g)
    np.testing.assert_array_equal(A.wcc(dg, init=init), ref)
    np.testing.assert_array_equal(A.wcc(dg, init=init, method="full"), ref)
    for src in ("ssd", "host"):
        np.testing.assert_array_equal(streamed.wcc(g, source=src, init=init).astype(np.int64), ref)
    # a forest across two components: the labels follow it (so the hand-off's must be right)
    a, b = int(ref[0]), int(np.max(ref))
    if a != b:
        bad = init.copy()
        bad[b] = a
        assert A.wcc(dg, init=bad)[b] == a


def test_wcc_auto_hands_over_through_dispatch(tmp_path, monkeypatch):
    """`--device auto` through registry.dispatch with the plan made to pick the hand-off: the
    lines say where it moved; the labels equal the CPU's."""
    from graphene_py.algos import registry
    from graphene_py.algos.common import superstep_line
    from graphene_py.gpu import policy
    g = _hybrid_dataset(tmp_path, "powerlaw", "sym")
    monkeypatch.setattr(policy, "plan_handoff", lambda *a, **k: (True, "test: hand off"))
    lines = []
    r = registry.dispatch("wcc", g, device="auto", threads=2, handoff_at=1, gpu_mem="1G",
                          progress=lambda st: lines.append(superstep_line(len(lines), st)))
    ref = registry.dispatch("wcc", g, threads=2)
    assert r.device_reason == "test: hand off" and r.device == "cpu+gpu"
    np.testing.assert_array_equal(r.labels, ref.labels)
    assert "gpu: moves here: forced after superstep 1" in lines[0]
    assert "[gpu-" in lines[-1] and len(lines) == len(r.supersteps)


# -- k-core handed over to the GPU in mid-run (--device auto, gpu/handoff.py KCorePart) -------------
@pytest.mark.parametrize("layout", ["sym", "directed_in"])
@pytest.mark.parametrize("gname", ["powerlaw", "isolated_ends", "star", "chain"])
def test_kcore_handed_over_equals_the_cpu_run(tmp_path, gname, layout):
    """The CPU peels up to superstep k (forced hand-off points; the move waits for the round's
    end), the GPU's peel goes on from its core numbers and level: the CPU run's core numbers,
    the supersteps saying where they ran."""
    from graphene_py.algos import kcore as K
    g = _hybrid_dataset(tmp_path, gname, layout)
    ref = K.run(g, threads=2, keep_edges=0)
    assert K.verify(g, ref) == []
    per_round = 2 if layout == "directed_in" else 1
    total = len(ref.supersteps)
    for k in sorted({1, total // 2, total - per_round} - {0}):
        r = K.run(g, threads=2, keep_edges=0, device="auto", handoff_at=k)
        np.testing.assert_array_equal(r.core_number, ref.core_number, err_msg=f"k={k}")
        moved = -(-k // per_round) * per_round
        devs = [st["device"] for st in r.supersteps]
        assert devs[:moved] == ["cpu"] * moved and set(devs[moved:]) == {"gpu"}, devs
        assert r.cpu_supersteps == moved and r.device == "cpu+gpu" and r.device_moves == 1
        assert r.max_core == ref.max_core


@pytest.mark.parametrize("layout", ["sym", "directed_in"])
@pytest.mark.parametrize("gname,kk", [("powerlaw", 21), ("isolated_ends", 6), ("star", 4)])
def test_kcore_membership_handed_over_equals_the_cpu_run(tmp_path, gname, kk, layout):
    """One K-core: the CPU peels up to superstep k's round, the GPU's k-core goes on from the
    vertices left at level K - 1: the CPU run's members, the supersteps saying where they ran."""
    from graphene_py.algos import kcore as K
    g = _hybrid_dataset(tmp_path, gname, layout)
    ref = K.run(g, threads=2, k=kk, membership_only=True)
    assert K.verify(g, ref) == []
    per_round = 2 if layout == "directed_in" else 1
    total = len(ref.supersteps)
    for k in sorted({1, total // 2, total - per_round - 1} & set(range(1, total - per_round + 1))):
        r = K.run(g, threads=2, k=kk, membership_only=True, device="auto", handoff_at=k)
        np.testing.assert_array_equal(r.in_k_core, ref.in_k_core, err_msg=f"k={k}")
        moved = -(-k // per_round) * per_round
        devs = [st["device"] for st in r.supersteps]
        assert devs[:moved] == ["cpu"] * moved and set(devs[moved:]) == {"gpu"}, devs
        assert r.cpu_supersteps == moved and r.device == "cpu+gpu" and r.device_moves == 1
        assert r.k_core_size == ref.k_core_size and r.core_number is None


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("layout", ["sym", "directed_in", "directed"])
@pytest.mark.parametrize("gname", ["powerlaw", "isolated_ends", "chain"])
def test_msbfs_handed_over_equals_the_cpu_run(tmp_path, gname, layout, keep):
    """MS-BFS (70 sources: two passes) forced to the GPU after CPU superstep k: the CPU run's
    depths, reached counts and closeness, the supersteps saying where they ran."""
    from graphene_py.algos import msbfs as M
    g = _hybrid_dataset(tmp_path, gname, layout)
    srcs = np.flatnonzero(g.degrees("out") > 0)[:70]
    ref = M.run(g, threads=2, sources=srcs, closeness=True)
    assert M.verify(g, ref) == []
    total = len(ref.supersteps)
    first = sum(1 for st in ref.supersteps if st["pass_"] == 0)
    for k in sorted({1, first // 2, first + 1} & set(range(1, total))):
        if ref.supersteps[k - 1]["discovered"] == 0:
            continue
        r = M.run(g, threads=2, sources=srcs, closeness=True, keep_depths=keep, device="auto",
                  handoff_at=k)
        if keep:
            np.testing.assert_array_equal(r.depths, ref.depths, err_msg=f"k={k}")
        np.testing.assert_array_equal(r.reached, ref.reached, err_msg=f"k={k}")
        np.testing.assert_allclose(r.closeness, ref.closeness, rtol=1e-12, err_msg=f"k={k}")
        devs = [st["device"] for st in r.supersteps]
        assert devs[:k] == ["cpu"] * k and set(devs[k:]) == {"gpu"}, devs
        assert r.cpu_supersteps == k and r.device == "cpu+gpu" and r.device_moves == 1


@pytest.mark.parametrize("name,opts,field", [
    ("apsp", {"num_sources": 40}, "depths"),
    ("kcore", {"k": 21, "membership_only": True}, "in_k_core")])
def test_membership_and_apsp_auto_hand_over_through_dispatch(tmp_path, monkeypatch, name, opts,
                                                             field):
    """`--device auto` through registry.dispatch with the plan made to pick the hand-off: one
    K-core and APSP move after superstep 1, their lines say so, the CPU's result."""
    from graphene_py.algos import registry
    from graphene_py.algos.common import superstep_line
    from graphene_py.gpu import policy
    g = _hybrid_dataset(tmp_path, "powerlaw", "sym")
    monkeypatch.setattr(policy, "plan_handoff", lambda *a, **k: (True, "test: hand off"))
    lines = []
    r = registry.dispatch(name, g, device="auto", threads=2, handoff_at=1, gpu_mem="1G",
                          progress=lambda st: lines.append(superstep_line(len(lines), st)),
                          **opts)
    ref = registry.dispatch(name, g, threads=2, **opts)
    assert r.device_reason == "test: hand off" and r.device == "cpu+gpu"
    np.testing.assert_array_equal(getattr(r, field), getattr(ref, field))
    assert "gpu: moves here: forced after superstep 1" in lines[0]
    assert "[gpu-" in lines[-1] and len(lines) == len(r.supersteps)


@pytest.mark.parametrize("kind", ["sym", "directed"])
@pytest.mark.parametrize("gf", [G.powerlaw, G.star, G.chain, G.isolated_ends, G.duplicates])
def test_gpu_kcore_from_a_partial_peel(gf, kind):
    """gpu kcore(init=(core, k)) from a peel cut at several levels (every vertex of core number
    below the level removed, with its number; the rest -1) gives the whole decomposition; a
    cut that leaves out a vertex the level had removed is taken as given (so the hand-off's
    must be right), and a wrong length is refused."""
    from graphene_py import gpu
    from graphene_py.errors import GrapheneError
    tg = gf()
    dg, *_ = make(kind, tg)
    full = gpu.kcore(dg)
    for level in sorted({0, 1, int(full.max()) // 2, int(full.max())}):
        init = np.where(full < level, full, -1).astype(np.int32)
        np.testing.assert_array_equal(gpu.kcore(dg, init=(init, level)), full,
                                      err_msg=f"level {level}")
    for stop in sorted({1, int(full.max()) // 2 + 1, int(full.max()) + 1}):
        # stop=K: a peel up to level K; the vertices left (-1) are the K-core's, the others' numbers exact
        got = gpu.kcore(dg, stop=stop)
        np.testing.assert_array_equal((got < 0) | (got >= stop), full >= stop,
                                      err_msg=f"stop {stop}")
        np.testing.assert_array_equal(got[full < stop], full[full < stop])
        init = np.where(full < stop - 1, full, -1).astype(np.int32)
        got = gpu.kcore(dg, init=(init, max(stop - 1, 0)), stop=stop)
        np.testing.assert_array_equal((got < 0) | (got >= stop), full >= stop)
    with pytest.raises(GrapheneError, match="core numbers for"):
        gpu.kcore(dg, init=(np.full(tg.n + 1, -1, np.int32), 0))


def test_kcore_auto_hands_over_through_dispatch(tmp_path, monkeypatch):
    """`--device auto` through registry.dispatch with the plan made to pick the hand-off."""
    from graphene_py.algos import registry
    from graphene_py.algos.common import superstep_line
    from graphene_py.gpu import policy
    g = _hybrid_dataset(tmp_path, "powerlaw", "sym")
    monkeypatch.setattr(policy, "plan_handoff", lambda *a, **k: (True, "test: hand off"))
    lines = []
    r = registry.dispatch("kcore", g, device="auto", threads=2, handoff_at=1, gpu_mem="1G",
                          keep_edges=0,
                          progress=lambda st: lines.append(superstep_line(len(lines), st)))
    ref = registry.dispatch("kcore", g, threads=2)
    assert r.device_reason == "test: hand off" and r.device == "cpu+gpu"
    np.testing.assert_array_equal(r.core_number, ref.core_number)
    assert "gpu: moves here: forced after superstep 1" in lines[0]
    assert "[gpu-" in lines[-1] and len(lines) == len(r.supersteps)


# -- SSSP handed over to the GPU in mid-run (--device auto, gpu/handoff.py SSSPPart) ---------------
@pytest.mark.parametrize("grid", [(1, 1), (2, 2)])
@pytest.mark.parametrize("in_memory", [False, True])
@pytest.mark.parametrize("gname", ["powerlaw", "chain", "isolated_ends"])
def test_sssp_handed_over_equals_the_cpu_run(tmp_path, gname, in_memory, grid):
    """The CPU runs k supersteps, the GPU's delta-stepping goes on from its distances (final
    below the lowest bucket it still holds): Dijkstra's distances, the supersteps saying where
    they ran. Integer weights: the CPU's uint32 distances go over as float64. On 1x1 the GPU's
    part is copied from the CPU's lists in RAM (SSSPPart.from_ram), on 2x2 loaded from the
    files."""
    from graphene_py.algos import sssp as S
    from tests.test_handoff import _weighted
    g = _weighted(tmp_path, gname, grid)
    src = int(np.argmax(np.bincount(g.edges("out")[0], minlength=g.num_vertices)))
    ref = S.run(g, src=src, threads=2, in_memory=in_memory)
    assert S.verify(g, ref) == [] and S.int_distances(g)
    moved = 0
    for k in sorted({1, 2, len(ref.supersteps) // 2}):
        r = S.run(g, src=src, threads=2, in_memory=in_memory, device="auto", handoff_at=k)
        np.testing.assert_array_equal(r.dist, ref.dist, err_msg=f"k={k}")
        if r.device == "cpu":           # the run ended at k
            continue
        moved += 1
        devs = [st["device"] for st in r.supersteps]
        c = r.cpu_supersteps
        assert c == k and devs[:c] == ["cpu"] * c and set(devs[c:]) == {"gpu"}, devs
        assert r.device == "cpu+gpu" and r.device_moves == 1
        assert r.supersteps[c - 1]["handoff"] == f"moves here: forced after superstep {k}"
    assert moved >= 1


def test_gpu_sssp_goes_on_from_final_distances(tmp_path):
    """algorithms.sssp's init: from a CPU run's state at lo (the distances below lo final and
    relaxed once: every other vertex holds the least over its settled in-neighbours, or inf),
    for several lo and widths: Dijkstra's distances again."""
    from graphene_py.algos import sssp as S
    from graphene_py.gpu import DeviceGraph, algorithms as A
    from tests.test_handoff import _weighted
    g = _weighted(tmp_path, "powerlaw")
    ref = S.run(g, src=0, threads=2).dist
    dg = DeviceGraph.from_graph(g)
    ip, ix, w = g.to_csr("out")
    srcs = np.repeat(np.arange(g.num_vertices), np.diff(ip))
    fin = ref[np.isfinite(ref)]
    for lo in (0.0, float(np.median(fin)), float(fin.max()) + 1):
        done = ref < lo
        d = np.full(g.num_vertices, np.inf)
        e = done[srcs]
        np.minimum.at(d, ix[e], ref[srcs[e]] + w[e].astype(np.float64))
        d[done] = ref[done]
        d[0] = 0.0
        for delta in (1.0, 32.0, 1e9):
            np.testing.assert_array_equal(A.sssp(dg, 0, delta=delta, init=(d, lo)), ref,
                                          err_msg=f"lo={lo} delta={delta}")
