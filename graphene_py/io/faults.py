"""A fault-injecting engine for tests: proves the engine error rules without a broken disk.

`FaultEngine` is the `pread` engine with its one system call (`_preadv`) replaced by a wrapper that,
deterministically from a seed, can

* return short reads (`short_rate`: a read returns a random 512-multiple prefix — or any prefix when
  the file is buffered),
* fail with EINTR or EAGAIN before doing anything (`eintr_rate`, `eagain_rate`),
* fail with EIO (`eio_rate`, or `eio_at`: a set of (file_id, byte) positions whose reads fail),
* pretend a file is truncated (`truncate`: {file_id: size}): reads at or past `size` return 0 and
  `os.fstat` sizes are not consulted for it,
* add latency (`latency_s` per read, optional).

The engine must still return exactly the file's bytes for short reads / EINTR / EAGAIN and raise
GrapheneIOError naming disk, file, offset and length for EIO and truncation.
"""
from __future__ import annotations

import errno
import os
import random
import threading
import time

from .pread_engine import PreadEngine


class FaultEngine(PreadEngine):
    name = "faults"

    def __init__(self, files, disk_of, pool, queue_depth=64, direct=True, *, seed=0,
                 short_rate=0.0, eintr_rate=0.0, eagain_rate=0.0, eio_rate=0.0, eio_at=(),
                 truncate=None, latency_s=0.0, threads_per_disk=None):
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self.short_rate = short_rate
        self.eintr_rate = eintr_rate
        self.eagain_rate = eagain_rate
        self.eio_rate = eio_rate
        self.eio_at = set(eio_at)
        self.truncate = dict(truncate or {})
        self.latency_s = latency_s
        self.injected = dict(short=0, eintr=0, eagain=0, eio=0, truncated=0)
        self._fd_fid = {}
        super().__init__(files, disk_of, pool, queue_depth, direct, threads_per_disk=threads_per_disk)

    def _open(self, path):
        super()._open(path)
        self._fd_fid[self.fds[-1]] = len(self.fds) - 1

    def _rand(self):
        with self._rng_lock:
            return self._rng.random()

    def _preadv(self, fd, bufs, off):
        fid = self._fd_fid.get(fd, -1)
        if self.latency_s:
            time.sleep(self.latency_s)
        if self.eintr_rate and self._rand() < self.eintr_rate:
            self.injected["eintr"] += 1
            raise InterruptedError(errno.EINTR, "Interrupted system call (injected)")
        if self.eagain_rate and self._rand() < self.eagain_rate:
            self.injected["eagain"] += 1
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable (injected)")
        mv = bufs[0]
        want = len(mv)
        for (f, pos) in self.eio_at:
            if f == fid and off <= pos < off + want:
                self.injected["eio"] += 1
                raise OSError(errno.EIO, "Input/output error (injected)")
        if self.eio_rate and self._rand() < self.eio_rate:
            self.injected["eio"] += 1
            raise OSError(errno.EIO, "Input/output error (injected)")
        if fid in self.truncate:
            size = self.truncate[fid]
            if off >= size:
                self.injected["truncated"] += 1
                return 0
            if size - off < want:
                # read whole 512-byte blocks (O_DIRECT) and report only the bytes before `size`
                n = os.preadv(fd, [mv[:min(want, (size - off + 511) // 512 * 512)]], off)
                return min(n, size - off)
        if want > 1 and self.short_rate and self._rand() < self.short_rate:
            unit = 512 if self.fd_direct[fid] else 1
            if want > unit:
                with self._rng_lock:
                    want = self._rng.randrange(unit, want, unit) if unit > 1 else self._rng.randrange(1, want)
                self.injected["short"] += 1
        return os.preadv(fd, [mv[:want]], off)

    def _eof(self, fid, disk, off, length, got):
        if fid in self.truncate:
            size = self.truncate[fid]
            from .pread_engine import _padded
            if _padded(size) >= off + length and off + got >= size:
                return True
            raise self._ioerror(disk, fid, off, length,
                                f"read past the end of the file (file is {size} bytes, "
                                f"got {got} of {length} bytes)")
        return super()._eof(fid, disk, off, length, got)

    def _at_eof(self, fid, pos):
        if fid in self.truncate:
            return pos >= self.truncate[fid]
        return super()._at_eof(fid, pos)
