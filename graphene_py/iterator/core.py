"""IoIterator: active vertices -> block bits -> merged extents -> buffers -> user compute (§4.3).

One superstep (`run`): the frontier is translated into 512-byte block bits of every partition of the
chosen direction (queue walk for small frontiers, vertex-flag scan above config.SCAN_THRESHOLD of
|V|, nothing for Frontier.all), the planner merges each file's bits into extents, one engine (one IO
worker per physical device: disk folders on one block device share a worker, config.IO_WORKERS)
reads them into the buffer pool, and T compute threads (the calling thread plus T-1 persistent
helpers) take completions — their own worker's first, stealing built into engine.get —
and run the compiled per-batch kernel (kernels.process_batch) on them. The superstep ends when every
extent has been consumed (barrier). `in_memory=True` loads the partitions into RAM once and runs the
same plan and the same kernel without an engine (reference point for the SSD overhead).

The plain-Python API of Table 4.1 (start / has_more / next / current / get_neighbors) walks the
same extents one at a time, for prototyping and teaching.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from .. import config
from .. import integrity as _ig
from ..errors import GrapheneError
from ..io import bitmap as _bm
from ..io import planner as _pl
from . import kernels as K
from .frontier import Frontier
from .memory import as_budget, track
from .pyapi import Block, TableApi  # noqa: F401  (Block: part of the package's API)
from ..io import offsets as _co
from .session import (BATCH, DENSE_EXTENT, PAGE, Helpers, IoSession, _load_offsets, _round_up,
                      _shared_offsets, offsets_dtype)
from .session import drop_memory_cache  # noqa: F401  (part of the package's API)
from .specialize import kernel_for

#: what process_batch gets for Update.reads when the kernel names none (nothing asked ahead)
_NO_AHEAD = np.zeros(0, dtype=np.float64)

STAT_KEYS = ("frontier", "active_edges", "blocks_marked", "extents", "bytes_useful", "bytes_read",
             "io_utility", "io_seconds", "requests", "compute_seconds", "wait_seconds",
             "plan_seconds", "seconds", "mode")


def _kib(n):
    return f"{n >> 10}K" if n >= 1024 else f"{n}B"


def _compact_offsets(graph, direction, parts, part_base):
    """The compact offsets (io/offsets.py, ~2 bytes per entry) of these partitions: loaded whole
    (checked against their files' CRCs) and compacted, the whole array then dropped (and the
    Partitions' caches of it with it); kept on the graph for the next iterator of the same
    direction and layout (the run's setup opens one per direction before the first trial, as
    it loaded the offsets there before)."""
    cache = graph.__dict__.setdefault("_compact_offsets", {})
    key = (direction, tuple(id(p) for p in parts))
    hit = cache.get(key)
    if hit is not None and np.array_equal(hit[0], part_base):
        return hit[1]
    full = _shared_offsets(parts, part_base)
    if full is None:
        full = np.empty(int(part_base[-1]), dtype=offsets_dtype(parts))
        _load_offsets(parts, full, part_base)
    O = _co.compact(full)
    for p in parts:
        if p._off is not None and p._off.base is full:
            p._off = None
    cache[key] = (part_base.copy(), O)
    return O


class IoIterator(IoSession, TableApi):
    def __init__(self, graph, direction="out", *, engine="auto", threads=None, queue_depth=None,
                 max_gap=None, max_io=None, buffer_mb=None, block_size=None, direct=True,
                 in_memory=False, weights=False, io_workers=None, check=None, cache=None):
        t_open = time.perf_counter()
        if direction not in ("out", "in"):
            raise ValueError(f"direction must be 'out' or 'in', got {direction!r}")
        self.graph = graph
        self.direction = direction
        self.n = graph.num_vertices
        self.threads = int(threads) if threads else config.default_threads()
        if self.threads < 1:
            raise ValueError("threads must be >= 1")
        self.queue_depth = int(queue_depth or config.QUEUE_DEPTH)
        # neither given: the device model plans each superstep where the device has a profile
        self._fixed_plan = max_gap is not None or max_io is not None
        self.max_gap = config.MAX_GAP_BLOCKS if max_gap is None else int(max_gap)
        self.max_io = int(max_io or config.MAX_IO_BYTES)
        # Supersteps that read a lot (>= BIG_PLAN_BYTES marked): unless the caller fixed max_io,
        # their extents may grow to DENSE_EXTENT (fewer, larger IOs: 128 KB reads run at ~880 MB/s
        # here vs ~690 MB/s at 16 KB; BASELINES.md). Small supersteps keep Graphene's 16 KB cap.
        self.scan_max_io = self.max_io if max_io else max(self.max_io, DENSE_EXTENT)
        self.block_size = int(block_size or graph.block_size or config.BLOCK_SIZE)
        _bm.shift_of(self.block_size)  # validates: power of two
        if self.block_size < 512:
            raise ValueError("block_size must be >= 512 (O_DIRECT alignment)")
        if self.max_io < self.block_size:
            raise ValueError(f"max_io ({self.max_io}) must be at least one block ({self.block_size})")
        self.buffer_mb = float(buffer_mb or config.BUFFER_MB)
        self.in_memory = bool(in_memory)
        self.weights = bool(weights)
        if self.weights and not graph.weighted:
            raise GrapheneError(f"{graph.name}: dataset has no weights (re-partition with --weighted)")
        self.id_width = graph.id_width
        self.id_shift = 2 if self.id_width == 4 else 3

        parts = graph.parts(direction)
        self.parts = parts
        P = len(parts)
        # Offsets of every partition, concatenated: int32 while every partition has < 2^31 edges
        # (session.offsets_dtype), else uint64 (with an int64 view for the kernel).
        lens = [p.row_hi - p.row_lo + 1 for p in parts]
        self.part_base = np.zeros(P + 1, dtype=np.int64)
        np.cumsum(lens, out=self.part_base[1:])
        self.offs = _compact_offsets(graph, direction, parts, self.part_base)
        self._ram_offs = None      # whole offsets made for ram_lists()
        track(f"offsets ({direction})", *_co.arrays(self.offs))
        self.part_row_lo = np.array([p.row_lo for p in parts], dtype=np.int64)
        self.part_nedges = np.array([p.num_edges for p in parts], dtype=np.int64)
        self.part_col_lo = np.array([p.col_lo for p in parts], dtype=np.int64)
        self.part_col_hi = np.array([p.col_hi for p in parts], dtype=np.int64)
        # Files: the non-empty partitions' adjacency files (file id f), weights as f + F.
        self.file_parts = [i for i, p in enumerate(parts) if p.num_edges > 0]
        F = len(self.file_parts)
        self.F = F
        self.file_part = np.array(self.file_parts, dtype=np.int32)
        self.file_bytes = np.array([parts[i].adj_bytes for i in self.file_parts], dtype=np.int64)
        self.wfile_bytes = np.array([_round_up(parts[i].num_edges * 4, 512) for i in self.file_parts],
                                    dtype=np.int64)
        self.file_disk = np.array([parts[i].disk for i in self.file_parts], dtype=np.int32)
        # The adjacency cache (cache=bytes or a CacheBudget shared by a run's iterators): files
        # that fit are served from RAM, the rest from the disks; when every file fits this is the
        # in-memory path.
        self.cached = self.cmem = self.cache_budget = self.cache_partial = None
        self.cache_taken = 0
        budget = as_budget(cache)
        self.ndisks = max(1, len(graph.disks))
        self.notes = []
        # Page checksums, verified as data arrives (SSD path; the in-memory path checks whole files
        # at load). Extents are widened to whole pages so every page read can be checked.
        self.check = config.CHECK_PAGES if check is None else bool(check)
        self.checker = None
        if self.check and not self.in_memory and F:
            ck = _ig.PageChecker([parts[i] for i in self.file_parts], self.weights)
            if ck.enabled:
                self.checker = ck
            else:
                self.notes.append("page checksums: none in this dataset (made by an older "
                                  "graphene_py); neighbour IDs are still range-checked")
        # the in-memory path plans the same page-wide extents, so both run the very same plan
        has_pages = F > 0 and all("adj" in parts[i].pages for i in self.file_parts)
        self.page_blocks = (_ig.PAGE // self.block_size
                            if self.check and has_pages and self.block_size < _ig.PAGE else 1)
        self._assign_workers(io_workers or config.IO_WORKERS)
        self.profiles = None       # calibrate.Profile per IO worker when the device model plans
        self.io_plan = "fixed"
        self._mask = None          # flags of a queue frontier's vertices: made on first use
        self._nomask = np.zeros(1, dtype=np.uint8)     # what dense supersteps pass instead
        self.planner = None
        self.engine = None
        self.pool = None
        self.engine_name = "memory" if self.in_memory else None
        self._helpers = Helpers(self.threads - 1) if self.threads > 1 else None
        self._lock = threading.Lock()
        self.supersteps = 0
        self.stats = {k: 0 for k in STAT_KEYS if k not in ("mode", "io_utility", "frontier")}
        self.stats.update(supersteps=0, frontier=0)
        self._py = None
        try:
            if self.in_memory:
                self._load_memory()
            else:
                self._find_profiles()
                self._open_engine(engine, direct)
                if budget is not None:
                    self._load_cache(budget)
            model = None
            if self.profiles is not None:
                group = self.page_blocks * self.block_size
                wf = self.weights
                model = _pl.DeviceModel(self.profiles, self.block_size, self.slot_bytes, group,
                                        io_factor=2.0 if wf else 1.0,
                                        byte_factor=1.0 + 4.0 / self.id_width if wf else 1.0,
                                        threads=self.threads)
            self.planner = _pl.SuperstepPlanner(
                self.offs, self.part_base, self.part_row_lo, self.part_nedges, self.file_parts,
                self.file_bytes, self.file_worker, self.nworkers, self.id_width, self.block_size,
                self.max_gap, self.max_io, self.scan_max_io, self.page_blocks, self.slot_bytes,
                self.threads, model=model)
            track(f"block bitmaps ({direction})", *self.planner.bitmaps)
        except BaseException:
            self.close()
            raise
        self.open_seconds = time.perf_counter() - t_open

    @property
    def mask(self):
        """One flag per vertex for queue frontiers (the kernel and the scan read flags), made on
        the first queue superstep: dense-only algorithms (PageRank, SpMV) never hold it."""
        if self._mask is None:
            self._mask = track(f"iterator mask ({self.direction})",
                               np.zeros(self.n, dtype=np.uint8))
        return self._mask

    # -- planning --------------------------------------------------------------------------------
    def _plan(self, frontier):
        """frontier -> (file ids, offsets, lengths, blocks marked, useful bytes, mode)."""
        if frontier.n != self.n:
            raise ValueError(f"frontier is over {frontier.n} vertices, graph has {self.n}")
        # queue frontiers: the caller set self.mask for their vertices (the scan reads flags)
        active = (frontier.mask if frontier.kind == "mask" else
                  self.mask if frontier.kind == "queue" else self._nomask)
        return self.planner.plan(frontier.kind, self.n, active, frontier.ids, len(frontier),
                                 self._helpers.run if self._helpers is not None else None)

    def _weight_extents(self, fids, offs, lens):
        woff = np.empty_like(offs)
        wlen = np.empty_like(lens)
        K.weight_extents(offs, lens, self.id_width, self.wfile_bytes, fids, woff, wlen,
                         _ig.PAGE if self.page_blocks > 1 else 512)
        return woff, wlen

    # -- the compiled superstep ------------------------------------------------------------------
    def run(self, is_active, compute, state, frontier, keep=None, ahead=None):
        """One superstep: call compute(v, nbrs, wts, tid, state) for every active vertex's (clipped)
        adjacency list. keep: (kcache, kstart, kdone) of kept lists (iterator/shortlists.py) that
        the lists read are copied into on the way. ahead: a 1-D array the kernel reads at each
        neighbour's ID (Update.reads), asked for ahead. Returns the per-superstep stats dict."""
        t0 = time.perf_counter()
        if not isinstance(frontier, Frontier):
            raise TypeError("frontier must be a Frontier (from_queue / from_mask / all)")
        if keep is None:
            keep = self._no_keep()
        elif self.weights:
            raise ValueError("kept lists hold neighbour IDs only: not with weights")
        # the kernels' last arguments: the kept lists, then the slot to ask for ahead
        keep = keep + (_NO_AHEAD if ahead is None else ahead,)
        queue = frontier.kind == "queue"
        if queue:
            K.set_mask(self.mask, frontier.ids, np.uint8(1))
        try:
            fids, offs, lens, blocks, useful, mode = self._plan(frontier)
            t_plan = time.perf_counter() - t0
            track(f"superstep plan ({self.direction})", fids, offs, lens)
            if self.weights and len(offs):
                woff, wlen = self._weight_extents(fids, offs, lens)
            else:
                woff = offs
                wlen = None
            mask = (frontier.mask if frontier.kind == "mask" else
                    self.mask if queue else self._nomask)
            use_mask = 0 if frontier.kind == "all" else 1
            args = (fids, offs, lens, woff, mask, use_mask, keep)
            nthreads = self.threads
            acc = {"edges": np.zeros(nthreads, np.int64), "compute": np.zeros(nthreads),
                   "wait": np.zeros(nthreads)}
            es0 = self.engine.stats() if self.engine is not None else {}
            io0, rq0 = es0.get("io_seconds", 0.0), es0.get("requests", 0)
            cacc = None
            cargs = None
            cached_w = 0
            if self.cached is not None and len(offs):
                # extents of files in the cache are computed from RAM while the disks serve the rest
                held, _, vbase = self.cache_held
                sel = np.empty(len(fids), dtype=np.bool_)
                K.extents_held(fids, offs, lens, held, vbase, _bm.shift_of(self.block_size), sel)
                if sel.any():
                    rest = ~sel
                    cargs = (fids[sel], offs[sel], lens[sel], woff[sel], mask, use_mask, keep)
                    fids, offs, lens, woff = fids[rest], offs[rest], lens[rest], woff[rest]
                    if wlen is not None:
                        cached_w = int(wlen[sel].sum())     # the cached extents' weight bytes
                        wlen = wlen[rest]
                    args = (fids, offs, lens, woff, mask, use_mask, keep)
                    cacc = {k: np.zeros_like(v) for k, v in acc.items()}
            fill = None
            if self.cached is not None and len(offs) and self.cached[fids].any():
                # an extent of the cache's files whose blocks were all read before (a dense
                # superstep: second chance; first when another pass follows) or twice before
                # (any other: third chance; first when the caller says most will be read
                # again: Frontier.from_mask's again) is copied
                # in on the way (session._load_cache says why)
                held, (seen, seen2), vbase = self.cache_held
                sh = _bm.shift_of(self.block_size)
                twice = np.empty(len(fids), dtype=np.bool_)      # read once before: now twice
                K.extents_held(fids, offs, lens, seen, vbase, sh, twice)
                if frontier.again:
                    # a pass the caller will make again copies in on its first read
                    again = np.ones(len(fids), dtype=np.bool_)
                elif frontier.kind == "all":
                    again = twice.copy()
                else:
                    again = np.empty(len(fids), dtype=np.bool_)
                    K.extents_held(fids, offs, lens, seen2, vbase, sh, again)
                if self.cache_partial is not None:
                    pf, quota = self.cache_partial
                    K.within_quota(fids, offs, lens, wlen if wlen is not None else lens[:0],
                                   pf, quota, PAGE, again)
                _, _, base, wbase = self.cmem
                fill = (np.where(self.cached, base[:-1], -1), np.where(self.cached, wbase[:-1], -1),
                        again)
            if len(offs) and not self.in_memory:
                self._submit(fids, offs, lens, woff, wlen)
            try:
                if cargs is not None:
                    self._run_job(self._mem_job(is_active, compute, state, cargs, cacc, self.cmem),
                                  len(cargs[1]))
            finally:
                if len(offs):     # after an error too: the submitted reads must be drained
                    if self.in_memory:
                        job = self._mem_job(is_active, compute, state, args, acc)
                    else:
                        job = self._ssd_job(is_active, compute, state, args, acc,
                                            None if fill is None else (fill, wlen))
                    try:
                        self._run_job(job, len(offs))
                    finally:
                        if self.weights and not self.in_memory and self.pending is not None:
                            left = self.pending[self.pending >= 0]
                            if len(left):
                                self.engine.release(left.copy())
                                self.pending[:] = -1
            cached = 0
            if cacc is not None:
                cached = int(cargs[2].sum()) + cached_w
                for k in acc:
                    acc[k] += cacc[k]
            es1 = self.engine.stats() if self.engine is not None else {}
            io1, rq1 = es1.get("io_seconds", 0.0), es1.get("requests", 0)
            if fill is not None:    # the superstep went through: the copied blocks are held
                held, (seen, seen2), vbase = self.cache_held
                sh = _bm.shift_of(self.block_size)
                K.mark_held(fids[fill[2]], offs[fill[2]], lens[fill[2]], held, vbase, sh)
                K.mark_held(fids[twice], offs[twice], lens[twice], seen2, vbase, sh)
                K.mark_held(fids, offs, lens, seen, vbase, sh)
        finally:
            if queue:
                K.set_mask(self.mask, frontier.ids, np.uint8(0))
        read = int(lens.sum()) + (int(wlen.sum()) if wlen is not None else 0)
        if self.weights:
            useful += useful * 4 // self.id_width
        next_ = int(len(offs)) + (len(cargs[1]) if cargs is not None else 0)
        st = {
            "frontier": len(frontier), "active_edges": int(acc["edges"].sum()),
            "blocks_marked": int(blocks), "extents": next_, "bytes_useful": int(useful),
            "bytes_read": 0 if self.in_memory else read,
            # useful bytes over the bytes brought in: read from the disks or taken from the cache
            "io_utility": (useful / (read + cached)) if read + cached else 1.0,
            "io_seconds": float(io1 - io0), "requests": int(rq1 - rq0),
            "compute_seconds": float(acc["compute"].sum()),
            "wait_seconds": float(acc["wait"].sum()), "plan_seconds": float(t_plan),
            "seconds": time.perf_counter() - t0, "mode": mode,
        }
        if self.planner.choice is not None and mode != "all":
            g, c, pred = self.planner.choice
            st["io_plan"] = f"gap {_kib(g)} / max {_kib(c)}"
            st["io_predicted_seconds"] = pred
            self.planner.choice = None
        if self.cached is not None:
            st["bytes_cached"] = cached
        if self.ndisks > 1 and not self.in_memory:
            # bytes read from each disk folder (row-column balance: even on dense supersteps)
            per = np.bincount(self.file_disk[fids], weights=lens, minlength=self.ndisks)
            if wlen is not None:
                per += np.bincount(self.file_disk[fids], weights=wlen, minlength=self.ndisks)
            st["bytes_read_per_disk"] = [int(x) for x in per]
        self._account(st)
        return st

    def _account(self, st):
        self.supersteps += 1
        s = self.stats
        s["supersteps"] += 1
        for k, v in st.items():
            if k in ("mode", "io_utility", "io_plan"):
                continue
            if isinstance(v, list):
                old = s.get(k) or [0] * len(v)
                s[k] = [a + b for a, b in zip(old, v)]
                continue
            s[k] = s.get(k, 0) + v
        got = s["bytes_read"] + s.get("bytes_cached", 0)
        s["io_utility"] = s["bytes_useful"] / got if got else 1.0

    def _submit(self, fids, offs, lens, woff, wlen):
        if self.weights:
            k = len(offs)
            f2 = np.empty(2 * k, np.int32)
            o2 = np.empty(2 * k, np.int64)
            l2 = np.empty(2 * k, np.int64)
            f2[0::2] = fids
            f2[1::2] = fids + self.F
            o2[0::2] = offs
            o2[1::2] = woff
            l2[0::2] = lens
            l2[1::2] = wlen
            self.pending = np.full(k, -1, dtype=np.int64)
            self.engine.submit(f2, o2, l2)
        else:
            self.engine.submit(fids, offs, lens)

    def _no_keep(self):
        """Empty kept lists (of the types real ones have: one compiled kernel serves both)."""
        k = getattr(self, "_nokeep", None)
        if k is None:
            from .shortlists import id_dtype, start_dtype
            k = self._nokeep = (np.zeros(0, id_dtype(self.id_width)),
                                np.zeros(1, start_dtype(self.graph.num_vertices)),
                                np.zeros(0, np.uint8))
        return k

    def _ssd_job(self, is_active, compute, state, args, acc, fill=None):
        fids, offs, lens, woff, mask, use_mask, keep = args
        if fill is not None:    # copy the extents read again into the cache, before release
            fb, wfb, again = fill[0]
            wl = fill[1]
            mem, wmem = self.cmem_u8
            pool = self.pool.view
            wl = wl if wl is not None else np.zeros(0, np.int64)

            def copy(rows, n):
                K.copy_rows(rows, n, pool, fids, offs, lens, woff, wl, fb, wfb, again, mem, wmem)
        else:
            copy = None
        eng = self.engine
        weighted = self.weights
        sb = self.slot_bytes
        nworkers = self.nworkers
        lock = self._lock
        kernel_args = (self.buf, self.wbuf, fids, offs, lens, woff, self.file_part, self.part_base,
                       self.part_row_lo, self.part_nedges, self.offs, mask, use_mask, self.id_shift,
                       weighted) + keep
        call = self._bind(is_active, compute, state, kernel_args)
        verify = self._verifier(fids, offs, lens, woff)
        pc = time.perf_counter
        abort = [False]

        def job(tid):
            rows = np.empty((BATCH, 3), dtype=np.int64)
            done = np.empty(2 * BATCH, dtype=np.int64)
            disk = tid % nworkers   # own IO worker's completions first, then steal
            edges = 0
            tc = tw = 0.0
            err = None
            nerr = 0
            while True:
                t1 = pc()
                try:
                    c = eng.get(disk, BATCH)
                except Exception as e:  # an IO error: remember it, keep draining the batch
                    if err is None:
                        err = e
                    abort[0] = True
                    nerr += 1
                    if nerr > 100_000:   # the engine keeps failing: give up draining
                        break
                    continue
                t2 = pc()
                tw += t2 - t1
                if c.shape[0] == 0:
                    break
                if abort[0]:
                    eng.release(c[:, 1].copy())
                    continue
                try:
                    if weighted:
                        with lock:
                            n, nd = K.pair_rows(c, self.pending, sb, rows, done)
                        try:
                            if n:
                                verify(rows, n)
                                edges += call(state, tid, rows, n, *kernel_args)
                                if copy is not None:
                                    copy(rows, n)
                        finally:
                            if nd:
                                eng.release(done[:nd].copy())
                    else:
                        n = K.slots_to_rows(c, sb, rows)
                        try:
                            verify(rows, n)
                            edges += call(state, tid, rows, n, *kernel_args)
                            if copy is not None:
                                copy(rows, n)
                        finally:
                            eng.release(c[:, 1].copy())
                except Exception as e:
                    if err is None:
                        err = e
                    abort[0] = True
                tc += pc() - t2
            acc["edges"][tid] = edges
            acc["compute"][tid] = tc
            acc["wait"][tid] = tw
            if err is not None:
                raise err

        return job

    def _verifier(self, fids, offs, lens, woff):
        """verify(rows, n): page checksums (when on), neighbour IDs and weights of completed
        extents, before any kernel sees them; raises DamagedDataError naming file and offset."""
        ck = self.checker
        view = self.pool.view
        buf, wbuf = self.buf, self.wbuf
        weighted = self.weights
        wlen = None
        if weighted and len(offs):
            woff, wlen = self._weight_extents(fids, offs, lens)
        parts = self.parts
        fp, ne, clo, chi, sh = (self.file_part, self.part_nedges, self.part_col_lo,
                                self.part_col_hi, self.id_shift)

        def verify(rows, n):
            if ck is not None:
                ck.check(view, rows, n, fids, offs, lens, "adj", 1)
                if weighted:
                    ck.check(view, rows, n, fids, woff, wlen, "wgt", 2)
            k, e, val = _ig.bad_ids(buf, rows, n, fids, offs, lens, fp, ne, clo, chi, sh)
            if k >= 0:
                raise _ig.id_error(parts[fp[fids[rows[k, 0]]]], e, val)
            if weighted:
                k, e = _ig.bad_weights(wbuf, rows, n, fids, offs, lens, woff, fp, ne, sh)
                if k >= 0:
                    raise _ig.weight_error(parts[fp[fids[rows[k, 0]]]], e)

        return verify

    def ram_lists(self):
        """The lists in RAM as one table (the in-memory path's, or a cache's that holds them all),
        for kernels that walk them directly (the dedicated in-memory BFS): (buf, offs, row_lo, row_part, pbase, plo, ebase) where the rows
        of the grid start at row_lo[r] (one entry more: n), row r's partitions are
        row_part[r]..row_part[r + 1], and partition j's list of vertex v (in its row) is
        buf[ebase[j] + offs[pbase[j] + v - plo[j]] : ebase[j] + offs[pbase[j] + v - plo[j] + 1]]
        (ebase -1: the partition has no edges). Neighbour IDs are global vertex IDs."""
        buf, _, file_base, _ = self._ram_arrays()
        P = len(self.parts)
        order = sorted(range(P), key=lambda i: (self.parts[i].row_lo, self.parts[i].col_lo))
        ebase_of = np.full(P, -1, dtype=np.int64)
        for f, p in enumerate(self.file_parts):
            ebase_of[p] = int(file_base[f]) >> self.id_shift
        row_lo, row_part = [], []
        for k, i in enumerate(order):
            lo = self.parts[i].row_lo
            if not row_lo or row_lo[-1] != lo:
                row_lo.append(lo)
                row_part.append(k)
        row_part.append(P)
        row_lo.append(self.graph.num_vertices)
        if P and (row_lo[0] != 0 or any(self.parts[order[row_part[r + 1] - 1]].row_hi != row_lo[r + 1]
                                        for r in range(len(row_part) - 1))):
            raise ValueError(f"{self.graph.name}: the {self.direction}-rows do not tile 0..n")
        o = np.array(order, dtype=np.int64)
        if self._ram_offs is None:      # whole offsets for these kernels (held compact here)
            self._ram_offs = track(f"offsets, whole for the lists in RAM ({self.direction})",
                                   _co.decode(self.offs, dtype=offsets_dtype(self.parts)))
        return (buf, self._ram_offs, np.array(row_lo, dtype=np.int64),
                np.array(row_part, dtype=np.int64), self.part_base[o].copy(),
                self.part_row_lo[o].copy(), ebase_of[o].copy())

    def ram_weights(self):
        """The weights beside ram_lists(): (wbuf, wbase), float32 weights where the weight of
        the edge at buf[ebase[j] + e] (partition j in ram_lists()'s order) is wbuf[wbase[j] + e]
        (-1: the partition has no edges)."""
        if not self.weights:
            raise ValueError("ram_weights() needs an iterator with weights")
        _, wbuf, _, wfile_base = self._ram_arrays()
        P = len(self.parts)
        order = sorted(range(P), key=lambda i: (self.parts[i].row_lo, self.parts[i].col_lo))
        wbase = np.full(P, -1, dtype=np.int64)
        for f, p in enumerate(self.file_parts):
            wbase[p] = int(wfile_base[f]) >> 2
        return wbuf, wbase[np.array(order, dtype=np.int64)].copy()

    def all_held(self) -> bool:
        """Whether the read-through cache holds every block of every file of this direction (its
        RAM is then laid out as the in-memory path's: ram_lists() works)."""
        if (self.cached is None or not self.cached.all() or self.cache_partial is not None
                or not self.F):
            return False
        held, _, vbase = self.cache_held
        fids = np.arange(self.F, dtype=np.int64)
        sel = np.empty(self.F, dtype=np.bool_)
        K.extents_held(fids, np.zeros(self.F, dtype=np.int64),
                       np.asarray(self.file_bytes, dtype=np.int64), held, vbase,
                       _bm.shift_of(self.block_size), sel)
        return bool(sel.all())

    def _ram_arrays(self):
        """(ID array, weights, file_base, wfile_base) of the lists in RAM: the in-memory path's,
        or the cache's once it holds everything (all_held)."""
        if self.in_memory:
            return self.buf, self.wbuf, self.file_base, self.wfile_base
        if self.all_held():
            return self.cmem
        raise ValueError("the lists are not in RAM (an in-memory iterator, or a cache that "
                         "holds every file)")

    def _run_job(self, job, nextents):
        if self._helpers is not None and nextents > 1:
            self._helpers.run(job)
        else:
            job(0)

    def _mem_job(self, is_active, compute, state, args, acc, mem=None):
        """Extents from RAM: the in-memory path's files, or (mem) the cache's."""
        fids, offs, lens, woff, mask, use_mask, keep = args
        weighted = self.weights
        buf, wbuf, file_base, wfile_base = mem if mem is not None else (
            self.buf, self.wbuf, self.file_base, self.wfile_base)
        kernel_args = (buf, wbuf, fids, offs, lens, woff, self.file_part, self.part_base,
                       self.part_row_lo, self.part_nedges, self.offs, mask, use_mask, self.id_shift,
                       weighted) + keep
        call = self._bind(is_active, compute, state, kernel_args)
        total = len(offs)
        chunk = max(1, min(256, total // (4 * self.threads) or 1))
        nxt = [0]
        lock = self._lock
        pc = time.perf_counter

        def job(tid):
            rows = np.empty((chunk, 3), dtype=np.int64)
            edges = 0
            tc = 0.0
            while True:
                with lock:
                    lo = nxt[0]
                    nxt[0] = lo + chunk
                if lo >= total:
                    break
                hi = min(total, lo + chunk)
                t1 = pc()
                n = K.mem_rows(lo, hi, fids, offs, woff, file_base, wfile_base, weighted, rows)
                edges += call(state, tid, rows, n, *kernel_args)
                tc += pc() - t1
            acc["edges"][tid] = edges
            acc["compute"][tid] = tc

        return job

    def _bind(self, is_active, compute, state, kernel_args):
        """The compiled kernel for these user functions and argument types (see specialize.py)."""
        rows = np.empty((BATCH, 3), dtype=np.int64)
        return kernel_for(is_active, compute).bind((state, 0, rows, 0) + kernel_args)

    # -- lifetime ----------------------------------------------------------------------------------
    def close(self):
        if hasattr(self, "cache_budget"):
            self._release_cache()
        if getattr(self, "_py", None) is not None:
            try:
                self._py_end()
            except Exception:
                self._py = None
        if getattr(self, "_helpers", None) is not None:
            self._helpers.close()
            self._helpers = None
        if getattr(self, "engine", None) is not None:
            self.engine.close()
            self.engine = None
        if getattr(self, "pool", None) is not None:
            from ..io import buffers as _buffers
            self.buf = self.wbuf = None
            _buffers.give_back(self.pool)     # the next iterator of this process reuses it
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return (f"IoIterator({self.graph.name!r}, {self.direction}, engine={self.engine_name}, "
                f"threads={self.threads}, weights={self.weights})")
