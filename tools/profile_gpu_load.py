#!/usr/bin/env python3
"""Where a `--device gpu` process spends its time before the kernels run: CuPy's import and the
CUDA context, the kernels' compile (or load from CuPy's cache), the dataset read and assembled
into a CSR on the host (Graph.to_csr, cold page cache when allowed) and its copy to the GPU.

    PYTHONPATH=. python3 tools/profile_gpu_load.py DATASET_FOLDER
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_io import drop_caches  # noqa: E402


def main():
    path = sys.argv[1]
    dropped = drop_caches()
    t = {}
    t0 = time.perf_counter()
    import numpy as np
    from graphene_py.graph import Graph
    from graphene_py import jit
    jit.ready(blas=False)
    t["numpy, numba"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    import cupy as cp
    t["import cupy"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cp.cuda.runtime.getDeviceCount()
    cp.zeros(1).sum()
    t["CUDA context"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    from graphene_py.gpu import _module
    _module.module()
    t["kernels (compile or cache)"] = time.perf_counter() - t0
    g = Graph.open(path)
    t0 = time.perf_counter()
    g.degrees("out")
    t["degrees (offsets, cold)"] = time.perf_counter() - t0
    p = g.parts("out")[0]
    t0 = time.perf_counter()
    p.adjacency()
    t["one adjacency file read + checked (cold)"] = time.perf_counter() - t0
    g = Graph.open(path)
    t0 = time.perf_counter()
    ptr, idx, w = g.to_csr("out", index_dtype=np.int32)
    t["to_csr int32 (warm now)"] = time.perf_counter() - t0
    from graphene_py.gpu.device_graph import DeviceGraph
    t0 = time.perf_counter()
    dg = DeviceGraph.from_csr(ptr, idx, w, symmetric=not g.directed)
    cp.cuda.Device().synchronize()
    t["from_csr (upload + checks)"] = time.perf_counter() - t0
    drop_caches()
    g = Graph.open(path)
    t0 = time.perf_counter()
    DeviceGraph.from_graph(g)
    cp.cuda.Device().synchronize()
    t["from_graph, cold (what a run pays)"] = time.perf_counter() - t0
    print(f"dropped caches: {dropped}; {g.num_edges:,} edges")
    for k, v in t.items():
        print(f"  {k:45s} {v:7.3f} s")


if __name__ == "__main__":
    main()
