"""GPU path (CuPy): a graph's CSR resident in GPU memory and kernels for BFS, PageRank, WCC,
multi-source BFS, SSSP and k-core, each returning the CPU path's encoding as numpy arrays; plus the
offload policy for `--device auto` (policy.py, CPU-only).

    from graphene_py import gpu
    if gpu.available():
        dg = gpu.DeviceGraph.from_graph(graph, gpu_mem="8G")   # or DeviceGraph.from_csr(...)
        parent, depth = gpu.bfs(dg, src)

Kernels live in kernels.cu, compiled once per device with cupy.RawModule. Importing this package
never needs CuPy; `available()` says whether CuPy and a GPU are usable (never raises).
"""
from ._module import available, may_be_available, why_unavailable
from .policy import OffloadPolicy, choose_device


def __getattr__(name):
    # Lazy: DeviceGraph and the algorithms import cleanly without CuPy, but keep import cheap.
    if name in ("DeviceGraph", "GpuMemoryError", "parse_bytes"):
        from . import device_graph
        return getattr(device_graph, name)
    if name in ("bfs", "pagerank", "wcc", "msbfs", "sssp", "kcore"):
        from . import algorithms
        return getattr(algorithms, name)
    raise AttributeError(name)


__all__ = ["available", "may_be_available", "why_unavailable", "OffloadPolicy", "choose_device", "DeviceGraph", "GpuMemoryError",
           "parse_bytes", "bfs", "pagerank", "wcc", "msbfs", "sssp", "kcore"]
