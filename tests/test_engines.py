"""One conformance suite for every IO engine (graphene_py/io/contract.py's contract), plus fault tests.

Parametrized over ENGINE_NAMES (uring, liburing, pread) and the fault-injecting engine (short reads,
EINTR, EAGAIN injected; the data must still be exact). Every read is compared with os.pread.
"""
import errno
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphene_py.errors import GrapheneIOError
from graphene_py.io import engines as E
from graphene_py.io.buffers import BufferPool
from graphene_py.io.faults import FaultEngine

pytestmark = pytest.mark.timeout(120)

ALL = list(E.ENGINE_NAMES) + ["faults"]
SLOT = 16384


def build(name, files, disk_of, pool, **kw):
    if name == "faults":
        return FaultEngine(files, disk_of, pool, seed=7, short_rate=0.3, eintr_rate=0.1,
                           eagain_rate=0.05, **kw)
    try:
        return E.make_engine(name, files, disk_of, pool, **kw)
    except E.EngineUnavailable as e:   # io_uring blocked (seccomp), old kernel, broken liburing
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Three files on two disks (directories), sizes padded and not, plus their bytes."""
    root = tmp_path_factory.mktemp("disks")
    rng = np.random.default_rng(42)
    specs = [(0, 300 * 1024), (1, 200 * 1024 + 512), (1, 70_000), (0, 1000)]  # last two unpadded
    files, disk_of, data = [], [], []
    for i, (d, n) in enumerate(specs):
        dd = root / f"disk{d}"
        dd.mkdir(exist_ok=True)
        p = dd / f"f{i}.adj"
        b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        p.write_bytes(b)
        files.append(str(p))
        disk_of.append(d)
        data.append(b)
    return files, disk_of, data


def expect(data, fid, off, ln):
    b = data[fid][off:off + ln]
    return b + bytes(ln - len(b))   # padding past an unpadded file's end reads as zeros


def drain(eng, pool, lengths, disk=0, max_n=8, hold=False):
    """get() until the batch is done; returns {rid: bytes}; checks no request twice."""
    got = {}
    while True:
        r = eng.get(disk, max_n)
        assert r.dtype == np.int64 and r.ndim == 2 and r.shape[1] == 2
        if r.shape[0] == 0:
            break
        assert r.shape[0] <= max_n
        for rid, slot in r.tolist():
            assert rid not in got
            assert 0 <= slot < pool.nslots
            got[rid] = pool.view[slot * pool.slot_bytes: slot * pool.slot_bytes + lengths[rid]].tobytes()
        eng.release(r[:, 1])
    return got


def random_extents(rng, data, k, slot=SLOT):
    fid = rng.integers(0, len(data), k).astype(np.int32)
    padded = np.array([(len(d) + 511) // 512 * 512 for d in data])
    ln = np.minimum(rng.integers(1, slot // 512 + 1, k) * 512, padded[fid])
    off = rng.integers(0, (padded[fid] - ln) // 512 + 1) * 512
    return fid, off.astype(np.int64), ln.astype(np.int64)


@pytest.fixture(params=ALL)
def engine_name(request):
    return request.param


# ----------------------------------------------------------------------------- data
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**31), k=st.integers(0, 300), nslots=st.sampled_from([2, 8, 64]))
def test_random_extents_byte_identical(engine_name, dataset, seed, k, nslots):
    files, disk_of, data = dataset
    rng = np.random.default_rng(seed)
    with BufferPool(SLOT, nslots) as pool, build(engine_name, files, disk_of, pool,
                                                 queue_depth=16) as eng:
        for _ in range(2):   # two batches through the same engine
            fid, off, ln = random_extents(rng, data, k)
            eng.submit(fid, off, ln)
            got = drain(eng, pool, ln, disk=int(rng.integers(0, 2)), max_n=int(rng.integers(1, 20)))
            assert sorted(got) == list(range(k))
            for i in range(k):
                assert got[i] == expect(data, fid[i], off[i], ln[i]), (i, fid[i], off[i], ln[i])
        st_ = eng.stats()
        assert st_["requests"] >= 2 * k and st_["bytes"] >= 0


def test_edges_padding_and_alignment(engine_name, dataset):
    files, disk_of, data = dataset
    ext = [(3, 0, 1024),                      # 1000-byte file: its data + 24 zero bytes
           (3, 512, 512),                     # only the tail of the unpadded file
           (2, 69_632, 512),                  # last partial block of a 70,000-byte file
           (1, 200 * 1024, 512),              # exact last block of a padded file
           (0, 300 * 1024 - SLOT, SLOT),      # a full slot ending at the file end
           (0, 0, SLOT), (0, 0, 512), (0, 0, 512)]   # duplicates allowed
    fid = np.array([e[0] for e in ext], np.int32)
    off = np.array([e[1] for e in ext], np.int64)
    ln = np.array([e[2] for e in ext], np.int64)
    with BufferPool(SLOT, 4) as pool, build(engine_name, files, disk_of, pool) as eng:
        # dirty the pool so zero-filling is really checked
        pool.view[:] = 0xAB
        eng.submit(fid, off, ln)
        got = drain(eng, pool, ln)
        for i in range(len(ext)):
            assert got[i] == expect(data, fid[i], off[i], ln[i])


def test_empty_batch(engine_name, dataset):
    files, disk_of, _ = dataset
    with BufferPool(SLOT, 2) as pool, build(engine_name, files, disk_of, pool) as eng:
        eng.submit(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64))
        assert eng.get(0, 4).shape == (0, 2)
        assert eng.get(1, 4).shape == (0, 2)


def test_invalid_extents_rejected(engine_name, dataset):
    files, disk_of, _ = dataset
    bad = [([0], [100], [512]),        # unaligned offset
           ([0], [0], [700]),          # unaligned length
           ([0], [0], [0]),            # empty
           ([0], [0], [SLOT + 512])]   # longer than a slot
    with BufferPool(SLOT, 2) as pool, build(engine_name, files, disk_of, pool) as eng:
        for f, o, l in bad:
            with pytest.raises(ValueError):
                eng.submit(np.array(f, np.int32), np.array(o, np.int64), np.array(l, np.int64))
        # still usable afterwards
        eng.submit(np.array([0], np.int32), np.array([0], np.int64), np.array([512], np.int64))
        assert len(drain(eng, pool, [512])) == 1


# ----------------------------------------------------------------------------- disks, stealing
def test_stealing_and_own_disk(engine_name, dataset):
    files, disk_of, data = dataset
    rng = np.random.default_rng(3)
    fid, off, ln = random_extents(rng, data, 200)
    with BufferPool(SLOT, 16) as pool, build(engine_name, files, disk_of, pool) as eng:
        eng.submit(fid, off, ln)
        got = drain(eng, pool, ln, disk=0, max_n=3)     # only disk 0's consumer: must steal disk 1's
        assert sorted(got) == list(range(200))
        for i in range(200):
            assert got[i] == expect(data, fid[i], off[i], ln[i])
        # a consumer of disk 1 gets disk-1 extents while they are there (prefers its disk)
        only1 = np.flatnonzero(np.asarray(disk_of)[fid] == 1)[:40]
        mix = np.concatenate([only1, np.flatnonzero(np.asarray(disk_of)[fid] == 0)[:2]])
        eng.submit(fid[mix], off[mix], ln[mix])
        time.sleep(0.3)   # let every read finish, so both queues are full
        first = eng.get(1, 10)
        assert all(disk_of[fid[mix][rid]] == 1 for rid in first[:, 0].tolist())
        eng.release(first[:, 1])
        rest = drain(eng, pool, ln[mix], disk=1)
        assert len(rest) + len(first) == len(mix)


def test_concurrent_consumers(engine_name, dataset):
    files, disk_of, data = dataset
    rng = np.random.default_rng(11)
    k = 400
    fid, off, ln = random_extents(rng, data, k)
    results = [dict(), dict()]
    errors = []
    with BufferPool(SLOT, 8) as pool, build(engine_name, files, disk_of, pool) as eng:
        eng.submit(fid, off, ln)

        def consume(d):
            try:
                results[d].update(drain(eng, pool, ln, disk=d, max_n=2))
            except Exception as e:   # pragma: no cover - reported below
                errors.append(e)

        ts = [threading.Thread(target=consume, args=(d,)) for d in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert not errors
        assert not set(results[0]) & set(results[1])
        allr = {**results[0], **results[1]}
        assert sorted(allr) == list(range(k))
        for i in range(k):
            assert allr[i] == expect(data, fid[i], off[i], ln[i])


def test_backpressure_two_slots(engine_name, dataset):
    """With 2 slots and a consumer holding both, nothing may be overwritten; the reader waits."""
    files, disk_of, data = dataset
    rng = np.random.default_rng(5)
    k = 60
    fid, off, ln = random_extents(rng, data, k)
    with BufferPool(SLOT, 2) as pool, build(engine_name, files, disk_of, pool) as eng:
        eng.submit(fid, off, ln)
        seen = 0
        while True:
            held = []
            while len(held) < 2:
                r = eng.get(seen % 2, 1)
                if r.shape[0] == 0:
                    break
                held.append(tuple(r[0].tolist()))
            if not held:
                break
            if len(held) == 2:
                assert held[0][1] != held[1][1]
            time.sleep(0.01)    # readers must be blocked now, not writing into our slots
            for rid, slot in held:
                b = pool.view[slot * SLOT: slot * SLOT + ln[rid]].tobytes()
                assert b == expect(data, fid[rid], off[rid], ln[rid])
            eng.release(np.array([s for _, s in held]))
            seen += len(held)
        assert seen == k
        assert eng.stats()["max_inflight"] <= 2


# ----------------------------------------------------------------------------- errors
def test_truncated_file_raises(engine_name, tmp_path):
    p = tmp_path / "t.adj"
    p.write_bytes(os.urandom(64 * 1024))
    with BufferPool(SLOT, 4) as pool, build(engine_name, [str(p)], [0], pool) as eng:
        os.truncate(p, 8192)      # shorter than the dataset says, after open
        eng.submit(np.array([0, 0], np.int32), np.array([0, 16384], np.int64),
                   np.array([512, 4096], np.int64))
        with pytest.raises(GrapheneIOError) as ei:
            for _ in range(10):
                r = eng.get(0, 4)
                if r.shape[0] == 0:
                    break
                eng.release(r[:, 1])
        msg = str(ei.value)
        assert str(p) in msg and "16384" in msg and "4096" in msg and "disk" in msg


def test_read_crossing_truncation_raises(engine_name, tmp_path):
    p = tmp_path / "t.adj"
    p.write_bytes(os.urandom(64 * 1024))
    with BufferPool(SLOT, 4) as pool, build(engine_name, [str(p)], [0], pool) as eng:
        os.truncate(p, 9000)
        eng.submit(np.array([0], np.int32), np.array([8192], np.int64), np.array([8192], np.int64))
        with pytest.raises(GrapheneIOError) as ei:
            eng.get(0, 4)
        assert str(p) in str(ei.value) and "8192" in str(ei.value)


def test_buffered_mode_and_tmpfs_fallback(engine_name, dataset):
    files, disk_of, data = dataset
    with BufferPool(SLOT, 4) as pool:
        with build(engine_name, files, disk_of, pool, direct=False) as eng:
            assert eng.direct is False
            eng.submit(np.array([3], np.int32), np.array([0], np.int64), np.array([1024], np.int64))
            assert drain(eng, pool, [1024])[0] == expect(data, 3, 0, 1024)
        if not os.path.isdir("/dev/shm"):
            return
        shm = f"/dev/shm/graphene_test_{os.getpid()}_{engine_name}.adj"
        b = os.urandom(4096 + 100)
        with open(shm, "wb") as f:
            f.write(b)
        try:
            with build(engine_name, [shm], [0], pool, direct=True) as eng:
                eng.submit(np.array([0], np.int32), np.array([4096], np.int64),
                           np.array([512], np.int64))
                got = drain(eng, pool, [512])[0]
                assert got == b[4096:] + bytes(412)
                if not eng.direct:          # tmpfs refused O_DIRECT: it must say so
                    assert eng.notes and any("O_DIRECT" in n for n in eng.notes)
        finally:
            os.unlink(shm)


# ----------------------------------------------------------------------------- selection
def test_auto_with_io_uring_disabled(monkeypatch, dataset):
    files, disk_of, data = dataset
    monkeypatch.setenv("GRAPHENE_DISABLE_URING", "1")
    with BufferPool(SLOT, 4) as pool:
        for name in ("uring", "liburing"):
            with pytest.raises(OSError) as ei:
                E.make_engine(name, files, disk_of, pool)
            assert ei.value.errno == errno.EPERM
        with E.make_engine("auto", files, disk_of, pool) as eng:
            assert eng.name == "pread"
            note = E.last_notice()
            assert "pread" in note and "uring" in note and "liburing" in note
            assert "not permitted" in note.lower()
            assert eng.notes and eng.notes[0] == note
            eng.submit(np.array([0], np.int32), np.array([512], np.int64), np.array([512], np.int64))
            assert drain(eng, pool, [512])[0] == expect(data, 0, 512, 512)


def test_auto_prefers_uring_when_available(monkeypatch, dataset):
    files, disk_of, _ = dataset
    monkeypatch.delenv("GRAPHENE_DISABLE_URING", raising=False)
    with BufferPool(SLOT, 4) as pool:
        try:
            eng = E.make_engine("uring", files, disk_of, pool)
        except OSError:
            pytest.skip("io_uring not usable on this machine")  # the auto test above still runs
        eng.close()
        with E.make_engine("auto", files, disk_of, pool) as eng:
            assert eng.name == "uring" and E.last_notice() == "io engine: uring"


def test_unknown_engine_name(dataset):
    files, disk_of, _ = dataset
    with BufferPool(SLOT, 2) as pool, pytest.raises(ValueError):
        E.make_engine("aio", files, disk_of, pool)


# ----------------------------------------------------------------------------- fault engine
def test_faults_eio_names_everything_and_engine_recovers(dataset):
    files, disk_of, data = dataset
    with BufferPool(SLOT, 4) as pool, FaultEngine(files, disk_of, pool, eio_at=[(1, 5000)],
                                                  short_rate=0.2, seed=3) as eng:
        eng.submit(np.array([0, 1, 0], np.int32), np.array([0, 4096, 512], np.int64),
                   np.array([512, 4096, 512], np.int64))
        with pytest.raises(GrapheneIOError) as ei:
            for _ in range(10):
                r = eng.get(1, 4)
                if r.shape[0] == 0:
                    break
                eng.release(r[:, 1])
        msg = str(ei.value)
        assert files[1] in msg and "offset 4096" in msg and "length 4096" in msg
        assert "disk 1" in msg and "EIO" in msg
        assert eng.injected["eio"] >= 1
        # a later batch without the bad block works, and every slot came back
        eng.eio_at.clear()
        fid, off, ln = random_extents(np.random.default_rng(1), data, 50)
        eng.submit(fid, off, ln)
        got = drain(eng, pool, ln)
        assert all(got[i] == expect(data, fid[i], off[i], ln[i]) for i in range(50))


def test_faults_injected_short_reads_and_eintr_counted(dataset):
    files, disk_of, data = dataset
    fid, off, ln = random_extents(np.random.default_rng(2), data, 300)
    with BufferPool(SLOT, 8) as pool, FaultEngine(files, disk_of, pool, short_rate=0.5,
                                                  eintr_rate=0.3, eagain_rate=0.1, seed=9) as eng:
        eng.submit(fid, off, ln)
        got = drain(eng, pool, ln)
        assert all(got[i] == expect(data, fid[i], off[i], ln[i]) for i in range(300))
        assert eng.injected["short"] > 10 and eng.injected["eintr"] > 10
        assert eng.stats()["short_reads"] > 0 and eng.stats()["retries"] > 0


def test_faults_simulated_truncation(dataset):
    files, disk_of, data = dataset
    with BufferPool(SLOT, 4) as pool, FaultEngine(files, disk_of, pool, truncate={0: 10_000}) as eng:
        # inside the (simulated) 10,000-byte file and its padding: fine, zero-filled
        eng.submit(np.array([0], np.int32), np.array([9728], np.int64), np.array([512], np.int64))
        assert drain(eng, pool, [512])[0] == data[0][9728:10_000] + bytes(512 - 272)
        eng.submit(np.array([0], np.int32), np.array([8192], np.int64), np.array([4096], np.int64))
        with pytest.raises(GrapheneIOError) as ei:
            eng.get(0, 1)
        assert "offset 8192" in str(ei.value) and "length 4096" in str(ei.value)
