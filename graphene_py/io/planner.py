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

`SuperstepPlanner` turns one superstep's active vertices into the extents of every file of an edge
direction (marking included): what IoIterator runs before each superstep.
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from .. import config
from .offsets import compact
from .bitmap import (_check_block_size, ctz64, mark_queue_at, mark_scan_at, new_bitmap,
                     popcount64, shift_of, widen)

_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _take_run(x, base, nblocks):
    """The lowest run of set bits of bitmap word x (whose bit 0 is block `base`): (first block,
    end block clipped at nblocks, x without the run)."""
    tz = np.int64(ctz64(x))
    b = base + tz
    y = ~(x >> np.uint64(tz))
    if y == 0:
        run = 64 - tz
    else:
        run = np.int64(ctz64(y))
        if run > 64 - tz:
            run = 64 - tz
    e = min(b + run, nblocks)
    if tz + run >= 64:
        x = np.uint64(0)
    else:
        x &= _ALL << np.uint64(tz + run)
    return b, e, x


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
            b, e, x = _take_run(x, base, nblocks)     # the run covers blocks [b, e)
            if b >= nblocks:
                break
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


@njit(cache=True, nogil=True)
def _simulate(bits, nblocks, gaps, caps, acc):
    """What `_plan` would emit for every (gap, cap) pair at once, without emitting it: acc[g, c]
    += (extents, blocks they span) for max_gap gaps[g] and cap_blocks caps[c]. One pass over the
    bitmap's runs of set bits; each run costs O(G x C), so the cost model sees a superstep's exact
    request count and size for every candidate (tests check it against `plan`). Clipping at the
    file's padded end is left out (at most one extent's tail per file)."""
    G = gaps.shape[0]
    C = caps.shape[0]
    cs = np.full((G, C), -1, dtype=np.int64)
    last = np.full((G, C), -1, dtype=np.int64)
    nwords = min(bits.shape[0], (nblocks + 63) >> 6)
    for w in range(nwords):
        x = bits[w]
        if x == 0:
            continue
        base = np.int64(w) << 6
        while x:
            b, e, x = _take_run(x, base, nblocks)
            if b >= nblocks:
                break
            for gi in range(G):
                g = gaps[gi]
                for ci in range(C):
                    cap = caps[ci]
                    c0 = cs[gi, ci]
                    l0 = last[gi, ci]
                    if c0 >= 0 and b - l0 - 1 <= g and b - c0 < cap:
                        stop = min(e, c0 + cap)
                        if stop >= e:
                            last[gi, ci] = e - 1
                            continue
                        acc[gi, ci, 1] += stop - c0          # the extended extent closes at the cap
                        start = stop
                    else:
                        if c0 >= 0:
                            acc[gi, ci, 1] += l0 + 1 - c0
                        start = b
                    k = (e - start + cap - 1) // cap          # pieces of the rest of the run
                    acc[gi, ci, 0] += k
                    acc[gi, ci, 1] += (k - 1) * cap
                    cs[gi, ci] = start + (k - 1) * cap
                    last[gi, ci] = e - 1
    for gi in range(G):
        for ci in range(C):
            if cs[gi, ci] >= 0:
                acc[gi, ci, 1] += last[gi, ci] + 1 - cs[gi, ci]


def simulate(bits, nbytes_file: int, block_size: int, gaps, caps, acc=None):
    """(extents, bytes) of `plan` for every max_gap in gaps (blocks) x max_io in caps (bytes):
    an int64 array of shape (len(gaps), len(caps), 2). Adds into `acc` when given (several files
    of one device)."""
    bs = _check_block_size(block_size)
    nblocks = (padded_end(nbytes_file) + bs - 1) // bs
    g = np.asarray(gaps, dtype=np.int64)
    c = np.maximum(1, np.asarray(caps, dtype=np.int64) // bs)
    out = np.zeros((len(g), len(c), 2), dtype=np.int64) if acc is None else acc
    blk = np.zeros((len(g), len(c), 2), dtype=np.int64)
    _simulate(bits, np.int64(nblocks), g, c, blk)
    out[:, :, 0] += blk[:, :, 0]
    out[:, :, 1] += blk[:, :, 1] * bs
    return out


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


#: Supersteps marking at least this many bytes may use extents up to the dense size (fewer, larger
#: IOs: 128 KB reads run at ~880 MB/s here vs ~690 MB/s at 16 KB; BASELINES.md).
BIG_PLAN_BYTES = 16 << 20
#: The device model's candidates: merge gaps and request caps, in bytes.
MODEL_GAPS = (0, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
MODEL_CAPS = (16384, 32768, 65536, 131072, 262144, 524288)
#: Among plans predicted within this factor of the fastest, the one reading the fewest bytes wins
#: (gap bytes cost compute-side copies and the bus, which the device model does not see).
MODEL_SLACK = 1.03
#: CPU seconds each extent costs a run beyond what the device profile measures (the compute
#: threads' completion batches: a compiled kernel call per batch, the release of its slots;
#: shared by the threads). Measured on the 2-vCPU machine of BENCHMARKS.md: WCC's dense supersteps
#: on kron22 took 10-25 us per extent longer than their profile predicted, at every extent size.
EXTENT_CPU_SECONDS = 20e-6


class DeviceModel:
    """Picks a superstep's merge gap and request cap from calibrated device profiles
    (io/calibrate.py): for every candidate pair, the exact requests and bytes the plan would have
    (`_simulate`, per IO worker), the predicted time max over workers of requests / IOPS(mean size)
    plus every extent's CPU cost (EXTENT_CPU_SECONDS / threads), and the fastest pair (fewest
    bytes among near-ties).

    profiles   one calibrate.Profile per IO worker
    slot       the buffer slot size (largest request)
    group      requests are whole groups of this many bytes (a block, or a checksummed page)
    io_factor  requests per extent (2 with a weight file: the weights are a second read)
    byte_factor bytes read per adjacency byte (1 + 4/id_width with weights)"""

    def __init__(self, profiles, block_size, slot, group, io_factor=1.0, byte_factor=1.0,
                 threads=1):
        self.profiles = list(profiles)
        self.extent_cost = EXTENT_CPU_SECONDS / max(1, int(threads))
        self.block_size = int(block_size)
        g = sorted({max(0, x // self.block_size) for x in MODEL_GAPS})
        caps = sorted({(c + group - 1) // group * group for c in MODEL_CAPS if c <= slot}) or [slot]
        self.gaps = np.array(g, dtype=np.int64)
        self.caps = np.array(caps, dtype=np.int64)
        self.io_factor, self.byte_factor = float(io_factor), float(byte_factor)

    def choose(self, acc):
        """acc: int64 (workers, gaps, caps, 2) of (extents, bytes) -> (gap blocks, cap bytes,
        predicted seconds)."""
        t = np.zeros(acc.shape[1:3])
        for w, prof in enumerate(self.profiles):
            t = np.maximum(t, prof.seconds_for(acc[w, :, :, 0] * self.io_factor,
                                               acc[w, :, :, 1] * self.byte_factor))
        t = t + acc[:, :, :, 0].sum(axis=0) * self.extent_cost
        best = float(t.min())
        nbytes = acc[:, :, :, 1].sum(axis=0).astype(np.float64)
        cand = np.where(t <= best * MODEL_SLACK + 1e-9, nbytes, np.inf)
        gi, ci = np.unravel_index(int(np.argmin(cand)), cand.shape)
        return int(self.gaps[gi]), int(self.caps[ci]), float(t[gi, ci])
#: Queue frontiers at least this long are marked on all compute threads (one file each at a time).
PAR_MARK_QUEUE = 1 << 16


class SuperstepPlanner:
    """A superstep's plan over one edge direction's files (§4.4): the active vertices become block
    bits in one bitmap per file (queue walk for small frontiers, vertex-flag scan above
    config.SCAN_THRESHOLD of |V|, nothing for "all"), and each file's bits merge into extents.

    offsets    every partition's offsets concatenated (part_base[i]:part_base[i+1]), compact
               (io/offsets.py); a plain array is compacted
    file_parts the partition of each file; file_bytes its size; file_worker its IO worker
    page_blocks whole groups of this many blocks are read (4 KB pages when their checksums are
               verified: every page read is then whole)
    dense_step the extent size of "all" supersteps (the buffer slot size)

    `plan(kind, active, ids, count, parallel)` -> (file ids int32, offsets int64, lengths int64,
    blocks marked, useful bytes, mode). `parallel(job)` runs job(tid) on the compute threads
    (marking an R x C grid scans every row's flags C times), or None."""

    def __init__(self, offsets, part_base, part_row_lo, part_nedges, file_parts, file_bytes,
                 file_worker, nworkers, id_width, block_size, max_gap, max_io, scan_max_io,
                 page_blocks, dense_step, threads, model=None, skip=None):
        if not isinstance(offsets, tuple):
            offsets = compact(offsets)
        self.offsets, self.part_base, self.part_row_lo = offsets, part_base, part_row_lo
        self.part_nedges = part_nedges
        self.file_parts, self.file_bytes, self.file_worker = file_parts, file_bytes, file_worker
        self.nworkers, self.id_width, self.block_size = nworkers, id_width, block_size
        self.max_gap, self.max_io, self.scan_max_io = max_gap, max_io, scan_max_io
        self.page_blocks, self.dense_step, self.threads = page_blocks, dense_step, threads
        self.model = model          # a DeviceModel, or None: the fixed max_gap / max_io rule
        self.skip = skip            # files served from RAM (not planned for the disks), or None
        self.choice = None          # (gap bytes, cap bytes, predicted seconds) of the last plan
        self.F = len(file_parts)
        self.bitmaps = [new_bitmap(int(b), block_size) for b in file_bytes]
        self._dense = None

    def dense(self):
        """Every file whole, in dense_step extents, grouped by IO worker (computed once)."""
        if self._dense is None:
            fids, offs, lens = [], [], []
            for f in np.argsort(self.file_worker, kind="stable"):
                size = int(self.file_bytes[f])
                o = np.arange(0, size, self.dense_step, dtype=np.int64)
                fids.append(np.full(len(o), f, dtype=np.int32))
                offs.append(o)
                lens.append(np.minimum(self.dense_step, size - o))
            cat = (lambda a, t: np.concatenate(a) if a else np.zeros(0, t))
            self._dense = (cat(fids, np.int32), cat(offs, np.int64), cat(lens, np.int64))
        return self._dense

    def plan(self, kind, n, active=None, ids=None, count=0, parallel=None):
        if kind == "all":
            fids, offs, lens = self.dense()
            useful = int(self.part_nedges.sum()) * self.id_width
            return fids, offs, lens, int(lens.sum()) // self.block_size, useful, "all"
        scan = kind == "mask" or count > config.SCAN_THRESHOLD * n
        res = np.zeros((self.F, 2), dtype=np.int64)

        sh = shift_of(self.block_size)

        def mark(f):
            i = self.file_parts[f]
            b0 = int(self.part_base[i])
            rowlen = int(self.part_base[i + 1]) - b0 - 1
            row_lo = int(self.part_row_lo[i])
            if scan:
                res[f] = mark_scan_at(self.bitmaps[f], self.offsets, b0, rowlen, row_lo, active,
                                      self.id_width, sh)
            else:
                res[f] = mark_queue_at(self.bitmaps[f], self.offsets, b0, rowlen, row_lo, ids,
                                       self.id_width, sh)

        if parallel is not None and self.F > 1 and (scan or count >= PAR_MARK_QUEUE):
            T = self.threads

            def job(tid):
                for f in range(tid, self.F, T):
                    mark(f)
            parallel(job)
        else:
            for f in range(self.F):
                mark(f)
        blocks = int(res[:, 0].sum())
        useful = int(res[:, 1].sum())
        marked = [f for f in range(self.F) if res[f, 0]]
        if self.page_blocks > 1:
            for f in marked:
                widen(self.bitmaps[f], self.page_blocks)
        gap = self.max_gap
        if self.model is not None and marked:
            gap, cap, pred = self._choose(marked, parallel)
            self.choice = (gap * self.block_size, cap, pred)
        else:
            # A superstep that reads a lot is bandwidth-bound, not latency-bound: let its extents
            # grow to scan_max_io (fewer, larger IOs). Small ones keep the max_io cap (16 KB).
            cap = self.scan_max_io if blocks * self.block_size >= BIG_PLAN_BYTES else self.max_io
            if self.page_blocks > 1:      # whole page groups per extent
                g = self.page_blocks * self.block_size
                cap = (cap + g - 1) // g * g
        fids, offs, lens = [], [], []
        for f in marked:
            o, ln = plan(self.bitmaps[f], int(self.file_bytes[f]), self.block_size, gap,
                         cap, clear=True)
            fids.append(np.full(len(o), f, dtype=np.int32))
            offs.append(o)
            lens.append(ln)
        mode = "scan" if scan else "queue"
        if not offs:
            return (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int64), 0, 0, mode)
        if len(offs) == 1:
            return fids[0], offs[0], lens[0], blocks, useful, mode
        fids = np.concatenate(fids)
        offs = np.concatenate(offs)
        lens = np.concatenate(lens)
        if self.nworkers > 1:     # grouped by IO worker: each sees its extents in file order
            order = np.argsort(self.file_worker[fids], kind="stable")
            fids, offs, lens = fids[order], offs[order], lens[order]
        return fids, offs, lens, blocks, useful, mode

    def _choose(self, marked, parallel):
        """The device model's (gap blocks, cap bytes, predicted seconds) for the marked bitmaps."""
        m = self.model
        files = [f for f in marked if self.skip is None or not self.skip[f]]
        per = [None] * len(files)

        def one(i):
            f = files[i]
            per[i] = simulate(self.bitmaps[f], int(self.file_bytes[f]), self.block_size,
                              m.gaps, m.caps)
        if parallel is not None and len(files) > 1:
            T = self.threads

            def job(tid):
                for i in range(tid, len(files), T):
                    one(i)
            parallel(job)
        else:
            for i in range(len(files)):
                one(i)
        acc = np.zeros((len(m.profiles), len(m.gaps), len(m.caps), 2), dtype=np.int64)
        for f, a in zip(files, per):
            acc[int(self.file_worker[f])] += a
        return m.choose(acc)
