"""Classic pull PageRank (GAPBS's definition, Jacobi power iteration)."""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...iterator.edgemap import EdgeMap
from ...iterator.memory import track
from ...io.offsets import DEG_BLOCK, degrees_into
from .steps import (PULL, PUSH, _moves, _normalized, _note, _on_ranges, _out_degrees,
                    _sum_block)


@njit(inline="always")
def _new_score(acc, v, base, alpha):
    """base + alpha * (v's sums over acc's rows), zeroing them."""
    s = 0.0
    for t in range(acc.shape[0]):
        s += acc[t, v]
        acc[t, v] = 0.0
    return base + alpha * s


@njit(cache=True, nogil=True)
def _dangling_sum(p, dangling, lo, hi, out):
    """out[0] = the scores of the dangling vertices of [lo, hi), summed."""
    dsum = 0.0
    for v in range(lo, hi):
        if dangling[v]:
            dsum += p[v]
    out[0] = dsum


@njit(cache=True, nogil=True)
def _finish_range(acc, p, contrib, inv_deg, base, alpha, lo, hi, out):
    """Over [lo, hi): p <- base + alpha * (sum of acc's rows), in place; acc zeroed; contrib <-
    p / outdeg (0 for dangling vertices); out[0] = the L1 change."""
    err = 0.0
    for v in range(lo, hi):
        x = _new_score(acc, v, base, alpha)
        err += abs(x - p[v])
        p[v] = x
        contrib[v] = x * inv_deg[v]
    out[0] = err


def _finish_iteration(em, acc, p, contrib, dangling, inv_deg, alpha):
    """p <- (1-alpha)/n + alpha * (sum of acc's rows + dangling mass / n), in place; returns the
    L1 change; zeroes acc; contrib <- p / outdeg (0 for dangling vertices). Two passes split
    over em's compute threads (the dangling mass first: the new scores' base needs it)."""
    n = p.shape[0]
    dsum = float(_on_ranges(em, n, _dangling_sum, p, dangling)[0])
    base = (1.0 - alpha) / n + alpha * dsum / n
    return float(_on_ranges(em, n, _finish_range, acc, p, contrib, inv_deg, base, alpha)[0])


#: The contributions every edge reads at random (y = p / outdeg, or contrib) are held in float32
#: while the last iteration's L1 change is above SINGLE_UNTIL, as GAPBS holds its scores: half
#: the bytes, so kron22's 4.2 M vertices' row (16.8 MB) stays in a 32 MiB L3 where the float64 row
#: (33.6 MB) does not. Below it they are float64, so a run to a tight tolerance converges to the
#: float64 fixed point; the sums, the scores returned and the stop rule's change stay float64.
#: inf: float64 throughout (what a comparison with another float64 path needs).
SINGLE_UNTIL = 1e-5


def _single_slack(alpha) -> float:
    """What float32 contributions add to an iteration's reported L1 change, so that verify's bound
    (one exact power iteration moves the returned scores by at most alpha * error) still holds:
    each stored score and each contribution is off by at most 2^-24 of itself and the scores sum
    to ~1, which perturbs the next iteration by at most 3 * 2^-24 in L1 (see the tests)."""
    return 4.0 * 2.0 ** -24 / alpha


def single(err) -> bool:
    """Whether the rows read at random are float32 after an iteration that changed by err."""
    return err > SINGLE_UNTIL


def _contrib_row(n, err):
    """A new row for the contributions: float32 while single(err), else float64."""
    return np.empty(n, dtype=np.float32 if single(err) else np.float64)


#: _finish_from_offsets modes: y of the uniform start, one iteration's new scores, y -> scores
START, ITERATE, SCORES = 0, 1, 2


@njit(cache=True, nogil=True)
def _finish_from_offsets(acc, y, out, alpha, mode, base, offs, dd, lo, hi, res):
    """_finish_iteration over y = p / outdeg (p where the out-degree is 0: such a vertex is in no
    list, so its y is never summed), for the vertices of [lo, hi), the out-degrees taken from
    the compact offsets (io/offsets.py degrees_into, DEG_BLOCK vertices at a time): no score,
    contribution, 1/degree or dangling array. The new values go to `out`: y itself, or in mode
    SCORES a float64 row when y is float32 (acc's own row: acc is not read in that mode).
    res[0] = the L1 change (mode ITERATE), res[1] = the dangling mass of the new values.

    Each block is a few loops without a running sum, which the compiler vectorizes, and the
    block's changes and dangling scores are summed after them (steps._sum_block): one loop
    with the two sums in it ran one vertex at a time, 42 ms a pass over kron22's 4.2 M vertices
    on one core, against 21 ms now (a throwaway timing of the kernel alone)."""
    n = y.shape[0]
    err = 0.0
    dsum = 0.0
    deg = np.empty(DEG_BLOCK, dtype=np.int64)
    dm = np.empty(DEG_BLOCK)          # the degree, 1 where it is 0 (x = y * dm, y = x / dm)
    new = np.empty(DEG_BLOCK)
    part = np.empty(DEG_BLOCK)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        m = v1 - v0
        degrees_into(offs, dd, v0, v1, deg)
        for i in range(m):
            dm[i] = np.float64(max(deg[i], 1))
        yb = y[v0:v1]
        ob = out[v0:v1]
        if mode == START:
            for i in range(m):
                new[i] = 1.0 / n
        elif mode == SCORES:
            for i in range(m):
                new[i] = np.float64(yb[i]) * dm[i]
        else:
            for i in range(m):
                new[i] = 0.0
            for t in range(acc.shape[0]):
                ab = acc[t, v0:v1]
                for i in range(m):
                    new[i] += ab[i]
                    ab[i] = 0.0
            for i in range(m):
                new[i] = base + alpha * new[i]
                part[i] = abs(new[i] - np.float64(yb[i]) * dm[i])
            err += _sum_block(part, m)
        for i in range(m):
            part[i] = new[i] if deg[i] == 0 else 0.0
        dsum += _sum_block(part, m)
        if mode == SCORES:
            for i in range(m):
                ob[i] = new[i]
        else:
            for i in range(m):
                ob[i] = new[i] / dm[i]
    res[0] = err
    res[1] = dsum


def _finish(em, acc, y, out, alpha, mode, dmass, offs, dd):
    """_finish_from_offsets over every vertex, split over em's compute threads (a 10-iteration run
    makes 12 of these passes; BENCHMARKS.md, "Where the user sits", 2026-11-29). dmass: the
    dangling mass of y's scores on entry, of the new ones on return (a one-entry row). Returns
    the L1 change."""
    n = y.shape[0]
    base = (1.0 - alpha) / n + alpha * dmass[0] / n
    err, dsum, _ = _on_ranges(em, n, _finish_from_offsets, acc, y, out, alpha, mode, base, offs,
                              dd)
    dmass[0] = dsum
    return float(err)


def _classic_from_offsets(graph, n, alpha, tol, max_iter, in_memory, runtime, steps, progress,
                          handoff=None):
    """Pull PageRank over the out-lists of an undirected dataset: the out-degrees come from the
    offsets the iterator holds (EdgeMap.degree_view), and one row y = p / outdeg stands for the
    scores and their contributions (12 bytes per vertex with the row of sums while y is float32,
    16 after: SINGLE_UNTIL)."""
    with EdgeMap(graph, in_memory=in_memory, **runtime) as em:
        offs, dd = em.degree_view("out")
        err = np.inf
        y = track("scores / out-degree (float32 while the change is large)",
                  _contrib_row(n, err))
        acc = track("per-thread sums", np.zeros((1, n)))
        dmass = np.zeros(1)
        _finish(em, acc, y, y, alpha, START, dmass, offs, dd)
        iters = 0
        while iters < max_iter:
            st = em.dense((y, acc), PULL, "out", again=iters + 1 < max_iter)
            err = _finish(em, acc, y, y, alpha, ITERATE, dmass, offs, dd)
            if y.dtype == np.float32:
                err += _single_slack(alpha)
            iters += 1
            moved = _moves(handoff, st, iters, err, tol, max_iter)
            _note(steps, progress, st, iters, err, n)
            if err < tol or moved:
                break
            if y.dtype == np.float32 and not single(err):
                y = track("scores / out-degree (float64)", y.astype(np.float64))
        # the scores in float64: in place, or into acc's row (zero and unread by then)
        out = y if y.dtype == np.float64 else acc[0]
        _finish(em, acc, y, out, alpha, SCORES, dmass, offs, dd)
        y = out
    return _normalized(y), iters, err


def _classic(graph, n, alpha, tol, max_iter, in_memory, runtime, steps, progress, handoff=None):
    """handoff (gpu/handoff.py Handoff): asked after each iteration whether the rest goes to the
    GPU; the loop then ends there and returns the scores so far (normalized)."""
    if not graph.directed and getattr(graph, "edge_map_backend", None) is None:
        return _classic_from_offsets(graph, n, alpha, tol, max_iter, in_memory, runtime, steps,
                                     progress, handoff)
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
    contrib = _contrib_row(n, np.inf if step is PULL else 0.0)     # (pushes read p)
    np.multiply(p, inv_deg, out=contrib)
    track("scores, contributions (float32 while the change is large), 1/degree", p, contrib,
          inv_deg)
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
            st = em.dense(state, step, direction, again=iters + 1 < max_iter)
            # one pass: new scores in place, the L1 change, acc zeroed, next contributions
            err = _finish_iteration(em, acc, p, contrib, dangling, inv_deg, alpha)
            if contrib.dtype == np.float32:
                err += _single_slack(alpha)
            iters += 1
            moved = _moves(handoff, st, iters, err, tol, max_iter)
            _note(steps, progress, st, iters, err, n)
            if err < tol or moved:
                break
            if contrib.dtype == np.float32 and not single(err):
                contrib = track("contributions (float64)", contrib.astype(np.float64))
                if step is PULL:
                    state = (contrib, acc)
    return _normalized(p), iters, err
