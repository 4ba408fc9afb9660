#!/usr/bin/env python3
"""The resident tier's load (DeviceGraph.from_graph) two ways, side by side in one process on a
dropped page cache: "files" reads the lists straight into GPU memory (gpu/lists.py
load_resident: O_DIRECT chunks, page-checked, placed by a kernel), "host" assembles the CSR on
the host first (Graph.to_csr) and copies it, as every load did before.

    PYTHONPATH=. python3 tools/probe_gpu_resident_load.py --scale 22 --work /tmp/auto --reps 3 \\
        --out X.json

The dataset: tools/bench_auto_device.make_dataset (Kronecker, edge factor 16, symmetrized, 1x1).
CuPy is started before the first load; the "host" way's first load in the process also loads
its numba kernel (as a user's process does), reported as round 0. After each load, a BFS from
vertex 0 on the loaded graph checks that both ways give the same depths.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_auto_device import make_dataset  # noqa: E402
from bench_io import drop_caches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--work", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    path = make_dataset(a.scale, a.work)
    from graphene_py import gpu
    from graphene_py.graph import Graph
    from graphene_py.gpu import DeviceGraph, _module, lists
    cp = _module.cupy()
    _module.module()
    loadable = lists.resident_loadable
    rows, depth = [], {}
    for r in range(a.reps):
        for way in ("files", "host"):
            g = Graph.open(path)           # (offsets not cached from the round before)
            lists.resident_loadable = loadable if way == "files" else (lambda graph: False)
            cp.get_default_memory_pool().free_all_blocks()
            cp.get_default_pinned_memory_pool().free_all_blocks()
            dropped = drop_caches()
            t0 = time.perf_counter()
            dg = DeviceGraph.from_graph(g)
            cp.cuda.Device().synchronize()
            t = time.perf_counter() - t0
            d = cp.asnumpy(gpu.bfs(dg, 0)[1])
            same = bool((d == depth.setdefault("ref", d)).all())
            row = {"round": r, "way": way, "load_s": t, "edges": g.num_edges,
                   "gb_per_s": g.num_edges * 4 / t / 1e9, "same_bfs": same,
                   "cache_dropped": bool(dropped)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            del dg
    lists.resident_loadable = loadable
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)
    for way in ("files", "host"):
        rs = [x for x in rows if x["way"] == way and x["round"] > 0] or \
            [x for x in rows if x["way"] == way]
        print(way, "median load_s (rounds after the first)",
              round(statistics.median(x["load_s"] for x in rs), 3))


if __name__ == "__main__":
    main()
