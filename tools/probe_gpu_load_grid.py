#!/usr/bin/env python3
"""The resident tier's load (DeviceGraph.from_graph) of a Kronecker graph partitioned on a grid of
several partitions, timed after a dropped page cache, twice per process (the first load also
pays CuPy's kernels' first use). Run it once per source tree, alternating, to compare two
versions of the load (root: it drops the page cache).

    PYTHONPATH=. python3 tools/probe_gpu_load_grid.py --make --scale 23 --grid 2x2 --work /tmp/g23
    PYTHONPATH=<tree> python3 tools/probe_gpu_load_grid.py --scale 23 --grid 2x2 --work /tmp/g23

Prints one JSON line per load.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_io import drop_caches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=23)
    ap.add_argument("--grid", default="2x2", help="ROWSxCOLS")
    ap.add_argument("--work", required=True)
    ap.add_argument("--make", action="store_true", help="generate and partition the dataset")
    ap.add_argument("--loads", type=int, default=2)
    a = ap.parse_args()
    rows, cols = (int(x) for x in a.grid.lower().split("x"))
    name = f"kron{a.scale}g{rows}x{cols}"
    path = os.path.join(a.work, "disk0", name)
    import numpy as np
    if a.make:
        from graphene_py.generate import kronecker
        from graphene_py.partition import partition_arrays
        disks = [os.path.join(a.work, f"disk{i}") for i in range(rows * cols)]
        for d in disks:
            os.makedirs(d, exist_ok=True)
        src, dst = [], []
        for s, d in kronecker(a.scale, 16, seed=1):
            src.append(s)
            dst.append(d)
        partition_arrays(np.concatenate(src), np.concatenate(dst), num_vertices=1 << a.scale,
                         disks=disks, name=name, rows=rows, cols=cols, symmetrize=True,
                         force=True, register=False)
        print(path)
        return 0
    import graphene_py
    from graphene_py.graph import Graph
    from graphene_py.gpu import DeviceGraph, _module
    cp = _module.cupy()
    _module.module()
    g = Graph.open(path)
    for r in range(a.loads):
        cp.get_default_memory_pool().free_all_blocks()
        drop_caches()
        t = time.perf_counter()
        dg = DeviceGraph.from_graph(g)
        cp.cuda.Device().synchronize()
        t = time.perf_counter() - t
        print(json.dumps({"tree": os.path.dirname(os.path.abspath(graphene_py.__file__)),
                          "load": r, "from_graph_s": round(t, 3), "grid": a.grid,
                          "placement": dg.placement}), flush=True)
        del dg
    return 0


if __name__ == "__main__":
    sys.exit(main())
