"""Delta PageRank (Graphene §4.7, Blaze SC'22): Gauss-Seidel sweeps while the changes are dense,
then pushes of the large pending changes (see the package's text for the definitions and the stop
rule)."""
from __future__ import annotations

import numpy as np
from numba import njit

from ...iterator.atomics import atomic_add_acq_rel as _add_ar, atomic_fadd as _fadd
from ...iterator.edgemap import EdgeMap, Update
from ...iterator.memory import track
from .steps import PULL, PUSH, PUSH_ACTIVE, _always, _normalized, _note, _out_degrees

#: delta PageRank: a vertex pushes when |r[v]| > DELTA_THRESHOLD * mean |r|. Held mass is then at most
#: threshold * ||r||_1, so each superstep still shrinks ||r||_1 by at least alpha + threshold*(1-alpha)
#: and the stop rule is always reachable; 0.1 skips the many low-residual vertices of skewed graphs.
DELTA_THRESHOLD = 0.1


#: delta PageRank pulls (over in-lists, or the out-lists of an undirected dataset) instead of pushing
#: when the active vertices' out-edges exceed this fraction of |E|: pulling reads every list but
#: avoids scattered read-modify-writes (~1.5x faster per edge here), so it wins for dense supersteps.
PULL_FRACTION = 0.5



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


#: a sweep updates one shared score array in place, in list order: no declared writes (it runs
#: on one machine only)
SWEEP = Update(_always, _sweep, combine="sum")


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


def _delta(graph, n, alpha, tol, max_iter, threshold, in_memory, runtime, steps, progress):
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
            p, iters, err, done = _gauss_seidel(em, graph, pull_dir, n, outdeg,
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


def _gauss_seidel(em, graph, direction, n, outdeg, dangling, alpha, tol, max_iter, threshold, m,
                  steps, progress):
    """Phase 1 of delta PageRank. Returns (x summing to 1, sweeps, error, converged)."""
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
        st = em.dense((F, I, consts), SWEEP, direction)
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
