"""The Ray cluster backend (graphene_py.cluster) on a real local Ray cluster of three simulated
nodes (ray.cluster_utils.Cluster), each with its own disk folders and a `graphene:nK` resource
that pins its actor: every algorithm that runs on a cluster gives the single-machine answer on
nasty and random graphs, directed and undirected; a killed node actor is restarted and its
superstep redone; a missing node, a wrong shard and unsupported algorithms are clear errors.
The merge rules are also checked alone, without Ray."""
from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

import graphene_py as gp
from graphene_py.algos import registry
from graphene_py.algos.registry import dispatch
from graphene_py.cluster.merge import assign, bounds, diff, merge, merge_queues, split
from graphene_py.errors import GrapheneError
from tests import graphs

NODES = 3
CHAIN = 120     # levels of the chain graph (a superstep costs ~10 ms of coordination here)
RT = {"threads": 2, "buffer_mb": 2}


# -- the merge rules (no Ray) -------------------------------------------------------------------
@pytest.mark.parametrize("dense", [False, True])
def test_merge_rules(dense):
    n = 64
    rng = np.random.default_rng(1)
    orig = rng.integers(0, 100, n).astype(np.int64)
    pieces = []
    for k in range(3):
        new = orig.copy()
        idx = rng.choice(n, size=40 if dense else 3, replace=False)
        new[idx] = rng.integers(-50, 150, len(idx))
        pieces.append(new)
    # a min (max, or) slot only ever goes down (up, gains bits) in a piece
    for rule, step in (("min", np.minimum), ("max", np.maximum), ("or", np.bitwise_or)):
        ps = [step(orig, p) for p in pieces]
        t = orig.copy()
        merge(t, rule, [diff(orig, p, rule) for p in ps])
        assert np.array_equal(t, step.reduce(ps)), rule
    t = orig.copy()
    merge(t, "sum", [diff(orig, p, "sum") for p in pieces])
    assert np.array_equal(t, orig + sum(p - orig for p in pieces))
    # first: the first piece (in node order) that changed an element wins
    t = orig.copy()
    merge(t, "first", [diff(orig, p, "first") for p in pieces])
    want = orig.copy()
    for p in reversed(pieces):
        ch = p != orig
        want[ch] = p[ch]
    assert np.array_equal(t, want)
    assert diff(orig, orig.copy(), "min") == ("none",)
    assert diff(orig, pieces[0], "min")[0] == ("dense" if dense else "sparse")


def test_owner_bounds():
    from graphene_py.cluster.merge import owner_bounds
    assert owner_bounds(10, 10, [0, 7, 9, 10]) == [0, 7, 9, 10]     # a per-vertex slot: rows
    assert owner_bounds(6, 10, [0, 7, 9, 10]) == [0, 2, 4, 6]       # any other: equal shares
    assert owner_bounds(10, 10, [0, 10]) == [0, 10]


@pytest.mark.parametrize("dense", [False, True])
@pytest.mark.parametrize("owners", [1, 3, 5])
def test_merge_by_owners(dense, owners):
    """Cut into owners' ranges, merged per range against the range of the original and assigned
    back as new values: the same array as the whole merge, for every rule."""
    n = 61
    rng = np.random.default_rng(2)
    orig = rng.integers(0, 100, n).astype(np.int64)
    for rule in ("min", "max", "or", "sum", "first"):
        pieces = []
        for _ in range(3):
            new = orig.copy()
            idx = rng.choice(n, size=40 if dense else 4, replace=False)
            new[idx] = rng.integers(-50, 150, len(idx))
            if rule in ("min", "max", "or"):
                new = {"min": np.minimum, "max": np.maximum, "or": np.bitwise_or}[rule](orig, new)
            pieces.append(diff(orig, new, rule))
        want = orig.copy()
        merge(want, rule, pieces)
        b = bounds(n, owners)
        assert b[0] == 0 and b[-1] == n and len(b) == owners + 1
        cut = [split(c, b) for c in pieces]
        got = orig.copy()
        for j in range(owners):
            part = orig[b[j]:b[j + 1]].copy()
            merge(part, rule, [c[j] for c in cut])
            assign(got[b[j]:b[j + 1]], diff(orig[b[j]:b[j + 1]], part, "set"))
        assert np.array_equal(got, want), (rule, owners)


def test_message_split_for_relays():
    """A large state message cut into parts for k relaying nodes comes back whole."""
    from graphene_py.cluster.engine import split_message
    from graphene_py.cluster.node import join_message
    msg = [None, ("value", 3), ("zeros", 1, (5,), "<i8"),
           ("dense", 2, np.arange(12.0).reshape(3, 4)),
           ("delta", 4, np.array([1, 5, 9], np.int32), np.array([1.0, 2.0, 3.0])),
           ("dense", 5, np.zeros(0, np.uint8))]
    for k in (1, 2, 3, 5):
        skel, parts, sizes = split_message(msg, k)
        assert len(parts) == k and sum(sizes) == 96 + 12 + 24
        out = join_message(skel, parts)
        assert out[:3] == msg[:3]
        for m, o in zip(msg[3:], out[3:]):
            assert o[:2] == m[:2]
            for x, y in zip(m[2:], o[2:]):
                assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def test_merge_rows_and_queue():
    acc = np.zeros((2, 5))
    a, b = acc.copy(), acc.copy()
    a[1, 3] = 2.5
    b[0, 0] = 1.0
    b[1, 3] = 1.0
    merge(acc, "sum", [diff(np.zeros((2, 5)), a, "sum"), diff(np.zeros((2, 5)), b, "sum")])
    assert acc[1, 3] == 3.5 and acc[0, 0] == 1.0 and acc.sum() == 4.5
    ids, tail, cur = np.full(10, -7, np.int32), np.zeros(1, np.int64), np.ones((2, 8), np.int64)
    assert merge_queues(ids, tail, cur, [np.array([5, 2]), np.array([2, 9]), np.zeros(0)]) == 3
    assert list(ids[:3]) == [2, 5, 9] and tail[0] == 3 and not cur.any()


def test_changes_packed_in_pieces():
    """A node's changes cut into byte strings (to travel under Ray's inline size) come back
    with every array's dtype, shape and values, for any number of pieces."""
    from graphene_py.cluster.merge import pack, unpack
    ch = [("none",), ("dense", np.arange(7, dtype=np.uint8)),
          ("sparse", np.array([1, 4, 9], np.int32), np.array([0.5, -2.0, 3.25])),
          ("dense", np.arange(12, dtype=np.int64).reshape(3, 4)),
          ("sparse", np.zeros(0, np.int32), np.zeros(0, np.float32))]
    for p in (1, 2, 5, 40):
        skel, parts = pack(ch, p)
        assert len(parts) == p and sum(x.nbytes for x in parts) == 8 + 16 + 24 + 96
        out = unpack(skel, [x.copy() for x in parts])
        assert [c[0] for c in out] == [c[0] for c in ch]
        for c, o in zip(ch, out):
            for x, y in zip(c[1:], o[1:]):
                assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def test_update_pickles_by_name():
    """A kernel pair travels to the nodes by import name: the node gets the module's own
    dispatchers (whose compiled superstep is cached on disk), not fresh copies to compile."""
    import pickle
    from graphene_py.algos import bfs, wcc
    for u in (bfs.VISIT, bfs.ADOPT, wcc.LP_PUSH):
        v = pickle.loads(pickle.dumps(u))
        assert v.is_active is u.is_active and v.compute is u.compute and v == u


# -- a real three-node cluster ------------------------------------------------------------------
ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    from ray.cluster_utils import Cluster as RayCluster
    from graphene_py.cluster import Cluster
    rc = RayCluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"graphene:n0": 1}, "object_store_memory": 100 << 20})
    raylets = {"graphene:n0": rc.head_node}
    for i in range(1, NODES):
        raylets[f"graphene:n{i}"] = rc.add_node(num_cpus=1, resources={f"graphene:n{i}": 1},
                                                object_store_memory=100 << 20)
    ray.init(address=rc.address, logging_level="ERROR", log_to_driver=False)
    root = tmp_path_factory.mktemp("nodes")
    for i in range(NODES):
        for j in range(2):
            (root / f"n{i}" / f"d{j}").mkdir(parents=True)
    c = Cluster(rc.address)
    for i in range(NODES):      # the node actors' processes start while the first test partitions
        c.actor(f"graphene:n{i}").hello.remote()
    c.root = root
    c.ray_cluster, c.raylets = rc, raylets
    c.lost = None             # a node test_node_gone_mid_run took away for good
    yield c
    ray.shutdown()
    rc.shutdown()


@pytest.fixture
def cluster(ray_cluster):
    if ray_cluster.lost:
        pytest.fail(f"node {ray_cluster.lost} was removed by test_node_gone_mid_run, which must "
                    f"run last in this module")
    return ray_cluster


CASES = {}     # (graph, directed) -> (local Graph, ClusterGraph), made once


def hopping_chain(n):
    """A chain whose every level is on another node's rows than the last: vertex order 0, n/3,
    2n/3, 1, n/3 + 1, ... (a path from vertex 0 of n - 1 edges)."""
    order = np.arange(n).reshape(NODES, -1).T.reshape(-1)
    return graphs._mk("chain", n, order[:-1], order[1:])


def both(cluster, tmp_path_factory, name, directed, monkeypatch=None):
    key = (name, directed)
    if key not in CASES:
        g = hopping_chain(CHAIN) if name == "chain" else graphs.by_name(name)
        d = tmp_path_factory.mktemp(f"src-{name}-{directed}")
        local = gp.partition_arrays(g.src, g.dst, num_vertices=g.n, disks=[str(d)],
                                    name=f"c-{name}-{directed}", rows=NODES, cols=2,
                                    symmetrize=not directed, in_edges=directed, register=False,
                                    force=True)
        root = cluster.root
        cluster.distribute(local, [str(root / "{node}" / "d0"), str(root / "{node}" / "d1")],
                           force=True)
        CASES[key] = (local, cluster.open(local.name))
    return CASES[key]


GRAPHS = ["star", "chain", "isolated_ends", "disconnected", "powerlaw", "duplicates"]
BC_ON = ("powerlaw", "disconnected", "duplicates")      # a few sources: 2 supersteps per level


@pytest.fixture
def home_kept(tmp_path_factory, monkeypatch):
    """One GRAPHENE_HOME for the module (cluster manifests made by earlier tests stay found)."""
    h = tmp_path_factory.getbasetemp() / "cluster_home"
    h.mkdir(exist_ok=True)
    monkeypatch.setenv("GRAPHENE_HOME", str(h))


# the default run keeps the suite's cluster tests under a minute: every graph in one direction
# at least (the hub spanning every node undirected, the long chain directed), the power-law
# graph in both; the twins run with -m slow
SLOW = {("chain", False), ("star", True), ("isolated_ends", True), ("disconnected", True),
        ("duplicates", False)}


@pytest.mark.parametrize("name, directed", [
    pytest.param(g, d, marks=pytest.mark.slow) if (g, d) in SLOW else (g, d)
    for g in GRAPHS for d in (False, True)])
def test_algorithms_agree(cluster, tmp_path_factory, home_kept, name, directed):
    local, cg = both(cluster, tmp_path_factory, name, directed)
    n = local.num_vertices
    src = int(np.argmax(local.degrees("out")))
    a, b = gp.bfs(local, src=src, **RT), gp.bfs(cg, src=src, **RT)
    assert np.array_equal(a.depth, b.depth)
    assert registry.module("bfs").verify(local, b) == []       # parents valid on the real edges
    # every superstep went through the cluster: stats of each node, bytes exchanged
    assert all("exchange_bytes" in s and len(s["node_seconds"]) == NODES for s in b.supersteps)
    a, b = gp.wcc(local, **RT), gp.wcc(cg, **RT)
    assert np.array_equal(a.labels, b.labels) and a.n_components == b.n_components
    if directed:     # out- and in-lists in one round trip per superstep (EdgeMap.across)
        assert {tuple(s.get("directions", ())) for s in b.supersteps} == {("out", "in")}
    if not directed and name in ("star", "powerlaw"):   # BFS's levels there too (bfs.Levels)
        for r in (a, b):
            assert "bottom-up" in {s.get("direction") for s in r.supersteps if s["phase"] == "bfs"}
    a, b = gp.pagerank_pull(local, **RT), gp.pagerank_pull(cg, **RT)
    assert a.iterations == b.iterations
    # equal but for float32's rounding (PageRank's rows read at random are float32 while the
    # change is large: one machine rounds y = p / degree of an undirected graph, where the
    # cluster's driver keeps p in float64 and rounds p / degree)
    np.testing.assert_allclose(b.scores, a.scores, rtol=1e-9 if directed else 1e-6, atol=1e-15)
    # delta PageRank: on a cluster without the Gauss-Seidel phase (other iterates, the same fixed
    # point, more iterations: around the star's hub they converge at rate alpha); both within
    # reach of a tight pull PageRank
    ref = gp.pagerank_pull(local, tolerance=1e-12, max_iter=500, **RT).scores
    a, b = gp.pagerank(local, max_iter=200, **RT), gp.pagerank(cg, max_iter=200, **RT)
    assert a.converged and b.converged
    bound = 1e-4 / (1 - 0.85)          # |p - p*|_1 <= |residual|_1 / (1 - alpha)
    assert np.abs(b.scores - ref).sum() < bound and np.abs(a.scores - ref).sum() < bound
    a, b = gp.spmv(local, x="random", **RT), gp.spmv(cg, x="random", **RT)
    np.testing.assert_allclose(b.y, a.y, rtol=1e-12)
    srcs = [int(v) for v in np.flatnonzero(local.degrees("out") > 0)[:40:8]]
    if srcs:
        a, b = gp.msbfs(local, sources=srcs, **RT), gp.msbfs(cg, sources=srcs, **RT)
        assert np.array_equal(np.asarray(a.depths), np.asarray(b.depths))
    for kk in (2, 5):
        a = gp.kcore(local, k=kk, membership_only=True, **RT)
        b = gp.kcore(cg, k=kk, membership_only=True, **RT)
        assert np.array_equal(a.in_k_core, b.in_k_core) and a.k_core_size == b.k_core_size
    a, b = gp.kcore(local, **RT), gp.kcore(cg, **RT)      # every core number (no kept lists there)
    assert np.array_equal(a.core_number, b.core_number) and b.kept_lists == 0
    if directed:
        assert {tuple(s.get("directions", ())) for s in b.supersteps} == {("out", "in")}
    if name in BC_ON:
        a, b = gp.bc(local, k=3, seed=2, **RT), gp.bc(cg, k=3, seed=2, **RT)
        np.testing.assert_allclose(b.bc, a.bc, rtol=1e-9, atol=1e-12)


def test_labeled_dataset_distributes(cluster, tmp_path_factory, home_kept):
    """A --labels dataset on the cluster: its label table is copied beside the cluster manifest
    (the nodes run by ID and never read it), so sources are given by name and results come back
    named, as on one machine; removing the dataset removes the copy, and deleting the local
    dataset does not take the names away."""
    tmp = tmp_path_factory.mktemp("lab")
    g = graphs.by_name("powerlaw")
    with open(tmp / "names.el", "w") as f:
        f.writelines(f"n{a} n{b}\n" for a, b in zip(g.src.tolist(), g.dst.tolist()))
    local = gp.partition(str(tmp / "names.el"), [str(tmp)], name="c-labels", labels=True,
                         rows=NODES, cols=2, symmetrize=True, register=False, quiet=True)
    cluster.distribute(local, [str(cluster.root / "{node}" / "d0")], force=True)
    import shutil
    from graphene_py.cluster import engine
    src = local.vertex_names().id_of("n0")
    a = gp.bfs(local, src=src, **RT)
    shutil.rmtree(tmp / "c-labels")                  # the staging copy: gone, as after --cluster
    cg = cluster.open(local.name)
    b = gp.bfs(cg, src="n0", **RT)
    assert b.src == src and b.src_name == "n0"
    assert np.array_equal(a.depth, b.depth)
    far = int(np.argmax(np.where(a.depth >= 0, a.depth, -1)))
    assert b.named("depth")[a.vertex_name(far)] == a.depth[far]
    copies = engine._names_of(json.load(open(engine.manifest_path(local.name))))
    assert len(copies) == 1 and os.path.exists(copies[0])
    engine.remove(local.name, cluster)
    assert not os.path.exists(copies[0])


def test_sssp_weighted(cluster, tmp_path_factory, home_kept):
    g = graphs.by_name("powerlaw")
    w = np.random.default_rng(5).integers(1, 256, len(g.src)).astype(np.float32)
    local = gp.partition_arrays(g.src, g.dst, weights=w, num_vertices=g.n,
                                disks=[str(tmp_path_factory.mktemp("w"))], name="c-weighted",
                                rows=NODES, cols=2, symmetrize=True, register=False, force=True)
    cluster.distribute(local, [str(cluster.root / "{node}" / "d0")], force=True)
    cg = cluster.open(local.name)
    src = int(np.argmax(local.degrees("out")))
    for delta in (8.0, 256.0):
        a, b = gp.sssp(local, src=src, delta=delta, **RT), gp.sssp(cg, src=src, delta=delta, **RT)
        assert np.array_equal(a.dist, b.dist)
        assert registry.module("sssp").verify(local, b) == []


@pytest.fixture
def by_owners(monkeypatch):
    """Every superstep's changes combined by their owners, node to node (not only large ones)."""
    from graphene_py.cluster import engine
    monkeypatch.setattr(engine.ClusterEdgeMap, "owners_from", 0)


@pytest.mark.parametrize("name, directed", [
    ("powerlaw", False), ("duplicates", True),
    pytest.param("star", False, marks=pytest.mark.slow),      # (the hub: test_algorithms_agree)
    pytest.param("chain", True, marks=pytest.mark.slow)])     # (the kill test runs the chain)
def test_combined_by_owners(cluster, tmp_path_factory, home_kept, by_owners, name, directed):
    """Changes combined by their owners and messages relayed by the nodes give the
    single-machine answers, and the driver's link carries each change once each way: PageRank's
    scores go out and its sums come back at about 8 B per vertex, not 8 B per vertex per node."""
    local, cg = both(cluster, tmp_path_factory, name, directed)
    n = local.num_vertices
    src = int(np.argmax(local.degrees("out")))
    a, b = gp.bfs(local, src=src, **RT), gp.bfs(cg, src=src, **RT)
    assert np.array_equal(a.depth, b.depth)
    assert registry.module("bfs").verify(local, b) == []
    assert {s["combined_by"] for s in b.supersteps} == {"owners"}
    a, b = gp.wcc(local, **RT), gp.wcc(cg, **RT)
    assert np.array_equal(a.labels, b.labels)
    a, b = gp.pagerank_pull(local, **RT), gp.pagerank_pull(cg, **RT)
    assert a.iterations == b.iterations
    # equal but for float32's rounding (PageRank's rows read at random are float32 while the
    # change is large: one machine rounds y = p / degree of an undirected graph, where the
    # cluster's driver keeps p in float64 and rounds p / degree)
    np.testing.assert_allclose(b.scores, a.scores, rtol=1e-9 if directed else 1e-6, atol=1e-15)
    if name == "powerlaw":     # through the driver, each of 3 nodes' copy: 24 B/vertex each way
        back = [s["bytes_back"] for s in b.supersteps]
        assert max(back) < 1.5 * 8 * n, back
        sent = [s["bytes_sent"] for s in b.supersteps[1:]]     # the scores, relayed by the nodes
        assert max(sent) < 1.5 * 8 * n, sent
        assert all(s["bytes_between"] > 0 for s in b.supersteps)
    a, b = gp.spmv(local, x="random", **RT), gp.spmv(cg, x="random", **RT)
    np.testing.assert_allclose(b.y, a.y, rtol=1e-12)
    a = gp.kcore(local, k=3, membership_only=True, **RT)
    b = gp.kcore(cg, k=3, membership_only=True, **RT)
    assert np.array_equal(a.in_k_core, b.in_k_core)
    srcs = [int(v) for v in np.flatnonzero(local.degrees("out") > 0)[:40:8]]
    a, b = gp.msbfs(local, sources=srcs, **RT), gp.msbfs(cg, sources=srcs, **RT)
    assert np.array_equal(np.asarray(a.depths), np.asarray(b.depths))


def test_user_kernel_defined_in_a_function(cluster, tmp_path_factory, home_kept):
    """A user's own kernel pair that no module names (defined in a function) runs on the
    cluster through the engine contract, as on one machine: the nodes get it by value."""
    import numba
    from graphene_py.iterator.edgemap import EdgeMap, Update
    local, _ = both(cluster, tmp_path_factory, "powerlaw", True)

    @numba.njit
    def always(v, state):
        return True

    @numba.njit
    def count_odd(v, nbrs, wts, tid, state):
        c = 0
        for i in range(len(nbrs)):
            c += nbrs[i] & 1
        state[0][v] += c

    # on two of the nodes (each node's process compiles the pair: two compile at once on this
    # machine's two cores) and not here (one machine's EdgeMap runs user kernels in
    # tests/test_shortlists.py)
    cluster.distribute(local, [str(cluster.root / "{node}" / "d1")], name="c-user", force=True,
                       nodes=["graphene:n0", "graphene:n2"])
    cg = cluster.open("c-user")
    assert cg.labels == ["graphene:n0", "graphene:n2"]
    acc = np.zeros(cg.num_vertices, dtype=np.int64)
    with EdgeMap(cg, **RT) as em:
        em.dense((acc,), Update(always, count_odd, combine="sum", writes=(0,)))
    indptr, idx, _ = local.to_csr("out")
    want = np.add.reduceat(np.append(idx & 1, 0), indptr[:-1]) * (np.diff(indptr) > 0)
    assert np.array_equal(acc, want)


def _killer(cg, node, at):
    """A progress callback that kills node `node`'s actor process at superstep `at`."""
    pid = cg.pids()[node]
    seen = {"i": 0}

    def progress(st):
        seen["i"] += 1
        if seen["i"] == at:
            os.kill(pid, signal.SIGKILL)
    return progress, pid


# each case kills another node's actor (Ray restarts an actor RESTARTS times; a fresh actor per
# case would cost a process start and its kernels' load)
@pytest.mark.parametrize("algo, owners, node", [
    ("bfs", False, 1), ("pagerank-pull", False, 2), ("pagerank-pull", True, 0),
    pytest.param("bfs", True, 1, marks=pytest.mark.slow)])     # (each level combined apart)
def test_killed_actor_recovers(cluster, tmp_path_factory, home_kept, algo, owners, node,
                               monkeypatch):
    from graphene_py.cluster import engine
    if owners:         # the killed node's owner result of the last superstep is in the store
        monkeypatch.setattr(engine.ClusterEdgeMap, "owners_from", 0)
    else:       # messages and changes in inline pieces, as larger ones go (BFS: the restarted
        #         node's stale answer to a call that asked for pieces)
        monkeypatch.setattr(engine, "INLINE", 8 if algo == "bfs" else 2048)
    local, cg = both(cluster, tmp_path_factory, "chain" if algo == "bfs" else "powerlaw", True)
    opts = dict(RT, src=0) if algo == "bfs" else RT
    want = dispatch(algo, local, **opts)
    cg.engines(dict(RT))                        # the shards open under the run's options
    progress, pid = _killer(cg, node, 3)
    got = dispatch(algo, cg, progress=progress, **opts)
    assert cg.pids()[node] != pid               # the node's actor was restarted...
    if algo == "bfs":                           # ... and the run's answer is still right
        assert np.array_equal(got.depth, want.depth) and got.levels == CHAIN
        # the new actor had no replica of the state: the driver sent it the whole state
        assert [s["resent_to"] for s in got.supersteps if "resent_to" in s] == [[cg.labels[node]]]
    else:
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-9)


def _no_in_edges(cluster, tmp_path_factory):
    """The directed power-law graph without in-edges as cluster dataset c-noin (made once)."""
    from graphene_py.cluster.engine import manifest_path
    if os.path.exists(manifest_path("c-noin")):
        return
    g = graphs.by_name("powerlaw")
    noin = gp.partition_arrays(g.src, g.dst, num_vertices=g.n, rows=NODES, cols=1,
                               disks=[str(tmp_path_factory.mktemp("noin"))], name="c-noin",
                               register=False)
    cluster.distribute(noin, [str(cluster.root / "{node}" / "d0")], force=True)


def test_errors(cluster, tmp_path_factory, home_kept):
    local, cg = both(cluster, tmp_path_factory, "powerlaw", False)
    # an algorithm that does not say it runs on a cluster is refused with the reason
    from graphene_py.algos import spmv as spmv_mod
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spmv_mod, "CLUSTER", False)
        with pytest.raises(GrapheneError, match="spmv does not run on a cluster with these "
                                                "options yet .it is not written against"):
            gp.spmv(cg, **RT)
    # k-core needs in-lists: a directed dataset without them is refused on a cluster
    _no_in_edges(cluster, tmp_path_factory)
    with pytest.raises(GrapheneError, match="k-core on a cluster needs an undirected dataset"):
        gp.kcore(cluster.open("c-noin"), **RT)
    with pytest.raises(GrapheneError, match="exists"):
        cluster.distribute(local, [str(cluster.root / "{node}" / "d0")])
    few = gp.partition_arrays(np.array([0, 1]), np.array([1, 2]), num_vertices=3,
                              disks=[str(tmp_path_factory.mktemp("few"))], name="few", rows=2,
                              cols=1, register=False)
    with pytest.raises(GrapheneError, match="needs at least 3"):
        cluster.distribute(few, [str(cluster.root / "{node}" / "d0")])
    # a node that is not in the cluster: named, with its rows and path
    from graphene_py.cluster.engine import manifest_path
    with open(manifest_path(local.name)) as f:
        cm = json.load(f)
    cm["placement"][2]["node"] = "graphene:gone"
    bad = tmp_path_factory.mktemp("bad") / "gone.json"
    bad.write_text(json.dumps(cm))
    with pytest.raises(GrapheneError, match=r"node graphene:gone \(out rows 2..2, at .*\) is not in"):
        cluster.open(str(bad))
    # a shard replaced by another version: refused at open
    cm = json.loads(open(manifest_path(local.name)).read())
    cm["placement"][0]["uuid"] = "0" * 8
    bad.write_text(json.dumps(cm))
    with pytest.raises(GrapheneError, match="graphene:n0.*expects 00000000"):
        gp.bfs(cluster.open(str(bad)), src=0, **RT)


def test_api_cluster_keyword(cluster, tmp_path_factory, home_kept):
    local, cg = both(cluster, tmp_path_factory, "powerlaw", True)
    a = gp.bfs(local, src=7, **RT)
    b = gp.bfs(local, src=7, cluster=cluster, **RT)       # the Graph's name on the cluster
    c = gp.bfs(local.name, src=7, cluster=cluster, **RT)
    assert np.array_equal(a.depth, b.depth) and np.array_equal(a.depth, c.depth)
    assert "exchange_bytes" in b.supersteps[0]
    # another connection in this process (as a command run in-process makes) finds the same
    # node actors, started and with their kernels loaded
    from graphene_py.cluster import Cluster
    other = Cluster(cluster.address)
    for lb in cg.labels:
        assert other.actor(lb) is cluster.actor(lb)


def test_cli(cluster, tmp_path_factory, home_kept, monkeypatch):
    from click.testing import CliRunner
    from graphene_py.cli import main
    local, cg = both(cluster, tmp_path_factory, "powerlaw", False)
    monkeypatch.setenv("RAY_ADDRESS", cluster.address)
    r = CliRunner().invoke(main, ["run", "bfs", "-g", local.name, "--src", "3", "--cluster",
                                  cluster.address, "--json", "-t", "2"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    ref = gp.bfs(local, src=3, **RT)
    assert out["result"]["n_reached"] == ref.n_reached
    assert [p["node"] for p in out["cluster"]["nodes"]] == [f"graphene:n{i}" for i in range(NODES)]
    assert out["cluster"]["exchange_bytes"] > 0 and out["engine"].startswith("Ray cluster (3 node")
    _no_in_edges(cluster, tmp_path_factory)          # (not only when test_errors ran first)
    r = CliRunner().invoke(main, ["run", "kcore", "-g", "c-noin", "--cluster", cluster.address])
    assert r.exit_code == 1 and "Error: c-noin: k-core on a cluster needs" in r.output
    r = CliRunner().invoke(main, ["run", "kcore", "-g", local.name, "--k", "3", "--membership-only",
                                  "--cluster", cluster.address, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["result"]["k_core_size"] == gp.kcore(
        local, k=3, membership_only=True, **RT).k_core_size


def test_partition_onto_cluster(cluster, tmp_path, home_kept):
    """`graphene partition INPUT --cluster`: staged here, each node's rows on its own disks, the
    staging copy gone; then `graphene run --cluster` on it."""
    from click.testing import CliRunner
    from graphene_py.cli import main
    g = graphs.by_name("powerlaw")
    el = tmp_path / "pl.el"
    el.write_text("".join(f"{a} {b}\n" for a, b in zip(g.src, g.dst)))
    disk = str(cluster.root / "{node}" / "d1")
    r = CliRunner().invoke(main, ["partition", str(el), "--disks", disk, "--name", "pc", "-s",
                                  "--cluster", cluster.address])
    assert r.exit_code == 0, r.output
    assert "graphene:n2: out rows 2..2" in r.output
    for i in range(NODES):
        got = os.listdir(cluster.root / f"n{i}" / "d1")
        assert [f for f in got if f.startswith("pc.")] == [   # its shard, no staging copy left
            os.path.basename(cluster.open("pc").placement[i]["home"])]
    local = gp.partition_arrays(g.src, g.dst, num_vertices=g.n, disks=[str(tmp_path)],
                                name="pc-local", symmetrize=True, register=False)
    r = CliRunner().invoke(main, ["run", "wcc", "-g", "pc", "--cluster", cluster.address, "--json",
                                  "-t", "2"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["result"]["n_components"] == gp.wcc(local, **RT).n_components


def _distributed(cluster, tmp_path_factory, name):
    """The small disconnected graph as a cluster dataset `name` on the nodes' d0 folders:
    (the local dataset, the shards' folders)."""
    g = graphs.by_name("disconnected")
    local = gp.partition_arrays(g.src, g.dst, num_vertices=g.n, rows=NODES, cols=1,
                                disks=[str(tmp_path_factory.mktemp(name))], name=name,
                                register=False)
    cluster.distribute(local, [str(cluster.root / "{node}" / "d0")])
    return local, [pl["home"] for pl in cluster.open(name).placement]


def test_replace_fails_midway(cluster, tmp_path_factory, home_kept):
    """distribute --force onto disks one node lacks: an error naming that node; nothing of the new
    copy stays on the other nodes, and the dataset being replaced still runs. Replacing it for
    real then deletes the old shards."""
    local, old = _distributed(cluster, tmp_path_factory, "c-rep")
    for i in (0, 1):
        (cluster.root / f"n{i}" / "d9").mkdir()
    with pytest.raises(GrapheneError, match="node graphene:n2: disk folder .*d9 does not exist"):
        cluster.distribute(local, [str(cluster.root / "{node}" / "d9")], force=True)
    for i in (0, 1):
        assert os.listdir(cluster.root / f"n{i}" / "d9") == []
    ref = gp.bfs(local, src=0, **RT)
    assert np.array_equal(gp.bfs(cluster.open("c-rep"), src=0, **RT).depth, ref.depth)
    cluster.distribute(local, [str(cluster.root / "{node}" / "d1")], force=True)
    assert not any(os.path.exists(h) for h in old)
    assert np.array_equal(gp.bfs(cluster.open("c-rep"), src=0, **RT).depth, ref.depth)


def test_list_and_rm(cluster, tmp_path_factory, home_kept):
    from click.testing import CliRunner
    from graphene_py.cli import main
    local, homes = _distributed(cluster, tmp_path_factory, "c-rm")
    assert all(os.path.isdir(h) for h in homes)
    r = CliRunner().invoke(main, ["cluster", "list"])
    assert r.exit_code == 0 and "c-rm\t12 vertices" in r.output
    r = CliRunner().invoke(main, ["cluster", "rm", "c-rm", "-y", "--address", cluster.address])
    assert r.exit_code == 0, r.output
    assert not any(os.path.exists(h) for h in homes)
    r = CliRunner().invoke(main, ["cluster", "rm", "c-rm", "-y", "--address", cluster.address])
    assert r.exit_code == 1 and "no cluster dataset 'c-rm'" in r.output


def test_node_gone_mid_run(cluster, tmp_path_factory, home_kept):
    """A node that dies for good during a run (its raylet removed): the run stops with an error
    naming the node instead of hanging. (Last in the file: it takes node n2 away for good.)"""
    g = graphs.chain(60)
    local = gp.partition_arrays(g.src, g.dst, num_vertices=g.n, rows=NODES, cols=1,
                                disks=[str(tmp_path_factory.mktemp("gone"))], name="c-gone",
                                register=False)
    cluster.distribute(local, [str(cluster.root / "{node}" / "d0")])
    cg = cluster.open(local.name)
    assert gp.bfs(cg, src=0, **RT).levels == 60
    doomed = cg.labels[2]

    def progress(st, seen=[0]):
        seen[0] += 1
        if seen[0] == 3:
            cg.timeout = 2                # a superstep of the live nodes takes milliseconds
            cluster.lost = doomed
            cluster.ray_cluster.remove_node(cluster.raylets[doomed])
    try:
        with pytest.raises(GrapheneError, match=f"node {doomed}") as e:
            gp.bfs(cg, src=0, progress=progress, **RT)
        print(e.value)
    finally:
        cluster.forget(doomed)
