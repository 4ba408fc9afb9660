"""A direction's lists brought to the GPU in chunks of rows (ListStream: from pinned host memory
or from the dataset's files through staging buffers), and the resident tier's load built on it
(load_resident: the lists read straight into one device array at their CSR slots).

The streamed algorithms (gpu/streamed.py) make their passes through a ListStream; DeviceGraph
(gpu/device_graph.py) loads a resident dataset with load_resident. Neither of those is imported
here.
"""
from __future__ import annotations

import errno
import os
import queue
import threading

import numpy as np

from ..errors import GrapheneError
from . import _module

PAGE = 4096
#: Lists are read in pieces of PIECE bytes, READERS at a time, each checked by its reader (one
#: synchronous reader reached 0.69-0.99 GB/s of the GPU machine's disk, where the CPU path's
#: io_uring got 1.25 GB/s; and 1.35 GB/s from the page cache into pinned memory)
PIECE = 8 << 20
READERS = 4

#: chunks stream-host's pinning thread may run ahead of its reader
PIN_AHEAD = 3
#: stream-ssd's staging buffers (the reader fills one or two while one is copied to the GPU)
STAGING = 3
#: chunks the reader has in flight at once (their pieces queued to its READERS threads)
FLIGHT = 2
#: stream-ssd reads through the IO engine into its registered buffer pool (gpu/engine_reads.py);
#: False: through the READERS threads and the staging buffers, as "host"'s first pass reads
ENGINE_READS = True
#: the largest chunk streamed (a longer list is a chunk of its own)
CHUNK_BYTES = 256 << 20
#: a direction's lists are cut into at least this many chunks while chunks stay above
#: MIN_CHUNK_BYTES (chunk_bytes_for): with kron22's 513 MB in 256 MB chunks, a pass overlapped
#: little (2-3 chunks) and pinned 3 staging buffers of 256 MB first
MIN_CHUNKS = 8
MIN_CHUNK_BYTES = 16 << 20


def chunk_bytes_for(list_bytes: int) -> int:
    """The chunk size for lists of `list_bytes` bytes: CHUNK_BYTES, or less so that they make at
    least MIN_CHUNKS chunks (reads, copies and kernels overlap; the staging buffers are smaller),
    never below MIN_CHUNK_BYTES; a multiple of PAGE."""
    want = -(-int(list_bytes) // MIN_CHUNKS)
    want = -(-want // PAGE) * PAGE
    return int(max(MIN_CHUNK_BYTES, min(CHUNK_BYTES, want)))


def keep_plan(sizes, budget) -> list:
    """Which chunks stay in GPU memory after their first copy: in order, each one that still fits
    what is left of `budget` bytes (a chunk too large for the rest is streamed; a later, smaller
    one may still fit). sizes: each chunk's bytes."""
    left = int(budget)
    out = []
    for b in sizes:
        b = int(b)
        keep = 0 < b <= left
        if keep:
            left -= b
        out.append(keep)
    return out


def plan_chunks(offsets, chunk_edges):
    """Chunks of one partition's rows: [(r0, r1, e0, e1)], each holding at most chunk_edges edges
    unless one row alone holds more (then it is a chunk of its own). offsets: the partition's
    uint64 offsets (rows + 1 entries, from 0)."""
    off = np.asarray(offsets, dtype=np.int64)
    rows = len(off) - 1
    out = []
    r = 0
    cap = max(1, int(chunk_edges))
    while r < rows:
        e0 = int(off[r])
        # the last row whose end stays within e0 + cap; at least one row
        r1 = int(np.searchsorted(off, e0 + cap, side="right")) - 1
        r1 = min(max(r1, r + 1), rows)
        out.append((r, r1, e0, int(off[r1])))
        r = r1
    return out


def _offsets(p, check=True):
    """A partition's offsets file (uint64), checked (check=False: not yet; check_offsets(p, off)
    before anything but reads trusts them): CRC32 as recorded, then structure."""
    from ..integrity import check_offsets
    try:
        off = np.fromfile(p.off_path, dtype="<u8")
    except OSError as e:
        raise GrapheneError(f"{p.off_path}: cannot read offsets ({e.strerror})") from None
    if check:
        check_offsets(p, off)
    return off.astype(np.uint64, copy=False)


class _OffsetsCheck:
    """check_offsets of several partitions on a thread of its own (zlib's CRC32 runs at ~1 GB/s
    on the H200 machine: 0.09-0.18 s of Kronecker scale 24's 134 MB), while the lists' first
    reads go on; wait() joins it and raises what it found."""

    def __init__(self, pairs):
        self.err = None
        self.t = threading.Thread(target=self._work, args=(pairs,), name="graphene-gpu-offcheck",
                                  daemon=True)
        self.t.start()

    def _work(self, pairs):
        from ..integrity import check_offsets
        try:
            for p, off in pairs:
                check_offsets(p, off)
        except BaseException as e:  # noqa: BLE001 - raised by wait()
            self.err = e

    def wait(self):
        self.t.join()
        if self.err is not None:
            raise self.err


def _check_pages(p, table, first, data, path=None):
    """The CRC32C of each 4 KB page of `data` (pages first.. of p's list file, or of `path`: its
    weights) against the page table; a mismatch is DamagedDataError naming the file and the byte
    offset."""
    from .. import _uring
    from ..integrity import _damaged
    crcs = np.frombuffer(_uring.page_crcs(data, PAGE), "<u4")
    want = table[first:first + len(crcs)]
    bad = np.flatnonzero(crcs != want)
    if bad.size:
        i = int(bad[0])
        raise _damaged(path or p.adj_path,
                       f"the page at byte offset {(first + i) * PAGE} has CRC32C "
                       f"{int(crcs[i]):08x}, the dataset recorded {int(want[i]):08x}")


def _pages(e0, e1, width):
    """The 4 KB pages [p0, p1) that hold edges e0..e1 of a file of `width`-byte IDs."""
    return (e0 * width) // PAGE, -(-(e1 * width) // PAGE)


def _read_pieces(pool, fd, p, table, view, at, page0, path=None) -> int:
    """Fill `view` from byte `at` of fd (pages page0.. of p's list file) in pieces of PIECE
    bytes read by the pool's threads, each piece's pages checked (when there is a page table)
    by the thread that read it. Returns how many bytes were read in one run from the start
    (less: the file ended)."""
    return _pieces_read(_submit_pieces(pool, fd, p, table, view, at, page0, path))


def _submit_pieces(pool, fd, p, table, view, at, page0, path=None) -> list:
    """_read_pieces's reads handed to the pool: [(offset in view, future of its bytes read)]."""
    def piece(a):
        v = view[a:a + PIECE]
        got = 0
        while got < len(v):
            try:
                k = os.preadv(fd, [v[got:]], at + a + got)
            except OSError as e:
                if e.errno != errno.EINVAL or not got:
                    raise
                break       # O_DIRECT after a short read: the file's end, off a 4 KB block
            if k <= 0:
                break
            got += k
        if table is not None and got:
            _check_pages(p, table, page0 + a // PAGE, v[:got], path)
        return got

    return [(a, pool.submit(piece, a)) for a in range(0, len(view), PIECE)]


def _pieces_read(pieces) -> int:
    """Wait for _submit_pieces's reads; the bytes read in one run from the start."""
    got = 0
    for a, k in [(a, f.result()) for a, f in pieces]:
        if got == a:
            got += k
    return got


class _Chunk:
    __slots__ = ("i", "part", "r0", "r1", "e0", "e1", "p0", "p1")

    def __init__(self, i, part, r0, r1, e0, e1, width):
        self.i, self.part, self.r0, self.r1, self.e0, self.e1 = i, part, r0, r1, e0, e1
        self.p0, self.p1 = _pages(e0, e1, width)


class ListStream:
    """One direction's lists, cut into chunks of rows, brought to the GPU chunk by chunk from
    "host" (read once into pinned host memory, page-checked) or "ssd" (read per pass through
    three staging buffers by a reader thread, page-checked), through two device buffers and two
    streams: chunk i+1 is copied while chunk i's kernel runs. The lists' offsets stay in GPU
    memory, and the chunks `keep_plan` picks within `keep_bytes` stay there after their first
    copy (later passes neither read nor copy them). `each(launch)` makes one pass:
    launch(chunk, device buffer, index of the buffer's first edge, stream) for every chunk."""

    def __init__(self, graph, direction, source="ssd", chunk_bytes=None, direct=True,
                 keep_bytes=0, kind="adj", host_offsets=False):
        if source not in ("host", "ssd"):
            raise ValueError(f"source must be 'host' or 'ssd', got {source!r}")
        if kind not in ("adj", "wgt"):
            raise ValueError(f"kind must be 'adj' or 'wgt', got {kind!r}")
        #: the files streamed: "adj" the lists' IDs, "wgt" their weights (4 bytes each, passed on
        #: as their bits: the same chunks of rows, the weights of each list's edges)
        self.kind = kind
        cp = _module.cupy()
        _module.warm_cupyx()     # (while the lists are read: the callers settle() before any
        # kernel of their own that is not a RawKernel)
        self.graph = graph
        self.source = source
        self.n = graph.num_vertices
        self.w = int(graph.id_width) if kind == "adj" else 4
        self.direction = direction
        self.parts = [p for p in graph.parts(direction)]
        if chunk_bytes is None:                 # (None: chunk_bytes_for the lists' bytes)
            chunk_bytes = chunk_bytes_for(sum(p.num_edges for p in self.parts) * self.w)
        chunk_edges = max(1, int(chunk_bytes) // self.w)
        self.chunks = []
        self.offs = []
        #: host_offsets: the partitions' offsets kept in host memory too (uint64)
        self.host_offs = [] if host_offsets else None
        pairs = []
        for i, p in enumerate(self.parts):
            # checked on a thread meanwhile (offsets_checked(): before anything trusts them);
            # until then a damaged file can only make reads past the file's end (clamped)
            off = _offsets(p, check=False)
            pairs.append((p, off))
            self.offs.append(cp.asarray(off))
            if host_offsets:
                self.host_offs.append(off)
            ne = int(p.num_edges)
            for (r0, r1, e0, e1) in plan_chunks(off, chunk_edges):
                e0, e1 = min(max(e0, 0), ne), min(max(e1, 0), ne)
                if e1 > e0:
                    self.chunks.append(_Chunk(len(self.chunks), i, r0, r1, e0, e1, self.w))
        self._offsets_check = _OffsetsCheck(pairs)
        self.max_pages = max((c.p1 - c.p0 for c in self.chunks), default=1)
        self.keep = keep_plan([(c.e1 - c.e0) * self.w for c in self.chunks], keep_bytes)
        self.kept = {}           # chunk index -> its lists in GPU memory (after the first pass)
        self.direct = direct
        #: "host": chunk index -> (pinned buffer, its bytes: the chunk's pages), filled by the
        #: first pass as the chunks are read (the SSD reader's path, into buffers of their own,
        #: pinned by a thread of its own while the reader reads the chunk before); later passes copy
        #: from them. Lists without page tables (older datasets) are read whole first instead and
        #: checked by their file's CRC32 (host_parts).
        self.host = {}
        self.host_parts = None
        self._tabs = None
        if source == "host" and any(t is None for t, p in zip(self._tables(), self.parts)
                                    if p.num_edges):
            self.host_parts = [self._load_pinned(p, t) for p, t in zip(self.parts, self._tables())]
        self.bytes_moved = 0
        self._bufs = None
        self._started = None     # a pass's reads begun by start(), for the next each()
        #: "ssd" through the IO engine (ENGINE_READS): its ChunkReads, made on the first pass
        self._reads = None
        self._reads_done = None

    def offsets_checked(self):
        """Wait for the offsets' check (begun in __init__); raises DamagedDataError where it
        failed. Every use of the offsets but the reads and copies comes after this."""
        self._offsets_check.wait()

    def _checked_first(self, launch):
        """launch, after the offsets' check before its first call (the pass's first reads and
        copies go on meanwhile; its kernels index by the offsets)."""
        state = [False]

        def checked(*a):
            if not state[0]:
                self.offsets_checked()
                state[0] = True
            return launch(*a)
        return checked

    def _load_pinned(self, p, table):
        """One list file read straight into pinned host memory (READERS reads of PIECE bytes at
        a time, with O_DIRECT where the file system allows it: pinned memory is page-aligned),
        each piece's pages checked against the page table by the thread that read it (CRC32C in
        C); without a page table, the file's CRC32."""
        from concurrent.futures import ThreadPoolExecutor
        from ..integrity import _damaged, check_crc
        cp = _module.cupy()
        dt = np.dtype("<u4" if self.w == 4 else "<u8")
        nbytes = -(-(p.num_edges * self.w) // PAGE) * PAGE
        pin = cp.cuda.alloc_pinned_memory(max(nbytes, 1))
        raw = np.frombuffer(pin, dtype=np.uint8, count=max(nbytes, 1))
        if not p.num_edges:
            return pin, raw[:0].view(dt)
        fd, _ = self._open(p)         # O_DIRECT where allowed: no copy through the page cache
        try:
            with ThreadPoolExecutor(READERS, thread_name_prefix="graphene-gpu-load") as pool:
                got = _read_pieces(pool, fd, p, table, memoryview(raw)[:nbytes], 0, 0,
                                   self._path(p))
        finally:
            os.close(fd)
        if got < p.num_edges * self.w:
            raise _damaged(self._path(p), f"file too short: {got} bytes for {p.num_edges} edges")
        if table is None:
            check_crc(p, self.kind, raw[:got])
        return pin, raw[:p.num_edges * self.w].view(dt)

    # -- the reader (ssd) ------------------------------------------------------------------------
    def _tables(self):
        if self._tabs is None:
            from ..integrity import load_page_table
            k = self.kind
            self._tabs = [load_page_table(p, k, p.pages[k])
                          if k in p.pages and p.num_edges else None for p in self.parts]
        return self._tabs

    def _path(self, p):
        """p's file this stream reads (its lists, or their weights)."""
        return p.adj_path if self.kind == "adj" else p.wgt_path

    def _open(self, p):
        flags = os.O_RDONLY
        if self.direct and hasattr(os, "O_DIRECT"):
            try:
                return os.open(self._path(p), flags | os.O_DIRECT), True
            except OSError:
                pass
        return os.open(self._path(p), flags), False

    def _reader(self, free, full, stop, tables, todo, room=None):
        """Read every chunk of `todo` into a free staging buffer, hand it over (in order). The
        next chunk's pieces are handed to the readers while this one's are still read (up to
        FLIGHT chunks), so the disk's queue does not drain at each chunk's end."""
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor
        from ..integrity import _damaged
        fds = {}
        pool = ThreadPoolExecutor(READERS, thread_name_prefix="graphene-gpu-read")
        flight = deque()            # (chunk, buffer, its pieces) being read, in order
        k = 0
        try:
            while k < len(todo) or flight:
                if k < len(todo) and (not flight or (len(flight) < FLIGHT and
                                                     not free.empty())):
                    buf = free.get()       # (waited for only when no chunk is being read)
                    if self.source == "host":
                        room.release()
                    if isinstance(buf, BaseException):
                        raise buf
                    if stop.is_set() or buf is None:
                        return
                    c = todo[k]
                    k += 1
                    p = self.parts[c.part]
                    if c.part not in fds:
                        fds[c.part] = self._open(p)
                    nbytes = (c.p1 - c.p0) * PAGE
                    flight.append((c, buf, _submit_pieces(
                        pool, fds[c.part][0], p, tables[c.part], memoryview(buf[1])[:nbytes],
                        c.p0 * PAGE, c.p0, self._path(p))))
                    continue
                c, buf, pieces = flight.popleft()
                got = _pieces_read(pieces)
                if got < (c.e1 * self.w - c.p0 * PAGE):
                    raise _damaged(self._path(self.parts[c.part]),
                                   f"file too short: {c.p0 * PAGE + got} bytes, "
                                   f"edges up to byte {c.e1 * self.w}")
                full.put((c, buf))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            full.put((None, e))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)   # no read left into a buffer
            for fd, _ in fds.values():
                os.close(fd)

    def _pinned(self, c):
        """A pinned buffer of chunk c's pages, kept as the chunk's host copy ("host")."""
        cp = _module.cupy()
        nbytes = (c.p1 - c.p0) * PAGE
        pin = cp.cuda.alloc_pinned_memory(nbytes)
        return pin, np.frombuffer(pin, dtype=np.uint8, count=nbytes)

    def _pinner(self, free, stop, todo, room):
        """"host": pin each chunk's buffer in `todo`'s order, at most PIN_AHEAD ahead of the
        reader (`room`), and hand it to the reader through `free` (an error too)."""
        try:
            for c in todo:
                while not room.acquire(timeout=0.05):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                free.put(self._pinned(c))
        except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
            free.put(e)

    # -- one pass ----------------------------------------------------------------------------------
    def buffers(self):
        """(device buffers, streams, staging buffers, page tables), made on the first pass. The
        staging buffers ("ssd") are pinned as the first pass needs them (_pin_staging): pinning
        is slow (cudaHostAlloc, ~0.45 s per GB on the H200 machine), and the reader can read into
        the first while the others are pinned."""
        if self._bufs is None:
            cp = _module.cupy()
            cap = max((c.p1 - c.p0) * PAGE // self.w for c in self.chunks) if self.chunks else 1
            dev = [cp.empty(cap, dtype=cp.uint32 if self.w == 4 else cp.uint64) for _ in range(2)]
            streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
            tables = self._tables()
            self._bufs = (dev, streams, [], tables)
        return self._bufs

    def _pin_staging(self, staging, free, stop, count):
        """Pin `count` more staging buffers, appending each to `staging` and handing it to the
        reader through `free` (an error too)."""
        cp = _module.cupy()
        try:
            for _ in range(count):
                if stop.is_set():
                    return
                pin = cp.cuda.alloc_pinned_memory(self.max_pages * PAGE)
                b = (pin, np.frombuffer(pin, dtype=np.uint8, count=self.max_pages * PAGE))
                staging.append(b)
                free.put(b)
        except BaseException as e:  # noqa: BLE001 - handed to the reader, raised there
            free.put(e)

    def start(self):
        """Begin the next pass's reads now ("ssd", or "host"'s first pass): the reader fills the
        staging buffers while the caller sets up what its launches need; the next each() takes
        them. A no-op when that pass reads nothing from the files."""
        if self._started is not None:
            return
        self.buffers()
        todo = [c for c in self.chunks if c.i not in self.kept]
        if todo and self._by_engine():
            self._engine_reads().begin(self._extents(todo))
            self._started = {"engine": todo, "ahead": self._engine_ahead(todo)}
        elif todo and not (self.source == "host" and (self.host_parts is not None or
                                                      all(c.i in self.host for c in todo))):
            self._started = self._start_reads(todo)

    def each(self, launch) -> int:
        """One pass over every chunk (see the class); returns the bytes copied to the GPU. The
        caller's earlier work on the current stream is finished first; the pass's work is
        finished when this returns."""
        cp = _module.cupy()
        launch = self._checked_first(launch)
        dev_bufs, streams, staging, tables = self.buffers()
        cp.cuda.Device().synchronize()       # the streams below do not wait on the caller's
        moved = 0
        started, self._started = self._started, None
        done = self._launch_kept(launch, streams)
        todo = [c for c in self.chunks if c.i not in done]
        if started is None and self.source == "host" and (
                self.host_parts is not None or all(c.i in self.host for c in todo)):
            for i, c in enumerate(todo):      # every chunk in pinned memory: copies alone
                s, dbuf = streams[i % 2], dev_bufs[i % 2]
                if self.host_parts is not None:
                    at = self.host_parts[c.part][1][c.e0:c.e1].ctypes.data
                else:
                    at = self.host[c.i][1].ctypes.data + c.e0 * self.w - c.p0 * PAGE
                k = c.e1 - c.e0
                keep = self._keeper(c)
                dst = dbuf if keep is None else keep
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, at, k * self.w,
                                            cp.cuda.runtime.memcpyHostToDevice, s.ptr)
                moved += k * self.w
                if keep is not None:
                    self.kept[c.i] = keep
                launch(c, dst, c.e0, s)
        elif started is not None and "engine" in started or (
                started is None and todo and self._by_engine()):
            if started is None:
                self._engine_reads().begin(self._extents(todo))
            moved = self._each_from_engine(launch, dev_bufs, streams, todo,
                                           started and started["ahead"])
        elif todo or started is not None:
            moved = self._each_from_ssd(launch, dev_bufs, streams,
                                        started or self._start_reads(todo))
        for s in streams:
            s.synchronize()
        self.bytes_moved += moved
        return moved

    @property
    def kept_bytes(self) -> int:
        """Bytes of lists held in GPU memory between passes."""
        return sum(int(a.nbytes) for a in self.kept.values())

    def _keeper(self, c):
        """A device array for chunk c's edges when the plan keeps it (None: stream it; also when
        the GPU has no room after all: the chunk is then streamed every pass)."""
        if not self.keep[c.i]:
            return None
        cp = _module.cupy()
        try:
            return cp.empty(c.e1 - c.e0, dtype=cp.uint32 if self.w == 4 else cp.uint64)
        except cp.cuda.memory.OutOfMemoryError:
            self.keep[c.i] = False
            return None

    def _launch_kept(self, launch, streams) -> set:
        """Launch every chunk already in GPU memory; returns their indices."""
        for j, (i, arr) in enumerate(sorted(self.kept.items())):
            launch(self.chunks[i], arr, self.chunks[i].e0, streams[j % 2])
        return set(self.kept)

    def _start_reads(self, todo) -> dict:
        """The threads of one pass that reads `todo` from the files: the reader, and ("host")
        the pinner of the chunks' own buffers, else the staging buffers' pinner on the first
        pass."""
        dev_bufs, streams, staging, tables = self.buffers()
        free, full = queue.Queue(), queue.Queue()
        stop = threading.Event()
        room = pinner = None
        if self.source == "host":       # buffers of their own, pinned by a thread of their own
            room = threading.Semaphore(PIN_AHEAD)
            pinner = threading.Thread(target=self._pinner, args=(free, stop, todo, room),
                                      name="graphene-gpu-pin", daemon=True)
        else:
            for b in staging:
                free.put(b)
            if len(staging) < STAGING:
                pinner = threading.Thread(target=self._pin_staging,
                                          args=(staging, free, stop, STAGING - len(staging)),
                                          name="graphene-gpu-pin", daemon=True)
        if pinner is not None:
            pinner.start()
        t = threading.Thread(target=self._reader, args=(free, full, stop, tables, todo, room),
                             name="graphene-gpu-stream", daemon=True)
        t.start()
        return {"todo": todo, "free": free, "full": full, "stop": stop, "pinner": pinner,
                "reader": t}

    def _each_from_ssd(self, launch, dev_bufs, streams, started):
        cp = _module.cupy()
        moved = 0
        todo, free, full = (started[k] for k in ("todo", "free", "full"))
        pending = []           # (event after the copy, staging buffer): handed back when done
        held = []              # "host": pinned buffers of kept chunks, until their copies end
        try:
            for i in range(len(todo)):
                c, buf = full.get()
                if c is None:
                    raise buf
                s, dbuf = streams[i % 2], dev_bufs[i % 2]
                nbytes = (c.p1 - c.p0) * PAGE
                keep = self._keeper(c)
                if keep is None:
                    cp.cuda.runtime.memcpyAsync(dbuf.data.ptr, buf[1].ctypes.data, nbytes,
                                                cp.cuda.runtime.memcpyHostToDevice, s.ptr)
                else:               # only the chunk's edges, out of its first and last pages
                    at = c.e0 * self.w - c.p0 * PAGE
                    cp.cuda.runtime.memcpyAsync(keep.data.ptr, buf[1].ctypes.data + at,
                                                keep.nbytes, cp.cuda.runtime.memcpyHostToDevice,
                                                s.ptr)
                ev = cp.cuda.Event()
                ev.record(s)
                pending.append((ev, buf))
                moved += nbytes
                if keep is None:
                    # the buffer's edge 0 is the first edge of the chunk's first page
                    launch(c, dbuf, c.p0 * PAGE // self.w, s)
                else:
                    self.kept[c.i] = keep
                    launch(c, keep, c.e0, s)
                if self.source == "host":     # the chunk's host copy, for the later passes
                    pending.clear()
                    if keep is None:
                        self.host[c.i] = buf
                    else:       # (freed to CuPy's pinned pool now, the pinner could hand it
                        held.append(buf)     # to the reader while the copy still reads it)
                    continue
                while pending and (len(pending) > 1 or pending[0][0].done):
                    ev0, b0 = pending.pop(0)
                    ev0.synchronize()
                    free.put(b0)
        finally:
            self._stop_reads(started, [b for _, b in pending] if self.source != "host" else [])
            if held:
                for s in streams:
                    s.synchronize()
        return moved

    # -- the reads through the IO engine (ssd) ---------------------------------------------------
    def _by_engine(self) -> bool:
        return self.source == "ssd" and ENGINE_READS

    def _engine_reads(self):
        """The ChunkReads of this stream's files (made once; closed by close())."""
        if self._reads is None or self._reads.broken:
            import weakref
            if self._reads is not None:      # (one an error closed: its pools freed now)
                self._reads_done()
            from .engine_reads import ChunkReads
            from ..integrity import _damaged
            cp = _module.cupy()

            def register(addr, nbytes):
                cp.cuda.runtime.hostRegister(addr, nbytes, 0)
                return lambda: cp.cuda.runtime.hostUnregister(addr)
            self._reads = ChunkReads([self._path(p) for p in self.parts], self._tables(),
                                     _damaged, register, direct=self.direct,
                                     chunk_bytes=self.max_pages * PAGE)
            self._reads_done = weakref.finalize(self, self._reads.close)
        return self._reads

    def _extents(self, todo):
        """ChunkReads's chunks for `todo`: its pages from the first, up to the last edge's byte."""
        return [(c, c.part, c.p0 * PAGE, c.e1 * self.w) for c in todo]

    def _engine_chunk(self, j, c, dev_bufs, streams):
        """Chunk c (the pass's j-th) taken from the engines: each read copied from its slot
        into the chunk's device buffer (buffer and stream j % 2: its copies wait for chunk
        j-2's kernel) or into the array that keeps it. Returns (array, index of its first edge,
        stream, bytes moved) for the chunk's launch."""
        cp = _module.cupy()
        h2d = cp.cuda.runtime.memcpyHostToDevice
        s, dbuf = streams[j % 2], dev_bufs[j % 2]
        keep = self._keeper(c)
        lo = c.p0 * PAGE
        e0, e1 = c.e0 * self.w - lo, c.e1 * self.w - lo      # the edges' bytes in the chunk

        def copy(key, src, n, at):
            if keep is None:
                dst = dbuf.data.ptr + at
            else:                  # only the chunk's edges, out of its first and last pages
                a, b = max(at, e0), min(at + n, e1)
                if b <= a:
                    return None
                src, dst, n = src + a - at, keep.data.ptr + a - e0, b - a
            cp.cuda.runtime.memcpyAsync(dst, src, n, h2d, s.ptr)
            ev = cp.cuda.Event(block=False, disable_timing=True)
            ev.record(s)
            return ev
        if self._reads.next(copy) is not c:
            raise GrapheneError("the stream's reads came back out of order")
        if keep is None:
            # the buffer's edge 0 is the first edge of the chunk's first page
            return dbuf, lo // self.w, s, e1
        return keep, c.e0, s, keep.nbytes

    def _engine_ahead(self, todo):
        """start()'s thread: the pass's first chunks (one per device buffer) taken from the
        engines while the caller sets up: {"done": [(chunk, launch arguments)], "error"}."""
        dev_bufs, streams = self.buffers()[:2]
        out = {"done": [], "error": None}
        device = _module.cupy().cuda.Device()      # (the caller's current device)

        def work():
            try:
                device.use()
                for j, c in enumerate(todo[:len(dev_bufs)]):
                    out["done"].append((c, self._engine_chunk(j, c, dev_bufs, streams)))
            except BaseException as e:  # noqa: BLE001 - raised by the pass (each)
                out["error"] = e
        t = threading.Thread(target=work, name="graphene-gpu-ahead", daemon=True)
        t.start()
        out["thread"] = t
        return out

    def _each_from_engine(self, launch, dev_bufs, streams, todo, ahead=None):
        """One pass over `todo` read by the engines (their reads begun; ahead: the chunks
        start()'s thread took): each chunk taken (_engine_chunk), then launched."""
        reads = self._reads
        moved = 0
        try:
            done = []
            if ahead is not None:
                ahead["thread"].join()
                if ahead["error"] is not None:
                    raise ahead["error"]
                done = ahead["done"]
            for j, c in enumerate(todo):
                if j < len(done):
                    c, (arr, first, s, k) = done[j]
                else:
                    arr, first, s, k = self._engine_chunk(j, c, dev_bufs, streams)
                moved += k
                if arr is not dev_bufs[j % 2]:
                    self.kept[c.i] = arr
                launch(c, arr, first, s)
        except BaseException:
            if ahead is not None:
                ahead["thread"].join()      # (no two threads take from one engine)
            if reads.pending():
                reads.stop()
            raise
        return moved

    def _stop_reads(self, started, more=()):
        """End a pass's threads (its reads done or not): stop, then unblock a reader waiting
        for a buffer (the staging buffers, `more` buffers it is owed, None) and join it."""
        if "engine" in started:
            started["ahead"]["thread"].join()     # (its chunks' copies: waited for by stop)
            if self._reads is not None and self._reads.pending():
                self._reads.stop()
            return
        started["stop"].set()
        free, pinner = started["free"], started["pinner"]
        if pinner is not None:
            pinner.join()
        for b in list(more) + list(self.buffers()[2]):
            free.put(b)
        free.put(None)
        started["reader"].join()

    def close(self):
        """Stop the reads start() began for a pass that will not be made (an error in the
        caller's set-up): no thread is left reading."""
        started, self._started = self._started, None
        if started is not None:
            self._stop_reads(started)
        if self._reads is not None:
            self._reads_done()          # (the engines and their registered pools)
            self._reads = None

    def launch_rows(self, fn, c, dbuf, first, stream, *tail):
        """fn over chunk c's rows, one warp per row: fn(offsets, rows, first, ids, *tail[:-2],
        row0, n, bad) with tail = (kernel arguments..., bad flag)."""
        rows = c.r1 - c.r0
        p = self.parts[c.part]
        threads = 256
        blocks = (rows * 32 + threads - 1) // threads
        off = self.offs[c.part][c.r0:c.r1 + 1]
        *args, bad = tail
        fn((blocks,), (threads,), (off, np.int64(rows), np.int64(first), dbuf, *args,
                                   np.int64(p.row_lo + c.r0), np.int64(self.n), bad),
           stream=stream)

    def bad_ids(self, bad) -> None:
        if int(bad[0]):
            raise GrapheneError(f"{self.graph.name}: a neighbour ID outside [0, {self.n}) in "
                                f"the {self.direction}-lists (damaged data?)")


_LOAD_SRC = r"""
// The resident tier's load (load_resident): each row's list copied from the chunk to its slot
// in the CSR's int32 IDs, one warp per row; an ID outside the partition's columns [lo, hi) is
// flagged, never written.
template <typename ID>
__device__ void fill_slots_rows(const unsigned long long *__restrict__ off, long long rows,
                                long long first, const ID *__restrict__ idx,
                                const long long *__restrict__ slot, int *out,
                                unsigned long long lo, unsigned long long hi, long long row0,
                                long long n, int *bad) {
    long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (w >= rows) return;
    long long a = (long long)off[w] - first, b = (long long)off[w + 1] - first;
    long long d = slot[w] - a;
    for (long long k = a + lane; k < b; k += 32) {
        unsigned long long u = (unsigned long long)idx[k];
        if (u < lo || u >= hi) { *bad = 1; continue; }
        out[d + k] = (int)u;
    }
}
extern "C" __global__ void fill_slots32(const unsigned long long *off, long long rows,
        long long first, const unsigned int *idx, const long long *slot, int *out,
        unsigned long long lo, unsigned long long hi, long long row0, long long n, int *bad) {
    fill_slots_rows<unsigned int>(off, rows, first, idx, slot, out, lo, hi, row0, n, bad); }
extern "C" __global__ void fill_slots64(const unsigned long long *off, long long rows,
        long long first, const unsigned long long *idx, const long long *slot, int *out,
        unsigned long long lo, unsigned long long hi, long long row0, long long n, int *bad) {
    fill_slots_rows<unsigned long long>(off, rows, first, idx, slot, out, lo, hi, row0, n, bad); }
"""


def _fill_slots(width):
    """load_resident's kernel for `width`-byte IDs on the current device."""
    return _module.raw_function(_LOAD_SRC, "fill_slots32" if width == 4 else "fill_slots64")


def _slots(lists, order, n):
    """(device int64 indptr of the CSR, {partition: its rows' first slots}), worked out in GPU
    memory from the partitions' offsets there (on the host this took ~0.35 s at Kronecker scale
    24 while the reads could fill only the staging buffers): a partition's lists go behind the
    pieces of the same rows in the columns before it. The offsets may still be being checked:
    nothing here indexes by them."""
    cp = _module.cupy()
    indptr = cp.zeros(n + 1, dtype=cp.int64)
    for i in order:
        p = lists.parts[i]
        o = lists.offs[i].view(cp.int64)
        indptr[p.row_lo + 1:p.row_hi + 1] += o[1:] - o[:-1]
    indptr = cp.cumsum(indptr)
    fill = indptr[:-1].copy()
    slots = {}
    for i in order:
        p = lists.parts[i]
        o = lists.offs[i].view(cp.int64)
        slots[i] = fill[p.row_lo:p.row_hi].copy()
        fill[p.row_lo:p.row_hi] += o[1:] - o[:-1]
    return indptr, slots


def _one_partition(graph, direction) -> bool:
    """Whether `direction` is one partition of every row (a 1x1 grid)."""
    ps = graph.parts(direction)
    return len(ps) == 1 and ps[0].row_lo == 0 and ps[0].row_hi == graph.num_vertices


def resident_loadable(graph) -> bool:
    """Whether load_resident can load this dataset: every list file, and on a weighted dataset
    every out-partition's weights file, has its page table (format 2) to check the pages it reads
    against."""
    def kinds(d):
        return ("adj", "wgt") if graph.weighted and d == "out" else ("adj",)
    return all(
        k in p.pages for d in ("out", "in") if d == "out" or graph.in_partitions is not None
        for p in graph.parts(d) if p.num_edges for k in kinds(d))


#: load_resident's largest chunk: its three staging buffers are pinned as the load starts
#: (~0.45 s per GB on the H200 machine: 3 x 256 MB took ~0.35 s of Kronecker 24's 2.0 s load)
LOAD_CHUNK_BYTES = 64 << 20


def load_chunk_bytes(graph, direction, width=None) -> int:
    """load_resident's chunk size for one direction's lists (IDs, or `width`-byte weights)."""
    w = int(graph.id_width) if width is None else int(width)
    return min(chunk_bytes_for(sum(p.num_edges for p in graph.parts(direction)) * w),
               LOAD_CHUNK_BYTES)


def load_resident_bytes(graph, direction) -> int:
    """GPU memory load_resident holds while it loads one direction, beyond the CSR itself: the
    partitions' offsets and slots (8 bytes a row each) and two chunk buffers; on a grid of
    several partitions also the prefix sum's and the slots' working rows (16 bytes a vertex)
    and one partition's degrees (_slots)."""
    parts = graph.parts(direction)
    rows = sum(p.row_hi - p.row_lo + 1 for p in parts)
    work = 0 if _one_partition(graph, direction) else \
        16 * (graph.num_vertices + 1) + 16 * max(p.row_hi - p.row_lo + 1 for p in parts)
    return 16 * rows + work + 2 * (load_chunk_bytes(graph, direction) + 2 * PAGE)


def load_resident(graph, direction, check=None, chunk_bytes=None, kind="adj"):
    """One direction's CSR as the resident tier holds it: (indptr: device int64[n+1], the lists'
    int32 IDs in one device array, each list at its CSR slot). Read in chunks as stream-ssd
    reads them (O_DIRECT, every 4 KB page checked; the next chunk read while this one is
    copied), each chunk's rows put at their slots by a kernel that also checks that each ID
    lies in its partition's columns. A partition's lists go behind the pieces of the same rows
    in the columns before it, so every list stays sorted. No host copy of the lists is made.
    check: called after each chunk (may raise to stop the load). chunk_bytes: ListStream's.
    kind "wgt": the lists' weights instead, at the same slots (float32; a weighted dataset's
    SSSP: 11-12 s at Kronecker scale 24 assembled on the host and copied)."""
    lists = ListStream(graph, direction, "ssd", chunk_bytes or load_chunk_bytes(
        graph, direction, None if kind == "adj" else 4), kind=kind)
    lists.start()            # the reads begin while the slots are worked out
    try:
        return _load_into_slots(graph, lists, direction, check, kind)
    finally:
        lists.close()        # (reads begun for a pass not made: stopped)


def _load_into_slots(graph, lists, direction, check, kind):
    """load_resident's set-up and pass, its reads begun."""
    cp = _module.cupy()
    n = graph.num_vertices
    # the offsets are still being checked (the pass waits for that before its first kernel):
    # the edges' count is the manifest's, which the check holds them to
    m = sum(int(p.num_edges) for p in lists.parts)
    order = sorted(range(len(lists.parts)), key=lambda j: lists.parts[j].index)
    if _one_partition(graph, direction):
        # one partition of every row (a 1x1 grid): its offsets, in GPU memory already, are the
        # CSR's, and each list's slot is its offset (at Kronecker scale 24, 0.35 s of host work
        # while the reads could fill only the three staging buffers)
        indptr = lists.offs[0].view(cp.int64)
        slots = {0: indptr[:-1]}
    else:
        indptr, slots = _slots(lists, order, n)
    out = cp.empty(max(m, 1), dtype=cp.int32)[:m]
    if m == 0:
        lists.offsets_checked()
        return indptr, out.view(cp.float32) if kind == "wgt" else out
    bad = cp.zeros(1, dtype=cp.int32)
    fn = _fill_slots(lists.w)

    def launch(c, dbuf, first, s):
        p = lists.parts[c.part]
        # weights go as their bits, unchecked (their pages' CRCs were)
        lo, hi = (p.col_lo, p.col_hi) if kind == "adj" else (0, 1 << 32)
        lists.launch_rows(fn, c, dbuf, first, s, slots[c.part][c.r0:c.r1], out,
                          np.uint64(lo), np.uint64(hi), bad)
        if check is not None:
            check()

    lists.each(launch)
    lists.offsets_checked()      # (also when no chunk was launched)
    if kind == "wgt":
        return indptr, out.view(cp.float32)
    if int(bad[0]):
        raise GrapheneError(f"{graph.name}: a neighbour ID outside its partition's columns in "
                            f"the {direction}-lists (damaged data?)")
    return indptr, out
