#!/usr/bin/env python3
"""Probe: GPU PageRank ms per iteration beside the CuPy baseline, and beside another version of
gpu/algorithms.py (--old FILE, loaded as a module of graphene_py.gpu), interleaved in one process
on Kronecker graphs generated on the device (tools/bench_gpu.py's generator). Run on a GPU machine:

    PYTHONPATH=. python3 tools/probe_gpu_pr_sync.py --scales 22 24 --reps 5 [--old OLD.py] --out X.json

ms/iteration = (T(20 iterations) - T(5 iterations)) / 15, as tools/bench_gpu.py; also the whole
call at --tol (the stop rule's cost, setup included), median of --reps.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_gpu as B  # noqa: E402
import cupy as cp  # noqa: E402
from graphene_py import gpu  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--scales", type=int, nargs="+", default=[22, 24])
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--tol", type=float, default=1e-4)
ap.add_argument("--old", default=None, help="another gpu/algorithms.py to time beside this one")
ap.add_argument("--tile", default=None,
                help='JSON {name: tile options (and "bounds")}: this version with those too')
ap.add_argument("--out", default=None)
args = ap.parse_args()
versions = {"now": gpu.pagerank}
for vname, vopts in (json.loads(args.tile) if args.tile else {}).items():
    vb = vopts.pop("bounds", None)          # "bounds": pagerank's in-degree bin bounds
    versions[vname] = (lambda o, b: lambda *a, **kw: gpu.pagerank(*a, tile=o or None, bounds=b,
                                                                  **kw))(vopts, vb)
if args.old:
    spec = importlib.util.spec_from_file_location("graphene_py.gpu._old_algorithms", args.old)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)
    versions["old"] = old.pagerank
sync = cp.cuda.Device().synchronize


def wall(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


out = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "scales": {}}
for scale in args.scales:
    n, dg, A, outdeg = B.pagerank_case(scale)
    m = dg.num_edges
    runs = {"baseline": lambda k: B.baseline_pagerank(A, outdeg, n, k)}
    for name, f in versions.items():
        runs[name] = (lambda f: lambda k: f(dg, tol=0.0, max_iter=k, to_host=False))(f)
    ref = gpu.pagerank(dg, tol=0.0, max_iter=20, to_host=False)
    res = {"vertices": n, "edges": m, "l1_vs_now": {}}
    for name, f in runs.items():
        f(2)
        if name != "baseline":
            res["l1_vs_now"][name] = float(cp.abs(f(20) - ref).sum())
    for _ in range(args.reps):
        for name, f in runs.items():
            t5 = wall(lambda: f(5))
            t20 = wall(lambda: f(20))
            res.setdefault("ms_per_iter", {}).setdefault(name, []).append((t20 - t5) / 15 * 1e3)
        for name, f in versions.items():
            st = {}
            t = wall(lambda: f(dg, tol=args.tol, to_host=False, stats=st))
            res.setdefault("tol_call_ms", {}).setdefault(name, []).append(t * 1e3)
            res.setdefault("tol_iterations", {})[name] = st["iterations"]
    prof = {"profile": True}
    gpu.pagerank(dg, tol=0.0, max_iter=5, to_host=False, stats=prof)
    res["kernels_ms_5_iterations"] = prof["profile_ms"]     # each kernel timed alone (synced)
    med = {k: statistics.median(v) for k, v in res["ms_per_iter"].items()}
    res["median_ms_per_iter"] = med
    res["median_tol_call_ms"] = {k: statistics.median(v) for k, v in res["tol_call_ms"].items()}
    res["ratio_to_baseline"] = {k: med[k] / med["baseline"] for k in med if k != "baseline"}
    out["scales"][scale] = res
    print(scale, json.dumps({k: res[k] for k in ("median_ms_per_iter", "ratio_to_baseline",
                                                 "median_tol_call_ms", "tol_iterations",
                                                 "l1_vs_now", "kernels_ms_5_iterations")}), flush=True)
    dg = A = None
    cp.get_default_memory_pool().free_all_blocks()
if args.out:
    with open(args.out, "w") as fh:
        json.dump(out, fh, indent=1)
