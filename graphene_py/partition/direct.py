"""Files the partitioner writes once and reads back (or leaves for the engines) without the page
cache: O_DIRECT in whole 4 KiB pages from aligned buffers.

On the 2-vCPU KVM machine a page-cache write cost ~2 s of kernel time per GB (`dd bs=1M`: 492
MB/s buffered against 1.7 GB/s with `oflag=direct`) and a cold buffered read ~1 s per GB (0.12
direct): the guest hands freed memory back to the host, so every page-cache page is faulted in
and zeroed again. A partition of Kronecker scale 24 writes ~30 GB. Where a folder refuses
O_DIRECT (EINVAL: tmpfs on older kernels, some FUSE file systems) the same calls go through the
page cache.
"""
from __future__ import annotations

import errno
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .scratch import scratch_array

#: O_DIRECT transfers are whole pages at page-aligned addresses and file offsets
ALIGN = 4096
#: an appender's staging buffers: the first of FIRST_STAGE_BYTES, each next one twice as large up
#: to STAGE_BYTES (a grid's writer has ~3 files per column open at once: 256 columns of 2 x 4 MiB
#: each would be GBs; a small file never grows its buffers)
FIRST_STAGE_BYTES = 16 << 10
STAGE_BYTES = 4 << 20


def aligned_array(scratch, name, nbytes):
    """uint8[nbytes] at an ALIGN-aligned address, kept in dict `scratch` (scratch_array; None:
    a fresh one)."""
    raw = scratch_array(scratch, name, int(nbytes) + ALIGN, np.uint8)
    off = (-raw.ctypes.data) % ALIGN
    return raw[off:off + int(nbytes)]


def open_direct(path, flags, mode=0o644):
    """(fd, True) opened with O_DIRECT, or (fd, False) where the file system refuses it."""
    if hasattr(os, "O_DIRECT"):
        try:
            return os.open(path, flags | os.O_DIRECT, mode), True
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
    return os.open(path, flags, mode), False


def pwrite_all(fd, mv, offset):
    got = 0
    while got < len(mv):
        k = os.pwrite(fd, mv[got:], offset + got)
        if k <= 0:
            raise OSError(errno.EIO, f"short write at offset {offset + got}")
        got += k


def pread_all(fd, mv, offset):
    got = 0
    while got < len(mv):
        k = os.preadv(fd, [mv[got:]], offset + got)
        if k <= 0:
            raise OSError(errno.EIO, f"{len(mv) - got} bytes missing at offset {offset + got}")
        got += k


_POOL = {}
_POOL_LOCK = threading.Lock()


def io_pool():
    """The threads that write the appenders' full staging buffers (one process-wide pool)."""
    with _POOL_LOCK:
        if "pool" not in _POOL:
            _POOL["pool"] = ThreadPoolExecutor(2, thread_name_prefix="graphene-write")
        return _POOL["pool"]


class DirectAppender:
    """A file written front to back: bytes gathered in an aligned staging buffer and written in
    whole pages with O_DIRECT; the last partial page through the page cache at close. A full
    buffer is written by a background thread (io_pool) while the next one fills: the caller
    computes while the disk writes. An error of that write comes out of the next write() or
    close(). size: the bytes written so far."""

    def __init__(self, path, stage_bytes=STAGE_BYTES):
        self.path = path
        self.fd, self.direct = open_direct(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        self.max_stage = max(ALIGN, stage_bytes // ALIGN * ALIGN)
        self.bufs = [aligned_array(None, None, min(FIRST_STAGE_BYTES, self.max_stage)), None]
        self.buf = self.bufs[0]
        self.fill = 0
        self.at = 0             # file offset of buf[0]
        self.pending = None     # the background write of the other buffer

    @property
    def size(self):
        return self.at + self.fill

    def write(self, mv):
        mv = memoryview(mv).cast("B")
        i = 0
        while i < len(mv):
            k = min(len(mv) - i, len(self.buf) - self.fill)
            self.buf[self.fill:self.fill + k] = np.frombuffer(mv[i:i + k], np.uint8)
            self.fill += k
            i += k
            if self.fill == len(self.buf):
                self._flush(self.fill)

    def _wait(self):
        if self.pending is not None:
            p, self.pending = self.pending, None
            p.result()

    def _flush(self, nbytes, background=True):
        self._wait()                # the other buffer is free again
        old = self.buf
        if background:
            self.pending = io_pool().submit(pwrite_all, self.fd, memoryview(old[:nbytes]),
                                            self.at)
            want = min(2 * len(old), self.max_stage)
            if self.bufs[1] is None or len(self.bufs[1]) < want:
                self.bufs[1] = aligned_array(None, None, want)
            self.bufs.reverse()
            self.buf = self.bufs[0]
        else:
            pwrite_all(self.fd, memoryview(old[:nbytes]), self.at)
        self.at += nbytes
        rest = self.fill - nbytes
        if rest:
            self.buf[:rest] = old[nbytes:self.fill]
        self.fill = rest

    def close(self, fsync=False):
        """The rest written (its whole pages direct, the tail buffered), fsync'd if asked."""
        try:
            whole = self.fill // ALIGN * ALIGN
            if whole:
                self._flush(whole, background=False)
            self._wait()
            if self.fill:
                fd = os.open(self.path, os.O_WRONLY) if self.direct else self.fd
                try:
                    pwrite_all(fd, memoryview(self.buf[:self.fill]), self.at)
                    if fsync and fd != self.fd:
                        os.fsync(fd)
                finally:
                    if fd != self.fd:
                        os.close(fd)
                self.at += self.fill
                self.fill = 0
            if fsync:
                os.fsync(self.fd)
        finally:
            self.abort()

    def abort(self):
        try:
            self._wait()            # its buffer and fd stay valid until it is done
        except OSError:
            pass
        finally:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            self.buf = None
            self.bufs = [None, None]


def read_range(fd, direct, scratch, name, offset, nbytes):
    """uint8 view of file bytes [offset, offset + nbytes): with O_DIRECT the enclosing whole
    pages are read into an aligned buffer kept in `scratch` under `name`."""
    if not direct:
        buf = scratch_array(scratch, name, nbytes, np.uint8)
        pread_all(fd, memoryview(buf), offset)
        return buf
    lo = offset // ALIGN * ALIGN
    hi = -(-(offset + nbytes) // ALIGN) * ALIGN
    buf = aligned_array(scratch, name, hi - lo)
    got = 0
    mv = memoryview(buf)
    while got < hi - lo:        # the file's last page may be short: a read stops at its end
        k = os.preadv(fd, [mv[got:]], lo + got)
        if k <= 0:
            break
        got += k
    if got < offset + nbytes - lo:
        raise OSError(errno.EIO, f"{offset + nbytes - lo - got} bytes missing at offset "
                                 f"{lo + got}")
    return buf[offset - lo:offset - lo + nbytes]
