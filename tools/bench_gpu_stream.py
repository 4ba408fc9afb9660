"""PageRank-10 (or WCC, or SpMV: --algo) on the GPU by tier: resident, zero-copy, streamed from
pinned host memory, streamed from the dataset's files; beside the CPU SSD path and the bus's own
bandwidth, in one run.

    PYTHONPATH=. python3 tools/bench_gpu_stream.py --scale 23 --work /tmp/gs --out stream.json
    PYTHONPATH=. python3 tools/bench_gpu_stream.py --algo wcc --scale 23 --work /tmp/gs --out wcc.json

WCC: resident is Afforest over the CSR in GPU memory (its load timed apart), zero-copy the same
kernels with the edge arrays in pinned host memory, the streamed tiers one union-find pass over
the out-lists; labels compared with the CPU path's. SpMV (x random) has only the streamed tiers.

The graph: Graph500 Kronecker (bench_gpu_tiers.kron_csr: symmetrized, deduplicated, no self-loops)
partitioned 1x1 into --work. Each tier runs pull PageRank, 10 iterations, tolerance 0, --reps times
(median; the first run of a tier also pays its setup, reported apart); scores are compared with the
resident run's. stream-ssd drops the page cache before each run when it can (root), so its reads
come from the device; the disk's sequential O_DIRECT rate is measured on the same file.

PageRank's streamed tiers run once per share of the lists kept in GPU memory after the first
iteration (--keep 0,0.5,1: keep_bytes = share x the lists' bytes), labelled stream-host-keep50
and so on, with the median of iterations 2..10 apart (what the kept share saves per iteration);
--ssd-keep picks the shares for the SSD source (its runs are the slow ones); --no-cpu skips the
CPU row.
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def h2d_bandwidth(nbytes=1 << 30):
    import cupy as cp
    pin = cp.cuda.alloc_pinned_memory(nbytes)
    dev = cp.empty(nbytes, dtype=cp.uint8)
    best = 0.0
    for _ in range(3):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        cp.cuda.runtime.memcpy(dev.data.ptr, pin.ptr, nbytes, cp.cuda.runtime.memcpyHostToDevice)
        cp.cuda.Device().synchronize()
        best = max(best, nbytes / (time.perf_counter() - t))
    return best


def disk_rate(path, block=8 << 20):
    import mmap
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    buf = mmap.mmap(-1, block)
    n, t = 0, time.perf_counter()
    try:
        while True:
            k = os.preadv(fd, [buf], n)
            n += k
            if k < block:
                break
    finally:
        os.close(fd)
    return n / (time.perf_counter() - t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=23)
    ap.add_argument("--ef", type=int, default=16)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--work", default="/tmp/gs")
    ap.add_argument("--out", default="stream.json")
    ap.add_argument("--algo", choices=["pagerank", "wcc", "spmv"], default="pagerank")
    ap.add_argument("--keep", default="0,0.25,0.5,0.75,1",
                    help="PageRank: shares of the lists kept in GPU memory (stream-host)")
    ap.add_argument("--ssd-keep", default="0,0.5,1", help="the same for stream-ssd")
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU SSD path's row")
    a = ap.parse_args(argv)
    from bench_gpu_tiers import kron_csr
    from bench_io import drop_caches
    from graphene_py.algos import pagerank
    from graphene_py.gpu import algorithms as A, streamed
    from graphene_py.gpu.device_graph import DeviceGraph, STATE_BYTES_PER_VERTEX
    from graphene_py.partition import partition_arrays
    import cupy as cp

    t = time.perf_counter()
    ptr, idx = kron_csr(a.scale, a.ef)
    n, m = len(ptr) - 1, len(idx)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
    os.makedirs(os.path.join(a.work, "d0"), exist_ok=True)
    g = partition_arrays(src, idx.astype(np.int64), num_vertices=n,
                         disks=[os.path.join(a.work, "d0")], name=f"kron{a.scale}",
                         register=False, durable=False, force=True, symmetrize=True)
    del src
    out = {"scale": a.scale, "ef": a.ef, "n": n, "m": m, "lists_bytes": m * 4,
           "build_seconds": time.perf_counter() - t, "gpu": cp.cuda.runtime.getDeviceProperties(0)[
               "name"].decode(), "h2d_bytes_per_s": h2d_bandwidth()}
    out["disk_bytes_per_s"] = disk_rate(g.parts("out")[0].adj_path)
    print(json.dumps(out), flush=True)
    res = {}

    def timed(label, fn, drop=False):
        runs = []
        for _ in range(a.reps + 1):
            dropped = drop_caches() if drop else None
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            scores, extra = fn()
            cp.cuda.Device().synchronize()
            runs.append(time.perf_counter() - t0)
        res[label] = {"first_s": runs[0], "median_s": statistics.median(runs[1:]),
                      "runs": runs, "page_cache_dropped": dropped, **extra}
        print(label, json.dumps(res[label]), flush=True)
        return scores

    if a.algo != "pagerank":
        out["tiers"] = res
        _other(a, g, n, timed, res)
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
        return
    budget_all = None
    dg = DeviceGraph.from_graph(g, gpu_mem=budget_all)
    ref = timed("resident", lambda: (A.pagerank(dg, max_iter=10, tol=0), {"tier": dg.tier()}))
    del dg
    A_ = None  # noqa: F841
    cp.get_default_memory_pool().free_all_blocks()
    small = (n + 1) * 8 + STATE_BYTES_PER_VERTEX * n + (64 << 20)
    dz = DeviceGraph.from_graph(g, gpu_mem=small)
    z = timed("zero-copy", lambda: (A.pagerank(dz, max_iter=10, tol=0, reorder=False),
                                    {"tier": dz.tier()}))
    del dz
    cp.get_default_memory_pool().free_all_blocks()
    res["zero-copy"]["max_abs_diff"] = float(np.abs(z - ref).max())
    lists = m * 4
    for source, shares in (("host", a.keep), ("ssd", a.ssd_keep)):
        for share in [float(x) for x in shares.split(",") if x.strip()]:
            def run(source=source, share=share):
                st = {}
                s = streamed.pagerank(g, source=source, max_iter=10, tol=0, stats=st,
                                      keep_bytes=int(share * lists))
                its = [x["seconds"] for x in st["supersteps"]]
                return s, {"bytes_moved": st["bytes_moved"], "kept_bytes": st["kept_bytes"],
                           "iteration_s": [round(x, 4) for x in its],
                           "later_iteration_ms": 1e3 * statistics.median(its[1:])}
            label = f"stream-{source}-keep{round(100 * share)}"
            s = timed(label, run, drop=source == "ssd")
            res[label]["max_abs_diff"] = float(np.abs(s - ref).max())
            cp.get_default_memory_pool().free_all_blocks()
    if a.no_cpu:
        out["tiers"] = res
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
        return
    c = timed("cpu-ssd", lambda: (pagerank.run(g, variant="pull", max_iter=10, tolerance=0,
                                               threads=os.cpu_count()).scores, {}), drop=True)
    res["cpu-ssd"]["max_abs_diff"] = float(np.abs(c - ref).max())
    out["tiers"] = res
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


def _other(a, g, n, timed, res):
    """WCC or SpMV by tier (see the module), results against the CPU path's."""
    from graphene_py.algos import spmv, wcc
    from graphene_py.gpu import algorithms as A, streamed
    from graphene_py.gpu.device_graph import DeviceGraph, STATE_BYTES_PER_VERTEX
    import cupy as cp
    threads = os.cpu_count()
    if a.algo == "wcc":
        ref = timed("cpu-ssd", lambda: (wcc.run(g, threads=threads).labels, {}), drop=True)
        t = time.perf_counter()
        dg = DeviceGraph.from_graph(g)
        res["resident_load_s"] = time.perf_counter() - t
        got = timed("resident", lambda: (A.wcc(dg), {"tier": dg.tier()}))
        res["resident"]["equal"] = bool(np.array_equal(got, ref))
        del dg
        cp.get_default_memory_pool().free_all_blocks()
        dz = DeviceGraph.from_graph(g, gpu_mem=(n + 1) * 8 + STATE_BYTES_PER_VERTEX * n + (64 << 20))
        got = timed("zero-copy", lambda: (A.wcc(dz), {"tier": dz.tier()}))
        res["zero-copy"]["equal"] = bool(np.array_equal(got, ref))
        del dz
        cp.get_default_memory_pool().free_all_blocks()
        for source in ("host", "ssd"):
            def run(source=source):
                st = {}
                lab = streamed.wcc(g, source=source, stats=st)
                return lab, {"bytes_moved": st["bytes_moved"],
                             "link_s": round(st["supersteps"][0]["seconds"], 4)}
            got = timed(f"stream-{source}", run, drop=source == "ssd")
            res[f"stream-{source}"]["equal"] = bool(np.array_equal(got, ref))
    else:
        x = spmv.make_x(n, "random")
        ref = timed("cpu-ssd", lambda: (spmv.run(g, x=x, threads=threads).y, {}), drop=True)
        for source in ("host", "ssd"):
            def run(source=source):
                st = {}
                y = streamed.spmv(g, x, source=source, stats=st)
                return y, {"bytes_moved": st["bytes_moved"]}
            got = timed(f"stream-{source}", run, drop=source == "ssd")
            res[f"stream-{source}"]["max_rel_diff"] = float(
                np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)))


if __name__ == "__main__":
    main()
