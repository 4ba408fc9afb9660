"""Delta PageRank (Graphene §4.7, Blaze SC'22): Gauss-Seidel sweeps while the changes are dense,
then pushes of the large pending changes (see the package's text for the definitions and the stop
rule).

State, per vertex (the IO buffers apart): 16 bytes of float64 rows F, the offsets (about 2 bytes
per column partition, io/offsets.py: the degrees are read from them, EdgeMap.degree_view), and
- during the sweeps, the in- and out-degrees in a byte (one for an undirected dataset) and a
  byte counting a split list's IDs seen, and 12 bytes for each vertex of a degree of 255 or
  more: 20-21 bytes on an undirected 1x1 grid, 22-23 on a 2x2 one;
- during the pushes, each active vertex's share in float32 and its flag: 23 bytes there,
  and 8 per compute thread where memory has room for per-thread rows of pushed sums (else the
  pushes add into the pending changes atomically).
Every pass between supersteps is one numba loop: no n-sized numpy temporaries.

The sweeps hold y = x / outdeg (x where the out-degree is 0: such a vertex is in no in-list, so
its y is never summed) instead of a score and a contribution row, and one row holding first the
pieces' partial sums of a split list, then each vertex's change; the pushes hold the scores p and
the pending changes r in the same two rows.
"""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...iterator.atomics import atomic_add_acq_rel as _add_ar, atomic_fadd as _fadd
from ...iterator.kernels import gather_sum, looks_ahead
from ...io.offsets import DEG_BLOCK, deg_at, degrees_into
from ...iterator.edgemap import EdgeMap, Update
from ...iterator.memory import memory_available, track
from . import pull
from .pull import _single_slack
from .steps import _always, _moves, _note, _on_ranges, _pushing, _ranges, _sum_block

#: delta PageRank: a vertex pushes when |r[v]| > DELTA_THRESHOLD * mean |r|. Held mass is then at most
#: threshold * ||r||_1, so each superstep still shrinks ||r||_1 by at least alpha + threshold*(1-alpha)
#: and the stop rule is always reachable; 0.1 skips the many low-residual vertices of skewed graphs.
DELTA_THRESHOLD = 0.1


#: delta PageRank pulls (over in-lists, or the out-lists of an undirected dataset) instead of pushing
#: when the active vertices' out-edges exceed this fraction of |E|: pulling reads every list but
#: avoids scattered read-modify-writes (~1.5x faster per edge here), so it wins for dense supersteps.
PULL_FRACTION = 0.5


#: rows of the float state F: sweeps (Y: x / outdeg; PC: a split list's partial sums, then the
#: vertex's change), then pushes (P: scores moved so far; R: pending changes)
Y, PC = 0, 1
P, R = 0, 1


@njit(inline="always")
def _score(y, d, v):
    """x[v] from y and v's out-degree d."""
    return y[v] * d if d > 0 else y[v]


#: a vertex whose in- or out-degree is at least this keeps its degrees and its count of IDs seen
#: in a sorted table of its own (_sweep's `big`), the others in a byte each
BIG = 255


@looks_ahead
@njit(cache=True)
def _sweep(v, nbrs, wts, tid, state):
    """Gauss-Seidel: x[v] = base + alpha * sum(y[u] over v's in-list), published at once (y: row
    Y of F, or its float32 half: _single_y). d8[v] is v's in-degree and od8[v] its out-degree
    (one array for an undirected dataset), in a byte: a split list's pieces count the IDs seen
    in `seen` (a byte) and the piece completing the count finishes v. A vertex with a degree of
    BIG or more (d8[v] == BIG) has its degrees in `big` (rows: vertex, in-degree, out-degree;
    sorted by vertex) and its count in bigc. Nothing here reads the offsets: a sweep calls this
    once per list piece, and the lookups of a degree in the compact offsets took a third of the
    sweep on Kronecker 20 on a 2x2 grid. wts: the IDs AHEAD entries on (looks_ahead), whose y
    is asked for as the sum goes."""
    F, y, seen, d8, od8, big, bigc, consts = state
    s = gather_sum(y, nbrs, wts)
    k = np.int64(nbrs.shape[0])
    d = np.int64(d8[v])
    if d == BIG:
        j = _find(big, v)
        d = np.int64(big[1, j])
        if k != d:
            _fadd(F[PC], v, s)
            if np.int64(_add_ar(bigc, j, k)) + k != d:
                return
            s = F[PC, v]
            bigc[j] = 0
        od = np.int64(big[2, j])
    else:
        if k != d:
            # one piece of a list split over chunks: add it; the piece completing the count
            # finishes v
            _fadd(F[PC], v, s)
            if np.int64(_add_ar(seen, v, k)) + k != d:
                return
            s = F[PC, v]
            seen[v] = 0          # (cleared for the next sweep)
        od = np.int64(od8[v])
    new = consts[0] + consts[1] * s
    F[PC, v] = abs(new - _score(y, od, v))
    y[v] = new / od if od > 0 else new


@njit
def _find(big, v):
    """The column of vertex v in big (row 0 sorted, v in it)."""
    lo = 0
    hi = big.shape[1] - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.int64(big[0, mid]) < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _bytes_of(indeg, din_dd, outdeg, dout_dd, same, d8, od8, lo, hi, out):
    """Over [lo, hi): d8[v] = v's in-degree and od8[v] its out-degree, both BIG when either is
    BIG or more; od8 may be d8 itself (an undirected dataset: the same degrees). out[0] = how
    many vertices of [lo, hi) have BIG (their columns of `big`: _big_fill)."""
    k = 0
    dout = np.empty(DEG_BLOCK, dtype=np.int64)
    din = dout if same else np.empty(DEG_BLOCK, dtype=np.int64)   # same: one degree array
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        if not same:
            degrees_into(indeg, din_dd, v0, v1, din)
        degrees_into(outdeg, dout_dd, v0, v1, dout)
        for v in range(v0, v1):
            a = din[v - v0]
            b = dout[v - v0]
            if a >= BIG or b >= BIG:
                od8[v] = BIG
                d8[v] = BIG
                k += 1
            else:
                od8[v] = b
                d8[v] = a
    out[0] = k


@njit(cache=True, nogil=True)
def _big_fill(indeg, din_dd, outdeg, dout_dd, d8, big, start, lo, hi):
    """The columns of big (vertex, in-degree, out-degree) of [lo, hi)'s vertices of d8 BIG, from
    column `start` on (sorted by vertex: the ranges' starts are their counts' prefix sums)."""
    k = start
    for v in range(lo, hi):
        if d8[v] == BIG:
            big[0, k] = v
            big[1, k] = deg_at(indeg, din_dd, v)
            big[2, k] = deg_at(outdeg, dout_dd, v)
            k += 1


def _degree_bytes(em, indeg, din_dd, outdeg, dout_dd, d8, od8, dtype):
    """d8, od8 (_bytes_of) and the table `big` of the vertices of a degree of BIG or more, both
    passes split over em's compute threads by vertex ranges. Returns big."""
    n = d8.shape[0]
    b = _ranges(n, max(1, em.threads))
    counts = np.zeros((len(b) - 1, 3))
    same = indeg is outdeg and din_dd is dout_dd
    em.on_threads(lambda t: _bytes_of(indeg, din_dd, outdeg, dout_dd, same, d8, od8, b[t],
                                      b[t + 1], counts[t]))
    starts = np.zeros(len(b), dtype=np.int64)
    np.cumsum(counts[:, 0].astype(np.int64), out=starts[1:])
    big = track("degrees of the vertices of high degree",
                np.zeros((3, int(starts[-1])), dtype=dtype))
    if big.shape[1]:
        em.on_threads(lambda t: _big_fill(indeg, din_dd, outdeg, dout_dd, d8, big, starts[t],
                                          b[t], b[t + 1]))
    return big


#: a sweep updates one shared score array in place, in list order: no declared writes (it runs
#: on one machine only)
SWEEP = Update(_always, _sweep, combine="sum", reads=1)


def _single_y(F):
    """Row Y's first half as float32 (y while the sweeps' change is large: pull.SINGLE_UNTIL):
    the row the sweeps read at random in half the bytes, in F's own memory."""
    return F[Y].view(np.float32)[:F.shape[1]]


@njit(cache=True, nogil=True)
def _widen_range(row, lo, hi):
    """row[v] = the float32 value v of row's first half, for v in [lo, hi): they land on the
    bytes of float32 values [2 lo, 2 hi), which the caller has widened already (or are past n)."""
    half = row.view(np.float32)
    for v in range(hi - 1, lo - 1, -1):
        row[v] = np.float64(half[v])


#: _widen's ranges below this many values run on one thread
WIDEN_SERIAL = 1 << 16


def _widen(em, row):
    """The float32 values in row's first half (_single_y) -> float64 in place. Value v lands on
    the bytes of float32 values 2v and 2v+1, so the values of [ceil(n/2), n) go first (onto
    bytes past the values), then the half below them (onto values of the range before), and so
    on: a range [lo, hi) with hi <= 2 lo reads bytes below those it writes, so each range splits
    over em's compute threads; the last WIDEN_SERIAL values go from the top down on one."""
    hi = row.shape[0]
    while hi > WIDEN_SERIAL:
        lo = (hi + 1) // 2
        b = lo + _ranges(hi - lo, max(1, em.threads))
        em.on_threads(lambda t: _widen_range(row, b[t], b[t + 1]))
        hi = lo
    _widen_range(row, 0, hi)


@njit(inline="always")
def _degree_rows(same):
    """The block rows of out- and in-degrees of the passes below: one row when the in- and
    out-degrees are one (same: an undirected dataset)."""
    dout = np.empty(DEG_BLOCK, dtype=np.int64)
    return dout, (dout if same else np.empty(DEG_BLOCK, dtype=np.int64))


@njit(inline="always")
def _in_out(indeg, outdeg, diff, same, v0, v1, din, dout):
    """dout, din = the out- and in-degrees of vertices v0..v1 (diff: their grids, in then out);
    the in-degrees are not decoded again when they are the out-degrees."""
    degrees_into(outdeg, diff[1], v0, v1, dout)
    if not same:
        degrees_into(indeg, diff[0], v0, v1, din)


@njit(cache=True, nogil=True)
def _tail_sums(F, y, indeg, outdeg, base, diff, same, lo, hi, out):
    """A sweep's tail, first pass over [lo, hi): the vertices without in-lists (nothing was read
    for them) take `base`; out[:2] = (sum of the changes, sum of the scores). Loops without a
    running sum, and the block's rows summed after them (steps._sum_block says why)."""
    ch = F[PC]
    delta = 0.0
    sigma = 0.0
    dout, din = _degree_rows(same)
    odf = np.empty(DEG_BLOCK)         # the out-degree, 1 where it is 0 (a score is y * odf)
    at = np.empty(DEG_BLOCK)          # base / odf: a vertex's y if it has no in-list
    part = np.empty(DEG_BLOCK)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        m = v1 - v0
        _in_out(indeg, outdeg, diff, same, v0, v1, din, dout)
        yb = y[v0:v1]
        cb = ch[v0:v1]
        for i in range(m):
            odf[i] = np.float64(max(dout[i], 1))
        for i in range(m):              # (a loop of its own: its divisions 4 at a time)
            at[i] = base / odf[i]
        for i in range(m):              # selects, not branches (_tail_scale says why)
            z = din[i] == 0
            cb[i] = abs(base - yb[i] * odf[i]) if z else cb[i]
            yb[i] = at[i] if z else yb[i]
        for i in range(m):
            part[i] = yb[i] * odf[i]
        delta += _sum_block(cb, m)
        sigma += _sum_block(part, m)
    out[0] = delta
    out[1] = sigma


@njit(cache=True, nogil=True)
def _tail_scale(F, y, outdeg, inv, cut, diff, lo, hi, out):
    """A sweep's tail, second pass over [lo, hi): rescale by inv and zero the changes (the next
    sweep's partial sums); out[:] = (out-edges of the vertices whose change exceeds cut, how
    many they are, dangling mass)."""
    ch = F[PC]
    act_edges = 0
    act = 0
    dmass = 0.0
    dout = np.empty(DEG_BLOCK, dtype=np.int64)
    part = np.empty(DEG_BLOCK)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        m = v1 - v0
        degrees_into(outdeg, diff[1], v0, v1, dout)
        yb = y[v0:v1]
        cb = ch[v0:v1]
        # selects, not branches: whether a vertex's change passes the cut follows no pattern,
        # so a branch on it mispredicts about half the time (the counts are integers: the
        # compiler may reorder their sums and vectorizes these loops)
        for i in range(m):
            a = cb[i] > cut
            act_edges += dout[i] if a else 0
            act += 1 if a else 0
        for i in range(m):
            cb[i] = 0.0
            yb[i] *= inv
        for i in range(m):
            part[i] = yb[i] if dout[i] == 0 else 0.0
        dmass += _sum_block(part, m)
    out[0] = act_edges
    out[1] = act
    out[2] = dmass


def _same(indeg, outdeg, diff):
    """Whether the in- and out-degrees are one (an undirected dataset): the passes then decode
    one of them."""
    return indeg is outdeg and diff[0] is diff[1]


def _sweep_tail(em, F, y, indeg, outdeg, diff, base, c, thr_per_delta):
    """After a sweep: set the vertices without in-lists to `base`, rescale to sum 1 and zero the
    changes, in two passes, each split over the compute threads (one thread took 60 ms per
    pass pair on kron22's 4.2 M vertices). Returns (error, out-edges of the vertices whose change
    exceeds thr_per_delta * delta and how many they are, dangling mass)."""
    n = y.shape[0]
    delta, sigma, _ = _on_ranges(em, n, _tail_sums, F, y, indeg, outdeg, base, diff,
                                 _same(indeg, outdeg, diff))
    act_edges, act, dmass = _on_ranges(em, n, _tail_scale, F, y, outdeg, 1.0 / sigma,
                                       thr_per_delta * delta, diff)
    return (delta + c * abs(sigma - 1.0)) / sigma, act_edges, int(act), dmass


@njit(cache=True, nogil=True)
def _start_counts(indeg, outdeg, diff, same, lo, hi, out):
    """out[:] = how many vertices of [lo, hi) have no in-edges, no in- and no out-edges, and
    in-edges but no out-edges (_start)."""
    nz = 0
    dz = 0
    dnz = 0
    dout, din = _degree_rows(same)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        _in_out(indeg, outdeg, diff, same, v0, v1, din, dout)
        for v in range(v0, v1):
            od = dout[v - v0]
            if din[v - v0] == 0:
                nz += 1
                if od == 0:
                    dz += 1
            elif od == 0:
                dnz += 1
    out[0] = nz
    out[1] = dz
    out[2] = dnz


@njit(cache=True, nogil=True)
def _start_fill(y, indeg, outdeg, b, rest, diff, same, lo, hi, out):
    """y over [lo, hi) of a start with score b without in-edges and `rest` with them; out[0] =
    the dangling mass."""
    dmass = 0.0
    dout, din = _degree_rows(same)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        _in_out(indeg, outdeg, diff, same, v0, v1, din, dout)
        for v in range(v0, v1):
            x = b if din[v - v0] == 0 else rest
            od = dout[v - v0]
            if od > 0:
                y[v] = x / od
            else:
                y[v] = x
                dmass += x
    out[0] = dmass


def _start(em, y, indeg, outdeg, diff, alpha, lumped):
    """y of a start vector summing to 1: uniform, or (lumped) one that already holds the fixed
    point's split of mass between the vertices without in-edges and the rest. Every vertex
    without in-edges has the same exact score b = (1-alpha)/n + alpha*D/n (D: total dangling
    mass); guessing the rest's dangling share s as uniform gives
    b = ((1-alpha) + alpha*s) / (n - alpha*|Z & dangling| + alpha*s*|Z|), and the rest start
    uniform. Starting at 1/n instead leaves that split to converge at about rate alpha: on
    Kronecker scale 22 (43% isolated vertices) 1e-4 takes 5 sweeps from here, 9 from 1/n.
    (A start weighted by in-degree was tried: closer after one sweep, but no fewer sweeps to
    1e-4.) Both passes are split over em's compute threads. Returns the dangling mass."""
    n = y.shape[0]
    same = _same(indeg, outdeg, diff)
    nz, dz, dnz = (int(x) for x in _on_ranges(em, n, _start_counts, indeg, outdeg, diff, same))
    b = rest = 1.0 / n
    if lumped and nz < n:
        s = dnz / (n - nz)
        b = ((1.0 - alpha) + alpha * s) / (n - alpha * dz + alpha * s * nz)
        rest = (1.0 - nz * b) / (n - nz)
    return float(_on_ranges(em, n, _start_fill, y, indeg, outdeg, b, rest, diff, same)[0])


@njit(cache=True)
def _pull_share(v, nbrs, wts, tid, state):
    """r[v] += alpha * sum of sh[u] over this chunk of v's in-list (one atomic add per chunk)."""
    sh, r, consts = state
    s = 0.0
    for i in range(len(nbrs)):
        s += sh[np.int64(nbrs[i])]
    _fadd(r, v, consts[0] * s)


@njit(cache=True)
def _push_share(v, nbrs, wts, tid, state):
    """r[u] += alpha * sh[v] for every out-neighbour u (atomic: no per-thread rows)."""
    sh, r, consts = state
    x = consts[0] * np.float64(sh[v])
    for i in range(len(nbrs)):
        _fadd(r, np.int64(nbrs[i]), x)


@njit(cache=True)
def _push_rows(v, nbrs, wts, tid, state):
    """acc[tid, u] += alpha * sh[v] for every out-neighbour u (per-thread rows, where memory
    allows them: an atomic add per edge costs ~4 ns more here)."""
    sh, acc, consts = state
    x = consts[0] * np.float64(sh[v])
    row = acc[tid]
    for i in range(len(nbrs)):
        row[np.int64(nbrs[i])] += x


#: a delta superstep: the shares sh (x / outdeg of what moves) added to r (or to per-thread rows
#: of sums), pulled or pushed; the pieces' increments add up (a cluster merges them as sums)
PULL_SHARE = Update(_always, _pull_share, combine="sum", writes=(1,), reads=0)
PUSH_SHARE = Update(_pushing, _push_share, combine="sum", writes=(1,), reads=1)
PUSH_ROWS = Update(_pushing, _push_rows, combine="sum", writes=(1,))


@njit(cache=True, nogil=True)
def _scores_range(F, outdeg, diff, lo, hi, out):
    """y -> x in place (row P) over [lo, hi); out[0] = the dangling mass there."""
    y = F[Y]
    dmass = 0.0
    dout = np.empty(DEG_BLOCK, dtype=np.int64)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        degrees_into(outdeg, diff[1], v0, v1, dout)
        for v in range(v0, v1):
            d = dout[v - v0]
            if d > 0:
                y[v] *= d
            else:
                dmass += y[v]
    out[0] = dmass


def _scores_from_y(em, F, outdeg, diff):
    """y -> x in place (row P), split over em's compute threads; returns the dangling mass."""
    return float(_on_ranges(em, F.shape[1], _scores_range, F, outdeg, diff)[0])


@njit(cache=True)
def _settle(F, acc, add, first):
    """r += add (the uniform share of what dangling vertices moved; on the first step also the
    base minus p) and the rows of acc (zeroed); returns (||r||_1, sum(p + r))."""
    p, r = F[P], F[R]
    rabs = 0.0
    total = 0.0
    for v in range(p.shape[0]):
        x = r[v] + add
        for t in range(acc.shape[0]):
            x += acc[t, v]
            acc[t, v] = 0.0
        if first:
            x -= p[v]
        r[v] = x
        rabs += abs(x)
        total += p[v] + x
    return rabs, total


@njit(cache=True)
def _select(F, sh, mask, outdeg, diff, cut):
    """Move the pending change of every vertex with |r| > cut into p: sh = r / outdeg in float32
    (what its out-neighbours get; exactly sh * outdeg moves, the rounding stays in r), or for a
    dangling vertex all of r (spread uniformly by the caller). Returns (active, their out-edges,
    dangling mass moved)."""
    p, r = F[P], F[R]
    act = 0
    act_edges = 0.0
    dmove = 0.0
    for v in range(p.shape[0]):
        rv = r[v]
        sh[v] = 0.0
        mask[v] = 0
        if abs(rv) <= cut:
            continue
        act += 1
        d = deg_at(outdeg, diff[1], v)
        if d > 0:
            sh[v] = rv / d
            m = np.float64(sh[v]) * d
            if sh[v] != 0.0:
                mask[v] = 1
            act_edges += d
        else:
            m = rv
            dmove += m
        p[v] += m
        r[v] -= m
    return act, act_edges, dmove


def _delta(graph, n, alpha, tol, max_iter, threshold, in_memory, runtime, steps, progress,
           handoff=None):
    """handoff (gpu/handoff.py Handoff): asked after each sweep or superstep whether the rest goes
    to the GPU; the run then ends there with the scores so far (normalized: p + r after pushes)."""
    # datasets that can pull: undirected (in-lists == out-lists: no second copy to load), or
    # in-edge partitions
    pull_dir = "out" if not graph.directed else ("in" if graph.in_partitions is not None else None)
    m = max(1, graph.num_edges)
    with EdgeMap(graph, pull=pull_dir == "in", in_memory=in_memory, **runtime) as em:
        # degrees from the compact offsets the iterators hold (no degree array): diff holds
        # their grids (io/offsets.py deg_at), (in-degrees', out-degrees')
        outdeg, d_out = em.degree_view("out")
        indeg, d_in = em.degree_view(pull_dir) if pull_dir is not None else (outdeg, d_out)
        diff = (d_in, d_out)
        F = track("scores and changes (2 float64)", np.zeros((2, n)))
        iters, done = 0, False
        if pull_dir is not None and em.local:
            # phase 1: Gauss-Seidel sweeps while the changes are dense (a sweep updates one
            # shared score array in place, in list order: not a superstep a cluster can split)
            iters, err, done = _gauss_seidel(em, F, indeg, outdeg, diff, pull_dir, n, alpha, tol,
                                             max_iter, threshold, m, steps, progress, handoff)
        else:     # (a cluster: the sweeps' start, then only delta steps; no pull: uniform)
            _start(em, F[Y], indeg, outdeg, diff, alpha, pull_dir is not None)
        if not done:
            iters, err = _pushes(em, F, outdeg, diff, pull_dir, n, alpha, tol, max_iter,
                                 threshold, m, iters, steps, progress, handoff)
    # the scores, normalized to sum 1, in F's first row (p + r after pushes): F shrinks to it in
    # place when nothing else refers to F, else the row is copied
    _normalize(F, not done)
    try:
        F.resize(n, refcheck=True)          # row 0 is the buffer's first half
    except ValueError:
        F = F[P].copy()
    return F, iters, err


def _pushes(em, F, outdeg, diff, pull_dir, n, alpha, tol, max_iter, threshold, m, iters, steps,
            progress, handoff=None):
    """Phase 2, from F's row Y (y of the current x): the pending changes r = one power iteration
    of x minus x (every list streamed once: the shares are y itself), then delta supersteps, in
    which only the vertices with a large pending change pass it on. Returns (iterations, error)."""
    consts = np.array([alpha])
    # pushes add into per-thread rows where memory has room for them, else atomically into r
    T = em.threads
    if T > 1 and em.local and memory_available() >= 4 * T * 8 * n:
        acc, push = track("per-thread sums", np.zeros((T, n))), PUSH_ROWS
    else:
        acc, push = np.zeros((0, n)), PUSH_SHARE
    into = acc if acc.shape[0] else F[R]
    st = (em.dense((F[Y], F[R], consts), PULL_SHARE, pull_dir) if pull_dir is not None else
          em.dense((F[Y], into, consts), push))
    dmass = _scores_from_y(em, F, outdeg, diff)
    rabs, total = _settle(F, acc, (1.0 - alpha) / n + alpha * dmass / n, True)
    err = _delta_error(rabs, total)
    iters += 1
    moved = _moves(handoff, st, iters, err, tol, max_iter)
    _note(steps, progress, st, iters, err, n)
    if err < tol or iters >= max_iter or moved:
        return iters, err
    sh = track("shares (float32)", np.zeros(n, dtype=np.float32))
    mask = track("active flags", np.zeros(n, dtype=np.uint8))
    while err >= tol and iters < max_iter:
        act, act_edges, dmove = _select(F, sh, mask, outdeg, diff, threshold * rabs / n)
        if pull_dir is not None and act_edges > PULL_FRACTION * m:
            st = em.dense((sh, F[R], consts), PULL_SHARE, pull_dir)
        else:
            st = em.masked((sh, into, consts), push, mask)
        rabs, total = _settle(F, acc, alpha * dmove / n, False)
        err = _delta_error(rabs, total)
        iters += 1
        moved = _moves(handoff, st, iters, err, tol, max_iter)
        _note(steps, progress, st, iters, err, act)
        if moved:
            break
    return iters, err


def _normalize(F, add_r):
    """Row P <- (P + R when add_r) / its sum (numpy's pairwise sum: exact to rounding)."""
    p = F[P]
    if add_r:
        p += F[R]
    p /= p.sum()


def _gauss_seidel(em, F, indeg, outdeg, diff, direction, n, alpha, tol, max_iter, threshold, m,
                  steps, progress, handoff=None):
    """Phase 1 of delta PageRank, in F (row Y on return: y of x summing to 1; row PC zero).
    Returns (sweeps, error, done): done when converged, at max_iter, or moving to the GPU
    (handoff); the scores are then in row P."""
    # the sweeps' bytes per vertex (_sweep): a split list's count of IDs seen, the in- and
    # out-degrees (one array when they are the same: an undirected dataset); the vertices of a
    # degree of BIG or more in a table (Kronecker scale 24 edge factor 64: 7.5% of them)
    seen = track("piece counts", np.zeros(n, dtype=np.uint8))
    d8 = track("degrees in a byte", np.empty(n, dtype=np.uint8))
    same = _same(indeg, outdeg, diff)
    od8 = d8 if same else track("out-degrees in a byte", np.empty(n, dtype=np.uint8))
    narrow = n < (1 << 32) and em.graph.num_edges < (1 << 32)
    big = _degree_bytes(em, indeg, diff[0], outdeg, diff[1], d8, od8,
                        np.uint32 if narrow else np.int64)
    k = big.shape[1]
    bigc = track("piece counts of the vertices of high degree",
                 np.zeros(k, dtype=np.uint32 if narrow else np.int64))
    # y in float32 (row Y's first half) while the change is above SINGLE_UNTIL, as pull
    # PageRank's; the reported error then carries float32's rounding bound
    y = _single_y(F) if pull.single(np.inf) else F[Y]
    dmass = _start(em, y, indeg, outdeg, diff, alpha, True)
    consts = np.zeros(2)
    c = max(1.0, (1.0 - alpha) / alpha)
    sweeps, err = 0, np.inf
    while sweeps < max_iter:
        base = (1.0 - alpha) / n + alpha * dmass / n
        consts[:] = (base, alpha)
        st = em.dense((F, y, seen, d8, od8, big, bigc, consts), SWEEP,
                      direction, again=sweeps + 1 < max_iter)
        # vertices without in-lists (nothing was read for them) take `base`; then rescale to sum
        # 1: Gauss-Seidel does not conserve the total mass, and without the rescaling that mode
        # would converge only at rate alpha (the fixed point is only defined up to this scale)
        err, act_edges, act, dmass = _sweep_tail(em, F, y, indeg, outdeg, diff, base, c,
                                                  threshold / n)
        if y.dtype == np.float32:
            err += _single_slack(alpha)
        sweeps += 1
        # a move to the GPU (--device auto) ends the sweeps as convergence would
        moved = _moves(handoff, st, sweeps, err, tol, max_iter)
        _note(steps, progress, st, sweeps, err, act)
        done = err < tol or sweeps >= max_iter or moved
        sparse = act_edges <= PULL_FRACTION * m
        if y.dtype == np.float32 and (not pull.single(err) or done or sparse):
            _widen(em, F[Y])                 # float64 from here on (and for what follows)
            y = F[Y]
            if sparse and not done and not pull.single(tol):
                # one float64 sweep first: pushes would take float32's rounding (~1e-7) off at
                # rate alpha per superstep, where a sweep takes it at once
                continue
        if done:
            _scores_from_y(em, F, outdeg, diff)
            return sweeps, err, True
        if sparse:                           # the changes are sparse now: switch to pushes
            break
    return sweeps, err, False


def _delta_error(rabs, total):
    """(||r||_1 + |sum(p + r) - 1|) / sum(p + r): bounds the L1 change one more power iteration would
    make to the normalized result (p + r) / sum(p + r); equals ||r||_1 when nothing is held back."""
    return (rabs + abs(total - 1.0)) / total
