"""The `pread` engine (io_uring unavailable) and the thread machinery shared with `liburing`.

`ThreadedEngine` implements graphene_py/io/contract.py's contract for engines whose IO workers are
Python threads: per-disk request lists, a bounded free-slot list (backpressure), per-disk completion
queues, `get` preferring its disk then stealing, error propagation, O_DIRECT with a buffered fallback,
statistics. Subclasses provide the per-disk worker loop.

`PreadEngine` keeps several reads in flight per disk with a few threads per disk, each calling
os.preadv (which releases the GIL) into a slot of the pool through a memoryview. Short reads are
completed, EINTR/EAGAIN retried, EIO and reads past the end of a short file raise GrapheneIOError
(naming disk, file, offset, length) from `get`.
"""
from __future__ import annotations

import errno
import os
import threading
import time
from collections import deque

import numpy as np

from ..errors import GrapheneIOError
from .contract import Engine

ALIGN = 512
_EMPTY = np.zeros((0, 2), dtype=np.int64)


def _padded(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class _Abort(Exception):
    """Internal: the batch was abandoned (error elsewhere or close)."""


class ThreadedEngine(Engine):
    """Shared machinery; subclasses implement `_worker(disk)` using the helpers below."""

    name = "threaded"

    def __init__(self, files, disk_of, pool, queue_depth=64, direct=True):
        super().__init__(files, disk_of, pool, queue_depth, direct)
        if len(self.files) != len(self.disk_of):
            raise ValueError("files and disk_of differ in length")
        if self.queue_depth < 1:
            raise ValueError("queue_depth must be >= 1")
        self._want_direct = bool(direct)
        self._stale = []
        self.fds = []
        self.fd_direct = []
        try:
            for path in self.files:
                self._open(path)
        except BaseException:
            self._close_fds()
            raise
        self.direct = bool(self.fd_direct) and all(self.fd_direct) if self._want_direct else False
        self._lock = threading.Lock()
        self._work_cv = threading.Condition(self._lock)
        self._slot_cv = threading.Condition(self._lock)
        self._done_cv = threading.Condition(self._lock)
        self._free = list(range(pool.nslots - 1, -1, -1))
        self._done = [deque() for _ in range(self.ndisks)]
        self._pending = [deque() for _ in range(self.ndisks)]
        self._gen = 0
        self._remaining = 0          # requests of the batch not yet handed out by get()
        self._unfinished = 0         # requests of the batch not yet completed by a worker
        self._error = None
        self._closing = False
        self._inflight = 0
        self._batch_t0 = 0.0
        self._st = dict(requests=0, bytes=0, io_seconds=0.0, max_inflight=0, wait_seconds=0.0,
                        batches=0, retries=0, short_reads=0,
                        disk_requests=[0] * self.ndisks, disk_bytes=[0] * self.ndisks,
                        stolen=[0] * self.ndisks)
        self._fo = self._lo = self._le = None
        self._threads = []

    # ---------------------------------------------------------------- files
    def _open(self, path):
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
        if self._want_direct and hasattr(os, "O_DIRECT"):
            try:
                self.fds.append(os.open(path, flags | os.O_DIRECT))
                self.fd_direct.append(True)
                return
            except OSError as e:
                if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise GrapheneIOError(f"cannot open {path}: {e.strerror}") from e
                self._note(f"O_DIRECT refused by the filesystem of {path} ({e.strerror}); "
                           f"using buffered reads (page cache) for it")
        try:
            self.fds.append(os.open(path, flags))
        except OSError as e:
            raise GrapheneIOError(f"cannot open {path}: {e.strerror}") from e
        self.fd_direct.append(False)

    def _note(self, msg):
        if msg not in self.notes:
            self.notes.append(msg)

    def _reopen_buffered(self, fid, why):
        """A filesystem that accepted O_DIRECT at open but refuses the read: go buffered for it."""
        with self._lock:
            if not self.fd_direct[fid]:
                return
            old = self.fds[fid]
            self.fds[fid] = os.open(self.files[fid], os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            self.fd_direct[fid] = False
            self.direct = False
            self._note(f"O_DIRECT read refused on {self.files[fid]} ({why}); using buffered reads")
            # the old fd may still be in use by a concurrent read: close it at close()
            self._stale.append(old)

    def _close_fds(self):
        for fd in list(self.fds) + self._stale:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        self._stale = []

    def _ioerror(self, disk, fid, off, length, what):
        return GrapheneIOError(f"{what}: disk {disk}, file {self.files[fid]}, offset {off}, "
                               f"length {length}")

    def _at_eof(self, fid, pos):
        """After a short read: is `pos` at or past the file's current end?"""
        return pos >= os.fstat(self.fds[fid]).st_size

    def _eof(self, fid, disk, off, length, got):
        """Reached end of file after `got` bytes of request (off, length): zero-fill when only the
        file's 512-byte padding is missing, else raise GrapheneIOError (file shorter than expected)."""
        size = os.fstat(self.fds[fid]).st_size
        if _padded(size) >= off + length and off + got >= size:
            return True
        raise self._ioerror(disk, fid, off, length,
                            f"read past the end of the file (file is {size} bytes, "
                            f"got {got} of {length} bytes)")

    # ---------------------------------------------------------------- batch
    def start(self):
        for d in range(self.ndisks):
            for k in range(self._threads_per_disk()):
                t = threading.Thread(target=self._worker_main, args=(d, k),
                                     name=f"{self.name}-disk{d}-{k}", daemon=True)
                t.start()
                self._threads.append(t)

    def _threads_per_disk(self):
        return 1

    def submit(self, file_ids, offsets, lengths) -> None:
        fid = np.ascontiguousarray(file_ids, dtype=np.int32)
        off = np.ascontiguousarray(offsets, dtype=np.int64)
        ln = np.ascontiguousarray(lengths, dtype=np.int64)
        if not (fid.shape == off.shape == ln.shape) or fid.ndim != 1:
            raise ValueError("file_ids, offsets and lengths must be 1-D arrays of one length")
        k = fid.shape[0]
        if k:
            if fid.min() < 0 or fid.max() >= len(self.files):
                raise ValueError("file id out of range")
            if (off % ALIGN).any() or (ln % ALIGN).any() or off.min() < 0:
                raise ValueError("extents must be 512-byte aligned (offset and length)")
            if ln.min() <= 0 or ln.max() > self.pool.slot_bytes:
                raise ValueError(f"extent lengths must be in (0, {self.pool.slot_bytes}]")
        with self._lock:
            if self._closing:
                raise RuntimeError("engine is closed")
            if self._remaining and self._error is None:
                raise RuntimeError("submit() while the previous batch is still being handed out")
            # wait for workers still finishing an abandoned batch
            while self._unfinished:
                self._done_cv.wait()
            self._gen += 1
            self._error = None
            for q in self._done:   # completions of an abandoned batch: give their slots back
                self._free.extend(slot for _, slot in q)
                q.clear()
            self._fo, self._lo, self._le = fid, off, ln
            disks = self.disk_of[fid] if k else np.zeros(0, np.int32)
            for d in range(self.ndisks):
                self._pending[d] = deque(np.flatnonzero(disks == d).tolist())
            self._remaining = k
            self._unfinished = k
            self._batch_t0 = time.perf_counter()
            self._st["batches"] += 1
            self._work_cv.notify_all()

    def _next_request(self, disk, block=True):
        """(gen, rid) of the next request of `disk`, or None when closing. Caller holds no lock."""
        with self._lock:
            while True:
                if self._closing:
                    return None
                if self._pending[disk] and self._error is None:
                    return self._gen, self._pending[disk].popleft()
                if not block:
                    return False
                self._work_cv.wait()

    def _take_slot(self, gen, block=True):
        """A free slot, waiting for one (backpressure) when block; None when not block and none free.
        Raises _Abort when the batch was abandoned meanwhile."""
        with self._lock:
            while not self._free:
                if self._closing or self._gen != gen or self._error is not None:
                    raise _Abort()
                if not block:
                    return None
                self._slot_cv.wait()
            if self._closing or self._gen != gen or self._error is not None:
                raise _Abort()
            self._inflight += 1
            if self._inflight > self._st["max_inflight"]:
                self._st["max_inflight"] = self._inflight
            return self._free.pop()

    def _complete(self, gen, disk, rid, slot, error=None):
        """Publish a finished request (or its error) and return the slot on error/abort."""
        with self._lock:
            self._inflight -= 1
            self._unfinished -= 1
            if error is not None or self._gen != gen or self._error is not None:
                self._free.append(slot)
                self._slot_cv.notify()
                if error is not None and self._error is None and self._gen == gen:
                    self._error = error
                    self._abandon()
            else:
                self._done[disk].append((rid, slot))
                n = int(self._le[rid])
                self._st["requests"] += 1
                self._st["bytes"] += n
                self._st["disk_requests"][disk] += 1
                self._st["disk_bytes"][disk] += n
                if self._unfinished == 0:
                    self._st["io_seconds"] += time.perf_counter() - self._batch_t0
            self._done_cv.notify_all()

    def _abandon(self):
        """Drop every not-yet-started request (lock held)."""
        for d in range(self.ndisks):
            self._unfinished -= len(self._pending[d])
            self._pending[d].clear()
        self._slot_cv.notify_all()
        self._done_cv.notify_all()

    def _cancel_unstarted(self, n):
        with self._lock:
            self._unfinished -= n
            self._done_cv.notify_all()

    def get(self, disk: int, max_n: int) -> np.ndarray:
        max_n = max(1, int(max_n))
        disk = int(disk) % self.ndisks
        t0 = None
        with self._lock:
            while True:
                if self._error is not None:
                    raise self._error
                if self._remaining == 0:
                    break
                out = []
                q = self._done[disk]
                while q and len(out) < max_n:
                    out.append(q.popleft())
                if len(out) < max_n:
                    for o in range(1, self.ndisks):
                        dq = self._done[(disk + o) % self.ndisks]
                        nst = 0
                        while dq and len(out) < max_n:
                            out.append(dq.popleft())
                            nst += 1
                        self._st["stolen"][disk] += nst
                        if len(out) >= max_n:
                            break
                if out:
                    self._remaining -= len(out)
                    if t0 is not None:
                        self._st["wait_seconds"] += time.perf_counter() - t0
                    return np.asarray(out, dtype=np.int64).reshape(-1, 2)
                if self._closing:
                    raise RuntimeError("engine closed while waiting")
                if t0 is None:
                    t0 = time.perf_counter()
                self._done_cv.wait()
        if t0 is not None:
            self._st["wait_seconds"] += time.perf_counter() - t0
        return _EMPTY.copy()

    def release(self, slots) -> None:
        s = np.asarray(slots, dtype=np.int64).ravel()
        if s.size == 0:
            return
        if s.min() < 0 or s.max() >= self.pool.nslots:
            raise ValueError("slot out of range")
        with self._lock:
            self._free.extend(s.tolist())
            self._slot_cv.notify_all()

    def stats(self) -> dict:
        with self._lock:
            st = dict(self._st)
            for k in ("disk_requests", "disk_bytes", "stolen"):
                st[k] = list(st[k])
        st["engine"] = self.name
        st["direct"] = self.direct
        st["notes"] = list(self.notes)
        return st

    def close(self) -> None:
        with self._lock:
            if self._closing:
                return
            self._closing = True
            self._work_cv.notify_all()
            self._slot_cv.notify_all()
            self._done_cv.notify_all()
        for t in self._threads:
            t.join(timeout=10)
        self._close_fds()

    def _worker_main(self, disk, k):
        try:
            self._worker(disk, k)
        except BaseException as e:  # never die silently: surface as the batch error
            with self._lock:
                if self._error is None and not self._closing:
                    self._error = e if isinstance(e, GrapheneIOError) else GrapheneIOError(
                        f"IO worker for disk {disk} failed: {e!r}")
                    self._abandon()
                self._done_cv.notify_all()

    def _worker(self, disk, k):
        raise NotImplementedError


class PreadEngine(ThreadedEngine):
    """os.preadv from a few threads per disk (several IOs in flight; preadv releases the GIL)."""

    name = "pread"
    #: Reading threads per disk (capped by queue_depth).
    THREADS_PER_DISK = 8

    def __init__(self, files, disk_of, pool, queue_depth=64, direct=True, threads_per_disk=None):
        super().__init__(files, disk_of, pool, queue_depth, direct)
        self._tpd = max(1, min(self.queue_depth, threads_per_disk or self.THREADS_PER_DISK))
        self.start()

    def _threads_per_disk(self):
        return self._tpd

    # the one syscall; the fault engine overrides it
    def _preadv(self, fd, bufs, off):
        return os.preadv(fd, bufs, off)

    def _read(self, disk, fid, off, length, slot):
        sb = self.pool.slot_bytes
        with self.pool.memoryview(slot * sb, slot * sb + length) as mv:
            self._read_into(mv, disk, fid, off, length)

    def _read_into(self, mv, disk, fid, off, length):
        got = 0
        while got < length:
            fd = self.fds[fid]
            try:
                n = self._preadv(fd, [mv[got:]], off + got)
            except (InterruptedError, BlockingIOError):
                self._st["retries"] += 1
                continue
            except OSError as e:
                if e.errno == errno.EINVAL and self.fd_direct[fid]:
                    self._reopen_buffered(fid, e.strerror)
                    continue
                raise self._ioerror(disk, fid, off, length,
                                    f"read failed ({errno.errorcode.get(e.errno, e.errno)}: "
                                    f"{e.strerror})") from e
            if n == 0:
                if self._eof(fid, disk, off, length, got):
                    mv[got:] = bytes(length - got)
                    return
            got += n
            if got < length:
                self._st["short_reads"] += 1
                if self._at_eof(fid, off + got):
                    if self._eof(fid, disk, off, length, got):
                        mv[got:] = bytes(length - got)
                        return
                if self.fd_direct[fid]:
                    got &= ~(ALIGN - 1)   # O_DIRECT: resume at a 512-byte boundary

    def _worker(self, disk, k):
        while True:
            r = self._next_request(disk)
            if r is None:
                return
            gen, rid = r
            try:
                slot = self._take_slot(gen)
            except _Abort:
                self._cancel_unstarted(1)
                continue
            fid = int(self._fo[rid])
            err = None
            try:
                self._read(disk, fid, int(self._lo[rid]), int(self._le[rid]), slot)
            except GrapheneIOError as e:
                err = e
            except Exception as e:
                err = self._ioerror(disk, fid, int(self._lo[rid]), int(self._le[rid]),
                                    f"read failed ({e!r})")
            self._complete(gen, disk, rid, slot, err)
