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
    (["apsp", "--sources", "0,,1"], "an empty item"),
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
    (["bc", "-k", "11"], "Error: k = 11 sampled sources (--num-sources) is more than the 10 "
                         "vertices of ten (exact=True / --exact: every vertex)\n"),
    (["bfs", "--src", "10"], "Error: --src 10 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["bfs", "--src", "-1"], "Error: --src -1 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["apsp", "--sources", "1,12"],
     "Error: --sources 12 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    (["apsp", "--sources", "-4"],
     "Error: --sources -4 is not a vertex (the graph has 10 vertices: 0..9)\n"),
    # names are for datasets that have them (--labels): on this one, a name is a bad value
    (["apsp", "--sources", "1,x"],
     "Error: --sources 'x' is not a vertex ID (the vertices of dataset ten have no names: "
     "partition with --labels to use names)\n"),
    (["bfs", "--src", "alice"],
     "Error: --src 'alice' is not a vertex ID (the vertices of dataset ten have no names: "
     "partition with --labels to use names)\n"),
    (["bfs", "--buffer-mb", "1e15"], None),
    (["bfs", "--queue-depth", "4096", "--max-io", str(16 << 20), "-t", "1"], None),
]


@pytest.mark.parametrize("args,message", BAD_VALUE, ids=[" ".join(a) for a, _ in BAD_VALUE])
def test_bad_value_is_an_error_before_any_work(ten, args, message, monkeypatch):
    from graphene_py.algos import common
    monkeypatch.setattr(common, "_physical_mb", lambda: 64 * 1024.0)   # a 64 GiB machine
    r = cli("run", *args, "--graph", "ten")
    assert r.exit_code == 1, r.output
    if "--buffer-mb" in args:
        assert r.stderr == ("Error: --buffer-mb 1e+15 is more than this machine's memory "
                            "(65,536 MiB)\n")
    elif message is None:     # 2 x 4096 + 32 + 16 = 8,240 slots of 16 MiB
        assert r.stderr.startswith("Error: --queue-depth 4096 with --max-io 16777216 and 1 "
                                   "thread(s) needs an IO buffer pool of at least 131,840 MiB")
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
            "3", "-q", "-t", "2", "--queue-depth", "4096", "--max-gap", "32768")
    assert r.exit_code == 0, r.output
    assert "warning" not in r.stderr          # tolerance 0 asks for exactly --max-iter iterations


def test_threads_far_above_the_cores_warn(ten, monkeypatch):
    """More than twice the cores the process may use is allowed (a run still finishes) but said,
    where up to twice is not (hyper-threads, IO waits)."""
    from graphene_py import config
    monkeypatch.setattr(config, "default_threads", lambda: 2)
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "-t", "5")
    assert r.exit_code == 0, r.output
    assert "warning: --threads 5 is more than twice the 2 core(s)" in r.stderr
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "-t", "4")
    assert r.exit_code == 0 and "warning" not in r.stderr, r.output


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
    assert r.exit_code == 2, r.output                  # a usage error, as run's ranges
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and grid[0] in last and grid[-1] in last
    assert "Traceback" not in r.output
    assert os.listdir(d) == []


def test_partition_good_grid_runs(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    el = _write_el(tmp_path / "g.el", [0, 1, 2], [1, 2, 3])
    r = cli("partition", el, "--disks", d, "-q", "--rows", "2", "--cols", "3")
    assert r.exit_code == 0, r.output
    assert (Graph.open("g").num_rows, Graph.open("g").num_cols) == (2, 3)


# --------------------------------------------------------------------------------------------
# item 4: -o by suffix, checked before the run, written atomically
def test_output_npz_npy_csv(ten, tmp_path):
    from graphene_py.algos import bfs
    ref = bfs.run(ten, src=0, in_memory=True)
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "-q", "-o", tmp_path / "b.npz")
    assert r.exit_code == 0, r.output
    z = np.load(tmp_path / "b.npz")
    assert sorted(z.files) == ["depth", "parent"]
    assert np.array_equal(z["depth"], ref.depth) and z["depth"].dtype == np.int32
    assert bfs.verify(ten, bfs.BFSResult(**{**ref.__dict__, "parent": z["parent"]})) == []
    mask = os.umask(0o022)
    os.umask(mask)
    assert os.stat(tmp_path / "b.npz").st_mode & 0o777 == 0o666 & ~mask   # not mkstemp's 0600
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "-q", "-o", tmp_path / "b.npy")
    assert r.exit_code == 0, r.output
    assert np.array_equal(np.load(tmp_path / "b.npy"), z["parent"])       # the main array
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "-q", "-o", tmp_path / "b.csv")
    assert r.exit_code == 0, r.output
    lines = (tmp_path / "b.csv").read_text().splitlines()
    assert lines[0] == "vertex,parent,depth" and len(lines) == 11
    rows = [tuple(int(x) for x in ln.split(",")) for ln in lines[1:]]
    assert rows == [(v, int(z["parent"][v]), int(ref.depth[v])) for v in range(10)]
    # floats round-trip exactly, booleans are 0/1
    r = cli("run", "pagerank-pull", "--graph", "ten", "-q", "-o", tmp_path / "p.csv")
    assert r.exit_code == 0, r.output
    got = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    r = cli("run", "pagerank-pull", "--graph", "ten", "-q", "-o", tmp_path / "p.npy")
    assert r.exit_code == 0, r.output
    pr = np.load(tmp_path / "p.npy")
    assert np.array_equal(got[:, 1], pr) and np.array_equal(got[:, 0], np.arange(10))
    r = cli("run", "kcore", "--graph", "ten", "--k", "2", "--membership-only", "-q", "-o",
            tmp_path / "k.csv")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "k.csv").read_text().splitlines()[0] == "vertex,in_k_core"
    assert {ln.split(",")[1] for ln in (tmp_path / "k.csv").read_text().splitlines()[1:]} <= {"0", "1"}


@pytest.mark.parametrize("target,needle", [
    ("x.txt", "unknown output suffix '.txt'; use .npy, .npz, .csv"),
    ("x", "unknown output suffix '(none)'; use .npy, .npz, .csv"),
    ("missing/x.npy", "output folder"),
    ("afile/x.npy", "output folder"),         # the "folder" is a file
])
def test_output_refused_before_the_run(ten, tmp_path, target, needle):
    """A suffix no output has is a bad option value (usage, exit 2); a folder that is not there
    is the machine's state (exit 1)."""
    (tmp_path / "afile").write_text("not a folder")
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "-o", tmp_path / target)
    if "suffix" in needle:
        assert r.exit_code == 2, r.output
        assert f"Invalid value for '-o' / '--output': {tmp_path / target}: " in r.stderr
    else:
        assert r.exit_code == 1, r.output
        assert r.stderr.startswith(f"Error: {tmp_path / target}: ")
    assert needle in r.stderr
    _no_work(r)


def test_membership_only_without_k_is_a_usage_error(ten):
    r = cli("run", "kcore", "--membership-only", "--graph", "ten")
    assert r.exit_code == 2, r.output
    assert "Error: --membership-only needs --k K (which core's members)" in r.stderr
    _no_work(r)


def test_output_csv_refused_for_apsp_before_the_run(ten, tmp_path):
    r = cli("run", "apsp", "--graph", "ten", "--sources", "0", "-o", tmp_path / "a.csv")
    assert r.exit_code == 1, r.output
    assert "does not fit a vertex,value table" in r.stderr and ".npz" in r.stderr
    _no_work(r)
    assert not (tmp_path / "a.csv").exists()


def test_output_failure_leaves_nothing_half_written(ten, tmp_path, monkeypatch):
    target = tmp_path / "b.npz"
    target.write_bytes(b"old contents")

    def broken_savez(f, **arrays):
        f.write(b"PK\x03\x04 half an archive")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", broken_savez)
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "-q", "-o", target)
    assert r.exit_code == 1 and "No space left on device" in r.stderr
    assert target.read_bytes() == b"old contents"                # not replaced by half a file
    assert sorted(os.listdir(tmp_path)) == ["b.npz", "ten"]      # no temporary file left


# --------------------------------------------------------------------------------------------
# item 2: apsp --closeness prints and saves closeness
def _closeness_ref(G, s):
    from tests import naive
    src, dst = G.edges("out")
    d = naive.bfs_depths(G.num_vertices, src, dst, s)
    return naive.closeness(d)


def test_apsp_closeness_summary_json_and_npz(ten, tmp_path):
    import json
    refs = {s: _closeness_ref(ten, s) for s in (0, 3, 9)}
    r = cli("run", "apsp", "--graph", "ten", "--sources", "0,3,9", "--closeness", "-q")
    assert r.exit_code == 0, r.output
    mean = sum(refs.values()) / 3
    assert f"closeness over 3 source(s): mean {mean:.6g}" in r.stdout
    best = max(refs, key=refs.get)
    assert f"top 3 (vertex closeness): {best} {refs[best]:.6g}" in r.stdout
    r = cli("run", "apsp", "--graph", "ten", "--sources", "0,3,9", "--closeness", "--json",
            "-o", tmp_path / "a.npz")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["result"]
    assert d["sources"] == [0, 3, 9]
    assert d["closeness"] == pytest.approx([refs[0], refs[3], refs[9]], rel=1e-12)
    z = np.load(tmp_path / "a.npz")
    assert {"depths", "sources", "reached", "closeness"} <= set(z.files)
    assert z["closeness"] == pytest.approx([refs[0], refs[3], refs[9]], rel=1e-12)
    from tests import naive
    src, dst = ten.edges("out")
    for i, s in enumerate((0, 3, 9)):
        assert np.array_equal(z["depths"][i], naive.bfs_depths(10, src, dst, s))
    # without -o nothing reads the depths: not made (msbfs keep_depths=False), the same counts
    r = cli("run", "apsp", "--graph", "ten", "--sources", "0,3,9", "--closeness", "--json")
    assert r.exit_code == 0, r.output
    d2 = json.loads(r.stdout)["result"]
    assert "depths" not in d2 and d2["reached"] == d["reached"]
    assert d2["closeness"] == pytest.approx(d["closeness"], rel=1e-12)


def test_sources_help_and_readme_are_unmistakable():
    r = cli("run", "apsp", "-h")
    text = " ".join(r.stdout.split())
    assert "--sources 32 is the one vertex 32" in text and "--num-sources 32" in text
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    assert "apsp --sources 32 --closeness" not in readme
    assert "graphene run apsp --num-sources 32 --closeness" in readme


def test_num_sources_draws_that_many(ten):
    import json
    r = cli("run", "apsp", "--graph", "ten", "--num-sources", "3", "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["result"]["sources"]) == 3


def test_bfs_from_a_vertex_without_edges_warns(ten):
    import json
    r = cli("run", "bfs", "--graph", "ten", "--src", "9", "--json")     # 9: no out-edges
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["result"]["n_reached"] == 1
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert warn == ["warning: source vertex 9 reached no other vertex (it has no out-edges to "
                    "another vertex); give another with --src"]
    r = cli("run", "bfs", "--graph", "ten", "--src", "0", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["result"]["n_reached"] == 10
    assert "warning" not in r.stderr


# --------------------------------------------------------------------------------------------
# item 3: PageRank says when it stopped without converging
@pytest.mark.parametrize("algo", ["pagerank", "pagerank-pull"])
def test_pagerank_not_converged_warns(ten, algo):
    import json
    r = cli("run", algo, "--graph", "ten", "--max-iter", "2", "--tol", "1e-10", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["result"]
    assert res["converged"] is False and res["iterations"] == 2 and res["error"] >= 1e-10
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1
    assert warn[0].startswith("warning: PageRank stopped after 2 iterations without reaching "
                              "tolerance 1e-10 (last L1 change ")
    r = cli("run", algo, "--graph", "ten", "--max-iter", "1", "--tol", "1e-10")
    assert "stopped after 1 iteration without" in r.stderr, r.stderr
    r = cli("run", algo, "--graph", "ten", "--max-iter", "200", "--tol", "1e-6", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["result"]
    assert res["converged"] is True and res["error"] < 1e-6 and res["iterations"] < 200
    assert "warning" not in r.stderr


def test_gpu_pagerank_result_has_converged(ten, monkeypatch):
    """PageRank's GPU entry builds PageRankResult itself: converged follows the same rule (no GPU
    needed: the device graph and kernel are stand-ins)."""
    from graphene_py.algos import pagerank
    from graphene_py.gpu import algorithms as A
    from graphene_py.gpu import resident

    def fake_pagerank(dg, alpha, tol, max_iter, stats):
        stats.update(iterations=max_iter, error=0.5)
        return np.full(10, 0.1)

    class FakeDeviceGraph:
        def tier(self):
            return "gpu"

    monkeypatch.setattr(resident, "device_graph", lambda graph, gpu_mem=None: FakeDeviceGraph())
    monkeypatch.setattr(A, "pagerank", fake_pagerank)
    res = pagerank.run_gpu(ten, tolerance=1e-4, max_iter=7, gpu_tier="resident")
    assert res.converged is False and res.tolerance == 1e-4
    assert res.warnings() and "after 7 iterations" in res.warnings()[0]
    res = pagerank.run_gpu(ten, tolerance=0.9, max_iter=7, gpu_tier="resident")
    assert res.converged is True and res.warnings() == []


# --------------------------------------------------------------------------------------------
# item 6: whole descriptions in `graphene run -h`
def test_run_help_descriptions_are_whole_sentences():
    from graphene_py.algos.registry import ENTRIES as ALGORITHMS
    from graphene_py.cli_run import run_cmd
    r = cli("run", "-h")
    assert r.exit_code == 0
    listing = " ".join(r.stdout.split())
    for name in ALGORITHMS:
        short = run_cmd.get_command(None, name).get_short_help_str(limit=45)
        assert short.endswith(".") and len(short) > 20, (name, short)
        assert " ".join(f"{name} {short}".split()) in listing, name


# --------------------------------------------------------------------------------------------
# item 5: a closed pipe and Ctrl-C end the run quietly
def _graphene(*args, **kw):
    import signal
    import subprocess
    import sys
    code = "from graphene_py.cli import main; main()"
    # SIGINT back to its default before exec, so the child gets Python's KeyboardInterrupt even
    # when the test runner itself ignores SIGINT (a background job)
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)],
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            text=True, **kw)


# PageRank with tolerance 0 and a huge cap runs until it is stopped: no timing involved
ENDLESS = ["run", "pagerank-pull", "--graph", "ten", "--tol", "0", "--max-iter", "100000000"]


def test_closed_stdout_pipe_exits_141_quietly(ten):
    import subprocess
    p = _graphene(*ENDLESS, "--nl", "-q", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = p.stdout.readline()
        assert first.startswith('{"superstep": 0')
        p.stdout.close()                      # `| head -1` exits
        err = p.stderr.read()
        rc = p.wait(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert rc == 141, err
    assert err == ""                          # no traceback, no "Exception ignored ...", no Error


def test_ctrl_c_exits_130_with_a_short_message(ten, tmp_path):
    import signal
    import subprocess
    out = tmp_path / "scores.npz"
    p = _graphene(*ENDLESS, "-o", out, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        head = []
        while True:                           # wait for the first superstep: the run is going
            line = p.stderr.readline()
            assert line, "".join(head)
            head.append(line)
            if line.startswith("step"):
                break
        p.send_signal(signal.SIGINT)
        stdout, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-2000:]
    assert err.endswith("Interrupted\n")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "Aborted" not in err
    assert "Average Time" not in stdout
    assert sorted(os.listdir(tmp_path)) == ["ten"]   # no output, no temporary file


def test_more_sources_asked_than_vertices_with_edges_is_noted(ten):
    """APSP's random sources are vertices with out-edges: asking for more than there are runs
    every one of them, and says so (a silent cap would read as the count asked for)."""
    r = cli("run", "apsp", "--graph", "ten", "--num-sources", "50")
    assert r.exit_code == 0, r.output
    assert "note: --num-sources 50: only " in r.stderr and "each of them is a source" in r.stderr
    r = cli("run", "apsp", "--graph", "ten", "--num-sources", "2")
    assert r.exit_code == 0 and "--num-sources" not in r.stderr
