"""The native `uring` engine (csrc/uring.c via graphene_py/io/uring_engine.py) against plain os.pread.

The shared contract suite (tests/test_engines.py) runs this engine too; these tests cover what is
specific to it: several disks in different directories, stealing, backpressure with a tiny pool,
EOF/short files, an errno from the kernel, the O_DIRECT fallback, close and fd hygiene.
"""
from __future__ import annotations

import errno
import mmap
import os
import threading
import time

import numpy as np
import pytest

from graphene_py.errors import GrapheneIOError
from graphene_py.io import uring_engine
from graphene_py.io.uring_engine import UringEngine, uring_available

ok, why = uring_available()
pytestmark = pytest.mark.skipif(not ok, reason=f"io_uring unavailable: {why}")


class Pool:
    """Page-aligned anonymous memory with the BufferPool attributes the engine uses."""

    def __init__(self, slot_bytes, nslots):
        self.slot_bytes, self.nslots = slot_bytes, nslots
        self._mm = mmap.mmap(-1, slot_bytes * nslots)
        self.view = np.frombuffer(self._mm, dtype=np.uint8)


def make_files(root, sizes, rng):
    """One file per entry of `sizes` (bytes), file i in directory root/disk{i % 3}; random content."""
    paths, disk_of = [], []
    for i, n in enumerate(sizes):
        d = root / f"disk{i % 3}"
        d.mkdir(exist_ok=True)
        p = d / f"part{i}.adj"
        p.write_bytes(rng.bytes(n))
        paths.append(str(p))
        disk_of.append(i % 3)
    return paths, disk_of


def pread_ref(path, off, length):
    """Reference: plain buffered pread, zero-padded up to `length` (the 512-B padding of the tail)."""
    with open(path, "rb") as f:
        b = os.pread(f.fileno(), length, off)
    return b + b"\0" * (length - len(b))


def random_extents(rng, paths, k, slot_bytes):
    sizes = [os.path.getsize(p) for p in paths]
    fid = rng.integers(0, len(paths), k).astype(np.int32)
    lens = np.empty(k, np.int64)
    offs = np.empty(k, np.int64)
    for i in range(k):
        padded = -(-sizes[fid[i]] // 512) * 512
        lens[i] = 512 * rng.integers(1, min(slot_bytes, padded) // 512 + 1)
        offs[i] = 512 * rng.integers(0, (padded - lens[i]) // 512 + 1)
    return fid, offs, lens


def drain(eng, pool, disk=0, max_n=7, hold=None, lens=None, check=None):
    """Consume one batch; returns the request ids in order of delivery. `check(req, bytes)`."""
    seen = []
    while True:
        got = eng.get(disk, max_n)
        if len(got) == 0:
            return seen
        assert got.dtype == np.int64 and got.shape[1] == 2
        for r, s in got:
            if check is not None:
                a = s * pool.slot_bytes
                check(int(r), bytes(pool.view[a:a + lens[r]]))
            seen.append(int(r))
        eng.release(got[:, 1])


@pytest.mark.parametrize("direct", [True, False])
def test_random_extents_match_pread(tmp_path, direct):
    rng = np.random.default_rng(7)
    # sizes not all multiples of 512: the last block is read through the padding
    paths, disk_of = make_files(tmp_path, [300_000, 65_536, 4096 * 7 + 1000, 512, 123_457, 40_960], rng)
    pool = Pool(16384, 12)
    fid, offs, lens = random_extents(rng, paths, 1500, pool.slot_bytes)
    with UringEngine(paths, disk_of, pool, queue_depth=8, direct=direct) as eng:
        assert eng.name == "uring"
        for batch in range(3):   # several batches on the same engine
            sel = slice(batch * 500, (batch + 1) * 500)
            f, o, n = fid[sel], offs[sel], lens[sel]
            bad = []

            def check(r, data):
                if data != pread_ref(paths[f[r]], int(o[r]), int(n[r])):
                    bad.append(r)
            eng.submit(f, o, n)
            seen = drain(eng, pool, disk=batch, lens=n, check=check)
            assert sorted(seen) == list(range(500))
            assert bad == []
        st = eng.stats()
        assert st["requests"] == 1500 and st["bytes"] == int(lens.sum())
        assert sum(st["disk_requests"]) == 1500 and st["batches"] == 3
        assert 1 <= st["max_inflight"] <= 8


def test_concurrent_consumers_get_every_request_once(tmp_path):
    rng = np.random.default_rng(11)
    paths, disk_of = make_files(tmp_path, [200_000] * 6, rng)
    pool = Pool(8192, 16)
    fid, offs, lens = random_extents(rng, paths, 3000, pool.slot_bytes)
    out = [[] for _ in range(3)]
    errors = []
    with UringEngine(paths, disk_of, pool, queue_depth=4) as eng:
        eng.submit(fid, offs, lens)

        def consumer(d):
            try:
                def check(r, data):
                    if data != pread_ref(paths[fid[r]], int(offs[r]), int(lens[r])):
                        errors.append(r)
                out[d].extend(drain(eng, pool, disk=d, max_n=5, lens=lens, check=check))
            except BaseException as e:   # surfaced by the assert below
                errors.append(e)
        ts = [threading.Thread(target=consumer, args=(d,)) for d in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(30)
        assert not any(t.is_alive() for t in ts)
    assert errors == []
    allr = sorted(out[0] + out[1] + out[2])
    assert allr == list(range(3000))


def test_stealing_when_one_disk_has_all_the_work(tmp_path):
    rng = np.random.default_rng(3)
    paths, disk_of = make_files(tmp_path, [100_000] * 3, rng)   # disks 0, 1, 2
    pool = Pool(4096, 9)
    k = 200
    fid = np.full(k, 2, np.int32)                                 # only disk 2's file
    offs = 512 * rng.integers(0, 100_000 // 512 - 8, k)
    lens = np.full(k, 4096, np.int64)
    with UringEngine(paths, disk_of, pool, queue_depth=3) as eng:
        eng.submit(fid, offs, lens)
        bad = []
        seen = drain(eng, pool, disk=0, lens=lens,
                     check=lambda r, b: b == pread_ref(paths[2], int(offs[r]), 4096) or bad.append(r))
        assert sorted(seen) == list(range(k)) and bad == []
        st = eng.stats()
        assert st["disk_requests"] == [0, 0, k]
        assert st["stolen"] == [k, 0, 0]       # disk 0's consumer stole every completion


def test_backpressure_tiny_pool(tmp_path):
    rng = np.random.default_rng(5)
    paths, disk_of = make_files(tmp_path, [1 << 20], rng)
    pool = Pool(4096, 2)
    k = 1000
    fid = np.zeros(k, np.int32)
    offs = 512 * rng.integers(0, (1 << 20) // 512 - 8, k)
    lens = 512 * rng.integers(1, 9, k)
    data = open(paths[0], "rb").read()
    with UringEngine(paths, disk_of, pool, queue_depth=64) as eng:
        eng.submit(fid, offs, lens)
        # hold both slots: the worker has none left, so a further get must block
        held = []
        while len(held) < 2:
            held.extend(eng.get(0, 2).tolist())
        assert sorted(s for _, s in held) == [0, 1]
        box = []
        t = threading.Thread(target=lambda: box.append(eng.get(0, 1)))
        t.start()
        t.join(0.3)
        assert t.is_alive() and not box          # blocked: no free slot, nothing completed
        for r, s in held:
            assert bytes(pool.view[s * 4096:s * 4096 + lens[r]]) == data[offs[r]:offs[r] + lens[r]]
        eng.release([s for _, s in held])
        t.join(5)
        assert not t.is_alive() and len(box[0]) == 1
        seen = [r for r, _ in held] + [int(box[0][0, 0])]
        eng.release(box[0][:, 1])
        bad = []
        seen += drain(eng, pool, lens=lens,
                      check=lambda r, b: b == data[offs[r]:offs[r] + lens[r]] or bad.append(r))
        assert sorted(seen) == list(range(k)) and bad == []
        assert eng.stats()["max_inflight"] <= 2


def test_short_file_raises_naming_file(tmp_path):
    rng = np.random.default_rng(9)
    paths, disk_of = make_files(tmp_path, [8192, 5000], rng)
    pool = Pool(8192, 4)
    with UringEngine(paths, disk_of, pool) as eng:
        # file 1 has 5000 bytes (padded: 5120); [4608, 5120) is fine, [4608, 5632) is past the end
        eng.submit(np.array([1], np.int32), np.array([4608], np.int64), np.array([512], np.int64))
        got = eng.get(1, 4)
        s = int(got[0, 1])
        assert bytes(pool.view[s * 8192:s * 8192 + 512]) == pread_ref(paths[1], 4608, 512)
        eng.release(got[:, 1])
        assert len(eng.get(1, 4)) == 0
        eng.submit(np.array([0, 1, 0], np.int32), np.array([0, 4608, 4096], np.int64),
                   np.array([4096, 1024, 4096], np.int64))
        with pytest.raises(GrapheneIOError) as ei:
            while True:
                got = eng.get(0, 4)
                assert len(got) > 0, "batch finished without reporting the short file"
                eng.release(got[:, 1])
        msg = str(ei.value)
        assert paths[1] in msg and "offset 4608" in msg and "length 1024" in msg and "disk 1" in msg
        assert "end of the file" in msg
        # the error is sticky until the next batch; the engine then works again
        with pytest.raises(GrapheneIOError):
            eng.get(0, 4)
        eng.submit(np.array([0], np.int32), np.array([512], np.int64), np.array([1024], np.int64))
        got = eng.get(0, 4)
        s = int(got[0, 1])
        assert bytes(pool.view[s * 8192:s * 8192 + 1024]) == pread_ref(paths[0], 512, 1024)
        eng.release(got[:, 1])
        assert len(eng.get(0, 4)) == 0


def test_kernel_errno_is_reported(tmp_path):
    # a directory: O_DIRECT open is refused (EINVAL -> buffered fallback), every read fails EISDIR
    (tmp_path / "adir").mkdir()
    pool = Pool(4096, 2)
    with UringEngine([str(tmp_path / "adir")], [0], pool) as eng:
        assert eng.direct is False and eng.notes
        eng.submit(np.array([0], np.int32), np.array([0], np.int64), np.array([512], np.int64))
        with pytest.raises(GrapheneIOError, match=r"Is a directory.*adir.*offset 0, length 512"):
            eng.get(0, 1)


def test_invalid_requests_rejected(tmp_path):
    rng = np.random.default_rng(1)
    paths, disk_of = make_files(tmp_path, [65536], rng)
    pool = Pool(4096, 4)
    with UringEngine(paths, disk_of, pool) as eng:
        one = lambda v: np.array([v], np.int64)  # noqa: E731
        for f, o, n in [(0, 100, 512), (0, 0, 100), (0, 0, 0), (0, 0, 8192), (1, 0, 512), (-1, 0, 512),
                        (0, -512, 512)]:
            with pytest.raises(ValueError):
                eng.submit(np.array([f], np.int32), one(o), one(n))
        with pytest.raises(ValueError):
            eng.submit(np.zeros(2, np.int32), one(0), one(512))
        assert len(eng.get(0, 3)) == 0                       # nothing submitted: finished at once
        eng.submit(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))
        assert eng.get(0, 3).shape == (0, 2)                  # empty batch
        eng.submit(np.zeros(3, np.int32), np.array([0, 512, 1024]), np.full(3, 512))
        with pytest.raises(RuntimeError):                     # one batch at a time
            eng.submit(np.zeros(1, np.int32), one(0), one(512))
        got = eng.get(0, 3)
        eng.release(got[:, 1])
        with pytest.raises(ValueError):                       # double release
            eng.release(got[:, 1])
        with pytest.raises(ValueError):
            eng.release([99])
        drain(eng, pool)


def test_tmpfs_works_buffered_fallback_noted(tmp_path, monkeypatch):
    shm = "/dev/shm"
    if not os.path.isdir(shm):
        pytest.skip("no /dev/shm")
    rng = np.random.default_rng(4)
    d = os.path.join(shm, f"uring_test_{os.getpid()}")
    os.makedirs(d, exist_ok=True)
    try:
        p = os.path.join(d, "f.adj")
        with open(p, "wb") as f:
            f.write(rng.bytes(50_000))
        pool = Pool(4096, 4)
        fid, offs, lens = random_extents(rng, [p], 100, 4096)

        def check_engine(eng):
            bad = []
            eng.submit(fid, offs, lens)
            seen = drain(eng, pool, lens=lens,
                         check=lambda r, b: b == pread_ref(p, int(offs[r]), int(lens[r])) or bad.append(r))
            assert sorted(seen) == list(range(100)) and bad == []

        # tmpfs accepts O_DIRECT on Linux >= 6.6; older ones refuse it at open (EINVAL)
        with UringEngine([p], [0], pool) as eng:
            assert eng.direct or any("O_DIRECT" in n and p in n for n in eng.notes)
            check_engine(eng)

        # force the refusal to exercise the fallback wherever we run
        def refuse(path):
            raise OSError(errno.EINVAL, "Invalid argument", path)
        monkeypatch.setattr(uring_engine, "_open_direct", refuse)
        with UringEngine([p], [0], pool) as eng:
            assert eng.direct is False
            assert len(eng.notes) == 1 and "O_DIRECT refused" in eng.notes[0] and p in eng.notes[0]
            assert eng.stats()["notes"] == eng.notes
            check_engine(eng)
        # a different open error is not swallowed
        monkeypatch.setattr(uring_engine, "_open_direct",
                            lambda path: (_ for _ in ()).throw(OSError(errno.EACCES, "denied", path)))
        with pytest.raises(GrapheneIOError, match="cannot open"):
            UringEngine([p], [0], pool)
    finally:
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        os.rmdir(d)


def _nfds():
    return len(os.listdir("/proc/self/fd"))


def test_close_idempotent_and_no_fd_leak(tmp_path):
    rng = np.random.default_rng(2)
    paths, disk_of = make_files(tmp_path, [20_000] * 4, rng)
    pool = Pool(4096, 8)
    before = _nfds()
    for i in range(20):
        eng = UringEngine(paths, disk_of, pool, queue_depth=4)
        assert _nfds() > before
        if i % 2:   # close with a batch half consumed and reads in flight
            eng.submit(np.zeros(50, np.int32), np.zeros(50, np.int64), np.full(50, 4096))
            eng.get(0, 1)
        eng.close()
        eng.close()
        assert _nfds() == before
    with pytest.raises(RuntimeError):
        eng.get(0, 1)
    with pytest.raises(RuntimeError):
        eng.submit(np.zeros(1, np.int32), np.zeros(1, np.int64), np.full(1, 512))
    eng.release([0])   # no-op after close
    # a missing file fails cleanly, leaking nothing
    with pytest.raises(GrapheneIOError, match="cannot open"):
        UringEngine(paths + [str(tmp_path / "missing")], disk_of + [0], pool)
    assert _nfds() == before


def test_close_unblocks_waiting_consumer(tmp_path):
    rng = np.random.default_rng(8)
    paths, disk_of = make_files(tmp_path, [20_000], rng)
    pool = Pool(4096, 1)
    eng = UringEngine(paths, disk_of, pool)
    eng.submit(np.zeros(3, np.int32), np.zeros(3, np.int64), np.full(3, 4096))
    held = eng.get(0, 1)
    assert len(held) == 1
    box = []

    def waiter():
        try:
            eng.get(0, 1)
        except RuntimeError as e:
            box.append(e)
    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    eng.close()
    t.join(5)
    assert not t.is_alive() and box


def test_fewer_slots_than_disks_and_consumer_holding_slots(tmp_path):
    """Slots are split among disks, but a disk with queued work borrows the free slots of disks
    with none left: a consumer holding every slot but one never deadlocks, even with fewer slots
    than disks."""
    rng = np.random.default_rng(6)
    paths, disk_of = make_files(tmp_path, [60_000] * 6, rng)          # 3 disks
    data = [open(p, "rb").read() for p in paths]
    for nslots, hold in [(2, 1), (3, 2), (4, 3), (9, 8)]:
        pool = Pool(4096, nslots)
        k = 120
        # most of the work on one disk (files 0 and 3 are on disk 0)
        fid = rng.choice([0, 3, 3, 0, 1, 5], k).astype(np.int32)
        offs = 512 * rng.integers(0, 60_000 // 512 - 8, k)
        lens = 512 * rng.integers(1, 9, k)
        with UringEngine(paths, disk_of, pool, queue_depth=4) as eng:
            eng.submit(fid, offs, lens)
            seen, held = [], []
            while True:
                got = eng.get(int(rng.integers(0, 3)), 1)
                if len(got) == 0:
                    break
                r, s = (int(x) for x in got[0])
                assert s not in [h[1] for h in held]
                held.append((r, s))
                if len(held) == hold:      # hold `hold` slots, check them, give them back
                    for r, s in held:
                        assert bytes(pool.view[s * 4096:s * 4096 + lens[r]]) == \
                            data[fid[r]][offs[r]:offs[r] + lens[r]], (nslots, r)
                        seen.append(r)
                    eng.release([s for _, s in held])
                    held = []
            for r, s in held:
                assert bytes(pool.view[s * 4096:s * 4096 + lens[r]]) == data[fid[r]][offs[r]:offs[r] + lens[r]]
                seen.append(r)
            assert sorted(seen) == list(range(k)), nslots
            assert eng.stats()["max_inflight"] <= nslots


def test_blocked_get_honours_signals(tmp_path):
    """get() waits in C with the GIL released but still lets Python signal handlers run (Ctrl-C)."""
    import signal

    class Interrupted(Exception):
        pass

    def handler(signum, frame):
        raise Interrupted()
    rng = np.random.default_rng(12)
    paths, disk_of = make_files(tmp_path, [20_000], rng)
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        with UringEngine(paths, disk_of, Pool(4096, 1)) as eng:
            eng.submit(np.zeros(3, np.int32), np.zeros(3, np.int64), np.full(3, 4096))
            assert len(eng.get(0, 1)) == 1          # holds the only slot: the next get blocks
            timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
            timer.start()
            t0 = time.perf_counter()
            with pytest.raises(Interrupted):
                eng.get(0, 1)
            assert time.perf_counter() - t0 < 3
            timer.join()
    finally:
        signal.signal(signal.SIGUSR1, old)
