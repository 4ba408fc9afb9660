"""Multi-source BFS / APSP sampling, bit-parallel (iBFS, Liu et al. SIGMOD'16; Graphene §4.7 APSP).

Computes: BFS depths from S sources at once over out-edges: `depths` int32[S, n] (-1 = unreached;
an `np.memmap` .npy file when `output=` is given), `sources` int64[S], `reached` int64[S], and with
`closeness=True` the closeness of every source (outgoing distances, Wasserman-Faust scaled like
NetworkX: ((r-1)/(n-1)) * ((r-1)/sum of depths), r = vertices reached including the source).
Returns: MSBFSResult(sources, depths, reached, closeness, passes, supersteps, seconds).

Algorithm: up to 64 sources per pass share every traversal: bit i of a vertex's word means
"source i" (uint32 words when a pass has <= 32 sources, else uint64: half the memory traffic).
`frontier[v]` holds the sources that reached v in the previous level, `visited[v]` all that reached
v before it, `nxt[v]` those found in the current level. One superstep per level, in one of two
directions (iBFS's top-down / bottom-up, Beamer's direction optimisation):
- top-down: the lists of the vertices with a non-zero frontier word are streamed once (one IO for
  all the BFSs, the point of iBFS) and frontier[v] & ~visited[u] is atomically ORed into nxt[u]
  (after a plain read shows it adds bits);
- bottom-up (iBFS's "bottom-up with early termination"): every vertex v that still wants bits
  (live & ~visited[v] != 0, `live` = the sources with a non-empty frontier) reads its in-list (the
  out-list on an undirected dataset) and ORs frontier[u] over it, stopping as soon as every wanted
  bit is found; the bits go into nxt[v] with one atomic OR (another chunk of v's list may race).
Short in-lists stay in RAM once read: the lists of degree 1..D, D as large as fits in n entries
(their counts included; D = 5 at scale 22), are copied into a cache by the bottom-up level that
reads them (chunks of one list claim slots with an atomic add); from then on a bottom-up level
serves those vertices from the cache (_pull_cached, on a helper thread next to the superstep) and
reads only the other lists. The late levels are mostly such vertices: at scale 22 the fifth level
reads 9 KB instead of 244 MB.
The level runs bottom-up when it reads no more bytes by bfs.py's IO cost model (deg*id_width + one
512-byte block per list piece, capped at the adjacency bytes), ties included (bottom-up also
computes less: early exit, no scattered writes); directed datasets without in-edges stay top-down.
On Kronecker scale 22 with 32 sources (depths 1..7) the dense level 3 reads the whole file either
way (bottom-up scans half its edges: early exit), levels 4-6 read 338 MB, 9 KB and nothing
bottom-up instead of 513, 341 and 243 MB top-down (864 MB in all instead of 1.62 GB).
After a level one serial pass moves nxt into frontier/visited, builds both candidate masks with
their costs, and appends the non-zero nxt words to a log: (vertex, word) in vertex order per level.
Depths are written from the log, not by the kernels: writing a level's bits straight into the k
rows of depths[k, n] pulls every row's cache lines in again per dense level (half the kernel time);
instead _write_depths builds the depths of 1024 vertices x k sources in an L2-resident tile from
all logged levels and stores it once (-1 for the bits never set, so depths needs no -1 fill), on
T threads; it starts in the background once the levels shrink (the dense ones are logged then) and
overlaps the remaining levels; later levels, a full log (2n entries) or 256 levels of it
(long chains) are written directly. The same pass counts `reached` and sums the depths per source.
Fresh memory is slow to fault in here (up to 1 s for the 512 MiB of depths as transparent huge
pages), so depths gets 4 KB pages (MADV_NOHUGEPAGE: it is written once, sequentially) and a helper
thread at idle priority prefaults the log and depths (MADV_POPULATE_WRITE) while the supersteps
wait on IO.
Sources beyond 64 run in further passes. Default sources: 32 random vertices of non-zero
out-degree from config.SEED (GAPBS's habit), distinct; `sources=[...]` picks them.
"""
from __future__ import annotations

import time

import click
import numpy as np
from numba import njit

from .. import config
from ..errors import GrapheneError
from ..io.bitmap import ctz64
from ..iterator.atomics import atomic_add as _add, atomic_or as _or
from ..iterator.cost import Model, list_cost, pull_direction
from ..iterator.memory import Side, populate_async, small_pages, track

from .common import Result
from .reference import serial_bfs_depth

DEFAULT_SOURCES = 32


CLUSTER = True     # runs on a cluster (every superstep through the engine contract)

class MSBFSResult(Result):
    MAIN = "depths"
    PER_VERTEX = False      # depths is [sources, n]; sources, reached, closeness are per source

    def scalars(self) -> dict:
        d = super().scalars()
        clo = getattr(self, "closeness", None)
        if clo is not None and len(clo):
            d["closeness_mean"] = float(np.mean(clo))
        return d

    def to_json(self, per_superstep: bool = False) -> dict:
        d = super().to_json(per_superstep)
        d["sources"] = [int(x) for x in np.asarray(self.sources)]
        d["reached"] = [int(x) for x in np.asarray(self.reached)]
        clo = getattr(self, "closeness", None)
        if clo is not None:
            d["closeness"] = [float(x) for x in np.asarray(clo)]
        return d

    def summary_lines(self, top: int = 10) -> list:
        clo = getattr(self, "closeness", None)
        if clo is None or not len(clo):
            return []
        clo = np.asarray(clo)
        src = np.asarray(self.sources)
        order = np.argsort(-clo, kind="stable")[:top]
        best = ", ".join(f"{int(src[i])} {clo[i]:.6g}" for i in order)
        return [f"closeness over {len(clo)} source(s): mean {float(clo.mean()):.6g}, "
                f"min {float(clo.min()):.6g}, max {float(clo.max()):.6g}",
                f"top {len(order)} (vertex closeness): {best}"]


# ---------------------------------------------------------------------------------------------
# state = (frontier, visited, nxt, livew, live, cache, cstart, cdone)
#   livew: uint64[T + 1, 8], row t = OR of the bits thread t set this level (64-byte rows; row T:
#   the pass over cached lists); live: uint64[1], the sources with a non-empty frontier;
#   cache / cstart / cdone: the short in-lists kept in RAM (see _cache_layout; cdone[v]: v's list
#   is complete there)
@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _push(v, nbrs, wts, tid, state):
    """Top-down: v's sources reach its out-neighbours."""
    frontier, visited, nxt, livew, live, cache, cstart, cdone = state
    f = np.uint64(frontier[v])
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        new = f & ~np.uint64(visited[u])
        if new != np.uint64(0) and new & ~np.uint64(nxt[u]) != np.uint64(0):
            got = new & ~np.uint64(_or(nxt, u, new))
            livew[tid, 0] |= got


@njit(cache=True, inline="always")
def _gather(v, nbrs, frontier, visited, nxt, live):
    """The wanted frontier bits among nbrs (early exit once all are found), or 0."""
    want = live & ~np.uint64(visited[v]) & ~np.uint64(nxt[v])
    if want == np.uint64(0):
        return want
    acc = np.uint64(0)
    for i in range(nbrs.shape[0]):
        acc |= np.uint64(frontier[np.int64(nbrs[i])])
        if acc & want == want:
            break
    return acc & want


@njit(cache=True)
def _pull(v, nbrs, wts, tid, state):
    """Bottom-up: v collects the frontier bits of its in-neighbours it still wants; early exit.
    A short list (a cache slot) is copied into the cache on the way: from the next bottom-up level
    on, v is served from RAM (_pull_cached) and its blocks are no longer read."""
    frontier, visited, nxt, livew, live, cache, cstart, cdone = state
    c0 = cstart[v]
    c1 = cstart[v + 1]
    if c1 > c0 and cdone[v] == 0:
        m = nbrs.shape[0]
        k = c0 + 1 + np.int64(_add(cache, c0, m))    # chunks of one list may race
        if k + m <= c1:
            for i in range(m):
                cache[k + i] = nbrs[i]
            if k + m == c1:                          # the chunk that completes the list
                cdone[v] = 1
    got = _gather(v, nbrs, frontier, visited, nxt, live[0])
    if got != np.uint64(0):
        _or(nxt, v, got)
        livew[tid, 0] |= got


from ..iterator.edgemap import EdgeMap, Update  # noqa: E402

#: (state: frontier, visited, nxt, livew, live, cache, cstart, cdone) found bits or into nxt and
#: into the per-thread `live` rows; the short-list cache is this process's own (not a cluster's)
PUSH = Update(_always, _push, combine="or", writes=(2, 3))
PULL = Update(_always, _pull, combine="or", writes=(2, 3))


@njit(cache=True, nogil=True)
def _pull_cached(m_c, state):
    """Bottom-up for the vertices flagged in m_c, whose whole in-lists are in the cache (run next
    to the superstep, which reads the other wanted vertices' lists)."""
    frontier, visited, nxt, livew, live, cache, cstart, cdone = state
    lv = live[0]
    row = livew.shape[0] - 1
    for v in range(m_c.shape[0]):
        if m_c[v] != 0:
            got = _gather(v, cache[cstart[v] + 1:cstart[v + 1]], frontier, visited, nxt, lv)
            if got != np.uint64(0):
                _or(nxt, v, got)
                livew[row, 0] |= got


@njit(cache=True)
def _cache_layout(deg, budget, cstart):
    """Slots for the in-lists of the vertices of degree 1..D (a count, then the IDs) in one array
    of at most `budget` entries, D as large as fits: cstart[v]..cstart[v+1] is v's slot (empty
    above D). Returns (D, entries)."""
    hist = np.zeros(257, dtype=np.int64)
    for v in range(deg.shape[0]):
        hist[min(deg[v], 256)] += 1
    D = 0
    tot = 0
    for d in range(1, 256):
        if tot + hist[d] * (d + 1) > budget:
            break
        tot += hist[d] * (d + 1)
        D = d
    cstart[0] = 0
    c = 0
    for v in range(deg.shape[0]):
        d = deg[v]
        if 0 < d <= D:
            c += d + 1
        cstart[v + 1] = c
    return D, c


@njit(cache=True)
def _advance(nxt, frontier, visited, live, deg_out, deg_in, w, cols_out, cols_in, block, m_td, m_bu,
             up, logv, logw, pos, cdone, m_c):
    """End of a level: nxt becomes the frontier (frontier is zeroed to serve as the next nxt),
    visited |= nxt, and every non-zero nxt word is appended to the log (logv/logw from `pos`, in
    vertex order); m_td / m_bu: who is active for a top-down / bottom-up next level (m_bu only
    when `up`; vertices whose in-list is complete in the cache go to m_c instead), with their
    estimated bytes (iterator/cost.py's list_cost). Returns (#vertices discovered, top-down bytes,
    bottom-up bytes, #vertices in m_c)."""
    n = nxt.shape[0]
    cnt = 0
    for v in range(n):        # the log in a loop of its own (the main loop vectorizes), branch-free:
        f = nxt[v]            # every word is stored, the cursor moves on over non-zero ones
        logv[pos + cnt] = v   # (pos + n <= capacity: _Log.room)
        logw[pos + cnt] = f
        cnt += f != 0
    c_td = 0
    c_bu = 0
    n_c = 0
    for v in range(n):
        f = nxt[v]
        frontier[v] = 0
        vis = visited[v] | f
        visited[v] = vis
        d = deg_out[v]
        a = f != 0 and d > 0
        m_td[v] = a
        if a:
            c_td += list_cost(d, w, cols_out, block)
        if up:
            d = deg_in[v]
            b = live & ~np.uint64(vis) != np.uint64(0) and d > 0
            c = b and cdone[v] != 0
            b = b and not c
            m_bu[v] = b
            m_c[v] = c
            n_c += c
            if b:
                c_bu += list_cost(d, w, cols_in, block)
    return cnt, c_td, c_bu, n_c


_TILE = 1024


@njit(cache=True, nogil=True)
def _write_depths(drow, logv, logw, seg_lo, seg_level, lo, hi, init, cnt, sm):
    """Depths of the logged levels for the vertices [lo, hi): segment j = log entries
    seg_lo[j]..seg_lo[j+1] (sorted by vertex), found at depth seg_level[j]. Counts the bits per
    source (cnt) and sums their depths (sm). init: every drow[:, lo:hi] entry is written once, -1
    where no segment sets it, through an L2-resident tile of _TILE vertices (writing each level
    straight into the k rows would pull every row's lines in again per level); else only the
    logged entries are written."""
    k = drow.shape[0]
    nseg = seg_level.shape[0]
    cur = np.empty(nseg, np.int64)
    for j in range(nseg):
        a = seg_lo[j]
        cur[j] = a + np.searchsorted(logv[a:seg_lo[j + 1]], lo)
    one = np.uint64(1)
    if not init:
        for j in range(nseg):
            lvl = seg_level[j]
            for p in range(cur[j], seg_lo[j + 1]):
                v = logv[p]
                if v >= hi:
                    break
                x = np.uint64(logw[p])
                while x != np.uint64(0):
                    b = ctz64(x)
                    drow[b, v] = lvl
                    cnt[b] += 1
                    sm[b] += lvl
                    x &= x - one
        return
    tb = np.empty((k, _TILE + 16), dtype=np.int32)    # padded rows: no cache-set aliasing
    for t0 in range(lo, hi, _TILE):
        m = min(_TILE, hi - t0)
        t1 = t0 + m
        for b in range(k):
            tb[b, :m] = -1
        for j in range(nseg):
            lvl = seg_level[j]
            e = seg_lo[j + 1]
            p = cur[j]
            while p < e:
                v = logv[p]
                if v >= t1:
                    break
                x = np.uint64(logw[p])
                while x != np.uint64(0):
                    b = ctz64(x)
                    tb[b, v - t0] = lvl
                    cnt[b] += 1
                    sm[b] += lvl
                    x &= x - one
                p += 1
            cur[j] = p
        for b in range(k):
            drow[b, t0:t1] = tb[b, :m]


# ---------------------------------------------------------------------------------------------
def pick_sources(graph, count=DEFAULT_SOURCES, seed=config.SEED, deg=None):
    """`count` distinct random vertices with out-degree > 0 (all of them when fewer exist).
    deg: the out-degrees when the caller has them already."""
    if deg is None:
        deg = graph.degrees("out")
    cand = np.flatnonzero(deg > 0)
    if len(cand) <= count:
        return cand.astype(np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(cand, size=count, replace=False)).astype(np.int64)


#: a flush of the level log is forced after this many levels (bounds _write_depths' cursors)
_MAX_LOG_LEVELS = 256


class _Log:
    """The words found per level, (vertex, word) in vertex order, until they are written into the
    pass's depths rows `drow` (_write_depths). The first flush writes every entry of the rows once
    (-1 included, so the rows need no prior fill), tile by tile on `threads` threads; later ones
    only the logged bits. A flush runs when the log is full (2n entries, or _MAX_LOG_LEVELS
    levels) and at the end; `flush(background=True)` lets it run on while the next supersteps
    stream (the caller starts one once the levels shrink: the dense ones are logged by then)."""

    def __init__(self, n, wdt, threads, drow, reached, sums):
        cap = max(2 * n, 1024)
        self.v = np.empty(cap, dtype=np.int32 if n < (1 << 31) else np.int64)
        self.w = np.empty(cap, dtype=wdt)
        track("depth log", self.v, self.w)
        self.n = n
        self.threads = max(1, int(threads))
        self.drow, self.reached, self.sums = drow, reached, sums
        self.pos = 0            # next free entry
        self.lo = 0             # first entry not handed to a flush
        self.seg_lo = [0]       # segments [seg_lo[j], seg_lo[j+1]) not handed to a flush yet
        self.levels = []
        self.init = True        # no flush yet: the next one writes every entry
        self.running = None     # (executor, futures, cnt, sm) of a flush in flight

    def room(self):
        return self.pos + self.n <= len(self.v) and len(self.levels) < _MAX_LOG_LEVELS

    def add(self, count, level):
        self.pos += int(count)
        self.seg_lo.append(self.pos)
        self.levels.append(level)

    def flush(self, background=False):
        """Hand every logged segment to a flush; wait for it unless `background`."""
        self.wait()
        if self.levels:
            n = self.n
            k = self.drow.shape[0]
            seg_lo = np.array(self.seg_lo, dtype=np.int64)
            lv = np.array(self.levels, dtype=np.int32)
            T = self.threads if self.init and n >= 4 * _TILE else 1
            step = -(-n // T // _TILE) * _TILE if T > 1 else n
            cnt = np.zeros((T, k), dtype=np.int64)
            sm = np.zeros((T, k), dtype=np.int64)
            init = self.init

            def job(t):
                _write_depths(self.drow, self.v, self.w, seg_lo, lv, min(n, t * step),
                              min(n, (t + 1) * step), init, cnt[t], sm[t])

            from concurrent.futures import ThreadPoolExecutor
            ex = ThreadPoolExecutor(T)
            self.running = (ex, [ex.submit(job, t) for t in range(T)], cnt, sm)
            self.init = False
            self.lo = self.pos
            self.seg_lo = [self.pos]
            self.levels = []
        if not background:
            self.wait()

    def wait(self):
        if self.running is None:
            return
        ex, futs, cnt, sm = self.running
        self.running = None
        try:
            for f in futs:
                f.result()
        finally:
            ex.shutdown()
        self.reached += cnt.sum(axis=0)
        self.sums += sm.sum(axis=0)
        if not self.levels:        # everything written: the log starts over
            self.pos = self.lo = 0
            self.seg_lo = [0]

    def make_room(self):
        if not self.room():
            self.flush()


def run(graph, *, device="cpu", in_memory=False, sources=None, num_sources=DEFAULT_SOURCES,
        closeness=False, output=None, bottom_up=True, **runtime) -> MSBFSResult:
    """bottom_up: run a level bottom-up whenever the cost model says it reads no more bytes (needs
    in-edges, or an undirected dataset); "always": every level (tests); False: top-down only."""
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    t0 = time.perf_counter()
    n = graph.num_vertices
    src = None
    if sources is not None:
        src = _sources(graph, sources, num_sources)
        if len(src) and (src.min() < 0 or src.max() >= n):
            raise GrapheneError(f"source vertex out of range 0..{n - 1}: "
                                f"{int(src[(src < 0) | (src >= n)][0])}")
    steps = []
    passes = 0
    up_dir = pull_direction(graph, bottom_up)
    em = None
    depths = None
    filler = None
    try:
        if n and (src is None or len(src)):
            ddt = np.int32 if graph.num_edges < (1 << 31) else np.int64
            em = EdgeMap(graph, pull=up_dir is not None, in_memory=in_memory, degree_dtype=ddt,
                         **runtime)
            T = em.threads
            deg_out = em.degree("out")
            if src is None:
                src = pick_sources(graph, int(num_sources), deg=deg_out)
        elif src is None:
            src = np.zeros(0, dtype=np.int64)
        S = len(src)
        # every entry is written by the first flush of each pass's log: no -1 fill up front
        if output is not None:
            depths = np.lib.format.open_memmap(output, mode="w+", dtype=np.int32, shape=(S, n))
        else:
            depths = np.empty((S, n), dtype=np.int32)
            small_pages(depths)
        dplain = np.asarray(depths)     # a plain ndarray view (of the memmap) for the kernels
        sums = np.zeros(S, dtype=np.int64)
        reached = np.zeros(S, dtype=np.int64)
        if S and n:
            deg_in = em.degree("in") if up_dir == "in" else deg_out
            w = graph.id_width
            mo = Model(graph, "out")
            cap_out, cols_out, block = mo.cap, mo.cols, mo.block
            mi = Model(graph, up_dir) if up_dir else None
            cap_in, cols_in = (mi.cap, mi.cols) if mi else (0, 1)
            up = up_dir is not None
            m_td = np.zeros(n, dtype=np.uint8)
            m_bu = np.zeros(n, dtype=np.uint8)
            m_c = np.zeros(n, dtype=np.uint8)
            livew = np.zeros((T + 1, 8), dtype=np.uint64)
            live = np.zeros(1, dtype=np.uint64)
            # short in-lists kept in RAM once read (at most n entries with their counts)
            cstart = np.zeros(n + 1, dtype=np.int32 if n < (1 << 30) else np.int64)
            cdt = np.uint32 if w == 4 else np.int64
            # (only where the lists pass through this process: not on a cluster)
            entries = _cache_layout(deg_in, n, cstart)[1] if up and em.local else 0
            cache = np.zeros(max(1, entries), dtype=cdt)
            cdone = np.zeros(n, dtype=np.uint8)
            track("direction masks", m_td, m_bu, m_c, cdone)
            track("short-list cache", cstart, cache)
            for base in range(0, S, 64):
                chunk = src[base:base + 64]
                k = len(chunk)
                wdt = np.uint32 if k <= 32 else np.uint64
                frontier = np.zeros(n, dtype=wdt)
                visited = np.zeros(n, dtype=wdt)
                nxt = np.zeros(n, dtype=wdt)
                track("source bitsets", frontier, visited, nxt)
                drow = dplain[base:base + k]
                log = _Log(n, wdt, T, drow, reached[base:base + k], sums[base:base + k])
                if base == 0:
                    filler = populate_async([log.v, log.w] + ([] if output is not None else [dplain]))
                for i, s in enumerate(chunk):
                    nxt[s] |= wdt(1) << wdt(i)
                live[0] = (np.uint64(1) << np.uint64(k)) - np.uint64(1) if k < 64 else ~np.uint64(0)
                cnt, c_td, c_bu, n_c = _advance(nxt, frontier, visited, live[0], deg_out,
                                                deg_in, w, cols_out, cols_in, block, m_td, m_bu, up,
                                                log.v, log.w, log.pos, cdone, m_c)
                log.add(cnt, 0)
                prev = cnt
                frontier, nxt = nxt, frontier
                level = 0
                while True:
                    level += 1
                    pull = up and (bottom_up == "always" or min(c_bu, cap_in) <= min(c_td, cap_out))
                    state = (frontier, visited, nxt, livew, live, cache, cstart, cdone)
                    if pull:
                        side = Side(_pull_cached, m_c, state) if n_c else None
                        try:
                            st = em.masked(state, PULL, m_bu, up_dir)
                        finally:
                            if side is not None:
                                side.join()
                        st["cached"] = int(n_c)
                    else:
                        st = em.masked(state, PUSH, m_td, "out")
                    t1 = time.perf_counter()
                    live[0] = np.bitwise_or.reduce(livew[:, 0])
                    livew[:] = 0
                    log.make_room()
                    cnt, c_td, c_bu, n_c = _advance(nxt, frontier, visited, live[0], deg_out,
                                                    deg_in, w, cols_out, cols_in, block, m_td, m_bu, up,
                                                    log.v, log.w, log.pos, cdone, m_c)
                    log.add(cnt, level)
                    if log.init and log.running is None and 0 < cnt < prev:
                        log.flush(background=True)   # past the peak: write the dense levels now
                    prev = cnt
                    frontier, nxt = nxt, frontier
                    st = dict(st)
                    st.update(pass_=passes, level=level, discovered=int(cnt),
                              direction="bottom-up" if pull else "top-down",
                              merge_seconds=time.perf_counter() - t1)
                    steps.append(st)
                    if progress is not None:
                        progress(st)
                    if cnt == 0:
                        break
                log.flush()
                passes += 1
    finally:
        if em is not None:
            em.close()
        if filler is not None:
            filler.join()
    if output is not None:
        depths.flush()
    clo = closeness_of(reached, sums, n) if closeness else None
    return MSBFSResult(sources=src, depths=depths, reached=reached, closeness=clo, passes=passes,
                       supersteps=steps, seconds=time.perf_counter() - t0)


def closeness_of(reached, sums, n):
    """Wasserman-Faust closeness of each source (NetworkX's definition): reached vertices (itself
    included) and the sum of their distances, over n vertices."""
    clo = np.zeros(len(reached))
    ok = sums > 0
    if n > 1:
        clo[ok] = ((reached[ok] - 1) / (n - 1)) * ((reached[ok] - 1) / sums[ok])
    return clo


def _sources(graph, sources, num_sources):
    """The source IDs as an int64 array: the given list (or "0,5,17"), else num_sources random."""
    if sources is None:
        return pick_sources(graph, int(num_sources))
    if isinstance(sources, str):
        sources = [int(x) for x in sources.replace(" ", "").split(",") if x]
    return np.asarray(sources, dtype=np.int64).ravel()


def run_gpu(graph, *, sources=None, num_sources=DEFAULT_SOURCES, closeness=False, output=None,
            gpu_mem=None, progress=None, **_ignored) -> MSBFSResult:
    """Bit-parallel multi-source BFS on the GPU (64 sources per word)."""
    from ..gpu import algorithms as A
    from ..gpu.resident import gpu_steps, timed
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    src = _sources(graph, sources, num_sources)
    st: dict = {}
    depths = A.msbfs(dg, src, stats=st)
    reached = (depths >= 0).sum(axis=1).astype(np.int64)
    sums = np.where(depths > 0, depths, 0).sum(axis=1).astype(np.float64)
    clo = closeness_of(reached, sums, dg.num_vertices) if closeness else None
    if output is not None:
        np.save(output, depths)
    return MSBFSResult(sources=src, depths=depths, reached=reached, closeness=clo,
                       passes=(len(src) + 63) // 64, supersteps=gpu_steps(st, progress),
                       seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu", gpu_tier=dg.tier())


def verify(graph, result, **_ignored) -> list:
    """One plain serial queue BFS per source from the stored edges; depths must match exactly."""
    n = graph.num_vertices
    indptr, indices, _ = graph.to_csr("out")
    problems = []
    for i, s in enumerate(np.asarray(result.sources)):
        ref = serial_bfs_depth(indptr, indices, int(s), n)
        got = np.asarray(result.depths[i])
        bad = np.flatnonzero(ref != got)
        if len(bad):
            v = int(bad[0])
            problems.append(f"source {int(s)}: {len(bad)} depths wrong (vertex {v}: {int(got[v])}, "
                            f"expected {int(ref[v])})")
    return problems


def _sources_option(ctx, param, value):
    if value is None:
        return None
    try:
        out = [int(x) for x in value.replace(" ", "").split(",") if x]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated vertex IDs, got {value!r}")
    if not out:
        raise click.BadParameter(f"expected at least one vertex ID, got {value!r}")
    return out


CLI_OPTIONS = [
    click.Option(["--sources"], type=str, default=None, callback=_sources_option, metavar="ID,ID,...",
                 help="The source vertices themselves, by ID, comma-separated: --sources 0,5,17. "
                      "--sources 32 is the one vertex 32; for 32 random sources use --num-sources "
                      "32."),
    click.Option(["--num-sources"], type=click.IntRange(min=1), default=None, metavar="COUNT",
                 help=f"How many random sources (distinct, non-zero out-degree, fixed seed; all "
                      f"such vertices when fewer exist) [default: {DEFAULT_SOURCES}]. Not with "
                      f"--sources."),
    click.Option(["--closeness"], is_flag=True,
                 help="Also compute each source's closeness (Wasserman-Faust): a summary on "
                      "stdout, per-source values in --json and in -o .npz."),
    click.Option(["--top-down", "bottom_up"], flag_value=False, default=True,
                 help="Top-down levels only (no bottom-up levels)."),
]
