"""`graphene` option checking (issue 10): every bad option is a clear error before any work, output
files, apsp --closeness, PageRank convergence, pipes and Ctrl-C, help texts, empty inputs."""
from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from graphene_py.cli import main
from graphene_py.graph import Graph
from tests import graphs as tg


def cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r


def _write_el(path, src, dst, header="# comment\n"):
    with open(path, "w") as f:
        f.write(header)
        for a, b in zip(src, dst):
            f.write(f"{a} {b}\n")
    return str(path)


# --------------------------------------------------------------------------------------------
# item 7: an empty or comment-only input is an error, and --force never replaces a good dataset
@pytest.mark.parametrize("content", ["", "# only a comment\n% and another\n\n"])
def test_partition_empty_input_keeps_old_dataset(tmp_path, content):
    d0 = tmp_path / "d0"
    d0.mkdir()
    g = tg.disconnected()
    good = _write_el(tmp_path / "good.el", g.src, g.dst)
    r = cli("partition", good, "--disks", d0, "--name", "keep", "-q")
    assert r.exit_code == 0, r.output
    r = cli("run", "bfs", "--graph", "keep", "--src", "0", "-o", tmp_path / "before.npy", "-q")
    assert r.exit_code == 0, r.output
    before = np.load(tmp_path / "before.npy")

    empty = tmp_path / "empty.el"
    empty.write_text(content)
    r = cli("partition", empty, "--disks", d0, "--name", "keep", "--force", "-q")
    assert r.exit_code == 1
    assert f"Error: {empty}: no edges (empty or only comments)" in r.stderr
    assert "Traceback" not in r.output
    assert sorted(os.listdir(d0)) == ["keep"]          # no temporary folder left behind
    G = Graph.open("keep")
    assert G.num_vertices == g.n - 1 and G.num_edges == len(g.src)  # 12 IDs, the last isolated
    r = cli("run", "bfs", "--graph", "keep", "--src", "0", "-o", tmp_path / "after.npy", "-q")
    assert r.exit_code == 0, r.output
    assert np.array_equal(np.load(tmp_path / "after.npy"), before)


# --------------------------------------------------------------------------------------------
# a 10-vertex dataset (the brief's example message) and a larger one for long runs
@pytest.fixture
def ten(tmp_path):
    from graphene_py.partition import partition_arrays
    d = tmp_path / "ten"
    d.mkdir()
    src = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 3, 5])
    dst = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 5, 0, 2])
    G = partition_arrays(src, dst, num_vertices=10, disks=[str(d)], name="ten", rows=1, cols=2,
                         in_edges=True)
    return G


def _no_work(r):
    """The run did not start: nothing on stdout, no dataset line or superstep line on stderr."""
    assert r.stdout == ""
    assert "graph ten" not in r.stderr and "level" not in r.stderr and "step" not in r.stderr
    assert "Traceback" not in r.output


BAD_USAGE = [   # click range errors: exit 2, the option named
    (["bfs", "--queue-depth", "5000"], "--queue-depth"),
    (["bfs", "--queue-depth", "-1"], "--queue-depth"),
    (["bfs", "--queue-depth", "0"], "--queue-depth"),
    (["bfs", "-t", "-1"], "--threads"),
    (["bfs", "-t", "0"], "--threads"),
    (["bfs", "-t", "100000"], "--threads"),
    (["bfs", "--max-io", "100"], "--max-io"),
    (["bfs", "--max-io", "1000"], "not a multiple of 512"),
    (["bfs", "--max-io", str(1 << 30)], "--max-io"),
    (["bfs", "--max-gap", "-1"], "--max-gap"),
    (["bfs", "--buffer-mb", "-5"], "--buffer-mb"),
    (["bfs", "--buffer-mb", "0"], "--buffer-mb"),
    (["bfs", "--buffer-mb", "nan"], "--buffer-mb"),
    (["bfs", "-n", "0"], "--trials"),
    (["pagerank", "--tol", "-1"], "--tol"),
    (["pagerank-pull", "--tolerance", "-1"], "--tolerance"),
    (["pagerank", "--tolerance", "nan"], "--tolerance"),
    (["pagerank", "--threshold", "-1"], "--threshold"),
    (["pagerank", "--threshold", "1"], "--threshold"),
    (["pagerank", "--max-iter", "0"], "--max-iter"),
    (["pagerank", "--alpha", "1"], "--alpha"),
    (["pagerank", "--alpha", "0"], "--alpha"),
    (["kcore", "--k", "-1"], "--k"),
    (["kcore", "--keep-edges", "-1"], "--keep-edges"),
    (["apsp", "--num-sources", "0"], "--num-sources"),
    (["apsp", "--num-sources", "-3"], "--num-sources"),
    (["apsp", "--sources", ","], "--sources"),
    (["apsp", "--sources", "1,x"], "--sources"),
    (["apsp", "--sources", "1", "--num-sources", "3"], "not both"),
    (["sssp", "--delta", "0"], "--delta"),
    (["sssp", "--delta", "-2"], "--delta"),
    (["sssp", "--delta", "inf"], "--delta"),
]


@pytest.mark.parametrize("args,needle", BAD_USAGE, ids=[" ".join(a) for a, _ in BAD_USAGE])
def test_bad_option_is_a_usage_error_before_any_work(ten, args, needle):
    r = cli("run", *args, "--graph", "ten")
    assert r.exit_code == 2, r.output
    assert needle in r.stderr
    _no_work(r)


BAD_VALUE = [   # graph-dependent checks: `Error: ...` naming the value, exit 1
    (["bfs", "--src", "99"], "Error: --src 99 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["bfs", "--src", "10"], "Error: --src 10 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["bfs", "--src", "-1"], "Error: --src -1 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["apsp", "--sources", "1,12"],
     "Error: --sources 12 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["apsp", "--sources", "-4"],
     "Error: --sources -4 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["bfs", "--buffer-mb", "1e15"], None),
]


@pytest.mark.parametrize("args,message", BAD_VALUE, ids=[" ".join(a) for a, _ in BAD_VALUE])
def test_bad_value_is_an_error_before_any_work(ten, args, message):
    r = cli("run", *args, "--graph", "ten")
    assert r.exit_code == 1, r.output
    if message is None:
        assert r.stderr.startswith(f"Error: --buffer-mb 1e+15 is more than this machine's memory")
    else:
        assert r.stderr == message
    _no_work(r)


def test_good_edge_values_are_accepted(ten, tmp_path):
    # the ends of the ranges run (a range that is too tight fails here)
    r = cli("run", "bfs", "--graph", "ten", "--src", "9", "-t", "1", "--queue-depth", "1",
            "--max-io", "512", "--max-gap", "0", "--buffer-mb", "0.5", "-q", "-v")
    assert r.exit_code == 0, r.output
    assert "Verification: PASS" in r.stdout
    r = cli("run", "pagerank", "--graph", "ten", "--threshold", "0", "--tol", "0", "--max-iter",
            "3", "-q", "-t", str(4096 // 4), "--queue-depth", "4096")
    assert r.exit_code == 0, r.output
    assert "warning" not in r.stderr          # tolerance 0 asks for exactly --max-iter iterations


def test_api_checks_options(ten):
    import graphene_py as gp
    from graphene_py.errors import GrapheneError
    with pytest.raises(GrapheneError, match=r"^src 99 is not a vertex \(the graph has 10 vertices: "
                                            r"0\.\.9\)$"):
        gp.bfs(ten, src=99)
    with pytest.raises(GrapheneError, match="queue_depth 0 is out of range"):
        gp.bfs(ten, src=0, queue_depth=0)      # was silently the default
    with pytest.raises(GrapheneError, match="max_io 1000 is not a multiple"):
        gp.bfs(ten, src=0, max_io=1000)
    with pytest.raises(GrapheneError, match="tolerance -1 is out of range"):
        gp.pagerank(ten, tolerance=-1)
    with pytest.raises(GrapheneError, match="threshold 2 is out of range"):
        gp.pagerank(ten, threshold=2)
    with pytest.raises(GrapheneError, match="num_sources 0 is out of range"):
        gp.apsp(ten, num_sources=0)
    with pytest.raises(GrapheneError, match="sources 10 is not a vertex"):
        gp.apsp(ten, sources=[0, 10])
    with pytest.raises(GrapheneError, match="buffer_mb 0 is out of range"):
        gp.wcc(ten, buffer_mb=0)
    assert gp.bfs(ten, src=9, threads=1).n_reached == 1


# --------------------------------------------------------------------------------------------
# partition --rows / --cols
@pytest.mark.parametrize("grid", [["--cols", "0"], ["--rows", "0"], ["--rows", "-2"],
                                  ["--cols", "100000"], ["--rows", "100", "--cols", "100"]])
def test_partition_bad_grid_is_an_error(tmp_path, grid):
    d = tmp_path / "d"
    d.mkdir()
    el = _write_el(tmp_path / "g.el", [0, 1], [1, 2])
    r = cli("partition", el, "--disks", d, "-q", *grid)
    assert r.exit_code == 1, r.output
    assert r.stderr.startswith(f"Error: {grid[0]} {grid[1]} ") and "Traceback" not in r.output
    assert os.listdir(d) == []
    r = cli("partition", el, "--disks", d, "-q", "--rows", "64", "--cols", "64")   # the limit
    assert r.exit_code == 0, r.output
