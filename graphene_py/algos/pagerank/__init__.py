"""PageRank: delta (push) PageRank as in Graphene / Blaze, and classic pull PageRank (GAPBS).

Computes: `scores` float64[n], the PageRank vector with damping `alpha` (0.85), summing to 1.
Returns: PageRankResult(scores, iterations, error, variant, converged, tolerance, supersteps,
seconds); converged is False when the run stopped at max_iter with error >= tolerance.

Definition (the same for both variants, and NetworkX's default): with P the out-edge transition
matrix, p = (1-alpha)/n + alpha * (P^T p + D(p)/n), where D(p) is the total score of the *dangling*
vertices (out-degree 0). Dangling mass is spread uniformly over all n vertices, so the scores sum to
1 (up to rounding) on every graph, with or without dangling vertices.

Variants (`variant=`; the CLI name `pagerank` selects "delta", `pagerank-pull` selects "pull"):
- "delta" (Graphene §4.7, Blaze SC'22), in two phases:
  1. Dense phase, Gauss-Seidel sweeps (when the dataset can pull: it has in-edge partitions or is
     undirected). A sweep streams every in-list once and updates each vertex in place as soon as
     its list is summed: x[v] = base + alpha * sum(contrib[u]), contrib[v] = x[v] / outdeg(v), so
     vertices summed later in the same sweep already see the new values (GAPBS's pr.cc does the
     same; by Stein-Rosenberg it converges at least as fast as the power iteration: 6-7 sweeps
     instead of 11-12 to 1e-4 on Kronecker graphs, and each sweep is one full read of the graph).
     A list split over several chunks (a hub, or C > 1 column partitions) is summed piecewise
     into psum[v] with atomic adds, and the thread whose piece completes the in-degree count
     finalises v. `base` = (1-alpha)/n + alpha*D/n uses the dangling mass D at the start of the
     sweep; vertices without in-edges are set after the sweep from the same base. After each
     sweep the scores are rescaled to sum 1 (Gauss-Seidel does not conserve mass, and that mode
     would otherwise converge only at rate alpha), and the sweeps start from `delta._start`,
     which puts the fixed point's share of mass on the vertices without in-edges at once.
  2. Sparse phase, delta pushes: once a sweep changes only vertices whose out-lists hold at most
     PULL_FRACTION of |E| (|change| > threshold * mean |change|), the phase ends: one exact pull
     step computes the pending change r = (one power iteration of x) - x, and from then on only
     vertices with |r[v]| > threshold * mean|r| are active: each moves its share
     sh = r[v] / outdeg(v), rounded to float32, times outdeg(v) from r[v] into p[v] (the rounding
     stays pending in r, so no mass is lost), then adds alpha * sh to r[u] of every out-neighbour
     u (atomic adds: no per-thread rows); inactive vertices keep their pending r[v] for a later
     superstep. Dangling vertices push their r uniformly as one scalar (no IO). Dense supersteps of
     this phase (active out-edges > PULL_FRACTION of |E|) pull the same sums over the in-lists.
     Held-back residuals make sum(p + r) drift from 1 (by alpha/(1-alpha) * |sum r|); the result
     is (p + r) normalized to sum 1.
  Datasets that cannot pull (directed, no in-edges) run phase 2 from the start (Jacobi pushes).
- "pull" (GAPBS's definition, Jacobi): every iteration streams the in-edge lists (Frontier.all)
  and sums alpha * p[u] / outdeg(u) over in-neighbours u (one atomic add per chunk into one row of
  sums, since a list may arrive in several chunks on different threads): exactly the power
  iteration. Datasets without
  in-edge partitions run the same iteration by pushing along out-edges; undirected datasets pull
  over their (symmetric) out-edges.

Stop rule (both, GAPBS's): stop when the L1 change of the last iteration `error` = sum |p_k -
p_{k-1}| is below `tolerance` (1e-4) or after `max_iter` (20) iterations (a sweep or superstep
counts as one iteration). What `error` is, so that one exact power iteration of the returned
(normalized) scores moves them by at most alpha * error in L1 in every case:
- pull: sum |p_k - p_{k-1}| (exactly GAPBS's number);
- delta, Gauss-Seidel sweep: (delta + c * |sigma - 1|) / sigma with delta = sum |x_k - x_{k-1}|
  (GAPBS's number for its Gauss-Seidel sweep), sigma = sum x_k, c = max(1, (1-alpha)/alpha):
  every value a sweep read was x_{k-1} or x_k of that vertex, so the power iteration's change of
  x_k is at most alpha * delta, and normalizing by sigma adds the |sigma - 1| term;
- delta, push superstep: (||r||_1 + |sum(p+r) - 1|) / sum(p+r), the bound on the next iteration's
  change of the normalized result (||r||_1 when nothing is held back).
So the distance to the exact fixed point is at most alpha/(1-alpha) * error (L1); `verify` checks
the one-iteration bound with an independent serial iteration.

Precision: the row every edge reads at random (pull: y = p / outdeg or the contributions; delta's
sweeps: y) is float32 while an iteration's change is at least pull.SINGLE_UNTIL (1e-5), as GAPBS
holds its scores: half the bytes, so on Kronecker scale 22 the row fits a 32 MiB L3 (pull
PageRank in memory: ~20% less time per iteration). Below that change it is float64, so a tight
tolerance ends at the float64 fixed point. Sums, the stop rule and the scores returned are float64;
while float32, `error` adds a bound on its rounding (4 * 2^-24 / alpha), so the bounds above hold.
"""
from __future__ import annotations

import time

import click
import numpy as np

from ... import config
from ...errors import GrapheneError

from ..common import Result, real_range
from .delta import DELTA_THRESHOLD, PULL_FRACTION, _delta  # noqa: F401 (the tunables)
from .pull import _classic

CLUSTER = True     # both variants run on a cluster (delta: without its Gauss-Seidel phase there)


class PageRankResult(Result):
    MAIN = "scores"

    def warnings(self) -> list:
        """One line when the run stopped at max_iter with the L1 change still >= tolerance (none
        for tolerance 0, which asks for exactly max_iter iterations)."""
        tol = getattr(self, "tolerance", None)
        if getattr(self, "converged", True) or tol == 0:
            return []
        its = f"{self.iterations} iteration{'' if int(self.iterations) == 1 else 's'}"
        return [f"PageRank stopped after {its} without reaching tolerance "
                f"{tol:g} (last L1 change {float(self.error):.3g}); raise --max-iter for a "
                f"tighter result" if tol is not None else
                f"PageRank stopped after {its} without converging "
                f"(last L1 change {float(self.error):.3g})"]


def _split_runtime(runtime):
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    return progress, runtime


GPU_STREAMS = True     # run_gpu can stream the lists per iteration (gpu/streamed.py)


def choose_gpu_tier(graph, gpu_mem=None, tier="auto", passes=12.0):
    """Where a GPU PageRank keeps the lists: "resident" (DeviceGraph: GPU memory, the rest read
    zero-copy from pinned host memory), "stream-host" or "stream-ssd" (gpu/streamed.py). auto:
    the least estimated time for `passes` iterations, the dataset's load counted
    (gpu/streamed.tier_costs); a directed dataset without in-lists stays resident (streaming
    pulls over in-lists)."""
    if tier != "auto":
        return tier
    if graph.directed and graph.in_partitions is None:
        return "resident"
    from ...gpu.streamed import auto_tier, stream_setup_seconds
    from ...iterator.memory import memory_available
    dirs = 2 if graph.in_partitions is not None else 1
    return auto_tier(graph, gpu_mem, graph.num_edges * int(graph.id_width) * dirs,
                     memory_available(), passes, setup_s=stream_setup_seconds(graph, "pagerank"))


def gpu_tier_costs(graph, opts) -> dict:
    """Estimated seconds of each GPU tier for this run (gpu/streamed.tier_costs), without asking
    the GPU: `--device auto`'s plan (algos/registry.py)."""
    from ...gpu.policy import run_passes
    from ...gpu.streamed import stream_setup_seconds, tier_costs
    from ...iterator.memory import memory_available
    if graph.directed and graph.in_partitions is None:
        return {}                # streaming pulls over in-lists: the plan's resident estimate
    dirs = 2 if graph.in_partitions is not None else 1
    return tier_costs(graph, opts.get("gpu_mem"), graph.num_edges * int(graph.id_width) * dirs,
                      memory_available(), run_passes("pagerank-pull", opts), probe=False,
                      setup_s=stream_setup_seconds(graph, "pagerank"))


def handoff_prep_seconds(graph, opts):
    """(setup, once after the move) estimated seconds of the GPU's part of a hand-off
    (gpu/handoff.py PageRankPart) in the tier a GPU run would take (`gpu_tier`; auto: the least
    tier_costs, as choose_gpu_tier): resident: the CSR's load, then nothing; stream-host: the
    lists read into pinned memory, then nothing; stream-ssd: nothing, then the first read of the
    lists. None when no tier can hold the run. Without asking the GPU (the plan)."""
    from ...gpu import streamed as S
    from ...iterator.memory import memory_available
    tier = str(opts.get("gpu_tier", "auto"))
    dirs = 2 if graph.in_partitions is not None else 1
    stream = graph.num_edges * int(graph.id_width) * dirs
    if tier == "auto":
        costs = gpu_tier_costs(graph, opts)     # ({} for a dataset that only stays resident)
        tier = min(costs, key=costs.get) if costs else "resident"
    if tier == "resident":
        csr = stream + 8 * (graph.num_vertices + 1) * dirs
        if not S.resident_loadable(graph) and memory_available() < 2 * csr:
            return None     # its assembly on the host, beside the CPU's run
        return S.resident_setup_seconds(graph) + csr / S.resident_load_bps(graph), 0.0
    # a streamed part is set up on the load's thread (StreamedPageRank), before the move
    setup = S.stream_setup_seconds(graph, "pagerank")
    if tier == "stream-host":
        return setup + max(stream / S.SSD_BYTES_PER_S, stream / S.PIN_BYTES_PER_S), 0.0
    return setup, stream / S.SSD_BYTES_PER_S


def run_gpu(graph, *, alpha=config.PR_ALPHA, tolerance=config.PR_TOLERANCE,
            max_iter=config.PR_MAX_ITERS, gpu_mem=None, gpu_tier="auto", progress=None,
            **_ignored) -> PageRankResult:
    """PageRank on the GPU: classic pull iterations over a degree-renumbered CSR with the hubs'
    in-edges tiled in shared memory, for both variants (the same fixed point within tolerance);
    or, when the lists stay off the GPU (`gpu_tier`), the same iterations with the lists streamed
    in per iteration (gpu/streamed.py)."""
    from ...gpu import algorithms as A
    from ...gpu.resident import gpu_steps, timed
    from ...gpu.policy import run_passes
    tier = choose_gpu_tier(graph, gpu_mem, gpu_tier, run_passes(
        "pagerank-pull", {"max_iter": max_iter, "tolerance": tolerance}))
    if tier.startswith("stream"):
        from ...gpu import streamed
        t0 = time.perf_counter()
        st: dict = {}
        scores = streamed.pagerank(graph, source=tier[len("stream-"):], alpha=alpha,
                                   tol=tolerance, max_iter=max_iter, stats=st, gpu_mem=gpu_mem)
        return PageRankResult(scores=scores, iterations=st.get("iterations", 0),
                              error=st.get("error", 0.0), variant="pull",
                              converged=bool(st.get("error", 0.0) < tolerance),
                              tolerance=float(tolerance), supersteps=gpu_steps(st, progress),
                              seconds=time.perf_counter() - t0,
                              load_seconds=st.get("setup_seconds", 0.0), device="gpu",
                              gpu_tier=tier)
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    st: dict = {}
    scores = A.pagerank(dg, alpha=alpha, tol=tolerance, max_iter=max_iter, stats=st)
    # converged: the CPU path's stop rule (L1 change < tol, else max_iter was hit)
    return PageRankResult(scores=scores, iterations=st["iterations"], error=st["error"],
                          variant="pull", converged=bool(st["error"] < tolerance or st["error"] == 0),
                          tolerance=float(tolerance), supersteps=gpu_steps(st, progress),
                          seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu", gpu_tier=dg.tier())


def check(variant, alpha, max_iter) -> None:
    """Clear errors for an unknown variant, alpha outside (0, 1), max_iter < 1 (also the numpy
    path's: algos/small.py)."""
    if variant not in ("delta", "pull"):
        raise GrapheneError(f"unknown PageRank variant {variant!r} (delta or pull)")
    if not 0.0 < alpha < 1.0:
        raise GrapheneError(f"alpha must be in (0, 1) (got {alpha})")
    if max_iter < 1:
        raise GrapheneError(f"max_iter must be >= 1 (got {max_iter})")


HYBRID = True       # run(device="auto") starts on the CPU and moves to the GPU once it is loaded
HANDOFF = True      # ... which a thread of its own loads meanwhile (gpu/handoff.py)


def _handoff(graph, gpu_mem, gpu_tier, alpha, tolerance, max_iter, handoff_at):
    """(Handoff or None, note) for device="auto": the GPU's part (the tier a GPU run would take,
    set up: gpu/handoff.py PageRankPart) is made on a thread of its own while the CPU runs the
    first iterations."""
    from ..registry import gpu_may_be_available
    why = gpu_may_be_available()     # (no CuPy here: it starts on the load's thread)
    if why:
        return None, f"no GPU ({why})"
    from ...gpu.handoff import Handoff, pagerank_part
    from ...gpu.policy import run_passes
    from ...iterator.memory import memory_available
    passes = run_passes("pagerank-pull", {"max_iter": max_iter, "tolerance": tolerance})
    load = pagerank_part(graph, gpu_mem,
                         lambda: choose_gpu_tier(graph, gpu_mem, gpu_tier, passes), alpha,
                         memory_available())
    return Handoff(load, state_bytes=8 * graph.num_vertices, max_iter=max_iter, tol=tolerance,
                   force_at=handoff_at), "hybrid CPU/GPU: the GPU takes over once it is ready"


def _rest_on_gpu(ho, scores, alpha, tolerance, max_iter, progress):
    """The iterations after the hand-off, on the GPU from the CPU's scores: (scores, iterations,
    error, supersteps)."""
    from ...gpu.resident import gpu_steps
    st: dict = {}
    out = ho.load.value.run(scores, alpha, tolerance, max_iter, st)
    return out, st["iterations"], st["error"], gpu_steps(st, progress)


def run(graph, *, device="cpu", in_memory=False, variant="delta", alpha=config.PR_ALPHA,
        tolerance=config.PR_TOLERANCE, max_iter=config.PR_MAX_ITERS, threshold=DELTA_THRESHOLD,
        gpu_mem=None, gpu_tier="auto", handoff_at=None, **runtime) -> PageRankResult:
    """device="auto" (dispatch's "hybrid"): the CPU path runs while the dataset loads into GPU
    memory, and after each iteration the estimate of the rest decides whether the GPU takes
    over from the scores so far (gpu/handoff.py); its iterations are pull iterations, counted
    on from the CPU's. handoff_at: move after that iteration, waiting there for the load
    (tests)."""
    check(variant, alpha, max_iter)
    progress, runtime = _split_runtime(runtime)
    t0 = time.perf_counter()
    n = graph.num_vertices
    steps = []
    if n == 0:
        return PageRankResult(scores=np.zeros(0), iterations=0, error=0.0, variant=variant,
                              converged=True, tolerance=float(tolerance),
                              supersteps=steps, seconds=time.perf_counter() - t0)
    ho, note = _handoff(graph, gpu_mem, gpu_tier, alpha, tolerance, max_iter, handoff_at) \
        if device == "auto" else (None, "")
    try:
        if variant == "delta":
            scores, iters, err = _delta(graph, n, alpha, tolerance, max_iter, threshold,
                                        in_memory, runtime, steps, progress, ho)
        else:
            scores, iters, err = _classic(graph, n, alpha, tolerance, max_iter, in_memory,
                                          runtime, steps, progress, ho)
    finally:
        if ho is not None:
            ho.finish()
    extra = {"device_note": note} if device == "auto" else {}
    if ho is not None:
        gsteps = []
        if ho.moved:
            scores, more, err, gsteps = _rest_on_gpu(ho, scores, alpha, tolerance,
                                                     max_iter - iters, progress)
            iters += more
            steps.extend(gsteps)
        extra.update(ho.summary(len(gsteps)), device="cpu+gpu" if ho.moved else "cpu")
    # converged: the stop rule's tolerance (or the exact fixed point) was reached, else the run
    # stopped at max_iter
    return PageRankResult(scores=scores, iterations=iters, error=err, variant=variant,
                          converged=bool(err < tolerance or err == 0), tolerance=float(tolerance),
                          supersteps=steps, seconds=time.perf_counter() - t0, **extra)


def verify(graph, result, *, alpha=config.PR_ALPHA, **_ignored) -> list:
    """Serial check from the stored edges: scores sum to 1, are positive, and one exact power
    iteration moves them by at most alpha * error (+ rounding), which bounds the distance to the
    fixed point by alpha/(1-alpha) * error."""
    n = graph.num_vertices
    s = np.asarray(result.scores, dtype=np.float64)
    problems = []
    if s.shape != (n,):
        return [f"scores has shape {s.shape}, expected ({n},)"]
    if n == 0:
        return problems
    if not np.all(np.isfinite(s)) or s.min() <= 0:
        problems.append("scores must be finite and positive")
        return problems
    if abs(s.sum() - 1.0) > 1e-9 * max(1, n) ** 0.5 + 1e-12:
        problems.append(f"scores sum to {s.sum():.15f}, not 1")
    src, dst = graph.edges("out")
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    dang = outdeg == 0
    nxt = np.full(n, (1.0 - alpha) / n + alpha * s[dang].sum() / n)
    np.add.at(nxt, dst, alpha * s[src] / outdeg[src])
    change = float(np.abs(nxt - s).sum())
    bound = alpha * float(result.error) * (1 + 1e-6) + 1e-12 * n
    if change > bound:
        problems.append(f"one more iteration changes the scores by {change:.3e} (L1), more than "
                        f"alpha * reported error = {bound:.3e}")
    return problems


CLI_OPTIONS = [
    click.Option(["--alpha"], type=real_range(0.0, 1.0, min_open=True, max_open=True),
                 default=config.PR_ALPHA, show_default=True, help="Damping factor, in (0, 1)."),
    click.Option(["--tolerance", "--tol", "tolerance"], type=real_range(0.0),
                 default=config.PR_TOLERANCE, show_default=True,
                 help="Stop when the L1 change of an iteration is below this (>= 0; 0: always run "
                      "--max-iter iterations)."),
    click.Option(["--max-iter"], type=click.IntRange(min=1), default=config.PR_MAX_ITERS,
                 show_default=True,
                 help="Iteration cap (>= 1); stopping there above the tolerance prints a warning."),
    click.Option(["--threshold"], type=real_range(0.0, 1.0, max_open=True), default=DELTA_THRESHOLD,
                 show_default=True,
                 help="Delta PageRank: a vertex pushes when |delta| > THRESHOLD x mean |delta| "
                      "(in [0, 1): 0 = every vertex; from 1 on convergence is not guaranteed)."),
]
