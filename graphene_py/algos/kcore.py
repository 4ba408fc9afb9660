"""k-core decomposition: the core number of every vertex, by iterative peeling (Graphene §4.7);
or, with `membership_only=True`, just the K-core for one K (what the C++ prototype computes).

Computes: `core_number` int64[n]: the largest k such that the vertex belongs to the k-core (the
maximal subgraph in which every vertex has degree >= k). Degree = in + out on directed datasets
(NetworkX's convention for DiGraph), the number of neighbours on undirected ones; self-loops and
duplicate edges were dropped at partition time. With `k=K` also `in_k_core` (bool[n], core >= K)
and `k_core_size`.
`membership_only=True` (needs k; CLI `--k K --membership-only`): only `in_k_core` and
`k_core_size`; `core_number` and `max_core` are None.
Returns: KCoreResult(core_number, max_core, k, in_k_core, k_core_size, membership_only, rounds,
[kept_lists], supersteps, seconds).

Algorithm: Graphene's peeling ("remove vertices with degree < k, update the degree array"), run for
*all* k in one pass (the C++ prototype handles one k per run): starting from k = min degree, the
vertices of degree <= k are removed in rounds; each round is one superstep that streams the removed
vertices' lists and decrements their alive neighbours' degrees. Decrements go to per-thread buffers
plus per-thread "touched" lists (indexed by compute thread id: no atomics), so merging costs
O(touched), not O(n): vertices whose degree dropped to <= k form the next round's frontier. When a
round removes nothing, k jumps to the minimum degree among the vertices still alive. Removed
vertices with no alive neighbours left (degree 0 by now) are not read at all. The removed
vertices of level k all get core number k (Matula-Beck / Batagelj-Zaversnik peeling order).
The dense cores of power-law graphs need one round per level at the end (hundreds of tiny
supersteps): once the alive vertices hold at most `tail_edges` incidences (default n, so memory
stays O(|V|)), their lists are read once and the peeling finishes in memory (Batagelj-Zaversnik
bucket peeling); `tail_edges=0` peels to the end on the SSD path.
Directed datasets need both directions: the frontier's out-lists and in-lists are streamed. Without
in-edge partitions a round instead streams every alive vertex's out-list (Frontier.all) and counts,
per vertex, its removed out-neighbours (one full pass per round; partition with --in-edges).

One k (`membership_only`): round 1 removes every vertex of degree 1..K-1 at once (one superstep
over a mask frontier: sparse IO, only those lists' blocks); each later round streams only the lists
of the vertices that the previous round took from degree K to K-1 (a queue frontier), until a round
takes none. Kernels skip neighbours already below K (the degrees are read-only during a superstep)
and count decrements in per-thread rows with per-thread bitmaps of the touched vertices; a serial
merge applies them, so each vertex crosses K exactly once. On the SSD path round 1 also keeps in RAM
the lists of the vertices of degree just above K (`kept_lists` of them: at most 1/16 of round 1's
edges and n entries; their blocks lie among the ones read anyway): when such a vertex drops, its
list is peeled at once in memory (cascading through other kept lists) instead of costing another
round of small random reads; round 2 on Kronecker graphs shrinks from ~5,000 lists to a handful.
`rounds` counts the IO rounds. After the last one, degree >= K <=> in the K-core (the degree of a
vertex in the K-core is then its degree inside the K-core).
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..errors import GrapheneError
from ..iterator.atomics import atomic_add as _add

from .common import Result


class KCoreResult(Result):
    MAIN = "core_number"


# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _removing(v, state):
    return state[0][v] == 1


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _decrement(v, nbrs, wts, tid, state):
    """Every alive neighbour u of a removed vertex v loses one degree (per-thread buffers)."""
    status, dec, touched, ntouched = state
    drow = dec[tid]
    trow = touched[tid]
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if status[u] == 0:
            if drow[u] == 0:
                trow[ntouched[tid]] = u
                ntouched[tid] += 1
            drow[u] += 1


@njit(cache=True)
def _decrement_both(v, nbrs, wts, tid, state):
    """Out-edges only, every vertex streamed: a removed v decrements its alive out-neighbours (edge
    v->u counts in u's in-degree); an alive v loses one degree per removed out-neighbour."""
    status, dec, touched, ntouched = state
    drow = dec[tid]
    trow = touched[tid]
    if status[v] == 1:
        for i in range(len(nbrs)):
            u = np.int64(nbrs[i])
            if status[u] == 0:
                if drow[u] == 0:
                    trow[ntouched[tid]] = u
                    ntouched[tid] += 1
                drow[u] += 1
    elif status[v] == 0:
        c = 0
        for i in range(len(nbrs)):
            if status[np.int64(nbrs[i])] == 1:
                c += 1
        if c > 0:
            if drow[v] == 0:
                trow[ntouched[tid]] = v
                ntouched[tid] += 1
            drow[v] += c


@njit(cache=True)
def _apply(deg, status, dec, touched, ntouched, k, core, removing):
    """Removing vertices become dead (status 2) with core k; decrements applied; returns the alive
    touched vertices whose degree is now <= k (the next frontier), marked status 1."""
    for i in range(removing.shape[0]):
        v = removing[i]
        status[v] = 2
        core[v] = k
    cnt = 0
    for t in range(dec.shape[0]):
        cnt += ntouched[t]
    out = np.empty(cnt, dtype=np.int64)
    m = 0
    for t in range(dec.shape[0]):
        for j in range(ntouched[t]):
            u = touched[t, j]
            deg[u] -= dec[t, u]
            dec[t, u] = 0
            if status[u] == 0 and deg[u] <= k:
                status[u] = 1
                out[m] = u
                m += 1
        ntouched[t] = 0
    return out[:m]


@njit(cache=True)
def _next_level(deg, status, alive):
    """Compact `alive` to the vertices still alive; return (alive, min degree among them)."""
    m = 0
    lo = np.iinfo(np.int64).max
    for i in range(alive.shape[0]):
        v = alive[i]
        if status[v] == 0:
            alive[m] = v
            m += 1
            if deg[v] < lo:
                lo = deg[v]
    return alive[:m], lo


@njit(cache=True)
def _select(deg, status, alive, k):
    m = 0
    for i in range(alive.shape[0]):
        if deg[alive[i]] <= k:
            m += 1
    out = np.empty(m, dtype=np.int64)
    m = 0
    for i in range(alive.shape[0]):
        v = alive[i]
        if deg[v] <= k:
            status[v] = 1
            out[m] = v
            m += 1
    return out


# ---------------------------------------------------------------------------------------------
def _open(graph, direction, in_memory, runtime):
    from ..iterator import IoIterator
    return IoIterator(graph, direction, in_memory=in_memory, weights=False, **runtime)


def _frontier():
    from ..iterator import Frontier
    return Frontier


def run(graph, *, device="cpu", in_memory=False, k=None, membership_only=False, tail_edges=None,
        **runtime) -> KCoreResult:
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    if k is not None and int(k) < 0:
        raise GrapheneError(f"k must be >= 0 (got {k})")
    t0 = time.perf_counter()
    if membership_only:
        if k is None:
            raise GrapheneError("membership_only needs k (which core to compute: --k K)")
        return _run_membership(graph, k, in_memory, runtime, progress, t0)
    Frontier = _frontier()
    n = graph.num_vertices
    steps = []
    has_in = graph.in_partitions is not None
    deg = graph.degrees("out")
    if graph.directed:
        if has_in:
            deg = deg + graph.degrees("in")
            dirs = ["out", "in"]
        else:
            dirs = ["out"]
            deg = deg + _in_degrees(graph, in_memory, runtime, steps, progress)
    else:
        dirs = ["out"]
    full_scan = graph.directed and not has_in
    core = np.zeros(n, dtype=np.int64)
    status = np.zeros(n, dtype=np.uint8)     # 0 alive, 1 being removed this round, 2 removed
    rounds = 0
    its = [_open(graph, d, in_memory, runtime) for d in dirs] if n else []
    try:
        T = max([it.threads for it in its] or [1])
        dec = np.zeros((T, n), dtype=np.int64)
        touched = np.empty((T, n), dtype=np.int64)
        ntouched = np.zeros(T, dtype=np.int64)
        alive = np.arange(n, dtype=np.int64)
        level = 0
        ones = np.ones(n, dtype=np.uint8)
        budget = n if tail_edges is None else int(tail_edges)
        while True:
            alive, lo = _next_level(deg, status, alive)
            if len(alive) == 0:
                break
            if budget > 0 and int(deg[alive].sum()) <= budget:
                _finish_in_memory(its, alive, deg, status, core, full_scan, steps, progress, level)
                rounds += 1
                break
            level = max(level, int(lo))
            frontier = _select(deg, status, alive, level)
            while len(frontier):
                state = (status, dec, touched, ntouched)
                need = frontier[deg[frontier] > 0]   # the others have no alive neighbours left
                if len(need) == 0:
                    pass
                elif full_scan:
                    st = its[0].run(_always, _decrement_both, state, Frontier.all(n))
                    _record(steps, progress, st, level, len(frontier))
                else:
                    fr = Frontier.from_queue(need, n)
                    for it in its:
                        st = it.run(_removing, _decrement, state, fr)
                        _record(steps, progress, st, level, len(frontier))
                rounds += 1
                frontier = _apply(deg, status, dec, touched, ntouched, level, core, frontier)
    finally:
        for it in its:
            it.close()
    in_k = None if k is None else core >= int(k)
    return KCoreResult(core_number=core, max_core=int(core.max()) if n else 0,
                       k=None if k is None else int(k), in_k_core=in_k,
                       k_core_size=None if k is None else int(np.count_nonzero(in_k)),
                       membership_only=False, rounds=rounds,
                       supersteps=steps, seconds=time.perf_counter() - t0)


#: On the SSD path, round 1 also keeps (in RAM) the lists of the vertices whose degree is just above
#: K, taken from the blocks it reads anyway: at most 1/KEEP_SHARE of round 1's edges and at most n
#: entries, lowest degrees first (degrees K .. K + KEEP_BAND - 1).
KEEP_SHARE = 16
KEEP_BAND = 16


def _run_membership(graph, k, in_memory, runtime, progress, t0):
    """Single-k peeling (Graphene's k-core): vertices of degree < K leave in rounds until none does.
    See the module docstring ("One k")."""
    from ..iterator import Frontier
    n = graph.num_vertices
    kk = int(k)
    steps = []
    has_in = graph.in_partitions is not None
    dirs = ["out", "in"] if graph.directed and has_in else ["out"]
    full_scan = graph.directed and not has_in
    rounds = 0
    kept = 0
    its = [_open(graph, d, in_memory, runtime) for d in dirs] if n else []
    try:
        T = max([it.threads for it in its] or [1])
        # one array for everything the kernels touch (numba passes each array of the state
        # separately and keeps a reference count on it: one array keeps the per-call cost low)
        wide = graph.num_edges >= (1 << 30) or n >= (1 << 31)
        dt = np.int64 if wide else np.int32
        sh = 6 if wide else 5                  # bits per word of the touched-vertex bitmaps
        keep_ok = not (full_scan or in_memory)
        rows = 1 + 2 * T + (3 if keep_ok else 0)
        A = np.zeros((rows, n), dtype=dt)
        deg = A[0]
        for d in dirs:
            for p in graph.parts(d):   # offsets already in RAM (the iterators loaded them)
                _add_degrees(deg, p.offsets(), p.row_lo)
        if full_scan and n:
            deg += _in_degrees(graph, in_memory, runtime, steps, progress).astype(dt)
        # status: 0 in the core so far, 1 leaves in this round, 2 in the core with its list kept in
        # RAM, 3 left through its kept list. Round 1's frontier is the mask status != 0.
        status = np.empty(n, dtype=np.uint8)
        hist = np.zeros(KEEP_BAND, dtype=np.int64)
        count, edges1 = (int(x) for x in _below_k(deg, dt(kk), status, hist))
        cap = kk
        if keep_ok and count:
            budget = min(edges1 // KEEP_SHARE, n)
            for i in range(KEEP_BAND):
                budget -= int(hist[i]) * (kk + i)
                if budget < 0:
                    break
                cap = kk + i + 1
        starts = np.zeros(1, dtype=np.int64)
        if cap > kk:
            kept = int(hist[:cap - kk].sum())
            starts = _keepers(A, T, dt(kk), dt(cap), status, kept)
        crossed = np.empty(n, dtype=np.int64)
        front_buf = np.empty(n, dtype=np.int64)
        state = (A, dt(kk), np.int64(T), np.int64(sh), status, np.int64(kept))
        fr = Frontier.from_mask(status) if count else None
        while count:
            if full_scan:
                st = its[0].run(_always, _drop_k_scan, state, Frontier.all(n))
                _record(steps, progress, st, kk, count)
            else:
                compute = _drop_k_keep if (rounds == 0 and kept) else _drop_k
                for it in its:
                    st = it.run(_always, compute, state, fr)
                    _record(steps, progress, st, kk, count)
            if rounds == 0 and kept:
                _check_kept(A, T, status, starts)
            rounds += 1
            m = int(_merge_k(A, T, sh, dt(kk), crossed))
            if full_scan:
                _advance(status, crossed[:m])
                count = m
            else:
                count = int(_peel_kept(A, T, dt(kk), status, starts, crossed[:m], front_buf))
                fr = Frontier.from_queue(front_buf[:count].copy(), n)
    finally:
        for it in its:
            it.close()
    in_k = np.empty(n, dtype=np.bool_)
    size = int(_members(deg, dt(kk), in_k))
    return KCoreResult(core_number=None, max_core=None, k=kk, in_k_core=in_k, k_core_size=size,
                       membership_only=True, rounds=rounds, kept_lists=kept, supersteps=steps,
                       seconds=time.perf_counter() - t0)


# Rows of A (n entries each; T = compute threads): 0 degree (the number of neighbours not yet
# removed, exact while >= K); 1..T per-thread decrements of this round; T+1..2T per-thread bitmaps
# of the vertices with a decrement (first n/32 or n/64 words); with kept lists: 2T+1 the kept
# vertices (sorted), 2T+2 the next free store position of each, 2T+3 the store.
@intrinsic
def _atomic_add2(typingctx, ary, i, j, val):
    """atomic_add on a 2-D array element (fetch-and-add, monotonic; returns the old value)."""
    if not isinstance(ary, types.Array) or ary.ndim != 2 or not isinstance(ary.dtype, types.Integer):
        return None
    sig = ary.dtype(ary, types.intp, types.intp, ary.dtype)

    def codegen(context, builder, signature, args):
        arr, ii, jj, v = args
        aty = signature.args[0]
        a = context.make_array(aty)(context, builder, arr)
        ptr = cgutils.get_item_pointer(context, builder, aty, a, [ii, jj])
        return builder.atomic_rmw("add", ptr, v, "monotonic")

    return sig, codegen


@njit(cache=True)
def _add_degrees(deg, off, row_lo):
    for i in range(off.shape[0] - 1):
        deg[row_lo + i] += np.int64(off[i + 1]) - np.int64(off[i])


@njit(cache=True)
def _drop_k(v, nbrs, wts, tid, state):
    """v leaves the K-core: every neighbour u still in it (degree >= K at the round's start; the
    degrees are read-only during a superstep) gets one decrement in this thread's row."""
    A, kk, T, sh, status, m = state
    one = A.dtype.type(1)
    mask = (1 << sh) - 1
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        if A[0, u] >= kk:
            if A[1 + tid, u] == 0:
                A[1 + T + tid, u >> sh] |= one << (u & mask)
            A[1 + tid, u] += 1


@njit(cache=True)
def _drop_k_keep(v, nbrs, wts, tid, state):
    """Round 1 with kept lists: as _drop_k, except that a kept vertex (status 2) appends this chunk
    of its list to its slice of the store (chunks come in any order, on any thread)."""
    A, kk, T, sh, status, m = state
    if status[v] == 2:
        j = _slot(A, T, m, v)
        p = np.int64(_atomic_add2(A, 2 * T + 2, j, A.dtype.type(nbrs.shape[0])))
        for i in range(nbrs.shape[0]):
            A[2 * T + 3, p + i] = nbrs[i]
        return
    one = A.dtype.type(1)
    mask = (1 << sh) - 1
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        if A[0, u] >= kk:
            if A[1 + tid, u] == 0:
                A[1 + T + tid, u >> sh] |= one << (u & mask)
            A[1 + tid, u] += 1


@njit(cache=True)
def _drop_k_scan(v, nbrs, wts, tid, state):
    """Directed dataset without in-edges, every out-list streamed: a vertex leaving this round
    (status 1) decrements its out-neighbours still in the core; a vertex still in the core loses
    one degree per out-neighbour leaving this round."""
    A, kk, T, sh, status, m = state
    one = A.dtype.type(1)
    mask = (1 << sh) - 1
    if status[v] == 1:
        for i in range(nbrs.shape[0]):
            u = np.int64(nbrs[i])
            if A[0, u] >= kk:
                if A[1 + tid, u] == 0:
                    A[1 + T + tid, u >> sh] |= one << (u & mask)
                A[1 + tid, u] += 1
    elif A[0, v] >= kk:
        c = 0
        for i in range(nbrs.shape[0]):
            if status[np.int64(nbrs[i])] == 1:
                c += 1
        if c > 0:
            if A[1 + tid, v] == 0:
                A[1 + T + tid, v >> sh] |= one << (v & mask)
            A[1 + tid, v] += c


@njit(cache=True)
def _below_k(deg, kk, status, hist):
    """Round 1: every vertex of degree < K leaves the core; status[v] = 1 for those with edges (the
    isolated ones have nothing to decrement). hist[i] counts the vertices of degree K + i.
    Returns (how many leave, their edges). Branch-free (unsigned compares): 5x faster here."""
    m = 0
    e = 0
    km1 = np.uint64(max(kk, 1) - 1)
    for v in range(deg.shape[0]):
        d = deg[v]
        x = np.uint8(np.uint64(d - 1) < km1)      # 1 <= d < K
        status[v] = x
        m += x
        e += d * x
    H = np.uint64(hist.shape[0])
    for v in range(deg.shape[0]):
        i = np.uint64(deg[v] - kk)
        if i < H:
            hist[i] += 1
    return m, e


@njit(cache=True, inline="always")
def _slot(A, T, m, v):
    """Index of kept vertex v in the sorted list A[2T+1, :m] (binary search)."""
    lo = 0
    hi = m
    while lo < hi:
        mid = (lo + hi) >> 1
        if A[2 * T + 1, mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _keepers(A, T, kk, cap, status, m):
    """Mark the m vertices of degree K .. cap-1 as kept (status 2), list them (sorted) in row 2T+1
    and give each a slice of the store; returns the slices' starts (m + 1 entries); row 2T+2
    (the next free position of each slice) starts there."""
    starts = np.empty(m + 1, dtype=np.int64)
    j = 0
    pos = 0
    band = np.uint64(cap - kk)
    for v in range(A.shape[1]):
        d = A[0, v]
        if np.uint64(d - kk) < band:
            status[v] = 2
            A[2 * T + 1, j] = v
            A[2 * T + 2, j] = pos
            starts[j] = pos
            pos += d
            j += 1
    starts[j] = pos
    return starts


@njit(cache=True)
def _check_kept(A, T, status, starts):
    """After round 1 (every chunk of every direction seen) a kept list must be whole; else its
    vertex is read from disk when it leaves (status back to 0)."""
    for j in range(starts.shape[0] - 1):
        if A[2 * T + 2, j] != starts[j + 1]:
            status[A[2 * T + 1, j]] = 0


@njit(cache=True)
def _merge_k(A, T, sh, kk, out):
    """Apply the threads' decrements (serial, so each vertex crosses from >= K to < K exactly once);
    the vertices that crossed go to `out`; returns how many."""
    m = 0
    B = 1 << sh
    for t in range(T):
        for w in range((A.shape[1] + B - 1) >> sh):
            x = A[1 + T + t, w]
            if x == 0:
                continue
            A[1 + T + t, w] = 0
            base = w << sh
            for b in range(B):
                if (x >> b) & 1:
                    u = base + b
                    old = A[0, u]
                    new = old - A[1 + t, u]
                    A[1 + t, u] = 0
                    A[0, u] = new
                    if old >= kk and new < kk:
                        out[m] = u
                        m += 1
    return m


@njit(cache=True)
def _peel_kept(A, T, kk, status, starts, crossed, front):
    """The vertices that just left: those with a kept list are peeled here in RAM (serially, with a
    work stack, cascading through other kept vertices); the others form the next round's frontier
    (status 1; their count is returned, the IDs are in `front`)."""
    stack = np.empty(starts.shape[0], dtype=np.int64)
    sp = 0
    m = 0
    for i in range(crossed.shape[0]):
        u = crossed[i]
        if status[u] == 2:
            status[u] = 3
            stack[sp] = u
            sp += 1
        else:
            status[u] = 1
            front[m] = u
            m += 1
    while sp > 0:
        sp -= 1
        v = stack[sp]
        j = _slot(A, T, starts.shape[0] - 1, v)
        for p in range(starts[j], starts[j + 1]):
            u = np.int64(A[2 * T + 3, p])
            if A[0, u] >= kk:
                A[0, u] -= 1
                if A[0, u] < kk:
                    if status[u] == 2:
                        status[u] = 3
                        stack[sp] = u
                        sp += 1
                    else:
                        status[u] = 1
                        front[m] = u
                        m += 1
    return m


@njit(cache=True)
def _advance(status, front):
    """Scan path: the round's vertices are gone (0 again: their degree < K keeps them out), the
    next round's leave now (1)."""
    for v in range(status.shape[0]):
        if status[v] == 1:
            status[v] = 0
    for i in range(front.shape[0]):
        status[front[i]] = 1


@njit(cache=True)
def _members(deg, kk, out):
    m = 0
    for v in range(deg.shape[0]):
        x = deg[v] >= kk
        out[v] = x
        m += x
    return m


@njit(cache=True)
def _alive(v, state):
    return state[0][v] == 0


@njit(cache=True)
def _gather(v, nbrs, wts, tid, state):
    """Append (v, u) for every alive neighbour u; with `both`, also (u, v) (out-only datasets)."""
    status, ga, gb, tail, both = state
    c = 0
    for i in range(len(nbrs)):
        if status[np.int64(nbrs[i])] == 0:
            c += 1
    if c == 0:
        return
    k = _add(tail, 0, np.int64(c * (2 if both else 1)))
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if status[u] == 0:
            ga[k] = v
            gb[k] = u
            k += 1
            if both:
                ga[k] = u
                gb[k] = v
                k += 1


def _finish_in_memory(its, alive, deg, status, core, full_scan, steps, progress, level):
    """The alive subgraph has at most `tail_edges` (default n) incidences: read it once (one
    superstep per direction), then finish the peeling in memory with Batagelj-Zaversnik. Every
    alive vertex has degree > level here, so its core number in the remaining subgraph is its core
    number in the graph (the peeling below continues exactly where the rounds stopped)."""
    from ..iterator import Frontier
    n = len(deg)
    m = int(deg[alive].sum())
    ga = np.empty(m, dtype=np.int64)
    gb = np.empty(m, dtype=np.int64)
    tail = np.zeros(1, dtype=np.int64)
    state = (status, ga, gb, tail, full_scan)
    if full_scan:
        st = its[0].run(_alive, _gather, state, Frontier.all(n))
        _record(steps, progress, st, level, 0)
    else:
        fr = Frontier.from_queue(alive, n)
        for it in its:
            st = it.run(_alive, _gather, state, fr)
            _record(steps, progress, st, level, 0)
    if int(tail[0]) != m:
        raise GrapheneError(f"k-core: gathered {int(tail[0])} incidences of the remaining "
                            f"subgraph, expected {m} (dataset degrees and lists disagree)")
    sub = _peel_serial(n, ga, gb)
    core[alive] = sub[alive]
    status[alive] = 2


def _record(steps, progress, st, level, removed):
    st = dict(st)
    st.update(k=level, removing=int(removed))
    steps.append(st)
    if progress is not None:
        progress(st)


@njit(cache=True)
def _count_in(v, nbrs, wts, tid, state):
    row = state[0][tid]
    for i in range(len(nbrs)):
        row[np.int64(nbrs[i])] += 1


def _in_degrees(graph, in_memory, runtime, steps, progress):
    """In-degrees from one streamed pass over the out-lists (directed datasets without in-edges)."""
    n = graph.num_vertices
    with _open(graph, "out", in_memory, runtime) as it:
        cnt = np.zeros((it.threads, n), dtype=np.int64)
        st = it.run(_always, _count_in, (cnt,), _frontier().all(n))
        _record(steps, progress, st, 0, 0)
    return cnt.sum(axis=0)


def verify(graph, result, **_ignored) -> list:
    """Independent serial check: Batagelj-Zaversnik O(m) bucket peeling over the stored edges (both
    directions on directed datasets) must give the same core numbers (membership_only: the same
    K-core membership and size)."""
    n = graph.num_vertices
    if getattr(result, "membership_only", False):
        in_k = np.asarray(result.in_k_core)
        if in_k.shape != (n,):
            return [f"in_k_core has shape {in_k.shape}, expected ({n},)"]
    else:
        core = np.asarray(result.core_number)
        if core.shape != (n,):
            return [f"core_number has shape {core.shape}, expected ({n},)"]
    src, dst = graph.edges("out")
    if graph.directed:
        a = np.concatenate([src, dst])
        b = np.concatenate([dst, src])
    else:
        a, b = src, dst
    ref = _peel_serial(n, a, b)
    problems = []
    if getattr(result, "membership_only", False):
        want = ref >= result.k
        bad = np.flatnonzero(want != in_k)
        if len(bad):
            v = int(bad[0])
            problems.append(f"{len(bad)} K-core memberships wrong (vertex {v}: {bool(in_k[v])}, "
                            f"its core number is {int(ref[v])}, K = {result.k})")
        if result.k_core_size != int(np.count_nonzero(want)):
            problems.append(f"k_core_size is {result.k_core_size}, the {result.k}-core has "
                            f"{int(np.count_nonzero(want))} vertices")
        return problems
    bad = np.flatnonzero(ref != core)
    if len(bad):
        v = int(bad[0])
        problems.append(f"{len(bad)} core numbers wrong (vertex {v}: {int(core[v])}, expected "
                        f"{int(ref[v])})")
    if result.k is not None and not np.array_equal(result.in_k_core, ref >= result.k):
        problems.append(f"in_k_core differs from core_number >= {result.k}")
    return problems


@njit(cache=True)
def _peel_serial(n, a, b):
    """Batagelj-Zaversnik O(m) bucket peeling over directed incidence pairs (a -> b)."""
    order = np.argsort(a, kind="mergesort")
    nb = b[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    for i in range(a.shape[0]):
        ptr[a[i] + 1] += 1
    for v in range(n):
        ptr[v + 1] += ptr[v]
    deg = np.empty(n, dtype=np.int64)
    for v in range(n):
        deg[v] = ptr[v + 1] - ptr[v]
    md = 0
    for v in range(n):
        md = max(md, deg[v])
    bins = np.zeros(md + 2, dtype=np.int64)
    for v in range(n):
        bins[deg[v]] += 1
    start = 0
    for d in range(md + 1):
        c = bins[d]
        bins[d] = start
        start += c
    pos = np.empty(n, dtype=np.int64)
    vert = np.empty(n, dtype=np.int64)
    for v in range(n):
        pos[v] = bins[deg[v]]
        vert[pos[v]] = v
        bins[deg[v]] += 1
    for d in range(md, 0, -1):
        bins[d] = bins[d - 1]
    bins[0] = 0
    for i in range(n):
        v = vert[i]
        for j in range(ptr[v], ptr[v + 1]):
            u = nb[j]
            if deg[u] > deg[v]:
                du = deg[u]
                pu = pos[u]
                pw = bins[du]
                w = vert[pw]
                if u != w:
                    pos[u] = pw
                    vert[pu] = w
                    pos[w] = pu
                    vert[pw] = u
                bins[du] += 1
                deg[u] -= 1
    return deg


CLI_OPTIONS = [
    click.Option(["--k", "k"], type=int, default=None,
                 help="Also report membership of the K-core (core number >= K)."),
    click.Option(["--membership-only", "membership_only"], is_flag=True, default=False,
                 help="With --k K: compute only the K-core (peel degree < K until stable; no core "
                      "numbers). Much faster than the full decomposition."),
]
