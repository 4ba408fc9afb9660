"""PageRank on the GPU with the edge lists streamed in per iteration (issue 15's lower tiers).

Only O(|V|) state lives in GPU memory: scores, contributions, sums, the out-degrees and the
offsets of the lists pulled (the in-lists, or the out-lists of an undirected dataset). The lists
themselves go through the GPU in chunks of rows, every iteration:
- "host": every list file read once (CRC32 checked) into pinned host memory; a chunk is one
  explicit asynchronous copy (Subway/HyTGraph style: whole chunks at the bus's bandwidth, where
  zero-copy gathers pay per 32-byte sector);
- "ssd": nothing held on the host but a few staging buffers: a reader thread reads each chunk's
  4 KB pages from the dataset's files (O_DIRECT where the file system allows it) and checks their
  CRC32C against the page tables while the GPU sums the chunk before it.
Two device buffers and two streams: chunk i+1 is copied while chunk i is summed. A chunk is a run
of rows of one partition with at most `chunk_edges` edges (a longer list is a chunk of its own).
The kernel sums one row per warp and adds it into the row's sum atomically (a row's list may be
split over column partitions); a neighbour ID out of range is flagged, never read.

The iteration is GAPBS's (the CPU pull path's and gpu.algorithms.pagerank's): score'[v] =
(1-alpha)/n + alpha * (sum of score[u]/outdeg[u] over v's in-list + D/n), D the dangling mass; stop
when the L1 change is below tol or after max_iter.
"""
from __future__ import annotations

import os
import queue
import threading
import time

import numpy as np

from ..errors import GrapheneError
from . import _module

PAGE = 4096

_SRC = r"""
template <typename ID>
__device__ void pr_stream_rows(const unsigned long long *__restrict__ off, long long rows,
                               long long first, const ID *__restrict__ idx,
                               const double *__restrict__ contrib, double *sums, long long row0,
                               long long n, int *bad) {
    long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (w >= rows) return;
    long long a = (long long)off[w] - first, b = (long long)off[w + 1] - first;
    double s = 0.0;
    for (long long k = a + lane; k < b; k += 32) {
        unsigned long long u = (unsigned long long)idx[k];
        if (u >= (unsigned long long)n) { *bad = 1; continue; }
        s += contrib[u];
    }
    for (int o = 16; o; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0 && b > a) atomicAdd(&sums[row0 + w], s);
}
extern "C" __global__ void pr_stream32(const unsigned long long *off, long long rows, long long first,
        const unsigned int *idx, const double *contrib, double *sums, long long row0, long long n,
        int *bad) { pr_stream_rows<unsigned int>(off, rows, first, idx, contrib, sums, row0, n, bad); }
extern "C" __global__ void pr_stream64(const unsigned long long *off, long long rows, long long first,
        const unsigned long long *idx, const double *contrib, double *sums, long long row0,
        long long n, int *bad) {
    pr_stream_rows<unsigned long long>(off, rows, first, idx, contrib, sums, row0, n, bad); }
"""
_kernels: dict = {}


def _kernel(width):
    cp = _module.cupy()
    dev = cp.cuda.Device().id
    if dev not in _kernels:
        mod = cp.RawModule(code=_SRC, options=("-std=c++17",))
        _kernels[dev] = (mod.get_function("pr_stream32"), mod.get_function("pr_stream64"))
    return _kernels[dev][0 if width == 4 else 1]


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


def _offsets(p):
    """A partition's offsets file (uint64), checked: CRC32 as recorded, then structure."""
    from ..integrity import check_offsets
    try:
        off = np.fromfile(p.off_path, dtype="<u8")
    except OSError as e:
        raise GrapheneError(f"{p.off_path}: cannot read offsets ({e.strerror})") from None
    check_offsets(p, off)
    return off.astype(np.uint64, copy=False)


def _check_pages(p, table, first, data):
    """The CRC32C of each 4 KB page of `data` (pages first.. of p's list file) against the page
    table; a mismatch is DamagedDataError naming the file and the byte offset."""
    from .. import _uring
    from ..integrity import _damaged
    crcs = np.frombuffer(_uring.page_crcs(data, PAGE), "<u4")
    want = table[first:first + len(crcs)]
    bad = np.flatnonzero(crcs != want)
    if bad.size:
        i = int(bad[0])
        raise _damaged(p.adj_path, f"the page at byte offset {(first + i) * PAGE} has CRC32C "
                                   f"{int(crcs[i]):08x}, the dataset recorded {int(want[i]):08x}")


def _pages(e0, e1, width):
    """The 4 KB pages [p0, p1) that hold edges e0..e1 of a file of `width`-byte IDs."""
    return (e0 * width) // PAGE, -(-(e1 * width) // PAGE)


class _Chunk:
    __slots__ = ("part", "r0", "r1", "e0", "e1", "p0", "p1")

    def __init__(self, part, r0, r1, e0, e1, width):
        self.part, self.r0, self.r1, self.e0, self.e1 = part, r0, r1, e0, e1
        self.p0, self.p1 = _pages(e0, e1, width)


class StreamedPageRank:
    """The state and plan of a streamed PageRank on one dataset (see the module)."""

    def __init__(self, graph, source="ssd", chunk_bytes=256 << 20, direct=True):
        if source not in ("host", "ssd"):
            raise ValueError(f"source must be 'host' or 'ssd', got {source!r}")
        cp = _module.cupy()
        self.graph = graph
        self.source = source
        self.n = n = graph.num_vertices
        self.w = int(graph.id_width)
        if not graph.directed:
            direction = "out"
        elif graph.in_partitions is not None:
            direction = "in"
        else:
            raise GrapheneError(f"{graph.name}: streaming PageRank to the GPU pulls over in-lists; "
                                f"this directed dataset has none (partition with --in-edges)")
        self.parts = [p for p in graph.parts(direction)]
        self.direction = direction
        chunk_edges = max(1, int(chunk_bytes) // self.w)
        self.chunks = []
        offs_d = []
        for i, p in enumerate(self.parts):
            off = _offsets(p)
            offs_d.append(cp.asarray(off))
            for (r0, r1, e0, e1) in plan_chunks(off, chunk_edges):
                if e1 > e0:
                    self.chunks.append(_Chunk(i, r0, r1, e0, e1, self.w))
        self.offs = offs_d
        self.max_pages = max((c.p1 - c.p0 for c in self.chunks), default=1)
        deg = np.zeros(n, dtype=np.int64)
        for p in graph.parts("out"):
            deg[p.row_lo:p.row_hi] += np.diff(_offsets(p).astype(np.int64))
        self.outdeg = cp.asarray(deg.astype(np.float64))
        self.dangling = cp.asarray(deg == 0)
        self.direct = direct
        self.host = None
        if source == "host":
            self.host = [self._load_pinned(p, t) for p, t in zip(self.parts, self._tables())]
        self.bytes_moved = 0

    def _load_pinned(self, p, table, piece=64 << 20):
        """One list file read straight into pinned host memory, its pages checked against the
        page table as they arrive (CRC32C in C); without a page table, the file's CRC32."""
        from ..integrity import _damaged, check_crc
        cp = _module.cupy()
        dt = np.dtype("<u4" if self.w == 4 else "<u8")
        nbytes = -(-(p.num_edges * self.w) // PAGE) * PAGE
        pin = cp.cuda.alloc_pinned_memory(max(nbytes, 1))
        raw = np.frombuffer(pin, dtype=np.uint8, count=max(nbytes, 1))
        got = 0
        if not p.num_edges:
            return pin, raw[:0].view(dt)
        with open(p.adj_path, "rb", buffering=0) as f:
            while got < nbytes:
                end = min(nbytes, got + piece)
                k = 0
                while got + k < end:         # whole pages per check (short reads go on)
                    r = f.readinto(memoryview(raw)[got + k:end])
                    if not r:
                        break
                    k += r
                if not k:
                    break
                if table is not None:
                    _check_pages(p, table, got // PAGE, memoryview(raw)[got:got + k])
                got += k
        if got < p.num_edges * self.w:
            raise _damaged(p.adj_path, f"file too short: {got} bytes for {p.num_edges} IDs")
        if table is None:
            check_crc(p, "adj", raw[:got])
        return pin, raw[:p.num_edges * self.w].view(dt)

    # -- the reader (ssd) ------------------------------------------------------------------------
    def _tables(self):
        from ..integrity import load_page_table
        return [load_page_table(p, "adj", p.pages["adj"]) if "adj" in p.pages and p.num_edges
                else None for p in self.parts]

    def _open(self, p):
        flags = os.O_RDONLY
        if self.direct and hasattr(os, "O_DIRECT"):
            try:
                return os.open(p.adj_path, flags | os.O_DIRECT), True
            except OSError:
                pass
        return os.open(p.adj_path, flags), False

    def _reader(self, free, full, stop, tables):
        """Read every chunk into a free staging buffer, check its pages, hand it over."""
        from ..integrity import _damaged
        fds = {}
        try:
            for c in self.chunks:
                buf = free.get()
                if stop.is_set():
                    return
                p = self.parts[c.part]
                if c.part not in fds:
                    fds[c.part] = self._open(p)
                fd, _ = fds[c.part]
                nbytes = (c.p1 - c.p0) * PAGE
                view = memoryview(buf[1])[:nbytes]
                got = 0
                while got < nbytes:
                    k = os.preadv(fd, [view[got:]], c.p0 * PAGE + got)
                    if k <= 0:
                        break
                    got += k
                if got < (c.e1 * self.w - c.p0 * PAGE):
                    raise _damaged(p.adj_path, f"file too short: {c.p0 * PAGE + got} bytes, "
                                               f"edges up to byte {c.e1 * self.w}")
                if tables[c.part] is not None:
                    _check_pages(p, tables[c.part], c.p0, view[:got])
                full.put((c, buf))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            full.put((None, e))
        finally:
            for fd, _ in fds.values():
                os.close(fd)

    # -- the iterations --------------------------------------------------------------------------
    def run(self, alpha, tol, max_iter, stats=None):
        cp = _module.cupy()
        n = self.n
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        score = cp.full(n, 1.0 / n, dtype=cp.float64)
        sums = cp.zeros(n, dtype=cp.float64)
        contrib = cp.zeros(n, dtype=cp.float64)
        bad = cp.zeros(1, dtype=cp.int32)
        cap_edges = max((c.p1 - c.p0) * PAGE // self.w for c in self.chunks) if self.chunks else 1
        dev_bufs = [cp.empty(cap_edges, dtype=cp.uint32 if self.w == 4 else cp.uint64)
                    for _ in range(2)]
        streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
        kern = _kernel(self.w)
        tables = self._tables() if self.source == "ssd" else None
        staging = []
        if self.source == "ssd":
            for _ in range(3):
                pin = cp.cuda.alloc_pinned_memory(self.max_pages * PAGE)
                staging.append((pin, np.frombuffer(pin, dtype=np.uint8,
                                                   count=self.max_pages * PAGE)))
        err, it = np.inf, 0
        steps = []
        while it < max_iter:
            t0 = time.perf_counter()
            cp.divide(score, self.outdeg, out=contrib)
            contrib[self.dangling] = 0.0
            dmass = float(score[self.dangling].sum())
            sums.fill(0)
            cp.cuda.Device().synchronize()     # the streams below do not wait on this one
            moved = self._iteration(contrib, sums, bad, dev_bufs, streams, kern, staging, tables)
            for s in streams:
                s.synchronize()
            if int(bad[0]):
                raise GrapheneError(f"{self.graph.name}: a neighbour ID outside [0, {n}) in the "
                                    f"{self.direction}-lists (damaged data?)")
            new = (1.0 - alpha) / n + alpha * (sums + dmass / n)
            err = float(cp.abs(new - score).sum())
            score = new
            it += 1
            self.bytes_moved += moved
            steps.append({"iteration": it, "error": err, "seconds": time.perf_counter() - t0,
                          "bytes_moved": moved, "chunks": len(self.chunks),
                          "mode": f"gpu-stream-{self.source}"})
            if err < tol:
                break
        if stats is not None:
            stats.update(iterations=it, error=err, supersteps=steps, tier=f"stream-{self.source}",
                         bytes_moved=self.bytes_moved)
        return cp.asnumpy(score)

    def _launch(self, c, dbuf, first, contrib, sums, bad, stream, kern):
        rows = c.r1 - c.r0
        p = self.parts[c.part]
        threads = 256
        blocks = (rows * 32 + threads - 1) // threads
        off = self.offs[c.part][c.r0:c.r1 + 1]
        kern((blocks,), (threads,), (off, np.int64(rows), np.int64(first), dbuf, contrib, sums,
                                     np.int64(p.row_lo + c.r0), np.int64(self.n), bad),
             stream=stream)

    def _iteration(self, contrib, sums, bad, dev_bufs, streams, kern, staging, tables):
        cp = _module.cupy()
        moved = 0
        if self.source == "host":
            for i, c in enumerate(self.chunks):
                s, dbuf = streams[i % 2], dev_bufs[i % 2]
                _, h = self.host[c.part]
                src = h[c.e0:c.e1]
                k = c.e1 - c.e0
                cp.cuda.runtime.memcpyAsync(dbuf.data.ptr, src.ctypes.data, k * self.w,
                                            cp.cuda.runtime.memcpyHostToDevice, s.ptr)
                moved += k * self.w
                self._launch(c, dbuf, c.e0, contrib, sums, bad, s, kern)
            return moved
        free, full = queue.Queue(), queue.Queue()
        for b in staging:
            free.put(b)
        stop = threading.Event()
        t = threading.Thread(target=self._reader, args=(free, full, stop, tables),
                             name="graphene-gpu-stream", daemon=True)
        t.start()
        pending = []           # (event after the copy, staging buffer): handed back when done
        try:
            for i in range(len(self.chunks)):
                c, buf = full.get()
                if c is None:
                    raise buf
                s, dbuf = streams[i % 2], dev_bufs[i % 2]
                nbytes = (c.p1 - c.p0) * PAGE
                cp.cuda.runtime.memcpyAsync(dbuf.data.ptr, buf[1].ctypes.data, nbytes,
                                            cp.cuda.runtime.memcpyHostToDevice, s.ptr)
                ev = cp.cuda.Event()
                ev.record(s)
                pending.append((ev, buf))
                moved += nbytes
                # the kernel's edge 0 is the first edge of the chunk's first page
                self._launch(c, dbuf, c.p0 * PAGE // self.w, contrib, sums, bad, s, kern)
                while pending and (len(pending) > 1 or pending[0][0].done):
                    ev0, b0 = pending.pop(0)
                    ev0.synchronize()
                    free.put(b0)
        finally:
            stop.set()
            for _, b in pending:
                free.put(b)
            for b in staging:
                free.put(b)          # unblock a reader waiting for a buffer
            t.join()
        return moved


def pagerank(graph, source="ssd", alpha=0.85, tol=1e-4, max_iter=20, chunk_bytes=256 << 20,
             stats=None, direct=True):
    """Pull PageRank scores (float64, sum 1) with the lists streamed per iteration from `source`
    ("host": pinned host memory; "ssd": the dataset's files)."""
    sp = StreamedPageRank(graph, source=source, chunk_bytes=chunk_bytes, direct=direct)
    return sp.run(alpha, tol, max_iter, stats=stats)
