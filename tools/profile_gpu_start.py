#!/usr/bin/env python3
"""Where a fresh process's time goes before and around a GPU BFS on a resident dataset: numpy,
CuPy's import, the CUDA context, this package's CUDA modules, the dataset's open, its load into
GPU memory (DeviceGraph.from_graph), the first and the second BFS from vertex 0.

    PYTHONPATH=. python3 tools/profile_gpu_start.py DATASET [--cold]

--cold drops the page cache first (root). Prints seconds per stage and whether numba was
imported (a GPU run should not need it).
"""
from __future__ import annotations

import os
import sys
import time

T = [("start", time.perf_counter())]


def mark(what):
    T.append((what, time.perf_counter()))


def main():
    path = sys.argv[1]
    if "--cold" in sys.argv:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        T[0] = ("start", time.perf_counter())
    import numpy  # noqa: F401  (timed on its own)
    mark("numpy")
    import cupy as cp
    mark("import cupy")
    cp.cuda.runtime.memGetInfo()
    mark("CUDA context")
    import graphene_py.gpu as gpu
    from graphene_py.gpu import DeviceGraph, _module, lists
    _module.module()
    lists._fill_slots(4)
    mark("this package's CUDA modules")
    from graphene_py.graph import Graph
    g = Graph.open(path)
    mark("open the dataset")
    dg = DeviceGraph.from_graph(g)
    cp.cuda.Device().synchronize()
    mark("load into GPU memory")
    for i in (1, 2):
        gpu.bfs(dg, 0)
        cp.cuda.Device().synchronize()
        mark(f"BFS {i}")
    for (_, t0), (b, t1) in zip(T, T[1:]):
        print(f"{b:30s} {t1 - t0:7.3f} s")
    print(f"{'total':30s} {T[-1][1] - T[0][1]:7.3f} s; numba imported: {'numba' in sys.modules}")


if __name__ == "__main__":
    main()
