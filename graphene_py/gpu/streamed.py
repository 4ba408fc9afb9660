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

import time

import numpy as np

from ..errors import GrapheneError
from . import _module
# (the chunks' machinery, gpu/lists.py; its names are this module's too, as before)
from .lists import (CHUNK_BYTES, MIN_CHUNK_BYTES, MIN_CHUNKS, PAGE, PIECE, PIN_AHEAD,  # noqa: F401
                    READERS, ListStream, _offsets, _one_partition, _pages, chunk_bytes_for,
                    keep_plan, plan_chunks, resident_loadable)

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
"""


def _function(name):
    """A kernel of _SRC on the current device."""
    return _module.raw_function(_SRC, name)


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
#: a pass of the streamed kernels over lists kept in GPU memory (PageRank's resident iteration
#: summed 4.46 GB of CSR in 14.8 ms on an H100 at scale 25: ~300 GB/s; taken lower)
KEPT_PASS_BYTES_PER_S = 200e9
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


#: A streamed run's set-up before its first pass, per vertex: the offsets read and checked,
#: degrees, the O(|V|) state allocated (its `setup_seconds`). On the H200 machine WCC took
#: 0.09-0.18 s at Kronecker scale 22 and 0.41-0.50 s at scale 24 (~28 ns a vertex); PageRank,
#: both directions' offsets and its degrees, 0.19-0.23 s at 22 and 0.90-1.00 s at 24 (~57 ns):
#: benchmarks/auto_device_kron22_h200_prepared_load.jsonl, benchmarks/auto_device_kron24_h200*.jsonl
STREAM_SETUP_S_PER_VERTEX = {"wcc": 28e-9, "spmv": 28e-9, "pagerank": 57e-9}
#: ... PageRank on an undirected dataset, whose out-degrees come from the offsets the stream
#: reads (since 2026-11-30): 0.76-0.84 s at scale 24 against 0.92-1.02 s before, alternating
#: (BENCHMARKS.md)
STREAM_SETUP_S_PER_VERTEX_PR_UNDIRECTED = 48e-9


#: The resident tier's load beyond its bytes at resident_load_bps: a fixed part (the CSR's arrays
#: allocated, the readers started) and a part per vertex (the offsets read, checked and turned
#: into CSR positions). BFS's load on the H200 machine took 0.86-0.92 s at Kronecker scale 22
#: (0.55 GB of CSR) and 2.24-2.40 s at scale 24 (2.2 GB), against 0.39 s and 1.58 s of bytes at
#: 1.4 GB/s (benchmarks/auto_device_kron22_h200_prepared_load.jsonl, auto_device_kron24_h200.jsonl)
RESIDENT_SETUP_S = 0.25
RESIDENT_SETUP_S_PER_VERTEX = 30e-9
#: ... where each direction is one partition of every row (a 1x1 grid): its offsets are the
#: CSR's, in GPU memory already, and are checked while the first lists are read. The load's
#: time before its pass went from 0.65-0.95 s to 0.39-0.64 s at Kronecker scale 24 (H200,
#: tools/probe_gpu_load_stages.py, old and new alternating: BENCHMARKS.md, 2026-11-30)
RESIDENT_SETUP_S_PER_VERTEX_1X1 = 12e-9


def resident_setup_seconds(graph) -> float:
    """RESIDENT_SETUP_S + the vertices times RESIDENT_SETUP_S_PER_VERTEX (_1X1 where each
    direction is one partition of every row)."""
    dirs = ["out"] + (["in"] if getattr(graph, "in_partitions", None) is not None else [])
    try:
        one = all(_one_partition(graph, d) for d in dirs)
    except (AttributeError, TypeError):
        one = False              # (a stand-in graph without partitions)
    per = RESIDENT_SETUP_S_PER_VERTEX_1X1 if one else RESIDENT_SETUP_S_PER_VERTEX
    return RESIDENT_SETUP_S + int(graph.num_vertices) * per


def stream_setup_seconds(graph, algo: str) -> float:
    """STREAM_SETUP_S_PER_VERTEX of `algo` (WCC's by default) times the vertices."""
    if algo == "pagerank" and not getattr(graph, "directed", True):
        return int(graph.num_vertices) * STREAM_SETUP_S_PER_VERTEX_PR_UNDIRECTED
    return int(graph.num_vertices) * STREAM_SETUP_S_PER_VERTEX.get(algo, 28e-9)


def tier_costs(graph, gpu_mem, stream_bytes, host_free, passes=1.0, resident_ok=True,
               probe=True, setup_s: float = 0.0) -> dict:
    """Estimated seconds of each tier that can hold this run, for one command as a user runs it
    (the dataset's load counted, unless an earlier run of this process left it in GPU memory):
    resident: the CSR loaded and `passes` passes over it in GPU memory (only while it fits the
    budget); stream-host: the first pass reads the lists as stream-ssd does, into pinned memory
    pinned meanwhile (the slower of the two), and copies them over the bus; later passes copy
    the lists not kept in GPU memory (only while the lists fit half of `host_free`, the memory
    available): one pass is never cheaper than stream-ssd's; stream-ssd: a read of every
    list on the first pass, of those not kept on later ones. Kept lists cost a GPU pass each
    later pass (keep_budget; KEPT_PASS_BYTES_PER_S). probe=False: no question to the GPU (a plan made before CuPy is
    imported): the resident tier is taken to fit. setup_s: the streamed tiers' set-up before
    their first pass (stream_setup_seconds; the resident tier's is in its load)."""
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
            load = 0.0 if is_resident(graph, gpu_mem) else \
                resident_setup_seconds(graph) + csr / resident_load_bps(graph)
            out["resident"] = load + passes * csr / GPU_PASS_BYTES_PER_S
    later = max(float(passes) - 1.0, 0.0)
    keep = keep_budget(graph, gpu_mem, stream_bytes, probe) if later else 0
    kept = later * keep / KEPT_PASS_BYTES_PER_S
    rest = stream_bytes - keep
    # (the SSD first: a tie, as one pass makes, goes to the tier that pins nothing)
    out["stream-ssd"] = setup_s + (stream_bytes + later * rest) / SSD_BYTES_PER_S + kept
    if stream_bytes <= host_free // 2:
        # the first pass reads as stream-ssd does while another thread pins the host copy
        out["stream-host"] = setup_s + max(stream_bytes / SSD_BYTES_PER_S,
                                           stream_bytes / PIN_BYTES_PER_S) \
            + (stream_bytes + later * rest) / BUS_BYTES_PER_S + kept
    return out


def auto_tier(graph, gpu_mem, stream_bytes, host_free, passes=1.0, resident_ok=True,
              setup_s: float = 0.0) -> str:
    """--gpu-tier auto: the tier of least estimated time (tier_costs), for one whole command:
    a dataset already in GPU memory stays there; else one pass (WCC's union-find, SpMV) or a
    dozen (PageRank) streamed from pinned host memory costs less than assembling and loading the
    CSR (7.0 s for WCC at scale 23 on an H100, against 0.68 s streamed from host memory and 1.05
    from a cold disk); the SSD when host memory is short and few passes are due."""
    costs = tier_costs(graph, gpu_mem, stream_bytes, host_free, passes, resident_ok,
                       setup_s=setup_s)
    return min(costs, key=costs.get)


def resident_load_bps(graph) -> float:
    """Bytes/s of the resident tier's load, per byte of the lists' IDs (what the plans count):
    the lists read as stream-ssd reads them (load_resident), a weighted dataset's weights beside
    them (4 bytes an edge more to read), or, where it cannot, the CSR assembled on the host and
    copied."""
    from .policy import GPU_LOAD_BYTES_PER_S
    if not resident_loadable(graph):
        return GPU_LOAD_BYTES_PER_S
    ids = int(graph.id_width)
    return SSD_BYTES_PER_S * ids / (ids + (4 if graph.weighted else 0))


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
        # pulling over the out-lists (an undirected dataset): the out-degrees from the offsets
        # the stream reads anyway (not a second read and check of them; 134 MB at scale 24)
        same = direction == "out"
        self.lists = ListStream(graph, direction, source, chunk_bytes, direct, keep_bytes,
                                host_offsets=same)
        self.direction = self.lists.direction
        self.chunks = self.lists.chunks
        deg = np.zeros(n, dtype=np.int64)
        if same:
            self.lists.offsets_checked()
        offs = self.lists.host_offs if same else [_offsets(p) for p in graph.parts("out")]
        self.lists.host_offs = None
        for p, off in zip(self.lists.parts if same else graph.parts("out"), offs):
            deg[p.row_lo:p.row_hi] += np.diff(off.astype(np.int64))
        del offs
        _module.settle()
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
    lists.start()            # the first chunks read while cupyx settles and the vectors are made
    setup = time.perf_counter() - t0
    try:
        _module.settle()
        xd = cp.asarray(np.asarray(x, dtype=np.float64))
        y = cp.zeros(n, dtype=cp.float64)
        bad = cp.zeros(1, dtype=cp.int32)
        kern = _kernel(lists.w)
        moved = lists.each(lambda c, dbuf, first, s: lists.launch_rows(
            kern, c, dbuf, first, s, xd, y, bad)) if n else 0
    finally:
        lists.close()
    lists.bad_ids(bad)
    if stats is not None:
        stats.update(supersteps=[{"step": 1, "seconds": time.perf_counter() - t0,
                                  "bytes_moved": moved, "chunks": len(lists.chunks),
                                  "mode": f"gpu-stream-{source}"}],
                     tier=f"stream-{source}", bytes_moved=moved, setup_seconds=setup)
    return cp.asnumpy(y)


def wcc(graph, source="ssd", chunk_bytes=None, stats=None, direct=True, init=None):
    """Component labels (the smallest vertex ID of each component; edges taken undirected) by
    union-find over the out-lists streamed once from `source`, then compressed. init: a forest
    to start from (a CPU run's labels handed over, gpu/handoff.py WCCPart)."""
    cp = _module.cupy()
    t0 = time.perf_counter()
    n = graph.num_vertices
    lists = ListStream(graph, "out", source, chunk_bytes, direct)
    lists.start()            # the first chunks read while cupyx settles and the labels are made
    setup = time.perf_counter() - t0
    try:
        _module.settle()
        narrow = lists.w == 4                 # labels as wide as the IDs
        dt = np.uint32 if narrow else np.uint64
        comp = cp.arange(n, dtype=dt) if init is None else \
            cp.asarray(np.ascontiguousarray(init, dtype=dt))
        bad = cp.zeros(1, dtype=cp.int32)
        link = _function("wcc_link32" if narrow else "wcc_link64")
        moved = lists.each(lambda c, dbuf, first, s: lists.launch_rows(
            link, c, dbuf, first, s, comp, bad)) if n else 0
    finally:
        lists.close()
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
