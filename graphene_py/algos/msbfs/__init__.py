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
Short in-lists stay in RAM once read: the level asks the engine to keep the lists of degree 1..D,
D as large as fits in n entries (D = 5 at scale 22; iterator/shortlists.py); a bottom-up level
then serves those vertices from RAM next to the IO of the others. The late levels are mostly such
vertices: at scale 22 the fifth level reads 9 KB instead of 244 MB.
The level runs bottom-up when it reads no more bytes by bfs.py's IO cost model (deg*id_width + one
512-byte block per list piece, capped at the adjacency bytes), ties included (bottom-up also
computes less: early exit, no scattered writes); directed datasets without in-edges stay top-down.
On Kronecker scale 22 with 32 sources (depths 1..7) the dense level 3 reads the whole file either
way (bottom-up scans half its edges: early exit), levels 4-6 read 338 MB, 9 KB and nothing
bottom-up instead of 513, 341 and 243 MB top-down (864 MB in all instead of 1.62 GB).
After a level one serial pass moves nxt into frontier/visited, builds both candidate masks with
their costs (kept lists cost nothing), and logs the non-zero nxt words, from which depths.py writes
the depths rows (tile by tile, in the background once the levels shrink).
Fresh memory is slow to fault in here (up to 1 s for the 512 MiB of depths as transparent huge
pages), so depths gets 4 KB pages (MADV_NOHUGEPAGE: it is written once, sequentially) and a helper
thread at idle priority prefaults the first n/2 log entries and depths (MADV_POPULATE_WRITE) while
the supersteps wait on IO. An on-disk depths (`output=`, `-o x.npy`) is not prefaulted; when it
is larger than half the memory left (RAM, a memory cgroup's limit, or `--memory`), the log holds
n entries (what `--memory` plans for) and each flush writes the depths span by span, handing every
span back to its file (sync_file_range, then its pages dropped: iterator.memory.WriteBack); no
flush runs early, and a later flush first reads its next span's pages back ahead
(POSIX_FADV_WILLNEED). The log makes room only for what the next level can find (the vertices
still missing a live source's bit), so the levels of a pass usually fit one or two flushes. Scale
24 edge factor 64, 32 sources: 16.8 M x 32 depths (2.1 GB) inside an 800 MiB memory cgroup, with
`--memory 800M` (no short lists kept) in 24 s.
Sources beyond 64 run in further passes. Default sources: 32 random vertices of non-zero
out-degree from config.SEED (GAPBS's habit), distinct; `sources=[...]` picks them.
"""
from __future__ import annotations

import time

import numpy as np
from ...jit import njit

from ... import config
from ...errors import GrapheneError
from ...iterator.atomics import atomic_or as _or
from ...iterator.cost import Model, list_cost, pull_direction
from ...iterator.edgemap import EdgeMap, Update
from ...iterator.memory import WriteBack, memory_available, populate_async, small_pages, track

from ..common import parse_sources
from ..reference import serial_bfs_depth
from .depths import Log
from .result import CLI_OPTIONS, DEFAULT_SOURCES, MSBFSResult, closeness_of  # noqa: F401

CLUSTER = True     # runs on a cluster (every superstep through the engine contract)
#: the option `graphene run` sets False when it neither writes (-o) nor verifies the main array
#: (the per-source counts it prints do not need the S x n depths)
UNUSED_MAIN_OPTION = "keep_depths"

# ---------------------------------------------------------------------------------------------
# state = (frontier, visited, nxt, livew, live)
#   livew: uint64[T + 1, 8], row t = OR of the bits thread t set this level (64-byte rows; row T:
#   the engine's pass over kept lists); live: uint64[1], the sources with a non-empty frontier
@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _push(v, nbrs, wts, tid, state):
    """Top-down: v's sources reach its out-neighbours."""
    frontier, visited, nxt, livew, live = state
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
    """Bottom-up: v collects the frontier bits of its in-neighbours it still wants; early exit."""
    frontier, visited, nxt, livew, live = state
    got = _gather(v, nbrs, frontier, visited, nxt, live[0])
    if got != np.uint64(0):
        _or(nxt, v, got)
        livew[tid, 0] |= got


#: a level of a pass of at least AGAIN_SOURCES sources whose estimated reads are at least
#: AGAIN_SHARE of its direction's lists asks the read-through cache to copy them in on this first
#: read (EdgeMap.masked's again), not the third: with many sources a vertex wants bits over
#: several levels, and the levels after the one that reaches most vertices read most of the same
#: blocks again. On kron22 (cold, 2 threads; `graphene run apsp --sources 0,...,S-1 --graph kron22
#: -t 2 --nl`), with 8-64 sources, three bottom-up levels read 513, 456 and 369 MB and took
#: 0.93-0.98 s; with the first one copied in (0.24 s more for it without huge pages reserved),
#: 0.72-0.83 s, the other two from RAM. With 1 and 4 sources the copy saved no time (1 source:
#: the second heavy level reads other blocks; 4: 376 MB saved for 511 MB copied). A light level
#: (a long chain's) copies nothing in.
AGAIN_SOURCES = 8
AGAIN_SHARE = 0.5


def _again(sources, est, cap) -> bool:
    """Whether a level of `sources` sources estimated to read `est` of `cap` bytes asks the
    read-through cache to copy its lists in on this read (AGAIN_SOURCES, AGAIN_SHARE)."""
    return sources >= AGAIN_SOURCES and cap > 0 and min(est, cap) >= AGAIN_SHARE * cap


#: (state: frontier, visited, nxt, livew, live) found bits or into nxt and into the per-thread
#: `live` rows
PUSH = Update(_always, _push, combine="or", writes=(2, 3))
PULL = Update(_always, _pull, combine="or", writes=(2, 3))


@njit(cache=True, nogil=True)
def _advance_range(nxt, frontier, visited, live, deg_out, deg_in, w, cols_out, cols_in, block,
                   m_td, m_bu, up, kdone, lo, hi, out):
    """_advance over [lo, hi) but the log: out[:] = (non-zero nxt words, top-down bytes,
    bottom-up bytes, vertices the next level may discover)."""
    cnt = 0
    want = 0
    c_td = 0
    c_bu = 0
    for v in range(lo, hi):
        f = nxt[v]
        cnt += f != 0
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
            m_bu[v] = b
            want += b
            if b and kdone[v] == 0:
                c_bu += list_cost(d, w, cols_in, block)
        else:
            want += live & ~np.uint64(vis) != np.uint64(0)
    out[0] = cnt
    out[1] = c_td
    out[2] = c_bu
    out[3] = want


@njit(cache=True, nogil=True)
def _log_range(nxt, logv, logw, at, lo, hi):
    """The non-zero words of nxt over [lo, hi) appended to the log from entry `at`, in vertex
    order (a branch, not every word stored: the next range's entries follow at once)."""
    c = at
    for v in range(lo, hi):
        f = nxt[v]
        if f != 0:
            logv[c] = v
            logw[c] = f
            c += 1


def _advance(em, nxt, frontier, visited, live, deg_out, deg_in, w, cols_out, cols_in, block, m_td,
             m_bu, up, log, kdone):
    """End of a level, on em's compute threads: nxt becomes the frontier (frontier is zeroed to
    serve as the next nxt), visited |= nxt, and every non-zero nxt word is appended to the log
    (log.v / log.w from log.pos, in vertex order); m_td / m_bu: who is active for a top-down /
    bottom-up next level (m_bu only when `up`), with their estimated bytes (iterator/cost.py's
    list_cost; nothing for a list the engine keeps: kdone). Returns (#vertices discovered,
    top-down bytes, bottom-up bytes, #vertices the next level may discover: those still missing
    a live source's bit, and with in-edges where `up` knows them). One thread took 15-52 ms a
    level at Kronecker scale 22 (32 sources), 0.26-0.28 s a run; two take 0.19-0.23 s
    (tools/probe_msbfs_advance.py)."""
    n = nxt.shape[0]
    T = max(1, em.threads)
    rows = np.zeros((T, 4), dtype=np.int64)

    def main(t, lo, hi):
        _advance_range(nxt, frontier, visited, live, deg_out, deg_in, w, cols_out, cols_in,
                       block, m_td, m_bu, up, kdone, lo, hi, rows[t])
    em.on_ranges(n, main)
    at = log.pos + np.concatenate(([0], np.cumsum(rows[:, 0])[:-1]))
    em.on_ranges(n, lambda t, lo, hi: _log_range(nxt, log.v, log.w, np.int64(at[t]), lo, hi))
    cnt, c_td, c_bu, want = (int(x) for x in rows.sum(axis=0))
    return cnt, c_td, c_bu, want


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


def run(graph, *, device="cpu", in_memory=False, sources=None, num_sources=DEFAULT_SOURCES,
        closeness=False, output=None, bottom_up=True, keep_edges=None, keep_depths=True,
        gpu_mem=None, gpu_tier=None, handoff_at=None, **runtime) -> MSBFSResult:
    """bottom_up: run a level bottom-up whenever the cost model says it reads no more bytes (needs
    in-edges, or an undirected dataset); "always": every level (tests); False: top-down only.
    keep_edges: the short in-lists kept in RAM, in stored neighbour IDs (default n; 0: none, and
    no per-vertex slots for them either). keep_depths=False (without `output`): only `reached`
    and the depth sums (closeness) are counted, level by level, and `depths` is None: no S x n
    rows are written (`graphene run apsp` without -o or --verify; at Kronecker scale 22, 32
    sources, the 537 MB of rows are fresh pages, dear to fault in here).
    device="auto" (dispatch's "hybrid"): the CPU runs while a thread loads the dataset into GPU
    memory; after a level, once it is there, the rest (this pass from its bits, the later
    sources whole) moves to the GPU when its estimate is below the CPU's (gpu/handoff.py
    MSBFSPart). handoff_at: move after that superstep, waiting there for the load (tests).
    gpu_tier: not used (the part is resident)."""
    counts_only = not keep_depths and output is None
    if keep_edges is not None and int(keep_edges) < 0:
        raise GrapheneError(f"keep_edges must be >= 0 (got {keep_edges})")
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
    plan = {"keep": not counts_only}         # (the GPU part's cost: MSBFSPart)
    ho, note = (None, None) if device != "auto" or not n or not graph.num_edges or (
        src is not None and not len(src)) else _handoff(graph, gpu_mem, handoff_at, plan)
    moved = None             # (pass's first source, level, visited words) once the run moves
    em = None
    depths = None
    filler = None
    wback = None
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
        if counts_only:
            depths = None
        elif output is not None:
            depths = np.lib.format.open_memmap(output, mode="w+", dtype=np.int32, shape=(S, n))
        else:
            depths = np.empty((S, n), dtype=np.int32)
            small_pages(depths)
        # a plain ndarray view (of the memmap) for the kernels
        dplain = None if counts_only else np.asarray(depths)
        # an on-disk depths larger than half the memory left goes back to its file span by
        # span as the first flush writes it (else the page cache takes it, written later)
        if output is not None and depths.nbytes > memory_available() // 2:
            wback = WriteBack(depths)
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
            livew = np.zeros((T + 1, 8), dtype=np.uint64)
            live = np.zeros(1, dtype=np.uint64)
            track("direction masks", m_td, m_bu)
            # short in-lists kept in RAM once read (at most keep_edges entries with their counts)
            budget = n if keep_edges is None else int(keep_edges)
            kept = em.keep_lists(up_dir, budget) if up and budget > 0 else None
            kdone = kept.kdone if kept is not None else np.zeros(n, dtype=np.uint8)
            for base in range(0, S, 64):
                chunk = src[base:base + 64]
                k = len(chunk)
                wdt = np.uint32 if k <= 32 else np.uint64
                frontier = np.zeros(n, dtype=wdt)
                visited = np.zeros(n, dtype=wdt)
                nxt = np.zeros(n, dtype=wdt)
                track("source bitsets", frontier, visited, nxt)
                drow = np.empty((k, 0), np.int32) if counts_only else dplain[base:base + k]
                # a log of n entries where memory is short (depths written back) or where it is
                # only counted (no depths): a graph whose levels log more flushes more often
                # (into pages read back from the file)
                log = Log(n, wdt, T, drow, reached[base:base + k], sums[base:base + k], wback,
                          entries=n if wback is not None or counts_only else None)
                if base == 0 and output is None:   # prefault (the log's pages are touched as
                    # it fills: n/2 to n entries on most graphs, of its 2n)
                    filler = populate_async([log.v[:n // 2], log.w[:n // 2]] +
                                            ([] if counts_only else [dplain]))
                for i, s in enumerate(chunk):
                    nxt[s] |= wdt(1) << wdt(i)
                live[0] = (np.uint64(1) << np.uint64(k)) - np.uint64(1) if k < 64 else ~np.uint64(0)
                cnt, c_td, c_bu, want = _advance(em, nxt, frontier, visited, live[0], deg_out,
                                                 deg_in, w, cols_out, cols_in, block, m_td, m_bu,
                                                 up, log, kdone)
                log.add(cnt, 0)
                prev = cnt
                frontier, nxt = nxt, frontier
                level = 0
                t_pass = time.perf_counter()
                while True:
                    level += 1
                    pull = up and (bottom_up == "always" or min(c_bu, cap_in) <= min(c_td, cap_out))
                    state = (frontier, visited, nxt, livew, live)
                    if pull:
                        st = em.masked(state, PULL, m_bu, up_dir,
                                       again=_again(k, c_bu, cap_in))
                    else:
                        st = em.masked(state, PUSH, m_td, "out",
                                       again=_again(k, c_td, cap_out))
                    t1 = time.perf_counter()
                    live[0] = np.bitwise_or.reduce(livew[:, 0])
                    livew[:] = 0
                    log.make_room(want)
                    cnt, c_td, c_bu, want = _advance(em, nxt, frontier, visited, live[0],
                                                     deg_out, deg_in, w, cols_out, cols_in, block,
                                                     m_td, m_bu, up, log, kdone)
                    log.add(cnt, level)
                    if log.init and log.running is None and 0 < cnt < prev and wback is None \
                            and not counts_only:
                        # past the peak: write the dense levels now, beside the next levels
                        # (not when depths goes back to its file as it is written: the later
                        # levels' bits would fault its pages in again, one read each)
                        log.flush(background=True)
                    prev = cnt
                    frontier, nxt = nxt, frontier
                    st = dict(st)
                    st.update(pass_=passes, level=level, discovered=int(cnt),
                              direction="bottom-up" if pull else "top-down",
                              merge_seconds=time.perf_counter() - t1)
                    steps.append(st)
                    move = ho is not None and _handoff_after(
                        ho, st, cnt, plan, S - base, time.perf_counter() - t_pass)
                    if progress is not None:
                        progress(st)
                    if cnt == 0 or move:
                        break
                log.flush()
                passes += 1
                if move:
                    moved = (base, level, visited)
                    break
    finally:
        if em is not None:
            em.close()
        if filler is not None:
            filler.join()
        if wback is not None:
            wback.close()
        if ho is not None:
            ho.finish()
    if moved is not None:
        passes += _gpu_rest(ho, moved, src, dplain, counts_only, reached, sums, steps, progress)
    if output is not None and depths is not None:
        depths.flush()
    clo = closeness_of(reached, sums, n) if closeness else None
    res = MSBFSResult(sources=src, depths=depths, reached=reached, closeness=clo, passes=passes,
                      supersteps=steps, seconds=time.perf_counter() - t0)
    if note is not None:
        res.__dict__.update(device="cpu", device_note=note)
    if ho is not None:
        gpu = sum(1 for st in steps if st.get("device") == "gpu")
        res.__dict__.update(ho.summary(gpu), device="cpu+gpu" if moved else "cpu")
    return res


HYBRID = True       # run(device="auto") starts on the CPU; the GPU may take the levels left
HANDOFF = True      # ... once a thread of its own has loaded the dataset (gpu/handoff.py MSBFSPart)


def _handoff(graph, gpu_mem, handoff_at, plan):
    """(Handoff or None, note) for device="auto": the GPU's part (the dataset loaded resident:
    gpu/handoff.py MSBFSPart, its cost reading `plan`) is made on a thread of its own while the
    CPU runs. A forced point (handoff_at) at a pass's last level moves after the next level that
    finds anything (the next pass's first): a pass that ended has nothing to hand over."""
    from ..registry import gpu_may_be_available
    why = gpu_may_be_available()     # (no CuPy here: it starts on the load's thread)
    if why:
        return None, f"no GPU ({why})"
    from ...gpu.handoff import Handoff, msbfs_part
    return Handoff(msbfs_part(graph, gpu_mem, plan), state_bytes=8 * graph.num_vertices,
                   force_at=handoff_at), "hybrid CPU/GPU: the GPU takes over once it is ready"


def handoff_prep_seconds(graph, opts):
    """(setup, once after the move) estimated seconds of the GPU's part of a hand-off: the
    dataset's resident load, then nothing; None where the load would assemble the CSR on the
    host beside the CPU's run without room."""
    from ...gpu.handoff import resident_prep_seconds
    return resident_prep_seconds(graph, memory_available())


def _handoff_after(ho, st, found, plan, left, pass_s):
    """A level's superstep marked as the CPU's; then, unless it found nothing (`found`: the pass
    ends), whether the rest moves (the GPU's part ready): `left` sources from this pass's first
    on (told to the part's cost through `plan`), the CPU's estimate for them this level's time
    again plus, per later pass of 64, this pass's time so far (pass_s)."""
    ho.mark(st)
    if not found:
        return False
    plan["sources_left"] = left
    later = max(0, -(-left // 64) - 1)
    cpu = float(st.get("seconds", 0.0)) + later * pass_s
    return ho.after(st, ho.cpu_steps, 0.0, cpu_s=cpu)


def _gpu_rest(ho, moved, src, dplain, counts_only, reached, sums, steps, progress):
    """After a move: the pass from its first source `base` on the GPU from the level and bits the
    CPU reached, then the sources after it whole; their depths rows (when kept) and counts
    filled in. Returns the passes of 64 the GPU ran whole."""
    from ...gpu.resident import gpu_steps
    base, level, visited = moved
    k = min(64, len(src) - base)
    group, rest = src[base:base + k], src[base + k:]
    rows = None if counts_only else dplain[base:base + k]
    rest_rows = None if counts_only else dplain[base + k:]
    gst: dict = {}
    r, sm = ho.load.value.run(visited, level, group, rows, rest, rest_rows, gst)
    reached[base:base + k] += r[:k]
    sums[base:base + k] += sm[:k]
    reached[base + k:] = r[k:]
    sums[base + k:] = sm[k:]
    steps += gpu_steps(gst, progress)
    return -(-len(rest) // 64)


def _sources(graph, sources, num_sources):
    """The source IDs as an int64 array: the given list (or "0,5,17"), else num_sources random."""
    if sources is None:
        return pick_sources(graph, int(num_sources))
    return np.asarray(parse_sources(sources), dtype=np.int64).ravel()


def gpu_result_bytes(graph, opts) -> int:
    """What run_gpu copies to host memory: the depths (S x n int32) when they are written out
    (`output`), else nothing (they stay in GPU memory until asked for)."""
    return 4 * source_count(opts) * int(graph.num_vertices) if opts.get("output") else 0


def source_count(opts) -> int:
    """How many sources these options ask for (`sources` as a list or "0,5,17", else
    `num_sources`, else DEFAULT_SOURCES; a repeated source counted each time)."""
    src = opts.get("sources")
    if src is not None:
        return len(str(src).split(",")) if isinstance(src, str) else len(src)
    return int(opts.get("num_sources") or DEFAULT_SOURCES)


def run_gpu(graph, *, sources=None, num_sources=DEFAULT_SOURCES, closeness=False, output=None,
            gpu_mem=None, progress=None, **_ignored) -> MSBFSResult:
    """Multi-source BFS on the GPU: gpu/algorithms.py msbfs (by default one direction-optimizing
    BFS per source, faster there than the bit-parallel levels: MSBFS_METHOD says by how much).
    passes: the BFS runs (one per source), or the groups of 64 sources of the bit-parallel
    method."""
    from ...gpu import _module, algorithms as A
    from ...gpu.resident import gpu_steps, timed
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    src = _sources(graph, sources, num_sources)
    st: dict = {}
    dev = A.msbfs(dg, src, stats=st, to_host=False)
    # the counts on the GPU, row by row (no temporary of the whole matrix): numpy's over the host
    # copy took 4.7-4.9 s for 32 sources at Kronecker scale 24 (H200 machine), the GPU's 0.02 s;
    # an unreached vertex's -1 is taken back out of the row's sum
    reached = np.zeros(len(src), dtype=np.int64)
    sums = np.zeros(len(src), dtype=np.float64)
    for i in range(len(src)):
        row = dev[i]
        reached[i] = int(_module.cupy().count_nonzero(row >= 0))
        sums[i] = float(int(row.sum(dtype=np.int64)) + (dg.num_vertices - reached[i]))
    clo = closeness_of(reached, sums, dg.num_vertices) if closeness else None
    if output is not None:
        kept = {"depths": dev.get()}
        np.save(output, kept["depths"])
    else:       # the depths stay in GPU memory until asked for (MSBFSResult.depths)
        kept = {"_depths_gpu": dev}
    return MSBFSResult(sources=src, **kept, reached=reached, closeness=clo,
                       passes=len(src) if A.MSBFS_METHOD == "bfs" else (len(src) + 63) // 64,
                       supersteps=gpu_steps(st, progress),
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
