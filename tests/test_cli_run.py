"""`graphene run`: exit codes, stdout/stderr split, --json, --nl, --output, -v, runtime options."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from graphene_py.cli import main
from graphene_py.partition import partition_arrays
from tests import graphs as tg


@pytest.fixture
def ds(tmp_path):
    g = tg.powerlaw()
    disks = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    for d in disks:
        os.makedirs(d)
    G = partition_arrays(g.src, g.dst, num_vertices=g.n, disks=disks, name="pl", rows=2, cols=2)
    return g, G


def run(*args):
    return CliRunner().invoke(main, ["run", *args])


def test_bfs_text_output_and_verify(ds):
    g, G = ds
    r = run("bfs", "--src", "7", "-v", "-n", "2")   # no --graph: the last partitioned dataset
    assert r.exit_code == 0, r.output
    assert r.stdout.count("Verification: PASS") == 2
    assert "Trial 1:" in r.stdout and "Trial 2:" in r.stdout and "Average Time:" in r.stdout
    assert "peak memory" in r.stdout
    assert "level    0" in r.stderr and "frontier" not in r.stdout   # progress on stderr only


def test_json_and_output(ds, tmp_path):
    g, G = ds
    out = tmp_path / "parent.npy"
    r = run("bfs", "--graph", "pl", "--src", "3", "--json", "-v", "--output", str(out),
            "--threads", "1", "--io-engine", "pread", "--max-gap", "0", "--max-io", "4096",
            "--queue-depth", "8", "--buffer-mb", "2", "--no-direct")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["algorithm"] == "bfs" and d["verification"] == "PASS"
    assert d["engine"].startswith("pread")
    assert d["trials"][0]["src"] == 3
    # where each superstep ran, in order: here every one on the CPU, top-down or bottom-up
    pl = d["placement"]
    assert {e["device"] for e in pl} == {"cpu"} and all(e["supersteps"] > 0 for e in pl)
    assert all((a["device"], a["mode"]) != (b["device"], b["mode"]) for a, b in zip(pl, pl[1:]))
    from graphene_py.algos import bfs
    ref = bfs.run(G, src=3, in_memory=True)
    assert sum(e["supersteps"] for e in pl) == len(bfs.run(G, src=3).supersteps)
    assert d["result"]["n_reached"] == ref.n_reached
    parent = np.load(out)
    res = bfs.BFSResult(**{**ref.__dict__, "parent": parent})
    assert bfs.verify(G, res) == []


def test_nl_one_object_per_superstep(ds):
    r = run("bfs", "--graph", "pl", "--src", "3", "--nl", "--quiet", "--in-memory")
    assert r.exit_code == 0, r.output
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert len(lines) >= 2 and [x["superstep"] for x in lines] == list(range(len(lines)))
    assert all("frontier" in x and "bytes_read" in x for x in lines)
    assert r.stderr == ""


def test_errors_exit_1(ds, tmp_path):
    r = run("bfs", "--graph", "pl", "--src", "100000")
    assert r.exit_code == 1
    assert r.stderr == "Error: --src 100000 is not a vertex (the graph has 4096 vertices: 0..4095)\n"
    r = run("bfs", "--graph", str(tmp_path / "nothing"))
    assert r.exit_code == 1 and "Error:" in r.stderr
    r = run("bfs", "--graph", "pl", "--device", "gpu", "--src", "1")
    assert r.exit_code == 1 and "GPU path not available" in r.stderr


def test_sssp_without_weights_fails_before_any_setup(ds):
    """The algorithm's own refusal comes first: one `Error:` line, no graph or setup lines."""
    r = run("sssp", "--graph", "pl")
    assert r.exit_code == 1
    assert r.stderr.startswith("Error: pl: SSSP needs edge weights") and "setup" not in r.stderr
    assert r.stderr.count("\n") == 1


def test_unknown_algorithm_exit_2(ds):
    r = run("nosuch")
    assert r.exit_code == 2 and "unknown algorithm" in r.stderr


def test_missing_module_is_clear(ds, monkeypatch):
    from graphene_py.algos import registry
    monkeypatch.setitem(registry.ENTRIES, "ghost", registry.Entry("ghost", "ghost_not_built",
                                                                  "Not built."))
    r = run("ghost", "--graph", "pl")
    assert r.exit_code == 1 and "not available" in r.stderr and "ghost_not_built" in r.stderr


def test_verification_failure_exit_3(ds, monkeypatch):
    from graphene_py.algos import bfs
    monkeypatch.setattr(bfs, "verify", lambda graph, result, **kw: ["depth of vertex 1 is wrong"])
    r = run("bfs", "--graph", "pl", "--src", "3", "-v")
    assert r.exit_code == 3
    assert "Verification: FAIL" in r.stderr and "depth of vertex 1" in r.stderr


def test_help_lists_algorithms_and_options(ds):
    r = run("--help")
    assert r.exit_code == 0 and "bfs" in r.stdout and "pagerank" in r.stdout
    r = run("bfs", "--help")
    assert r.exit_code == 0
    for opt in ("--src", "--trials", "--json", "--nl", "--output", "--io-engine", "--in-memory",
                "--device", "--buffer-mb", "--max-gap", "--max-io", "--queue-depth", "--no-direct"):
        assert opt in r.stdout


def test_device_hook(ds, monkeypatch):
    """--device gpu calls the algorithm's GPU entry (bfs.run_gpu) and treats its Result like the
    CPU path's (-v, --json); --device auto without a GPU runs on the CPU."""
    from graphene_py import gpu
    from graphene_py.algos import bfs
    g, G = ds
    calls = []
    cpu_run = bfs.run

    def fake_run(graph, src=None, progress=None, **options):
        calls.append(("bfs", src))
        r = cpu_run(graph, src=src, in_memory=True)
        r.device = "gpu"
        return r

    monkeypatch.setattr(gpu, "available", lambda: False)
    r = run("bfs", "--graph", "pl", "--src", "3", "--device", "auto", "-v")
    assert r.exit_code == 0 and calls == [] and "Verification: PASS" in r.stdout
    monkeypatch.setattr(gpu, "available", lambda: True)
    monkeypatch.setattr(bfs, "run_gpu", fake_run)
    r = run("bfs", "--graph", "pl", "--src", "3", "--device", "gpu", "-v", "--json")
    assert r.exit_code == 0, r.output
    assert calls == [("bfs", 3)]
    d = json.loads(r.stdout)
    assert d["verification"] == "PASS" and d["result"]["device"] == "gpu"


def test_setup_is_reported_before_the_first_trial_and_in_json(tmp_path):
    """The once-per-process work (numba's target, offsets, IO pool and engine) runs before trial 1
    and is reported apart; the trials still give the same answers."""
    from click.testing import CliRunner
    from graphene_py.cli import main
    from graphene_py.partition import partition_arrays
    from tests import graphs
    g = graphs.uniform()
    d = tmp_path / "d0"
    d.mkdir()
    partition_arrays(g.src, g.dst, disks=[str(d)], name="s", rows=1, cols=1)
    r = CliRunner().invoke(main, ["run", "bfs", "--graph", "s", "--src", "0", "-n", "2"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    i_setup = next(i for i, x in enumerate(lines) if x.startswith("setup "))
    i_trial = next(i for i, x in enumerate(lines) if x.startswith("Trial 1:"))
    assert i_setup < i_trial
    r = CliRunner().invoke(main, ["run", "bfs", "--graph", "s", "--src", "0", "--json"])
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["setup"]["seconds"] >= out["setup"]["open_seconds"] >= 0


_ENTRY = "from graphene_py.cli import run_cli; run_cli()"


def _entry(tmp_path, *args, code=_ENTRY):
    import subprocess
    import sys
    env = dict(os.environ)
    # the tree under test first (a machine where it is not installed: the GPU machine's suite)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=300, cwd=str(tmp_path))


def test_the_console_entry_keeps_exit_codes_and_output(ds, tmp_path):
    """`graphene` leaves through os._exit after its atexit handlers and a flush (the interpreter's
    teardown cost ~0.2 s): the exit codes, a piped stdout (complete JSON) and stderr stay what
    click and the error handler made them."""
    r = _entry(tmp_path, "run", "bfs", "--graph", "pl", "--src", "0", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["trials"][0]["n_reached"] > 0
    r = _entry(tmp_path, "run", "bfs", "--graph", "pl", "--bogus")
    assert r.returncode == 2 and "No such option" in r.stderr
    r = _entry(tmp_path, "run", "bfs", "--graph", str(tmp_path / "nothing-here"))
    assert r.returncode == 1 and r.stderr.startswith("Error: ")
    r = _entry(tmp_path, "--version")
    assert r.returncode == 0 and "version 0.1.0" in r.stdout


def test_the_console_entry_runs_atexit_handlers_before_it_leaves(tmp_path):
    marker = tmp_path / "ran"
    code = (f"import atexit; atexit.register(lambda: open({str(marker)!r}, 'w').write('x')); "
            "import sys; from graphene_py import cli; print('out'); "
            "sys.exit(cli._exit_now('a message'))")
    r = _entry(tmp_path, code=code)
    assert r.returncode == 1 and r.stdout == "out\n" and "a message" in r.stderr
    assert marker.read_text() == "x"


def test_the_save_line_names_the_array_the_npy_holds(ds, tmp_path):
    """`-o x.npy` writes the main array the run made: k-core's core numbers, or with
    --membership-only its `in_k_core` (bool), and the line saying so names that array."""
    g, G = ds
    out = tmp_path / "km.npy"
    r = run("kcore", "--graph", "pl", "--k", "3", "--membership-only", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert f"saved KCoreResult (in_k_core) to {out}" in r.output
    assert np.load(out).dtype == np.bool_
    r = run("kcore", "--graph", "pl", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert f"saved KCoreResult (core_number) to {out}" in r.output
    assert np.load(out).dtype.kind == "i"


@pytest.mark.parametrize("opt", [["--gpu-mem", "2G"], ["--gpu-tier", "stream-ssd"]])
def test_gpu_options_without_a_gpu_device_are_usage_errors(ds, opt):
    """--gpu-mem and --gpu-tier on a CPU run (the default --device) say what they need, as a
    usage error (exit 2), before any work; a size of 0 is named as such."""
    r = run("pagerank", "--graph", "pl", *opt)
    assert r.exit_code == 2 and "is for GPU runs" in r.output and opt[1] in r.output
    assert "Trial" not in r.output
    r = run("pagerank", "--graph", "pl", "--device", "auto", "--gpu-mem", "0")
    assert r.exit_code == 2 and "'0' is not a size above 0" in r.output


def test_a_small_graph_says_which_io_options_it_does_not_use(ds, monkeypatch):
    """A graph small enough for the numpy path runs without the IO engine; IO options given
    for it are named in a note (a run without them gets none)."""
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", str(1 << 21))
    r = run("bfs", "--graph", "pl", "--src", "3", "--io-engine", "pread", "--max-io", "4096")
    assert r.exit_code == 0, r.output
    assert "note: --io-engine, --max-io not used: a graph of at most 2,097,152 edges" in r.stderr
    r = run("bfs", "--graph", "pl", "--src", "3")
    assert r.exit_code == 0 and "not used" not in r.stderr
    # a --memory below what the engine's run would need is no error for a run that needs none
    r = run("pagerank", "--graph", "pl", "--memory", "100M")
    assert r.exit_code == 0, r.output
    assert "note: --memory not used" in r.stderr
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", "0")
    r = run("bfs", "--graph", "pl", "--src", "3", "--io-engine", "pread")
    assert r.exit_code == 0 and "not used" not in r.stderr


def test_a_killed_runs_temporary_output_is_removed_by_the_next_run(ds, tmp_path):
    """The temporary files a run writing `-o X` leaves when it is killed (`.X.PID.partial.npy`,
    `.X.PID.*.tmp`) go at the next run writing X once their process is gone; a live process's
    stay."""
    import subprocess
    import sys
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    out = tmp_path / "ap.npy"
    left = [tmp_path / f".ap.npy.{dead}.partial.npy", tmp_path / f".ap.npy.{dead}.x1y2.tmp"]
    live = tmp_path / f".ap.npy.{os.getppid()}.partial.npy"
    other = tmp_path / f".other.npy.{dead}.partial.npy"
    for p in left + [live, other]:
        p.write_bytes(b"\\0" * 4096)
    r = run("apsp", "--graph", "pl", "--sources", "1,2", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert not any(p.exists() for p in left)
    assert live.exists() and other.exists() and np.load(out).shape[0] == 2
