"""The NetworkX backend "graphene": real NetworkX dispatch through the installed entry points.

NetworkX's own tests for the functions graphene implements run against the backend
(NETWORKX_TEST_BACKEND=graphene, the way nx-parallel's CI does it): every call of an implemented
function converts its graph and runs on graphene; what `can_run` refuses falls back to NetworkX.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

nx = pytest.importorskip("networkx")

import graphene_py as gp  # noqa: E402
from graphene_py import nx_backend  # noqa: E402
from tests import graphs  # noqa: E402

NX_SUITES = [
    "networkx.algorithms.link_analysis.tests.test_pagerank",
    "networkx.algorithms.traversal.tests.test_bfs",
    "networkx.algorithms.shortest_paths.tests.test_unweighted",
    "networkx.algorithms.shortest_paths.tests.test_generic",
    "networkx.algorithms.shortest_paths.tests.test_weighted",
    "networkx.algorithms.components.tests.test_connected",
    "networkx.algorithms.components.tests.test_weakly_connected",
    "networkx.algorithms.tests.test_core",
    "networkx.algorithms.centrality.tests.test_closeness_centrality",
    "networkx.algorithms.centrality.tests.test_betweenness_centrality",
]


def test_entry_points_registered():
    from networkx.utils import backends
    assert "graphene" in backends.backends
    assert backends.backend_info["graphene"]["backend_name"] == "graphene"
    assert set(nx_backend.FUNCTIONS) <= set(backends.backend_info["graphene"]["functions"])


def test_networkx_own_tests_pass_on_the_backend(tmp_path):
    # as a user's graphs run: NetworkX's test graphs are small, so BFS, PageRank, components and
    # cores take the numpy path (algos/small.py), the rest the engine (the other tests here and
    # tests/test_algos.py check the engine on the same functions)
    env = dict(os.environ, NETWORKX_TEST_BACKEND="graphene", NETWORKX_FALLBACK_TO_NX="True",
               GRAPHENE_HOME=str(tmp_path / "home"))
    env.pop("GRAPHENE_SMALL_EDGES", None)
    p = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", *NX_SUITES, "-q",
                        "-p", "no:cacheprovider", "-W", "ignore", "-o", "log_cli=true",
                        "--log-cli-level=DEBUG"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=900)
    out = p.stdout + p.stderr
    tail = out.strip().splitlines()[-1]
    assert p.returncode == 0 and "failed" not in tail, out[-3000:]
    used = {}
    for name in re.findall(r"Using backend 'graphene' for call to '([a-z_]+)'", out):
        used[name] = used.get(name, 0) + 1
    # every implemented function really ran on graphene, not only through the fallback
    for name in nx_backend.FUNCTIONS:
        assert used.get(name, 0) >= 1, (name, used)
    assert sum(used.values()) >= 300


@pytest.fixture()
def dataset(tmp_path):
    g = graphs.powerlaw()
    d = tmp_path / "d0"
    d.mkdir()
    G = gp.partition_arrays(g.src, g.dst, disks=[str(d)], name="p", rows=2, cols=2, in_edges=True)
    H = nx.DiGraph()
    H.add_nodes_from(range(G.num_vertices))
    s, t = G.edges("out")
    H.add_edges_from(zip(s.tolist(), t.tolist()))
    return G, H


def test_on_disk_dataset_dispatches_and_matches_networkx(dataset):
    G, H = dataset
    pr = nx.pagerank(G)                         # no backend= : the dataset's type dispatches
    assert isinstance(pr, nx_backend.LabelMap) and len(pr) == G.num_vertices
    ref = nx.pagerank(H)
    assert max(abs(pr[v] - ref[v]) for v in ref) < 1e-5
    assert dict(nx.single_source_shortest_path_length(G, 3)) == \
        nx.single_source_shortest_path_length(H, 3)
    assert nx.number_weakly_connected_components(G) == nx.number_weakly_connected_components(H)
    with pytest.raises(nx.NetworkXNotImplemented):
        nx.connected_components(G)               # NetworkX's rule: undirected only
    with pytest.raises(nx.NodeNotFound):
        nx.single_source_shortest_path_length(G, G.num_vertices + 5)


def test_nx_graph_with_labels_converted(tmp_path):
    H = nx.Graph()
    H.add_edges_from([("alice", "bob"), ("bob", "carol"), ("dave", "erin")])
    H.add_node("solo")
    assert sorted(map(sorted, nx.connected_components(H, backend="graphene"))) == \
        [["alice", "bob", "carol"], ["dave", "erin"], ["solo"]]
    d = nx.single_source_shortest_path_length(H, "alice", backend="graphene")
    assert d == {"alice": 0, "bob": 1, "carol": 2} and isinstance(d, dict)
    cn = nx.core_number(H, backend="graphene")
    assert cn == nx.core_number(H)


def test_can_run_refuses_with_reasons():
    H = nx.path_graph(5)
    assert "personalization" in nx_backend.can_run("pagerank", (H,), {"personalization": {0: 1}})
    # an alpha NetworkX iterates with and graphene refuses: NetworkX's own call
    assert "alpha 1.5 is outside (0, 1)" in nx_backend.can_run("pagerank", (H,), {"alpha": 1.5})
    assert nx_backend.can_run("pagerank", (H, 0.5), {}) is True
    W = nx.Graph()
    W.add_edge(0, 1, weight=3.0)
    assert "weighted" in nx_backend.can_run("pagerank", (W,), {})
    assert nx_backend.can_run("pagerank", (W,), {"weight": None}) is True
    assert "multigraph" in nx_backend.can_run("core_number", (nx.MultiGraph(H),), {})
    assert "single" in nx_backend.can_run("shortest_path_length", (H,), {})
    assert "weighted betweenness" in nx_backend.can_run("betweenness_centrality", (H,),
                                                        {"weight": "weight"})
    assert "does not implement" in nx_backend.can_run("eigenvector_centrality", (H,), {})


def test_should_run_declines_small_graphs():
    small = nx.path_graph(10)
    assert isinstance(nx_backend.should_run("pagerank", (small,), {}), str)
    big = nx.gnm_random_graph(5000, nx_backend.NX_MIN_EDGES + 10, seed=1)
    assert nx_backend.should_run("pagerank", (big,), {}) is True


def test_large_dataset_never_materialized(dataset, monkeypatch):
    G, H = dataset
    monkeypatch.setattr(nx_backend, "NX_MAX_EDGES", 10)
    with pytest.raises(NotImplementedError, match="not turned into a NetworkX graph"):
        nx_backend.convert_to_nx(G)
    monkeypatch.setattr(nx_backend, "NX_MAX_EDGES", 10 ** 9)
    back = nx_backend.convert_to_nx(G)
    assert back.number_of_edges() == H.number_of_edges()


def test_relabelled_dataset_keys_are_original_ids(tmp_path):
    p = tmp_path / "sparse.el"
    p.write_text("1000000 7\n7 42\n42 1000000\n")
    d = tmp_path / "d0"
    d.mkdir()
    G = gp.partition(str(p), [str(d)], name="rl", relabel=True, quiet=True, symmetrize=True)
    cn = nx.core_number(G)
    assert dict(cn) == {7: 2, 42: 2, 1000000: 2}
    assert dict(nx.single_source_shortest_path_length(G, 1000000)) == {1000000: 0, 7: 1, 42: 1}
    assert np.isclose(sum(nx.pagerank(G).values()), 1.0)


def test_bfs_edges_errors_and_tree_as_networkx():
    """bfs_edges from a node not in the graph raises NetworkX's own NetworkXError; on a random
    graph its tree has NetworkX's depths and every edge is one of the graph's (the parent may
    differ where a vertex has several one level up)."""
    G = nx.gnm_random_graph(300, 900, seed=3)
    with pytest.raises(nx.NetworkXError, match="The node 999 is not in the graph"):
        list(nx.bfs_edges(G, 999, backend="graphene"))
    ours = list(nx.bfs_edges(G, 0, backend="graphene"))
    theirs = list(nx.bfs_edges(G, 0))
    assert len(ours) == len(theirs) and all(G.has_edge(u, v) for u, v in ours)
    depth = nx.single_source_shortest_path_length(G, 0)
    assert all(depth[v] == depth[u] + 1 for u, v in ours)
    assert {v for _, v in ours} == {v for _, v in theirs}
