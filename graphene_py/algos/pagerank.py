"""PageRank: delta (push) PageRank as in Graphene / Blaze, and classic pull PageRank (GAPBS).

Computes: `scores` float64[n], the PageRank vector with damping `alpha` (0.85), summing to 1.
Returns: PageRankResult(scores, iterations, error, variant, supersteps, seconds).

Definition (the same for both variants, and NetworkX's default): with P the out-edge transition
matrix, p = (1-alpha)/n + alpha * (P^T p + D(p)/n), where D(p) is the total score of the *dangling*
vertices (out-degree 0). Dangling mass is spread uniformly over all n vertices, so the scores sum to
1 (up to rounding) on every graph, with or without dangling vertices.

Variants (`variant=`; the CLI name `pagerank` selects "delta", `pagerank-pull` selects "pull"):
- "delta" (Graphene §4.7, Blaze SC'22): keeps scores p and a pending change r (the "delta").
  Superstep 1 streams every list once (Frontier.all) and sets r = (one power iteration of p0) - p0
  with p0 = 1/n. After that only vertices with |r[v]| > threshold * mean|r| are active: each pushes
  alpha * r[v] / outdeg(v) to its out-neighbours into per-thread accumulators (no atomics; indexed by
  the compute thread id), then moves r[v] into p[v]; inactive vertices keep their pending r[v] for a
  later superstep. Dangling vertices push their r uniformly as one scalar (no IO). Dense supersteps
  (active out-edges > PULL_FRACTION of |E|) pull the same sums over the in-lists instead, when the
  dataset has in-edge partitions or is undirected (direction optimization, as in Ligra).
  With threshold = 0 every superstep is exactly one power iteration. Held-back residuals make
  sum(p + r) drift from 1 (by alpha/(1-alpha) * |sum r|); the result is (p + r) normalized to sum 1.
- "pull" (GAPBS): every iteration streams the in-edge lists (Frontier.all) and sums
  alpha * p[u] / outdeg(u) over in-neighbours u (per-thread accumulators, since a list may arrive in
  several chunks on different threads). Datasets without in-edge partitions run the same power
  iteration by pushing along out-edges; undirected datasets pull over their (symmetric) out-edges.

Stop rule (both, GAPBS's): stop when the L1 change of the last iteration `error` = sum |p_k -
p_{k-1}| is below `tolerance` (1e-4) or after `max_iter` (20) iterations. For "delta", `error` is
||r||_1, the total change still pending (pushed or held), so the two variants report comparable
numbers (held-back mass makes delta's error (||r||_1 + |sum(p+r) - 1|) / sum(p+r), the bound on
the next iteration's change of the normalized result; with threshold 0 it is exactly ||r||_1).
Either way the distance to the exact fixed point is at most alpha/(1-alpha) * error (L1);
`verify` checks that bound with an independent serial iteration.
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit

from .. import config
from ..errors import GrapheneError

from .common import Result

VARIANTS = {"pagerank": "delta", "pagerank-pull": "pull"}

#: delta PageRank: a vertex pushes when |r[v]| > DELTA_THRESHOLD * mean |r|. Held mass is then at most
#: threshold * ||r||_1, so each superstep still shrinks ||r||_1 by at least alpha + threshold*(1-alpha)
#: and the stop rule is always reachable; 0.1 skips the many low-residual vertices of skewed graphs.
DELTA_THRESHOLD = 0.1


#: delta PageRank pulls (over in-lists, or the out-lists of an undirected dataset) instead of pushing
#: when the active vertices' out-edges exceed this fraction of |E|: pulling reads every list but
#: avoids scattered read-modify-writes (~1.5x faster per edge here), so it wins for dense supersteps.
PULL_FRACTION = 0.5


class PageRankResult(Result):
    MAIN = "scores"


# ---------------------------------------------------------------------------------------------
# kernels (run inside the IoIterator's compiled per-chunk loop)
@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _pushing(v, state):
    return state[0][v] != 0.0


@njit(cache=True)
def _push(v, nbrs, wts, tid, state):
    """acc[tid, u] += val[v] / outdeg[v] for every out-neighbour u (alpha applied afterwards)."""
    val, outdeg, acc = state
    x = val[v] / outdeg[v]
    row = acc[tid]
    for i in range(len(nbrs)):
        row[np.int64(nbrs[i])] += x


@njit(cache=True)
def _pull(v, nbrs, wts, tid, state):
    """acc[tid, v] += sum of contrib[u] over this chunk of v's in-neighbours."""
    contrib, acc = state
    s = 0.0
    for i in range(len(nbrs)):
        s += contrib[np.int64(nbrs[i])]
    acc[tid, v] += s


# ---------------------------------------------------------------------------------------------
def _open(graph, direction, in_memory, runtime):
    from ..iterator import IoIterator
    return IoIterator(graph, direction, in_memory=in_memory, weights=False, **runtime)


def _frontier():
    from ..iterator import Frontier
    return Frontier


def _split_runtime(runtime):
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    return progress, runtime


def run(graph, *, device="cpu", in_memory=False, variant="delta", alpha=config.PR_ALPHA,
        tolerance=config.PR_TOLERANCE, max_iter=config.PR_MAX_ITERS, threshold=DELTA_THRESHOLD,
        **runtime) -> PageRankResult:
    if variant not in ("delta", "pull"):
        raise GrapheneError(f"unknown PageRank variant {variant!r} (delta or pull)")
    if not 0.0 < alpha < 1.0:
        raise GrapheneError(f"alpha must be in (0, 1) (got {alpha})")
    if max_iter < 1:
        raise GrapheneError(f"max_iter must be >= 1 (got {max_iter})")
    progress, runtime = _split_runtime(runtime)
    t0 = time.perf_counter()
    n = graph.num_vertices
    steps = []
    if n == 0:
        return PageRankResult(scores=np.zeros(0), iterations=0, error=0.0, variant=variant,
                              supersteps=steps, seconds=time.perf_counter() - t0)
    outdeg = graph.degrees("out").astype(np.float64)
    dangling = outdeg == 0
    if variant == "delta":
        scores, iters, err = _delta(graph, n, outdeg, dangling, alpha, tolerance, max_iter,
                                    threshold, in_memory, runtime, steps, progress)
    else:
        scores, iters, err = _classic(graph, n, outdeg, dangling, alpha, tolerance, max_iter,
                                      in_memory, runtime, steps, progress)
    return PageRankResult(scores=scores, iterations=iters, error=err, variant=variant,
                          supersteps=steps, seconds=time.perf_counter() - t0)


def _note(steps, progress, st, it, err, active):
    st = dict(st)
    st.update(iteration=it, error=float(err), active=int(active))
    steps.append(st)
    if progress is not None:
        progress(st)


def _delta(graph, n, outdeg, dangling, alpha, tol, max_iter, threshold, in_memory, runtime, steps,
           progress):
    Frontier = _frontier()
    safe_deg = np.where(dangling, 1.0, outdeg)
    p = np.full(n, 1.0 / n)
    # direction optimization: a superstep whose active lists hold more than PULL_FRACTION of the
    # edges pulls over the in-lists instead (reads every list once, but no scattered writes)
    pull_dir = "in" if graph.in_partitions is not None else ("out" if not graph.directed else None)
    m = max(1, graph.num_edges)
    its = {"out": _open(graph, "out", in_memory, runtime)}
    try:
        if pull_dir == "in":
            its["in"] = _open(graph, "in", in_memory, runtime)
        T = max(it.threads for it in its.values())
        acc = np.zeros((T, n))
        # superstep 1: r = one power iteration of p0 minus p0 (every list streamed once)
        if pull_dir is not None:
            contrib = np.where(dangling, 0.0, p / safe_deg)
            st = its[pull_dir].run(_always, _pull, (contrib, acc), Frontier.all(n))
        else:
            st = its["out"].run(_always, _push, (p, safe_deg, acc), Frontier.all(n))
        r = (1.0 - alpha) / n + alpha * (acc.sum(axis=0) + p[dangling].sum() / n) - p
        err = _delta_error(p, r)
        iters = 1
        _note(steps, progress, st, iters, err, n)
        while err >= tol and iters < max_iter:
            cut = threshold * float(np.abs(r).sum()) / n
            active = np.abs(r) > cut
            val = np.where(active, r, 0.0)
            acc[:] = 0.0
            if pull_dir is not None and outdeg[active].sum() > PULL_FRACTION * m:
                contrib = val / safe_deg
                st = its[pull_dir].run(_always, _pull, (contrib, acc), Frontier.all(n))
            else:
                mask = (active & ~dangling).view(np.uint8)
                st = its["out"].run(_pushing, _push, (val, safe_deg, acc), Frontier.from_mask(mask))
            p += val
            r -= val
            r += alpha * (acc.sum(axis=0) + val[dangling].sum() / n)
            err = _delta_error(p, r)
            iters += 1
            _note(steps, progress, st, iters, err, int(active.sum()))
    finally:
        for it in its.values():
            it.close()
    s = p + r
    return s / s.sum(), iters, err


def _delta_error(p, r):
    """(||r||_1 + |sum(p + r) - 1|) / sum(p + r): bounds the L1 change one more power iteration would
    make to the normalized result (p + r) / sum(p + r); equals ||r||_1 when nothing is held back."""
    sigma = float(p.sum() + r.sum())
    return (float(np.abs(r).sum()) + abs(sigma - 1.0)) / sigma


def _classic(graph, n, outdeg, dangling, alpha, tol, max_iter, in_memory, runtime, steps, progress):
    Frontier = _frontier()
    safe_deg = np.where(dangling, 1.0, outdeg)
    if graph.in_partitions is not None:
        direction, kernel = "in", _pull
    elif not graph.directed:
        direction, kernel = "out", _pull       # symmetric: in-lists == out-lists
    else:
        direction, kernel = "out", _push       # no in-edges: same iteration, pushed
    p = np.full(n, 1.0 / n)
    err = np.inf
    iters = 0
    with _open(graph, direction, in_memory, runtime) as it:
        acc = np.zeros((it.threads, n))
        while iters < max_iter:
            acc[:] = 0.0
            if kernel is _pull:
                contrib = np.where(dangling, 0.0, p / safe_deg)
                st = it.run(_always, _pull, (contrib, acc), Frontier.all(n))
            else:
                st = it.run(_always, _push, (p, safe_deg, acc), Frontier.all(n))
            new = (1.0 - alpha) / n + alpha * (acc.sum(axis=0) + p[dangling].sum() / n)
            err = float(np.abs(new - p).sum())
            p = new
            iters += 1
            _note(steps, progress, st, iters, err, n)
            if err < tol:
                break
    return p, iters, err


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
    click.Option(["--alpha"], type=float, default=config.PR_ALPHA, show_default=True,
                 help="Damping factor."),
    click.Option(["--tolerance", "--tol", "tolerance"], type=float, default=config.PR_TOLERANCE,
                 show_default=True, help="Stop when the L1 change of an iteration is below this."),
    click.Option(["--max-iter"], type=int, default=config.PR_MAX_ITERS, show_default=True,
                 help="Iteration cap."),
    click.Option(["--threshold"], type=float, default=DELTA_THRESHOLD, show_default=True,
                 help="Delta PageRank: a vertex pushes when |delta| > THRESHOLD x mean |delta| "
                      "(0 = every vertex, plain power iteration)."),
]
