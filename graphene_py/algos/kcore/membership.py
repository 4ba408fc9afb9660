"""One K-core (membership only): peel degree < K in rounds, the kept lists of the vertices just
above K peeled in RAM (see the package docstring)."""
from __future__ import annotations

import time

import numpy as np
from numba import njit

from ...io.bitmap import ctz64
from ...iterator.atomics import atomic_add2
from ...iterator.memory import track
from ...errors import GrapheneError
from .base import KEEP_BAND, KEEP_SHARE, KCoreResult, _always, _record
from .scan import _in_degrees


def _run_membership(graph, k, in_memory, runtime, progress, t0):
    """Single-k peeling (Graphene's k-core): vertices of degree < K leave in rounds until none does.
    See the module docstring ("One k")."""
    from ...iterator.edgemap import EdgeMap, Update
    n = graph.num_vertices
    kk = int(k)
    steps = []
    has_in = graph.in_partitions is not None
    dirs = ["out", "in"] if graph.directed and has_in else ["out"]
    full_scan = graph.directed and not has_in
    rounds = 0
    kept = 0
    em = EdgeMap(graph, pull=graph.directed and has_in, in_memory=in_memory,
                 **runtime) if n else None
    if em is not None and full_scan and not em.local:
        em.close()
        raise GrapheneError(f"{graph.name}: k-core on a cluster needs an undirected dataset or "
                            f"in-edge partitions (re-partition with --in-edges)")
    try:
        T = em.threads if em is not None else 1
        # one array for everything the kernels touch (numba passes each array of the state
        # separately and keeps a reference count on it: one array keeps the per-call cost low)
        # int32 rows while every value fits: degrees (the sum over the directions read), vertex IDs
        # and positions in the kept-list store (at most n); at scale 24 edge factor 64 (2 G
        # edges) that is 4 bytes per row per vertex instead of 8
        degs = [em.degree(d) for d in dirs] if n else []
        dmax = sum(int(x.max()) for x in degs) + (int(graph.num_edges) if full_scan else 0)
        wide = dmax >= (1 << 31) - 1 or n >= (1 << 31) - 1
        dt = np.int64 if wide else np.int32
        sh = 6 if wide else 5                  # bits per word of the touched-vertex bitmaps
        # kept lists live in this process's RAM: not where the lists are read elsewhere
        keep_ok = not (full_scan or in_memory) and em is not None and em.local
        rows = 1 + 2 * T + (3 if keep_ok else 0) + 1     # the last row: bitmap degree >= K
        A = np.zeros((rows, n), dtype=dt)
        deg = A[0]
        for d, x in zip(dirs, degs):
            deg += x                    # from the offsets the iterators loaded
            em.deg.pop(d, None)         # A[0] holds them now
        degs = None
        if full_scan and n:
            deg += _in_degrees(graph, in_memory, runtime, steps, progress).astype(dt)
        # status: 0 in the core so far, 1 leaves in this round, 2 in the core with its list kept in
        # RAM, 3 left through its kept list. Round 1's frontier is the mask status != 0.
        status = np.empty(n, dtype=np.uint8)
        hist = np.zeros(KEEP_BAND, dtype=np.int64)
        count, edges1 = (int(x) for x in _below_k(deg, dt(kk), status, hist))
        _set_in_core(A, sh, dt(kk))
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
        vdt = np.int64 if n >= (1 << 31) else np.int32      # 4-byte IDs while they fit
        crossed = np.empty(n, dtype=vdt)
        front_buf = np.empty(n, dtype=vdt)
        state = (A, dt(kk), np.int64(T), np.int64(sh), status, np.int64(kept))
        track("degrees, per-thread decrements and bitmaps", A)
        track("status", status)
        track("peel queues", crossed, front_buf)
        # a round's decrements add up, the touched-vertex bitmaps or together (rows of A)
        rows = ((0, "sum", (1, 1 + T)), (0, "or", (1 + T, 1 + 2 * T)))
        drop = Update(_always, _drop_k, combine="sum", writes=rows)
        frontier = None                      # round 1: the mask status != 0
        while count:
            if full_scan:
                st = em.dense(state, Update(_always, _drop_k_scan, combine="sum", writes=rows))
                _record(steps, progress, st, kk, count)
            else:
                upd = Update(_always, _drop_k_keep, combine="sum") if (rounds == 0 and kept) \
                    else drop
                for d in dirs:
                    st = (em.masked(state, upd, status, d) if frontier is None else
                          em.queued(state, upd, frontier, d))
                    _record(steps, progress, st, kk, count)
            if rounds == 0 and kept:
                _check_kept(A, T, status, starts)
            rounds += 1
            m = int(_merge_k(A, T, sh, dt(kk), crossed))
            if full_scan:
                _advance(status, crossed[:m])
                count = m
            else:
                count = int(_peel_kept(A, T, sh, dt(kk), status, starts, crossed[:m], front_buf))
                # a view: front_buf is rewritten only after this frontier's superstep
                frontier = front_buf[:count]
    finally:
        if em is not None:
            em.close()
    in_k = np.empty(n, dtype=np.bool_)
    size = int(_members(deg, dt(kk), in_k))
    return KCoreResult(core_number=None, max_core=None, k=kk, in_k_core=in_k, k_core_size=size,
                       membership_only=True, rounds=rounds, kept_lists=kept, supersteps=steps,
                       seconds=time.perf_counter() - t0)


# Rows of A (n entries each; T = compute threads): 0 degree (the number of neighbours not yet
# removed, exact while >= K); 1..T per-thread decrements of this round; T+1..2T per-thread bitmaps
# of the vertices with a decrement (first n/32 or n/64 words); with kept lists: 2T+1 the kept
# vertices (sorted), 2T+2 the next free store position of each, 2T+3 the store; last row: bitmap
# of the vertices of degree >= K (what the kernels test: n/8 bytes stay in cache, so an edge costs
# one random access, its decrement, instead of two). One array for
# everything the kernels touch: numba passes each array of the state separately and keeps a
# reference count on it, which costs ~60 ns per call once the kernel has a branch (measured).


@njit(inline="always")
def _decrement(A, T, sh, tid, u, c):
    """u loses c more degrees this round, in thread tid's row; its first one sets its bit in the
    thread's bitmap of touched vertices."""
    if A[1 + tid, u] == 0:
        A[1 + T + tid, u >> sh] |= A.dtype.type(1) << (u & ((1 << sh) - 1))
    A[1 + tid, u] += c


@njit(inline="always")
def _drop_nbrs(A, T, sh, tid, nbrs):
    """One decrement for every neighbour still in the core (degree >= K at the round's start:
    the last row's bitmap, which stays in cache)."""
    mask = (1 << sh) - 1
    ab = A.shape[0] - 1
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        if (A[ab, u >> sh] >> (u & mask)) & 1:
            _decrement(A, T, sh, tid, u, 1)


@njit(cache=True)
def _drop_k(v, nbrs, wts, tid, state):
    """v leaves the K-core: every neighbour u still in it (degree >= K at the round's start; the
    degrees are read-only during a superstep) gets one decrement in this thread's row."""
    A, kk, T, sh, status, m = state
    _drop_nbrs(A, T, sh, tid, nbrs)


@njit(cache=True)
def _drop_k_keep(v, nbrs, wts, tid, state):
    """Round 1 with kept lists: as _drop_k, except that a kept vertex (status 2) appends this chunk
    of its list to its slice of the store (chunks come in any order, on any thread)."""
    A, kk, T, sh, status, m = state
    if status[v] == 2:
        j = _slot(A, T, m, v)
        p = np.int64(atomic_add2(A, 2 * T + 2, j, A.dtype.type(nbrs.shape[0])))
        for i in range(nbrs.shape[0]):
            A[2 * T + 3, p + i] = nbrs[i]
        return
    _drop_nbrs(A, T, sh, tid, nbrs)


@njit(cache=True)
def _drop_k_scan(v, nbrs, wts, tid, state):
    """Directed dataset without in-edges, every out-list streamed: a vertex leaving this round
    (status 1) decrements its out-neighbours still in the core; a vertex still in the core loses
    one degree per out-neighbour leaving this round."""
    A, kk, T, sh, status, m = state
    if status[v] == 1:
        _drop_nbrs(A, T, sh, tid, nbrs)
    elif (A[A.shape[0] - 1, v >> sh] >> (v & ((1 << sh) - 1))) & 1:
        c = 0
        for i in range(nbrs.shape[0]):
            if status[np.int64(nbrs[i])] == 1:
                c += 1
        if c > 0:
            _decrement(A, T, sh, tid, v, c)


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


@njit(cache=True)
def _set_in_core(A, sh, kk):
    """Last row of A: bitmap of degree >= K (the kernels' test; n/8 bytes stay in cache)."""
    ab = A.shape[0] - 1
    one = A.dtype.type(1)
    bm = (1 << sh) - 1
    for v in range(A.shape[1]):
        if A[0, v] >= kk:
            A[ab, v >> sh] |= one << (v & bm)


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
    the vertices that crossed go to `out`; returns how many. Walks the set bits of the touched-
    vertex bitmaps (lowest set bit + de Bruijn count of trailing zeros)."""
    m = 0
    B = 1 << sh
    wmask = np.uint64((1 << B) - 1) if B < 64 else ~np.uint64(0)
    ab = A.shape[0] - 1
    one = A.dtype.type(1)
    bm = B - 1
    for t in range(T):
        for w in range((A.shape[1] + B - 1) >> sh):
            x = np.uint64(A[1 + T + t, w]) & wmask
            if x == 0:
                continue
            A[1 + T + t, w] = 0
            base = w << sh
            while x != 0:
                low = x & (~x + np.uint64(1))
                u = base + np.int64(ctz64(x))
                x ^= low
                old = A[0, u]
                new = old - A[1 + t, u]
                A[1 + t, u] = 0
                A[0, u] = new
                if old >= kk and new < kk:
                    out[m] = u
                    m += 1
                    A[ab, u >> sh] &= ~(one << (u & bm))
    return m


@njit(inline="always")
def _leave(u, status, stack, sp, front, m):
    """u leaves the core: a kept vertex (status 2 -> 3) goes on the in-RAM peel stack, any other
    (-> 1) into the next round's frontier. Returns the new stack and frontier sizes."""
    if status[u] == 2:
        status[u] = 3
        stack[sp] = u
        return sp + 1, m
    status[u] = 1
    front[m] = u
    return sp, m + 1


@njit(cache=True)
def _peel_kept(A, T, sh, kk, status, starts, crossed, front):
    """The vertices that just left: those with a kept list are peeled here in RAM (serially, with a
    work stack, cascading through other kept vertices); the others form the next round's frontier
    (status 1; their count is returned, the IDs are in `front`)."""
    stack = np.empty(starts.shape[0], dtype=np.int64)
    sp = 0
    m = 0
    ab = A.shape[0] - 1
    one = A.dtype.type(1)
    bm = (1 << sh) - 1
    for i in range(crossed.shape[0]):
        sp, m = _leave(crossed[i], status, stack, sp, front, m)
    while sp > 0:
        sp -= 1
        v = stack[sp]
        j = _slot(A, T, starts.shape[0] - 1, v)
        for p in range(starts[j], starts[j + 1]):
            u = np.int64(A[2 * T + 3, p])
            if A[0, u] >= kk:
                A[0, u] -= 1
                if A[0, u] < kk:
                    A[ab, u >> sh] &= ~(one << (u & bm))
                    sp, m = _leave(u, status, stack, sp, front, m)
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
