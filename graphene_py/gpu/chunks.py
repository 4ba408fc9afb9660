"""Per-chunk transfers for edge arrays in pinned host memory (HyTGraph's choice, per superstep).

An edge array that does not fit the GPU budget stays in pinned host memory and the kernels read it
over the bus, entry by entry (zero-copy, EMOGI). That suits a superstep whose lists are few and
scattered: only their bytes move. A superstep whose lists cover a stretch of the array densely
moves it faster as one copy, at the copy engines' rate, than as the kernels' scattered reads. So
before such a superstep (SSSP's relaxations, k-core's peel rounds) a `Stager`:

1. counts, per chunk of the array (2^shift entries, 16 MB of int32 by default), the entries the
   queued vertices' lists hold there past their heads and how many lists reach it (kernels.cu
   `chunk_load`, one small histogram copied to the host: the loops sync there anyway);
2. plans with `plan()`, pure Python tested on the CPU: a chunk costs `zero_copy_seconds` read
   over the bus (its entries' bytes plus a partly used transfer per list, at ZC_BPS) or
   `copy_seconds` copied (the whole chunk at COPY_BPS); chunks already in GPU memory cost nothing
   now. The slots the budget leaves go to the chunks that save the most: a staged chunk is kept
   while it is worth more than what a newcomer would save, else its slot is reused;
3. copies the newcomers into their slots (cudaMemcpyAsync from the pinned array) and points the
   kernels' chunk table at them (kernels.cu `staged_at`: a staged chunk's entry is read from GPU
   memory, any other over the bus).

`mode`: "auto" (the plan above), "zero-copy" (nothing copied: the tier before this module),
"copy" (every chunk a superstep touches is staged while slots last: tests force the copies with
it). A weighted array's weights sit at the same positions as its IDs: they are one group, staged
together. The rates are the H200 machine's (tools/gpu_notes.md): whole chunks copied at ~51 GB/s,
whole lists read zero-copy at ~33 GB/s, a scattered list's transfer wasting about half a
128-byte line at each end.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from . import _module

#: entries per chunk, as a power of two (2^22 int32 = 16 MB)
SHIFT = 22
#: kernels.cu STAGE_ARRAYS / STAGE_MAXCH: arrays served at once, chunks of each
MAX_ARRAYS = 4
MAX_CHUNKS = 2048
#: zero-copy reads of whole lists, bytes/s; bytes a scattered list's transfer wastes
ZC_BPS = 33e9
ZC_LIST_BYTES = 640
#: chunk copies, bytes/s; a copy's fixed cost, s
COPY_BPS = 48e9
COPY_FIXED_S = 10e-6
MODES = ("auto", "zero-copy", "copy")
#: "auto" stages nothing with fewer slots than this: a chunk or two of a large array cannot pay
#: for planning every round (k-core at Kronecker 24 with 2 slots: 6% slower than zero-copy)
MIN_SLOTS = 4

_active = threading.Lock()            # one stager at a time: the chunk table is the module's


@dataclass
class Group:
    """Arrays whose entries sit at the same positions (a list array and its weights), read
    through the lists of `ptr`, whose first `heads` entries are in GPU memory already."""
    ptr: object
    arrays: list
    num_entries: int
    heads: int = 0
    item_bytes: list = field(default_factory=list)

    def __post_init__(self):
        if not self.item_bytes:
            self.item_bytes = [int(a.dtype.itemsize) for a in self.arrays]


def num_chunks(num_entries: int, shift: int = SHIFT) -> int:
    return (int(num_entries) + (1 << shift) - 1) >> shift


def chunk_entries(num_entries: int, shift: int = SHIFT) -> np.ndarray:
    """Entries of each chunk (the last one may be short)."""
    n = num_chunks(num_entries, shift)
    e = np.full(n, 1 << shift, dtype=np.int64)
    if n:
        e[-1] = int(num_entries) - ((n - 1) << shift)
    return e


def zero_copy_seconds(edge_bytes, lists, arrays: int = 1):
    """Reading `edge_bytes` of `lists` lists' entries over the bus, in `arrays` arrays."""
    return (np.asarray(edge_bytes, dtype=np.float64) +
            np.asarray(lists, dtype=np.float64) * ZC_LIST_BYTES * arrays) / ZC_BPS


def copy_seconds(chunk_bytes):
    """Copying chunks of `chunk_bytes` bytes (one copy per array of the group)."""
    return np.asarray(chunk_bytes, dtype=np.float64) / COPY_BPS + COPY_FIXED_S


def plan(edge_bytes, lists, chunk_bytes, staged, slots: int, arrays: int = 1, mode: str = "auto"):
    """Which chunks of one group to hold in GPU memory for one superstep: (keep, copy), two sorted
    lists of chunk numbers; every staged chunk in neither is dropped. Per chunk: edge_bytes, the
    bytes of the entries the superstep reads there (past the lists' heads, every array of the
    group); lists, how many lists reach it; chunk_bytes, its size (all arrays). staged: chunks
    in GPU memory now; slots: how many chunks GPU memory holds. A chunk's worth this superstep:
    what zero-copy would cost, when it is staged already; the saving over zero-copy, when it
    would be copied. The `slots` worthiest (worth > 0) are held, and staged chunks this
    superstep does not read while slots are left. mode "copy": every chunk read is worth its
    bytes; "zero-copy": nothing is held."""
    edge_bytes = np.asarray(edge_bytes, dtype=np.int64)
    staged = set(int(c) for c in staged)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if mode == "zero-copy" or slots <= 0 or edge_bytes.size == 0:
        return [], []
    if mode == "copy":
        worth = np.where(edge_bytes > 0, edge_bytes.astype(np.float64) + 1.0, 0.0)
    else:
        zc = zero_copy_seconds(edge_bytes, lists, arrays)
        worth = zc - copy_seconds(chunk_bytes)
        for c in staged:
            worth[c] = zc[c] if edge_bytes[c] > 0 else 0.0
    order = [int(c) for c in np.argsort(-worth, kind="stable")[:slots] if worth[c] > 0]
    # staged chunks this superstep does not read stay while slots are free (no copy again)
    idle = sorted(c for c in staged if c not in order)
    order += idle[:max(0, slots - len(order))]
    keep = sorted(c for c in order if c in staged)
    copy = sorted(c for c in order if c not in staged)
    return keep, copy


class Stager:
    """Stages chunks of a DeviceGraph's host-resident arrays before each superstep (see the
    module's docstring). Use as a context manager: the kernels' chunk table is cleared on exit.

        with Stager(groups, slot_bytes) as st:
            for each superstep:
                st.round(queue, length, lambda q, n: ... launch the kernels over q[:n] ...)
                ... wait for the superstep (its next queue's length) ...
        stats.update(st.summary())
    """

    def __init__(self, groups, slot_bytes: int, mode: str = "auto", shift: int = SHIFT):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        self.groups = [g for g in groups if g.arrays and g.num_entries > 0]
        self.mode = mode
        self.shift = int(shift)
        self.unit = sum(sum(g.item_bytes) for g in self.groups) << self.shift   # one chunk of all
        narr = sum(len(g.arrays) for g in self.groups)
        nch = max([num_chunks(g.num_entries, self.shift) for g in self.groups] or [0])
        # a slot holds a chunk of each group (never more slots than chunks)
        self.slots = min(int(slot_bytes // self.unit), nch) if self.unit else 0
        if mode == "zero-copy" or narr > MAX_ARRAYS or nch > MAX_CHUNKS or self.slots <= 0 or (
                mode == "auto" and self.slots < min(MIN_SLOTS, nch)):
            self.slots = 0
        self.stats = {"chunk_rounds": 0, "chunk_rounds_skipped": 0, "chunk_copy_rounds": 0,
                      "chunks_copied": 0, "chunk_bytes_copied": 0, "zero_copy_bytes_est": 0,
                      "zero_copy_lists_est": 0, "chunk_batched_rounds": 0, "chunk_batches": 0,
                      "chunk_slots": self.slots}
        self._held = [dict() for _ in self.groups]      # per group: chunk -> slot index
        self._free = [[] for _ in self.groups]
        self._copy_stream = self._vstart = self._snap = None
        self._pool = None
        self._hist = None
        self._locked = False

    # -- set-up / tear-down ----------------------------------------------------------------------
    def __enter__(self):
        if self.slots:
            if not _active.acquire(blocking=False):
                raise RuntimeError("another Stager is active in this process")
            self._locked = True
            try:
                self._start()
            except BaseException:
                self.close()                 # (the lock too: a later run must not find it held)
                raise
        return self

    def _start(self):
        """The slots, the histogram and the kernels' chunk table (cleared), under the lock."""
        cp = _module.cupy()
        per = [self._slot_bytes(g) for g in self.groups]
        self._pool = [cp.empty(self.slots * b, dtype=cp.uint8) for b in per]
        self._free = [list(range(self.slots))[::-1] for _ in self.groups]
        self._copy_stream = cp.cuda.Stream(non_blocking=True)
        nch = max(num_chunks(g.num_entries, self.shift) for g in self.groups)
        self._hist = (cp.zeros(nch, dtype=cp.uint64), cp.zeros(nch, dtype=cp.uint32))
        bases = np.zeros(MAX_ARRAYS, dtype=np.uint64)
        for s, a in enumerate(a for g in self.groups for a in g.arrays):
            bases[s] = a.data.ptr
        self._set("g_stage_base", bases)
        self._set("g_stage_shift", np.array([self.shift], dtype=np.int32))
        self._set("g_stage_chunk", np.zeros(MAX_ARRAYS * MAX_CHUNKS, dtype=np.uint64))
        self._set("g_stage_n", np.array([sum(len(g.arrays) for g in self.groups)], np.int32))

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        if self._locked:
            try:
                if self._copy_stream is not None:   # (copies of a round cut short by an error)
                    self._copy_stream.synchronize()
                self._set("g_stage_n", np.array([0], dtype=np.int32))
            finally:
                self._pool = self._hist = self._vstart = self._snap = self._copy_stream = None
                self._held = [dict() for _ in self.groups]
                self._locked = False
                _active.release()

    def _slot_bytes(self, g) -> int:
        return sum(g.item_bytes) << self.shift

    @staticmethod
    def _set(name, host: np.ndarray):
        """Write a kernels' global, in order with the current stream's work and done before
        this returns (whatever stream is current)."""
        cp = _module.cupy()
        stream = cp.cuda.get_current_stream()
        mp = _module.module().get_global(name)
        cp.cuda.runtime.memcpyAsync(mp.ptr, host.ctypes.data, host.nbytes, 1, stream.ptr)
        stream.synchronize()

    # -- per superstep ---------------------------------------------------------------------------
    def round(self, q, length: int, launch, entries: int = -1) -> dict:
        """One superstep over the lists of q[:length]: launch(view, n) launches its kernels over
        the queue view[:n] on the current stream (the kernels must not care in which order, or
        in how many launches, the queue's vertices come: SSSP's relaxations and k-core's peel
        do not). The chunks worth a copy are staged first. When there are more of them than
        slots, the queue is put in vertex order and run in batches, one per stretch of chunks
        whose copies fill half the slots: the copies of the next batch (on a stream of their
        own) overlap the kernels of this one. entries: the list entries of q[:length] when the
        caller knows them (-1: not known): a superstep too small for any chunk to be worth its
        copy is not planned (no histogram, no wait) and the chunks staged stay. Returns this
        superstep's counts ({"staged": chunks held, "copied": chunks copied, "bytes": their
        bytes, "batches": launches})."""
        self.stats["chunk_rounds"] += 1
        out = {"staged": 0, "copied": 0, "bytes": 0, "batches": 1}
        if not self.slots or length <= 0 or (
                self.mode == "auto" and 0 <= entries and self._too_small(length, entries)):
            if self.slots and length > 0:
                self.stats["chunk_rounds_skipped"] += 1
            launch(q, length)
            return out
        loads = self._loads(q, length)
        if len(self.groups) == 1 and self.slots >= 2:
            edge_bytes, lists, sizes = loads[0]
            _keep, want = plan(edge_bytes, lists, sizes, [], len(edge_bytes),
                               len(self.groups[0].arrays), self.mode)
            if len(want) > self.slots:
                self._batched(q, length, launch, want, edge_bytes, lists, out)
                self._count(out)
                return out
        self._stage(loads, out)
        launch(q, length)
        self._count(out)
        return out

    def _count(self, out):
        if out["copied"]:
            self.stats["chunk_copy_rounds"] += 1
            self.stats["chunks_copied"] += out["copied"]
            self.stats["chunk_bytes_copied"] += out["bytes"]
        if out["batches"] > 1:
            self.stats["chunk_batched_rounds"] += 1
            self.stats["chunk_batches"] += out["batches"]

    def _loads(self, q, length):
        """Per group: (bytes read per chunk, lists reaching each chunk, each chunk's bytes)."""
        cp = _module.cupy()
        kern = _module.module().get_function("chunk_load")
        e_d, l_d = self._hist
        grid = max(1, min((int(length) + 255) // 256, _module.sm_count() * 4))
        loads = []
        for g in self.groups:
            nch = num_chunks(g.num_entries, self.shift)
            e_d[:nch].fill(0)
            l_d[:nch].fill(0)
            kern((grid,), (256,), (q, np.int32(length), g.ptr, np.int32(g.heads),
                                   np.int32(self.shift), np.int32(nch), e_d, l_d))
            eb = sum(g.item_bytes)
            loads.append((cp.asnumpy(e_d[:nch]).astype(np.int64) * eb,
                          cp.asnumpy(l_d[:nch]).astype(np.int64),
                          chunk_entries(g.num_entries, self.shift) * eb))
        return loads

    def _zero_copy_counts(self, g, edge_bytes, lists, on_gpu):
        off_gpu = np.ones(len(edge_bytes), dtype=bool)
        off_gpu[list(on_gpu)] = False
        self.stats["zero_copy_bytes_est"] += int(edge_bytes[off_gpu].sum())
        self.stats["zero_copy_lists_est"] += int(lists[off_gpu].sum()) * len(g.arrays)

    def _copy_chunk(self, gi, c, slot, stream, out):
        g = self.groups[gi]
        lo = c << self.shift
        n = min(1 << self.shift, g.num_entries - lo)
        for k, (a, ib) in enumerate(zip(g.arrays, g.item_bytes)):
            _module.cupy().cuda.runtime.memcpyAsync(self._slot_ptr(gi, slot, k),
                                                    a.data.ptr + lo * ib, n * ib, 1, stream.ptr)
            out["bytes"] += n * ib
        out["copied"] += 1

    def _stage(self, loads, out):
        """One launch: the slots' worth of chunks held (plan()), copied on the current stream."""
        stream = _module.cupy().cuda.get_current_stream()
        changed = False
        for gi, (g, (edge_bytes, lists, sizes)) in enumerate(zip(self.groups, loads)):
            held = self._held[gi]
            keep, copy = plan(edge_bytes, lists, sizes, list(held), self.slots,
                              len(g.arrays), self.mode)
            on_gpu = set(keep) | set(copy)
            self._zero_copy_counts(g, edge_bytes, lists, on_gpu)
            dropped = [c for c in held if c not in on_gpu]
            for c in dropped:                                   # their slots are free again
                self._free[gi].append(held.pop(c))
            for c in copy:
                held[c] = self._free[gi].pop()
                self._copy_chunk(gi, c, held[c], stream, out)
            out["staged"] += len(on_gpu)
            changed = changed or bool(copy) or bool(dropped)
        if changed:
            self._write_table()

    def _batched(self, q, length, launch, want, edge_bytes, lists, out):
        """The superstep in batches (round()): one group, more chunks worth a copy than slots."""
        cp = _module.cupy()
        g = self.groups[0]
        nch = len(edge_bytes)
        half = self.slots // 2
        qs = q[:length]
        qs[...] = cp.sort(qs)
        if self._vstart is None:    # chunk c's lists: vertices vstart[c] <= u < vstart[c + 1]
            self._vstart = cp.searchsorted(g.ptr, cp.arange(nch + 1, dtype=cp.int64) << self.shift)
        pos = cp.asnumpy(cp.searchsorted(qs, self._vstart[:nch + 1].astype(qs.dtype)))
        pos[0], pos[nch] = 0, length           # (every vertex runs, an empty list's too)
        parts = [want[i:i + half] for i in range(0, len(want), half)]
        starts = [0] + [p[0] for p in parts[1:]] + [nch]
        self._zero_copy_counts(g, edge_bytes, lists, want)
        rows = len(g.arrays) * MAX_CHUNKS
        snap = cp.cuda.alloc_pinned_memory(max(1, len(parts)) * rows * 8)
        tables = np.frombuffer(snap, dtype=np.uint64, count=len(parts) * rows).reshape(
            len(parts), rows)
        tables[...] = 0
        comp = cp.cuda.get_current_stream()
        self._copy_stream.wait_event(comp.record())     # the slots' readers so far are done
        done = [None, None]
        table = _module.module().get_global("g_stage_chunk").ptr
        for i, part in enumerate(parts):
            h = i % 2
            if done[h] is not None:
                self._copy_stream.wait_event(done[h])   # the batch before that used these slots
            for j, c in enumerate(part):
                slot = h * half + j
                self._copy_chunk(0, c, slot, self._copy_stream, out)
                for k in range(len(g.arrays)):
                    tables[i, k * MAX_CHUNKS + c] = self._slot_ptr(0, slot, k)
            comp.wait_event(self._copy_stream.record())
            cp.cuda.runtime.memcpyAsync(table, tables[i].ctypes.data, rows * 8, 1, comp.ptr)
            lo, hi = int(pos[starts[i]]), int(pos[starts[i + 1]])
            if hi > lo:
                launch(qs[lo:], hi - lo)
            done[h] = comp.record()
        last = (len(parts) - 1) % 2
        self._held[0] = {c: last * half + j for j, c in enumerate(parts[-1])}
        self._free[0] = [s for s in range(self.slots)[::-1] if s not in self._held[0].values()]
        self._snap = snap            # (alive until the copies ran: the caller waits on the round)
        out["staged"] = len(want)
        out["batches"] = len(parts)

    def _too_small(self, length: int, entries: int) -> bool:
        """Whether reading all of `entries` entries of `length` lists over the bus (each list
        counted in two chunks) costs less than copying one whole chunk, in every group."""
        for g in self.groups:
            eb = sum(g.item_bytes)
            zc = zero_copy_seconds(entries * eb, 2 * length, len(g.arrays))
            if zc >= copy_seconds(eb << self.shift):
                return False
        return True

    def _slot_ptr(self, gi: int, slot: int, k: int) -> int:
        """Where array k of group gi keeps its chunk in slot `slot`."""
        g = self.groups[gi]
        return (self._pool[gi].data.ptr + slot * self._slot_bytes(g) +
                (sum(g.item_bytes[:k]) << self.shift))

    def _write_table(self):
        table = np.zeros(MAX_ARRAYS * MAX_CHUNKS, dtype=np.uint64)
        s = 0
        for gi, g in enumerate(self.groups):
            for k in range(len(g.arrays)):
                for ch, slot in self._held[gi].items():
                    table[s * MAX_CHUNKS + ch] = self._slot_ptr(gi, slot, k)
                s += 1
        self._set("g_stage_chunk", table)

    def summary(self) -> dict:
        """The run's counts for its stats ({} when no array is in host memory): rounds, those
        too small to plan, those that copied, chunks and bytes copied, the bytes and list reads
        (a list's entries in one chunk of one array) estimated zero-copy (outside staged
        chunks), the rounds run in batches and their batches, the slots held."""
        return dict(self.stats) if self.groups else {}


def groups_of(dg, which=("out",), weights: bool = False) -> list:
    """The Groups of dg's edge arrays in pinned host memory among `which` ("out", "in"), with a
    weighted graph's out-weights beside its out-lists (weights=True); [] when all are resident."""
    out = []
    for w in which:
        arrays = []
        if w == "out":
            ptr, idx = dg.ptr, dg.idx
            host = dg.placement.get("out") == "host"
        else:
            ptr, idx = dg.in_csr()
            host = dg.placement.get("in") == "host" and not dg.symmetric
        if host:
            arrays.append(idx)
        if w == "out" and weights and dg.weights is not None and \
                dg.placement.get("weights") == "host":
            arrays.append(dg.weights)
        if arrays:
            h = dg.heads.get(w, (None, 0))[1] if (host and not weights) else 0
            out.append(Group(ptr=ptr, arrays=arrays, num_entries=dg.num_edges, heads=h))
    return out


def free_bytes(dg, reserve: int = 0) -> int:
    """GPU memory the budget leaves now for slots: the budget less the graph's arrays in GPU
    memory, `reserve` bytes (the algorithm's own), and what the device really has free."""
    cp = _module.cupy()
    free = int(cp.cuda.runtime.memGetInfo()[0])
    return max(0, min(free - (64 << 20), int(dg.budget) - dg.bytes() - int(reserve)))
