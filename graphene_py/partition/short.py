"""The short-list file of a direction: its lists of degree 1..D once more, grouped by degree.

k-core membership's first round reads the lists of every vertex of degree below K. On GAPBS's
kron22 those are 1.8 M lists of 1-16 IDs (31 MB) spread over the whole 513 MB file: the 512-byte
blocks that hold them come to 175 MB, and the cheapest plan for this disk reads 425-470 MB (the
C++ Graphene reads 352 MB). Here the partitioner writes every list of degree 1..D a second time,
grouped by degree, so that the lists of degree below K are one contiguous read from the start of
this file (iterator/shortfile.py serves them from RAM).

Layout (`<direction>.short` in a version folder, zero-padded to 512 bytes): groups d = 1..D one
after the other; group d holds counts[d-1] records of d + 1 IDs (the dataset's ID width, little
endian): the vertex, then its whole list in that direction (its partitions' lists in column
order), records in vertex order. Record i of group d starts at entry sum_{e<d} counts[e-1]*(e+1)
+ i * (d + 1). D is the largest degree (at most MAX_DEGREE) for which groups 1..D hold at most
1/SHARE of the direction's entries (or SMALL_ENTRIES). The manifest's `short` section, per
direction:

    {"file", "disk", "id_width", "counts": [c_1, ..., c_D], "crc32c": [per group, hex],
     "bytes", "checksum" (CRC32 of the whole file, as the partition files')}

A dataset without the section (older ones, or no list short enough) reads every list from the
partition files, as before.
"""
from __future__ import annotations

import os

import numpy as np

from ..jit import njit

#: the largest degree a group holds
MAX_DEGREE = 32
#: the groups hold at most 1/SHARE of a direction's entries (kron22: D = 32, 13 M of 128 M IDs),
#: or SMALL_ENTRIES where that is more (a small graph's file costs next to nothing)
SHARE = 8
SMALL_ENTRIES = 1 << 18
#: bytes copied at a time from the spill files into the file
CHUNK = 8 << 20


@njit(cache=True)
def _group_counts(lptr, D, hist):
    """hist[d] += the lists of degree d (1..D) of one block (lptr: its local indptr)."""
    for i in range(lptr.shape[0] - 1):
        d = lptr[i + 1] - lptr[i]
        if 1 <= d <= D:
            hist[d] += 1


@njit(cache=True)
def _group_fill(v0, lptr, idx, D, start, out):
    """The block's records, group after group: group d's from out[start[d]:] (start: entries)."""
    pos = start.copy()
    for i in range(lptr.shape[0] - 1):
        a = lptr[i]
        d = lptr[i + 1] - a
        if 1 <= d <= D:
            p = pos[d]
            out[p] = v0 + i
            for j in range(d):
                out[p + 1 + j] = idx[a + j]
            pos[d] = p + d + 1


class ShortWriter:
    """Collects one direction's short lists as its partitions are written (block by block, in
    vertex order) into one spill file per degree, then writes the file (finish)."""

    def __init__(self, writer, direction: str, dtype):
        self.writer = writer
        self.direction = direction
        self.dtype = np.dtype(dtype)
        self.counts = np.zeros(MAX_DEGREE + 1, dtype=np.int64)
        self.spill = writer.spill_dir(0)
        self.files = {}

    def _path(self, d):
        return os.path.join(self.spill, f"short-{self.direction}-{d}.rec")

    def add(self, v0: int, lptr, idx) -> None:
        """The block of vertices v0.. with local indptr lptr over idx (whole lists)."""
        hist = np.zeros(MAX_DEGREE + 1, dtype=np.int64)
        _group_counts(lptr, MAX_DEGREE, hist)
        if not hist.any():
            return
        size = hist * (np.arange(MAX_DEGREE + 1) + 1)
        start = np.zeros(MAX_DEGREE + 2, dtype=np.int64)
        np.cumsum(size, out=start[1:])
        out = np.empty(int(start[-1]), dtype=self.dtype)
        _group_fill(np.int64(v0), lptr, idx, np.int64(MAX_DEGREE), start[:-1], out)
        for d in np.flatnonzero(hist):
            f = self.files.get(int(d))
            if f is None:
                f = self.files[int(d)] = open(self._path(int(d)), "wb")
            f.write(out[start[d]:start[d + 1]].tobytes())
        self.counts += hist

    def finish(self, entries: int, loads: list):
        """Write the file (on the least-loaded disk) and return its manifest entry; None when no
        group fits 1/SHARE of the direction's `entries`."""
        from .. import _uring
        for f in self.files.values():
            f.close()
        per = self.counts[1:] * (np.arange(1, MAX_DEGREE + 1) + 1)
        limit = max(entries // SHARE, SMALL_ENTRIES)
        D = int(np.count_nonzero(np.cumsum(per) <= limit))      # (a prefix: cumsum)
        if D == 0 or not self.counts[1:D + 1].any():
            self._drop()
            return None
        disk = int(np.argmin(loads))
        pf = self.writer.open(disk, f"{self.direction}.short")
        crcs = []
        for d in range(1, D + 1):
            crc = 0
            if self.counts[d]:
                with open(self._path(d), "rb") as f:
                    while True:
                        b = f.read(CHUNK)
                        if not b:
                            break
                        crc = _uring.crc32c(b, crc)
                        pf.write(np.frombuffer(b, dtype=np.uint8))
            crcs.append(f"{crc:08x}")
        checksum = pf.close()
        loads[disk] += pf.size
        self._drop()
        return {"file": os.path.basename(pf.path), "disk": disk,
                "id_width": int(self.dtype.itemsize),
                "counts": [int(c) for c in self.counts[1:D + 1]], "crc32c": crcs,
                "bytes": int(pf.size), "checksum": checksum}

    def _drop(self):
        for d in list(self.files):
            try:
                os.unlink(self._path(d))
            except OSError:
                pass
        self.files = {}

    def abort(self):
        for f in self.files.values():
            f.close()
        self._drop()


def group_bytes(entry: dict, upto: int) -> int:
    """Bytes of the groups 1..upto of a short-list file entry (from its start)."""
    w = int(entry["id_width"])
    return sum(int(c) * (d + 1) * w for d, c in enumerate(entry["counts"][:upto], 1))
