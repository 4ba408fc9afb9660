"""The files a command's start reads, asked for ahead (graphene_py/startfiles.py, csrc/warm.c):
the lists' kinds, what a run records, the readahead itself (page-cache residency through mincore),
and the `graphene` command writing, keeping and surviving its list."""
import ctypes
import mmap
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from graphene_py import startfiles

_uring = pytest.importorskip("graphene_py._uring")

PAGE = mmap.PAGESIZE


@pytest.mark.parametrize("argv, want", [
    (["graphene", "run", "bfs", "-g", "web", "--src", "0"], "run-bfs"),
    (["graphene", "--debug", "run", "kcore", "--k", "17"], "run-kcore"),
    (["graphene", "run", "-g", "web", "bfs"], "run"),            # leading words end at an option
    (["graphene", "run", "bfs", "--device", "gpu"], "run-bfs-gpu"),
    (["graphene", "run", "wcc", "--device=auto"], "run-wcc-auto"),
    (["graphene", "run", "wcc", "--device", "cpu"], "run-wcc"),
    (["graphene", "run", "pagerank", "--memory", "auto"], "run-pagerank"),   # not a device
    (["graphene", "partition", "a.el", "--disks", "/d"], "partition"),
    (["graphene", "info", "web"], "info"),
    (["graphene", "cluster", "up", "--nodes", "2"], "cluster-up"),
    (["graphene", "run", "bfs", "--cluster", "auto"], "run-bfs-cluster"),
    (["graphene"], "none"),
    (["graphene", "run", "../../etc/x y"], "run-.._.._etc_x_y"),
])
def test_kind(argv, want):
    assert startfiles.kind(argv) == want


def _resident(path, length):
    """Pages of path's first `length` bytes in the page cache (mincore), as a bool array."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), length, access=mmap.ACCESS_COPY)   # private: nothing touched
        try:
            buf = ctypes.c_char.from_buffer(mm)
            vec = ctypes.create_string_buffer((length + PAGE - 1) // PAGE)
            rc = libc.mincore(ctypes.addressof(buf), length, vec)
            del buf
            assert rc == 0, os.strerror(ctypes.get_errno())
            return np.frombuffer(vec.raw, dtype=np.uint8) & 1 == 1
        finally:
            mm.close()


def _evicted_file(tmp_path, pages):
    p = tmp_path / "data.bin"
    p.write_bytes(os.urandom(pages * PAGE))
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if _resident(str(p), pages * PAGE).any():
        pytest.skip("this file system keeps the file's pages (tmpfs?): cannot watch readahead")
    return str(p)


def _wait_resident(path, length, want, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        got = _resident(path, length)
        if (got[want]).all() or time.monotonic() > deadline:
            return got
        time.sleep(0.01)


def test_warm_files_reads_the_ranges_ahead(tmp_path):
    """A path with ranges brings exactly those pages into the page cache (not the file's rest);
    a path alone brings the whole file; bad paths and malformed ranges are skipped."""
    pages = 64
    path = _evicted_file(tmp_path, pages)
    want = np.zeros(pages, dtype=bool)
    want[2:4] = True
    want[40:41] = True
    lines = ["/nonexistent/file.so", f"{path}\t{2 * PAGE}+{2 * PAGE},{40 * PAGE}+{PAGE}",
             f"{path}\tgarbage", f"{path}\t5+", "", str(tmp_path / "missing.py")]
    assert _uring.warm_files(lines, 4) == 4
    got = _wait_resident(path, pages * PAGE, want)
    assert got[want].all()
    # readahead of a range never runs past it here (the device's own readahead is not involved:
    # nothing read the file)
    assert not got[16:32].any() and not got[48:].any()
    assert _uring.warm_files([path], 2) == 1             # one path: one thread
    assert _wait_resident(path, pages * PAGE, np.ones(pages, dtype=bool)).all()


def test_warm_files_arguments():
    assert _uring.warm_files([], 8) == 0
    assert _uring.warm_files(["/nonexistent"], 0) == 0
    assert _uring.warm_files(["/nonexistent"], 8) == 1            # no more threads than paths
    with pytest.raises(TypeError):
        _uring.warm_files([b"/bytes"], 2)
    with pytest.raises(TypeError):
        _uring.warm_files(5, 2)


def test_loaded_files_has_modules_and_library_pages():
    """This process's list: module sources with their bytecode, and numpy's core extension
    with the pages it touched, page-aligned ranges inside the file (not the whole file)."""
    lines = startfiles.loaded_files()
    paths = [e.split("\t", 1)[0] for e in lines]
    assert len(paths) == len(set(paths))
    assert startfiles.__file__ in paths
    core = (sys.modules.get("numpy._core._multiarray_umath")
            or sys.modules["numpy.core._multiarray_umath"]).__file__
    (entry,) = [e for e in lines if e.startswith(core)]
    ranges = [tuple(int(x) for x in r.split("+")) for r in entry.split("\t")[1].split(",")]
    size = os.path.getsize(core)
    assert all(o % PAGE == 0 and n % PAGE == 0 and n > 0 for o, n in ranges)
    assert all(o + n <= size + PAGE for o, n in ranges)
    assert all(a[0] + a[1] + startfiles.MERGE_GAP < b[0] for a, b in zip(ranges, ranges[1:]))
    assert 0 < sum(n for _, n in ranges) <= size + PAGE


def test_record_writes_once_and_replaces_stale(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHENE_KERNEL_CACHE", str(tmp_path / "kernels"))
    monkeypatch.setitem(startfiles._STATE, "lists", {})
    monkeypatch.setitem(startfiles._STATE, "started", False)
    argv = ["graphene", "run", "bfs", "-g", "x"]
    assert startfiles.record(argv) == 0              # start() never ran: not the command
    assert startfiles.start(argv) == 0               # no list yet
    assert startfiles.record(argv) == 1
    path = startfiles.list_path("run-bfs")
    first = open(path).read().split("\n")
    assert startfiles.__file__ in first
    assert startfiles.record(argv) == 0              # the same files: left alone
    # a list of another install (paths gone) is replaced by this run's files
    with open(path, "w") as f:
        f.write("/gone/numpy/x.so\t0+4096\n/gone/y.py\n")
    monkeypatch.setitem(startfiles._STATE, "lists", {})
    assert startfiles.start(argv) > 0
    assert startfiles.record(argv) == 1
    assert open(path).read().split("\n") == first
    monkeypatch.setenv(startfiles.ENV, "off")
    os.unlink(path)
    assert startfiles.start(argv) == 0 and startfiles.record(argv) == 0
    assert not os.path.exists(path)


def _graphene(args, env):
    exe = os.path.join(os.path.dirname(sys.executable), "graphene")
    if not os.path.exists(exe):
        pytest.skip("no `graphene` command beside this Python")
    return subprocess.run([exe, *args], capture_output=True, text=True, env=env, timeout=120)


def test_command_records_keeps_and_survives_its_list(tmp_path):
    """The `graphene` command writes its kind's list on its first run, leaves it alone on the
    next, gives the same answer with a list of garbage, and writes nothing when turned off."""
    el = tmp_path / "g.el"
    el.write_text("0 1\n1 2\n2 3\n5 6\n")
    (tmp_path / "d0").mkdir()
    env = dict(os.environ, GRAPHENE_KERNEL_CACHE=str(tmp_path / "kc" / "kernels"),
               GRAPHENE_HOME=str(tmp_path / "home"))
    env.pop("GRAPHENE_SMALL_EDGES", None)     # a small graph's own path (numpy only): quick, and
    # the same modules every run (an engine run's first compiles kernels, its next ones load them)
    r = _graphene(["partition", str(el), "--disks", str(tmp_path / "d0"), "--name", "g", "-s"], env)
    assert r.returncode == 0, r.stderr
    listp = tmp_path / "kc" / "startup" / "run-bfs.txt"
    out = tmp_path / "depth.npy"
    args = ["run", "bfs", "-g", "g", "--src", "1", "-q", "-o", str(out)]
    first = _graphene(args, env)
    assert first.returncode == 0, first.stderr
    want = np.load(out)
    assert want.tolist()[:4] == [1, 1, 1, 2]          # BFS parents
    lines = listp.read_text().split("\n")
    assert any(line.endswith("graphene_py/cli.py") for line in lines)
    mtime = listp.stat().st_mtime_ns
    again = _graphene(args, env)
    assert again.returncode == 0, again.stderr
    assert np.array_equal(np.load(out), want)
    assert listp.stat().st_mtime_ns == mtime
    listp.write_text("/nope\n\t\n" + "x" * 5000 + "\t1+2,3\n" + f"{el}\t99999999999999999999+1\n")
    junk = _graphene(args, env)
    assert junk.returncode == 0, junk.stderr
    assert np.array_equal(np.load(out), want)
    assert "/nope" not in listp.read_text()                       # replaced by the run's own
    off = _graphene(["run", "wcc", "-g", "g", "-q"], dict(env, GRAPHENE_STARTFILES="off"))
    assert off.returncode == 0, off.stderr
    assert not (tmp_path / "kc" / "startup" / "run-wcc.txt").exists()
