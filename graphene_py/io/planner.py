"""The request planner: block bitmaps -> merged IO extents (Graphene §4.4.2-3).

Merge rule (greedy, in file order), for the set blocks b_1 < b_2 < ... of one bitmap:

* an extent starts at a set block and ends at a set block (never begins or ends with unneeded blocks);
* the next set block b joins the current extent [cs, last] when the gap ``b - last - 1`` is at most
  ``max_gap_blocks`` *and* the extent would still be at most ``max_io_bytes`` long; the gap blocks are
  read too (one larger IO beats two small ones on an SSD);
* otherwise the current extent is emitted and a new one starts at b.

So a run of set blocks longer than the cap is split exactly at the cap (pieces of
``max_io_bytes // block_size`` blocks), and no extent exceeds the cap. Extents are clipped at the
file's padded end (the file size rounded up to `config.FILE_ALIGN`), which matters when block_size is
larger than the padding (4096-byte blocks over 512-padded files). Bits past the file's last block are
ignored.

The scan runs a word at a time: zero words are skipped, set bits are found with count-trailing-zeros.
`plan(..., clear=True)` zeroes the bitmap's words as it reads them, so a superstep can reuse its bitmaps
without a separate pass.

`plan_files` plans many files (one bitmap each) and returns an `ExtentPlan` grouped by disk.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .. import config
from .bitmap import _check_block_size, count_blocks, ctz64, popcount64, shift_of

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True)
def _plan(bits, nblocks, shift, max_gap, cap_blocks, end_byte, clear):
    nwords = min(bits.shape[0], (nblocks + 63) >> 6)
    # Upper bound on the number of extents: the number of set bits (each extent holds >= 1).
    total = np.uint64(0)
    for w in range(nwords):
        x = bits[w]
        if x:
            total += popcount64(x)
    offs = np.empty(total, dtype=np.int64)
    lens = np.empty(total, dtype=np.int64)
    n = 0
    cs = np.int64(-1)      # current extent: first block
    last = np.int64(-1)    # current extent: last set block
    for w in range(nwords):
        x = bits[w]
        if x == 0:
            continue
        if clear:
            bits[w] = np.uint64(0)
        base = np.int64(w) << 6
        while x:
            tz = np.int64(ctz64(x))
            b = base + tz
            if b >= nblocks:
                break
            # Run of consecutive set bits starting at bit tz of this word.
            y = ~(x >> np.uint64(tz))
            if y == 0:
                run = 64 - tz
            else:
                run = np.int64(ctz64(y))
                if run > 64 - tz:
                    run = 64 - tz
            e = b + run          # run covers blocks [b, e)
            if e > nblocks:
                e = nblocks
            # clear the run's bits from x
            if tz + run >= 64:
                x = np.uint64(0)
            else:
                x &= _ALL << np.uint64(tz + run)
            # merge the run [b, e) into the current extent, splitting at the cap
            while b < e:
                if cs >= 0 and b - last - 1 <= max_gap and b - cs < cap_blocks:
                    # extend the current extent as far as the cap allows
                    stop = min(e, cs + cap_blocks)
                    last = stop - 1
                    b = stop
                else:
                    if cs >= 0:
                        offs[n] = cs << shift
                        lens[n] = (last + 1 - cs) << shift
                        n += 1
                    cs = b
                    stop = min(e, cs + cap_blocks)
                    last = stop - 1
                    b = stop
    if cs >= 0:
        offs[n] = cs << shift
        lens[n] = (last + 1 - cs) << shift
        n += 1
    # clip the last extents at the file's padded end
    for i in range(n - 1, -1, -1):
        if offs[i] + lens[i] <= end_byte:
            break
        lens[i] = end_byte - offs[i]
    if clear:
        for w in range(nwords, bits.shape[0]):
            bits[w] = np.uint64(0)
    return offs[:n].copy(), lens[:n].copy()


def padded_end(nbytes_file: int) -> int:
    a = config.FILE_ALIGN
    return (int(nbytes_file) + a - 1) // a * a


def plan(bits, nbytes_file: int, block_size: int = config.BLOCK_SIZE,
         max_gap_blocks: int = config.MAX_GAP_BLOCKS, max_io_bytes: int = config.MAX_IO_BYTES,
         clear: bool = False):
    """Turn one file's bitmap into extents: (offsets int64[], lengths int64[]) in bytes, sorted.

    Offsets are multiples of block_size; lengths are multiples of block_size except where clipped at
    the file's padded end (still multiples of FILE_ALIGN). max_io_bytes is rounded down to whole
    blocks (at least one block)."""
    if bits.dtype != np.uint64 or bits.ndim != 1:
        raise TypeError("bitmap must be a 1-D uint64 array")
    bs = _check_block_size(block_size)
    if max_gap_blocks < 0:
        raise ValueError("max_gap_blocks must be >= 0")
    cap = max(1, int(max_io_bytes) // bs)
    end = padded_end(nbytes_file)
    nblocks = (end + bs - 1) // bs
    return _plan(bits, np.int64(nblocks), np.int64(shift_of(bs)), np.int64(max_gap_blocks),
                 np.int64(cap), np.int64(end), bool(clear))


@dataclass
class ExtentPlan:
    """Extents of many files, grouped by disk (disk, then file id, then offset ascending).

    `disk_ptr[d]:disk_ptr[d+1]` indexes disk d's extents. `useful_bytes` is filled by callers that
    know it (the marking step); `read_bytes` = lengths.sum()."""
    file_ids: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray
    disk_ptr: np.ndarray
    blocks: int = 0
    read_bytes: int = 0
    plan_seconds: float = 0.0
    useful_bytes: int = 0
    extra: dict = field(default_factory=dict)

    def __len__(self):
        return int(self.offsets.shape[0])

    @property
    def io_utility(self) -> float:
        return self.useful_bytes / self.read_bytes if self.read_bytes else 1.0


def plan_files(bitmaps, file_bytes, disk_of, block_size: int = config.BLOCK_SIZE,
               max_gap_blocks: int = config.MAX_GAP_BLOCKS,
               max_io_bytes: int = config.MAX_IO_BYTES, clear: bool = False) -> ExtentPlan:
    """Plan every file (bitmaps[i] over a file of file_bytes[i] bytes on disk disk_of[i]); a bitmap
    may be None (nothing to read). Returns an ExtentPlan grouped by disk."""
    t0 = time.perf_counter()
    disk_of = np.asarray(disk_of, dtype=np.int64)
    ndisks = int(disk_of.max()) + 1 if len(disk_of) else 1
    order = np.lexsort((np.arange(len(disk_of)), disk_of)) if len(disk_of) else []
    fids, offs, lens = [], [], []
    counts = np.zeros(ndisks, dtype=np.int64)
    blocks = 0
    for f in order:
        bits = bitmaps[f]
        if bits is None:
            continue
        blocks += int(count_blocks(bits))
        o, l = plan(bits, file_bytes[f], block_size, max_gap_blocks, max_io_bytes, clear=clear)
        if len(o):
            fids.append(np.full(len(o), f, dtype=np.int32))
            offs.append(o)
            lens.append(l)
            counts[disk_of[f]] += len(o)
    if offs:
        fid = np.concatenate(fids)
        off = np.concatenate(offs)
        ln = np.concatenate(lens)
    else:
        fid = np.zeros(0, np.int32)
        off = np.zeros(0, np.int64)
        ln = np.zeros(0, np.int64)
    ptr = np.zeros(ndisks + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ExtentPlan(fid, off, ln, ptr, blocks=int(blocks), read_bytes=int(ln.sum()),
                      plan_seconds=time.perf_counter() - t0)
