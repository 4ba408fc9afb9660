#!/usr/bin/env python3
"""GPU path benchmark: graphene_py.gpu vs a straightforward CuPy baseline vs a CPU in-memory path.

    python3 tools/bench_gpu.py --scales 22 24 --out /tmp/bench_gpu.json

Graphs: Graph500-style Kronecker (R-MAT a=.57, b=c=.19), edge factor 16, generated on the GPU with a
fixed seed, vertex IDs permuted, symmetrized, self-loops and duplicates removed.
Measures, side by side in one run:
  BFS       GTEPS = undirected input edges (after dedup) / seconds, mean over >= 16 random sources of
            non-zero degree; ours (direction-optimizing) vs CuPy baseline (one cuSPARSE SpMV per level)
            vs our CPU in-memory path (fewer sources).
  PageRank  ms/iteration over 20 fixed iterations; ours vs baseline (cuSPARSE SpMV) vs our CPU path.
  WCC       ms; ours vs our CPU path.
  MS-BFS    ms for 32 sources; ours (iBFS words) vs baseline (cuSPARSE SpMM per level).
  chain     BFS on a directed chain of --chain vertices: microseconds per level.
Every GPU result is checked against the baseline's (depths, labels, scores) in the same run.
"Our CPU path" (--cpu-scales, default 22) is graphene_py's own CPU engine on the same graph: the
host CSR is partitioned (1x1, undirected) into a folder under --work, and bfs / pagerank (pull,
fixed iterations) / wcc run with in_memory=True on every core of the machine (load excluded, as
GAPBS does). With --scipy, scipy.sparse.csgraph (one thread) is timed too.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def kronecker_gpu(scale, edge_factor, seed=27491095):
    """Symmetrized, deduplicated Kronecker graph as a device CSR (int64 ptr, int32 idx)."""
    import cupy as cp
    n = 1 << scale
    m = edge_factor * n
    rs = cp.random.RandomState(seed)
    src = cp.zeros(m, dtype=cp.int64)
    dst = cp.zeros(m, dtype=cp.int64)
    for bit in range(scale):
        r = rs.random_sample(m, dtype=cp.float32)
        down = r >= 0.76                       # quadrants c, d
        right = ((r >= 0.57) & (r < 0.76)) | (r >= 0.95)
        src |= down.astype(cp.int64) << bit
        dst |= right.astype(cp.int64) << bit
        del r, down, right
    perm = rs.permutation(n).astype(cp.int64)
    src, dst = perm[src], perm[dst]
    del perm
    keep = src != dst
    src, dst = src[keep], dst[keep]
    key = cp.concatenate([src * n + dst, dst * n + src])
    del src, dst, keep
    key = cp.unique(key)
    s = (key // n)
    idx = (key % n).astype(cp.int32)
    del key
    ptr = cp.zeros(n + 1, dtype=cp.int64)
    ptr[1:] = cp.cumsum(cp.bincount(s, minlength=n))
    del s
    return n, ptr, idx


def pagerank_case(scale, edge_factor=16):
    """(n, DeviceGraph, the CuPy baseline's matrix, its out-degrees) of a Kronecker graph made on
    the device: what the PageRank probes time side by side."""
    import cupy as cp
    import cupyx.scipy.sparse as csp
    from graphene_py.gpu import DeviceGraph
    n, ptr, idx = kronecker_gpu(scale, edge_factor)
    m = int(idx.size)
    dg = DeviceGraph.from_csr(ptr, idx, symmetric=True)
    A = csp.csr_matrix((cp.ones(m, dtype=cp.float32), idx, ptr.astype(cp.int32)), shape=(n, n))
    return n, dg, A, (ptr[1:] - ptr[:-1]).astype(cp.float32)


def timed(fn, sync):
    sync()
    t = time.perf_counter()
    out = fn()
    sync()
    return time.perf_counter() - t, out


# ---------------------------------------------------------------------------------------------
# CuPy baselines
# ---------------------------------------------------------------------------------------------
def baseline_bfs(A, n, s):
    import cupy as cp
    depth = cp.full(n, -1, dtype=cp.int32)
    depth[s] = 0
    x = cp.zeros(n, dtype=cp.float32)
    x[s] = 1
    level = 0
    while True:
        y = A @ x
        new = (y > 0) & (depth < 0)
        if not bool(new.any()):
            break
        level += 1
        depth[new] = level
        x = new.astype(cp.float32)
    return depth


def baseline_pagerank(A, outdeg, n, iters, alpha=0.85):
    import cupy as cp
    s = cp.full(n, 1.0 / n, dtype=cp.float32)
    sink = outdeg == 0
    inv = cp.where(sink, 0, 1.0 / cp.maximum(outdeg, 1)).astype(cp.float32)
    err = 0.0
    for _ in range(iters):
        d = s[sink].sum()
        new = (1 - alpha) / n + alpha * (A @ (s * inv) + d / n)
        err = cp.abs(new - s).sum()
        s = new
    float(err)
    return s


def baseline_msbfs(A, n, srcs):
    import cupy as cp
    k = len(srcs)
    D = cp.full((n, k), -1, dtype=cp.int32)
    X = cp.zeros((n, k), dtype=cp.float32)
    ar = cp.arange(k)
    sv = cp.asarray(srcs)
    D[sv, ar] = 0
    X[sv, ar] = 1
    level = 0
    while True:
        Y = A @ X
        new = (Y > 0) & (D < 0)
        if not bool(new.any()):
            break
        level += 1
        D[new] = level
        X = new.astype(cp.float32)
    return D


def cpu_inmemory(hp, hi, n, srcs, dg, work):
    """graphene_py's CPU path on the same graph, partitions in RAM, every core: BFS seconds per
    source, PageRank (pull) ms per iteration as (T(20) - T(5)) / 15 like the GPU side, WCC ms;
    each result compared with the GPU's."""
    import shutil

    import cupy as cp

    from graphene_py import gpu
    from graphene_py.algos import bfs, pagerank, wcc
    from graphene_py.iterator import IoIterator
    from graphene_py.partition import partition_arrays
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "d0"))
    threads = len(os.sched_getaffinity(0))
    t0 = time.perf_counter()
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(hp))
    G = partition_arrays(src, hi.astype(np.int64), num_vertices=n, disks=[os.path.join(work, "d0")],
                         name="cpu", symmetrize=True, rows=1, cols=1, register=False)
    del src
    part_s = time.perf_counter() - t0
    IoIterator(G, "out", in_memory=True).close()          # load once (excluded, like GAPBS)
    rt = dict(in_memory=True, threads=threads)
    bfs.run(G, src=int(srcs[0]), **rt)                     # JIT warm-up
    out = {"threads": threads, "partition_s": part_s, "bfs_s": [], "bfs_equal_gpu": True}
    for s in srcs:
        t = time.perf_counter()
        res = bfs.run(G, src=int(s), **rt)
        out["bfs_s"].append(time.perf_counter() - t)
        _, dep = gpu.bfs(dg, int(s))
        out["bfs_equal_gpu"] &= bool(np.array_equal(res.depth, dep))

    def pr(k):
        t = time.perf_counter()
        res = pagerank.run(G, variant="pull", tolerance=0.0, max_iter=k, **rt)
        return time.perf_counter() - t, res
    pr(2)
    t20, r20 = pr(20)
    t5, _ = pr(5)
    out["pr_ms_per_iter"] = (t20 - t5) / 15 * 1e3
    g20 = gpu.pagerank(dg, tol=0.0, max_iter=20)
    out["pr_l1_vs_gpu"] = float(np.abs(r20.scores - g20).sum())
    wcc.run(G, **rt)
    t = time.perf_counter()
    w = wcc.run(G, **rt)
    out["wcc_ms"] = (time.perf_counter() - t) * 1e3
    out["wcc_components"] = int(w.n_components)
    out["wcc_equal_gpu"] = bool(np.array_equal(w.labels, gpu.wcc(dg)))
    cp.get_default_memory_pool().free_all_blocks()
    shutil.rmtree(work, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scales", type=int, nargs="+", default=[22, 24])
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--sources", type=int, default=16)
    ap.add_argument("--cpu-sources", type=int, default=2)
    ap.add_argument("--chain", type=int, default=1_000_000)
    ap.add_argument("--variants", action="store_true", help="also time BFS/PR schedule variants")
    ap.add_argument("--no-cpu", action="store_true")
    ap.add_argument("--cpu-scales", type=int, nargs="*", default=[22],
                    help="scales at which our CPU in-memory path runs beside the GPU")
    ap.add_argument("--scipy", action="store_true", help="also time scipy.sparse.csgraph")
    ap.add_argument("--work", default="/tmp/bench_gpu_work")
    ap.add_argument("--out", default=None)
    ap.add_argument("--pr-only", action="store_true", help="only PageRank (no BFS/WCC/k-core/MS-BFS/CPU)")
    ap.add_argument("--pr-tile-variants", action="store_true",
                    help="also time pagerank(method='tile') option variants")
    a = ap.parse_args()

    import cupy as cp
    import cupyx.scipy.sparse as csp
    import scipy.sparse as ssp
    import scipy.sparse.csgraph as csg
    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph

    sync = cp.cuda.Device().synchronize
    props = cp.cuda.runtime.getDeviceProperties(0)
    gpu_name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    res = {"gpu": gpu_name, "cupy": cp.__version__, "runs": []}
    log(f"GPU: {gpu_name}, CuPy {cp.__version__}")
    rng = np.random.default_rng(27491095)

    for scale in a.scales:
        t0 = time.perf_counter()
        n, ptr, idx = kronecker_gpu(scale, a.edge_factor)
        sync()
        m = int(idx.size)
        und = m // 2
        gen_s = time.perf_counter() - t0
        deg = (ptr[1:] - ptr[:-1]).get()
        nz = np.flatnonzero(deg > 0)
        srcs = rng.choice(nz, size=a.sources, replace=False)
        log(f"scale {scale}: n={n} directed edges={m} undirected={und} gen {gen_s:.1f}s "
            f"isolated={n - len(nz)} max deg={deg.max()}")
        r = {"scale": scale, "n": n, "directed_edges": m, "undirected_edges": und,
             "isolated": int(n - len(nz)), "max_degree": int(deg.max())}

        dg = DeviceGraph.from_csr(ptr, idx, symmetric=True)
        A = csp.csr_matrix((cp.ones(m, dtype=cp.float32), idx, ptr.astype(cp.int32)), shape=(n, n))

        # warm-up (compiles kernels, cuSPARSE handles)
        if not a.pr_only:
            gpu.bfs(dg, int(srcs[0]), to_host=False)
            baseline_bfs(A, n, int(srcs[0]))

        # ---- BFS ----
        ours, base, ok = [], [], True
        lv = []
        for s in ([] if a.pr_only else srcs):
            st = {}
            t, (par, dep) = timed(lambda: gpu.bfs(dg, int(s), to_host=False, stats=st), sync)
            ours.append(t)
            lv.append(st["supersteps"])
            tb, bdep = timed(lambda: baseline_bfs(A, n, int(s)), sync)
            base.append(tb)
            ok &= bool(cp.array_equal(dep, bdep))
        if not a.pr_only:
            r["bfs"] = {"ours_s": ours, "baseline_s": base, "depth_equal_baseline": ok,
                        "ours_gteps": und / np.mean(ours) / 1e9,
                        "baseline_gteps": und / np.mean(base) / 1e9,
                        "ours_gteps_median": und / np.median(ours) / 1e9,
                        "supersteps_first_source": lv[0]}
            log(f"  BFS levels (first source): {lv[0]}")
            log(f"  BFS ours {r['bfs']['ours_gteps']:.1f} GTEPS, baseline "
                f"{r['bfs']['baseline_gteps']:.2f} GTEPS, equal={ok}")

        if a.variants and not a.pr_only:
            var = {}
            for name, kw in [("push_bins", dict(push="bins")), ("push_warp", dict(push="warp")),
                             ("no_block_loop", dict(block_loop=False)),
                             ("block_loop_ecap_32k", dict(block_loop_ecap=32768)),
                             ("push_only", dict(direction="push")),
                             ("pull_only", dict(direction="pull", block_loop=False))]:
                ts = []
                for s in srcs[:8]:
                    t, _ = timed(lambda: gpu.bfs(dg, int(s), to_host=False, **kw), sync)
                    ts.append(t)
                var[name] = und / np.mean(ts) / 1e9
            r["bfs_variants_gteps"] = var
            log(f"  BFS variants (GTEPS, 8 sources): {var}")

        # ---- PageRank ----
        # ms/iteration = (T(20 iterations) - T(5 iterations)) / 15 for both, so one-time setup
        # (allocation, the final un-permutation) cancels; results stay on the device for both.
        outdeg = (ptr[1:] - ptr[:-1]).astype(cp.float32)
        t_lay, _ = timed(lambda: dg.gather_layout(), sync)
        st_tile = {}
        t_tiles, _ = timed(lambda: gpu.pagerank(dg, tol=0.0, max_iter=1, to_host=False, stats=st_tile),
                           sync)   # builds the hub tiles (default method "auto": tiles on the renumbered layout)
        gpu.pagerank(dg, tol=0.0, max_iter=2, to_host=False)
        gpu.pagerank(dg, tol=0.0, max_iter=2, method="pull", to_host=False)
        baseline_pagerank(A, outdeg, n, 2)

        def per_iter(fn):
            t20, out = timed(lambda: fn(20), sync)
            t5, _ = timed(lambda: fn(5), sync)
            return (t20 - t5) / 15, t20 / 20, out
        # side by side, interleaved: default (tile) / baseline / old pull, twice
        o_its, b_its, p_its = [], [], []
        for _ in range(2):
            o_it, o_tot, sc = per_iter(lambda k: gpu.pagerank(dg, tol=0.0, max_iter=k, to_host=False))
            b_it, b_tot, bsc = per_iter(lambda k: baseline_pagerank(A, outdeg, n, k))
            p_it, _, sc_pull = per_iter(lambda k: gpu.pagerank(dg, tol=0.0, max_iter=k, method="pull",
                                                               to_host=False))
            o_its.append(o_it)
            b_its.append(b_it)
            p_its.append(p_it)
        o_it, b_it, p_it = min(o_its), min(b_its), min(p_its)
        l1_pull = float(cp.abs(sc - sc_pull).sum())
        tvar = {}
        if a.pr_tile_variants:
            for name, opt in [("g14 s14 t1024 dense16k staged", dict(gbits=14, sbits=14, threads=1024,
                                                                      stage=True)),
                              ("g13 s13 staged", dict(stage=True)),
                              ("chunk316k", dict(chunk=316181))]:
                stv = {}
                gpu.pagerank(dg, tol=0.0, max_iter=1, tile=opt, to_host=False, stats=stv)
                v_it, _, sv = per_iter(lambda k: gpu.pagerank(dg, tol=0.0, max_iter=k, tile=opt,
                                                              to_host=False))
                tvar[name] = {"ms_per_iter": v_it * 1e3, "l1_vs_pull": float(cp.abs(sv - sc_pull).sum()),
                              **stv.get("tile", {})}
                log(f"  PR tile {name}: {v_it * 1e3:.3f} ms/it, L1 to pull {tvar[name]['l1_vs_pull']:.1e}, "
                    f"{stv.get('tile')}")
                dg.drop_tiles()
                del sv
        nr_it, _, sc_nr = per_iter(lambda k: gpu.pagerank(dg, tol=0.0, max_iter=k, reorder=False,
                                                          to_host=False))
        stp = {}
        t_std, _ = timed(lambda: gpu.pagerank(dg, stats=stp), sync)
        l1 = float(cp.abs(sc - bsc).sum())
        l1_nr = float(cp.abs(sc - sc_nr).sum())
        bvar = {}
        for bounds, bt, hc in [((4, 32, 1024), 256, False), ((8, 64, 512), 256, False),
                               ((8, 128, 1024), 512, False), ((8, 64, 512), 256, True),
                               ((4, 32, 1024), 256, True), ((8, 128, 1024), 512, True)]:
            gpu.pagerank(dg, tol=0.0, max_iter=1, bounds=bounds, block_threads=bt, hub_cache=hc,
                         to_host=False)
            bvar[f"{bounds} block {bt} hub {hc}"] = per_iter(lambda k: gpu.pagerank(
                dg, tol=0.0, max_iter=k, bounds=bounds, block_threads=bt, hub_cache=hc,
                to_host=False))[0] * 1e3
        r["pagerank"] = {"ours_ms_per_iter": o_it * 1e3, "baseline_ms_per_iter": b_it * 1e3,
                         "ratio_ours_over_baseline": o_it / b_it, "pull_ms_per_iter": p_it * 1e3,
                         "ratio_pull_over_baseline": p_it / b_it, "l1_tile_vs_pull": l1_pull,
                         "runs_ms_per_iter": {"ours": [x * 1e3 for x in o_its],
                                              "baseline": [x * 1e3 for x in b_its],
                                              "pull": [x * 1e3 for x in p_its]},
                         "method": st_tile.get("method"), "tile": st_tile.get("tile"),
                         "tile_build_ms_once_incl_1_iter": t_tiles * 1e3, "tile_variants": tvar,
                         "ours_ms_per_iter_incl_setup": o_tot * 1e3,
                         "baseline_ms_per_iter_incl_setup": b_tot * 1e3,
                         "l1_vs_baseline": l1, "no_reorder_ms_per_iter": nr_it * 1e3,
                         "reorder_layout_build_ms_once": t_lay * 1e3, "bins_ms_per_iter": bvar,
                         "l1_reorder_vs_not": l1_nr, "gapbs_rule_ms_incl_d2h": t_std * 1e3,
                         "gapbs_rule_iterations": stp["iterations"]}
        prof = {"profile": True}
        gpu.pagerank(dg, tol=0.0, max_iter=5, stats=prof)
        r["pagerank"]["profile_ms_5_iters"] = prof["profile_ms"]
        log(f"  PR bins (len, ms over 5 iters): {prof['profile_ms']}")
        log(f"  PR bin bounds -> ms/it: {bvar}")
        log(f"  PR method {st_tile.get('method')} {st_tile.get('tile')}: ours {o_it * 1e3:.3f} ms/it, "
            f"old pull {p_it * 1e3:.3f}, baseline {b_it * 1e3:.3f}: ratio {o_it / b_it:.3f} (pull "
            f"{p_it / b_it:.3f}); L1 tile vs pull {l1_pull:.1e}; runs {r['pagerank']['runs_ms_per_iter']}")
        log(f"  PR ours {o_it * 1e3:.3f} ms/it ({o_tot * 1e3:.3f} incl. setup), baseline {b_it * 1e3:.3f} "
            f"({b_tot * 1e3:.3f}), L1 diff {l1:.2e}; without reorder {nr_it * 1e3:.3f} ms/it; layout "
            f"build once {t_lay * 1e3:.0f} ms; GAPBS rule {stp['iterations']} it {t_std * 1e3:.1f} ms")

        if a.pr_only:
            res["runs"].append(r)
            del dg, A, ptr, idx
            cp.get_default_memory_pool().free_all_blocks()
            continue

        # ---- WCC ----
        gpu.wcc(dg)
        ts = []
        for _ in range(3):
            t, lab = timed(lambda: gpu.wcc(dg), sync)
            ts.append(t)
        r["wcc"] = {"ours_ms": float(np.median(ts) * 1e3), "n_components": int((lab == np.arange(n)).sum())}
        gpu.wcc(dg, method="full", verify=True)
        t_full, lab_full = timed(lambda: gpu.wcc(dg, method="full", verify=True), sync)
        r["wcc"]["full_verified_ms"] = t_full * 1e3
        r["wcc"]["equal_full"] = bool(np.array_equal(lab, lab_full))
        log(f"  WCC ours {r['wcc']['ours_ms']:.2f} ms (Afforest, incl. D2H of labels); one union-find "
            f"pass + check pass over every edge {t_full * 1e3:.2f} ms; equal={r['wcc']['equal_full']}")

        # ---- k-core and SSSP (unit weights; this graph is unweighted) ----
        st_k = {}
        t_k, core = timed(lambda: gpu.kcore(dg, stats=st_k), sync)
        st_s = {}
        t_s, dist = timed(lambda: gpu.sssp(dg, int(srcs[0]), stats=st_s), sync)
        _, d0 = gpu.bfs(dg, int(srcs[0]))
        sssp_ok = bool(np.array_equal(np.where(np.isinf(dist), -1, dist).astype(np.int64), d0))
        r["kcore"] = {"ours_ms": t_k * 1e3, "max_core": st_k["max_core"], "rounds": st_k["rounds"]}
        r["sssp_unit"] = {"ours_ms": t_s * 1e3, "equals_bfs_depth": sssp_ok, **st_s}
        log(f"  k-core {t_k * 1e3:.1f} ms (max core {st_k['max_core']}, {st_k['rounds']} rounds); "
            f"SSSP unit weights {t_s * 1e3:.1f} ms, equals BFS depths={sssp_ok}")

        # ---- multi-source BFS ----
        ms = [int(x) for x in srcs[:16]] + [int(x) for x in rng.choice(nz, 16, replace=False)]
        gpu.msbfs(dg, ms[:2], word_bits=32, to_host=False)
        t_ms, dms = timed(lambda: gpu.msbfs(dg, ms, word_bits=32, to_host=False), sync)
        t_ms64, _ = timed(lambda: gpu.msbfs(dg, ms, word_bits=64, to_host=False), sync)
        t_bms, bD = timed(lambda: baseline_msbfs(A, n, ms), sync)
        eq = bool(cp.array_equal(dms, bD.T))
        del bD
        r["msbfs32"] = {"ours_ms": t_ms * 1e3, "ours64_ms": t_ms64 * 1e3, "baseline_spmm_ms": t_bms * 1e3,
                        "equal": eq}
        log(f"  MSBFS-32 ours {t_ms * 1e3:.2f} ms (64-bit words {t_ms64 * 1e3:.2f}), "
            f"baseline SpMM {t_bms * 1e3:.2f} ms, equal={eq}")
        del dms

        # ---- our CPU in-memory path (and scipy with --scipy) ----
        if not a.no_cpu and scale in a.cpu_scales:
            hp, hi = ptr.get(), idx.get()
            r["cpu_ours"] = cpu_inmemory(hp, hi, n, srcs[:a.cpu_sources], dg, a.work)
            c = r["cpu_ours"]
            c["bfs_gteps"] = und / np.mean(c["bfs_s"]) / 1e9
            r["wcc"]["components_equal_cpu"] = c["wcc_components"] == r["wcc"]["n_components"]
            log(f"  CPU ours ({c['threads']} threads, in memory): BFS {c['bfs_gteps']:.3f} GTEPS "
                f"(equal={c['bfs_equal_gpu']}), PR {c['pr_ms_per_iter']:.1f} ms/it "
                f"(L1 to GPU {c['pr_l1_vs_gpu']:.1e}), WCC {c['wcc_ms']:.0f} ms")
            if a.scipy:
                H = ssp.csr_matrix((np.ones(m, np.float32), hi, hp), shape=(n, n))
                t = time.perf_counter()
                csg.breadth_first_order(H, int(srcs[0]), directed=True, return_predecessors=False)
                t_bfs = time.perf_counter() - t
                t = time.perf_counter()
                ncc, _ = csg.connected_components(H, directed=False)
                r["cpu_scipy"] = {"bfs_gteps": und / t_bfs / 1e9, "cc_ms": (time.perf_counter() - t) * 1e3,
                                  "cc_components": int(ncc), "threads": 1}
                del H
            del hp, hi
        res["runs"].append(r)
        del dg, A, ptr, idx
        cp.get_default_memory_pool().free_all_blocks()

    # ---- chain ----
    if a.chain:
        n = a.chain
        ptr = cp.arange(n + 1, dtype=cp.int64)
        ptr[-1] = n - 1
        idx = cp.arange(1, n, dtype=cp.int32)
        dg = DeviceGraph.from_csr(ptr, idx)
        gpu.bfs(dg, 0, to_host=False)
        st = {}
        t, (par, dep) = timed(lambda: gpu.bfs(dg, 0, to_host=False, stats=st), sync)
        ok = bool(cp.array_equal(dep, cp.arange(n, dtype=cp.int32)))
        tw, _ = timed(lambda: gpu.wcc(dg), sync)
        res["chain"] = {"n": n, "levels": st["levels"], "us_per_level": t / max(1, st["levels"]) * 1e6,
                        "total_ms": t * 1e3, "correct": ok, "launches": len(st["supersteps"]),
                        "wcc_ms": tw * 1e3}
        log(f"chain {n}: {t * 1e3:.1f} ms, {res['chain']['us_per_level']:.2f} us/level, correct={ok}, "
            f"WCC {tw * 1e3:.1f} ms")

    # ---- table ----
    print(f"\nGPU: {gpu_name} (CuPy {cp.__version__})")
    print(f"{'scale':>5} {'BFS GTEPS ours':>15} {'baseline':>9} {'x':>6} {'CPU':>7} | {'PR ms/it':>8} "
          f"{'base':>7} {'CPU':>7} | {'WCC ms':>7} {'CPU':>7} | {'MS32 ms':>8} {'base':>8}")
    print("(CPU = graphene_py's CPU path, partitions in memory, all cores of this machine)")
    for r in res["runs"]:
        p = r["pagerank"]
        print(f"{r['scale']:>5} PageRank ms/it: ours ({p['method']}) {p['ours_ms_per_iter']:.3f}, old pull "
              f"{p['pull_ms_per_iter']:.3f}, CuPy baseline {p['baseline_ms_per_iter']:.3f}; ours/baseline "
              f"{p['ratio_ours_over_baseline']:.3f}, pull/baseline {p['ratio_pull_over_baseline']:.3f}")
        if "bfs" not in r:
            continue
        b, w, ms = r["bfs"], r["wcc"], r["msbfs32"]
        c = r.get("cpu_ours", {})
        print(f"{r['scale']:>5} {b['ours_gteps']:>15.2f} {b['baseline_gteps']:>9.2f} "
              f"{b['ours_gteps'] / b['baseline_gteps']:>6.1f} {c.get('bfs_gteps', float('nan')):>7.3f} | "
              f"{p['ours_ms_per_iter']:>8.3f} {p['baseline_ms_per_iter']:>7.3f} "
              f"{c.get('pr_ms_per_iter', float('nan')):>7.1f} | {w['ours_ms']:>7.2f} "
              f"{c.get('wcc_ms', float('nan')):>7.0f} | {ms['ours_ms']:>8.2f} {ms['baseline_spmm_ms']:>8.2f}")
    if "chain" in res:
        print(f"chain {res['chain']['n']}: {res['chain']['us_per_level']:.2f} us/level")
    js = json.dumps(res, indent=1, default=float)
    if a.out:
        with open(a.out, "w") as f:
            f.write(js)


if __name__ == "__main__":
    main()
