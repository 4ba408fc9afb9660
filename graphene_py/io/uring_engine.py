"""The `uring` engine: the native io_uring reader of csrc/uring.c behind the Engine contract.

All IO runs in C: one io_uring ring and one pthread per disk, a deep queue (queue_depth reads in flight
per disk), batched submission (one io_uring_enter submits every prepared read and waits for a
completion), the buffer pool registered as fixed buffers (READ_FIXED) and the files registered
(IOSQE_FIXED_FILE) when the kernel accepts them. `get` blocks in C with the GIL released, so numba
compute threads and IO overlap. This module only opens the files (O_DIRECT with a buffered fallback),
checks arguments and turns the C error record into GrapheneIOError.
"""
from __future__ import annotations

import errno
import mmap
import os

import numpy as np

from ..errors import GrapheneIOError
from .contract import Engine

_ALIGN = 512
_EMPTY = np.zeros((0, 2), dtype=np.int64)


def _open_direct(path: str) -> int:
    """Open read-only with O_DIRECT (a seam for tests that simulate a filesystem refusing it)."""
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECT)


def _probe_direct_read(fd: int) -> None:
    """One aligned 512-byte O_DIRECT read: some filesystems accept the flag at open and refuse reads."""
    if os.fstat(fd).st_size < _ALIGN:
        return
    buf = mmap.mmap(-1, 4096)
    try:
        os.preadv(fd, [memoryview(buf)[:_ALIGN]], 0)
    finally:
        buf.close()


def uring_available() -> tuple[bool, str]:
    """(True, "") when io_uring_setup works here, else (False, reason)."""
    try:
        from .. import _uring
    except ImportError as e:  # extension not built
        return False, f"graphene_py._uring not built ({e})"
    if not hasattr(_uring, "probe"):
        return False, "graphene_py._uring is a stub build"
    err = _uring.probe()
    if err:
        return False, f"io_uring_setup failed: {os.strerror(err)} (errno {err})"
    return True, ""


class UringEngine(Engine):
    """Engine `uring` (see graphene_py/io/contract.py for the contract).

    Extra keyword arguments (for benchmarks; defaults are the measured best): fixed_buffers,
    fixed_files, defer_taskrun (each used only if the kernel accepts it; stats() says which are on),
    complete_batch (completions a disk's worker waits for per io_uring_enter while it has more
    work queued; 0 = queue_depth // 8).
    """

    name = "uring"

    def __init__(self, files, disk_of, pool, queue_depth=64, direct=True, *, fixed_buffers=True,
                 fixed_files=True, defer_taskrun=True, complete_batch=0):
        super().__init__(files, disk_of, pool, queue_depth, direct)
        from .. import _uring  # ImportError propagates: `auto` falls back
        if not hasattr(_uring, "Reader"):
            raise OSError(errno.ENOSYS, "graphene_py._uring is a stub build; rebuild with pip install -e .")
        self._uring = _uring
        if len(self.files) != len(self.disk_of):
            raise ValueError("files and disk_of differ in length")
        if not self.files:
            raise ValueError("no files")
        if self.queue_depth < 1:
            raise ValueError("queue_depth must be >= 1")
        view = pool.view
        self.slot_bytes = int(pool.slot_bytes)
        self.nslots = int(pool.nslots)
        if view.ctypes.data % 4096:
            raise ValueError("pool buffer is not page-aligned (O_DIRECT needs aligned buffers)")
        self.fds = []
        self.fd_direct = []
        self._reader = None
        self._closed = False
        self._batches = 0
        try:
            for path in self.files:
                self._open(path)
            self.direct = bool(direct) and all(self.fd_direct)
            self._reader = _uring.Reader(self.fds, [int(d) for d in self.disk_of], view,
                                         self.slot_bytes, self.nslots, self.queue_depth,
                                         fixed_buffers, fixed_files, defer_taskrun,
                                         complete_batch)
        except BaseException:
            self._close_fds()
            raise

    # ---------------------------------------------------------------- files
    def _note(self, msg):
        if msg not in self.notes:
            self.notes.append(msg)

    def _open(self, path):
        if self.direct and hasattr(os, "O_DIRECT"):
            fd = None
            try:
                fd = _open_direct(path)
                _probe_direct_read(fd)
                self.fds.append(fd)
                self.fd_direct.append(True)
                return
            except OSError as e:
                if fd is not None:
                    os.close(fd)
                if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise GrapheneIOError(f"cannot open {path}: {e.strerror}") from e
                self._note(f"O_DIRECT refused by the filesystem of {path} ({e.strerror}); "
                           f"using buffered reads (page cache) for it")
        try:
            self.fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError as e:
            raise GrapheneIOError(f"cannot open {path}: {e.strerror}") from e
        self.fd_direct.append(False)

    def _close_fds(self):
        fds, self.fds = self.fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    # ---------------------------------------------------------------- contract
    def submit(self, file_ids, offsets, lengths) -> None:
        self._check_open()
        f = np.ascontiguousarray(file_ids, dtype=np.int32)
        o = np.ascontiguousarray(offsets, dtype=np.int64)
        n = np.ascontiguousarray(lengths, dtype=np.int64)
        self._reader.submit(f, o, n)
        self._batches += 1

    def get(self, disk: int, max_n: int) -> np.ndarray:
        self._check_open()
        max_n = int(max_n)
        if max_n < 1:
            raise ValueError("max_n must be >= 1")
        out = np.empty((max_n, 2), dtype=np.int64)
        try:
            n = self._reader.get(int(disk), max_n, out)
        except self._uring.ReadError as e:
            d, fid, off, length, err, _req = e.args
            what = ("read past the end of the file (file shorter than expected)" if err == 0
                    else f"read failed: {os.strerror(err)} (errno {err})")
            size = ""
            try:
                size = f", file is {os.fstat(self.fds[fid]).st_size} bytes"
            except (OSError, IndexError):
                pass
            raise GrapheneIOError(f"{what}: disk {d}, file {self.files[fid]}, offset {off}, "
                                  f"length {length}{size}") from None
        return out[:n] if n else _EMPTY

    def release(self, slots) -> None:
        if self._closed:
            return
        self._reader.release(np.ascontiguousarray(slots, dtype=np.int64).reshape(-1))

    def stats(self) -> dict:
        if self._reader is None:
            return {}
        st = self._reader.stats()
        per = st["per_disk"]
        nd = self.ndisks
        st["disk_requests"] = [per[d]["requests"] if d < len(per) else 0 for d in range(nd)]
        st["disk_bytes"] = [per[d]["bytes"] if d < len(per) else 0 for d in range(nd)]
        st["stolen"] = [per[d]["stolen"] if d < len(per) else 0 for d in range(nd)]
        st["batches"] = self._batches
        st["engine"] = self.name
        st["direct"] = self.direct
        st["notes"] = list(self.notes)
        return st

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.close()  # joins the workers: nothing is in flight after this
        self._close_fds()

    def _check_open(self):
        if self._closed:
            raise RuntimeError("engine is closed")

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
