"""gpu/early.py: a `--device gpu` command's CUDA context begun while the process imports. The
command-line test and the switch need no GPU; the context's use by CuPy and a whole GPU run
after it are marked `gpu` (skipped without one)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from graphene_py.gpu import early


@pytest.mark.parametrize("argv, want", [
    (["graphene", "run", "bfs", "--device", "gpu", "-g", "x"], True),
    (["graphene", "bench", "wcc", "--device=gpu"], True),
    (["graphene", "run", "bfs", "--device", "auto"], True),
    (["graphene", "run", "wcc", "--device=auto", "-g", "x"], True),
    (["graphene", "run", "wcc", "--memory", "auto"], False),                # not a device
    (["graphene", "run", "bfs", "--device", "cpu", "-g", "gpu"], False),   # a dataset named gpu
    (["graphene", "run", "bfs", "--device"], False),
    (["graphene", "partition", "x.el", "--device", "gpu"], False),          # not a run
    (["graphene"], False),
    ([], False),
])
def test_only_a_run_that_may_use_the_gpu_starts_early(argv, want):
    assert early.wanted(argv) is want


@pytest.mark.parametrize("value, mode", [(None, "context"), ("import", "import"),
                                         ("OFF", "off"), ("0", "off"), ("no", "off"),
                                         ("bogus", "context")])
def test_the_switch(monkeypatch, value, mode):
    if value is None:
        monkeypatch.delenv(early.ENV, raising=False)
    else:
        monkeypatch.setenv(early.ENV, value)
    assert early.mode() == mode


def test_off_or_no_device_node_starts_nothing(monkeypatch):
    monkeypatch.setattr(early, "state", dict(early.state, thread=None))
    gpu_run = ["graphene", "run", "bfs", "--device", "gpu"]
    monkeypatch.setenv(early.ENV, "off")
    assert early.start(gpu_run) is False and early.state["thread"] is None
    monkeypatch.delenv(early.ENV)
    monkeypatch.setattr(early.os.path, "exists", lambda p: False)
    assert early.start(gpu_run) is False and early.state["thread"] is None


def test_a_cpu_command_imports_none_of_it():
    """The command line is looked at before anything is imported; a CPU run imports neither this
    module nor the GPU package."""
    code = ("import sys; sys.argv = ['graphene', 'run', 'bfs', '--device', 'cpu', '--help']; "
            "from graphene_py import cli; "
            "print('graphene_py.gpu' in sys.modules, 'graphene_py.gpu.early' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.gpu
def test_cupy_runs_in_the_context_begun_early():
    """The primary context retained through the driver is the one CuPy's runtime then uses:
    CuPy's current context after a first kernel is that handle."""
    import ctypes

    import cupy as cp
    ctx = early.primary_context()
    assert ctx
    x = cp.arange(1000, dtype=cp.int64)
    assert int(x.sum()) == 499500
    cur = ctypes.c_void_p()
    assert ctypes.CDLL("libcuda.so.1").cuCtxGetCurrent(ctypes.byref(cur)) == 0
    assert cur.value == ctx


@pytest.mark.gpu
def test_a_gpu_run_begun_early_gives_the_cpu_result(tmp_path):
    """`graphene run bfs --device gpu` with each mode: the same depths as the CPU run."""
    from tests import graphs as G
    g = G.partitioned(tmp_path, "powerlaw", "sym", name="early")
    depth = {}
    for dev, m in (("cpu", "off"), ("gpu", "off"), ("gpu", "context"), ("gpu", "import")):
        out = subprocess.run([sys.executable, "-c", "from graphene_py.cli import run_cli; run_cli()",
                              "run", "bfs", "--src", "0", "-g", g.path, "--device", dev, "--json",
                              "-q", "-o", str(tmp_path / f"{dev}_{m}.npz")],
                             capture_output=True, text=True, env=dict(os.environ, **{early.ENV: m}))
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["result"].get("device", dev) == dev
        depth[(dev, m)] = np.load(tmp_path / f"{dev}_{m}.npz")["depth"]
    for k, d in depth.items():
        np.testing.assert_array_equal(d, depth[("cpu", "off")], err_msg=str(k))


@pytest.mark.gpu
def test_a_context_given_back_by_a_cpu_plan_leaves_cupy_working():
    """`--device auto` that planned the CPU gives the early context back (release_unused) on a
    thread; a GPU run later in the same process (the Python API, a second command) still works:
    CuPy's runtime retains the primary context again. A second call does nothing more."""
    code = ("import sys, time; from graphene_py.gpu import early; "
            "assert early.start(['graphene', 'run', 'bfs', '--device', 'auto']); "
            "early.release_unused(); early.release_unused(); "
            "[t.join() for t in __import__('threading').enumerate() "
            "if t.name == 'graphene-cuda-release']; "
            "import cupy as cp; print(int(cp.arange(1000, dtype=cp.int64).sum()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, **{early.ENV: "context"}))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["499500"]


def test_release_without_an_early_start_does_nothing(monkeypatch):
    monkeypatch.setattr(early, "state", dict(early.state, thread=None))
    early.release_unused()
    assert "released" not in early.state
