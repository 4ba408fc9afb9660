"""A streamed tier's chunks read from the SSD through the IO engine (io/engines.py: io_uring,
O_DIRECT, a deep queue) into its buffer pool (io/buffers.py: huge pages when reserved), the pool
registered with CUDA, so each completed read goes from the engine's slot to GPU memory in one
asynchronous copy (issue 15: SSD -> pinned host buffers -> GPU).

ENGINES engines take the chunks in turn, one chunk per engine batch (the contract allows one batch
in flight per engine): while one chunk's last reads drain, the next chunk's are already queued on
the other engine, so the disk's queue never runs dry at a chunk's end, and every completion of a
batch belongs to one chunk, whose device buffer is free by then (the caller's stream order). Each
slot's 4 KB pages are checked against the dataset's page table (CRC32C in C) before the copy;
the slot goes back to the engine once its copy is done.

Measured on the H200 machine at Kronecker scale 24 (2.08 GB of lists, `tools/
probe_gpu_stream_stages.py`, BENCHMARKS.md): the engine alone, checks included, reads the file
to GPU memory at 1.8-2.2 GB/s with 16 or 32 reads of 4 MiB in flight; streamed passes through it
take what the reader threads' passes take (WCC, the resident load, a pass of no kernels: within
the rounds' noise; streamed PageRank 3-6% faster), with 192 MiB of pinned pools (two engines of
16 + 8 slots) where the threads pinned three chunk-sized staging buffers (768 MB at that scale).

Nothing here imports CuPy: the caller passes what registers memory and what copies (a test
passes numpy copies).
"""
from __future__ import annotations

import os
from collections import deque

import numpy as np

from ..errors import GrapheneError

#: bytes per engine slot (one read), reads in flight per engine at most (fewer when a chunk has
#: fewer reads), engines taking chunks in turn (four for the resident load's 64 MB chunks loaded
#: Kronecker scale 24 no faster than two: BENCHMARKS.md)
SLOT_BYTES = 4 << 20
QUEUE_DEPTH = 16
ENGINES = 2
#: slots per engine beyond its queue: completed reads waiting for their copies
SPARE_SLOTS = 8
PAGE = 4096


def disks_of(paths) -> list:
    """An IO worker index per path: one per distinct device (st_dev) among the paths' files."""
    devs = {}
    return [devs.setdefault(os.stat(p).st_dev, len(devs)) for p in paths]


class ChunkReads:
    """Reads of byte ranges ("chunks") of `paths` through ENGINES IO engines in turn.

    register(address, nbytes) -> undo callable, or None: makes each engine's pool copyable
    (cudaHostRegister); tables: per path, the page table (uint32 CRC32C per 4 KB page) or None;
    damaged(path, what): the error raised for a page that fails its check."""

    def __init__(self, paths, tables, damaged, register=None, engine="auto", direct=True,
                 slot_bytes=SLOT_BYTES, queue_depth=None, engines=None, chunk_bytes=None):
        from ..io.buffers import BufferPool
        from ..io.engines import make_engine
        self.paths = list(paths)
        self.sizes = [os.path.getsize(p) for p in self.paths]
        self.tables = list(tables)
        self.damaged = damaged
        self.slot = int(slot_bytes)
        # chunk_bytes (the largest chunk): a batch never has more reads than its chunk's
        per_chunk = -(-int(chunk_bytes) // self.slot) if chunk_bytes else QUEUE_DEPTH
        if queue_depth is None:
            queue_depth = max(1, min(QUEUE_DEPTH, per_chunk))
        if engines is None:
            engines = ENGINES
        self.nslots = int(queue_depth) + SPARE_SLOTS
        self.pools, self.engines, self._undo = [], [], []
        self.broken = False         # an error ended a pass: the engines are closed
        disk_of = np.array(disks_of(self.paths), dtype=np.int32)
        self.disk_of = disk_of
        try:
            for _ in range(max(1, int(engines))):
                pool = BufferPool(self.slot, self.nslots)
                self.pools.append(pool)
                if register is not None:
                    self._undo.append(register(pool.address, self.slot * self.nslots))
                self.engines.append(make_engine(engine, self.paths, disk_of, pool,
                                                queue_depth=queue_depth, direct=direct))
        except BaseException:
            self.close()
            raise
        self.name = self.engines[0].name
        self.direct = all(e.direct for e in self.engines)
        self.held = [deque() for _ in self.engines]    # per engine: (event, slot) not yet back
        self.busy = deque()         # (engine index, chunk key, its extents) in submission order
        self.todo = deque()
        self.bytes_read = 0

    # -- a pass ----------------------------------------------------------------------------------
    def begin(self, chunks):
        """Queue a pass: chunks = [(key, path index, byte lo, byte hi)] in order (lo a multiple of
        PAGE); each is read in whole pages, [lo, hi rounded up to a page or the file's end). The
        first ENGINES are submitted now."""
        if self.busy or self.todo:
            raise RuntimeError("a pass is still being read")
        for i in range(len(self.engines)):        # (the last pass's copies: done by now)
            self._give_back(i, wait=True)
        for key, f, lo, hi in chunks:
            size = self.sizes[f]
            if hi > size:
                raise self.damaged(self.paths[f], f"file too short: {size} bytes, the lists "
                                                  f"need byte {hi}")
        self.todo.extend((key, f, int(lo), int(hi)) for key, f, lo, hi in chunks)
        for i in range(min(len(self.engines), len(self.todo))):
            self._submit(i)

    def _submit(self, i):
        key, f, lo, hi = self.todo.popleft()
        # whole pages (each is checked whole), up to the file's end
        end = min(-(-hi // PAGE) * PAGE, -(-self.sizes[f] // 512) * 512)
        offs = np.arange(lo, end, self.slot, dtype=np.int64)
        lens = np.minimum(self.slot, end - offs).astype(np.int64)
        if len(offs):
            self.engines[i].submit(np.full(len(offs), f, np.int32), offs, lens)
        self.busy.append((i, key, f, lo, offs, lens))

    def pending(self) -> bool:
        return bool(self.busy)

    def next(self, copy):
        """Read the oldest submitted chunk: for each read as it completes, its pages checked,
        copy(key, source address, nbytes, offset in the chunk) -> None or an event (with
        .done and .synchronize()) after which the slot may be reused (the copy may take bytes
        past the chunk's `hi`, up to its page's end). Returns the chunk's key once every read of
        it is handed to a copy, its engine given the next chunk: the copies may still be going
        (work queued after them on their stream sees them done); their slots go back to the
        engine as their events complete."""
        i, key, f, lo, offs, lens = self.busy.popleft()
        eng, pool = self.engines[i], self.pools[i]
        table, size, path = self.tables[f], self.sizes[f], self.paths[f]
        held = self.held[i]             # (event, slot) of copies in flight from this engine
        disk = int(self.disk_of[f])
        base = pool.address
        try:
            left = len(offs)
            while left:
                self._give_back(i)
                if len(held) >= self.nslots - 1:      # the engine would have no slot to read into
                    ev, s = held.popleft()
                    ev.synchronize()
                    eng.release(np.array([s], np.int64))
                got = eng.get(disk, 16)
                if not len(got):
                    break
                for req, s in got.tolist():
                    at, n = int(offs[req]), int(lens[req])
                    n = min(n, size - at)          # (the file's tail: up to its last byte)
                    if table is not None:
                        self._check(table, path, pool.view[s * self.slot:s * self.slot + n], at)
                    held.append((copy(key, base + s * self.slot, n, at - lo), s))
                    left -= 1
                    self.bytes_read += n
            if left:
                raise GrapheneError(f"the IO engine ended a batch of {path} with {left} reads "
                                    f"not handed out")
        except BaseException:
            self._abort()
            raise
        if self.todo:
            self._submit(i)
        return key

    def _give_back(self, i, wait=False):
        """Engine i's slots whose copies are done (wait: all of them, waiting) back to it."""
        held, eng = self.held[i], self.engines[i]
        while held and (wait or held[0][0] is None or held[0][0].done):
            ev, s = held.popleft()
            if ev is not None and wait:
                ev.synchronize()
            eng.release(np.array([s], np.int64))

    def _check(self, table, path, data, at):
        """Each 4 KB page of `data` (byte `at` of the file on) against the page table."""
        from .. import _uring
        crcs = np.frombuffer(_uring.page_crcs(data, PAGE), "<u4")
        p0 = at // PAGE
        bad = np.flatnonzero(crcs != table[p0:p0 + len(crcs)])
        if bad.size:
            j = int(bad[0])
            got = int(crcs[j])
            want = int(table[p0 + j]) if p0 + j < len(table) else None
            raise self.damaged(path, f"the page at byte offset {(p0 + j) * PAGE} has CRC32C "
                                     f"{got:08x}, the dataset recorded "
                                     + (f"{want:08x}" if want is not None else "no such page"))

    def _abort(self):
        """After an error in a pass: every copy waited for, every engine closed (its workers
        joined: one may be mid-batch)."""
        for held in self.held:
            for ev, _ in held:
                if ev is not None:
                    try:
                        ev.synchronize()
                    except Exception:  # noqa: BLE001 - the first error is the one raised
                        pass
            held.clear()
        self.todo.clear()
        self.busy.clear()
        for e in self.engines:
            try:
                e.close()
            except Exception:  # noqa: BLE001
                pass
        self.broken = True

    def stop(self):
        """Drop a pass begun and not read to its end (its reads waited for, nothing more
        copied; the copies made waited for)."""
        for i in range(len(self.engines)):
            self._give_back(i, wait=True)
        self.todo.clear()
        while self.busy:
            i, *_ = self.busy.popleft()
            eng = self.engines[i]
            disk = 0
            while True:
                got = eng.get(disk, 64)
                if not len(got):
                    break
                eng.release(got[:, 1].copy())

    def close(self):
        """Wait for the copies still reading the pools, then close the engines and free the
        pools (unregistered first)."""
        for held in getattr(self, "held", ()):
            for ev, _ in held:
                if ev is not None:
                    ev.synchronize()
            held.clear()
        for e in self.engines:
            try:
                e.close()
            except Exception:  # noqa: BLE001
                pass
        self.engines = []
        for undo in self._undo:
            if undo is not None:
                undo()
        self._undo = []
        for p in self.pools:
            p.close()
        self.pools = []
