#!/usr/bin/env python3
"""`graphene run ALGO --device cpu|gpu|auto` as a user runs it: one fresh process per run on a
dropped page cache (when allowed), on one Kronecker dataset, every GPU-capable algorithm.

    PYTHONPATH=. python3 tools/bench_auto_device.py --scale 22 --work /tmp/auto --json out.jsonl

Generates a Graph500 Kronecker graph (graphene_py.generate, edge factor 16), partitions it 1x1
(symmetrized) into --work and measures its disk as `graphene partition` does, then runs each algorithm with each device, interleaved, --runs times.
Records per run: process wall, the trial's own seconds, the GPU load seconds (the dataset read,
assembled and copied to the GPU) and what `auto` chose (`device`, `device_reason` in --json).
Prints medians per (algorithm, device) and whether `auto` was within 10% of the better of
cpu and gpu, counting everything the process did.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_io import drop_caches  # noqa: E402

ALGOS = {
    "bfs": ["bfs", "--src", "0"],
    "wcc": ["wcc"],
    "pagerank": ["pagerank"],
    "pagerank-pull": ["pagerank-pull"],
    "pagerank-pull-10": ["pagerank-pull", "--max-iter", "10", "--tol", "0"],
    "kcore-17": ["kcore", "--k", "17", "--membership-only"],
    "kcore": ["kcore"],
    "msbfs-32": ["msbfs"],
    "apsp": ["apsp"],
    "spmv": ["spmv"],
    "sssp": ["sssp", "--src", "0"],     # on the weighted dataset (make_dataset(weighted=True))
}
#: algorithms that run on the weighted copy of the graph
WEIGHTED = ("sssp",)
CLI = ("import sys; from graphene_py.cli import main; sys.argv[0] = 'graphene'; "
       "sys.exit(main())")
#: device "handoff": `--device auto` with the plan's hand-off rule made to say yes (the CPU starts,
#: the GPU is loaded meanwhile and takes over when its estimate for the rest is lower): what the
#: hand-off gives where the plan would not pick it
HANDOFF = ("import sys; from graphene_py.gpu import policy; "
           "policy.plan_handoff = lambda *a, **k: (True, 'hand-off (forced by the benchmark)'); "
           "from graphene_py.cli import main; sys.argv[0] = 'graphene'; sys.exit(main())")


def make_dataset(scale, work, weighted=False):
    """The Kronecker graph partitioned 1x1 (symmetrized) under work/disk; weighted: its copy with
    GAPBS's weights (uniform integers 1..255, one per undirected edge, numpy seed 2)."""
    from graphene_py.generate import kronecker
    from graphene_py.partition import partition_arrays
    import numpy as np
    disk = os.path.join(work, "disk")
    name = f"kron{scale}" + ("w" if weighted else "")
    path = os.path.join(disk, name)          # the dataset's folder (Di/NAME)
    if os.path.exists(os.path.join(path, "CURRENT")):
        _calibrated(path)       # (a profile is kept per cgroup: each run here may be in another)
        return path
    os.makedirs(disk, exist_ok=True)
    src, dst = [], []
    for s, d in kronecker(scale, 16, seed=1):
        src.append(s)
        dst.append(d)
    src, dst = np.concatenate(src), np.concatenate(dst)
    w = (np.random.default_rng(2).integers(1, 256, len(src)).astype(np.float32) if weighted
         else None)
    g = partition_arrays(src, dst, weights=w, num_vertices=1 << scale, disks=[disk], name=name,
                         symmetrize=True, force=True, register=False)
    _calibrated(path)
    return path


def _calibrated(path):
    """As `graphene partition` does: measure the dataset's disk (io/calibrate.py) unless its
    profile is stored; the IO planner and --device auto's CPU estimate use it (without one they
    fall back to a fixed default, and `auto` plans differently)."""
    from graphene_py.graph import Graph
    from graphene_py.io.calibrate import calibrate_dataset
    calibrate_dataset(Graph.open(path), only_missing=True, say=print)


def one(args, path, device):
    dropped = drop_caches()
    t0 = time.perf_counter()
    code, dev = (HANDOFF, "auto") if device == "handoff" else (CLI, device)
    p = subprocess.run([sys.executable, "-c", code, "run", *args, "-g", path, "--device", dev,
                        "--json", "-q"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    row = {"device": device, "wall": round(wall, 3), "rc": p.returncode, "dropped": dropped}
    if p.returncode == 0:
        d = json.loads(p.stdout)
        r = d.get("result", {})
        row.update(own=d["trials"][0]["seconds"], load=r.get("load_seconds"),
                   ran_on=r.get("device", "cpu"), reason=r.get("device_reason"),
                   # a hand-off (gpu/handoff.py): supersteps on each side, the setup's time
                   cpu_steps=r.get("cpu_supersteps"), gpu_steps=r.get("gpu_supersteps"),
                   gpu_setup=r.get("gpu_load_seconds"), iterations=r.get("iterations"),
                   part_stages=r.get("gpu_part_stages"),     # SSSP's part: where its time went
                   setup=d.get("setup", {}).get("seconds") if isinstance(d.get("setup"), dict)
                   else None)
    else:
        row["stderr"] = p.stderr[-400:]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--algos", nargs="*", default=list(ALGOS))
    ap.add_argument("--devices", nargs="*", default=["cpu", "gpu", "auto"],
                    help="cpu, gpu, auto; handoff: auto with the plan's hand-off forced (WCC, "
                         "PageRank)")
    ap.add_argument("--json", required=True)
    ap.add_argument("--warmup", action="store_true",
                    help="one untimed run of each algorithm and device first (kernels compiled "
                         "and cached, as on a machine that ran them before)")
    a = ap.parse_args()
    t = time.perf_counter()
    path = make_dataset(a.scale, a.work)
    paths = {algo: path for algo in a.algos}
    if any(algo in WEIGHTED for algo in a.algos):
        wpath = make_dataset(a.scale, a.work, weighted=True)
        paths.update({algo: wpath for algo in a.algos if algo in WEIGHTED})
    print(f"dataset {path} ready in {time.perf_counter() - t:.1f} s", flush=True)
    rows = []
    if a.warmup:
        for algo in a.algos:
            for dev in a.devices:
                print("warm-up", algo, dev, one(ALGOS[algo], paths[algo], dev)["rc"], flush=True)
    with open(a.json, "w") as out:
        for algo in a.algos:
            for i in range(a.runs):
                for dev in a.devices:
                    row = dict(algorithm=algo, run=i, **one(ALGOS[algo], paths[algo], dev))
                    rows.append(row)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    print(json.dumps(row), flush=True)
    print("\n| algorithm | cpu wall (own) | gpu wall (own, load) | auto wall -> ran on | auto "
          "within 10% of the better |\n|---|---|---|---|---|")
    for algo in a.algos:
        med = {}
        for dev in a.devices:
            rs = [r for r in rows if r["algorithm"] == algo and r["device"] == dev and r["rc"] == 0]
            if rs:
                med[dev] = (statistics.median(r["wall"] for r in rs),
                            statistics.median(r["own"] for r in rs),
                            statistics.median(r["load"] or 0 for r in rs), rs[0].get("ran_on"))
        best = min((med[d][0] for d in ("cpu", "gpu") if d in med), default=None)
        au = med.get("auto")
        ok = "-" if au is None or best is None else ("yes" if au[0] <= 1.1 * best else "NO")
        f = (lambda d: f"{med[d][0]:.2f} ({med[d][1]:.2f}" + (f", {med[d][2]:.2f})" if d == "gpu"
                                                              else ")") if d in med else "-")
        print(f"| {algo} | {f('cpu')} | {f('gpu')} | "
              f"{au[0]:.2f} -> {au[3]} | {ok} |" if au else f"| {algo} | {f('cpu')} | {f('gpu')} "
              f"| - | - |")


if __name__ == "__main__":
    main()
