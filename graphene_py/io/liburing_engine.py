"""The `liburing` engine: io_uring through the PyPI `liburing` package, one Python thread per disk.

No compiler needed for our code, so it is the portable reference for the native `uring` engine. Each
disk's worker owns one ring of `queue_depth` entries: it fills the ring with readv requests into free
pool slots (an iovec over a memoryview of the pool), submits them in one call, and reaps completions.

The package's wait calls keep the GIL while they block, which would stall every other Python
thread; so the worker never calls them: it blocks in poll(2) on the ring's file descriptor (GIL
released; the fd is readable when completions are pending) and then drains completions with the
non-blocking peek. A short completion is resubmitted for the rest; -EINTR/-EAGAIN are resubmitted;
other errors and a read past the end of a short file become GrapheneIOError through `get`.

Two package APIs are supported through `_Api` (the only place that names liburing's calls):
  * 2024.5.3 (the pinned dependency; an sdist compiled on the user's machine): `io_uring()`,
    `io_uring_cqe()`, `iovec(...)`; `io_uring_peek_cqe` returns -EAGAIN when nothing is ready and
    `io_uring_get_sqe` returns an sqe that is falsy when the ring is full;
  * 2025+ wheels (Zig builds): `Ring()`, `Cqe()`, `Iovec(...)`; peek raises BlockingIOError.
The 2026.3.30 wheel contains AVX-512 instructions, so on older CPUs `Ring()` kills the process with
SIGILL. That is why liburing is never imported in an engine's process before graphene_py/io/probe.py
has exercised this module in a child process and found it working (verdict cached on disk).

GRAPHENE_DISABLE_URING=1 makes construction fail as if io_uring_setup returned EPERM (tests use it to
exercise the `auto` fallback).
"""
from __future__ import annotations

import errno
import os
import select

from ..errors import GrapheneIOError
from .pread_engine import ALIGN, ThreadedEngine, _Abort


def uring_disabled_error():
    """The OSError an io_uring engine raises when GRAPHENE_DISABLE_URING is set, else None."""
    if os.environ.get("GRAPHENE_DISABLE_URING", "") not in ("", "0"):
        return OSError(errno.EPERM, "io_uring_setup: Operation not permitted "
                                    "(disabled by GRAPHENE_DISABLE_URING=1)")
    return None


class _Api:
    """The liburing calls the engine makes, over both package APIs (see the module docstring)."""

    def __init__(self, L):
        self.L = L
        self.version = str(getattr(L, "__version__", "?"))
        if hasattr(L, "Ring"):              # 2025+ wheels
            self.style = "Ring"
            self._ring, self._cqe, self._iovec = L.Ring, L.Cqe, L.Iovec
        elif hasattr(L, "io_uring"):        # 2024.x and earlier (Cython build)
            self.style = "io_uring"
            self._ring, self._cqe, self._iovec = L.io_uring, L.io_uring_cqe, L.iovec
        else:
            raise ImportError(f"liburing {self.version}: neither Ring nor io_uring found "
                              f"(unsupported package API)")
        for fn in ("io_uring_queue_init", "io_uring_queue_exit", "io_uring_get_sqe",
                   "io_uring_prep_readv", "io_uring_sqe_set_data64", "io_uring_submit",
                   "io_uring_peek_cqe", "io_uring_cqe_seen"):
            if not hasattr(L, fn):
                raise ImportError(f"liburing {self.version}: {fn} missing (unsupported package API)")
        self._queue_exit = L.io_uring_queue_exit
        self._get_sqe = L.io_uring_get_sqe
        self._prep_readv = L.io_uring_prep_readv
        self._set_data64 = L.io_uring_sqe_set_data64
        self._submit = L.io_uring_submit
        self._peek = L.io_uring_peek_cqe
        self._seen = L.io_uring_cqe_seen

    def queue_init(self, entries):
        """A ring of `entries` entries; OSError(errno) when io_uring_setup fails."""
        ring = self._ring()
        try:
            r = self.L.io_uring_queue_init(entries, ring)
        except OSError as e:
            raise OSError(e.errno, f"io_uring_setup: {os.strerror(e.errno) if e.errno else e}") from e
        except Exception as e:  # the package may raise its own types  # noqa: BLE001
            raise OSError(errno.EIO, f"io_uring_queue_init failed: {e}") from e
        if isinstance(r, int) and r < 0:
            raise OSError(-r, f"io_uring_setup: {os.strerror(-r)}")
        return ring

    def queue_exit(self, ring):
        self._queue_exit(ring)

    @staticmethod
    def ring_fd(ring):
        return ring.ring_fd

    def new_cqe(self):
        return self._cqe()

    def prep_readv(self, ring, fd, mv, pos, token):
        """Queue one readv of len(mv) bytes at `pos` into `mv`; returns the iovec (keep it alive
        until the completion is reaped)."""
        sqe = self._get_sqe(ring)
        if not sqe:   # None (2025+) or an sqe over NULL (2024): cannot happen, inflight <= ring size
            raise RuntimeError("io_uring submission queue full")
        iov = self._iovec([mv])
        self._prep_readv(sqe, fd, iov, pos)
        self._set_data64(sqe, token)
        return iov

    def submit(self, ring):
        r = self._submit(ring)
        if isinstance(r, int) and r < 0:
            raise OSError(-r, f"io_uring_enter: {os.strerror(-r)}")
        return r

    def peek(self, ring, cqe):
        """(res, user_data) of the next completion after marking it seen, or None if none ready."""
        while True:
            try:
                r = self._peek(ring, cqe)
            except BlockingIOError:
                return None
            except InterruptedError:
                continue
            if isinstance(r, int) and r < 0:
                if -r == errno.EINTR:
                    continue
                if -r == errno.EAGAIN:
                    return None
                raise OSError(-r, f"io_uring_peek_cqe: {os.strerror(-r)}")
            c = cqe[0]
            res, tok = c.res, c.user_data
            self._seen(ring, c)
            return (0 if res is None else int(res)), int(tok)


_api = None


def load_api():
    """Import liburing and wrap it (cached). Call only after the probe said the package works."""
    global _api
    if _api is None:
        try:
            import liburing as L
        except Exception as e:  # noqa: BLE001
            raise ImportError(f"the liburing package cannot be imported ({type(e).__name__}: {e})") from e
        _api = _Api(L)
    return _api


class LiburingEngine(ThreadedEngine):
    name = "liburing"

    def __init__(self, files, disk_of, pool, queue_depth=64, direct=True, *, _probe=True):
        err = uring_disabled_error()
        if err is not None:
            raise err
        if _probe:
            # Never import liburing here before a child process showed that it works on this
            # machine (a bad build dies with SIGILL, taking the whole process down).
            from .probe import require_liburing
            require_liburing()
        self._api = load_api()
        super().__init__(files, disk_of, pool, queue_depth, direct)
        # One ring per disk, created here so io_uring_setup failures (EPERM under seccomp or
        # kernel.io_uring_disabled, ENOSYS on old kernels) surface at construction.
        self._rings = []
        try:
            for _ in range(self.ndisks):
                self._rings.append(self._api.queue_init(self.queue_depth))
        except BaseException:
            self._exit_rings()
            self._close_fds()
            raise
        self.start()

    def _exit_rings(self):
        for ring in self._rings:
            try:
                self._api.queue_exit(ring)
            except Exception:  # noqa: BLE001
                pass
        self._rings = []

    def close(self) -> None:
        super().close()
        self._exit_rings()

    # ------------------------------------------------------------------ worker
    def _worker(self, disk, k):
        api = self._api
        ring = self._rings[disk]
        cqe = api.new_cqe()
        poller = select.poll()
        poller.register(api.ring_fd(ring), select.POLLIN)
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
                iov = api.prep_readv(ring, self.fds[fid], mv, int(self._lo[rid]), token)
                inflight[token] = [gen, rid, slot, 0, iov, mv]
                nprep += 1
            if abort and not inflight:
                continue
            if nprep:
                api.submit(ring)
            # 3. reap (block in poll with the GIL released)
            if inflight:
                poller.poll(200)
                self._reap(ring, cqe, disk, inflight)
                if self._closing:
                    self._drain(ring, cqe, disk, inflight)
                    return

    def _reap(self, ring, cqe, disk, inflight):
        api = self._api
        resubmit = False
        while True:
            got_cqe = api.peek(ring, cqe)
            if got_cqe is None:
                break
            res, tok = got_cqe
            ent = inflight.get(tok)
            if ent is None:
                continue
            gen, rid, slot, got, iov, mv = ent
            fid = int(self._fo[rid])
            off = int(self._lo[rid])
            length = int(self._le[rid])
            err = None
            done = False
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
            ent[4] = api.prep_readv(ring, self.fds[fid], mv[got:], off + got, tok)
            resubmit = True
        if resubmit:
            api.submit(ring)

    def _drain(self, ring, cqe, disk, inflight):
        """At close: wait for the kernel to finish with our buffers before the pool can go away."""
        api = self._api
        while inflight:
            self._poll_until_ready(ring)
            while True:
                got_cqe = api.peek(ring, cqe)
                if got_cqe is None:
                    break
                ent = inflight.pop(got_cqe[1], None)
                if ent is not None:
                    with self._lock:
                        self._inflight -= 1
                        self._unfinished -= 1
                        self._free.append(ent[2])

    def _poll_until_ready(self, ring):
        p = select.poll()
        p.register(self._api.ring_fd(ring), select.POLLIN)
        p.poll(200)
