"""k-core decomposition: the core number of every vertex, by peeling (Graphene §4.7); or, with
`membership_only=True`, just the K-core for one K (what the C++ prototype computes).

Computes: `core_number` int64[n]: the largest k such that the vertex belongs to the k-core (the
maximal subgraph in which every vertex has degree >= k). Degree = in + out on directed datasets
(NetworkX's convention for DiGraph), the number of neighbours on undirected ones; self-loops and
duplicate edges were dropped at partition time. With `k=K` also `in_k_core` (bool[n], core >= K)
and `k_core_size`. `membership_only=True` (needs k; CLI `--k K --membership-only`): only
`in_k_core` and `k_core_size`; `core_number` and `max_core` are None.
Returns: KCoreResult(core_number, max_core, k, in_k_core, k_core_size, membership_only, rounds,
kept_lists, [keep_edges], supersteps, seconds); `rounds` counts the rounds of list reads (one
superstep per direction streamed).

Full decomposition (Batagelj-Zaversnik order, levels k = 0, 1, ...: every vertex of degree <= k is
removed with core number k, its removal lowers its neighbours' degrees, and the level ends when no
vertex of degree <= k is left). Graphene reads a removed vertex's list from the SSD to apply it;
doing that level by level means ~750 small supersteps on Kronecker scale 22, most of them reading
scattered 512-byte blocks (io utility 0.15). Instead, lists are kept in RAM: every superstep that
has to read lists anyway (those of the removed vertices not kept: "pending") also reads and keeps
the lists of the alive vertices of lowest degree (the next to be removed), whole degree classes,
within a budget of `keep_edges` stored neighbour IDs (default 4n: 16 bytes per vertex; only the
neighbours still in the graph are stored). A kept vertex is removed at once in RAM (its stored
neighbours lose a degree; cascades continue in RAM), so supersteps are needed only when a removed
vertex was not kept: 6 on kron22 (1.3 GB read instead of 3.5 GB; SSD 1x1 12.9 s -> 2.9 s, in
memory 4.3 s -> 2.1 s, the serial in-RAM peeling now being the largest part). When the rest fits
the budget, it is all kept and the peeling ends in RAM. Superstep kernels: a pending vertex's chunk
decrements its alive neighbours in per-thread rows with per-thread touched bitmaps (no atomics,
serial merge: a vertex reaching the level joins the queue once); a loading vertex's chunk appends
its alive neighbours to its slice of the store (one fetch-and-add per chunk: chunks of one list
arrive in any order on any thread); removed vertices with no neighbours left are not read. The
store is compacted (dropping removed vertices) when a selection does not fit its free tail.
`keep_edges=0` reads every removed vertex's list (one superstep per round of every level);
`tail_edges` is the old name of `keep_edges`. Directed datasets: the frontier's out-lists and
in-lists are streamed (in-edge partitions). Without in-edge partitions every round streams every
alive vertex's out-list (Frontier.all) and counts, per vertex, its removed out-neighbours (one full
pass per round; partition with --in-edges); there `keep_edges` (default n) is the size of the rest
at which it is gathered and finished in RAM.

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
After the last round, degree >= K <=> in the K-core (a member's degree is then its degree inside
the K-core).
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

from .common import Result, frontier_class as _frontier, open_unweighted as _open


class KCoreResult(Result):
    MAIN = "core_number"


#: Full decomposition: default RAM budget for kept lists, in stored neighbour IDs per vertex
#: (4-byte IDs: 16 bytes per vertex).
KEEP_PER_VERTEX = 4
#: One k, SSD path: round 1 also keeps the lists of degree K .. K+KEEP_BAND-1 (lowest first), at
#: most 1/KEEP_SHARE of round 1's edges and at most n entries.
KEEP_SHARE = 16
KEEP_BAND = 16


def run_gpu(graph, *, k=None, gpu_mem=None, progress=None, **_ignored) -> KCoreResult:
    """Core numbers on the GPU (peeling); with k also the K-core's membership."""
    from ..gpu import algorithms as A
    from ..gpu.resident import gpu_steps, timed
    if k is not None and int(k) < 0:
        raise GrapheneError("--k must be >= 0")
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    st: dict = {}
    core = A.kcore(dg, stats=st)
    return KCoreResult(core_number=core, max_core=int(core.max()) if len(core) else 0,
                       k=None if k is None else int(k),
                       in_k_core=None if k is None else core >= int(k),
                       rounds=st.get("rounds", 0), supersteps=gpu_steps(st, progress),
                       seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu")


def run(graph, *, device="cpu", in_memory=False, k=None, membership_only=False, keep_edges=None,
        tail_edges=None, **runtime) -> KCoreResult:
    """Core numbers of every vertex (membership_only: only the K-core for k=K). keep_edges: RAM
    budget of the full decomposition for kept lists, in neighbour IDs (default 4n; 0: none;
    tail_edges: its old name)."""
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    if k is not None and int(k) < 0:
        raise GrapheneError(f"k must be >= 0 (got {k})")
    if keep_edges is None:
        keep_edges = tail_edges
    if keep_edges is not None and int(keep_edges) < 0:
        raise GrapheneError(f"keep_edges must be >= 0 (got {keep_edges})")
    t0 = time.perf_counter()
    if membership_only:
        if k is None:
            raise GrapheneError("membership_only needs k (which core to compute: --k K)")
        return _run_membership(graph, k, in_memory, runtime, progress, t0)
    n = graph.num_vertices
    if graph.directed and graph.in_partitions is None:
        budget = n if keep_edges is None else int(keep_edges)
        return _run_scan(graph, budget, in_memory, runtime, progress, t0, k)
    budget = KEEP_PER_VERTEX * n if keep_edges is None else int(keep_edges)
    dirs = ["out", "in"] if graph.directed else ["out"]
    return _run_full(graph, dirs, budget, in_memory, runtime, progress, t0, k)


def _result(core, k, rounds, steps, t0, **extra):
    n = len(core)
    in_k = None if k is None else core >= int(k)
    return KCoreResult(core_number=core, max_core=int(core.max()) if n else 0,
                       k=None if k is None else int(k), in_k_core=in_k,
                       k_core_size=None if k is None else int(np.count_nonzero(in_k)),
                       membership_only=False, rounds=rounds, **extra, supersteps=steps,
                       seconds=time.perf_counter() - t0)


# -- shared helpers ------------------------------------------------------------------------------
def _record(steps, progress, st, level, removed):
    st = dict(st)
    st.update(k=level, removing=int(removed))
    steps.append(st)
    if progress is not None:
        progress(st)


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _add_degrees(deg, off, row_lo):
    for i in range(off.shape[0] - 1):
        deg[row_lo + i] += np.int64(off[i + 1]) - np.int64(off[i])


@intrinsic
def _atomic_add2(typingctx, ary, i, j, val):
    """atomic_add on a 2-D array element (fetch-and-add, monotonic; returns the old value)."""
    ok = isinstance(ary, types.Array) and ary.ndim == 2 and isinstance(ary.dtype, types.Integer)
    if not ok:
        return None
    sig = ary.dtype(ary, types.intp, types.intp, ary.dtype)

    def codegen(context, builder, signature, args):
        arr, ii, jj, v = args
        aty = signature.args[0]
        a = context.make_array(aty)(context, builder, arr)
        ptr = cgutils.get_item_pointer(context, builder, aty, a, [ii, jj])
        return builder.atomic_rmw("add", ptr, v, "monotonic")

    return sig, codegen


# de Bruijn count of trailing zeros: walks the set bits of the touched-vertex bitmaps
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_CTZ = np.zeros(64, dtype=np.int64)
for _i in range(64):
    _CTZ[((1 << _i) * 0x03F79D71B4CB0A89 % (1 << 64)) >> 58] = _i


# -- full decomposition with kept lists ----------------------------------------------------------
def _run_full(graph, dirs, budget, in_memory, runtime, progress, t0, k):
    from ..iterator import Frontier
    n = graph.num_vertices
    steps = []
    rounds = 0
    kept = 0
    core = np.zeros(n, dtype=np.int64)
    its = [_open(graph, d, in_memory, runtime) for d in dirs] if n else []
    try:
        T = max([it.threads for it in its] or [1])
        wide = graph.num_edges >= (1 << 30) or n >= (1 << 31)
        dt = np.int64 if wide else np.int32          # degrees, decrements, bitmap words
        sh = 6 if wide else 5                          # log2(bits per bitmap word)
        idt = np.int64 if n >= (1 << 31) else np.int32   # vertex IDs
        deg = np.zeros(n, dtype=dt)
        for d in dirs:
            for p in graph.parts(d):   # offsets already in RAM (the iterators loaded them)
                _add_degrees(deg, p.offsets(), p.row_lo)
        cap = max(0, min(int(budget), int(deg.sum(dtype=np.int64))))
        state = np.zeros(n, dtype=np.uint8)     # _FREE .. _DONE
        A = np.zeros((2 * T, n), dtype=dt)      # rows 0..T-1 decrements, T..2T-1 touched bitmaps
        kdt = np.int64 if cap >= (1 << 31) else np.int32
        kslot = np.zeros((2, n), dtype=kdt)     # kept vertex: start of its slice, entries stored
        store = np.empty(cap, dtype=idt)
        korder = np.empty(n, dtype=idt)         # kept vertices in store order (for compaction)
        alive = np.arange(n, dtype=idt)
        queue = np.empty(n, dtype=idt)
        pending = np.empty(n, dtype=idt)
        hist = np.zeros(int(deg.max()) + 2 if n else 1, dtype=np.int64)
        # counters: [0] live kept entries (as of the last selection), [1] store top, [2] kept
        # vertices in korder, [3] queue head, [4] queue tail, [5] pending, [6] alive, [7] level
        c = np.zeros(8, dtype=np.int64)
        c[6] = n
        gone = dt(-(1 << 62) if wide else -(1 << 30))   # degree of a removed vertex (stays < 0)
        kstate = (state, A, np.int64(T), np.int64(sh), kslot, store)
        while True:
            if c[3] == c[4] and not _next_level_k(deg, alive, queue, c):
                break
            _peel_queue(deg, core, state, kslot, store, queue, pending, c, gone)
            if c[5] == 0:
                continue
            loading = _select_keep(deg, state, alive, hist, kslot, store, korder, cap, c)
            npend = int(c[5])
            fr = Frontier.from_queue(np.concatenate([pending[:npend], loading]), n)
            got = []          # stored entries of the loading vertices after each direction
            for it in its:
                st = it.run(_always, _read_round, kstate, fr)
                st["kept"] = len(loading)
                _record(steps, progress, st, int(c[7]), npend)
                if len(its) > 1:
                    got.append(kslot[1, loading].astype(np.int64))
            rounds += 1
            kept += len(loading)
            bad = _after_read(deg, state, A, T, sh, kslot, pending, loading, queue, c)
            if bad >= 0:
                raise GrapheneError(_disagree(graph, dirs, state, kslot, deg, loading, got, bad))
    finally:
        for it in its:
            it.close()
    return _result(core, k, rounds, steps, t0, kept_lists=kept, keep_edges=int(budget))


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
    state, A, T, sh, kslot, store = st
    s = state[v]
    if s == _PENDING:
        one = A.dtype.type(1)
        mask = (1 << sh) - 1
        for i in range(nbrs.shape[0]):
            u = np.int64(nbrs[i])
            if state[u] < _PENDING:
                if A[tid, u] == 0:
                    A[T + tid, u >> sh] |= one << (u & mask)
                A[tid, u] += 1
    elif s == _LOADING:
        cnt = 0
        for i in range(nbrs.shape[0]):
            if state[np.int64(nbrs[i])] < _PENDING:
                cnt += 1
        if cnt == 0:
            return
        p = np.int64(kslot[0, v]) + np.int64(_atomic_add2(kslot, 1, v, kslot.dtype.type(cnt)))
        for i in range(nbrs.shape[0]):
            u = nbrs[i]
            if state[np.int64(u)] < _PENDING:
                store[p] = u
                p += 1


@njit(cache=True)
def _after_read(deg, state, A, T, sh, kslot, pending, loading, queue, c):
    """Apply the superstep's decrements (serially: a vertex whose degree falls from above the level
    to it or below joins the queue once); pending vertices are done, loading ones kept. Returns a
    loaded vertex whose stored count is not its degree (lists and degrees disagree), else -1."""
    k = c[7]
    B = 1 << sh
    wmask = np.uint64((1 << B) - 1) if B < 64 else ~np.uint64(0)
    for t in range(T):
        for w in range((A.shape[1] + B - 1) >> sh):
            x = np.uint64(A[T + t, w]) & wmask
            if x == 0:
                continue
            A[T + t, w] = 0
            base = w << sh
            while x != 0:
                low = x & (~x + np.uint64(1))
                u = base + _CTZ[(low * _DEBRUIJN) >> np.uint64(58)]
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


# -- full decomposition, directed dataset without in-edges ---------------------------------------
def _run_scan(graph, budget, in_memory, runtime, progress, t0, k):
    """Rounds of level k stream every alive vertex's out-list (in-neighbours are not stored); the
    rest is gathered and finished in RAM once it has at most `budget` incidences."""
    Frontier = _frontier()
    n = graph.num_vertices
    steps = []
    deg = graph.degrees("out") + _in_degrees(graph, in_memory, runtime, steps, progress)
    core = np.zeros(n, dtype=np.int64)
    status = np.zeros(n, dtype=np.uint8)     # 0 alive, 1 being removed this round, 2 removed
    rounds = 0
    its = [_open(graph, "out", in_memory, runtime)] if n else []
    try:
        T = max([it.threads for it in its] or [1])
        dec = np.zeros((T, n), dtype=np.int64)
        touched = np.empty((T, n), dtype=np.int64)
        ntouched = np.zeros(T, dtype=np.int64)
        alive = np.arange(n, dtype=np.int64)
        level = 0
        while True:
            alive, lo = _next_level(deg, status, alive)
            if len(alive) == 0:
                break
            if budget > 0 and int(deg[alive].sum()) <= budget:
                _finish_in_memory(its, alive, deg, status, core, steps, progress, level)
                rounds += 1
                break
            level = max(level, int(lo))
            frontier = _select(deg, status, alive, level)
            while len(frontier):
                if int(deg[frontier].max()) > 0:   # else no alive neighbours left: nothing to do
                    st = its[0].run(_always, _decrement_both,
                                    (status, dec, touched, ntouched), Frontier.all(n))
                    _record(steps, progress, st, level, len(frontier))
                rounds += 1
                frontier = _apply(deg, status, dec, touched, ntouched, level, core, frontier)
    finally:
        for it in its:
            it.close()
    return _result(core, k, rounds, steps, t0, keep_edges=int(budget))


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


@njit(cache=True)
def _alive(v, state):
    return state[0][v] == 0


@njit(cache=True)
def _gather(v, nbrs, wts, tid, state):
    """Append (v, u) and (u, v) for every alive out-neighbour u of an alive v."""
    status, ga, gb, tail = state
    c = 0
    for i in range(len(nbrs)):
        if status[np.int64(nbrs[i])] == 0:
            c += 1
    if c == 0:
        return
    k = _add(tail, 0, np.int64(2 * c))
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if status[u] == 0:
            ga[k] = v
            gb[k] = u
            ga[k + 1] = u
            gb[k + 1] = v
            k += 2


def _finish_in_memory(its, alive, deg, status, core, steps, progress, level):
    """The alive subgraph has at most `budget` (default n) incidences: read it once (one streamed
    superstep), then finish the peeling in memory with Batagelj-Zaversnik. Every alive vertex has
    degree > level here, so its core number in the remaining subgraph is its core number in the
    graph (the peeling below continues exactly where the rounds stopped)."""
    from ..iterator import Frontier
    n = len(deg)
    m = int(deg[alive].sum())
    ga = np.empty(m, dtype=np.int64)
    gb = np.empty(m, dtype=np.int64)
    tail = np.zeros(1, dtype=np.int64)
    st = its[0].run(_alive, _gather, (status, ga, gb, tail), Frontier.all(n))
    _record(steps, progress, st, level, 0)
    if int(tail[0]) != m:
        raise GrapheneError(f"k-core: gathered {int(tail[0])} incidences of the remaining "
                            f"subgraph, expected {m} (dataset degrees and lists disagree)")
    sub = _peel_serial(n, ga, gb)
    core[alive] = sub[alive]
    status[alive] = 2


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


# -- one k -----------------------------------------------------------------------------------------
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
        rows = 1 + 2 * T + (3 if keep_ok else 0) + 1     # the last row: bitmap degree >= K
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
                count = int(_peel_kept(A, T, sh, dt(kk), status, starts, crossed[:m], front_buf))
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
        p = np.int64(_atomic_add2(A, 2 * T + 2, j, A.dtype.type(nbrs.shape[0])))
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
                u = base + _CTZ[(low * _DEBRUIJN) >> np.uint64(58)]
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


# -- verification --------------------------------------------------------------------------------
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
    click.Option(["--k", "k"], type=click.IntRange(min=0), default=None,
                 help="Also report membership of the K-core (core number >= K; K >= 0)."),
    click.Option(["--membership-only", "membership_only"], is_flag=True, default=False,
                 help="With --k K: compute only the K-core (peel degree < K until stable; no core "
                      "numbers). Much faster than the full decomposition."),
    click.Option(["--keep-edges", "keep_edges"], type=click.IntRange(min=0), default=None,
                 help="Full decomposition: RAM budget for adjacency lists kept in memory, in "
                      "neighbour IDs (default 4 per vertex; 0: read every removed vertex's list)."),
]
