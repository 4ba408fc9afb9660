"""Block bitmaps: one bit per block of an adjacency file (Graphene §4.4.1-2).

A bitmap is a plain ``uint64`` numpy array; bit ``b % 64`` of word ``b // 64`` stands for block ``b``,
i.e. bytes ``[b*block_size, (b+1)*block_size)`` of the file. Setting bits for every needed adjacency
list sorts and deduplicates the superstep's requests for free; `graphene_py.io.planner` then turns
the set bits into merged extents.

Two request translations, as in Graphene, for one partition whose offsets array (uint64, ``rowlen+1``
entries, in *edges*, local to the partition) covers vertices ``[row_lo, row_lo+rowlen)``:

* `mark_queue` walks a frontier queue of global vertex IDs (small frontiers);
* `mark_scan` scans a per-global-vertex active flag array over the row (large frontiers; Graphene
  switches at `config.SCAN_THRESHOLD` of |V|).

Both coalesce lists whose blocks touch or overlap (consecutive vertices' lists are adjacent in CSR)
into runs of blocks before touching the bitmap, skip 8 inactive flags at a time in the scan, set whole
words for long (hub) lists, and return
``(new_blocks, useful_bytes)``: how many blocks went from 0 to 1, and the sum of the byte lengths of
the lists that were marked (the numerator of Graphene's *IO utility*). A vertex listed twice in a
queue counts twice in ``useful_bytes`` (a frontier queue holds each vertex once).

Block sizes must be powers of two (512 is the default, 4096 for the comparison study). All kernels are
numba ``nogil`` so several partitions can be marked from several threads.
"""
from __future__ import annotations

import numpy as np
from .. import config
from ..jit import intrinsic, njit
from .offsets import off3, compact

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_ONE = np.uint64(1)
_U63 = np.uint64(63)
_U6 = np.uint64(6)


@intrinsic
def popcount64(typingctx, x):
    """Number of set bits of a uint64 (LLVM ctpop: one instruction on x86-64 with POPCNT)."""
    from numba import types
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@intrinsic
def ctz64(typingctx, x):
    """Index of the lowest set bit of a non-zero uint64 (LLVM cttz)."""
    from numba import types
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        from llvmlite import ir
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

    return sig, codegen


def _check_block_size(block_size: int) -> int:
    bs = int(block_size)
    if bs <= 0 or bs & (bs - 1):
        raise ValueError(f"block_size must be a power of two, got {block_size}")
    return bs


def shift_of(block_size: int) -> int:
    """log2(block_size) for a power-of-two block size."""
    return _check_block_size(block_size).bit_length() - 1


def num_blocks(file_bytes: int, block_size: int = config.BLOCK_SIZE) -> int:
    bs = _check_block_size(block_size)
    return (int(file_bytes) + bs - 1) // bs


def new_bitmap(file_bytes: int, block_size: int = config.BLOCK_SIZE) -> np.ndarray:
    """A zeroed bitmap with one bit per block of a file of `file_bytes` bytes."""
    nb = num_blocks(file_bytes, block_size)
    return np.zeros((nb + 63) // 64, dtype=np.uint64)


def clear(bits: np.ndarray) -> None:
    bits[:] = 0


@njit(cache=True, nogil=True)
def _set_block_range(bits, b0, b1):
    """Set blocks [b0, b1] (inclusive); return how many were 0 before."""
    w0 = b0 >> 6
    w1 = b1 >> 6
    lo = np.uint64(b0 & 63)
    hi = np.uint64(b1 & 63)
    new = np.uint64(0)
    if w0 == w1:
        m = (_ALL >> (_U63 - (hi - lo))) << lo
        old = bits[w0]
        new += popcount64(m & ~old)
        bits[w0] = old | m
        return new
    m = _ALL << lo
    old = bits[w0]
    new += popcount64(m & ~old)
    bits[w0] = old | m
    for w in range(w0 + 1, w1):
        old = bits[w]
        if old != _ALL:
            new += popcount64(~old)
            bits[w] = _ALL
    m = _ALL >> (_U63 - hi)
    old = bits[w1]
    new += popcount64(m & ~old)
    bits[w1] = old | m
    return new


@njit(cache=True, nogil=True)
def _mark_ranges(bits, starts, ends, shift):
    new = np.uint64(0)
    useful = 0
    for i in range(starts.shape[0]):
        s = np.int64(starts[i])
        e = np.int64(ends[i])
        if e > s:
            useful += e - s
            new += _set_block_range(bits, s >> shift, (e - 1) >> shift)
    return np.int64(new), useful


@njit(cache=True, nogil=True)
def _mark_queue(bits, O, b0, rowlen, row_lo, vertices, id_width, shift):
    """O: compact offsets (io/offsets.py), this partition's from entry b0, rowlen + 1
    entries."""
    olo, obase, oexc = O
    new = np.uint64(0)
    useful = 0
    # Coalesce at block granularity: the current run of blocks [rb0, rb1] grows while the next
    # list starts inside it or right after it (always the case for sorted queues of small lists).
    rb0 = np.int64(0)
    rb1 = np.int64(-1)
    for k in range(vertices.shape[0]):
        i = np.int64(vertices[k]) - row_lo
        if i < 0 or i >= rowlen:
            continue
        s = off3(olo, obase, oexc, b0 + i) * id_width
        e = off3(olo, obase, oexc, b0 + i + 1) * id_width
        if e <= s:
            continue
        useful += e - s
        c0 = s >> shift
        c1 = (e - 1) >> shift
        if c0 >= rb0 and c0 <= rb1 + 1:
            if c1 > rb1:
                rb1 = c1
            continue
        if rb1 >= rb0:
            new += _set_block_range(bits, rb0, rb1)
        rb0 = c0
        rb1 = c1
    if rb1 >= rb0:
        new += _set_block_range(bits, rb0, rb1)
    return np.int64(new), useful


@njit(cache=True, nogil=True)
def _mark_scan(bits, O, b0, rowlen, row_lo, active, words, id_width, shift):
    """active: uint8 per global vertex; words: the same bytes as uint64 (8 flags per word, for
    skipping runs of inactive vertices); O, b0, rowlen as _mark_queue's."""
    olo, obase, oexc = O
    hi = min(rowlen, active.shape[0] - row_lo)
    nwords = words.shape[0]
    new = np.uint64(0)
    useful = 0
    rb0 = np.int64(0)
    rb1 = np.int64(-1)
    i = max(np.int64(0), -row_lo)
    while i < hi:
        g = row_lo + i
        if (g & 7) == 0 and (g >> 3) < nwords and i + 8 <= hi and words[g >> 3] == 0:
            i += 8
            continue
        if active[g] == 0:
            i += 1
            continue
        s = off3(olo, obase, oexc, b0 + i) * id_width
        e = off3(olo, obase, oexc, b0 + i + 1) * id_width
        i += 1
        if e <= s:
            continue
        useful += e - s
        c0 = s >> shift
        c1 = (e - 1) >> shift
        if c0 <= rb1 + 1 and c0 >= rb0:
            if c1 > rb1:
                rb1 = c1
            continue
        if rb1 >= rb0:
            new += _set_block_range(bits, rb0, rb1)
        rb0 = c0
        rb1 = c1
    if rb1 >= rb0:
        new += _set_block_range(bits, rb0, rb1)
    return np.int64(new), useful


@njit(cache=True, nogil=True)
def widen(bits, group):
    """Set every block of each aligned group of `group` blocks (a power of two <= 64) that has one
    set: extents then cover whole groups (4 KB pages when page checksums are verified)."""
    full = np.uint64(0xFFFFFFFFFFFFFFFF) if group >= 64 else (np.uint64(1) << np.uint64(group)) - np.uint64(1)
    for w in range(bits.shape[0]):
        x = bits[w]
        if x == 0:
            continue
        y = np.uint64(0)
        for j in range(0, 64, group):
            m = full << np.uint64(j)
            if x & m:
                y |= m
        bits[w] = y


@njit(cache=True, nogil=True)
def count_blocks(bits) -> int:
    """Number of set bits (blocks marked) in a bitmap."""
    n = np.uint64(0)
    for w in range(bits.shape[0]):
        x = bits[w]
        if x:
            n += popcount64(x)
    return np.int64(n)


def _check_bits(bits, need_blocks):
    if bits.dtype != np.uint64 or bits.ndim != 1:
        raise TypeError("bitmap must be a 1-D uint64 array (see new_bitmap)")
    if need_blocks > bits.shape[0] * 64:
        raise ValueError(f"bitmap has {bits.shape[0] * 64} blocks, marking needs {need_blocks}")


def mark_ranges(bits, starts_byte, ends_byte, block_size: int = config.BLOCK_SIZE):
    """Set every block overlapping each byte range [start, end); empty ranges are ignored.

    Returns (new_blocks, useful_bytes)."""
    sh = shift_of(block_size)
    starts = np.ascontiguousarray(starts_byte, dtype=np.int64)
    ends = np.ascontiguousarray(ends_byte, dtype=np.int64)
    if starts.shape != ends.shape:
        raise ValueError("starts and ends differ in length")
    nz = ends > starts
    if nz.any():
        if starts[nz].min() < 0:
            raise ValueError("negative byte offset")
        _check_bits(bits, ((int(ends[nz].max()) - 1) >> sh) + 1)
    return _mark_ranges(bits, starts, ends, sh)


def _prep(bits, offsets, id_width, block_size):
    sh = shift_of(block_size)
    # any integer offsets as they are (the kernels read each through np.int64): an iterator holds
    # them as int32 or uint64
    offs = offsets if offsets.dtype.kind in "iu" else np.asarray(offsets, dtype=np.uint64)
    if offs.ndim != 1 or offs.shape[0] < 1:
        raise ValueError("offsets must have rowlen+1 >= 1 entries")
    if id_width not in (4, 8):
        raise ValueError(f"id_width must be 4 or 8, got {id_width}")
    last = int(offs[-1]) * id_width
    if last > 0:
        _check_bits(bits, ((last - 1) >> sh) + 1)
    return offs, sh


def mark_queue(bits, offsets, row_lo: int, vertices, id_width: int,
               block_size: int = config.BLOCK_SIZE):
    """Mark the blocks of the adjacency lists of the queued global vertex IDs that fall in this
    partition's row range; others are ignored. Returns (new_blocks, useful_bytes)."""
    offs, sh = _prep(bits, offsets, id_width, block_size)
    return mark_queue_at(bits, compact(offs), 0, len(offs) - 1, row_lo, vertices, id_width, sh)


def mark_queue_at(bits, O, b0: int, rowlen: int, row_lo: int, vertices, id_width: int, sh: int):
    """mark_queue over compact offsets O (io/offsets.py), the partition's from entry b0
    (rowlen + 1 entries), blocks of 1 << sh bytes; the bitmap is the planner's own (sized for
    the file)."""
    v = vertices if vertices.dtype == np.int64 else np.asarray(vertices, dtype=np.int64)
    return _mark_queue(bits, O, np.int64(b0), np.int64(rowlen), np.int64(row_lo), v,
                       np.int64(id_width), np.int64(sh))


def mark_scan(bits, offsets, row_lo: int, active, id_width: int,
              block_size: int = config.BLOCK_SIZE):
    """Mark the blocks of every vertex v of the row with active[v] true (active: bool/uint8 per
    global vertex). Returns (new_blocks, useful_bytes)."""
    offs, sh = _prep(bits, offsets, id_width, block_size)
    return mark_scan_at(bits, compact(offs), 0, len(offs) - 1, row_lo, active, id_width, sh)


def mark_scan_at(bits, O, b0: int, rowlen: int, row_lo: int, active, id_width: int, sh: int):
    """mark_scan over compact offsets O, as mark_queue_at."""
    a = active
    if a.dtype not in (np.bool_, np.uint8):
        a = np.asarray(a != 0, dtype=np.uint8)
    a = np.ascontiguousarray(a).view(np.uint8)
    words = a[: a.shape[0] // 8 * 8].view(np.uint64)
    return _mark_scan(bits, O, np.int64(b0), np.int64(rowlen), np.int64(row_lo), a, words,
                      np.int64(id_width), np.int64(sh))
