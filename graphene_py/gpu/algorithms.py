"""GPU algorithms over a DeviceGraph. Each returns numpy arrays in the CPU path's encoding.

bfs        direction-optimizing BFS (Beamer; Enterprise degree bins; single-block device loop for small
           frontiers so high-diameter graphs cost no host round trip per level)
pagerank   pull PageRank, GAPBS stop rule, dangling mass spread uniformly (scores sum to 1)
wcc        lock-free union-find hooking larger roots under smaller ones: label = min vertex ID
msbfs      one direction-optimizing BFS per source (default), or iBFS: 32/64 sources as bits of
           one word per vertex, bottom-up with early exit
sssp       delta-stepping (near/far buckets computed on the fly), float64 distances, inf unreached
kcore      parallel peeling; degree = out + in (directed), self-loops ignored

Each function takes `stats=None`; pass a dict to receive counters (levels, directions, iterations...).
"""
from __future__ import annotations

import math
import time
from typing import Optional

import numpy as np

from .. import config
from ..errors import GrapheneError
from . import _module
from .device_graph import STATE_BYTES_PER_VERTEX

BLOCK = 256
#: Single-block device loop limits: it runs while a level's frontier has at most this many vertices
#: and out-edges (beyond that a grid of blocks is faster than one block: with 32,768 edges the loop cost
#: 90-110 us for the first two Kronecker levels, 8-10% of a scale-24 BFS; see tools/gpu_notes.md).
BLOCK_LOOP_VCAP = 2048
BLOCK_LOOP_ECAP = 4096
BLOCK_LOOP_THREADS = 1024
#: k-core's device-side peel loop (kcore_peel_loop) takes queues of at most this many vertices and
#: list entries. With BFS's caps its one block walked a queue of 2,048 a warp's 64 vertices at a
#: time, slower than a grid launch and a wait (Kronecker 22, H200: 0.20-0.22 s against 0.17 s
#: without the loop); with these, Kronecker 22 and 24 take what they take without it, and a
#: chain's queues of two vertices run 36x faster (1 M vertices: 0.56 s against 20-24 s)
KCORE_LOOP_VCAP = 128
KCORE_LOOP_ECAP = 2048
#: Beamer's direction-optimizing constants (GAPBS defaults): go bottom-up when the frontier's edges
#: exceed unexplored edges / ALPHA; return top-down when the frontier is below |V| / BETA and shrinking.
ALPHA = 15.0
BETA = 18.0
#: Enterprise degree bins for top-down expansion: < 32 thread, < 256 warp, < 65,536 block, else grid.
PUSH_BINS = (32, 256, 65536)


def _oom_to_error(fn):
    """Turn CuPy's OutOfMemoryError into GpuMemoryError with the algorithm's name and the sizes."""
    import functools

    @functools.wraps(fn)
    def wrapper(dg, *args, **kwargs):
        cp = _module.cupy()
        _module.settle()
        try:
            return fn(dg, *args, **kwargs)
        except cp.cuda.memory.OutOfMemoryError as e:
            from .device_graph import GpuMemoryError
            free, total = cp.cuda.runtime.memGetInfo()
            raise GpuMemoryError(
                f"{fn.__name__}: out of GPU memory on |V|={dg.num_vertices}, |E|={dg.num_edges} "
                f"({e}); {free / 2**30:.2f} of {total / 2**30:.2f} GiB free. Use fewer sources per "
                f"pass (msbfs), a smaller graph, or the CPU path (--device cpu)") from None
    return wrapper


def _grid(work_items: int, per_block: int = BLOCK) -> int:
    cap = _module.sm_count() * 16
    return max(1, min(cap, (int(work_items) + per_block - 1) // per_block))


def _check_src(dg, src):
    src = int(src)
    if not 0 <= src < dg.num_vertices:
        raise GrapheneError(f"source {src} out of range [0, {dg.num_vertices})")
    return src


# ------------------------------------------------------------------------------------------------
# BFS
# ------------------------------------------------------------------------------------------------
class BfsLevels:
    """Direction-optimizing BFS on the GPU, one launch group at a time, from any state.

    `bfs()` runs it from one source to the end. The hybrid CPU/GPU BFS (algos/bfs.py, --device auto)
    instead `load()`s the CPU's state (depth, parent, frontier, level), runs `step()` while the
    offload policy keeps choosing the GPU, and `store()`s the state back when it does not.
    After each step: `L` = frontier size, `ef` = the frontier's out-edges, `level` = its depth,
    `last` = (kind, levels run) of the step; `done` when the frontier is empty.

    direction: "auto" (direction-optimizing; needs in-edges, else push only), "push", "pull".
    push: "bins" (Enterprise thread/warp/block/grid bins) or "warp" (one warp per frontier vertex).
    block_loop: run small frontiers level after level inside one block (device-side loop).
    """

    def __init__(self, dg, *, direction: str = "auto", push: str = "bins", block_loop: bool = True,
                 alpha: float = ALPHA, beta: float = BETA, block_loop_ecap: int = None):
        if direction not in ("auto", "push", "pull"):
            raise GrapheneError(f"direction must be auto, push or pull, not {direction!r}")
        if push == "bins":
            self.thresholds = PUSH_BINS
        elif push == "warp":
            self.thresholds = (0, 1 << 62, 1 << 62)      # everything in the warp bin
        else:
            raise GrapheneError(f"push must be bins or warp, not {push!r}")
        cp = _module.cupy()
        mod = _module.module()
        self.cp, self.dg = cp, dg
        n = self.n = dg.num_vertices
        self.direction, self.block_loop, self.alpha, self.beta = direction, block_loop, alpha, beta
        self.ecap = BLOCK_LOOP_ECAP if block_loop_ecap is None else int(block_loop_ecap)
        self.depth = cp.full(n, -1, dtype=cp.int32)
        self.parent = cp.full(n, -1, dtype=cp.int32)
        self.use_pull = direction in ("auto", "pull") and (dg.has_in_edges or direction == "pull")
        self.head, self.hk = dg.head("out")         # lists' heads in GPU memory (zero-copy tiers)
        self.hk = np.int32(self.hk)
        if self.use_pull:
            self.iptr, self.iidx = dg.in_csr()
            self.ihead, self.ihk = dg.head("in")
            self.ihk = np.int32(self.ihk)
        self.qa = cp.empty(max(n, 1), dtype=cp.int32)
        self.qb = cp.empty(max(n, 1), dtype=cp.int32)
        self.bins = [cp.empty(max(n, 1), dtype=cp.int32) for _ in range(4)]
        nwords = (n + 31) // 32
        self.bma = cp.zeros(max(nwords, 1), dtype=cp.uint32)
        self.bmb = cp.zeros(max(nwords, 1), dtype=cp.uint32)
        self.buf = cp.zeros(8, dtype=cp.int64)       # as int32[16]: [0..3] bin lengths, [4] next length
        self.cnt = self.buf.view(cp.int32)
        self.esum = self.buf[3:4].view(cp.uint64)
        self.st = cp.zeros(8, dtype=cp.int64)
        self.k_loop = mod.get_function("bfs_block_loop")
        self.k_class = mod.get_function("bfs_classify")
        self.k_pull = mod.get_function("bfs_pull")
        self.k_q2b = mod.get_function("queue_to_bitmap")
        self.k_push = [mod.get_function(f"bfs_push<{w}>") for w in (1, 32, 0, -1)]
        self.gpush = _module.sm_count() * 16
        self.log = []
        self.last = None
        self.L = self.ef = self.level = 0

    def _reset(self, L, ef, level, unexplored):
        self.L, self.ef, self.level, self.m_u = L, ef, level, unexplored
        self.cur = 0                 # frontier queue: 0 -> qa, 1 -> qb
        self.rep = "queue"           # frontier held as "queue" or "bitmap" (bma)
        self.prev_L = 0
        self.mode_pull = self.direction == "pull"

    def start(self, src: int):
        src = _check_src(self.dg, src)
        self.depth.fill(-1)
        self.parent.fill(-1)
        self.depth[src] = 0
        self.parent[src] = src
        self.qa[0] = src
        self._reset(1, int(self.dg.ptr[src + 1] - self.dg.ptr[src]), 0, self.dg.num_edges)
        return self

    def load(self, depth, parent, frontier, level: int):
        """Take over a BFS the CPU ran up to `level`: host depth int32, parent int64, the frontier
        (vertices of depth `level`)."""
        cp = self.cp
        self.depth.set(np.ascontiguousarray(depth, dtype=np.int32))
        self.parent.set(np.ascontiguousarray(parent, dtype=np.int32))
        f = cp.asarray(np.ascontiguousarray(frontier, dtype=np.int32))
        self.qa[:f.size] = f
        deg = self.dg.ptr[1:] - self.dg.ptr[:-1]
        ef = int((self.dg.ptr[f + 1] - self.dg.ptr[f]).sum()) if f.size else 0
        unexplored = int(deg[self.depth < 0].sum())
        self._reset(int(f.size), ef, int(level), unexplored)
        return self

    def store(self, depth, parent):
        """Copy the state back into the host arrays (depth int32, parent int64)."""
        depth[:] = self.depth.get()
        parent[:] = self.parent.get()

    def frontier_host(self) -> np.ndarray:
        """The current frontier (vertices of depth `level`) as host int64 IDs."""
        cp = self.cp
        if self.rep == "queue":
            q = self.qa if self.cur == 0 else self.qb
            return q[:self.L].get().astype(np.int64)
        return cp.flatnonzero(self.depth == self.level).get().astype(np.int64)

    @property
    def done(self) -> bool:
        return self.L <= 0

    def step(self):
        """One launch group: the device-side block loop (several small levels) or one push or pull
        level. Updates L, ef, level; returns (kind, levels run)."""
        cp, n = self.cp, self.n
        if (self.rep == "queue" and self.block_loop and self.direction != "pull"
                and self.L <= BLOCK_LOOP_VCAP and self.ef <= self.ecap):
            self.st.set(np.array([self.L, self.level, self.cur, self.ef, 0, 0, 0, 0], dtype=np.int64))
            self.k_loop((1,), (BLOCK_LOOP_THREADS,),
                        (self.dg.ptr, self.dg.idx, self.head, self.hk, self.depth, self.parent, self.qa,
                         self.qb, self.st,
                         np.int32(BLOCK_LOOP_VCAP), np.int64(self.ecap), np.int64(1 << 40)))
            h = self.st.get()
            self.L, self.level, self.cur, self.ef, explored, done = (int(x) for x in h[:6])
            self.m_u -= explored
            self.prev_L = 0
            self.last = ("block", done)
            self.log.append(("block", done, self.L, time.perf_counter()))
            return self.last
        if self.use_pull and self.direction == "auto":
            if not self.mode_pull:
                self.mode_pull = self.ef > self.m_u / self.alpha
            else:
                self.mode_pull = not (self.L < n / self.beta and self.L < self.prev_L)
        if self.mode_pull:
            if self.rep == "queue":
                self.bma.fill(0)
                qcur = self.qa if self.cur == 0 else self.qb
                self.k_q2b((max(1, (self.L + BLOCK - 1) // BLOCK),), (BLOCK,),
                           (qcur, np.int32(self.L), self.bma))
                self.rep = "bitmap"
            self.buf.fill(0)
            self.k_pull((_grid(n),), (BLOCK,), (self.iptr, self.iidx, self.ihead, self.ihk,
                                                self.dg.ptr, self.depth,
                                                self.parent, self.bma, self.bmb, np.int32(n),
                                                np.int32(self.level), self.cnt[4:5], self.esum))
            h = self.buf.get()
            self.bma, self.bmb = self.bmb, self.bma
            self.prev_L, self.L, self.ef = self.L, int(h.view(np.int32)[4]), int(h[3])
            kind = "pull"
        else:
            if self.rep == "bitmap":
                qn = cp.flatnonzero(self.depth == self.level).astype(cp.int32)
                self.qa[:qn.size] = qn
                self.cur = 0
                self.rep = "queue"
                del qn
            qcur, qnext = (self.qa, self.qb) if self.cur == 0 else (self.qb, self.qa)
            t1, t2, t3 = self.thresholds
            bins, cnt, esum = self.bins, self.cnt, self.esum
            self.buf.fill(0)
            self.k_class((_grid(self.L),), (BLOCK,), (qcur, np.int32(self.L), self.dg.ptr, bins[0],
                                                      bins[1], bins[2], bins[3], cnt, esum,
                                                      np.int64(t1), np.int64(t2), np.int64(t3)))
            esum.fill(0)
            for b, (k, w) in enumerate(zip(self.k_push, (1, 32, 0, -1))):
                g = _grid(self.L) if w == 1 else (_grid(self.L * 32) if w == 32 else self.gpush)
                k((g,), (BLOCK,), (bins[b], cnt[b:b + 1], self.dg.ptr, self.dg.idx, self.head,
                                   self.hk, self.depth,
                                   self.parent, np.int32(self.level), qnext, cnt[4:5], esum))
            h = self.buf.get()
            self.prev_L, self.L, self.ef = self.L, int(h.view(np.int32)[4]), int(h[3])
            self.cur ^= 1
            kind = "push"
        self.level += 1
        self.m_u -= self.ef
        self.last = (kind, 1)
        self.log.append((kind, 1, self.L, time.perf_counter()))
        return self.last


@_oom_to_error
def bfs(dg, src: int, *, direction: str = "auto", push: str = "bins", block_loop: bool = True,
        alpha: float = ALPHA, beta: float = BETA, block_loop_ecap: int = None,
        stats: Optional[dict] = None, to_host: bool = True):
    """(parent int64, depth int32): parent[src] == src, -1 unreached; depth -1 unreached.
    Options as BfsLevels. stats: levels, supersteps (one per launch group)."""
    b = BfsLevels(dg, direction=direction, push=push, block_loop=block_loop, alpha=alpha, beta=beta,
                  block_loop_ecap=block_loop_ecap)
    t_start = time.perf_counter()
    b.start(src)
    while not b.done:
        b.step()
    if stats is not None:
        stats["levels"] = b.level
        stats["supersteps"] = _compress_log(b.log, t_start)
    if not to_host:
        return b.parent, b.depth
    return b.parent.get().astype(np.int64), b.depth.get()


def _compress_log(log, t0):
    out = []
    for kind, k, L, t in log:
        out.append({"kind": kind, "levels": int(k), "frontier": int(L), "us": round((t - t0) * 1e6, 1)})
        t0 = t
    return out


# ------------------------------------------------------------------------------------------------
# PageRank
# ------------------------------------------------------------------------------------------------
#: Default way of summing the hub rows' in-edges (see pagerank()).
PR_METHOD = "auto"
#: In-degree bin bounds (thread / warp / 32-warp / block rows; rows of in-degree >= the last are the
#: "hubs"), for method "tile" and "pull". Tiles pay off from in-degree 128: H200, min of 2 runs,
#: ms/it scale 22 0.705 vs 0.730 with 512, scale 24 2.642 vs 2.793 (CuPy baseline 1.219 / 5.709;
#: tools/probe_gpu_pr_bounds.py, benchmarks/gpu_h200_pr_bounds.json); pull keeps 512 (one block
#: per row of 128-511 edges would idle most of its threads).
PR_BOUNDS = {"tile": (8, 64, 128), "pull": (8, 64, 512)}
#: pr_tile options (pagerank(tile=...) overrides): hubs per group 2^gbits, sources per segment 2^sbits.
#: Measured on H200, Kronecker scale 22/24 (tools/gpu_notes.md): 2^13 hubs x 2^13 sources per tile,
#: sources gathered through L1 (no staging: 64 KB of shared memory for the partial sums), tiles under
#: 2^13 edges left to the rest lists, chunks of 64K-128K edges. runs: hub-major tiles whose runs of
#: equal hubs are summed in registers and across each warp (one shared atomic per run, not per
#: edge), in blocks of 1,024 threads (threads None: 1,024 with runs, 512 without):
#: H200 ms/it scale 22 0.571 against 0.672 source-major, scale 24 2.29 against 2.61
#: (tools/probe_gpu_pr_sync.py, benchmarks/gpu_h200_pr_tile_runs_variants2.json).
PR_TILE = dict(min_degree=None, gbits=13, sbits=13, chunk=None, threads=None, fixed=True,
               load_min=None, stage=False, dense_min=None, runs=True)


def _pr_tiles(dg, key, iptr, iidx, bins, opts):
    """The hub rows' tiled layout for pagerank(method="tile"), or None (no hubs / memory short)."""
    cp = _module.cupy()
    o = dict(PR_TILE)
    if opts:
        unknown = set(opts) - set(o)
        if unknown:
            raise ValueError(f"unknown tile options {sorted(unknown)}")
        o.update(opts)
    gbits, sbits = int(o["gbits"]), int(o["sbits"])
    threads = int(o["threads"] or (1024 if o["runs"] else 512))
    if not (1 <= gbits <= 16 and 1 <= sbits <= 16):
        raise ValueError(f"tile gbits and sbits must be in 1..16, got {gbits}, {sbits}")
    smem = (8 if o["fixed"] else 4) * (1 << gbits) + (4 * (1 << sbits) if o["stage"] else 0)
    dev = cp.cuda.Device()
    limit = int(dev.attributes.get("MaxSharedMemoryPerBlockOptin") or
                cp.cuda.runtime.deviceGetAttribute(97, dev.id))   # cudaDevAttrMaxSharedMemoryPerBlockOptin
    if smem > limit:
        raise ValueError(f"tile options need {smem} bytes of shared memory per block; the device "
                         f"allows {limit}")
    blk = [(lst, ln) for w, lst, ln in bins if w == 0]
    if not blk or blk[0][1] == 0:
        return None
    lst = blk[0][0]
    if o["min_degree"]:
        deg = iptr[lst.astype(cp.int64) + 1] - iptr[lst.astype(cp.int64)]
        hubs, rest = lst[deg >= int(o["min_degree"])], lst[deg < int(o["min_degree"])]
    else:
        hubs, rest = lst, lst[:0]
    if hubs.size == 0:
        return None
    if o["chunk"]:
        chunk = int(o["chunk"])
    else:   # about 16 blocks per SM, 64K-128K edges each (a flush costs up to 2^gbits atomics)
        eh = int((iptr[hubs.astype(cp.int64) + 1] - iptr[hubs.astype(cp.int64)]).sum())
        chunk = min(max(eh // (16 * _module.sm_count()), 1 << 16), 1 << 17)
    dense_min = int(o["dense_min"]) if o["dense_min"] is not None else 1 << sbits
    runs = bool(o["runs"])
    if runs and threads % 32:
        raise ValueError(f"tile option runs needs whole warps per block, got threads={threads}")
    lay = dg.hub_tiles((key, int(o["min_degree"] or 0)), iptr, iidx, hubs, gbits, sbits, chunk, dense_min,
                       order="hub" if runs else "source")
    if lay is None:
        return None
    return dict(lay, hubs=hubs, nhubs=int(hubs.size), rest=rest, nrest=int(rest.size), gbits=gbits,
                sbits=sbits, chunk=chunk, threads=threads, fixed=bool(o["fixed"]), smem=smem, runs=runs,
                load_min=(int(o["load_min"]) if o["load_min"] is not None else (1 << sbits) // 8)
                if o["stage"] else 1 << 62)


def _guess_change(host, it):
    """Iteration it + 1's L1 change from the changes read so far (host[1..it]): the last one times
    the last ratio; inf before two are known."""
    if it < 2 or host[it - 1] <= 0:
        return float("inf")
    return float(host[it] * min(1.0, host[it] / host[it - 1]))


@_oom_to_error
def pagerank(dg, alpha: float = config.PR_ALPHA, tol: float = config.PR_TOLERANCE,
             max_iter: int = config.PR_MAX_ITERS, reorder: bool = True, bounds=None,
             block_threads: int = 256, hub_cache: bool = False, method: str = PR_METHOD,
             tile: Optional[dict] = None, stats: Optional[dict] = None, to_host: bool = True,
             init=None):
    """Pull PageRank: float64 scores summing to 1.

    score'[v] = (1 - alpha)/n + alpha * (sum_{u->v} score[u]/outdeg[u] + D/n), D = total score of
    vertices without out-edges (dangling mass spread uniformly). Starts at 1/n, or at `init` (n
    float64 scores summing to 1: where a CPU run handed over, gpu/handoff.py); stops after the
    iteration whose L1 change sum|score' - score| (plus a bound on the float32 contributions'
    rounding, 2.8e-7 at alpha 0.85) < tol, or after max_iter iterations (GAPBS rule).
    reorder: gather from a copy of the in-edge IDs renumbered by descending out-degree (built once,
    cached on the DeviceGraph, skipped when GPU memory is short): hubs' contributions share cache
    lines, so most gathers hit L2 on power-law graphs.
    method: how the hub rows (in-degree >= bounds[2], one block per row in "pull") are summed.
    "auto" (default): "tile" on the renumbered layout, "pull" without it (tiles over the original
    IDs measured slower than pull on the H200: 2.29 vs 1.18 ms/it at scale 22, 16.3 vs 6.1 at 24).
    "pull": gather contrib[u] for every in-edge (one L2 sector per edge). "tile": propagation
    blocking in shared memory (pr_tile in kernels.cu; layout from DeviceGraph.hub_tiles, built once
    and cached); falls back to "pull" when GPU memory is short. tile: options overriding
    PR_TILE (min_degree: tile only block-bin rows of at least this in-degree, None = bounds[2];
    gbits/sbits: log2 of hubs per group / sources per segment; chunk: edges per block, None = auto;
    threads; fixed: u64 fixed-point partial sums (else float); load_min: stage a segment in shared
    memory when a chunk has at least this many edges in it, None = S/8; stage=False: never, gathers
    go through L1 and shared memory holds only the partial sums; dense_min: tiles with fewer edges
    are gathered directly per hub instead, None = S; runs: hub-major tiles, one shared atomic per
    run of equal hubs (default; staging does not apply), else source-major).
    stats: iterations, error, reordered, method (the one that ran), tile (layout sizes).
    """
    if method not in ("auto", "tile", "pull"):
        raise ValueError(f"method must be 'auto', 'tile' or 'pull', got {method!r}")
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    if n == 0:
        if stats is not None:
            stats.update(iterations=0, error=0.0, reordered=False)
        return np.zeros(0, dtype=np.float64) if to_host else cp.zeros(0, dtype=cp.float64)
    lay = dg.gather_layout() if reorder else None
    if method == "auto":
        method = "tile" if lay is not None else "pull"
    if bounds is None:
        bounds = PR_BOUNDS[method]
    if lay is not None:        # run in the renumbered space, map back at the end
        order, inv, iptr, iidx, optr = lay
        bins = dg.bins_for("gather_in", iptr, tuple(bounds))
    else:
        inv = None
        iptr, iidx = dg.in_csr()
        optr = dg.ptr
        bins = dg.bins("in", tuple(bounds))
    tl = _pr_tiles(dg, ("gather_in" if lay is not None else "in", tuple(bounds)), iptr, iidx, bins,
                   tile) if method == "tile" else None
    if tl is not None:
        bins = [(w, lst, ln) for w, lst, ln in bins if w != 0] + [(0, tl["rest"], tl["nrest"])]
        hub_sum = cp.zeros(tl["ngroups"] << tl["gbits"], dtype=cp.float64)
        k_tile = mod.get_function(f"pr_tile<{1 if tl['fixed'] else 0}, {1 if tl['runs'] else 0}>")
        k_tile.max_dynamic_shared_size_bytes = tl["smem"]
        k_fin = mod.get_function("pr_hub_finish")
    has_inv = np.int32(0)
    inv_arg = iptr
    if init is None:
        score = cp.full(n, 1.0 / n, dtype=cp.float64)
    else:
        score = cp.asarray(np.ascontiguousarray(init, dtype=np.float64))
        if score.shape != (n,):
            raise ValueError(f"init has shape {score.shape}, expected ({n},)")
        if inv is not None:
            score = score[order]            # new ID i is vertex order[i]
    new = cp.empty(n, dtype=cp.float64)
    contrib = cp.empty(n, dtype=cp.float32)
    cnext = cp.empty(n, dtype=cp.float32)
    # One slot per iteration for the sums the kernels add into, zeroed once: dang[i] the dangling
    # mass iteration i + 1 spreads (dang[0] from the start scores), errs[i] iteration i's L1 change.
    # No fill between iterations, and an iteration's change stays readable while the next runs.
    dang = cp.zeros(max_iter + 1, dtype=cp.float64)
    errs = cp.zeros(max_iter + 1, dtype=cp.float64)
    k_contrib = mod.get_function("pr_contrib")
    hub = 8192 if (hub_cache and lay is not None) else 0
    ks = {w: mod.get_function(f"pr_pull<{w}, {hub if w != 1 else 0}>") for w in (1, 8, 32, 0)}
    # Iteration 1's contributions; later ones come out of the pull kernels themselves.
    k_contrib((_grid(n),), (BLOCK,), (score, optr, contrib, np.int32(n), dang[0:1], inv_arg, has_inv))
    prof = {} if (stats is not None and stats.get("profile")) else None
    # The stop rule without a pause per iteration: iteration i's change is copied to pinned host
    # memory behind its kernels and read once iteration i + 1 is queued, so the GPU does not wait
    # for the host's next launches. Only when the changes so far (they shrink geometrically) put
    # iteration i's within 2x of tol is it read before i + 1 is queued; a stop after a queued
    # iteration wastes that one, which writes only the buffers of iteration i - 1.
    stream = cp.cuda.get_current_stream()
    host = np.frombuffer(cp.cuda.alloc_pinned_memory(8 * (max_iter + 1)), np.float64, max_iter + 1)
    # The contributions every edge reads are float32: the reported change adds a bound on their
    # rounding, as the CPU path's does while its row is float32 (algos/pagerank/pull.py
    # _single_slack), so one more exact iteration moves the scores by at most alpha x error
    # (verify); a tolerance below it runs max_iter iterations.
    slack = 4.0 * 2.0 ** -24 / alpha
    done = []                       # (i, an event after iteration i's copy, its scores), unread
    it = 0
    err = float("inf")
    result = score
    for i in range(1, max_iter + 1):
        dcur, dnext, ei = dang[i - 1:i], dang[i:i + 1], errs[i:i + 1]
        if tl is not None:
            if prof is not None:
                e0 = cp.cuda.Event()
                e0.record()
            if tl["nchunks"]:
                k_tile((tl["nchunks"],), (tl["threads"],), (
                    tl["chunk_lo"], tl["chunk_tile"], tl["tile_ptr"], tl["words"], contrib, np.int32(n),
                    np.int32(tl["nseg"]), np.int32(tl["gbits"]), np.int32(tl["sbits"]),
                    np.int64(tl["load_min"]), hub_sum), shared_mem=tl["smem"])
            if prof is not None:
                em = cp.cuda.Event()
                em.record()
            k_fin((_grid(tl["nhubs"] * 32),), (BLOCK,), (
                tl["hubs"], np.int32(tl["nhubs"]), hub_sum, tl["rest_ptr"], tl["rest_idx"], contrib, score,
                new, np.float64(alpha), np.int32(n), dcur, ei, optr, cnext, dnext))
            if prof is not None:
                e1 = cp.cuda.Event()
                e1.record()
                e1.synchronize()
                prof.setdefault("tile", [tl["nhubs"], 0.0])
                prof["tile"][1] += cp.cuda.get_elapsed_time(e0, e1)
                prof.setdefault("tile_finish", [tl["nhubs"], 0.0])   # part of "tile"
                prof["tile_finish"][1] += cp.cuda.get_elapsed_time(em, e1)
        for w, lst, ln in bins:
            if ln == 0:
                continue
            bt = block_threads if w == 0 else BLOCK
            g = _grid(ln * (w if w else BLOCK)) if w else min(ln, _module.sm_count() * 16)
            if prof is not None:
                e0 = cp.cuda.Event()
                e0.record()
            ks[w]((g,), (bt,), (lst, np.int32(ln), iptr, iidx, contrib, score, new,
                                np.float64(alpha), np.int32(n), dcur, ei, optr, cnext, dnext))
            if prof is not None:
                e1 = cp.cuda.Event()
                e1.record()
                e1.synchronize()
                prof.setdefault(f"W{w}", [0, 0.0])
                prof[f"W{w}"][0] = ln
                prof[f"W{w}"][1] += cp.cuda.get_elapsed_time(e0, e1)
        cp.cuda.runtime.memcpyAsync(host.ctypes.data + 8 * i, ei.data.ptr, 8,
                                    cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        ev = cp.cuda.Event(block=False, disable_timing=True)
        ev.record(stream)
        done.append((i, ev, new))
        score, new = new, score
        contrib, cnext = cnext, contrib
        stop = False
        while done and not stop:
            if len(done) == 1 and i < max_iter and _guess_change(host, it) + slack >= 2 * tol:
                break                          # read with the next iteration queued
            j, evj, sj = done.pop(0)
            evj.synchronize()
            it, err, result = j, float(host[j]) + slack, sj
            stop = err < tol
        if stop:
            break
    score = result
    if stats is not None:
        stats.update(iterations=it, error=err, reordered=inv is not None,
                     method="tile" if tl is not None else "pull")
        if tl is not None:
            stats["tile"] = {k: tl[k] for k in ("nhubs", "hub_edges", "tiled_edges", "rest_edges",
                                                "nchunks", "ngroups", "nseg",
                                                "gbits", "sbits", "chunk", "load_min", "fixed", "threads",
                                                "runs")}
        if prof is not None:
            stats["profile_ms"] = prof
    if inv is not None:
        score = score[inv]
    return score.get() if to_host else score


# ------------------------------------------------------------------------------------------------
# WCC
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def wcc(dg, verify: bool = False, method: str = "afforest", stats: Optional[dict] = None,
        sample_rounds: int = 2, samples: int = 1024, init=None):
    """labels int64: the minimum vertex ID of each weakly connected component.

    method="afforest" (default; Sutton et al., IPDPS'18, as GAPBS's cc.cc): unite every vertex with
    its first `sample_rounds` neighbours, compress, take the most frequent label among `samples`
    random vertices as the giant component, then only vertices outside it unite the rest of their
    lists (directed graphs: also their whole in-lists). On power-law graphs the giant component
    holds nearly every edge, so most lists are never read.
    method="full": one pass of lock-free union-find over every edge.
    Both hook the larger root under the smaller, so every root is its component's minimum ID, and
    read the labels off the forest without writing it. verify=True adds a check pass over every
    edge that would also repair an inconsistency by Shiloach-Vishkin rounds (hook by atomicMin +
    pointer jumping) until stable. stats: n_components, repair_rounds, giant, method.
    init: a forest to start from instead of every vertex alone (a CPU run's labels handed over
    in mid-run, gpu/handoff.py): each label an ID of the vertex's component, no larger than it.
    """
    if method not in ("afforest", "full"):
        raise ValueError(f"method must be 'afforest' or 'full', got {method!r}")
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    comp = cp.arange(n, dtype=cp.int32) if init is None else \
        cp.asarray(np.ascontiguousarray(init, dtype=np.int32))
    lab = comp
    repairs = 0
    giant = -1
    if n and dg.num_edges:
        def sched(bins):
            return [(w, lst, ln, _grid(ln * (w if w else BLOCK)) if w else
                     min(ln, _module.sm_count() * 16)) for w, lst, ln in bins if ln]
        out_bins = sched(dg.bins("out"))
        lab = cp.empty_like(comp)
        compress = mod.get_function("wcc_compress")
        if method == "full":
            sym = np.int32(1 if dg.symmetric else 0)
            for w, lst, ln, g in out_bins:
                mod.get_function(f"wcc_hook<{w}>")((g,), (BLOCK,), (lst, np.int32(ln), dg.ptr, dg.idx,
                                                                   comp, sym))
        else:
            sample = mod.get_function("wcc_sample")
            head, hk = dg.head("out")       # lists' heads in GPU memory (zero-copy tiers)
            for r in range(sample_rounds):
                sample((_grid(n),), (BLOCK,), (dg.ptr, dg.idx, head, np.int32(hk), comp, np.int32(n),
                                               np.int32(r)))
                compress((_grid(n),), (BLOCK,), (comp, lab, np.int32(n)))
                comp, lab = lab, comp
            pick = cp.random.RandomState(config.SEED).randint(0, n, size=min(samples, n))
            vals, counts = np.unique(comp[pick].get(), return_counts=True)
            giant = int(vals[np.argmax(counts)])
            for w, lst, ln, g in out_bins:
                mod.get_function(f"wcc_link_rest<{w}>")((g,), (BLOCK,), (
                    lst, np.int32(ln), dg.ptr, dg.idx, head, np.int32(hk), comp, np.int32(giant),
                    np.int32(sample_rounds)))
            if not dg.symmetric:
                iptr, iidx = dg.in_csr()
                ihead, ihk = dg.head("in")
                for w, lst, ln, g in sched(dg.bins("in")):
                    mod.get_function(f"wcc_link_rest<{w}>")((g,), (BLOCK,), (
                        lst, np.int32(ln), iptr, iidx, ihead, np.int32(ihk), comp, np.int32(giant),
                        np.int32(0)))
        compress((_grid(n),), (BLOCK,), (comp, lab, np.int32(n)))
        flag = cp.zeros(1, dtype=cp.int32)
        while verify:
            flag.fill(0)
            for w, lst, ln, g in out_bins:
                mod.get_function(f"wcc_sv_hook<{w}>")((g,), (BLOCK,), (lst, np.int32(ln), dg.ptr, dg.idx,
                                                                      lab, flag))
            if not int(flag.get()[0]):
                break
            repairs += 1
            mod.get_function("wcc_jump")((_grid(n),), (BLOCK,), (lab, np.int32(n)))
    labels = lab.astype(cp.int64).get()
    if stats is not None:
        stats["n_components"] = int(np.count_nonzero(labels == np.arange(n)))
        stats["repair_rounds"] = repairs
        stats["giant"] = giant
        stats["method"] = method
    return labels


# ------------------------------------------------------------------------------------------------
# Multi-source BFS (iBFS)
# ------------------------------------------------------------------------------------------------
#: How msbfs() runs by default. "bfs": one direction-optimizing BFS per source (BfsLevels, the
#: kernels of bfs()), each depth row copied into the result; "bits": iBFS, the sources as bits of
#: one word per vertex, every level bottom-up over every vertex. One thread scans a vertex's whole
#: list in "bits", so a hub's list takes one thread many levels, while the BFS kernels spread long
#: lists over warps and blocks and skip the settled vertices. 32 random sources on the H200,
#: Kronecker edge factor 16 (the results equal): scale 22 0.038 s against 0.099 s, scale 24
#: 0.073-0.081 s against 0.36 s (a throwaway probe, BENCHMARKS.md "MS-BFS on the GPU").
MSBFS_METHOD = "bfs"


@_oom_to_error
def msbfs(dg, sources, word_bits: int = 64, batch_levels: int = 32, stats: Optional[dict] = None,
          to_host: bool = True, method: str = None, init=None, depth=None):
    """depth int32[len(sources), n]: BFS depth of every vertex from each source (-1 unreached).

    method (default MSBFS_METHOD): "bfs", one BFS per source (a repeated source's row copied);
    "bits", the sources in groups of word_bits (32 or 64) as bits of one word per vertex, levels
    bottom-up over in-edges, the host checking for progress once per `batch_levels` levels.
    init = (visited, level): go on from a CPU pass over these sources (at most 64: one group,
    the bits method, 32-bit words for up to 32) after that level: visited[v] has bit i where
    sources[i] reached v by then (gpu/handoff.py MSBFSPart). Only the levels after it are
    written: into `depth` when given (k x n int32 on the GPU: the rows so far), else into rows
    of -1.
    """
    cp = _module.cupy()
    n = dg.num_vertices
    sources = np.asarray(sources, dtype=np.int64).ravel()
    for s in sources:
        _check_src(dg, s)
    method = MSBFS_METHOD if method is None else method
    k = len(sources)
    if init is not None:
        if k > 64 or len(init[0]) != n:
            raise GrapheneError(f"msbfs init: {len(init[0])} words for {n} vertices and {k} "
                                f"sources (at most 64)")
        method, word_bits = "bits", (32 if k <= 32 else 64)
    if method not in ("bfs", "bits"):
        raise GrapheneError(f"msbfs method must be bfs or bits, not {method!r}")
    if word_bits not in (32, 64):
        raise GrapheneError("word_bits must be 32 or 64")
    if depth is None:
        depth = cp.full((k, n), -1, dtype=cp.int32)
    elif depth.shape != (k, n):
        raise GrapheneError(f"msbfs depth has shape {depth.shape}, expected ({k}, {n})")
    if k == 0 or n == 0:
        return depth.get() if to_host else depth
    if method == "bfs":
        _msbfs_by_bfs(dg, sources, depth, stats)
        return depth.get() if to_host else depth
    mod = _module.module()
    iptr, iidx = dg.in_csr()
    ihead, ihk = dg.head("in")                 # lists' heads in GPU memory (zero-copy tiers)
    ihk = np.int32(ihk)
    wt = cp.uint32 if word_bits == 32 else cp.uint64
    kern = mod.get_function("msbfs_pull<unsigned int>" if word_bits == 32 else
                            "msbfs_pull<unsigned long long>")
    total_levels = 0
    for g0 in range(0, k, word_bits):
        grp = sources[g0:g0 + word_bits]
        kk = len(grp)
        full = (1 << kk) - 1
        verts, inv = np.unique(grp, return_inverse=True)
        words = np.zeros(len(verts), dtype=np.uint64)
        for j, vi in enumerate(inv):
            words[vi] |= np.uint64(1) << np.uint64(j)
        nxt = cp.empty(n, dtype=wt)
        sub = depth[g0:g0 + kk]
        if init is None:
            cur = cp.zeros(n, dtype=wt)
            cur[cp.asarray(verts)] = cp.asarray(words.astype(wt))
            sub[cp.arange(kk), cp.asarray(grp)] = 0
            level = 0
        else:
            cur = cp.asarray(np.ascontiguousarray(init[0]).astype(wt, copy=False))
            level = int(init[1])
        while True:
            flags = cp.zeros(batch_levels, dtype=cp.int32)
            for b in range(batch_levels):
                kern((_grid(n),), (BLOCK,), (iptr, iidx, ihead, ihk, cur, nxt, np.int32(n), wt(full),
                                            np.int32(level + b),
                                            sub, flags[b:b + 1]))
                cur, nxt = nxt, cur
            f = flags.get()
            stop = np.flatnonzero(f == 0)
            if len(stop):
                level += int(stop[0])
                break
            level += batch_levels
        total_levels = max(total_levels, level)
    if stats is not None:
        stats["levels"] = total_levels
    return depth.get() if to_host else depth


def _msbfs_by_bfs(dg, sources, depth, stats):
    """msbfs(method="bfs"): depth[i] = the depths of one BFS from sources[i] (one BfsLevels, its
    state reused from source to source)."""
    b = BfsLevels(dg)
    first = {}
    levels = 0
    for i, s in enumerate(sources):
        s = int(s)
        if s in first:
            depth[i] = depth[first[s]]
            continue
        first[s] = i
        b.start(s)
        while not b.done:
            b.step()
        depth[i] = b.depth
        levels = max(levels, int(b.level))
    if stats is not None:
        stats["levels"] = levels


# ------------------------------------------------------------------------------------------------
# SSSP
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def sssp(dg, src: int, delta: Optional[float] = None, stats: Optional[dict] = None, init=None,
         chunks: str = "auto", slot_bytes: Optional[int] = None, chunk_shift: Optional[int] = None):
    """dist float64 (np.inf unreached) by delta-stepping. Unweighted graphs use weight 1.
    delta: bucket width (default: 4 x the mean weight). init = (dist, lo): go on from a CPU
    run's distances (float64, inf unreached; src is then not used), every one below lo final:
    the buckets start at lo (gpu/handoff.py SSSPPart). With lists or weights in pinned host
    memory, chunks of them that a relaxation round reads densely are copied to GPU memory first
    (gpu/chunks.py; chunks: "auto", "zero-copy", "copy"; slot_bytes: GPU memory for them,
    default what the budget leaves with the lists' heads freed: SSSP reads none)."""
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    src = _check_src(dg, src)
    has_w = dg.weights is not None
    if has_w and dg.num_edges:
        wmin = float(dg.weights.min())
        if not wmin >= 0:
            raise GrapheneError(f"SSSP needs non-negative weights (min weight {wmin})")
    if delta is None:
        delta = 4.0 * (float(dg.weights.mean()) if has_w and dg.num_edges else 1.0)
    delta = float(delta)
    if not delta > 0:
        raise GrapheneError("delta must be > 0")
    w = dg.weights if has_w else dg.idx     # (-0.0 weights are harmless: d + -0.0 == d for d >= +0)
    if init is None:
        distf = cp.full(n, cp.inf, dtype=cp.float64)
        distf[src] = 0.0
    else:
        d0, lo0 = init
        d0 = np.asarray(d0, dtype=np.float64)
        if d0.shape != (n,):
            raise GrapheneError(f"SSSP's distances to go on from have shape {d0.shape}, "
                                f"expected ({n},)")
        distf = cp.asarray(d0)
    dist = distf.view(cp.uint64)
    stamp = cp.zeros(n, dtype=cp.int32)
    qa = cp.empty(max(n, 1), dtype=cp.int32)
    qb = cp.empty(max(n, 1), dtype=cp.int32)
    ctr = cp.zeros(1, dtype=cp.int32)
    kern = mod.get_function("sssp_relax")
    if init is None:
        qa[0] = src
        L = 1
        bound = delta
    else:            # nothing queued: the first scan takes the lowest bucket from lo on
        L = 0
        bound = float(init[1])
    it = 0
    buckets = 0
    with _stager(dg, ("out",), True, chunks, slot_bytes, chunk_shift) as stage:
        while True:
            buckets += 1
            while L > 0:
                it += 1
                ctr.fill(0)
                stage.round(qa, L, lambda q, nq: kern(
                    (_grid(nq * 32),), (BLOCK,), (q, np.int32(nq), dg.ptr, dg.idx, w,
                                                  np.int32(has_w), dist, stamp, np.int32(it),
                                                  np.float64(bound), qb, ctr)))
                L = int(ctr.get()[0])
                qa, qb = qb, qa
            lo = bound
            far = distf[(distf >= lo) & (distf < cp.inf)]
            if far.size == 0:
                break
            mn = float(far.min())
            bound = (math.floor(mn / delta) + 1) * delta
            if bound <= mn:
                bound = math.nextafter(mn, math.inf)
            q = cp.flatnonzero((distf >= lo) & (distf < bound)).astype(cp.int32)
            L = int(q.size)
            qa[:L] = q
            del q, far
    if stats is not None:
        stats.update(iterations=it, buckets=buckets, delta=delta, **stage.summary())
    return distf.get()


def _stager(dg, which, weights: bool, mode: str, slot_bytes, shift):
    """The chunk stager of a run over dg's host-resident arrays among `which` (gpu/chunks.py); one
    that stages nothing when every array is in GPU memory or mode is "zero-copy". An SSSP run
    (weights=True) reads no list heads: their memory counts towards the slots, and they are
    freed when that gives slots (head() builds them again for a later run)."""
    from . import chunks as C
    groups = C.groups_of(dg, which, weights=weights) if dg.tiered else []
    if mode not in C.MODES:
        raise GrapheneError(f"chunks must be one of {', '.join(C.MODES)}, not {mode!r}")
    shift = C.SHIFT if shift is None else int(shift)
    if not groups or mode == "zero-copy" or slot_bytes is not None:
        return C.Stager(groups, int(slot_bytes or 0), mode=mode, shift=shift)
    heads = sum(a.nbytes for a, _h in dg.heads.values()) if weights else 0
    stage = C.Stager(groups, C.free_bytes(dg, STATE_BYTES_PER_VERTEX * dg.num_vertices) + heads,
                     mode=mode, shift=shift)
    if stage.slots and heads:        # (heads kept when there would be no slots anyway)
        dg.release_heads()
        _module.cupy().get_default_memory_pool().free_all_blocks()
    return stage


# ------------------------------------------------------------------------------------------------
# k-core
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def kcore(dg, stats: Optional[dict] = None, block_loop: bool = True, init=None,
          chunks: str = "auto", slot_bytes: Optional[int] = None, chunk_shift: Optional[int] = None,
          stop: Optional[int] = None):
    """core_number int32 of every vertex; degree = out + in on directed graphs (out on symmetric
    ones, where each undirected edge is stored both ways); self-loops ignored. block_loop: a
    queue of at most KCORE_LOOP_VCAP vertices and KCORE_LOOP_ECAP list entries is peeled round
    after round by one block on the device (kcore_peel_loop), not a launch and a wait a round.
    init: (core, k) from a peel done so far (a CPU run handed over, gpu/handoff.py KCorePart):
    core[v] >= 0 the core number of a vertex removed already, -1 for one still there; k the
    level reached (no removed vertex's number above it). The peel goes on from there, each
    remaining vertex's degree counted over the remaining vertices.
    stop: end the peel once the level reaches it (one K-core, stop = K: every vertex left then
    has K or more neighbours left, a member; its core number stays -1).
    chunks, slot_bytes, chunk_shift: as sssp()'s, for the lists' entries past their heads when
    the lists are in pinned host memory (the grid's peel rounds; the device loop's small queues
    read over the bus)."""
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    k = 0
    if init is None:
        core = cp.full(n, -1, dtype=cp.int32)
        fn = "count_nonself"
    else:
        core = cp.asarray(np.ascontiguousarray(init[0], dtype=np.int32))
        k = int(init[1])
        if core.shape != (n,):
            raise GrapheneError(f"kcore init: {core.shape[0]} core numbers for {n} vertices")
        fn = "count_alive_nonself"
    if n == 0:
        return core.get()
    deg = cp.zeros(n, dtype=cp.int32)
    lists = [(dg.ptr, dg.idx, "out")]
    if not dg.symmetric:
        ip, ii = dg.in_csr()
        lists.append((ip, ii, "in"))
    for p, ix, d in lists:
        for w, lst, ln in dg.bins(d):
            if ln:
                g = _grid(ln * (w if w else BLOCK)) if w else min(ln, _module.sm_count() * 16)
                args = (lst, np.int32(ln), p, ix) + ((core,) if init is not None else ()) + (deg,)
                mod.get_function(f"{fn}<{w}>")((g,), (BLOCK,), args)
    ptr2, idx2 = (lists[1][0], lists[1][1]) if len(lists) > 1 else (dg.ptr, dg.idx)
    has2 = np.int32(1 if len(lists) > 1 else 0)
    head, hk = dg.head("out")                  # lists' heads in GPU memory (zero-copy tiers)
    head2, hk2 = dg.head("in") if has2 else (head, 0)
    qa = cp.empty(n, dtype=cp.int32)
    qb = cp.empty(n, dtype=cp.int32)
    ctr = cp.zeros(2, dtype=cp.int64)       # [0] as int32: the next queue's length; [1] its entries
    st = cp.zeros(8, dtype=cp.int64)
    vcap = KCORE_LOOP_VCAP if block_loop else 0
    remaining = n if init is None else int(cp.count_nonzero(core < 0))
    stage = _stager(dg, ("out",) if not has2 else ("out", "in"), False, chunks, slot_bytes,
                    chunk_shift)
    with stage:
        loop_rounds, rounds = _kcore_peel(dg, stage, core, deg, k, remaining, vcap, qa, qb, ctr,
                                          st, head, hk, ptr2, idx2, head2, hk2, has2, stop)
    if stats is not None:
        stats.update(rounds=rounds, device_loop_rounds=loop_rounds, max_core=int(core.max()),
                     **stage.summary())
    return core.get()


def _kcore_peel(dg, stage, core, deg, k, remaining, vcap, qa, qb, ctr, st, head, hk, ptr2, idx2,
                head2, hk2, has2, stop=None):
    """kcore()'s peel, level after level (up to `stop`): (device loop rounds, rounds)."""
    cp = _module.cupy()
    mod = _module.module()
    kern = mod.get_function("kcore_peel")
    k_loop = mod.get_function("kcore_peel_loop")
    rounds = loop_rounds = 0
    while remaining > 0:
        alive = core < 0
        k = max(k, int(deg[alive].min()))
        if stop is not None and k >= stop:
            break
        q = cp.flatnonzero(alive & (deg <= k)).astype(cp.int32)
        L = int(q.size)
        qa[:L] = q
        ne = -1                   # the queue's list entries: not known yet (the loop counts them)
        del q, alive
        while L > 0:
            if L <= vcap and ne <= KCORE_LOOP_ECAP:
                # small queues: rounds on the device until the queue empties or grows
                st.set(np.array([L, 0, ne, 0, 0, 0, 0, 0], dtype=np.int64))
                k_loop((1,), (BLOCK_LOOP_THREADS,),
                       (qa, qb, dg.ptr, dg.idx, head, np.int32(hk), ptr2, idx2, head2,
                        np.int32(hk2), has2, deg, core, np.int32(k), st, np.int32(vcap),
                        np.int64(KCORE_LOOP_ECAP)))
                h = st.get()
                L, ne = int(h[0]), int(h[2])
                rounds += int(h[3])
                loop_rounds += int(h[3])
                remaining -= int(h[4])
                if h[1]:
                    qa, qb = qb, qa
                if h[3]:
                    continue      # (none run: the queue's lists were too long; a grid round)
            rounds += 1
            remaining -= L
            ctr.fill(0)
            stage.round(qa, L, lambda q, nq: kern(
                (_grid(nq * 32),), (BLOCK,), (q, np.int32(nq), dg.ptr, dg.idx, head, np.int32(hk),
                                              ptr2, idx2, head2, np.int32(hk2), has2, deg, core,
                                              np.int32(k), qb, ctr, ctr[1:])), ne)
            h = ctr.get()
            L, ne = int(h[0]), int(h[1])
            qa, qb = qb, qa
        k += 1
    return loop_rounds, rounds
