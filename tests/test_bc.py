"""Betweenness centrality against NetworkX on the shared test graphs: exact on the small ones,
sampled (NetworkX's k and seed: the same sources) on the larger ones; SSD and in memory, directed
and undirected, every normalization; the CLI with -v."""
from __future__ import annotations

import numpy as np
import pytest

nx = pytest.importorskip("networkx")

import graphene_py as gp  # noqa: E402
from graphene_py.algos import bc as bc_mod  # noqa: E402
from tests import graphs  # noqa: E402

SSD = {"engine": "uring", "buffer_mb": 2, "threads": 2}


def nx_graph(g, directed):
    H = nx.DiGraph() if directed else nx.Graph()
    H.add_nodes_from(range(g.n))
    H.add_edges_from((int(a), int(b)) for a, b in zip(g.src, g.dst) if a != b)
    return H


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("bc")


def dataset(root, g, directed):
    d = root / f"{g.name}-{directed}"
    if not d.exists():
        d.mkdir()
    return gp.partition_arrays(g.src, g.dst, num_vertices=g.n, disks=[str(d)],
                               name=f"bc-{g.name}-{directed}", rows=2, cols=2,
                               symmetrize=not directed, in_edges=directed, register=False,
                               force=True)


GRAPHS = [pytest.param(f.__name__, marks=pytest.mark.slow) if f.__name__ == "chain" else f.__name__
          for f in graphs.ALL if f.__name__ != "empty"]


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("gname", GRAPHS + ["short_chain"])
def test_vs_networkx(root, gname, directed):
    # the 5000-level chain costs 20k supersteps per source (slow suite); a 400-level one here
    g = graphs.chain(400) if gname == "short_chain" else graphs.by_name(gname)
    if gname == "short_chain":
        g.name = gname
    G = dataset(root, g, directed)
    H = nx_graph(g, directed)
    small = g.n <= 120
    variants = ([{}, {"normalized": False}, {"endpoints": True}] if small else
                [{"k": 6, "seed": 3}, {"k": 6, "seed": 3, "endpoints": True, "normalized": False}])
    for kw in variants:
        ref = nx.betweenness_centrality(H, **kw)
        want = np.array([ref[v] for v in range(g.n)])
        for mode in (SSD, {"in_memory": True}):
            r = gp.bc(G, **kw, **mode)
            assert np.allclose(r.bc, want, rtol=1e-9, atol=1e-12, equal_nan=True), (gname, kw)
            assert bc_mod.verify(G, r) == []


def test_verify_catches_a_wrong_value(root):
    g = graphs.by_name("grid")
    G = dataset(root, g, False)
    r = gp.bc(G, k=4, seed=1, in_memory=True)
    r.bc = r.bc.copy()
    r.bc[int(np.argmax(r.bc))] *= 1.01
    assert bc_mod.verify(G, r)


def test_cli_bc_sampled_verified(root, tmp_path):
    from click.testing import CliRunner

    from graphene_py.cli import main
    g = graphs.by_name("powerlaw")
    d = tmp_path / "d0"
    d.mkdir()
    gp.partition_arrays(g.src, g.dst, disks=[str(d)], name="bcp", symmetrize=True)
    r = CliRunner().invoke(main, ["run", "bc", "--graph", "bcp", "-k", "5", "--seed", "2", "-v",
                                  "-o", str(tmp_path / "bc.npy")])
    assert r.exit_code == 0, r.output
    assert "Verification: PASS" in r.output
    assert np.load(tmp_path / "bc.npy").shape == (g.n,)
