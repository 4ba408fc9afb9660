"""`graphene run ALGO --device gpu|auto`: run a whole algorithm on the GPU for an opened dataset.

`run(name, graph, **options)` is what algos/common.gpu_dispatch calls. It loads the dataset into GPU
memory once (cached for the last graph, keyed by its uuid and the `gpu_mem` budget), runs the kernel,
and returns the CPU path's Result class for `name` so `-v`, `--json` and `--output` work unchanged.
Runtime options of the SSD path (engine, threads, queue_depth...) are accepted and ignored.
The Result's `supersteps` holds one entry per GPU launch group, with `"device": "gpu"`.
(The Result classes are imported lazily from algos/, the one upward import of this package: it
keeps a single result format for both devices.)
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import GrapheneError
from . import algorithms as A
from .device_graph import DeviceGraph

_cache: dict = {}

SUPPORTED = ("bfs", "pagerank", "pagerank-pull", "wcc", "kcore", "msbfs", "apsp", "sssp")


def device_graph(graph, gpu_mem=None) -> DeviceGraph:
    key = (graph.uuid, str(gpu_mem))
    dg = _cache.get(key)
    if dg is None:
        _cache.clear()                       # one resident dataset at a time
        dg = DeviceGraph.from_graph(graph, gpu_mem=gpu_mem)
        _cache[key] = dg
    return dg


def run(name: str, graph, *, gpu_mem=None, **options):
    if name not in SUPPORTED:
        raise GrapheneError(f"no GPU implementation of {name!r} (GPU: {', '.join(SUPPORTED)})")
    t0 = time.perf_counter()
    dg = device_graph(graph, gpu_mem)
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    st: dict = {}
    o = options
    if name == "bfs":
        from ..algos.bfs import BFSResult
        from ..algos.common import pick_source
        src = pick_source(graph) if o.get("src") is None else int(o["src"])
        parent, depth = A.bfs(dg, src, stats=st)
        steps = [dict(s, device="gpu") for s in st["supersteps"]]
        return BFSResult(parent=parent, depth=depth, n_reached=int(np.count_nonzero(depth >= 0)),
                         src=src, levels=int(depth.max()) + 1, supersteps=steps,
                         seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu")
    if name in ("pagerank", "pagerank-pull"):
        from .. import config
        from ..algos.pagerank import PageRankResult
        tol = o.get("tolerance", config.PR_TOLERANCE)
        scores = A.pagerank(dg, alpha=o.get("alpha", config.PR_ALPHA), tol=tol,
                            max_iter=o.get("max_iter", config.PR_MAX_ITERS), stats=st)
        # The GPU runs classic pull PageRank for both CLI names (same fixed point within tolerance).
        # converged: the same stop rule as the CPU path (L1 change < tol, else max_iter was hit)
        return PageRankResult(scores=scores, iterations=st["iterations"], error=st["error"],
                              variant="pull", converged=bool(st["error"] < tol or st["error"] == 0),
                              tolerance=float(tol), supersteps=[{"device": "gpu", **st}],
                              seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu")
    if name == "wcc":
        from ..algos.wcc import WCCResult
        labels = A.wcc(dg, stats=st)
        return WCCResult(labels=labels, n_components=st["n_components"], bfs_reached=0,
                         supersteps=[{"device": "gpu", **st}], seconds=time.perf_counter() - t0,
                         load_seconds=t_load, device="gpu")
    if name == "kcore":
        from ..algos.kcore import KCoreResult
        core = A.kcore(dg, stats=st)
        k = o.get("k")
        if k is not None and int(k) < 0:
            raise GrapheneError("--k must be >= 0")
        return KCoreResult(core_number=core, max_core=int(core.max()) if len(core) else 0,
                           k=None if k is None else int(k),
                           in_k_core=None if k is None else core >= int(k),
                           rounds=st.get("rounds", 0), supersteps=[{"device": "gpu", **st}],
                           seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu")
    if name in ("msbfs", "apsp"):
        from ..algos import msbfs as M
        src = o.get("sources")
        if src is None:
            src = M.pick_sources(graph, o.get("num_sources", M.DEFAULT_SOURCES))
        elif isinstance(src, str):
            src = [int(x) for x in src.split(",") if x.strip()]
        src = np.asarray(src, dtype=np.int64)
        depths = A.msbfs(dg, src, stats=st)
        reached = (depths >= 0).sum(axis=1).astype(np.int64)
        sums = np.where(depths > 0, depths, 0).sum(axis=1).astype(np.float64)
        clo = None
        n = dg.num_vertices
        if o.get("closeness"):
            clo = np.zeros(len(src))
            ok = sums > 0
            if n > 1:
                clo[ok] = ((reached[ok] - 1) / (n - 1)) * ((reached[ok] - 1) / sums[ok])
        if o.get("output") is not None:
            np.save(o["output"], depths)
        return M.MSBFSResult(sources=src, depths=depths, reached=reached, closeness=clo,
                             passes=(len(src) + 63) // 64, supersteps=[{"device": "gpu", **st}],
                             seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu")
    if name == "sssp":
        from ..algos import sssp as S
        if dg.weights is None:
            raise GrapheneError(f"{graph.name}: SSSP needs a weighted dataset (partition with --weighted)")
        src = S.pick_source(graph) if o.get("src") is None else int(o["src"])
        delta = o.get("delta", S.DEFAULT_DELTA)
        dist = A.sssp(dg, src, delta=delta, stats=st)
        return S.SSSPResult(dist=dist, src=src, delta=float(st["delta"]),
                            n_reached=int(np.count_nonzero(np.isfinite(dist))), buckets=st["buckets"],
                            supersteps=[{"device": "gpu", **st}], seconds=time.perf_counter() - t0,
                            load_seconds=t_load, device="gpu")
    raise AssertionError(name)
