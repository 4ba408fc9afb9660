"""PageRank, SpMV and WCC on the GPU with the edge lists streamed in (issue 15's lower tiers).

Only O(|V|) state lives in GPU memory: PageRank's scores, contributions, sums and out-degrees,
SpMV's x and y, WCC's labels; and the offsets of the lists streamed (PageRank: the in-lists, or
the out-lists of an undirected dataset; SpMV and WCC: the out-lists). The lists themselves go
through the GPU in chunks of rows (ListStream), every PageRank iteration, once for SpMV and WCC:
- "host": the first pass reads each chunk as "ssd" does, but into a pinned buffer of its own
  (pinned by a thread of its own while the reader reads the chunk before) that it keeps; every
  later pass copies the chunks from there, each in one explicit asynchronous copy
  (Subway/HyTGraph style: whole chunks at the bus's bandwidth, where zero-copy gathers pay per
  32-byte sector). So the read overlaps the first pass, where it used to come before it (pinning
  8 GB took 3.6 s on the H200 machine, reading it 4.7-7.1 s);
- "ssd": nothing held on the host but a few staging buffers: a reader thread reads each chunk's
  4 KB pages from the dataset's files (O_DIRECT where the file system allows it; 4 reads of 8 MB
  at a time) and checks their CRC32C against the page tables while the GPU works on the chunk
  before it.
Two device buffers and two streams: chunk i+1 is copied while chunk i is summed. Chunks that fit
what the GPU budget leaves after the state and the offsets stay in GPU memory after their first
copy (`keep_bytes`, whole chunks in order; `keep_plan`): a PageRank iteration then moves only the
rest, so one run mixes the resident tier with a streamed one, and the SSD source reads only the
rest. With no budget (`--gpu-mem` unset) that is as much as 90% of the GPU's free memory holds. A chunk is a run
of rows of one partition with at most `chunk_edges` edges (a longer list is a chunk of its own).
The kernel sums one row per warp and adds it into the row's sum atomically (a row's list may be
split over column partitions); a neighbour ID out of range is flagged, never read.

WCC is union-find (GAPBS Afforest's link: each edge hooks the larger root under the smaller by
compare-and-swap), one pass over every edge and a compress, so its labels are each component's
smallest vertex ID, as the CPU path's; a directed dataset's out-lists hold every edge once, which
is all union-find needs. SpMV sums x over each out-list (unweighted datasets).

PageRank's iteration is GAPBS's (the CPU pull path's and gpu.algorithms.pagerank's): score'[v] =
(1-alpha)/n + alpha * (sum of score[u]/outdeg[u] over v's in-list + D/n), D the dangling mass; stop
when the L1 change is below tol or after max_iter.
"""
from __future__ import annotations

import errno
import os
import queue
import threading
import time

import numpy as np

from ..errors import GrapheneError
from . import _module

PAGE = 4096
#: Lists are read in pieces of PIECE bytes, READERS at a time, each checked by its reader (one
#: synchronous reader reached 0.69-0.99 GB/s of the GPU machine's disk, where the CPU path's
#: io_uring got 1.25 GB/s; and 1.35 GB/s from the page cache into pinned memory)
PIECE = 8 << 20
READERS = 4

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

// WCC by union-find over the streamed lists (GAPBS Afforest's link): every edge (v, u) links the
// trees of v and u, the larger root hooked under the smaller by compare-and-swap, so that each
// tree's root is its smallest vertex; one pass over every edge, then compress.
template <typename L>
__device__ void uf_link(L u, L v, L *comp) {
    volatile L *c = comp;
    L p1 = c[u], p2 = c[v];
    while (p1 != p2) {
        L high = p1 > p2 ? p1 : p2, low = p1 > p2 ? p2 : p1;
        L ph = c[high];
        if (ph == low) break;
        if (ph == high && atomicCAS(comp + high, high, low) == high) break;
        p1 = c[c[high]];
        p2 = c[low];
    }
}
template <typename ID, typename L>
__device__ void wcc_link_rows(const unsigned long long *__restrict__ off, long long rows,
                              long long first, const ID *__restrict__ idx, L *comp,
                              long long row0, long long n, int *bad) {
    long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (w >= rows) return;
    long long a = (long long)off[w] - first, b = (long long)off[w + 1] - first;
    L v = (L)(row0 + w);
    for (long long k = a + lane; k < b; k += 32) {
        unsigned long long u = (unsigned long long)idx[k];
        if (u >= (unsigned long long)n) { *bad = 1; continue; }
        uf_link<L>(v, (L)u, comp);
    }
}
extern "C" __global__ void wcc_link32(const unsigned long long *off, long long rows, long long first,
        const unsigned int *idx, unsigned int *comp, long long row0, long long n, int *bad) {
    wcc_link_rows<unsigned int, unsigned int>(off, rows, first, idx, comp, row0, n, bad); }
extern "C" __global__ void wcc_link64(const unsigned long long *off, long long rows, long long first,
        const unsigned long long *idx, unsigned long long *comp, long long row0, long long n,
        int *bad) {
    wcc_link_rows<unsigned long long, unsigned long long>(off, rows, first, idx, comp, row0, n,
                                                          bad); }
template <typename L>
__device__ void uf_compress(L *comp, long long n) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    L c = comp[v];
    while (c != comp[c]) c = comp[c];
    comp[v] = c;
}
extern "C" __global__ void wcc_compress32(unsigned int *comp, long long n) {
    uf_compress<unsigned int>(comp, n); }
extern "C" __global__ void wcc_compress64(unsigned long long *comp, long long n) {
    uf_compress<unsigned long long>(comp, n); }

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
_kernels: dict = {}


def _function(name):
    """A kernel of _SRC on the current device (the module compiled once per device)."""
    cp = _module.cupy()
    dev = cp.cuda.Device().id
    if dev not in _kernels:
        _kernels[dev] = cp.RawModule(code=_SRC, options=("-std=c++17",))
    return _kernels[dev].get_function(name)


def _kernel(width):
    return _function("pr_stream32" if width == 4 else "pr_stream64")


#: Rates of the tier model (H100/H200 machines of this project, BENCHMARKS.md "Streamed tiers"):
#: the bus for whole chunks (48.6-51 GB/s of 54.6-55.4); the lists read from the GPU machine's
#: disk by READERS parallel O_DIRECT readers, page-checked (1.41 GB/s streaming WCC at scale 25
#: on the H100 machine; 1.68-1.71 GB/s on the H200's: tools/profile_gpu_pinned_load.py), as
#: stream-ssd reads every pass and stream-host its first
BUS_BYTES_PER_S = 48e9
SSD_BYTES_PER_S = 1.4e9
#: pinning host memory (cudaHostAlloc): 8 GB in 3.63 s on the H200 machine
#: (tools/profile_gpu_pinned_load.py); stream-host pins its copy while its first pass reads
PIN_BYTES_PER_S = 2.2e9
#: chunks stream-host's pinning thread may run ahead of its reader
PIN_AHEAD = 3
#: a pass of the streamed kernels over lists kept in GPU memory (PageRank's resident iteration
#: summed 4.46 GB of CSR in 14.8 ms on an H100 at scale 25: ~300 GB/s; taken lower)
KEPT_PASS_BYTES_PER_S = 200e9
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


#: GPU memory a streamed run holds per vertex besides the kept chunks: PageRank's score, sums,
#: contributions, out-degrees, the new scores and a temporary (8 B each), the dangling flags
STREAM_STATE_BYTES_PER_VERTEX = 56


def keep_budget(graph, gpu_mem, stream_bytes, probe=True) -> int:
    """Bytes of streamed lists a multi-pass run may keep in GPU memory (see the module): the
    budget (`gpu_mem`; unset: 90% of the free GPU memory) less the O(|V|) state, the lists'
    offsets and the two chunk buffers, at most `stream_bytes`, never below 0. probe=False: no
    question to the GPU (a plan made before CuPy is imported): with no budget given, everything
    is taken to fit, as the resident tier is."""
    from .device_graph import _budget
    n = int(graph.num_vertices)
    if gpu_mem is None and not probe:
        return int(stream_bytes)
    try:
        budget = _budget(gpu_mem)
    except ImportError:          # no CuPy: nothing can be kept (the run says why it cannot run)
        return 0
    dirs = 2 if getattr(graph, "in_partitions", None) is not None else 1
    held = STREAM_STATE_BYTES_PER_VERTEX * n + 8 * (n + 1) * dirs + 2 * CHUNK_BYTES
    return int(max(0, min(int(stream_bytes), budget - held)))


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


def tier_costs(graph, gpu_mem, stream_bytes, host_free, passes=1.0, resident_ok=True,
               probe=True) -> dict:
    """Estimated seconds of each tier that can hold this run, for one command as a user runs it
    (the dataset's load counted, unless an earlier run of this process left it in GPU memory):
    resident: the CSR loaded and `passes` passes over it in GPU memory (only while it fits the
    budget); stream-host: the first pass reads the lists as stream-ssd does, into pinned memory
    pinned meanwhile (the slower of the two), and copies them over the bus; later passes copy
    the lists not kept in GPU memory (only while the lists fit half of `host_free`, the memory
    available): one pass is never cheaper than stream-ssd's; stream-ssd: a read of every
    list on the first pass, of those not kept on later ones. Kept lists cost a GPU pass each
    later pass (keep_budget; KEPT_PASS_BYTES_PER_S). probe=False: no question to the GPU (a plan made before CuPy is
    imported): the resident tier is taken to fit."""
    from .device_graph import STATE_BYTES_PER_VERTEX, _budget
    from .policy import GPU_PASS_BYTES_PER_S
    from .resident import is_resident
    out = {}
    if resident_ok:
        n, m, w = graph.num_vertices, graph.num_edges, int(graph.id_width)
        dirs = 2 if graph.in_partitions is not None else 1
        try:
            budget = _budget(gpu_mem) if probe or gpu_mem is not None else None
        except ImportError:          # no CuPy: the resident path says so (or a test stands in)
            budget = None
        csr = (n + 1) * 8 * dirs + m * w * dirs
        if budget is None or csr + STATE_BYTES_PER_VERTEX * n <= budget:
            load = 0.0 if is_resident(graph, gpu_mem) else csr / resident_load_bps(graph)
            out["resident"] = load + passes * csr / GPU_PASS_BYTES_PER_S
    later = max(float(passes) - 1.0, 0.0)
    keep = keep_budget(graph, gpu_mem, stream_bytes, probe) if later else 0
    kept = later * keep / KEPT_PASS_BYTES_PER_S
    rest = stream_bytes - keep
    # (the SSD first: a tie, as one pass makes, goes to the tier that pins nothing)
    out["stream-ssd"] = (stream_bytes + later * rest) / SSD_BYTES_PER_S + kept
    if stream_bytes <= host_free // 2:
        # the first pass reads as stream-ssd does while another thread pins the host copy
        out["stream-host"] = max(stream_bytes / SSD_BYTES_PER_S, stream_bytes / PIN_BYTES_PER_S) \
            + (stream_bytes + later * rest) / BUS_BYTES_PER_S + kept
    return out


def auto_tier(graph, gpu_mem, stream_bytes, host_free, passes=1.0, resident_ok=True) -> str:
    """--gpu-tier auto: the tier of least estimated time (tier_costs), for one whole command:
    a dataset already in GPU memory stays there; else one pass (WCC's union-find, SpMV) or a
    dozen (PageRank) streamed from pinned host memory costs less than assembling and loading the
    CSR (7.0 s for WCC at scale 23 on an H100, against 0.68 s streamed from host memory and 1.05
    from a cold disk); the SSD when host memory is short and few passes are due."""
    costs = tier_costs(graph, gpu_mem, stream_bytes, host_free, passes, resident_ok)
    return min(costs, key=costs.get)


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


def _read_pieces(pool, fd, p, table, view, at, page0) -> int:
    """Fill `view` from byte `at` of fd (pages page0.. of p's list file) in pieces of PIECE
    bytes read by the pool's threads, each piece's pages checked (when there is a page table)
    by the thread that read it. Returns how many bytes were read in one run from the start
    (less: the file ended)."""
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
            _check_pages(p, table, page0 + a // PAGE, v[:got])
        return got

    starts = range(0, len(view), PIECE)
    got = 0
    for a, k in zip(starts, [f.result() for f in [pool.submit(piece, a) for a in starts]]):
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
                 keep_bytes=0):
        if source not in ("host", "ssd"):
            raise ValueError(f"source must be 'host' or 'ssd', got {source!r}")
        cp = _module.cupy()
        self.graph = graph
        self.source = source
        self.n = graph.num_vertices
        self.w = int(graph.id_width)
        self.direction = direction
        self.parts = [p for p in graph.parts(direction)]
        if chunk_bytes is None:                 # (None: chunk_bytes_for the lists' bytes)
            chunk_bytes = chunk_bytes_for(sum(p.num_edges for p in self.parts) * self.w)
        chunk_edges = max(1, int(chunk_bytes) // self.w)
        self.chunks = []
        self.offs = []
        for i, p in enumerate(self.parts):
            off = _offsets(p)
            self.offs.append(cp.asarray(off))
            for (r0, r1, e0, e1) in plan_chunks(off, chunk_edges):
                if e1 > e0:
                    self.chunks.append(_Chunk(len(self.chunks), i, r0, r1, e0, e1, self.w))
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
                got = _read_pieces(pool, fd, p, table, memoryview(raw)[:nbytes], 0, 0)
        finally:
            os.close(fd)
        if got < p.num_edges * self.w:
            raise _damaged(p.adj_path, f"file too short: {got} bytes for {p.num_edges} IDs")
        if table is None:
            check_crc(p, "adj", raw[:got])
        return pin, raw[:p.num_edges * self.w].view(dt)

    # -- the reader (ssd) ------------------------------------------------------------------------
    def _tables(self):
        if self._tabs is None:
            from ..integrity import load_page_table
            self._tabs = [load_page_table(p, "adj", p.pages["adj"])
                          if "adj" in p.pages and p.num_edges else None for p in self.parts]
        return self._tabs

    def _open(self, p):
        flags = os.O_RDONLY
        if self.direct and hasattr(os, "O_DIRECT"):
            try:
                return os.open(p.adj_path, flags | os.O_DIRECT), True
            except OSError:
                pass
        return os.open(p.adj_path, flags), False

    def _reader(self, free, full, stop, tables, todo, room=None):
        """Read every chunk of `todo` into a free staging buffer (_read_pieces), hand it over."""
        from concurrent.futures import ThreadPoolExecutor
        from ..integrity import _damaged
        fds = {}
        pool = ThreadPoolExecutor(READERS, thread_name_prefix="graphene-gpu-read")
        try:
            for c in todo:
                buf = free.get()
                if self.source == "host":
                    room.release()
                if isinstance(buf, BaseException):
                    raise buf
                if stop.is_set() or buf is None:
                    return
                p = self.parts[c.part]
                if c.part not in fds:
                    fds[c.part] = self._open(p)
                fd, _ = fds[c.part]
                nbytes = (c.p1 - c.p0) * PAGE
                got = _read_pieces(pool, fd, p, tables[c.part], memoryview(buf[1])[:nbytes],
                                   c.p0 * PAGE, c.p0)
                if got < (c.e1 * self.w - c.p0 * PAGE):
                    raise _damaged(p.adj_path, f"file too short: {c.p0 * PAGE + got} bytes, "
                                               f"edges up to byte {c.e1 * self.w}")
                full.put((c, buf))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            full.put((None, e))
        finally:
            pool.shutdown(wait=True)
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
        """(device buffers, streams, staging buffers, page tables), made on the first pass."""
        if self._bufs is None:
            cp = _module.cupy()
            cap = max((c.p1 - c.p0) * PAGE // self.w for c in self.chunks) if self.chunks else 1
            dev = [cp.empty(cap, dtype=cp.uint32 if self.w == 4 else cp.uint64) for _ in range(2)]
            streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
            staging = []
            if self.source == "ssd":
                for _ in range(3):
                    pin = cp.cuda.alloc_pinned_memory(self.max_pages * PAGE)
                    staging.append((pin, np.frombuffer(pin, dtype=np.uint8,
                                                       count=self.max_pages * PAGE)))
            tables = self._tables()
            self._bufs = (dev, streams, staging, tables)
        return self._bufs

    def each(self, launch) -> int:
        """One pass over every chunk (see the class); returns the bytes copied to the GPU. The
        caller's earlier work on the current stream is finished first; the pass's work is
        finished when this returns."""
        cp = _module.cupy()
        dev_bufs, streams, staging, tables = self.buffers()
        cp.cuda.Device().synchronize()       # the streams below do not wait on the caller's
        moved = 0
        done = self._launch_kept(launch, streams)
        todo = [c for c in self.chunks if c.i not in done]
        if self.source == "host" and (self.host_parts is not None or
                                      all(c.i in self.host for c in todo)):
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
        elif todo:
            moved = self._each_from_ssd(launch, dev_bufs, streams, staging, tables, todo)
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

    def _each_from_ssd(self, launch, dev_bufs, streams, staging, tables, todo):
        cp = _module.cupy()
        moved = 0
        free, full = queue.Queue(), queue.Queue()
        for b in staging:
            free.put(b)
        stop = threading.Event()
        room = pinner = None
        if self.source == "host":       # buffers of their own, pinned by a thread of their own
            room = threading.Semaphore(PIN_AHEAD)
            pinner = threading.Thread(target=self._pinner, args=(free, stop, todo, room),
                                      name="graphene-gpu-pin", daemon=True)
            pinner.start()
        t = threading.Thread(target=self._reader, args=(free, full, stop, tables, todo, room),
                             name="graphene-gpu-stream", daemon=True)
        t.start()
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
            stop.set()
            if self.source != "host":
                for _, b in pending:
                    free.put(b)
            for b in staging:
                free.put(b)          # unblock a reader waiting for a buffer
            if pinner is not None:
                pinner.join()
                free.put(None)
            t.join()
            if held:
                for s in streams:
                    s.synchronize()
        return moved

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


def resident_loadable(graph) -> bool:
    """Whether load_resident can load this dataset: unweighted, and every list file has its
    page table (format 2) to check the pages it reads against."""
    return not graph.weighted and all(
        "adj" in p.pages for d in ("out", "in") if d == "out" or graph.in_partitions is not None
        for p in graph.parts(d) if p.num_edges)


def resident_load_bps(graph) -> float:
    """Bytes/s of the resident tier's load: the lists read as stream-ssd reads them
    (load_resident), or, where it cannot, the CSR assembled on the host and copied."""
    from .policy import GPU_LOAD_BYTES_PER_S
    return SSD_BYTES_PER_S if resident_loadable(graph) else GPU_LOAD_BYTES_PER_S


def load_resident_bytes(graph, direction) -> int:
    """GPU memory load_resident holds while it loads one direction, beyond the CSR itself: the
    partitions' offsets and slots (8 bytes a row each) and two chunk buffers."""
    parts = graph.parts(direction)
    rows = sum(p.row_hi - p.row_lo + 1 for p in parts)
    chunk = chunk_bytes_for(sum(p.num_edges for p in parts) * int(graph.id_width))
    return 16 * rows + 2 * (chunk + 2 * PAGE)


def load_resident(graph, direction, check=None, chunk_bytes=None):
    """One direction's CSR as the resident tier holds it: (indptr: host int64[n+1], the lists'
    int32 IDs in one device array, each list at its CSR slot). Read in chunks as stream-ssd
    reads them (O_DIRECT, every 4 KB page checked; the next chunk read while this one is
    copied), each chunk's rows put at their slots by a kernel that also checks that each ID
    lies in its partition's columns. A partition's lists go behind the pieces of the same rows
    in the columns before it, so every list stays sorted. No host copy of the lists is made.
    check: called after each chunk (may raise to stop the load). chunk_bytes: ListStream's."""
    cp = _module.cupy()
    n = graph.num_vertices
    lists = ListStream(graph, direction, "ssd", chunk_bytes)
    order = sorted(range(len(lists.parts)), key=lambda j: lists.parts[j].index)
    degs = {i: np.diff(cp.asnumpy(lists.offs[i]).astype(np.int64)) for i in order}
    indptr = np.zeros(n + 1, dtype=np.int64)
    for i in order:
        p = lists.parts[i]
        indptr[p.row_lo + 1:p.row_hi + 1] += degs[i]
    np.cumsum(indptr, out=indptr)
    m = int(indptr[-1])
    out = cp.empty(max(m, 1), dtype=cp.int32)[:m]
    if m == 0:
        return indptr, out
    fill = indptr[:-1].copy()
    slots = {}
    for i in order:
        p = lists.parts[i]
        slots[i] = cp.asarray(fill[p.row_lo:p.row_hi])
        fill[p.row_lo:p.row_hi] += degs.pop(i)
    del fill
    bad = cp.zeros(1, dtype=cp.int32)
    fn = _function("fill_slots32" if lists.w == 4 else "fill_slots64")

    def launch(c, dbuf, first, s):
        p = lists.parts[c.part]
        lists.launch_rows(fn, c, dbuf, first, s, slots[c.part][c.r0:c.r1], out,
                          np.uint64(p.col_lo), np.uint64(p.col_hi), bad)
        if check is not None:
            check()

    lists.each(launch)
    if int(bad[0]):
        raise GrapheneError(f"{graph.name}: a neighbour ID outside its partition's columns in "
                            f"the {direction}-lists (damaged data?)")
    return indptr, out


def _pull_direction(graph, what):
    if not graph.directed:
        return "out"
    if graph.in_partitions is not None:
        return "in"
    raise GrapheneError(f"{graph.name}: streaming {what} to the GPU pulls over in-lists; this "
                        f"directed dataset has none (partition with --in-edges)")


class StreamedPageRank:
    """The state and plan of a streamed PageRank on one dataset (see the module)."""

    def __init__(self, graph, source="ssd", chunk_bytes=None, direct=True,
                 keep_bytes=None, gpu_mem=None):
        cp = _module.cupy()
        t0 = time.perf_counter()
        self.graph = graph
        self.source = source
        self.n = n = graph.num_vertices
        direction = _pull_direction(graph, "PageRank")
        if gpu_mem is not None:
            from .device_graph import GpuMemoryError, _budget, _gib
            need = STREAM_STATE_BYTES_PER_VERTEX * n + 8 * (n + len(graph.parts(direction)))
            if need > _budget(gpu_mem):
                raise GpuMemoryError(
                    f"{graph.name}: --gpu-mem {gpu_mem} ({_gib(_budget(gpu_mem))}) is less than "
                    f"a streamed PageRank's per-vertex state and offsets ({_gib(need)})")
        if keep_bytes is None:       # what the budget leaves after the state (keep_budget)
            lists = sum(p.num_edges for p in graph.parts(direction)) * int(graph.id_width)
            keep_bytes = keep_budget(graph, gpu_mem, lists)
        self.lists = ListStream(graph, direction, source, chunk_bytes, direct, keep_bytes)
        self.direction = self.lists.direction
        self.chunks = self.lists.chunks
        deg = np.zeros(n, dtype=np.int64)
        for p in graph.parts("out"):
            deg[p.row_lo:p.row_hi] += np.diff(_offsets(p).astype(np.int64))
        self.outdeg = cp.asarray(deg.astype(np.float64))
        self.dangling = cp.asarray(deg == 0)
        #: the plan, the offsets and out-degrees, and for "host" the lists' read into pinned memory
        self.setup_seconds = time.perf_counter() - t0

    @property
    def bytes_moved(self):
        return self.lists.bytes_moved

    def run(self, alpha, tol, max_iter, stats=None, init=None):
        """init: the scores to start from (float64, sum 1: where a CPU run handed over,
        gpu/handoff.py); default 1/n."""
        cp = _module.cupy()
        n = self.n
        if n == 0:
            return np.zeros(0, dtype=np.float64)
        score = cp.full(n, 1.0 / n, dtype=cp.float64) if init is None else \
            cp.asarray(np.ascontiguousarray(init, dtype=np.float64))
        sums = cp.zeros(n, dtype=cp.float64)
        contrib = cp.zeros(n, dtype=cp.float64)
        bad = cp.zeros(1, dtype=cp.int32)
        kern = _kernel(self.lists.w)
        err, it = np.inf, 0
        steps = []
        while it < max_iter:
            t0 = time.perf_counter()
            cp.divide(score, self.outdeg, out=contrib)
            contrib[self.dangling] = 0.0
            dmass = float(score[self.dangling].sum())
            sums.fill(0)
            moved = self.lists.each(lambda c, dbuf, first, s: self.lists.launch_rows(
                kern, c, dbuf, first, s, contrib, sums, bad))
            self.lists.bad_ids(bad)
            new = (1.0 - alpha) / n + alpha * (sums + dmass / n)
            err = float(cp.abs(new - score).sum())
            score = new
            it += 1
            steps.append({"iteration": it, "error": err, "seconds": time.perf_counter() - t0,
                          "bytes_moved": moved, "chunks": len(self.chunks),
                          "kept_bytes": self.lists.kept_bytes,
                          "mode": f"gpu-stream-{self.source}"})
            if err < tol:
                break
        if stats is not None:
            stats.update(iterations=it, error=err, supersteps=steps, tier=f"stream-{self.source}",
                         bytes_moved=self.bytes_moved, kept_bytes=self.lists.kept_bytes,
                         kept_chunks=len(self.lists.kept), setup_seconds=self.setup_seconds)
        return cp.asnumpy(score)


def pagerank(graph, source="ssd", alpha=0.85, tol=1e-4, max_iter=20, chunk_bytes=None,
             stats=None, direct=True, keep_bytes=None, gpu_mem=None):
    """Pull PageRank scores (float64, sum 1) with the lists streamed per iteration from `source`
    ("host": pinned host memory; "ssd": the dataset's files), except the chunks kept in GPU
    memory after the first iteration: within `keep_bytes`, by default what `gpu_mem` (unset:
    90% of the free GPU memory) leaves after the state (keep_budget)."""
    sp = StreamedPageRank(graph, source=source, chunk_bytes=chunk_bytes, direct=direct,
                          keep_bytes=keep_bytes, gpu_mem=gpu_mem)
    return sp.run(alpha, tol, max_iter, stats=stats)


def spmv(graph, x, source="ssd", chunk_bytes=None, stats=None, direct=True):
    """y = A x (y[v] = sum of x[u] over v's out-list: algos/spmv.py) with the out-lists streamed
    once from `source`. Unweighted datasets only."""
    if graph.weighted:
        raise GrapheneError(f"{graph.name}: SpMV streams unweighted lists to the GPU; this "
                            f"dataset is weighted (run it on the CPU: --device cpu)")
    cp = _module.cupy()
    t0 = time.perf_counter()
    n = graph.num_vertices
    lists = ListStream(graph, "out", source, chunk_bytes, direct)
    setup = time.perf_counter() - t0
    xd = cp.asarray(np.asarray(x, dtype=np.float64))
    y = cp.zeros(n, dtype=cp.float64)
    bad = cp.zeros(1, dtype=cp.int32)
    kern = _kernel(lists.w)
    moved = lists.each(lambda c, dbuf, first, s: lists.launch_rows(kern, c, dbuf, first, s, xd,
                                                                   y, bad)) if n else 0
    lists.bad_ids(bad)
    if stats is not None:
        stats.update(supersteps=[{"step": 1, "seconds": time.perf_counter() - t0,
                                  "bytes_moved": moved, "chunks": len(lists.chunks),
                                  "mode": f"gpu-stream-{source}"}],
                     tier=f"stream-{source}", bytes_moved=moved, setup_seconds=setup)
    return cp.asnumpy(y)


def wcc(graph, source="ssd", chunk_bytes=None, stats=None, direct=True):
    """Component labels (the smallest vertex ID of each component; edges taken undirected) by
    union-find over the out-lists streamed once from `source`, then compressed."""
    cp = _module.cupy()
    t0 = time.perf_counter()
    n = graph.num_vertices
    lists = ListStream(graph, "out", source, chunk_bytes, direct)
    setup = time.perf_counter() - t0
    narrow = lists.w == 4                 # labels as wide as the IDs
    comp = cp.arange(n, dtype=cp.uint32 if narrow else cp.uint64)
    bad = cp.zeros(1, dtype=cp.int32)
    link = _function("wcc_link32" if narrow else "wcc_link64")
    moved = lists.each(lambda c, dbuf, first, s: lists.launch_rows(link, c, dbuf, first, s, comp,
                                                                   bad)) if n else 0
    lists.bad_ids(bad)
    t1 = time.perf_counter()
    if n:
        threads = 256
        _function("wcc_compress32" if narrow else "wcc_compress64")(
            ((n + threads - 1) // threads,), (threads,), (comp, np.int64(n)))
    labels = cp.asnumpy(comp)
    ncomp = int(np.count_nonzero(labels == np.arange(n, dtype=labels.dtype)))
    if stats is not None:
        stats.update(n_components=ncomp, tier=f"stream-{source}", bytes_moved=moved,
                     setup_seconds=setup,
                     supersteps=[{"step": 1, "phase": "link", "seconds": t1 - t0,
                                  "bytes_moved": moved, "chunks": len(lists.chunks),
                                  "mode": f"gpu-stream-{source}"},
                                 {"step": 2, "phase": "compress",
                                  "seconds": time.perf_counter() - t1, "bytes_moved": 0,
                                  "mode": f"gpu-stream-{source}"}])
    return labels
