"""IO engines that cannot work here must never take the process down (issue 10).

* io_uring REALLY blocked: a child Python runs under a seccomp filter (written here with ctypes) that
  makes io_uring_setup/_enter/_register fail with EPERM, as Docker's default profile does. `auto`
  must fall back uring -> liburing -> pread with a notice naming both, give correct results, and an
  explicit `--io-engine uring|liburing` must be `Error: ...`, exit 1, no traceback.
* A liburing package that crashes (SIGILL, like the AVX-512 wheel on an older CPU): the child probe
  dies, the parent survives and says why, `auto` moves on, explicit liburing is an error, and the
  verdict cache is keyed so a fault run never poisons a normal one.
* The verdict cache: a second lookup starts no child, in this process or in the next one.
"""
from __future__ import annotations

import errno
import json
import os
import platform
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from graphene_py.cli import main
from graphene_py.io import engines as E
from graphene_py.io import probe
from graphene_py.io.buffers import BufferPool
from tests import graphs as tg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------- seccomp
# A classic-BPF seccomp filter: on x86-64, syscalls 425 (io_uring_setup), 426 (io_uring_enter) and
# 427 (io_uring_register) return EPERM; everything else is allowed. Installed in a wrapper process
# that then execs the real child command (filters survive exec).
_SECCOMP_WRAPPER = textwrap.dedent(r"""
    import ctypes, os, struct, sys
    AUDIT_ARCH_X86_64 = 0xC000003E
    LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
    RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    def ins(code, jt, jf, k):
        return struct.pack("=HBBI", code, jt, jf, k)
    prog = [
        ins(LD_W_ABS, 0, 0, 4),                   # seccomp_data.arch
        ins(JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        ins(RET_K, 0, 0, RET_ALLOW),              # not x86-64: leave it alone
        ins(LD_W_ABS, 0, 0, 0),                   # seccomp_data.nr
        ins(JEQ_K, 3, 0, 425),
        ins(JEQ_K, 2, 0, 426),
        ins(JEQ_K, 1, 0, 427),
        ins(RET_K, 0, 0, RET_ALLOW),
        ins(RET_K, 0, 0, RET_ERRNO | 1),          # EPERM
    ]
    buf = ctypes.create_string_buffer(b"".join(prog))
    class sock_fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = sock_fprog(len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        sys.stderr.write("SECCOMP-UNAVAILABLE: " + os.strerror(ctypes.get_errno()) + "\n")
        sys.exit(77)
    os.execv(sys.executable, [sys.executable] + sys.argv[1:])
""")

_CLI = "import sys; from graphene_py.cli import main; main(prog_name='graphene')"


def _seccomp_supported():
    return sys.platform.startswith("linux") and platform.machine() in ("x86_64", "AMD64")


def _env(home, cache, **extra):
    env = dict(os.environ)
    for k in ("GRAPHENE_DISABLE_URING", probe.FAULT_ENV, probe.TIMEOUT_ENV):
        env.pop(k, None)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["GRAPHENE_HOME"] = str(home)
    env["GRAPHENE_PROBE_CACHE"] = str(cache)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_py(args, env, seccomp=False):
    """Run `python ARGS...` (under the io_uring-blocking filter when seccomp) -> CompletedProcess."""
    cmd = [sys.executable] + (["-c", _SECCOMP_WRAPPER] if seccomp else []) + list(args)
    p = subprocess.run(cmd, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=300)
    if seccomp and p.returncode == 77 and "SECCOMP-UNAVAILABLE" in p.stderr:
        pytest.skip(f"cannot install a seccomp filter here: {p.stderr.strip()}")
    return p


def check_bfs_parent(g, src, parent):
    """`parent` is a BFS tree of g from src (GAPBS encoding), against a plain-Python BFS."""
    adj = tg.naive_adjacency(g.n, g.src, g.dst)
    depth = tg.naive_bfs_depth(adj, src)
    assert parent.shape == (g.n,)
    assert ((parent >= 0) == (depth >= 0)).all(), "reached set differs from the reference"
    assert parent[src] == src
    for v in np.flatnonzero((parent >= 0) & (np.arange(g.n) != src)).tolist():
        u = int(parent[v])
        assert v in adj[u] and depth[u] == depth[v] - 1, f"bad parent {u} of {v}"


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    """A small partitioned dataset in its own registry, for CLI children."""
    if not _seccomp_supported():
        pytest.skip("the seccomp filter here is written for x86-64 Linux")
    base = tmp_path_factory.mktemp("faults")
    home, cache = base / "home", base / "probe-cache"
    disks = [base / "d0", base / "d1"]
    for d in disks:
        d.mkdir()
    g = tg.uniform(n=600, m=4000, seed=5)
    old = os.environ.get("GRAPHENE_HOME")
    os.environ["GRAPHENE_HOME"] = str(home)
    try:
        from graphene_py.partition import partition_arrays
        partition_arrays(g.src, g.dst, num_vertices=g.n, disks=[str(d) for d in disks], name="fg",
                         rows=2, cols=2)
    finally:
        if old is None:
            del os.environ["GRAPHENE_HOME"]
        else:
            os.environ["GRAPHENE_HOME"] = old
    return g, home, cache, base


def test_seccomp_filter_really_blocks_io_uring(blocked):
    g, home, cache, _ = blocked
    code = ("import json; from graphene_py import _uring; from graphene_py.io import probe;"
            "v = probe.liburing_verdict();"
            "print(json.dumps([_uring.probe(), v.ok, v.reason, probe.stats['spawned']]))")
    p = run_py(["-c", code], _env(home, cache), seccomp=True)
    assert p.returncode == 0, p.stderr
    err, ok, reason, spawned = json.loads(p.stdout)
    assert err == errno.EPERM                      # the filter works: io_uring_setup -> EPERM
    assert not ok and "not permitted" in reason.lower()
    assert spawned == 0                            # refused up front, no probe child needed


def test_seccomp_auto_falls_back_to_pread_with_correct_results(blocked):
    g, home, cache, base = blocked
    out = base / "parent_auto.npy"
    p = run_py(["-c", _CLI, "run", "bfs", "--graph", "fg", "--src", "3", "--json", "-q",
                "--threads", "2", "-o", str(out)], _env(home, cache), seccomp=True)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    d = json.loads(p.stdout)
    eng = d["engine"]
    assert eng.startswith("pread (skipped uring: "), eng
    assert "; liburing: " in eng and "not permitted" in eng.lower(), eng
    check_bfs_parent(g, 3, np.load(out))


def test_seccomp_explicit_liburing_is_an_error(blocked):
    """The command of the issue, as a real process: exit 1, `Error: ...`, no traceback."""
    g, home, cache, _ = blocked
    p = run_py(["-c", _CLI, "run", "bfs", "--graph", "fg", "--src", "3", "--io-engine", "liburing"],
               _env(home, cache), seccomp=True)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert "Error: liburing: unavailable (io_uring_setup: Operation not permitted)" in p.stderr


# Several `graphene run` invocations in ONE filtered process (numba and friends load once), each with
# its own environment; click's CliRunner runs the same error handling as the `graphene` script.
_DRIVER = textwrap.dedent(r"""
    import json, os, sys
    from click.testing import CliRunner
    from graphene_py.cli import main
    from graphene_py.io import probe
    out = []
    for spec in json.loads(sys.argv[1]):
        os.environ.update(spec.get("env", {}))
        for k in spec.get("unset", []):
            os.environ.pop(k, None)
        probe.clear_memo()
        r = CliRunner().invoke(main, spec["args"])
        out.append({"code": r.exit_code, "stderr": r.stderr,
                    "exc": type(r.exception).__name__ if r.exception is not None else None})
    print(json.dumps(out))
""")


def test_seccomp_explicit_engines_are_errors(blocked, tmp_path, monkeypatch):
    g, home, cache, _ = blocked
    # a verdict cached where io_uring works says "liburing is fine"; inside the filter the ring
    # setup then fails in-process, after importing liburing for real: still a clean error
    ok_cache = tmp_path / "ok-cache"
    monkeypatch.setenv("GRAPHENE_PROBE_CACHE", str(ok_cache))
    monkeypatch.delenv(probe.FAULT_ENV, raising=False)
    probe.clear_memo()
    have_ok = probe.package_fingerprint() is not None and probe.liburing_verdict().ok
    probe.clear_memo()
    run = ["run", "bfs", "--graph", "fg", "--src", "3", "--io-engine"]
    specs = [
        {"args": run + ["uring"]},
        {"args": run + ["liburing"]},
        {"args": run + ["liburing"], "env": {"GRAPHENE_PROBE_CACHE": str(ok_cache)}},
        {"args": run + ["liburing"], "env": {probe.FAULT_ENV: "sigill",
                                             "GRAPHENE_PROBE_CACHE": str(tmp_path / "f")}},
    ]
    p = run_py(["-c", _DRIVER, json.dumps(specs)], _env(home, cache), seccomp=True)
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout.strip().splitlines()[-1])
    for r in res:
        assert r["code"] == 1 and r["exc"] == "SystemExit", r    # handled: no traceback
    assert "Error: uring: unavailable (io_uring_setup failed" in res[0]["stderr"]
    assert "Operation not permitted" in res[0]["stderr"]
    assert "Error: liburing: unavailable (io_uring_setup: Operation not permitted)" in res[1]["stderr"]
    if have_ok:
        assert ("Error: liburing: unavailable (io_uring_setup: Operation not permitted)"
                in res[2]["stderr"])
    assert "Error: liburing: unavailable (probe died with SIGILL: " in res[3]["stderr"]
    assert "liburing==2024.5.3" in res[3]["stderr"]


def test_seccomp_and_a_crashing_liburing(blocked):
    """The issue's machine: io_uring blocked AND a liburing build that dies with SIGILL."""
    g, home, cache, base = blocked
    env = _env(home, base / "fault-cache", **{probe.FAULT_ENV: "sigill"})
    out = base / "parent_sigill.npy"
    p = run_py(["-c", _CLI, "run", "bfs", "--graph", "fg", "--src", "5", "--json", "-q",
                "-o", str(out)], env, seccomp=True)
    assert p.returncode == 0, p.stderr
    eng = json.loads(p.stdout)["engine"]
    assert eng.startswith("pread (skipped uring: ") and "liburing: probe died with SIGILL" in eng, eng
    check_bfs_parent(g, 5, np.load(out))


# ----------------------------------------------------------------------------- GRAPHENE_DISABLE_URING
@pytest.fixture
def ds(tmp_path):
    g = tg.uniform(n=400, m=2500, seed=9)
    disks = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    for d in disks:
        os.makedirs(d)
    from graphene_py.partition import partition_arrays
    partition_arrays(g.src, g.dst, num_vertices=g.n, disks=disks, name="dz", rows=2, cols=2)
    return g


def test_disable_uring_switch_cli(ds, tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHENE_DISABLE_URING", "1")
    out = tmp_path / "p.npy"
    r = CliRunner().invoke(main, ["run", "bfs", "--graph", "dz", "--src", "2", "--json", "-q",
                                  "-o", str(out)])
    assert r.exit_code == 0, r.output
    eng = json.loads(r.stdout)["engine"]
    assert eng.startswith("pread (skipped uring: ") and "; liburing: " in eng
    assert "GRAPHENE_DISABLE_URING" in eng
    check_bfs_parent(ds, 2, np.load(out))
    for name in ("uring", "liburing"):
        r = CliRunner().invoke(main, ["run", "bfs", "--graph", "dz", "--io-engine", name])
        assert r.exit_code == 1 and isinstance(r.exception, SystemExit), r.output
        assert f"Error: {name}: unavailable (io_uring_setup: Operation not permitted" in r.stderr


# ----------------------------------------------------------------------------- crashing probe
@pytest.fixture
def probe_cache(tmp_path, monkeypatch):
    d = tmp_path / "probe-cache"
    monkeypatch.setenv("GRAPHENE_PROBE_CACHE", str(d))
    monkeypatch.delenv(probe.FAULT_ENV, raising=False)
    monkeypatch.delenv(probe.TIMEOUT_ENV, raising=False)
    monkeypatch.delenv("GRAPHENE_DISABLE_URING", raising=False)
    probe.clear_memo()
    yield d
    probe.clear_memo()


@pytest.fixture
def small_file(tmp_path):
    path = tmp_path / "data.bin"
    data = os.urandom(8192)
    path.write_bytes(data)
    return str(path), data


def _fail_uring(monkeypatch):
    """Make the native engine unavailable in this process (so `auto` reaches liburing)."""
    real = E._engine_class

    class NoUring:
        def __init__(self, *a, **k):
            raise OSError(errno.ENOSYS, "io_uring_setup: Function not implemented (test)")

    monkeypatch.setattr(E, "_engine_class", lambda n: NoUring if n == "uring" else real(n))


def _has_liburing():
    return probe.package_fingerprint() is not None


def test_probe_sigill_parent_survives(probe_cache, small_file, monkeypatch):
    if not _has_liburing():
        pytest.skip("liburing package not installed")
    monkeypatch.setenv(probe.FAULT_ENV, "sigill")
    n0 = probe.stats["spawned"]
    v = probe.liburing_verdict()
    assert probe.stats["spawned"] == n0 + 1
    assert not v.ok and v.source == "probe"
    assert v.reason.startswith("probe died with SIGILL: ") and probe.FIX_HINT in v.reason
    path, data = small_file
    with BufferPool(8192, 2) as pool:
        with pytest.raises(OSError) as ei:
            E.make_engine("liburing", [path], [0], pool)
        assert isinstance(ei.value, E.EngineUnavailable)
        assert str(ei.value).startswith("liburing: unavailable (probe died with SIGILL: ")
        _fail_uring(monkeypatch)
        with E.make_engine("auto", [path], [0], pool) as eng:
            assert eng.name == "pread"
            note = E.last_notice()
            assert "uring: io_uring_setup: Function not implemented" in note
            assert "liburing: probe died with SIGILL" in note and eng.notes[0] == note
            eng.submit(np.array([0], np.int32), np.array([512], np.int64), np.array([1024], np.int64))
            rows = eng.get(0, 4)
            assert len(rows) == 1
            s = int(rows[0, 1])
            assert bytes(pool.view[s * 8192: s * 8192 + 1024]) == data[512:1536]
            eng.release(rows[:, 1])
            assert len(eng.get(0, 4)) == 0
    assert probe.stats["spawned"] == n0 + 1       # one probe per process, however often asked


def test_cache_second_lookup_spawns_no_child(probe_cache, monkeypatch):
    if not _has_liburing():
        pytest.skip("liburing package not installed")
    monkeypatch.setenv(probe.FAULT_ENV, "sigill")   # a cacheable verdict on any machine
    n0, d0 = probe.stats["spawned"], probe.stats["disk_hits"]
    v1 = probe.liburing_verdict()
    v2 = probe.liburing_verdict()
    assert probe.stats["spawned"] == n0 + 1 and v2.source == "memo" and v2.reason == v1.reason
    files = list(probe_cache.glob("liburing-probe-*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["ok"] is False
    probe.clear_memo()                                # as a new process would start
    v3 = probe.liburing_verdict()
    assert v3.source == "disk" and v3.reason == v1.reason
    assert probe.stats["spawned"] == n0 + 1 and probe.stats["disk_hits"] == d0 + 1
    # a really new process: served from disk, no child
    code = ("import json; from graphene_py.io import probe; v = probe.liburing_verdict();"
            "print(json.dumps([v.ok, v.source, probe.stats['spawned']]))")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": ROOT}, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [False, "disk", 0]


def test_fault_run_does_not_poison_a_normal_run(probe_cache, monkeypatch):
    if not _has_liburing():
        pytest.skip("liburing package not installed")
    monkeypatch.setenv(probe.FAULT_ENV, "sigill")
    k_fault = probe.cache_key()
    assert "SIGILL" in probe.liburing_verdict().reason
    monkeypatch.delenv(probe.FAULT_ENV)
    assert probe.cache_key() != k_fault
    probe.clear_memo()
    v = probe.liburing_verdict()
    assert v.source != "disk" and "SIGILL" not in v.reason
    if probe._precheck() is None:                  # io_uring usable here: liburing must work
        assert v.ok, v.reason


def test_key_changes_with_package_cpu_and_fault(monkeypatch):
    fp = {"path": "/x/liburing", "version": "2026.3.30", "files": [["liburing.so", [10, 1]]]}
    k = probe.cache_key(fp)
    assert probe.cache_key(fp) == k
    assert probe.cache_key({**fp, "version": "2024.5.3"}) != k
    assert probe.cache_key({**fp, "files": [["liburing.so", [10, 2]]]}) != k      # reinstalled
    monkeypatch.setattr(probe, "_cpu_flags", "fpu sse2 avx2")                      # another CPU
    k2 = probe.cache_key(fp)
    assert k2 != k
    monkeypatch.setenv(probe.FAULT_ENV, "sigill")
    assert probe.cache_key(fp) != k2


def test_a_crashing_package_is_reprobed_once_fixed(probe_cache, tmp_path, monkeypatch):
    """No fault hook: a stand-in liburing package that kills its process with SIGILL on import.
    The parent must never import it (pytest would die); replacing it re-probes."""
    fake = tmp_path / "site"
    pkg = fake / "liburing"
    pkg.mkdir(parents=True)
    init = pkg / "__init__.py"
    init.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    monkeypatch.syspath_prepend(str(fake))
    monkeypatch.setenv("PYTHONPATH", str(fake) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.delitem(sys.modules, "liburing", raising=False)
    monkeypatch.setattr(probe, "_precheck", lambda: None)     # probe even where io_uring is blocked
    v = probe.liburing_verdict()
    assert not v.ok and v.reason.startswith("probe died with SIGILL"), v.reason
    assert "liburing" not in sys.modules
    assert not list(probe_cache.glob("*.bin"))                # the probe's data file is gone
    # the fix: a different package (here: one that cannot be imported) -> new key, new verdict
    init.write_text("raise ImportError('stand-in liburing, fixed differently')\n")
    st = os.stat(init)
    os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    n0 = probe.stats["spawned"]
    v2 = probe.liburing_verdict()
    assert probe.stats["spawned"] == n0 + 1
    assert not v2.ok and "SIGILL" not in v2.reason and "fixed differently" in v2.reason
    assert len(list(probe_cache.glob("liburing-probe-*.json"))) == 2


def test_hanging_probe_times_out_and_is_not_cached(probe_cache, monkeypatch):
    if not _has_liburing():
        pytest.skip("liburing package not installed")
    monkeypatch.setenv(probe.FAULT_ENV, "hang")
    monkeypatch.setenv(probe.TIMEOUT_ENV, "0.5")
    v = probe.liburing_verdict()
    assert not v.ok and "timed out" in v.reason
    assert not list(probe_cache.glob("liburing-probe-*.json"))     # a slow day is not a verdict
    with pytest.raises(OSError) as ei:
        probe.require_liburing()
    assert ei.value.errno == errno.ETIMEDOUT


def test_old_liburing_verdicts_are_pruned(tmp_path, monkeypatch):
    """Every interpreter and package build stores its own liburing verdict: the folder keeps
    the newest KEEP_VERDICTS, the one just stored among them, and leaves other files alone."""
    from graphene_py.io import probe
    monkeypatch.setenv("GRAPHENE_PROBE_CACHE", str(tmp_path))
    for i in range(probe.KEEP_VERDICTS + 5):
        p = tmp_path / f"liburing-probe-old{i:02d}.json"
        p.write_text("{}")
        os.utime(p, (1000 + i, 1000 + i))
    (tmp_path / "other.json").write_text("{}")
    probe._store("newkey", probe.Verdict(True, "ok", 0, False, "probe", 0.1), None)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert "liburing-probe-newkey.json" in left and "other.json" in left
    olds = [n for n in left if n.startswith("liburing-probe-old")]
    assert len(olds) == probe.KEEP_VERDICTS - 1
    assert olds[0] == "liburing-probe-old06.json"           # the oldest six went
    assert json.loads((tmp_path / "liburing-probe-newkey.json").read_text())["ok"] is True
