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
     would otherwise converge only at rate alpha), and the sweeps start from `_lumped_start`,
     which puts the fixed point's share of mass on the vertices without in-edges at once.
  2. Sparse phase, delta pushes: once a sweep changes only vertices whose out-lists hold at most
     PULL_FRACTION of |E| (|change| > threshold * mean |change|), the phase ends: one exact pull
     step computes the pending change r = (one power iteration of x) - x, and from then on only
     vertices with |r[v]| > threshold * mean|r| are active: each pushes alpha * r[v] / outdeg(v)
     to its out-neighbours into per-thread accumulators (no atomics; indexed by the compute thread
     id), then moves r[v] into p[v]; inactive vertices keep their pending r[v] for a later
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
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit

from .. import config
from ..errors import GrapheneError

from .common import Result, frontier_class as _frontier, real_range


#: delta PageRank: a vertex pushes when |r[v]| > DELTA_THRESHOLD * mean |r|. Held mass is then at most
#: threshold * ||r||_1, so each superstep still shrinks ||r||_1 by at least alpha + threshold*(1-alpha)
#: and the stop rule is always reachable; 0.1 skips the many low-residual vertices of skewed graphs.
DELTA_THRESHOLD = 0.1


#: delta PageRank pulls (over in-lists, or the out-lists of an undirected dataset) instead of pushing
#: when the active vertices' out-edges exceed this fraction of |E|: pulling reads every list but
#: avoids scattered read-modify-writes (~1.5x faster per edge here), so it wins for dense supersteps.
PULL_FRACTION = 0.5



CLUSTER = True     # both variants run on a cluster (delta: without its Gauss-Seidel phase there)

class PageRankResult(Result):
    MAIN = "scores"

    def warnings(self) -> list:
        """One line when the run stopped at max_iter with the L1 change still >= tolerance (none
        for tolerance 0, which asks for exactly max_iter iterations)."""
        tol = getattr(self, "tolerance", None)
        if getattr(self, "converged", True) or tol == 0:
            return []
        return [f"PageRank stopped after {self.iterations} iterations without reaching tolerance "
                f"{tol:g} (last L1 change {float(self.error):.3g}); raise --max-iter for a "
                f"tighter result" if tol is not None else
                f"PageRank stopped after {self.iterations} iterations without converging "
                f"(last L1 change {float(self.error):.3g})"]


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
    """acc[0, v] += sum of contrib[u] over this chunk of v's in-neighbours: one atomic add per
    chunk (a list may span partitions and threads), so pulling needs one row of sums, not one per
    thread."""
    contrib, acc = state
    s = 0.0
    for i in range(len(nbrs)):
        s += contrib[np.int64(nbrs[i])]
    _fadd(acc[0], v, s)


from ..iterator.edgemap import Update  # noqa: E402

#: a power iteration's superstep: pull (acc[0, v] += contributions of v's in-neighbours) or push
#: (acc[tid, u] += share of v); the sums of several pieces add up
PULL = Update(_always, _pull, combine="sum", writes=(1,))
PUSH = Update(_always, _push, combine="sum", writes=(2,))
PUSH_ACTIVE = Update(_pushing, _push, combine="sum", writes=(2,))     # delta steps: v with val != 0

#: rows of the Gauss-Seidel sweep's float state F and integer state I. One 2-D array per type
#: instead of seven 1-D ones: with a branch in the kernel, numba keeps per-call reference counting
#: for every array in the state tuple (measured: 1.05 s -> 0.87 s per kron22 sweep, 1 thread)
X, CONTRIB, OUTDEG, CHANGE, PSUM = range(5)
INDEG, SEEN = range(2)


@njit(cache=True)
def _sweep(v, nbrs, wts, tid, state):
    """Gauss-Seidel: x[v] = base + alpha * sum(contrib[u] over v's in-list), published at once."""
    F, I, consts = state
    contrib = F[CONTRIB]
    s = 0.0
    for i in range(len(nbrs)):
        s += contrib[np.int64(nbrs[i])]
    k = np.int64(nbrs.shape[0])
    if k != I[INDEG, v]:
        # one piece of a list split over chunks: add it; the piece completing the count finishes v
        psum = F[PSUM]
        _fadd(psum, v, s)
        seen = I[SEEN]
        if _add_ar(seen, v, k) + k != I[INDEG, v]:
            return
        s = F[PSUM, v]
        F[PSUM, v] = 0.0
        I[SEEN, v] = 0
    new = consts[0] + consts[1] * s
    F[CHANGE, v] = abs(new - F[X, v])
    F[X, v] = new
    if F[OUTDEG, v] > 0.0:
        F[CONTRIB, v] = new / F[OUTDEG, v]


from ..iterator.atomics import atomic_add_acq_rel as _add_ar, atomic_fadd as _fadd  # noqa: E402
from ..iterator.memory import track  # noqa: E402


@njit(cache=True)
def _sweep_tail(x, contrib, change, outdeg, no_in, dangling, base, c, thr_per_delta):
    """After a sweep, in one pass: set the vertices without in-lists to `base`, then rescale x and
    contrib to sum 1. Returns (error, out-edges of the vertices whose change exceeds
    thr_per_delta * delta and how many they are, dangling mass of the rescaled x)."""
    n = x.shape[0]
    delta = 0.0
    for v in range(n):
        if no_in[v]:
            d = abs(base - x[v])
            change[v] = d
            x[v] = base
            if not dangling[v]:
                contrib[v] = base / outdeg[v]
        delta += change[v]
    sigma = 0.0
    for v in range(n):
        sigma += x[v]
    inv = 1.0 / sigma
    cut = thr_per_delta * delta
    act_edges = 0.0
    act = 0
    dmass = 0.0
    for v in range(n):
        x[v] *= inv
        contrib[v] *= inv
        if change[v] > cut:
            act_edges += outdeg[v]
            act += 1
        if dangling[v]:
            dmass += x[v]
    return (delta + c * abs(sigma - 1.0)) / sigma, act_edges, act, dmass


# ---------------------------------------------------------------------------------------------
def _split_runtime(runtime):
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    return progress, runtime


def run_gpu(graph, *, alpha=config.PR_ALPHA, tolerance=config.PR_TOLERANCE,
            max_iter=config.PR_MAX_ITERS, gpu_mem=None, progress=None, **_ignored) -> PageRankResult:
    """PageRank on the GPU: classic pull iterations over a degree-renumbered CSR with the hubs'
    in-edges tiled in shared memory, for both variants (the same fixed point within tolerance)."""
    from ..gpu import algorithms as A
    from ..gpu.resident import gpu_steps, timed
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    st: dict = {}
    scores = A.pagerank(dg, alpha=alpha, tol=tolerance, max_iter=max_iter, stats=st)
    # converged: the CPU path's stop rule (L1 change < tol, else max_iter was hit)
    return PageRankResult(scores=scores, iterations=st["iterations"], error=st["error"],
                          variant="pull", converged=bool(st["error"] < tolerance or st["error"] == 0),
                          tolerance=float(tolerance), supersteps=gpu_steps(st, progress),
                          seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu", gpu_tier=dg.tier())


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
                              converged=True, tolerance=float(tolerance),
                              supersteps=steps, seconds=time.perf_counter() - t0)
    if variant == "delta":
        scores, iters, err = _delta(graph, n, alpha, tolerance, max_iter, threshold, in_memory,
                                    runtime, steps, progress)
    else:
        scores, iters, err = _classic(graph, n, alpha, tolerance, max_iter, in_memory, runtime,
                                      steps, progress)
    # converged: the stop rule's tolerance (or the exact fixed point) was reached, else the run
    # stopped at max_iter
    return PageRankResult(scores=scores, iterations=iters, error=err, variant=variant,
                          converged=bool(err < tolerance or err == 0), tolerance=float(tolerance),
                          supersteps=steps, seconds=time.perf_counter() - t0)


def _note(steps, progress, st, it, err, active):
    st = dict(st)
    st.update(iteration=it, error=float(err), active=int(active))
    steps.append(st)
    if progress is not None:
        progress(st)


def _out_degrees(graph):
    outdeg = track("out-degrees (float64)", graph.degrees("out").astype(np.float64))
    return outdeg, track("dangling flags", outdeg == 0)


def _normalized(p):
    """p / sum(p), in place (numpy's pairwise sum: exact to rounding; no second n-array)."""
    p /= p.sum()
    return p


def _delta(graph, n, alpha, tol, max_iter, threshold, in_memory, runtime, steps, progress):
    from ..iterator.edgemap import EdgeMap
    outdeg, dangling = _out_degrees(graph)
    # datasets that can pull: undirected (in-lists == out-lists: no second copy to load), or
    # in-edge partitions
    pull_dir = "out" if not graph.directed else ("in" if graph.in_partitions is not None else None)
    m = max(1, graph.num_edges)
    iters = 0
    with EdgeMap(graph, pull=pull_dir == "in", in_memory=in_memory, **runtime) as em:
        T = em.threads
        p = None
        if pull_dir is not None and em.local:
            # phase 1: Gauss-Seidel sweeps while the changes are dense (a sweep updates one
            # shared score array in place, in list order: not a superstep a cluster can split)
            p, iters, err, done = _gauss_seidel(em.its[pull_dir], graph, pull_dir, n, outdeg,
                                                dangling, alpha, tol, max_iter, threshold, m,
                                                steps, progress)
            if done:
                return _normalized(p), iters, err
        elif pull_dir is not None:     # (a cluster) the sweeps' start, then only delta steps
            p = _lumped_start(n, graph.degrees(pull_dir), dangling, alpha)
        else:
            p = np.full(n, 1.0 / n)
        # the sweeps' state is gone now: the divisor of the pushes and pulls takes its place
        safe_deg = track("safe degrees", np.where(dangling, 1.0, outdeg))
        # phase 2: r = one power iteration of p minus p (every list streamed once) ...
        acc = track("per-thread sums", np.zeros((T, n)))
        if pull_dir is not None:
            contrib = np.where(dangling, 0.0, p / safe_deg)
            st = em.dense((contrib, acc), PULL, pull_dir)
        else:
            st = em.dense((p, safe_deg, acc), PUSH)
        r = (1.0 - alpha) / n + alpha * (acc.sum(axis=0) + p[dangling].sum() / n) - p
        track("scores, residuals", p, r)
        err = _delta_error(p, r)
        iters += 1
        _note(steps, progress, st, iters, err, n)
        # ... then delta supersteps: only vertices with a large pending change push it
        while err >= tol and iters < max_iter:
            cut = threshold * float(np.abs(r).sum()) / n
            active = np.abs(r) > cut
            val = np.where(active, r, 0.0)
            acc[:] = 0.0
            if pull_dir is not None and outdeg[active].sum() > PULL_FRACTION * m:
                contrib = val / safe_deg
                st = em.dense((contrib, acc), PULL, pull_dir)
            else:
                mask = (active & ~dangling).view(np.uint8)
                st = em.masked((val, safe_deg, acc), PUSH_ACTIVE, mask)
            p += val
            r -= val
            r += alpha * (acc.sum(axis=0) + val[dangling].sum() / n)
            err = _delta_error(p, r)
            iters += 1
            _note(steps, progress, st, iters, err, int(active.sum()))
    p += r
    return _normalized(p), iters, err


def _lumped_start(n, indeg, dangling, alpha):
    """A start vector summing to 1 that already holds the fixed point's split of mass between the
    vertices without in-edges and the rest. Every vertex without in-edges has the same exact score
    b = (1-alpha)/n + alpha*D/n (D: total dangling mass); guessing the rest's dangling share s as
    uniform gives b = ((1-alpha) + alpha*s) / (n - alpha*|Z & dangling| + alpha*s*|Z|), and the rest
    start uniform. Starting at 1/n instead leaves that split to converge at about rate alpha: on
    Kronecker scale 22 (43% isolated vertices) 1e-4 takes 5 sweeps from here, 9 from 1/n."""
    z = indeg == 0
    nz = int(z.sum())
    if nz == n:
        return np.full(n, 1.0 / n)
    s = float(np.count_nonzero(dangling & ~z)) / (n - nz)
    b = ((1.0 - alpha) + alpha * s) / (n - alpha * float(np.count_nonzero(dangling & z)) +
                                       alpha * s * nz)
    return np.where(z, b, (1.0 - nz * b) / (n - nz))


def _gauss_seidel(it, graph, direction, n, outdeg, dangling, alpha, tol, max_iter, threshold, m,
                  steps, progress):
    """Phase 1 of delta PageRank. Returns (x summing to 1, sweeps, error, converged)."""
    Frontier = _frontier()
    F = track("sweep state (5 float64)", np.zeros((5, n)))
    # in-degrees and the per-sweep counts of a split list's pieces: 4 bytes while degrees fit
    idt = np.int32 if graph.num_edges < (1 << 31) else np.int64
    I = track("sweep state (2 integer rows)", np.zeros((2, n), dtype=idt))
    I[INDEG] = graph.degrees(direction)      # total over the column partitions
    no_in = (I[INDEG] == 0).view(np.uint8)
    dang = dangling.view(np.uint8)
    x, contrib, change = F[X], F[CONTRIB], F[CHANGE]
    F[OUTDEG] = outdeg
    x[:] = _lumped_start(n, I[INDEG], dangling, alpha)
    np.divide(x, outdeg, out=contrib, where=~dangling)    # contrib is 0 where dangling
    consts = np.zeros(2)
    c = max(1.0, (1.0 - alpha) / alpha)
    dmass = float(x[dangling].sum())
    sweeps, err = 0, np.inf
    while sweeps < max_iter:
        base = (1.0 - alpha) / n + alpha * dmass / n
        consts[:] = (base, alpha)
        st = it.run(_always, _sweep, (F, I, consts), Frontier.all(n))
        # vertices without in-lists (nothing was read for them) take `base`; then rescale to sum
        # 1: Gauss-Seidel does not conserve the total mass, and without the rescaling that mode
        # would converge only at rate alpha (the fixed point is only defined up to this scale)
        err, act_edges, act, dmass = _sweep_tail(x, contrib, change, F[OUTDEG], no_in, dang, base,
                                                 c, threshold / n)
        sweeps += 1
        _note(steps, progress, st, sweeps, err, act)
        if err < tol:
            return x, sweeps, err, True
        if act_edges <= PULL_FRACTION * m:   # the changes are sparse now: switch to pushes
            break
    return x.copy(), sweeps, err, sweeps >= max_iter


def _delta_error(p, r):
    """(||r||_1 + |sum(p + r) - 1|) / sum(p + r): bounds the L1 change one more power iteration would
    make to the normalized result (p + r) / sum(p + r); equals ||r||_1 when nothing is held back."""
    sigma = float(p.sum() + r.sum())
    return (float(np.abs(r).sum()) + abs(sigma - 1.0)) / sigma


@njit(cache=True, nogil=True)
def _finish_iteration(acc, p, contrib, dangling, inv_deg, alpha):
    """p <- (1-alpha)/n + alpha * (sum of acc's rows + dangling mass / n), in place; returns the
    L1 change; zeroes acc; contrib <- p / outdeg (0 for dangling vertices)."""
    n = p.shape[0]
    T = acc.shape[0]
    dsum = 0.0
    for v in range(n):
        if dangling[v]:
            dsum += p[v]
    base = (1.0 - alpha) / n + alpha * dsum / n
    err = 0.0
    for v in range(n):
        s = 0.0
        for t in range(T):
            s += acc[t, v]
            acc[t, v] = 0.0
        x = base + alpha * s
        err += abs(x - p[v])
        p[v] = x
        contrib[v] = x * inv_deg[v]
    return err


def _classic(graph, n, alpha, tol, max_iter, in_memory, runtime, steps, progress):
    from ..iterator.edgemap import EdgeMap
    outdeg, dangling = _out_degrees(graph)
    if not graph.directed:
        direction, step = "out", PULL       # symmetric: in-lists == out-lists
    elif graph.in_partitions is not None:
        direction, step = "in", PULL
    else:
        direction, step = "out", PUSH       # no in-edges: same iteration, pushed
    p = np.full(n, 1.0 / n)
    inv_deg = np.divide(1.0, outdeg, out=np.zeros(n), where=~dangling)
    # the push kernel divides by the degree (1 for dangling vertices); the pull needs only 1/degree
    safe_deg = np.where(dangling, 1.0, outdeg) if step is PUSH else None
    del outdeg
    contrib = p * inv_deg
    track("scores, contributions, 1/degree", p, contrib, inv_deg)
    if safe_deg is not None:
        track("safe degrees", safe_deg)
    err = np.inf
    iters = 0
    with EdgeMap(graph, pull=direction == "in", out=direction == "out", in_memory=in_memory,
                 **runtime) as em:
        # pulls add atomically into one row; pushes write per-thread rows (no atomics per edge)
        acc = track("per-thread sums", np.zeros((1 if step is PULL else em.threads, n)))
        state = (contrib, acc) if step is PULL else (p, safe_deg, acc)
        while iters < max_iter:
            st = em.dense(state, step, direction)
            # one pass: new scores in place, the L1 change, acc zeroed, next contributions
            err = float(_finish_iteration(acc, p, contrib, dangling, inv_deg, alpha))
            iters += 1
            _note(steps, progress, st, iters, err, n)
            if err < tol:
                break
    return _normalized(p), iters, err


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
