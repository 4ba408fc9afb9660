"""An iterator's IO session: what it sets up once and keeps for its supersteps.

The offsets of every partition of one edge direction, loaded whole (concurrently, one thread per
file) and checked; the compute threads (the calling thread plus T-1 persistent helpers); the IO
workers (one per physical device); the buffer pool and the IO engine (SSD path) or the partitions
loaded into RAM (in-memory path). `IoSession` is mixed into IoIterator.
"""
from __future__ import annotations

import os
import sys
import threading
import zlib

import numpy as np
from ..jit import njit

from .. import integrity as _ig
from ..errors import GrapheneError
from ..integrity import check_offsets
from . import kernels as K
from .memory import cache_array, note_huge, track, track_bytes

#: Extent size for dense (Frontier.all) supersteps and the buffer slot: whole files in large
#: sequential reads (128 KB reads reach ~880 MB/s here vs ~690 MB/s at 16 KB; BASELINES.md fio).
DENSE_EXTENT = 128 * 1024
#: a partly cached file fills its quota in pages of this size (what a copied block makes resident)
PAGE = 4096
#: the least quota worth a partly cached file
PARTIAL_MIN = 1 << 20
#: Completions taken per engine.get call / per kernel call.
BATCH = 16
#: Offsets files read at once when an iterator opens (one thread each).
OFFSET_LOAD_THREADS = 8

_MEM_CACHE = {}

#: how the last SSD iterator of this process planned its requests (last_io_plan())
_last_io_plan = ""


def last_io_plan() -> str:
    """How the last SSD iterator of this process plans its requests ("device model (...)" or
    "fixed (why)"); "" when none was opened."""
    return _last_io_plan


def drop_memory_cache():
    """Free the partitions kept in RAM by in_memory=True iterators and the adjacency caches."""
    _MEM_CACHE.clear()


def _round_up(x, a):
    return (int(x) + a - 1) // a * a


#: offsets are held as int32 while every partition of a direction has fewer edges than this (half
#: the bytes: 4 per vertex per column partition instead of 8), else as uint64 (the file's format)
NARROW_EDGES = 1 << 31
#: entries per chunk when narrowing an offsets file (the uint64 staging buffer: 8 MiB)
NARROW_CHUNK = 1 << 20


def offsets_dtype(parts):
    """The dtype an iterator holds these partitions' offsets in: int32 when every partition has
    fewer than 2^31 edges, else uint64."""
    return np.int32 if all(p.num_edges < NARROW_EDGES for p in parts) else np.uint64


def _read_offsets_file(path, dst):
    """Read a whole offsets file into dst: straight in for a uint64 dst, else through a small
    uint64 buffer, narrowed chunk by chunk. Returns (entries read, or -1 when the file is longer
    than dst; CRC32 of the file's bytes)."""
    if dst.dtype != np.uint64:
        return _read_narrowed(path, dst)
    if sys.byteorder != "little":   # files are little-endian: let numpy convert
        a = np.fromfile(path, dtype="<u8")
        if len(a) > len(dst):
            return -1
        dst[:len(a)] = a
        return len(a), zlib.crc32(a.astype("<u8").tobytes())
    u8 = dst.view(np.uint8)
    with open(path, "rb", buffering=0) as f:
        n = 0
        while n < len(u8):
            k = f.readinto(memoryview(u8[n:]))
            if not k:
                return n // 8, None
            n += k
        if f.read(1):
            return -1, None
    return n // 8, zlib.crc32(memoryview(u8))


def _read_narrowed(path, dst):
    """_read_offsets_file for a narrow dst: values that do not fit are left to the structure
    check (they exceed the partition's edge count, which fits)."""
    buf = np.empty(min(NARROW_CHUNK, max(1, len(dst))), dtype="<u8")
    u8 = buf.view(np.uint8)
    crc = 0
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            got = 0
            while got < len(u8):
                k = f.readinto(memoryview(u8[got:]))
                if not k:
                    break
                got += k
            if got % 8:            # not whole entries: not an offsets file of this partition
                return -1, None
            m = got // 8
            if m == 0:
                return n, crc
            if n + m > len(dst):
                return -1, None
            crc = zlib.crc32(memoryview(u8[:got]), crc)
            _narrow(buf[:m], dst[n:n + m])
            n += m
            if got < len(u8):
                return n, crc


@njit(cache=True, nogil=True)
def _narrow(src, dst):
    """dst[i] = src[i] (uint64 -> int32); a value above int32's range becomes -1, which the
    structure check then reports (offsets must not decrease)."""
    for i in range(src.shape[0]):
        x = src[i]
        dst[i] = x if x < np.uint64(2147483648) else -1


def _shared_offsets(parts, base):
    """The array a previous iterator over these partitions loaded their offsets into, when every
    partition's cached offsets still are its slices in this layout (else None). Reusing it spares
    a second copy of all offsets (8 bytes per vertex per column partition) while one opens."""
    if not parts or parts[0]._off is None:
        return None
    arr = parts[0]._off.base
    if not isinstance(arr, np.ndarray) or arr.dtype != offsets_dtype(parts) or arr.ndim != 1 \
            or len(arr) != int(base[-1]) or arr.base is not None:
        return None
    start = arr.__array_interface__["data"][0]
    w = arr.dtype.itemsize
    for i, p in enumerate(parts):
        o = p._off
        if (o is None or o.base is not arr or len(o) != int(base[i + 1] - base[i])
                or o.__array_interface__["data"][0] != start + w * int(base[i])):
            return None
    return arr


def _load_offsets(parts, out, base):
    """Load every partition's offsets into out[base[i]:base[i+1]] and point the Partition's cache
    at that slice (one copy in RAM, shared with graph.degrees() etc.). Files not yet cached are read
    concurrently, one thread per file (up to OFFSET_LOAD_THREADS): an R x C dataset stores C offsets
    arrays per row, so 2x2 has twice 1x1's offsets bytes; read one file at a time from a cold page
    cache, kron22 2x2 took 0.10-0.37 s vs 0.055-0.09 s in parallel (1x1: 0.05 vs 0.04 s)."""
    todo = []
    for i, p in enumerate(parts):
        mine = out[base[i]:base[i + 1]]
        if p._off is not None:     # loaded and checked already (Partition.offsets())
            if len(p._off) != len(mine):
                _offsets_mismatch(p, len(p._off), p._off, len(mine))
            mine[:] = p._off       # (narrowing: its values are at most num_edges < 2^31)
        else:
            todo.append(i)
    got = {}

    def load(i):
        got[i] = _read_offsets_file(parts[i].off_path, out[base[i]:base[i + 1]])

    if len(todo) > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(min(len(todo), OFFSET_LOAD_THREADS)) as ex:
            list(ex.map(load, todo))    # re-raises the first OSError
    else:
        for i in todo:
            load(i)
    for i, p in enumerate(parts):
        mine = out[base[i]:base[i + 1]]
        if i in got and got[i][0] != len(mine):
            _offsets_mismatch(p, got[i][0], mine if got[i][0] >= 0 else None, len(mine))
        if i in got:
            # CRC32 of the file and structure, before anything indexes with them
            check_offsets(p, mine, crc=got[i][1])
        p._off = mine   # share one copy with the Partition's cache


def _read_into(path, dst):
    """Fill dst (a uint8 array) with the whole file at path, read straight into it (no second
    copy of the file in RAM); a file of another size is an error."""
    import os
    with open(path, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        if size != len(dst):
            raise GrapheneError(f"{path}: {size} bytes, the manifest says {len(dst)} (truncated "
                                f"or replaced?)")
        view = memoryview(dst)
        got = 0
        while got < len(dst):
            k = f.readinto(view[got:])
            if not k:
                raise GrapheneError(f"{path}: ended after {got} of {len(dst)} bytes")
            got += k


def _offsets_mismatch(p, count, arr, want):
    last = int(arr[count - 1]) if arr is not None and 0 < count <= len(arr) else None
    what = f"{count} entries, last {last}" if count >= 0 else "more entries than expected"
    raise GrapheneError(f"{p.off_path}: offsets do not match the manifest ({what}; "
                        f"want {want} entries ending at {p.num_edges})")


class Helpers:
    """T-1 persistent compute threads; the calling thread is worker 0. One job per superstep."""

    def __init__(self, count):
        self.count = count
        self.job = None
        self.start_sems = [threading.Semaphore(0) for _ in range(count)]
        self.done = threading.Semaphore(0)
        self.errors = [None] * count
        self.closed = False
        self.threads = []
        for i in range(count):
            t = threading.Thread(target=self._loop, args=(i,), daemon=True,
                                 name=f"graphene-compute-{i + 1}")
            t.start()
            self.threads.append(t)

    def _loop(self, i):
        while True:
            self.start_sems[i].acquire()
            if self.closed:
                return
            try:
                self.job(i + 1)
            except BaseException as e:  # re-raised by the calling thread
                self.errors[i] = e
            self.done.release()

    def run(self, job):
        """Run job(tid) on every helper (tid 1..count) and job(0) here; wait for all; re-raise."""
        self.job = job
        self.errors = [None] * self.count
        for s in self.start_sems:
            s.release()
        err = None
        try:
            job(0)
        except BaseException as e:
            err = e
        for _ in range(self.count):
            self.done.acquire()
        self.job = None
        if err is not None:
            raise err
        for e in self.errors:
            if e is not None:
                raise e

    def close(self):
        self.closed = True
        for s in self.start_sems:
            s.release()
        for t in self.threads:
            t.join(timeout=5)




class IoSession:
    def degrees(self, dtype=np.int64) -> np.ndarray:
        """Degree of every vertex in this iterator's direction, from the offsets in RAM."""
        deg = np.zeros(self.n, dtype=dtype)
        self.add_degrees(deg)
        return deg

    def add_degrees(self, out: np.ndarray) -> None:
        """out += the degree of every vertex in this direction (no degree array made)."""
        K.add_degrees(self.offs, self.part_base, self.part_row_lo, out)

    def max_degree_bound(self) -> int:
        """An upper bound of the largest degree, without a degree array: per row range, the sum
        of its partitions' largest degrees."""
        top = K.part_max_degrees(self.offs, self.part_base)
        band = {}
        for lo, m in zip(self.part_row_lo.tolist(), top.tolist()):
            band[lo] = band.get(lo, 0) + m
        return max(band.values(), default=0)

    def _assign_workers(self, mode):
        """IO worker of every file: one per physical device ("device", the default: folders on one
        block device share a worker, Graphene's one IO thread per SSD) or one per disk folder
        ("disk"). Sets file_worker (int32 per file, compact 0..nworkers-1) and nworkers."""
        from ..io import devices as _dev
        if mode not in ("device", "disk"):
            raise ValueError(f"io_workers must be 'device' or 'disk', got {mode!r}")
        self.io_workers = mode
        dirs = list(getattr(self.graph, "dirs", None) or self.graph.disks)
        keys = [None] * len(dirs)
        used_disks = sorted({int(d) for d in self.file_disk})
        if mode == "device" and len(used_disks) > 1:
            for d in used_disks:
                keys[d] = _dev.device_key(dirs[d])
        wk = _dev.assign_workers(keys)
        used = sorted({wk[d] for d in used_disks})
        remap = {w: i for i, w in enumerate(used)}
        self.disk_worker = np.array([remap.get(w, -1) for w in wk], dtype=np.int32)
        self.file_worker = np.array([remap[wk[d]] for d in self.file_disk], dtype=np.int32)
        self.nworkers = max(1, len(used))
        self.device_keys = keys
        self.sharing = _dev.describe_sharing(
            [dirs[d] for d in used_disks], [keys[d] for d in used_disks],
            [wk[d] for d in used_disks])
        self.notes += self.sharing

    def _fixed(self, why):
        global _last_io_plan
        self.io_plan = _last_io_plan = f"fixed ({why})"

    def _find_profiles(self):
        """Calibrated profiles of every IO worker's device (io/calibrate.py), unless the caller fixed
        max_gap/max_io, GRAPHENE_IO_PLAN=fixed, or a device has none: then the fixed rule plans."""
        from ..io import calibrate as _cal
        if self._fixed_plan:
            return self._fixed("--max-gap/--max-io given")
        if os.environ.get("GRAPHENE_IO_PLAN", "") == "fixed":
            return self._fixed("GRAPHENE_IO_PLAN=fixed")
        dirs = list(getattr(self.graph, "dirs", None) or self.graph.disks)
        profiles = [None] * self.nworkers
        keys = [None] * self.nworkers
        for d in sorted({int(d) for d in self.file_disk}):
            w = int(self.disk_worker[d])
            if w >= 0 and profiles[w] is None:
                keys[w] = _cal.profile_key(dirs[d])
                profiles[w] = _cal.lookup(keys[w])
                if profiles[w] is None:
                    return self._fixed(f"no device profile for {dirs[d]}: "
                                       f"`graphene calibrate` makes one")
        if not profiles or any(p is None for p in profiles):
            return self._fixed("an IO worker without a disk of its own")
        self.profiles = profiles
        self.io_plan = "device model (" + ", ".join(sorted(set(keys))) + ")"
        global _last_io_plan
        _last_io_plan = self.io_plan

    def _slots_needed(self):
        """Buffer slots that keep every queue full while the threads hold their batches."""
        return 2 * self.queue_depth * self.nworkers + 2 * self.threads * BATCH + 16

    def _fit_small(self, slot, nslots, need):
        """nslots for a dataset much smaller than the pool (a 64 MiB pool takes ~0.1 s to fault
        in): the queues' slots plus its bytes twice over in slots. The slot size stays, so every
        request and plan is what it would have been."""
        data = int(self.file_bytes.sum()) + (int(self.wfile_bytes.sum()) if self.weights else 0)
        if not data or 2 * data >= nslots * slot:
            return nslots
        return min(nslots, need + -(-2 * data // slot))

    def _open_engine(self, engine, direct):
        from ..io import buffers as _buffers
        from ..io.engines import make_engine
        qd = self.queue_depth
        need = self._slots_needed()                      # never starve in-flight IO
        budget = int(self.buffer_mb * (1 << 20))
        slot = max(_round_up(self.max_io, 4096), DENSE_EXTENT)
        if self.profiles is not None:
            # the smallest request size at which every device reaches (90% of) its bandwidth,
            # halved while the pool could not hold the queues' slots
            slot = max(p.slot_bytes() for p in self.profiles)
            while slot > DENSE_EXTENT and budget // slot < need:
                slot //= 2
            slot = max(slot, DENSE_EXTENT)
        if budget // slot < need:
            slot = _round_up(max(self.max_io, 4096), 4096)
        nslots = max(need, budget // slot)
        nslots = self._fit_small(slot, nslots, need)
        if nslots * slot > budget:
            self.notes.append(f"buffer pool raised to {nslots * slot >> 20} MiB "
                              f"({nslots} slots x {slot >> 10} KiB) to keep {qd} IOs in flight per "
                              f"IO worker")
        self.slot_bytes = slot
        self.scan_max_io = min(self.scan_max_io, slot)
        self.pool = _buffers.acquire(slot, nslots)
        if self.pool.kind == "hugetlb":
            note_huge(self.pool.view)
        track(f"io buffers ({self.direction})", self.pool.view)
        files = [self.parts[i].adj_path for i in self.file_parts]
        disk_of = list(self.file_worker)   # the engine's "disk" is an IO worker (a device)
        if self.weights:
            files += [self.parts[i].wgt_path for i in self.file_parts]
            disk_of += list(self.file_worker)
        if not files:   # no edges at all: nothing will ever be read
            self.engine_name = "none"
            return
        disk_of = np.array(disk_of, dtype=np.int32)
        if callable(engine):   # a factory with make_engine's signature (tests: fault injection)
            self.engine = engine(files, disk_of, self.pool, queue_depth=qd, direct=direct)
        else:
            self.engine = make_engine(engine, files, disk_of, self.pool, queue_depth=qd,
                                      direct=direct)
        self.engine_name = getattr(self.engine, "name", str(engine))
        self.notes += list(getattr(self.engine, "notes", []))
        if self.sharing and not callable(engine):
            from ..io.engines import add_notice
            for line in self.sharing:
                add_notice(line)
        self.buf = self._typed(self.pool.view)
        self.wbuf = self.pool.view.view(np.float32) if self.weights else np.zeros(0, np.float32)
        self.pending = None

    def _typed(self, u8):
        return u8.view(np.uint32) if self.id_width == 4 else u8.view(np.int64)

    def _read_files(self, keep, lists=None):
        """The adjacency (and weight) files whose `keep` flag is set, read whole and checked, one
        after the other into one array each: (mem, wmem, file_base, wfile_base); a file left out
        takes no bytes (its base repeats the next one's). lists: the `mem` of the same files read
        before without weights: only the weights are read."""
        keep = np.asarray(keep, dtype=bool)
        base = np.zeros(self.F + 1, dtype=np.int64)
        np.cumsum(np.where(keep, self.file_bytes, 0), out=base[1:])
        wbase = np.zeros(self.F + 1, dtype=np.int64)
        np.cumsum(np.where(keep, self.wfile_bytes, 0), out=wbase[1:])
        mem = np.zeros(int(base[-1]), dtype=np.uint8) if lists is None else lists
        wmem = np.zeros(int(wbase[-1]) if self.weights else 0, dtype=np.uint8)
        for f, i in enumerate(self.file_parts):
            if not keep[f]:
                continue
            p = self.parts[i]
            if lists is None:
                mine = mem[base[f]:base[f + 1]]
                _read_into(p.adj_path, mine)
                _ig.check_crc(p, "adj", mine)
                _ig.check_array(p, "adj", self._typed(mine))
            if self.weights:
                mine = wmem[wbase[f]:wbase[f + 1]]
                _read_into(p.wgt_path, mine)
                _ig.check_crc(p, "wgt", mine)
                _ig.check_array(p, "wgt", mine.view(np.float32))
        return mem, wmem, base, wbase

    def _load_memory(self):
        self.slot_bytes = DENSE_EXTENT
        key = (self.graph.uuid, self.direction, self.weights)
        hit = _MEM_CACHE.get(key)
        # the same lists loaded with or without weights serve either: `graphene run sssp
        # --in-memory`'s set-up had loaded the lists alone, and its first trial read them again
        # with the weights (1.5 s of trial 1's 2.3 s on kron22w)
        other = _MEM_CACHE.get((self.graph.uuid, self.direction, not self.weights))
        if hit is None and other is not None and not self.weights:
            hit = other
        elif hit is None and other is not None:
            hit = self._read_files(np.ones(self.F, dtype=bool), lists=other[0])
            del _MEM_CACHE[(self.graph.uuid, self.direction, False)]
            _MEM_CACHE[key] = hit
        if hit is None:
            hit = self._read_files(np.ones(self.F, dtype=bool))
            # keep the most recently loaded graph (both directions) for the next run in this
            # process, as GAPBS loads once for all trials; drop_memory_cache() frees it
            for k in [k for k in _MEM_CACHE if k[0] != key[0]]:
                del _MEM_CACHE[k]
            _MEM_CACHE[key] = hit
        mem, wmem, self.file_base, self.wfile_base = hit
        track(f"partitions in RAM ({self.direction})", mem, wmem)
        self.mem = mem
        self.buf = self._typed(mem)
        self.wbuf = wmem.view(np.float32) if self.weights else np.zeros(0, np.float32)

    # -- the adjacency cache (--memory): some files in RAM, the rest read from the disks ----------
    def _file_cost(self):
        """RAM one file takes in the cache (adjacency, plus weights when this iterator reads them)."""
        return self.file_bytes + (self.wfile_bytes if self.weights else 0)

    def _choose_cached(self, budget):
        """Files to keep in RAM within budget.left bytes: the densest first (most edges per row:
        the hubs' lists, which the most supersteps read), then any smaller one that still fits."""
        cost = self._file_cost()
        rows = np.array([self.parts[i].row_hi - self.parts[i].row_lo + 1 for i in self.file_parts],
                        dtype=np.float64)
        dens = self.part_nedges[self.file_part] / np.maximum(rows, 1.0)
        keep = np.zeros(self.F, dtype=bool)
        order = np.argsort(-dens, kind="stable")
        for f in order:
            if budget.take(int(cost[f])):
                keep[f] = True
        return keep, self._choose_partial(budget, order, keep, cost)

    def _choose_partial(self, budget, order, keep, cost):
        """(file, quota) or None: the densest file left out gets what the budget has left (at
        least PARTIAL_MIN bytes), filled block by block up to that quota (iterator/core.py)."""
        left = budget.left
        for f in order:
            if not keep[f] and cost[f] > 0:
                q = min(int(cost[f]), left) // PAGE * PAGE
                if q >= PARTIAL_MIN and budget.take(q):
                    return int(f), q
                return None
        return None

    def _load_cache(self, budget):
        """The adjacency cache, read through. The files chosen (densest first, within the budget,
        reserved now) get zeroed RAM that costs nothing until written (calloc'ed pages) and three
        bitmaps: the blocks read so far (once, and twice) and the blocks held. An extent read again
        from such a file is copied in on the way, before its buffer slot goes back, and its blocks
        are held once the superstep is done: by a dense superstep (every list: PageRank, SpMV)
        when all its blocks were read before (second chance), by any other when they were read
        twice before (third chance: a traversal reads most blocks once or twice, BFS's levels
        2 and 3 on a power-law graph, and copying them would cost more than it saves: on this
        kind of VM, first-touching fresh pages runs at about 0.5 GB/s). An extent whose blocks
        are all held is computed from RAM instead of read. So nothing is read before the run
        starts, a block read once or twice by a traversal costs no copy, an iterative algorithm
        reads each block twice, and the next trial of this process finds what the last ones read
        (the arrays stay, as the in-memory path's do)."""
        whole, partial = self._choose_cached(budget)
        self.cache_budget = budget
        self.cache_taken = int(self._file_cost()[whole].sum()) + (partial[1] if partial else 0)
        self.cached = None
        keep = whole.copy()
        if partial is not None:
            keep[partial[0]] = True
        if not keep.any():
            return
        key = (self.graph.uuid, self.direction, self.weights, keep.tobytes(), self.block_size,
               partial)
        hit = _MEM_CACHE.get(key)
        if hit is None:
            # a stale cache goes first: its (huge) pages are the new one's to take. One of
            # this direction with or without weights is stale too: `graphene run sssp`'s
            # set-up opened the lists alone, and their cache kept 245 of the 600 huge pages
            # reserved, so the run's weights went to 4 KB pages
            for k in [k for k in _MEM_CACHE
                      if k[0] != key[0] or (len(k) > 3 and k[1] == key[1])]:
                del _MEM_CACHE[k]
            base = np.zeros(self.F + 1, dtype=np.int64)
            np.cumsum(np.where(keep, self.file_bytes, 0), out=base[1:])
            wbase = np.zeros(self.F + 1, dtype=np.int64)
            np.cumsum(np.where(keep, self.wfile_bytes, 0), out=wbase[1:])
            mem = cache_array(int(base[-1]))          # pages come on first write
            wmem = cache_array(int(wbase[-1]) if self.weights else 0)
            # the held blocks: one bit per block of each kept file, words from vbase[f]
            words = np.where(keep, (self.file_bytes + (self.block_size << 6) - 1)
                             // (self.block_size << 6), 0)
            vbase = np.full(self.F, -1, dtype=np.int64)
            vbase[keep] = np.concatenate([[0], np.cumsum(words[keep])[:-1]])
            held = np.zeros(int(words.sum()), dtype=np.uint64)
            seen = np.zeros(int(words.sum()), dtype=np.uint64)      # blocks read at least once
            seen2 = np.zeros(int(words.sum()), dtype=np.uint64)     # ... and at least twice
            # a partly cached file: its bytes still to fill
            quota = np.array([partial[1] if partial else -1], dtype=np.int64)
            hit = (mem, wmem, base, wbase, held, (seen, seen2), vbase, quota)
            # the next trial of this process reuses it (as the in-memory path does)
            _MEM_CACHE[key] = hit
        mem, wmem, base, wbase, held, seen, vbase, quota = hit
        if partial is None:
            track(f"adjacency cache ({self.direction})", mem, wmem, held, *seen)
        else:            # at most the quota of the partial file is ever written
            pf = partial[0]
            track_bytes(f"adjacency cache ({self.direction})",
                        int(self._file_cost()[whole].sum()) + partial[1] + held.nbytes
                        + 2 * seen[0].nbytes)
        self.cached = keep
        self.cache_held = (held, seen, vbase)
        self.cache_partial = None if partial is None else (pf, quota)
        (budget.whole if keep.all() and partial is None else budget.partial).append(self.direction)
        if partial is not None:
            budget.split.append(self.direction)
        self.cmem = (self._typed(mem), wmem.view(np.float32) if self.weights
                     else np.zeros(0, np.float32), base, wbase)
        self.cmem_u8 = (mem, wmem)

    def _release_cache(self):
        b = getattr(self, "cache_budget", None)
        if b is not None:
            b.give(self.cache_taken)
            self.cache_budget = None
        self.cached = self.cmem = self.cache_partial = None
