"""Full k-core decomposition with kept lists (Batagelj-Zaversnik levels; the lists of the next
vertices to go kept in RAM within a budget; see the package docstring)."""
from __future__ import annotations

import time

import numpy as np
from ...jit import njit

from ...errors import GrapheneError
from ...io.bitmap import ctz64
from ...iterator.atomics import atomic_add2
from ...iterator.memory import track
from ..common import vertex_dtype
from .base import Moved, _always, _record, _result


#: a hand-off's check of the CPU's estimate for the rest (an O(n) pass over the degrees) runs at
#: most every HANDOFF_CHECK_S, and at most every HANDOFF_CHECK_SHARE^-1 times its own cost (so a
#: run that stays on the CPU spends at most ~5% of its time on them)
HANDOFF_CHECK_S = 0.05
HANDOFF_CHECK_SHARE = 0.05


def _rest_seconds(deg, total, t_start):
    """The CPU's estimate for the rest of a decomposition: the list entries still to apply (the
    degrees of the vertices left) at its rate so far (entries applied per second)."""
    left = int(deg[deg > 0].sum(dtype=np.int64))     # (removed vertices hold `gone` < 0)
    done = max(1, int(total) - left)
    return (time.perf_counter() - t_start) * left / done


def _run_full(graph, dirs, budget, in_memory, runtime, progress, t0, k, ho=None):
    """ho: a hand-off (gpu/handoff.py Handoff, the GPU's part KCorePart): after each round, once
    the part is ready, the rest moves to the GPU when its estimate is lower than the CPU's
    (`_rest_seconds`); returns Moved then."""
    from ...iterator.edgemap import EdgeMap, Update
    n = graph.num_vertices
    steps = []
    rounds = 0
    kept = 0
    idt = vertex_dtype(n)                             # vertex IDs, and core numbers (< n)
    core = np.zeros(n, dtype=idt)
    em = EdgeMap(graph, pull="in" in dirs, in_memory=in_memory, **runtime) if n else None
    try:
        T = em.threads if em is not None else 1
        # int32 rows while the degrees (summed over the directions read) stay below 2^30, so a
        # removed vertex's `gone` (-2^30) minus its stale decrements stays negative and in range
        degs = [em.degree(d) for d in dirs] if n else []
        dmax = sum(int(x.max()) for x in degs)
        wide = dmax >= (1 << 30) - 1 or n >= (1 << 31) - 1
        dt = np.int64 if wide else np.int32          # degrees, decrements, bitmap words
        sh = 6 if wide else 5                          # log2(bits per bitmap word)
        deg = np.zeros(n, dtype=dt)
        for d, x in zip(dirs, degs):
            deg += x                    # from the offsets the iterators loaded
            em.deg.pop(d, None)         # deg holds them now
        degs = None
        # kept lists live in this process's RAM: none where the lists are read elsewhere
        local = em is None or em.local
        cap = max(0, min(int(budget), int(deg.sum(dtype=np.int64)))) if local else 0
        state = np.zeros(n, dtype=np.uint8)     # _FREE .. _DONE
        # rows 0..T-1: each thread's decrements; then the threads' touched-vertex bitmaps, nw
        # words each, P of them side by side in a row (one row for up to 32 threads)
        nw = max(1, -(-n // (1 << sh)))
        P = max(1, n // nw)
        brows = -(-T // P)
        A = np.zeros((T + brows, n), dtype=dt)
        kdt = np.int64 if cap >= (1 << 31) else np.int32
        # kept vertex: start of its slice, entries stored; kept vertices in store order (for
        # compaction). Without a budget no vertex is ever kept: 12 bytes per vertex saved.
        kn = n if cap else 1
        kslot = np.zeros((2, kn), dtype=kdt)
        store = np.empty(cap, dtype=idt)
        korder = np.empty(kn, dtype=idt)
        alive = np.arange(n, dtype=idt)
        queue = np.empty(n, dtype=idt)
        pending = np.empty(n, dtype=idt)
        hist = np.zeros(int(deg.max()) + 2 if n else 1, dtype=np.int64)
        # counters: [0] live kept entries (as of the last selection), [1] store top, [2] kept
        # vertices in korder, [3] queue head, [4] queue tail, [5] pending, [6] alive, [7] level
        c = np.zeros(8, dtype=np.int64)
        c[6] = n
        track("core numbers", core)
        track("degrees and state", deg, state)
        track("per-thread decrements and bitmaps", A)
        track("kept lists", kslot, store, korder)
        track("peel queues", alive, queue, pending)
        gone = dt(-(1 << 62) if wide else -(1 << 30))   # degree of a removed vertex (stays < 0)
        kstate = (state, A, np.int64(T), np.int64(sh), kslot, store, np.int64(P), np.int64(nw))
        # a round's decrements add up and the touched bitmaps or together (rows of A); the store
        # is written only by loading vertices, which a cluster run has none of (cap 0)
        read = Update(_always, _read_round, combine="sum",
                      writes=((1, "sum", (0, T)), (1, "or", (T, T + brows))))
        total = int(deg.sum(dtype=np.int64)) if ho is not None else 0
        next_check = 0.0
        while True:
            if c[3] == c[4] and not _next_level_k(deg, alive, queue, c):
                break
            _peel_queue(deg, core, state, kslot, store, queue, pending, c, gone)
            if c[5] == 0:
                continue
            loading = _select_keep(deg, state, alive, hist, kslot, store, korder, cap, c)
            npend = int(c[5])
            ids = np.concatenate([pending[:npend], loading])
            got = []          # stored entries of the loading vertices after each direction
            first = len(steps)
            # (the round's lines go out after the hand-off's word on it, under a hand-off)
            say = progress if ho is None else None
            if len(loading) and len(dirs) > 1:
                for d in dirs:
                    st = em.queued(kstate, read, ids, d)
                    st["kept"] = len(loading)
                    _record(steps, say, st, int(c[7]), npend)
                    got.append(kslot[1, loading].astype(np.int64))
            else:        # (a cluster: no vertex loads; every direction in one round trip)
                for st in em.across(kstate, read, dirs, ids=ids):
                    st["kept"] = len(loading)
                    _record(steps, say, st, int(c[7]), npend)
            rounds += 1
            kept += len(loading)
            bad = _after_read(deg, state, A, T, sh, P, nw, kslot, pending, loading, queue, c)
            if bad >= 0:
                raise GrapheneError(_disagree(graph, dirs, state, kslot, deg, loading, got, bad))
            if ho is not None:
                move, next_check = _handoff_after(ho, steps[first:], deg, total, t0, next_check)
                if progress is not None:
                    for st in steps[first:]:
                        progress(st)
                if move:
                    out = core.astype(np.int32)
                    out[deg >= 0] = -1         # not removed yet (their degrees are exact now)
                    return Moved(out, int(c[7]), steps, rounds, kept)
    finally:
        if em is not None:
            em.close()
    return _result(core, k, rounds, steps, t0, kept_lists=kept, keep_edges=int(budget))


def _handoff_after(ho, round_steps, deg, total, t_start, next_check):
    """A round's supersteps marked as the CPU's; then, once the GPU's part is ready and not
    before `next_check` (or at a forced point), whether the rest moves. Returns (move, the time
    of the next check)."""
    for st in round_steps:
        ho.mark(st)
    last = round_steps[-1]
    forced = ho.force_at is not None and ho.cpu_steps >= ho.force_at
    if not forced and not ho.load.ready():
        last["handoff"] = f"loading ({ho.load.elapsed():.1f} s so far)"
        return False, next_check
    now = time.perf_counter()
    if not forced and now < next_check:
        return False, next_check
    rest = _rest_seconds(deg, total, t_start)
    took = time.perf_counter() - now
    move = ho.after(last, ho.cpu_steps, 0.0, cpu_s=rest)
    return move, now + max(HANDOFF_CHECK_S, took / HANDOFF_CHECK_SHARE)


def _disagree(graph, dirs, state, kslot, deg, loading, got, bad):
    """The error of a loaded list whose stored count is not its vertex's degree, with what tells the
    causes apart: how many entries each direction's superstep stored, and how many alive neighbours
    the dataset's files hold for it (read again here, outside the IO engines). Files agreeing with
    the degree mean entries were lost between the files and the store (IO or iterator); files
    agreeing with the store mean the degree is off (offsets, or a pending neighbour's list that
    was not read whole)."""
    wrong = int(np.count_nonzero(kslot[1, loading].astype(np.int64) != deg[loading]))
    stored, d = int(kslot[1, bad]), int(deg[bad])
    msg = (f"k-core: vertex {bad}: {stored} neighbours read, its degree says {d} (lists read and "
           f"degrees disagree in {wrong} of the {len(loading)} lists loaded in this superstep)")
    try:
        j = int(np.flatnonzero(loading == bad)[0])
        prev = 0
        per = []
        alive_all = 0
        for i, direction in enumerate(dirs):
            ids = _list_in_files(graph, direction, bad)
            alive = int(np.count_nonzero(state[ids.astype(np.int64)] < _PENDING))
            alive_all += alive
            now = int(got[i][j]) if got else stored
            per.append(f"{direction}: {now - prev} stored, the files hold {len(ids)} "
                       f"neighbours, {alive} alive")
            prev = now
        if alive_all == d:
            why = "entries were lost between the files and the store"
        elif alive_all == stored:
            why = "the store matches the files: its degree is off"
        else:
            why = "neither matches the files"
        return f"{msg}: {'; '.join(per)}: {why}"
    except Exception as e:  # noqa: BLE001 - the diagnosis must not hide the error itself
        return f"{msg} (files not re-read: {e})"


def _list_in_files(graph, direction, v):
    """v's neighbours in `direction`, read straight from the partition files (every column)."""
    out = []
    for p in graph.parts(direction):
        if not p.row_lo <= v < p.row_hi or p.num_edges == 0:
            continue
        off = p.offsets()
        i = v - p.row_lo
        s, e = int(off[i]), int(off[i + 1])
        dt = np.dtype("<u4") if p.id_width == 4 else np.dtype("<u8")
        out.append(np.fromfile(p.adj_path, dtype=dt, count=e - s, offset=s * dt.itemsize))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


# vertex states of the full decomposition
_FREE = 0      # in the graph, list on disk
_KEPT = 1      # in the graph, its neighbours still in the graph are in the store
_LOADING = 2   # in the graph, its list is being read into the store (during a superstep)
_PENDING = 3   # removed (core number set), list not applied yet: read in the next superstep
_DONE = 4      # removed, list applied


@njit(cache=True)
def _next_level_k(deg, alive, queue, c):
    """Compact the alive list and find its minimum degree, the next level (every alive vertex has a
    degree above the finished level; removed vertices have degree `gone` < 0); queue the vertices
    of that degree. One pass. False when no vertex is left."""
    m = 0
    lo = np.iinfo(np.int64).max
    t = 0
    for i in range(c[6]):
        v = alive[i]
        d = deg[v]
        if d >= 0:
            alive[m] = v
            m += 1
            if d <= lo:
                if d < lo:
                    lo = d
                    t = 0
                queue[t] = v
                t += 1
    c[6] = m
    if m == 0:
        return False
    if lo > c[7]:
        c[7] = lo
    c[3] = 0
    c[4] = t
    return True


@njit(cache=True)
def _peel_queue(deg, core, state, kslot, store, queue, pending, c, gone):
    """Remove the queued vertices at the current level: a kept one at once (its stored neighbours
    lose a degree; those reaching the level join the queue), one with no neighbours left too; the
    others become pending (their lists are read in the next superstep). A removed vertex's degree
    becomes `gone` (far below 0), so stale stored entries need no state check."""
    k = c[7]
    while c[3] < c[4]:
        v = queue[c[3]]
        c[3] += 1
        s = state[v]
        if s >= _PENDING:
            continue
        core[v] = k
        if s == _KEPT:
            state[v] = _DONE
            deg[v] = gone
            a = np.int64(kslot[0, v])
            for p in range(a, a + np.int64(kslot[1, v])):
                u = store[p]
                d = deg[u] - 1
                deg[u] = d
                if d == k:
                    queue[c[4]] = u
                    c[4] += 1
        elif deg[v] == 0:
            state[v] = _DONE
            deg[v] = gone
        else:
            state[v] = _PENDING
            deg[v] = gone
            pending[c[5]] = v
            c[5] += 1


@njit(cache=True)
def _compact_store(state, kslot, store, korder, c):
    """Squeeze the kept vertices' slices together, dropping removed vertices and neighbours."""
    top = 0
    m = 0
    for i in range(c[2]):
        v = korder[i]
        if state[v] != _KEPT:
            continue
        a = np.int64(kslot[0, v])
        b = a + np.int64(kslot[1, v])
        kslot[0, v] = top
        for p in range(a, b):
            u = store[p]
            if state[u] < _PENDING:
                store[top] = u
                top += 1
        kslot[1, v] = top - np.int64(kslot[0, v])
        korder[m] = v
        m += 1
    c[1] = top
    c[2] = m


@njit(cache=True)
def _select_keep(deg, state, alive, hist, kslot, store, korder, cap, c):
    """Vertices whose lists the next superstep also reads and keeps: the alive free ones of lowest
    degree (the next to be removed), whole degree classes, as many as the budget allows (`cap`
    stored entries minus the kept vertices' live entries, i.e. their degrees). Reserves their
    slices of the store (compacting it first when its free tail is too short)."""
    used = 0
    for i in range(c[6]):
        v = alive[i]
        s = state[v]
        if s == _FREE:
            hist[deg[v]] += deg[v]
        elif s == _KEPT:
            used += deg[v]
    c[0] = used
    room = cap - used
    th = -1
    acc = 0
    for d in range(hist.shape[0]):
        if acc + hist[d] > room:
            break
        acc += hist[d]
        th = d
    hist[:] = 0
    if th < 0 or acc == 0:
        return np.empty(0, dtype=np.int64)
    if c[1] + acc > store.shape[0]:
        _compact_store(state, kslot, store, korder, c)
    cnt = 0
    for i in range(c[6]):
        v = alive[i]
        if state[v] == _FREE and deg[v] <= th:
            cnt += 1
    out = np.empty(cnt, dtype=np.int64)
    cnt = 0
    for i in range(c[6]):
        v = alive[i]
        if state[v] == _FREE and deg[v] <= th:
            state[v] = _LOADING
            kslot[0, v] = c[1]
            kslot[1, v] = 0
            c[1] += deg[v]
            korder[c[2]] = v
            c[2] += 1
            out[cnt] = v
            cnt += 1
    return out


@njit(cache=True)
def _read_round(v, nbrs, wts, tid, st):
    """One chunk of a list read in a superstep: a pending vertex decrements its alive neighbours
    (this thread's row + touched bitmap); a loading vertex appends its alive neighbours to its
    slice of the store (chunks come in any order, on any thread: one fetch-and-add per chunk)."""
    state, A, T, sh, kslot, store, P, nw = st
    s = state[v]
    if s == _PENDING:
        one = A.dtype.type(1)
        mask = (1 << sh) - 1
        brow = T + tid // P                 # this thread's bitmap: words boff.. of row brow
        boff = (tid % P) * nw
        for i in range(nbrs.shape[0]):
            u = np.int64(nbrs[i])
            if state[u] < _PENDING:
                if A[tid, u] == 0:
                    A[brow, boff + (u >> sh)] |= one << (u & mask)
                A[tid, u] += 1
    elif s == _LOADING:
        cnt = 0
        for i in range(nbrs.shape[0]):
            if state[np.int64(nbrs[i])] < _PENDING:
                cnt += 1
        if cnt == 0:
            return
        p = np.int64(kslot[0, v]) + np.int64(atomic_add2(kslot, 1, v, kslot.dtype.type(cnt)))
        for i in range(nbrs.shape[0]):
            u = nbrs[i]
            if state[np.int64(u)] < _PENDING:
                store[p] = u
                p += 1


@njit(cache=True)
def _after_read(deg, state, A, T, sh, P, nw, kslot, pending, loading, queue, c):
    """Apply the superstep's decrements (serially: a vertex whose degree falls from above the level
    to it or below joins the queue once); pending vertices are done, loading ones kept. Returns a
    loaded vertex whose stored count is not its degree (lists and degrees disagree), else -1."""
    k = c[7]
    B = 1 << sh
    wmask = np.uint64((1 << B) - 1) if B < 64 else ~np.uint64(0)
    for t in range(T):
        brow = T + t // P
        boff = (t % P) * nw
        for w in range(nw):
            x = np.uint64(A[brow, boff + w]) & wmask
            if x == 0:
                continue
            A[brow, boff + w] = 0
            base = w << sh
            while x != 0:
                low = x & (~x + np.uint64(1))
                u = base + np.int64(ctz64(x))
                x ^= low
                d = A[t, u]
                A[t, u] = 0
                old = deg[u]
                deg[u] = old - d
                if old > k and old - d <= k:
                    queue[c[4]] = u
                    c[4] += 1
    for i in range(c[5]):
        state[pending[i]] = _DONE
    c[5] = 0
    bad = -1
    for i in range(loading.shape[0]):
        v = loading[i]
        state[v] = _KEPT
        if np.int64(kslot[1, v]) != np.int64(deg[v]):
            bad = v
    return bad
