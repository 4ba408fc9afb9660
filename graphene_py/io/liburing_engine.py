"""The `liburing` engine: io_uring through the PyPI `liburing` package, one Python thread per disk.

No compiler needed, so it is the portable reference for the native `uring` engine. Each disk's worker
owns one ring of `queue_depth` entries: it fills the ring with readv requests into free pool slots
(the package's read helper only takes bytearrays, so readv with an `Iovec` over a memoryview of the
pool is used), submits them in one call, and reaps completions.

The package's wait calls keep the GIL while they block, which would stall every other Python
thread; so the worker never calls them: it blocks in poll(2) on the ring's file descriptor (GIL
released; the fd is readable when completions are pending) and then drains completions with the
non-blocking peek. A short completion is resubmitted for the rest; -EINTR/-EAGAIN are resubmitted;
other errors and a read past the end of a short file become GrapheneIOError through `get`.

GRAPHENE_DISABLE_URING=1 makes construction fail as if io_uring_setup returned EPERM (tests use it to
exercise the `auto` fallback).
"""
from __future__ import annotations

import errno
import os
import select

from ..errors import GrapheneIOError
from .pread_engine import ALIGN, ThreadedEngine, _Abort

try:  # pragma: no cover - import guarded: the engine reports why it is unavailable
    import liburing as _L
except Exception as _e:  # noqa: BLE001
    _L = None
    _IMPORT_ERROR = _e
else:
    _IMPORT_ERROR = None


def uring_disabled_error():
    """The OSError an io_uring engine raises when GRAPHENE_DISABLE_URING is set, else None."""
    if os.environ.get("GRAPHENE_DISABLE_URING", "") not in ("", "0"):
        return OSError(errno.EPERM, "io_uring_setup: Operation not permitted "
                                    "(disabled by GRAPHENE_DISABLE_URING=1)")
    return None


def _queue_init(entries):
    ring = _L.Ring()
    try:
        r = _L.io_uring_queue_init(entries, ring)
    except OSError:
        raise
    except Exception as e:  # the package may raise its own types
        raise OSError(errno.EIO, f"io_uring_queue_init failed: {e}") from e
    if r not in (None, 0) and isinstance(r, int) and r < 0:
        raise OSError(-r, f"io_uring_setup: {os.strerror(-r)}")
    return ring


class LiburingEngine(ThreadedEngine):
    name = "liburing"

    def __init__(self, files, disk_of, pool, queue_depth=64, direct=True):
        err = uring_disabled_error()
        if err is not None:
            raise err
        if _L is None:
            raise OSError(errno.ENOSYS, f"the liburing package cannot be imported ({_IMPORT_ERROR})")
        super().__init__(files, disk_of, pool, queue_depth, direct)
        # One ring per disk, created here so io_uring_setup failures (EPERM under seccomp or
        # kernel.io_uring_disabled, ENOSYS on old kernels) surface at construction.
        self._rings = []
        try:
            for _ in range(self.ndisks):
                self._rings.append(_queue_init(self.queue_depth))
        except BaseException:
            self._exit_rings()
            self._close_fds()
            raise
        self.start()

    def _exit_rings(self):
        for ring in self._rings:
            try:
                _L.io_uring_queue_exit(ring)
            except Exception:
                pass
        self._rings = []

    def close(self) -> None:
        super().close()
        self._exit_rings()

    # ------------------------------------------------------------------ worker
    def _prep(self, ring, fid, pos, mv, token):
        sqe = _L.io_uring_get_sqe(ring)
        if sqe is None:  # cannot happen: inflight <= queue_depth == ring size
            raise RuntimeError("io_uring submission queue full")
        iov = _L.Iovec([mv])
        _L.io_uring_prep_readv(sqe, self.fds[fid], iov, pos)
        _L.io_uring_sqe_set_data64(sqe, token)
        return iov

    def _worker(self, disk, k):
        ring = self._rings[disk]
        cqe = _L.Cqe()
        poller = select.poll()
        poller.register(ring.ring_fd, select.POLLIN)
        sb = self.pool.slot_bytes
        inflight = {}   # token -> [gen, rid, slot, got, iov, mv]
        token = 0
        gen = None
        while True:
            # 1. wait for work when idle
            if not inflight:
                r = self._next_request(disk, block=True)
                if r is None:
                    return
                gen, rid = r
                first = [rid]
            else:
                first = []
            # 2. fill the ring
            nprep = 0
            abort = False
            todo = first
            while len(inflight) < self.queue_depth:
                if not todo:
                    r = self._next_request(disk, block=False)
                    if not r:
                        break
                    if r[0] != gen:
                        # a new batch can only start once this one finished; keep it anyway
                        gen = r[0]
                    todo = [r[1]]
                rid = todo.pop()
                try:
                    slot = self._take_slot(gen, block=not inflight and nprep == 0)
                except _Abort:
                    self._cancel_unstarted(1)
                    abort = True
                    break
                if slot is None:   # no free slot: put the request back, reap first
                    with self._lock:
                        self._pending[disk].appendleft(rid)
                    break
                length = int(self._le[rid])
                mv = self.pool.memoryview(slot * sb, slot * sb + length)
                token += 1
                fid = int(self._fo[rid])
                iov = self._prep(ring, fid, int(self._lo[rid]), mv, token)
                inflight[token] = [gen, rid, slot, 0, iov, mv]
                nprep += 1
            if abort and not inflight:
                continue
            if nprep:
                _L.io_uring_submit(ring)
            # 3. reap (block in poll with the GIL released)
            if inflight:
                poller.poll(200)
                self._reap(ring, cqe, disk, inflight)
                if self._closing:
                    self._drain(ring, cqe, disk, inflight)
                    return

    def _reap(self, ring, cqe, disk, inflight):
        resubmit = False
        while True:
            try:
                _L.io_uring_peek_cqe(ring, cqe)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            c = cqe[0]
            res = c.res
            tok = c.user_data
            _L.io_uring_cqe_seen(ring, c)
            ent = inflight.get(tok)
            if ent is None:
                continue
            gen, rid, slot, got, iov, mv = ent
            fid = int(self._fo[rid])
            off = int(self._lo[rid])
            length = int(self._le[rid])
            err = None
            done = False
            if res is None:
                res = 0
            if res < 0:
                e = -res
                if e in (errno.EINTR, errno.EAGAIN):
                    self._st["retries"] += 1
                elif e == errno.EINVAL and self.fd_direct[fid]:
                    self._reopen_buffered(fid, os.strerror(e))
                else:
                    err = self._ioerror(disk, fid, off, length,
                                        f"read failed ({errno.errorcode.get(e, e)}: {os.strerror(e)})")
            elif res == 0:
                try:
                    if self._eof(fid, disk, off, length, got):
                        mv[got:] = bytes(length - got)
                        done = True
                except GrapheneIOError as ge:
                    err = ge
            else:
                got += res
                if got >= length:
                    done = True
                else:
                    self._st["short_reads"] += 1
                    try:
                        if self._at_eof(fid, off + got) and self._eof(fid, disk, off, length, got):
                            mv[got:] = bytes(length - got)
                            done = True
                    except GrapheneIOError as ge:
                        err = ge
                    if self.fd_direct[fid]:
                        got &= ~(ALIGN - 1)
            if err is not None or done:
                del inflight[tok]
                del iov, mv
                self._complete(gen, disk, rid, slot, err)
                continue
            # resubmit the rest of the request under the same token
            ent[3] = got
            ent[4] = self._prep(ring, fid, off + got, mv[got:], tok)
            resubmit = True
        if resubmit:
            _L.io_uring_submit(ring)

    def _drain(self, ring, cqe, disk, inflight):
        """At close: wait for the kernel to finish with our buffers before the pool can go away."""
        while inflight:
            self._poll_until_ready(ring)
            while True:
                try:
                    _L.io_uring_peek_cqe(ring, cqe)
                except (BlockingIOError, InterruptedError):
                    break
                c = cqe[0]
                tok = c.user_data
                _L.io_uring_cqe_seen(ring, c)
                ent = inflight.pop(tok, None)
                if ent is not None:
                    with self._lock:
                        self._inflight -= 1
                        self._unfinished -= 1
                        self._free.append(ent[2])

    def _poll_until_ready(self, ring):
        p = select.poll()
        p.register(ring.ring_fd, select.POLLIN)
        p.poll(200)
