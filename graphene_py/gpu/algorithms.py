"""GPU algorithms over a DeviceGraph. Each returns numpy arrays in the CPU path's encoding.

bfs        direction-optimizing BFS (Beamer; Enterprise degree bins; single-block device loop for small
           frontiers so high-diameter graphs cost no host round trip per level)
pagerank   pull PageRank, GAPBS stop rule, dangling mass spread uniformly (scores sum to 1)
wcc        lock-free union-find hooking larger roots under smaller ones: label = min vertex ID
msbfs      iBFS: 32/64 sources as bits of one word per vertex, bottom-up with early exit
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

BLOCK = 256
#: Single-block device loop limits: it runs while a level's frontier has at most this many vertices
#: and out-edges (beyond that a grid of blocks is faster than one block: with 32,768 edges the loop cost
#: 90-110 us for the first two Kronecker levels, 8-10% of a scale-24 BFS; see tools/gpu_notes.md).
BLOCK_LOOP_VCAP = 2048
BLOCK_LOOP_ECAP = 4096
BLOCK_LOOP_THREADS = 1024
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
@_oom_to_error
def bfs(dg, src: int, *, direction: str = "auto", push: str = "bins", block_loop: bool = True,
        alpha: float = ALPHA, beta: float = BETA, block_loop_ecap: int = None,
        stats: Optional[dict] = None, to_host: bool = True):
    """(parent int64, depth int32): parent[src] == src, -1 unreached; depth -1 unreached.

    direction: "auto" (direction-optimizing; needs in-edges, else push only), "push", "pull".
    push: "bins" (Enterprise thread/warp/block/grid bins) or "warp" (one warp per frontier vertex).
    block_loop: run small frontiers level after level inside one block (device-side loop).
    """
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    src = _check_src(dg, src)
    ecap = BLOCK_LOOP_ECAP if block_loop_ecap is None else int(block_loop_ecap)
    depth = cp.full(n, -1, dtype=cp.int32)
    parent = cp.full(n, -1, dtype=cp.int32)
    depth[src] = 0
    parent[src] = src
    use_pull = direction in ("auto", "pull") and (dg.has_in_edges or direction == "pull")
    if direction not in ("auto", "push", "pull"):
        raise GrapheneError(f"direction must be auto, push or pull, not {direction!r}")
    if use_pull:
        iptr, iidx = dg.in_csr()
    optr, oidx = dg.ptr, dg.idx
    qa = cp.empty(max(n, 1), dtype=cp.int32)
    qb = cp.empty(max(n, 1), dtype=cp.int32)
    bins = [cp.empty(max(n, 1), dtype=cp.int32) for _ in range(4)]
    nwords = (n + 31) // 32
    bma = cp.zeros(max(nwords, 1), dtype=cp.uint32)
    bmb = cp.zeros(max(nwords, 1), dtype=cp.uint32)
    buf = cp.zeros(8, dtype=cp.int64)        # as int32[16]: [0..3] bin lengths, [4] next length
    cnt = buf.view(cp.int32)
    esum = buf[3:4].view(cp.uint64)
    st = cp.zeros(8, dtype=cp.int64)
    k_loop = mod.get_function("bfs_block_loop")
    k_class = mod.get_function("bfs_classify")
    k_pull = mod.get_function("bfs_pull")
    k_q2b = mod.get_function("queue_to_bitmap")
    if push == "bins":
        t1, t2, t3 = PUSH_BINS
    elif push == "warp":
        t1, t2, t3 = 0, 1 << 62, 1 << 62      # everything in the warp bin
    else:
        raise GrapheneError(f"push must be bins or warp, not {push!r}")
    k_push = [mod.get_function(f"bfs_push<{w}>") for w in (1, 32, 0, -1)]
    gpush = _module.sm_count() * 16

    qa[0] = src
    L = 1
    ef = int(dg.ptr[src + 1] - dg.ptr[src])
    m_u = dg.num_edges
    level = 0
    cur = 0                     # frontier queue: 0 -> qa, 1 -> qb
    rep = "queue"               # frontier held as "queue" or "bitmap" (bma)
    prev_L = 0
    log = []                    # (kind, levels, frontier after)
    mode_pull = direction == "pull"
    t_start = time.perf_counter()
    while L > 0:
        if (rep == "queue" and block_loop and direction != "pull" and L <= BLOCK_LOOP_VCAP
                and ef <= ecap):
            st.set(np.array([L, level, cur, ef, 0, 0, 0, 0], dtype=np.int64))
            k_loop((1,), (BLOCK_LOOP_THREADS,),
                   (optr, oidx, depth, parent, qa, qb, st, np.int32(BLOCK_LOOP_VCAP),
                    np.int64(ecap), np.int64(1 << 40)))
            h = st.get()
            L, level, cur, ef, explored, done = (int(x) for x in h[:6])
            m_u -= explored
            log.append(("block", done, L, time.perf_counter()))
            prev_L = 0
            continue
        if use_pull and direction == "auto":
            if not mode_pull:
                mode_pull = ef > m_u / alpha
            else:
                mode_pull = not (L < n / beta and L < prev_L)
        if mode_pull:
            if rep == "queue":
                bma.fill(0)
                qcur = qa if cur == 0 else qb
                k_q2b((max(1, (L + BLOCK - 1) // BLOCK),), (BLOCK,), (qcur, np.int32(L), bma))
                rep = "bitmap"
            buf.fill(0)
            k_pull((_grid(n),), (BLOCK,), (iptr, iidx, optr, depth, parent, bma, bmb, np.int32(n),
                                          np.int32(level), cnt[4:5], esum))
            h = buf.get()
            bma, bmb = bmb, bma
            prev_L, L, ef = L, int(h.view(np.int32)[4]), int(h[3])
            level += 1
            log.append(("pull", 1, L, time.perf_counter()))
        else:
            if rep == "bitmap":
                qn = cp.flatnonzero(depth == level).astype(cp.int32)
                qa[:qn.size] = qn
                cur = 0
                rep = "queue"
                del qn
            qcur, qnext = (qa, qb) if cur == 0 else (qb, qa)
            buf.fill(0)
            k_class((_grid(L),), (BLOCK,), (qcur, np.int32(L), optr, bins[0], bins[1], bins[2], bins[3],
                                           cnt, esum, np.int64(t1), np.int64(t2), np.int64(t3)))
            esum.fill(0)
            for b, (k, w) in enumerate(zip(k_push, (1, 32, 0, -1))):
                if w == 1:
                    g = _grid(L)
                elif w == 32:
                    g = _grid(L * 32)
                else:
                    g = gpush
                k((g,), (BLOCK,), (bins[b], cnt[b:b + 1], optr, oidx, depth, parent, np.int32(level),
                                   qnext, cnt[4:5], esum))
            h = buf.get()
            prev_L, L, ef = L, int(h.view(np.int32)[4]), int(h[3])
            cur ^= 1
            level += 1
            log.append(("push", 1, L, time.perf_counter()))
        m_u -= ef
    if stats is not None:
        stats["levels"] = level
        stats["supersteps"] = _compress_log(log, t_start)
    if not to_host:
        return parent, depth
    return parent.get().astype(np.int64), depth.get()


def _compress_log(log, t0):
    out = []
    for kind, k, L, t in log:
        out.append({"kind": kind, "levels": int(k), "frontier": int(L), "us": round((t - t0) * 1e6, 1)})
        t0 = t
    return out


# ------------------------------------------------------------------------------------------------
# PageRank
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def pagerank(dg, alpha: float = config.PR_ALPHA, tol: float = config.PR_TOLERANCE,
             max_iter: int = config.PR_MAX_ITERS, reorder: bool = True, bounds=(8, 64, 512),
             block_threads: int = 256, hub_cache: bool = False, stats: Optional[dict] = None,
             to_host: bool = True):
    """Pull PageRank: float64 scores summing to 1.

    score'[v] = (1 - alpha)/n + alpha * (sum_{u->v} score[u]/outdeg[u] + D/n), D = total score of
    vertices without out-edges (dangling mass spread uniformly). Starts at 1/n; stops after the
    iteration whose L1 change sum|score' - score| < tol, or after max_iter iterations (GAPBS rule).
    reorder: gather from a copy of the in-edge IDs renumbered by descending out-degree (built once,
    cached on the DeviceGraph, skipped when GPU memory is short): hubs' contributions share cache
    lines, so most gathers hit L2 on power-law graphs.
    stats: iterations, error, reordered.
    """
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    if n == 0:
        if stats is not None:
            stats.update(iterations=0, error=0.0, reordered=False)
        return np.zeros(0, dtype=np.float64) if to_host else cp.zeros(0, dtype=cp.float64)
    lay = dg.gather_layout() if reorder else None
    if lay is not None:        # run in the renumbered space, map back at the end
        order, inv, iptr, iidx, optr = lay
        bins = dg.bins_for("gather_in", iptr, tuple(bounds))
    else:
        inv = None
        iptr, iidx = dg.in_csr()
        optr = dg.ptr
        bins = dg.bins("in", tuple(bounds))
    has_inv = np.int32(0)
    inv_arg = iptr
    score = cp.full(n, 1.0 / n, dtype=cp.float64)
    new = cp.empty(n, dtype=cp.float64)
    contrib = cp.empty(n, dtype=cp.float32)
    cnext = cp.empty(n, dtype=cp.float32)
    acc = cp.zeros(3, dtype=cp.float64)        # [0], [2]: dangling mass (ping-pong), [1]: L1 change
    k_contrib = mod.get_function("pr_contrib")
    hub = 8192 if (hub_cache and lay is not None) else 0
    ks = {w: mod.get_function(f"pr_pull<{w}, {hub if w != 1 else 0}>") for w in (1, 8, 32, 0)}
    # Iteration 1's contributions; later ones come out of the pull kernels themselves.
    k_contrib((_grid(n),), (BLOCK,), (score, optr, contrib, np.int32(n), acc[0:1], inv_arg, has_inv))
    it = 0
    err = float("inf")
    prof = {} if (stats is not None and stats.get("profile")) else None
    for it in range(1, max_iter + 1):
        dcur = acc[0:1] if it % 2 else acc[2:3]
        dnext = acc[2:3] if it % 2 else acc[0:1]
        dnext.fill(0)
        acc[1:2].fill(0)
        for w, lst, ln in bins:
            if ln == 0:
                continue
            bt = block_threads if w == 0 else BLOCK
            g = _grid(ln * (w if w else BLOCK)) if w else min(ln, _module.sm_count() * 16)
            if prof is not None:
                e0 = cp.cuda.Event()
                e0.record()
            ks[w]((g,), (bt,), (lst, np.int32(ln), iptr, iidx, contrib, score, new,
                                np.float64(alpha), np.int32(n), dcur, acc[1:2], optr, cnext, dnext))
            if prof is not None:
                e1 = cp.cuda.Event()
                e1.record()
                e1.synchronize()
                prof.setdefault(f"W{w}", [0, 0.0])
                prof[f"W{w}"][0] = ln
                prof[f"W{w}"][1] += cp.cuda.get_elapsed_time(e0, e1)
        score, new = new, score
        contrib, cnext = cnext, contrib
        err = float(acc[1].get())
        if err < tol:
            break
    if stats is not None:
        stats.update(iterations=it, error=err, reordered=inv is not None)
        if prof is not None:
            stats["profile_ms"] = prof
    if inv is not None:
        score = score[inv]
    return score.get() if to_host else score


# ------------------------------------------------------------------------------------------------
# WCC
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def wcc(dg, verify: bool = True, stats: Optional[dict] = None):
    """labels int64: the minimum vertex ID of each weakly connected component.

    One pass of lock-free union-find over the edges (larger root hooked under the smaller), labels
    read off the forest, then (verify=True) one check pass over the edges that would also repair any
    inconsistency by Shiloach-Vishkin rounds (hook by atomicMin + pointer jumping) until stable.
    """
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    comp = cp.arange(n, dtype=cp.int32)
    lab = comp
    repairs = 0
    if n and dg.num_edges:
        bins = [(w, lst, ln, _grid(ln * (w if w else BLOCK)) if w else min(ln, _module.sm_count() * 16))
                for w, lst, ln in dg.bins("out") if ln]
        sym = np.int32(1 if dg.symmetric else 0)
        for w, lst, ln, g in bins:
            mod.get_function(f"wcc_hook<{w}>")((g,), (BLOCK,), (lst, np.int32(ln), dg.ptr, dg.idx, comp, sym))
        lab = cp.empty_like(comp)
        mod.get_function("wcc_compress")((_grid(n),), (BLOCK,), (comp, lab, np.int32(n)))
        flag = cp.zeros(1, dtype=cp.int32)
        while verify:
            flag.fill(0)
            for w, lst, ln, g in bins:
                mod.get_function(f"wcc_sv_hook<{w}>")((g,), (BLOCK,), (lst, np.int32(ln), dg.ptr, dg.idx,
                                                                      lab, flag))
            if not int(flag.get()[0]):
                break
            repairs += 1
            mod.get_function("wcc_jump")((_grid(n),), (BLOCK,), (lab, np.int32(n)))
    labels = lab.get().astype(np.int64)
    if stats is not None:
        stats["n_components"] = int(np.count_nonzero(labels == np.arange(n)))
        stats["repair_rounds"] = repairs
    return labels


# ------------------------------------------------------------------------------------------------
# Multi-source BFS (iBFS)
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def msbfs(dg, sources, word_bits: int = 64, batch_levels: int = 32, stats: Optional[dict] = None,
          to_host: bool = True):
    """depth int32[len(sources), n]: BFS depth of every vertex from each source (-1 unreached).

    Sources are processed in groups of word_bits (32 or 64) as bits of one word per vertex. Levels
    run bottom-up over in-edges; the host checks for progress once per `batch_levels` levels.
    """
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    sources = np.asarray(sources, dtype=np.int64).ravel()
    for s in sources:
        _check_src(dg, s)
    if word_bits not in (32, 64):
        raise GrapheneError("word_bits must be 32 or 64")
    k = len(sources)
    depth = cp.full((k, n), -1, dtype=cp.int32)
    if k == 0 or n == 0:
        return depth.get() if to_host else depth
    iptr, iidx = dg.in_csr()
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
        cur = cp.zeros(n, dtype=wt)
        nxt = cp.empty(n, dtype=wt)
        cur[cp.asarray(verts)] = cp.asarray(words.astype(wt))
        sub = depth[g0:g0 + kk]
        sub[cp.arange(kk), cp.asarray(grp)] = 0
        level = 0
        while True:
            flags = cp.zeros(batch_levels, dtype=cp.int32)
            for b in range(batch_levels):
                kern((_grid(n),), (BLOCK,), (iptr, iidx, cur, nxt, np.int32(n), wt(full), np.int32(level + b),
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


# ------------------------------------------------------------------------------------------------
# SSSP
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def sssp(dg, src: int, delta: Optional[float] = None, stats: Optional[dict] = None):
    """dist float64 (np.inf unreached) by delta-stepping. Unweighted graphs use weight 1.
    delta: bucket width (default: 4 x the mean weight)."""
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
    distf = cp.full(n, cp.inf, dtype=cp.float64)
    distf[src] = 0.0
    dist = distf.view(cp.uint64)
    stamp = cp.zeros(n, dtype=cp.int32)
    qa = cp.empty(max(n, 1), dtype=cp.int32)
    qb = cp.empty(max(n, 1), dtype=cp.int32)
    ctr = cp.zeros(1, dtype=cp.int32)
    kern = mod.get_function("sssp_relax")
    qa[0] = src
    L = 1
    bound = delta
    it = 0
    buckets = 0
    while True:
        buckets += 1
        while L > 0:
            it += 1
            ctr.fill(0)
            kern((_grid(L * 32),), (BLOCK,), (qa, np.int32(L), dg.ptr, dg.idx, w, np.int32(has_w), dist,
                                             stamp, np.int32(it), np.float64(bound), qb, ctr))
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
    if stats is not None:
        stats.update(iterations=it, buckets=buckets, delta=delta)
    return distf.get()


# ------------------------------------------------------------------------------------------------
# k-core
# ------------------------------------------------------------------------------------------------
@_oom_to_error
def kcore(dg, stats: Optional[dict] = None):
    """core_number int32 of every vertex; degree = out + in on directed graphs (out on symmetric
    ones, where each undirected edge is stored both ways); self-loops ignored."""
    cp = _module.cupy()
    mod = _module.module()
    n = dg.num_vertices
    core = cp.full(n, -1, dtype=cp.int32)
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
                mod.get_function(f"count_nonself<{w}>")((g,), (BLOCK,), (lst, np.int32(ln), p, ix, deg))
    ptr2, idx2 = (lists[1][0], lists[1][1]) if len(lists) > 1 else (dg.ptr, dg.idx)
    has2 = np.int32(1 if len(lists) > 1 else 0)
    kern = mod.get_function("kcore_peel")
    qa = cp.empty(n, dtype=cp.int32)
    qb = cp.empty(n, dtype=cp.int32)
    ctr = cp.zeros(1, dtype=cp.int32)
    k = 0
    remaining = n
    rounds = 0
    while remaining > 0:
        alive = core < 0
        k = max(k, int(deg[alive].min()))
        q = cp.flatnonzero(alive & (deg <= k)).astype(cp.int32)
        L = int(q.size)
        qa[:L] = q
        del q, alive
        while L > 0:
            rounds += 1
            remaining -= L
            ctr.fill(0)
            kern((_grid(L * 32),), (BLOCK,), (qa, np.int32(L), dg.ptr, dg.idx, ptr2, idx2, has2, deg, core,
                                             np.int32(k), qb, ctr))
            L = int(ctr.get()[0])
            qa, qb = qb, qa
        k += 1
    if stats is not None:
        stats.update(rounds=rounds, max_core=int(core.max()))
    return core.get()
