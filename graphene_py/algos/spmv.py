"""Sparse matrix-vector product y = A x over the stored graph (Graphene §4.7 SpMV).

Computes: `y` float64[n] with y[s] = sum over stored edges s->d of w(s, d) * x[d]; w is the edge
weight on weighted datasets and 1 otherwise (A is the adjacency matrix, rows = sources).
Returns: SpMVResult(y, x, supersteps, seconds).

Algorithm: one superstep with Frontier.all: the iterator streams every adjacency file in large
sequential extents ("sequential matrix, random vector access"); each compute call dots one chunk of
a row with x and adds it to y[s] with one atomic add (a row split over several chunks or column
partitions may be summed on several threads at once). `x`: "ones" (default), "random" (uniform [0, 1) from config.SEED), or an array of n
floats.
"""
from __future__ import annotations

import time

import click
import numpy as np
from ..jit import njit

from .. import config
from ..errors import GrapheneError
from ..iterator.atomics import atomic_fadd as _fadd
from ..iterator.kernels import gather_sum, looks_ahead

from .common import Result


CLUSTER = True     # runs on a cluster (one engine-contract superstep)
READS_WEIGHTS = True   # a weighted dataset's run opens it with its weights (so does the set-up)

class SpMVResult(Result):
    MAIN = "y"


@njit(cache=True)
def _always(v, state):
    return True


@looks_ahead
@njit(cache=True)
def _row_unweighted(v, nbrs, wts, tid, state):
    """y[v] += the sum of x over this chunk of v's list. wts: the IDs AHEAD entries on
    (looks_ahead), whose x is asked for as the sum goes."""
    x, y = state
    # one atomic add per chunk of a list (a list may span partitions)
    _fadd(y, v, gather_sum(x, nbrs, wts))


@njit(cache=True)
def _row_weighted(v, nbrs, wts, tid, state):
    x, y = state
    s = 0.0
    for i in range(len(nbrs)):
        s += np.float64(wts[i]) * x[np.int64(nbrs[i])]
    _fadd(y, v, s)


def make_x(n, x="ones", seed=config.SEED):
    if isinstance(x, str):
        if x == "ones":
            return np.ones(n)
        if x == "random":
            return np.random.default_rng(seed).random(n)
        raise GrapheneError(f"x must be 'ones', 'random' or an array (got {x!r})")
    x = np.asarray(x, dtype=np.float64).ravel()
    if x.shape != (n,):
        raise GrapheneError(f"x has {x.shape[0]} entries, the graph has {n} vertices")
    return x


def run(graph, *, device="cpu", in_memory=False, x="ones", **runtime) -> SpMVResult:
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    t0 = time.perf_counter()
    n = graph.num_vertices
    xv = make_x(n, x)
    steps = []
    if n == 0 or graph.num_edges == 0:
        return SpMVResult(y=np.zeros(n), x=xv, supersteps=steps, seconds=time.perf_counter() - t0)
    from ..iterator.edgemap import EdgeMap, Update
    weighted = bool(graph.weighted)
    # y[v] = sum over v's out-list of w * x[u]: each chunk of a list adds its partial sum to y[v]
    # atomically (8 bytes per vertex; per-thread rows would take 8 per vertex per thread)
    row = Update(_always, _row_weighted if weighted else _row_unweighted, combine="sum",
                 writes=(1,), reads=0)
    with EdgeMap(graph, weights=weighted, in_memory=in_memory, **runtime) as em:
        from ..iterator.memory import track
        y = track("y", np.zeros(n))
        track("x", xv)
        st = em.dense((xv, y), row)
    steps.append(st)
    if progress is not None:
        progress(st)
    return SpMVResult(y=y, x=xv, supersteps=steps, seconds=time.perf_counter() - t0)


GPU_STREAMS = True     # run_gpu streams the out-lists once (gpu/streamed.py)
GPU_RESIDENT = False   # ... and never uses a dataset left in GPU memory


def gpu_tier_costs(graph, opts) -> dict:
    """Estimated seconds of the streamed tiers (one pass), for `--device auto`'s plan."""
    from ..gpu.streamed import stream_setup_seconds, tier_costs
    from ..iterator.memory import memory_available
    if graph.weighted:
        return {}
    return tier_costs(graph, opts.get("gpu_mem"), graph.num_edges * int(graph.id_width),
                      memory_available(), 1.0, resident_ok=False, probe=False,
                      setup_s=stream_setup_seconds(graph, "spmv"))


def run_gpu(graph, *, x="ones", gpu_mem=None, gpu_tier="auto", progress=None,
            **_ignored) -> SpMVResult:
    """y = A x on the GPU: the out-lists streamed once, from pinned host memory while they fit
    half of the memory available, else from the SSD (one pass: there is nothing to keep
    resident). Unweighted datasets."""
    from ..gpu import streamed
    from ..gpu.resident import gpu_steps
    tier = gpu_tier
    if tier == "auto":
        from ..iterator.memory import memory_available
        tier = streamed.auto_tier(graph, gpu_mem, graph.num_edges * int(graph.id_width),
                                  memory_available(), resident_ok=False)
    if not tier.startswith("stream"):
        raise GrapheneError(f"--gpu-tier {tier}: SpMV on the GPU streams its lists once "
                            f"(--gpu-tier stream-host or stream-ssd)")
    t0 = time.perf_counter()
    xv = make_x(graph.num_vertices, x)
    st: dict = {}
    y = streamed.spmv(graph, xv, source=tier[len("stream-"):], stats=st)
    return SpMVResult(y=y, x=xv, supersteps=gpu_steps(st, progress),
                      seconds=time.perf_counter() - t0, device="gpu", gpu_tier=tier)


def verify(graph, result, **_ignored) -> list:
    """Serial product from the stored edges (float64); must match up to rounding (1e-12 relative
    to the sum of |terms| of each row)."""
    n = graph.num_vertices
    indptr, indices, w = graph.to_csr("out")
    x = np.asarray(result.x, dtype=np.float64)
    y = np.asarray(result.y)
    if y.shape != (n,):
        return [f"y has shape {y.shape}, expected ({n},)"]
    rows = np.repeat(np.arange(n), np.diff(indptr))
    terms = x[indices] * (w.astype(np.float64) if w is not None else 1.0)
    ref = np.bincount(rows, weights=terms, minlength=n)
    tol = np.bincount(rows, weights=np.abs(terms), minlength=n) * 1e-12
    bad = np.flatnonzero(np.abs(y - ref) > tol)
    if len(bad):
        v = int(bad[0])
        return [f"{len(bad)} entries of y wrong (row {v}: {y[v]!r}, expected {ref[v]!r})"]
    return []


CLI_OPTIONS = [
    click.Option(["--x", "x"], type=click.Choice(["ones", "random"]), default="ones",
                 show_default=True, help="The vector x: all ones, or uniform random from the seed."),
]
