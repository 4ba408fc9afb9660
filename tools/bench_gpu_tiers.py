"""GPU tiers: BFS (GTEPS) and PageRank (ms/iteration) with the edge arrays resident in GPU memory
vs read zero-copy from pinned host memory (`--gpu-mem` below the CSR), on one Kronecker graph.

    PYTHONPATH=. python3 tools/bench_gpu_tiers.py --scale 24 --out tiers.json     # on the GPU machine

The graph: Graph500 Kronecker (graphene_py.generate), symmetrized, deduplicated, self-loops
dropped, built as a CSR in host memory. Budgets: None (everything resident: the upper bound),
the CSR's own size (resident), the offsets + per-vertex state + a share of the edge arrays
(--fractions: the edge array zero-copy, that share holding the heads of the lists: the first H
edges of every list, DeviceGraph.head), and only the offsets + per-vertex state
(every edge array in pinned host memory: EMOGI's all-zero-copy baseline, the same kernels). Each measurement is the median of
--reps runs after one warm-up; BFS from --sources random vertices of non-zero degree, its result
left in GPU memory (bfs_to_host_s: one run with the copy of parent and depth to the host, which
the runs before 2026-11-29 included); PageRank pull, 10 iterations, tolerance 0.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def kron_csr(scale, ef, seed=1):
    from graphene_py.generate import kronecker
    n = 1 << scale
    parts = list(kronecker(scale, ef, seed=seed))
    s = np.concatenate([p[0] for p in parts])
    d = np.concatenate([p[1] for p in parts])
    keep = s != d
    s, d = s[keep], d[keep]
    key = np.concatenate([s * n + d, d * n + s])
    del s, d
    from graphene_py.partition.partitioner import sorted_unique
    key = sorted_unique(key)
    src = key // n
    idx = (key % n).astype(np.int32)
    del key
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, idx


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=23)
    ap.add_argument("--ef", type=int, default=16)
    ap.add_argument("--sources", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="tiers.json")
    ap.add_argument("--algos", nargs="+", default=["bfs", "pr"],
                    choices=["bfs", "pr", "wcc", "kcore", "sssp"],
                    help="what to time at each budget (wcc, kcore, sssp: the median of --reps "
                         "calls; sssp on the graph with weights 1..255, its budgets' shares of "
                         "the lists' and weights' bytes)")
    ap.add_argument("--chunks", nargs="+", default=["auto"], choices=["auto", "zero-copy", "copy"],
                    help="sssp, kcore: how chunks of arrays in host memory move (gpu/chunks.py), "
                         "each timed at each budget")
    ap.add_argument("--fractions", type=float, nargs="*", default=[0.5, 0.25],
                    help="shares of the edge arrays kept resident between the two ends")
    ap.add_argument("--no-resident", action="store_true",
                    help="leave out the two all-resident budgets")
    a = ap.parse_args(argv)
    import cupy as cp

    from graphene_py import gpu
    from graphene_py.gpu import DeviceGraph
    from graphene_py.gpu.device_graph import STATE_BYTES_PER_VERTEX
    t = time.perf_counter()
    ptr, idx = kron_csr(a.scale, a.ef)
    n, m = len(ptr) - 1, len(idx)
    print(f"kron{a.scale} ef{a.ef}: n={n:,} m={m:,} built in {time.perf_counter() - t:.1f} s",
          flush=True)
    weights = None
    if "sssp" in a.algos:       # GAPBS's weights: uniform integers 1..255
        weights = np.random.default_rng(2).integers(1, 256, m).astype(np.float32)
    eb = m * 4 * (2 if weights is not None else 1)       # the edge-sized arrays' bytes
    vb = (n + 1) * 8 + STATE_BYTES_PER_VERTEX * n
    csr = (n + 1) * 8 + eb
    rng = np.random.default_rng(3)
    deg = np.diff(ptr)
    srcs = rng.choice(np.flatnonzero(deg > 0), a.sources, replace=False)
    rows = []
    configs = [] if a.no_resident else [
        ("resident (no budget)", None),
        ("resident (budget = CSR + state)", csr + STATE_BYTES_PER_VERTEX * n + 64)]
    for f in a.fractions:       # the edges zero-copy, that share of their bytes for list heads
        configs.append((f"heads in {f:.0%} of the edge bytes (budget = offsets + state + {f:.0%})",
                        vb + int(f * eb) + 64))
    configs.append(("zero-copy (budget = offsets + state)", vb + 64))
    for label, budget in configs:
        cp.get_default_memory_pool().free_all_blocks()
        t = time.perf_counter()
        dg = DeviceGraph.from_csr(ptr, idx, weights, symmetric=True, gpu_mem=budget)
        load = time.perf_counter() - t
        row = {"config": label, "tier": dg.tier(), "heads": dg.head("out")[1], "gpu_bytes": dg.bytes(),
               "host_bytes": dg.host_bytes(), "load_s": load}
        if "bfs" in a.algos:
            bfs_t, teps = [], []
            for s in srcs:
                gpu.bfs(dg, int(s))                       # warm-up (and the module's compile)
                ts = []
                for _ in range(a.reps):     # the result stays on the GPU (its copy to the host is
                    cp.cuda.runtime.deviceSynchronize()     # timed apart: bfs_to_host_s)
                    t = time.perf_counter()
                    _, depth = gpu.bfs(dg, int(s), to_host=False)
                    cp.cuda.runtime.deviceSynchronize()
                    ts.append(time.perf_counter() - t)
                depth = depth.get()
                reached = depth >= 0
                edges = int(deg[reached].sum()) // 2
                tt = statistics.median(ts)
                bfs_t.append(tt)
                teps.append(edges / tt / 1e9)
            cp.cuda.runtime.deviceSynchronize()
            t = time.perf_counter()
            gpu.bfs(dg, int(srcs[0]))                 # with the copy of parent and depth to the host
            row["bfs_to_host_s"] = time.perf_counter() - t
            row["bfs_s_median"] = statistics.median(bfs_t)
            row["bfs_gteps_median"] = statistics.median(teps)
        def med(fn, *args, **kw):
            fn(*args, **kw)                           # warm-up
            ts = []
            for _ in range(a.reps):
                cp.cuda.runtime.deviceSynchronize()
                t = time.perf_counter()
                fn(*args, **kw)
                cp.cuda.runtime.deviceSynchronize()
                ts.append(time.perf_counter() - t)
            return statistics.median(ts)
        if "pr" in a.algos:
            row["pr_ms_per_iter"] = med(gpu.pagerank, dg, tol=0.0, max_iter=10) / 10 * 1e3
        if "wcc" in a.algos:
            row["wcc_ms"] = med(gpu.wcc, dg) * 1e3
        for algo in ("kcore", "sssp"):
            if algo not in a.algos:
                continue
            for mode in a.chunks:
                st = {}
                fn = gpu.kcore if algo == "kcore" else gpu.sssp
                args = (dg,) if algo == "kcore" else (dg, int(srcs[0]))
                key = f"{algo}_ms" + ("" if mode == "auto" else f"_{mode}")
                row[key] = med(fn, *args, chunks=mode, stats=st) * 1e3
                row[f"{algo}_chunks_{mode}"] = {k: v for k, v in st.items() if "chunk" in k or
                                                k.startswith("zero_copy")}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del dg
    with open(a.out, "w") as f:
        json.dump({"scale": a.scale, "ef": a.ef, "n": n, "m": m, "gpu": cp.cuda.runtime
                   .getDeviceProperties(0)["name"].decode(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
