"""gpu/engine_reads.py ChunkReads on the CPU: chunks of real files read through the real IO
engines (io_uring, O_DIRECT where the file system allows it), checked page by page, handed to a
copy whose completion comes late (as a GPU copy's event does), so a slot given back to the engine
before its copy ends would show as wrong bytes."""
from __future__ import annotations

import contextlib
import ctypes
import os
import pathlib
import shutil
import tempfile

import numpy as np
import pytest

from graphene_py import _uring
from graphene_py.integrity import DamagedDataError
from graphene_py.gpu import engine_reads
from graphene_py.gpu.engine_reads import ChunkReads
from graphene_py.integrity import _damaged
from graphene_py.io.engines import engine_status

SLOT = 16 << 10
ENGINES_HERE = [n for n, why in engine_status().items() if not why]


class LateCopy:
    """A copy that happens only once it is waited for, or after `polls` looks at .done."""

    def __init__(self, src, n, dst, polls):
        self.src, self.n, self.dst, self.polls = src, n, dst, polls
        self.copied = False

    def _do(self):
        if not self.copied:
            ctypes.memmove(self.dst, self.src, self.n)
            self.copied = True

    @property
    def done(self):
        self.polls -= 1
        if self.polls <= 0:
            self._do()
        return self.copied

    def synchronize(self):
        self._do()


def _file(tmp_path, name, nbytes, seed):
    data = np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8)
    path = str(tmp_path / name)
    data.tofile(path)
    table = np.frombuffer(_uring.page_crcs(data, 4096), "<u4").copy()
    return path, data, table


@contextlib.contextmanager
def _one_file(tmp_path, nbytes, seed, **kw):
    """(ChunkReads over one new file of random bytes, the file's path, bytes and page table),
    closed after."""
    path, data, table = _file(tmp_path, "a.adj", nbytes, seed)
    reads = ChunkReads([path], [table], _damaged, slot_bytes=SLOT, **kw)
    try:
        yield reads, path, data, table
    finally:
        reads.close()


def _chunks(nbytes, cuts):
    """Chunks as a stream makes them: [lo, hi) with lo the page of the first byte."""
    out = []
    edges = [0] + [c for c in cuts if c < nbytes] + [nbytes]
    for a, b in zip(edges, edges[1:]):
        if b > a:
            out.append((a // 4096 * 4096, b, a))
    return out


def _read_pass(reads, files, plan, polls, made):
    """One pass: plan = [(file index, lo, hi, first byte wanted)]; returns each chunk's bytes
    from its first wanted byte, as the copies put them."""
    bufs = [np.zeros(-(-hi // 4096) * 4096 - lo, np.uint8) for _, lo, hi, _ in plan]
    reads.begin([(k, f, lo, hi) for k, (f, lo, hi, _) in enumerate(plan)])
    got = []
    while reads.pending():
        def copy(key, src, n, at):
            ev = LateCopy(src, n, bufs[key].ctypes.data + at, polls)
            made.append(ev)
            return ev
        got.append(reads.next(copy))
    assert got == list(range(len(plan)))
    for ev in made:            # (as a GPU pass's end waits for its streams)
        ev.synchronize()
    return [bufs[k][first - lo:hi - lo] for k, (f, lo, hi, first) in enumerate(plan)]


@pytest.mark.parametrize("engine", ENGINES_HERE)
@pytest.mark.parametrize("polls", [1, 1000])
def test_chunks_whole_and_in_order(tmp_path, engine, polls):
    # two files, sizes off a page and off 512; chunks cut mid-page and across many slots; a
    # queue of 2 reads (so the spare slots run out while copies wait)
    a = _file(tmp_path, "a.adj", 21 * SLOT + 1234, 1)
    b = _file(tmp_path, "b.adj", 3 * SLOT + 4096 * 2, 2)
    undone = []

    def register(addr, nbytes):
        assert addr % 4096 == 0 and nbytes == SLOT * (2 + engine_reads.SPARE_SLOTS)
        return lambda: undone.append(addr)
    reads = ChunkReads([a[0], b[0]], [a[2], b[2]], _damaged, register, engine=engine,
                       slot_bytes=SLOT, queue_depth=2, engines=2)
    try:
        plan = []
        for f, (path, data, _) in enumerate((a, b)):
            for lo, hi, first in _chunks(len(data), [5000, 5 * SLOT + 77, 9 * SLOT]):
                plan.append((f, lo, hi, first))
        for _ in range(2):                       # a second pass through the same engines
            made = []
            out = _read_pass(reads, [a, b], plan, polls, made)
            for (f, lo, hi, first), o in zip(plan, out):
                want = (a, b)[f][1][first:hi]
                assert np.array_equal(o, want)
        assert reads.bytes_read >= len(a[1]) + len(b[1])
    finally:
        reads.close()
    assert len(undone) == 2                       # both pools unregistered


@pytest.mark.parametrize("engine", ENGINES_HERE)
def test_damaged_page_named(tmp_path, engine):
    with _one_file(tmp_path, 8 * SLOT, 3, engine=engine, queue_depth=2) as (reads, path, data,
                                                                             _):
        with open(path, "r+b") as f:              # one byte of page 9 changed on disk
            f.seek(9 * 4096 + 17)
            f.write(bytes([data[9 * 4096 + 17] ^ 0xFF]))
        with pytest.raises(DamagedDataError, match=r"a\.adj.*byte offset 36864"):
            _read_pass(reads, None, [(0, 0, len(data), 0)], 1, [])
        assert reads.broken


def test_file_too_short(tmp_path):
    with _one_file(tmp_path, 4 * SLOT, 4, queue_depth=2) as (reads, _, data, _):
        with pytest.raises(DamagedDataError, match="file too short"):
            reads.begin([(0, 0, 0, 4096), (1, 0, 0, len(data) + 1)])
        assert not reads.pending()                # nothing queued: the next pass may begin
        out = _read_pass(reads, None, [(0, 0, len(data), 0)], 1, [])
        assert np.array_equal(out[0], data)


def test_stop_a_pass_not_read(tmp_path):
    with _one_file(tmp_path, 12 * SLOT, 5, queue_depth=2) as (reads, _, data, _):
        reads.begin([(k, 0, k * 4 * SLOT, (k + 1) * 4 * SLOT) for k in range(3)])
        reads.stop()
        assert not reads.pending()
        out = _read_pass(reads, None, [(0, 0, len(data), 0)], 1, [])   # the engines still work
        assert np.array_equal(out[0], data)
        with pytest.raises(RuntimeError):
            reads.begin([(0, 0, 0, 4096)])
            reads.begin([(0, 0, 0, 4096)])


def test_queue_follows_the_chunks(tmp_path):
    for chunk, qd in ((2 * SLOT, 2), (64 * SLOT, engine_reads.QUEUE_DEPTH)):
        with _one_file(tmp_path, 4 * SLOT, 6, chunk_bytes=chunk) as (reads, *_):
            assert len(reads.engines) == engine_reads.ENGINES
            assert reads.nslots == qd + engine_reads.SPARE_SLOTS
            assert all(e.queue_depth == qd for e in reads.engines)


def test_disks_of(tmp_path):
    p = [str(tmp_path / n) for n in ("x", "y")]
    for q in p:
        open(q, "wb").close()
    assert engine_reads.disks_of(p) == [0, 0]
    assert engine_reads.disks_of(p + ["/proc/self/status"]) == [0, 0, 1]



@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm here")
def test_two_devices(tmp_path):
    """A file on tmpfs beside one on the disk: two devices, so each chunk's reads are asked of
    its own IO worker (buffered where the file system refuses O_DIRECT: older kernels' tmpfs)."""
    a = _file(tmp_path, "a.adj", 5 * SLOT + 300, 7)
    shm = tempfile.mkdtemp(dir="/dev/shm")
    try:
        b = _file(pathlib.Path(shm), "b.adj", 3 * SLOT, 8)
        assert engine_reads.disks_of([a[0], b[0]]) == [0, 1]
        reads = ChunkReads([a[0], b[0]], [a[2], b[2]], _damaged, slot_bytes=SLOT,
                           queue_depth=2)
        try:
            assert all(len(set(e.disk_of)) == 2 for e in reads.engines)
            plan = [(1, 0, len(b[1]), 0), (0, 0, len(a[1]), 0), (1, 4096, 2 * SLOT, 5000)]
            out = _read_pass(reads, None, plan, 3, [])
            assert np.array_equal(out[0], b[1]) and np.array_equal(out[1], a[1])
            assert np.array_equal(out[2], b[1][5000:2 * SLOT])
        finally:
            reads.close()
    finally:
        shutil.rmtree(shm)
