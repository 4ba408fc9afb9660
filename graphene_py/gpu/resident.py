"""The dataset resident in GPU memory for whole-algorithm GPU runs (`--device gpu|auto`).

`device_graph(graph, gpu_mem)` loads an opened dataset into GPU memory once and keeps it for the
next run of this process (one resident dataset at a time, keyed by its uuid and the `gpu_mem`
budget). `timed(graph, gpu_mem)` also says how long the load took. Each algorithm's GPU entry
(`run_gpu` in graphene_py/algos/<name>.py) calls it and then the kernels of gpu/algorithms.py;
this package never imports algos/.
"""
from __future__ import annotations

import time

from .device_graph import DeviceGraph

_cache: dict = {}


def device_graph(graph, gpu_mem=None, check=None) -> DeviceGraph:
    """check: called between the load's stages (gpu/handoff.py: raises to stop a load no longer
    needed)."""
    key = (graph.uuid, str(gpu_mem))
    dg = _cache.get(key)
    if dg is None:
        _cache.clear()                       # one resident dataset at a time
        dg = DeviceGraph.from_graph(graph, gpu_mem=gpu_mem, check=check)
        _cache[key] = dg
    return dg


def timed(graph, gpu_mem=None):
    """(DeviceGraph, seconds spent loading it now: 0 when it was resident already)."""
    t0 = time.perf_counter()
    dg = device_graph(graph, gpu_mem)
    return dg, time.perf_counter() - t0


def gpu_steps(stats: dict, progress=None) -> list:
    """A GPU run's supersteps (one per launch group), marked device "gpu" and, where the kernels
    name no mode of their own, mode "gpu-" + the run's tier ("gpu-resident": the whole graph in
    GPU memory, unless stats name another tier), reported to progress."""
    mode = f"gpu-{stats.get('tier') or 'resident'}"
    steps = [{"mode": mode, **s, "device": "gpu"} for s in stats.get("supersteps", [])] or [
        {"mode": mode, **{k: v for k, v in stats.items() if k != "supersteps"}, "device": "gpu"}]
    if progress is not None:
        for st in steps:
            progress(st)
    return steps


def is_resident(graph, gpu_mem=None) -> bool:
    """Whether an earlier run of this process left `graph` in GPU memory (same budget)."""
    return (graph.uuid, str(gpu_mem)) in _cache
