#!/usr/bin/env python3
"""BFS with --device cpu (SSD path) vs auto (hybrid: the offload policy picks a device per level) vs
gpu (whole run on the GPU), on one Kronecker dataset, side by side in one run.

    PYTHONPATH=. python3 tools/bench_hybrid.py --scale 22 --sources 4 --work /tmp/hyb

Generates a Graph500 Kronecker graph (graphene_py.generate, edge factor 16), partitions it 1x1
(symmetrized) into --work, then for each source: drops the page cache (when allowed), times
bfs.run(device=...) for the three devices (the GPU's one-time dataset load is excluded and
reported), checks every depth array equals the SSD path's, and prints where each level ran for
the first source.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_io import drop_caches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--sources", type=int, default=4)
    ap.add_argument("--work", default="/tmp/bench_hybrid")
    a = ap.parse_args()

    from graphene_py.algos import bfs, common, registry
    from graphene_py.generate import generate_to_file
    from graphene_py.gpu.resident import device_graph
    from graphene_py.partition import partition

    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(os.path.join(a.work, "d0"))
    src_file = os.path.join(a.work, f"kron{a.scale}.bin32")
    t = time.perf_counter()
    generate_to_file(src_file, "kron", scale=a.scale, edge_factor=16)
    g = partition(src_file, [os.path.join(a.work, "d0")], name="hyb", symmetrize=True, rows=1,
                  cols=1, quiet=True, register=False)
    print(f"{g}: generated + partitioned in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    device_graph(g)
    print(f"GPU dataset load (once): {time.perf_counter() - t:.2f} s", flush=True)
    bfs.run(g, src=common.pick_source(g), threads=None)             # JIT warm-up
    rows = []
    for k in range(a.sources):
        s = common.pick_source(g, trial=k)
        row = {"src": s}
        ref = None
        for dev in ("cpu", "auto", "gpu"):
            dropped = drop_caches()
            t = time.perf_counter()
            res = registry.dispatch("bfs", g, device=dev, src=s)
            row[dev] = time.perf_counter() - t
            if ref is None:
                ref = res.depth
            row[dev + "_equal"] = bool(np.array_equal(res.depth, ref))
            if dev == "auto":
                row["auto_devices"] = [(st.get("device"), st.get("mode"), st.get("frontier"))
                                       for st in res.supersteps]
                row["moves"] = getattr(res, "device_moves", None)
        row["cache_dropped"] = dropped
        rows.append(row)
        print(f"src {s}: cpu {row['cpu']:.3f} s, auto {row['auto']:.3f} s, gpu {row['gpu']:.3f} s; "
              f"equal {row['auto_equal']} {row['gpu_equal']}; state moves {row['moves']}", flush=True)
    print("levels of the first source under --device auto (device, mode, frontier):")
    for d in rows[0]["auto_devices"]:
        print("  ", d)
    med = {d: float(np.median([r[d] for r in rows])) for d in ("cpu", "auto", "gpu")}
    print(f"median over {len(rows)} sources: cpu (SSD path) {med['cpu']:.3f} s, auto {med['auto']:.3f} s "
          f"({med['cpu'] / med['auto']:.1f}x), gpu {med['gpu']:.4f} s")


if __name__ == "__main__":
    main()
