"""Shared harness of the built-in algorithms (GAPBS style): the Result base class, source picking,
trials and timing, peak memory, per-superstep progress lines, and the GPU hook.

    Result(**fields)                     arrays + scalars + supersteps (list of stats dicts) + seconds
        .arrays() / .scalars()           numpy arrays / JSON-able scalars among the fields
        .main_array()                    the array `--output` writes (MAIN, else the first array)
        .to_json(per_superstep=False)    dict: scalars, totals of the superstep stats, [supersteps]
        .save(path)                      np.save of the main array
    pick_source(graph, seed=config.SEED, trial=0) -> int
    peak_rss_mb() -> float
    superstep_line(i, st, label="level") -> str
    superstep_json(i, st) -> dict
    run_trials(fn, trials) -> (results, seconds per trial)
    gpu_dispatch(name, graph, device, **options) -> Result | None
"""
from __future__ import annotations

import resource
import sys
import time

import numpy as np

from .. import config
from ..errors import GrapheneError

#: superstep stats summed into a run's totals
SUM_KEYS = ("active_edges", "blocks_marked", "extents", "bytes_useful", "bytes_read", "io_seconds",
            "compute_seconds", "wait_seconds", "plan_seconds")


def _jsonable(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        v = float(x)
        return v if np.isfinite(v) else str(v)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    if isinstance(x, (list, tuple)):
        return [_jsonable(y) for y in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return x


class Result:
    """Result of one algorithm run. Subclasses set MAIN (the array `--output` writes)."""

    MAIN = None

    def __init__(self, **fields):
        self.supersteps = []
        self.seconds = 0.0
        self.__dict__.update(fields)

    def arrays(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, np.ndarray)}

    def scalars(self) -> dict:
        out = {}
        for k, v in self.__dict__.items():
            if k.startswith("_") or k == "supersteps" or isinstance(v, np.ndarray):
                continue
            if isinstance(v, (int, float, str, bool, np.integer, np.floating, np.bool_)) or v is None:
                out[k] = _jsonable(v)
            elif isinstance(v, (list, tuple)) and all(isinstance(y, (int, float, np.integer,
                                                                     np.floating)) for y in v):
                out[k] = _jsonable(list(v))
        return out

    def main_array(self):
        arrs = self.arrays()
        if self.MAIN and self.MAIN in arrs:
            return arrs[self.MAIN]
        return next(iter(arrs.values()), None)

    def totals(self) -> dict:
        t = {k: 0 for k in SUM_KEYS}
        for st in self.supersteps:
            for k in SUM_KEYS:
                t[k] += st.get(k, 0) or 0
        t["io_utility"] = t["bytes_useful"] / t["bytes_read"] if t["bytes_read"] else 1.0
        t["supersteps"] = len(self.supersteps)
        return t

    def to_json(self, per_superstep: bool = False) -> dict:
        d = {"result": type(self).__name__}
        d.update(self.scalars())
        d["totals"] = _jsonable(self.totals())
        if per_superstep:
            d["supersteps"] = [_jsonable(s) for s in self.supersteps]
        return d

    def save(self, path: str) -> str:
        arr = self.main_array()
        if arr is None:
            raise GrapheneError(f"{type(self).__name__} has no array to save")
        np.save(path, arr)
        return path if str(path).endswith(".npy") else str(path) + ".npy"

    def __repr__(self):
        s = ", ".join(f"{k}={v}" for k, v in self.scalars().items())
        a = ", ".join(f"{k}[{v.shape[0] if v.ndim else ''}]" for k, v in self.arrays().items())
        return f"{type(self).__name__}({a}; {s})"


def pick_source(graph, seed: int = config.SEED, trial: int = 0) -> int:
    """A random vertex with non-zero out-degree (GAPBS habit): the trial-th draw of a generator
    seeded with `seed`, so runs are reproducible and trials use different sources."""
    deg = graph.degrees("out")
    cand = np.flatnonzero(deg > 0)
    if len(cand) == 0:
        if graph.num_vertices == 0:
            raise GrapheneError(f"{graph.name}: graph has no vertices")
        return 0
    rng = np.random.default_rng(seed)
    n = graph.num_vertices
    src = 0
    for _ in range(trial + 1):
        while True:  # uniform over vertex IDs, re-drawn until one has out-edges (GAPBS SourcePicker)
            v = int(rng.integers(0, n))
            if deg[v] > 0:
                src = v
                break
    return src


def open_unweighted(graph, direction, in_memory, runtime):
    """An IoIterator over one edge direction that reads no weights (imported late: the iterator
    package imports numba kernels)."""
    from ..iterator import IoIterator
    return IoIterator(graph, direction, in_memory=in_memory, weights=False, **runtime)


def frontier_class():
    from ..iterator import Frontier
    return Frontier


def pull_direction(graph, bottom_up=True):
    """The edge direction a bottom-up (pull) step scans: 'out' on an undirected dataset, 'in' on a
    directed one that has in-edges, None when pulling is off or impossible."""
    if not bottom_up:
        return None
    if not graph.directed:
        return "out"
    return "in" if graph.in_partitions is not None else None


def read_cost_bounds(graph, direction: str = "out"):
    """(adjacency bytes of the direction: what reading every list costs at most, partitions a row
    is split into: how many lists one vertex's neighbours are spread over) for the IO cost models."""
    parts = graph.parts(direction)
    return (sum(p.adj_bytes for p in parts),
            max(1, len(parts) // max(1, graph.num_rows)))


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB: VmHWM from /proc/self/status (reset at exec,
    unlike ru_maxrss, which Linux carries over from the parent of a fork+exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024.0 if sys.platform != "darwin" else r / (1 << 20)


def _mb(x):
    return f"{x / 1e6:.1f} MB" if x >= 1e5 else f"{x / 1e3:.1f} kB"


def superstep_line(i: int, st: dict, label: str = "level") -> str:
    """One GAPBS -l style progress line for a superstep."""
    extra = ""
    for k in ("error", "active", "phase", "changed"):
        if k in st:
            v = st[k]
            extra += f"  {k} {v:.3g}" if isinstance(v, float) else f"  {k} {v}"
    return (f"{label} {i:>4}  frontier {st.get('frontier', 0):>10,}  edges {st.get('active_edges', 0):>12,}"
            f"  read {_mb(st.get('bytes_read', 0)):>10}  util {st.get('io_utility', 1.0):5.2f}"
            f"  io {st.get('io_seconds', 0.0):.3f}s  compute {st.get('compute_seconds', 0.0):.3f}s"
            f"  wait {st.get('wait_seconds', 0.0):.3f}s  plan {st.get('plan_seconds', 0.0):.3f}s"
            f"  {st.get('seconds', 0.0):.3f}s  [{st.get('mode', '-')}]" + extra)


def superstep_json(i: int, st: dict) -> dict:
    d = {"superstep": i}
    d.update(_jsonable(dict(st)))
    return d


def run_trials(fn, trials: int):
    """Call fn(trial) `trials` times; returns (results, wall seconds of each)."""
    if trials < 1:
        raise GrapheneError("trials must be >= 1")
    results, secs = [], []
    for t in range(trials):
        t0 = time.perf_counter()
        results.append(fn(t))
        secs.append(time.perf_counter() - t0)
    return results, secs


def gpu_available():
    """(True, "") when graphene_py.gpu can run, else (False, why)."""
    try:
        from .. import gpu
    except Exception as e:  # noqa: BLE001 - any import failure means "not available"
        return False, f"graphene_py.gpu failed to import ({e})"
    avail = getattr(gpu, "available", None)
    if avail is None or not hasattr(gpu, "run"):
        return False, "graphene_py.gpu provides no available()/run() yet"
    try:
        ok = bool(avail())
    except Exception as e:  # noqa: BLE001
        return False, f"graphene_py.gpu.available() failed ({e})"
    if not ok:
        why = getattr(gpu, "why_unavailable", None)
        return False, (why() if callable(why) else "no CuPy or no NVIDIA GPU")
    return True, ""


#: algorithms whose run() itself mixes devices per superstep under device="auto"
HYBRID = ("bfs",)


def gpu_dispatch(name: str, graph, device: str, **options):
    """The GPU hook: device "gpu" runs graphene_py.gpu.run(name, graph, **options) or raises
    GrapheneError("GPU path not available: <why>"); "auto" does the same when a GPU is available
    and returns None (run on the CPU) otherwise; "cpu" returns None. Algorithms in HYBRID get None
    for "auto": their run(device="auto") chooses a device per superstep."""
    if device in (None, "cpu") or (device == "auto" and name in HYBRID):
        return None
    if device not in ("gpu", "auto"):
        raise GrapheneError(f"unknown device {device!r} (cpu, gpu or auto)")
    ok, why = gpu_available()
    if not ok:
        if device == "gpu":
            raise GrapheneError(f"GPU path not available: {why}")
        return None
    from .. import gpu
    return gpu.run(name, graph, **options)
