"""One K-core (membership only): peel degree < K in rounds, the kept lists of the vertices just
above K peeled in RAM (see the package docstring)."""
from __future__ import annotations

import time

import numpy as np
from ...jit import njit

from ...io.bitmap import ctz64
from ...iterator.atomics import atomic_add2
from ...iterator.memory import track
from ...errors import GrapheneError
from .base import KEEP_BAND, KEEP_SHARE, KCoreResult, Moved, _always, _record
from .scan import _in_degrees

#: int32 rows while every degree, ID and store position stays below this (tests lower it)
INT32_ROWS_BELOW = (1 << 31) - 1


def _run_membership(graph, k, in_memory, runtime, progress, t0, ho=None):
    """Single-k peeling (Graphene's k-core): vertices of degree < K leave in rounds until none does.
    See the module docstring ("One k"). ho: a hand-off (gpu/handoff.py Handoff, the GPU's part
    KCorePart): after each round that leaves vertices to peel, once the part is ready, the rest
    moves to the GPU when its estimate is below the round's time; returns Moved then (the
    vertices still in the core -1, every other 0, at level K - 1: _moved)."""
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
        # int32 rows while every value fits: degrees (the sum over the directions read), vertex
        # IDs and positions in the kept-list store (at most n); at scale 24 edge factor 64 (2 G
        # edges) that is 4 bytes per row per vertex instead of 8
        # (no degree can pass the edge count of the directions read: only a graph with more
        # edges than int32 holds needs the offsets' scan for a tighter bound)
        dmax = int(graph.num_edges) * (len(dirs) + int(full_scan))
        if dmax >= INT32_ROWS_BELOW and n:
            dmax = sum(em.max_degree_bound(d) for d in dirs)
            if full_scan:
                dmax += int(graph.num_edges)
        wide = dmax >= INT32_ROWS_BELOW or n >= INT32_ROWS_BELOW
        dt = np.int64 if wide else np.int32
        sh = 6 if wide else 5                  # bits per word of the in-core bitmap
        nw = (n + (1 << sh) - 1) >> sh
        # kept lists live in this process's RAM: not where the lists are read elsewhere
        keep_ok = not (full_scan or in_memory) and em is not None and em.local
        # Two rows (see _ROWS below): 0 the degrees, 1 the in-core bitmap and the kept lists
        A = np.zeros((2, n), dtype=dt)
        deg = A[0]
        for d in dirs if n else []:
            em.add_degree(d, deg)       # from the offsets the iterators loaded
        if full_scan and n:
            deg += _in_degrees(graph, in_memory, runtime, steps, progress).astype(dt)
        # status: the frontier mask. Round 1: 1 leaves (degree 1..K-1), 2 keeps its list in RAM
        # (both read); later rounds: 1 leaves in this round, 0 anything else
        status = np.empty(n, dtype=np.uint8)
        # split over the compute threads (ranges of whole bitmap words), each its own histogram
        T = max(1, em.threads) if em is not None else 1
        hists = np.zeros((T, KEEP_BAND), dtype=np.int64)
        sums = np.zeros((T, 2), dtype=np.int64)
        if em is not None:
            em.on_ranges(n, lambda t, lo, hi: _below_k(A, dt(kk), np.int64(sh), status, hists[t],
                                                        lo, hi, sums[t]))
        hist = hists.sum(axis=0)
        count, edges1 = (int(x) for x in sums.sum(axis=0))
        cap = kk
        if keep_ok and count:
            # the store and the kept vertices' two slots share row 1 with the bitmap
            budget = min(edges1 // KEEP_SHARE, n - nw)
            for i in range(KEEP_BAND):
                budget -= int(hist[i]) * (kk + i + 2)
                if budget < 0:
                    break
                cap = kk + i + 1
        starts = np.zeros(1, dtype=np.int64)
        if cap > kk:
            kept = int(hist[:cap - kk].sum())
            starts = _keepers(A, nw, dt(kk), dt(cap), status, kept)
        if not full_scan and count and em is not None:
            # round 1's lists (degree 1..cap - 1) from the short-list file where the dataset
            # has one (iterator/shortfile.py): one read of its first groups instead of reads
            # all over the partition files; later rounds' vertices have larger degrees
            for d in dirs:
                em.short_lists(d, upto=cap - 1)
        state = (A, dt(kk), np.int64(sh), status, np.int64(nw), np.int64(kept))
        track("degrees, in-core bitmap and kept lists", A)
        track("status", status)
        # a round's decrements add up (atomically in a process; by sum between cluster nodes)
        drop = Update(_always, _drop_k, combine="sum", writes=((0, "sum", (0, 1)),))
        # with a hand-off a round's lines wait for its mark (device, why it stays or moves)
        say = progress if ho is None else None
        while count:
            first = len(steps)
            if full_scan:
                st = em.dense(state, Update(_always, _drop_k_scan, combine="sum",
                                            writes=((0, "sum", (0, 1)),)))
                _record(steps, say, st, kk, count)
            else:
                upd = Update(_always, _drop_k_keep, combine="sum") if (rounds == 0 and kept) \
                    else drop
                for st in em.across(state, upd, dirs, mask=status):
                    _record(steps, say, st, kk, count)
            if rounds == 0 and kept:
                _check_kept(A, nw, status, starts)
            if rounds == 0:
                for d in dirs:
                    em.drop_short_lists(d)
            rounds += 1
            count = int(_next_round(A, sh, dt(kk), status, nw, starts))
            if ho is not None and _handoff_after(ho, steps[first:], count, progress):
                return Moved(_moved(A, sh, n), max(kk - 1, 0), steps, rounds, kept)
    finally:
        if em is not None:
            em.close()
    in_k = np.empty(n, dtype=np.bool_)
    size = int(_members(deg, dt(kk), in_k))
    return KCoreResult(core_number=None, max_core=None, k=kk, in_k_core=in_k, k_core_size=size,
                       membership_only=True, rounds=rounds, kept_lists=kept, supersteps=steps,
                       seconds=time.perf_counter() - t0)


def _handoff_after(ho, round_steps, count, progress):
    """A round's supersteps marked as the CPU's (and printed); then whether the rest moves: only
    when `count` vertices are left to peel, the GPU's estimate against this round's time (the
    rounds left are not known; the next is no longer than this one on the graphs measured)."""
    for st in round_steps:
        ho.mark(st)
    move = False
    if count:
        cpu = sum(float(st.get("seconds", 0.0)) for st in round_steps)
        move = ho.after(round_steps[-1], ho.cpu_steps, 0.0, cpu_s=cpu)
    if progress is not None:
        for st in round_steps:
            progress(st)
    return move


def _moved(A, sh, n):
    """The peel so far as the GPU's k-core takes it (algorithms.kcore's init): -1 for a vertex
    still in the core (its bit in row 1's bitmap), 0 for one gone: every vertex gone has a core
    number below K, so with the level at K - 1 the GPU's core numbers of the rest are >= K
    exactly for the K-core's members (the K-core of what is left is the K-core itself)."""
    nw = (n + (1 << sh) - 1) >> sh
    words = np.ascontiguousarray(A[1, :nw])     # a word's bit i: vertex (w << sh) + i
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")
    core = np.zeros(n, dtype=np.int32)
    core[bits[:n].astype(bool)] = -1
    return core


# _ROWS of A (n entries each): 0 the degree (the number of neighbours not yet removed, exact while
# >= K; a superstep's kernels decrement it atomically); 1 the in-core bitmap (first nw words: the
# vertices of degree >= K when the round began, what the kernels test: n/8 bytes stay in cache, so
# an edge costs one random access, its decrement, instead of two), then with kept lists the m kept
# vertices (sorted), the next free store position of each (-1 once its list is found incomplete)
# and the store. One array for everything the kernels touch: numba passes each array of the state
# separately and keeps a reference count on it, which costs ~60 ns per call once the kernel has a
# branch (measured). With the status bytes that is 9 bytes per vertex (int32 rows); the frontier
# of a later round is the status mask, so no queue is held.


@njit(inline="always")
def _in_core(A, sh, u):
    return (A[1, u >> sh] >> (u & ((1 << sh) - 1))) & 1


@njit(inline="always")
def _drop_nbrs(A, sh, nbrs):
    """One decrement for every neighbour still in the core (degree >= K at the round's start)."""
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        if _in_core(A, sh, u):
            atomic_add2(A, 0, u, A.dtype.type(-1))


@njit(cache=True)
def _drop_k(v, nbrs, wts, tid, state):
    """v leaves the K-core: every neighbour u still in it (the in-core bitmap, read-only during a
    superstep) loses one degree."""
    A, kk, sh, status, nw, m = state
    _drop_nbrs(A, sh, nbrs)


@njit(cache=True)
def _drop_k_keep(v, nbrs, wts, tid, state):
    """Round 1 with kept lists: as _drop_k, except that a kept vertex (status 2) appends this chunk
    of its list to its slice of the store (chunks come in any order, on any thread)."""
    A, kk, sh, status, nw, m = state
    if status[v] == 2:
        j = _slot(A, nw, m, v)
        p = np.int64(atomic_add2(A, 1, nw + m + j, A.dtype.type(nbrs.shape[0])))
        base = nw + 2 * m
        for i in range(nbrs.shape[0]):
            A[1, base + p + i] = nbrs[i]
        return
    _drop_nbrs(A, sh, nbrs)


@njit(cache=True)
def _drop_k_scan(v, nbrs, wts, tid, state):
    """Directed dataset without in-edges, every out-list streamed: a vertex leaving this round
    (status 1) decrements its out-neighbours still in the core; a vertex still in the core loses
    one degree per out-neighbour leaving this round."""
    A, kk, sh, status, nw, m = state
    if status[v] == 1:
        _drop_nbrs(A, sh, nbrs)
    elif _in_core(A, sh, v):
        c = 0
        for i in range(nbrs.shape[0]):
            if status[np.int64(nbrs[i])] == 1:
                c += 1
        if c > 0:
            atomic_add2(A, 0, v, A.dtype.type(-c))


@njit(cache=True, nogil=True)
def _below_k(A, kk, sh, status, hist, lo, hi, out):
    """Round 1, over the degrees (row 0 of A) of the vertices [lo, hi) (lo a multiple of the
    bitmap's word, 1 << sh): every vertex of degree < K leaves the core, status[v] = 1 for those
    with edges (the isolated ones have nothing to decrement); row 1's words of the range become
    the bitmap of degree >= K, a word at a time; hist[i] counts the vertices of degree K + i.
    out[:2] = (how many leave, their edges). Branch-free (unsigned compares): 5x faster here
    than with branches."""
    deg = A[0]
    m = 0
    e = 0
    km1 = np.uint64(max(kk, 1) - 1)
    B = 1 << sh
    for w in range(lo >> sh, (hi + B - 1) >> sh):
        v0 = w << sh
        word = np.uint64(0)
        for v in range(v0, min(v0 + B, hi)):
            d = deg[v]
            x = np.uint8(np.uint64(d - 1) < km1)      # 1 <= d < K
            status[v] = x
            m += x
            e += d * x
            word |= np.uint64(d >= kk) << np.uint64(v - v0)
        A[1, w] = A.dtype.type(word)
    H = np.uint64(hist.shape[0])
    for v in range(lo, hi):
        i = np.uint64(deg[v] - kk)
        if i < H:
            hist[i] += 1
    out[0] = m
    out[1] = e


@njit(cache=True, inline="always")
def _slot(A, nw, m, v):
    """Index of v in the sorted kept vertices A[1, nw:nw+m] (binary search; m if v is greater
    than all of them)."""
    lo = 0
    hi = m
    while lo < hi:
        mid = (lo + hi) >> 1
        if A[1, nw + mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _keepers(A, nw, kk, cap, status, m):
    """Mark the m vertices of degree K .. cap-1 as kept (status 2), list them (sorted) in row 1
    after the bitmap and give each a slice of the store; returns the slices' starts (m + 1
    entries); the next free position of each starts there."""
    starts = np.empty(m + 1, dtype=np.int64)
    j = 0
    pos = 0
    band = np.uint64(cap - kk)
    for v in range(A.shape[1]):
        d = A[0, v]
        if np.uint64(d - kk) < band:
            status[v] = 2
            A[1, nw + j] = v
            A[1, nw + m + j] = pos
            starts[j] = pos
            pos += d
            j += 1
    starts[j] = pos
    return starts


@njit(cache=True)
def _check_kept(A, nw, status, starts):
    """After round 1 (every chunk of every direction seen) a kept list must be whole; else (-1)
    its vertex is read from disk when it leaves."""
    m = starts.shape[0] - 1
    for j in range(m):
        if A[1, nw + m + j] != starts[j + 1]:
            A[1, nw + m + j] = -1


@njit(inline="always")
def _leave(A, nw, starts, status, stack, sp, count, u):
    """u leaves the core: a vertex with a whole kept list goes on the in-RAM peel stack, any other
    into the next round's frontier (status 1). Returns the new stack and frontier sizes."""
    m = starts.shape[0] - 1
    if m > 0:
        j = _slot(A, nw, m, u)
        if j < m and A[1, nw + j] == u and A[1, nw + m + j] >= 0:
            stack[sp] = j
            return sp + 1, count
    status[u] = 1
    return sp, count + 1


@njit(cache=True)
def _next_round(A, sh, kk, status, nw, starts):
    """After a round's supersteps: every vertex of the in-core bitmap whose degree fell below K
    leaves (its bit cleared, so it crosses K exactly once); one with a kept list is peeled here in
    RAM (a work stack, cascading through other kept lists), the others form the next round's
    frontier: status 1, everything else 0. Returns the frontier's size. Walks the bitmap's set
    bits (lowest set bit + de Bruijn count of trailing zeros)."""
    status[:] = 0
    m = starts.shape[0] - 1
    stack = np.empty(max(m, 1), dtype=np.int64)
    base = nw + 2 * m
    B = 1 << sh
    wmask = np.uint64((1 << B) - 1) if B < 64 else ~np.uint64(0)
    one = A.dtype.type(1)
    bm = B - 1
    count = 0
    for w in range(nw):
        x = np.uint64(A[1, w]) & wmask
        while x != 0:
            low = x & (~x + np.uint64(1))
            u = (w << sh) + np.int64(ctz64(x))
            x ^= low
            if A[0, u] >= kk or not _in_core(A, sh, u):    # stays; or gone in a cascade below
                continue
            A[1, w] &= ~(one << (u & bm))
            sp, count = _leave(A, nw, starts, status, stack, 0, count, u)
            while sp > 0:
                sp -= 1
                j = stack[sp]
                for p in range(starts[j], starts[j + 1]):
                    y = np.int64(A[1, base + p])
                    if A[0, y] >= kk:
                        A[0, y] -= 1
                        if A[0, y] < kk:
                            A[1, y >> sh] &= ~(one << (y & bm))
                            sp, count = _leave(A, nw, starts, status, stack, sp, count, y)
    return count


@njit(cache=True)
def _members(deg, kk, out):
    m = 0
    for v in range(deg.shape[0]):
        x = deg[v] >= kk
        out[v] = x
        m += x
    return m
