"""Breadth-first search from one source, level-synchronous, top-down over the out-edges.

Computes: `parent` int32[n] (int64 from 2^31 vertices; GAPBS encoding: parent[src] == src, -1 = unreached), `depth` int32[n]
(-1 = unreached) and `n_reached`. No level cap (a chain of any length works; int32 depths).
Returns: BFSResult(parent, depth, n_reached, src, levels, supersteps, seconds).

Algorithm (Graphene §4.7, plus Beamer's direction optimisation): one superstep per level. The frontier (a queue of the vertices found in
the previous level) is translated into block requests for their adjacency lists; for every list
(chunk) that arrives, each unvisited neighbour u is claimed with one atomic fetch-or on its bit of a visited bitmap (1 bit
per vertex, so the hot check stays in cache; checked with a plain read first): the single winner
sets parent[u] and appends u to the next queue (fetch-and-add on its tail). So every vertex enters the next frontier exactly once, depths are exact on any schedule,
and a parent is always a vertex of the previous level with an edge to u (a valid BFS parent; which
one may differ between runs with several threads).
A level runs bottom-up instead (every unvisited vertex with edges reads its in-list — the out-list
on an undirected dataset — and adopts the first neighbour of the current level) when that reads
fewer bytes by the cost model deg*id_width + 512 per touched vertex: on Kronecker graphs this skips
the late levels' scattered single-block reads (-30% bytes at scale 22). Directed datasets without
in-edges stay top-down.

With device="auto" and a usable GPU (graphene_py.gpu, the dataset fits in GPU memory) the run is
hybrid: a thread loads the dataset into GPU memory while the CPU path starts (GpuLevels), and
before every level the offload policy (gpu/policy.py) estimates the level's cost on each
device, counting the transfer of the O(|V|) state (depth, parent) when it sits on the other one;
a hot level waits for the load where that is cheaper than running it on the CPU. (`graphene run
--device auto` plans the whole run first: a dataset not yet in GPU memory goes to the CPU or
whole to the GPU, algos/registry.py.)
Small frontiers stay on this SSD path; hot levels run on the GPU (gpu.algorithms.BfsLevels), and the
state moves only when the device changes. Depths are the same whatever ran where; each superstep's
stats say its device, and the result counts cpu_supersteps / gpu_supersteps / device_moves.

Depths are not held while the levels run: every level is appended behind the last in one queue (GAPBS's
sliding queue), so level l is q[starts[l]:starts[l+1]], and at the end the queue is turned into
the depths in place (`_depths_in_queue`). The run holds parent, queue, the pull mask and two bitmaps
(13.3 B/vertex at 4-byte IDs) beside the offsets, not a fourth n-sized array. The hybrid run keeps
a depth array, which the GPU's levels read and write.

In memory (in_memory=True, one machine, no GPU) the levels skip the engine's supersteps: GAPBS's
direction-optimizing loop walks the lists in RAM (algos/bfs_ram.py), with the same queue, parents
and depths.

Verification (`verify`): an independent serial BFS over the whole CSR recomputes every depth; each
reached vertex's parent must be reached one level above and hold an edge to it.
"""
from __future__ import annotations

import math
import time

import click
import numpy as np
from ..jit import njit

from .. import config
from ..errors import GrapheneError
from . import bfs_ram
from .common import Result, checked_source, pick_source, vertex_dtype
from .reference import serial_bfs_depth

MAIN = "parent"


CLUSTER = True     # every superstep through the engine contract (graphene_py.cluster)

class BFSResult(Result):
    MAIN = "parent"
    VERTEX_ARRAYS = {"parent": "parent"}

    def warnings(self) -> list:
        """One line when the source reached no other vertex, so that `n_reached 1` is not taken
        for a failed run: a Kronecker graph has many IDs without edges, vertex 0 among them."""
        src = getattr(self, "src", None)
        if src is None or int(getattr(self, "n_reached", 0)) != 1 or len(self.depth) < 2:
            return []
        return [f"source vertex {int(src)} reached no other vertex (it has no out-edges to "
                f"another vertex); give another with --src"]


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _visit(v, nbrs, wts, tid, state):
    visited, front, parent, nxt, tail, cur = state
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        w = u >> 6
        bit = np.uint64(1) << np.uint64(u & 63)
        if visited[w] & bit == 0:          # plain read first: a 1-bit-per-vertex map stays in cache
            if _or(visited, w, bit) & bit == 0:   # claimed by this thread alone
                if parent.shape[0]:                # (no parents kept: WCC)
                    parent[u] = v
                push(nxt, tail, cur, tid, u)


from ..iterator.atomics import atomic_or as _or  # noqa: E402
from ..iterator.queue import BLOCK, push, squeeze_from  # noqa: E402
from ..iterator.edgemap import Update  # noqa: E402
from ..iterator.memory import track  # noqa: E402
from ..io.offsets import DEG_BLOCK, deg_at, degrees_into  # noqa: E402
from ..iterator.ramlists import last_at_most  # noqa: E402


@njit(cache=True)
def _unvisited(v, state):
    return state[0][v >> 6] & (np.uint64(1) << np.uint64(v & 63)) == 0


@njit(cache=True)
def _adopt(v, nbrs, wts, tid, state):
    """Bottom-up step: unvisited v takes the first neighbour found in the current level."""
    visited, front, parent, nxt, tail, cur = state
    for i in range(nbrs.shape[0]):
        u = np.int64(nbrs[i])
        if front[u >> 6] & (np.uint64(1) << np.uint64(u & 63)):   # u is in the current level
            bit = np.uint64(1) << np.uint64(v & 63)
            if _or(visited, v >> 6, bit) & bit == 0:   # another chunk of v's list may race us
                if parent.shape[0]:
                    parent[v] = u
                push(nxt, tail, cur, tid, v)
            return


#: the two ways a level runs: push (top-down) and pull (bottom-up); a vertex is claimed once, by a
#: fetch-or on its visited bit: the first writer wins
#: (state: visited, front, parent, nxt, tail, cur; parent takes the first writer's value, the
#: visited bits or together, found vertices go to the nxt queue, whose place says their level)
VISIT = Update(_always, _visit, combine="first", writes=((0, "or"), 2), queue=(3, 4, 5))
ADOPT = Update(_unvisited, _adopt, combine="first", writes=((0, "or"), 2), queue=(3, 4, 5))


@njit(cache=True)
def _set_front(front, q):
    front[:] = 0
    for k in range(q.shape[0]):
        u = q[k]
        front[u >> 6] |= np.uint64(1) << np.uint64(u & 63)


@njit(cache=True)
def _visited_from_depth(depth, visited):
    visited[:] = 0
    for v in range(depth.shape[0]):
        if depth[v] >= 0:
            visited[v >> 6] |= np.uint64(1) << np.uint64(v & 63)


@njit(cache=True)
def _depths_in_queue(q, starts, n, scratch):
    """The queue of a whole run (level l at q[starts[l]:starts[l+1]], r = starts[-1] vertices,
    each once) becomes the depths in place: afterwards q[v] is v's level, -1 if unreached, v < n.
    While the levels fit a byte, they are scattered into `scratch` (uint8[n], free memory the run
    had: the pull mask) and widened into q: two passes a prefetcher can run ahead of. Else a
    cycle-leader walk: the vertex x taken from position i gets its level written into slot x,
    whose own vertex (the one at position x) goes next; a taken slot holds -1 (its vertex is on
    its way), a written one -2 - level, so the walk stops at -1 and the last pass maps both."""
    r = starts[-1]
    L = starts.shape[0]
    if L <= 255 and scratch.shape[0] >= n:
        for v in range(n):
            scratch[v] = 255
        for lev in range(L - 1):
            for k in range(starts[lev], starts[lev + 1]):
                scratch[q[k]] = lev
        for v in range(n):
            d = scratch[v]
            q[v] = -1 if d == 255 else d
        return
    for j in range(r, n):
        q[j] = -1
    for i in range(r):
        x = q[i]
        if x < 0:
            continue
        q[i] = -1
        p = i
        while True:
            lo = last_at_most(starts, L, p)     # the level of position p
            nxt = q[x]
            q[x] = -2 - lo
            if nxt < 0:
                break
            p = x
            x = nxt
    for v in range(n):
        q[v] = -2 - q[v]


@njit(cache=True)
def _clear_found(mask, q, lo, hi):
    """The pull mask kept up to date: the vertices queued since it was last brought up to date
    are visited now (O(found), not a pass over every vertex)."""
    for k in range(lo, hi):
        mask[q[k]] = 0


@njit(cache=True)
def _levels_into(depth, q, lo, hi, level):
    for k in range(lo, hi):
        depth[q[k]] = level


class Work:
    """The compute side of BFS's direction choice (EdgeMap.edge_map's `work`): a push examines
    every edge of the frontier, a pull at most every edge of the unvisited vertices (it stops at
    the first parent found). Seconds per such edge, one thread; the starting values were measured
    on kron22 (2-vCPU AMD EPYC: push 19 ns per frontier edge, pull 8 ns per unvisited edge, since
    the pull's kernel tests one bit per edge where the push claims and queues), then each level
    large enough to time (>= LEARN_EDGES) replaces its direction's value by what it measured."""
    PUSH, PULL = 19e-9, 8e-9
    LEARN_EDGES = 1 << 20

    def __init__(self):
        self.push, self.pull = self.PUSH, self.PULL

    def estimate(self, front_edges, unvisited_edges):
        if unvisited_edges is None:
            return None
        return front_edges * self.push, unvisited_edges * self.pull

    def learn(self, st, front_edges, unvisited_edges):
        c = float(st.get("compute_seconds", 0.0) or 0.0)
        if c <= 0.0:
            return
        if st.get("direction") == "top-down" and front_edges >= self.LEARN_EDGES:
            self.push = c / front_edges
        elif (st.get("direction") == "bottom-up" and unvisited_edges is not None
              and unvisited_edges >= self.LEARN_EDGES):
            self.pull = c / unvisited_edges


@njit(cache=True)
def _edges_of(deg, diff, q):
    s = 0
    for k in range(q.shape[0]):
        s += deg_at(deg, diff, q[k])
    return s


def _hybrid(graph, device, policy=None, gpu_mem=None):
    """((GpuLevels, policy) or None, note): the hybrid's parts for device="auto" when a GPU is
    usable; otherwise None and why not. `policy`: anything with OffloadPolicy's
    decide(frontier_size, frontier_edges) -> "cpu"|"gpu" and summary() (tests force schedules;
    a forced schedule waits for the load at its first level)."""
    if device != "auto":
        return None, ""
    from .registry import gpu_available
    ok, why = gpu_available()
    if not ok:
        return None, f"no GPU ({why})"
    from ..gpu import OffloadPolicy
    side = GpuLevels(graph, gpu_mem, wait=policy is not None)
    if policy is None:
        policy = OffloadPolicy(num_vertices=graph.num_vertices, resident=True, mode="auto",
                               state_bytes_per_vertex=12)
    return (side, policy), "hybrid CPU/GPU"


def _gpu_levels(side, pol, size, edges):
    """(BfsLevels or None, note) before a CPU-held level while the GPU side may still be loading:
    the BfsLevels when loaded (or worth the wait: GpuLevels.get); else None with the level's note
    for a level the policy would rather run on the GPU (it runs on the CPU meanwhile, recorded as
    such), or None, None where the policy picks the CPU anyway."""
    from ..gpu.policy import OffloadPolicy, step_costs
    if not isinstance(pol, OffloadPolicy):          # a forced schedule: the load first
        return side.get(), None
    cpu_s, gpu_s = step_costs(edges, pol.state_bytes_per_vertex * pol.num_vertices,
                              pol.state_on, **pol.rates)
    if gpu_s >= cpu_s:
        return None, None
    gl = side.get(cpu_s, gpu_s)
    if side.error is not None:
        pol.resident = False             # the load failed: every level stays on the CPU
    if gl is not None or side.error is not None:
        return gl, None
    why = (f"the GPU is loading ({side.ld.elapsed():.1f} s so far, est. {side.left():.1f} s "
           f"left; this level est. cpu {cpu_s:.3f} s vs gpu {gpu_s:.3f} s)")
    pol.note(size, edges, "cpu", why)
    return None, {"handoff": why}


class GpuLevels:
    """The hybrid's GPU side: the dataset loaded into GPU memory by a thread of its own
    (gpu/handoff.py BackgroundLoad), begun before the CPU path opens its EdgeMap, and its
    BfsLevels once loaded. So the CPU's set-up and its first, small levels run while the GPU
    loads, instead of after the load, and a run whose source reaches little ends on the CPU
    without waiting for it (the load is stopped). `graphene run --device auto` runs a BFS
    hybrid only where the dataset is in GPU memory already (registry._plan_auto): from a fresh
    process the load beside the CPU's set-up lost to the plain GPU run at Kronecker scale 24
    (BENCHMARKS.md). `get(cpu_s, gpu_s)` before a level that the policy would rather run on the
    GPU: the BfsLevels once loaded; while loading, waits when the load's estimated rest plus the
    GPU's level is below the CPU's estimate for the level, else None (the level runs on the
    CPU). `close()` stops a load the run no longer needs and joins its thread."""

    def __init__(self, graph, gpu_mem, wait=False):
        from ..gpu.handoff import BackgroundLoad
        from ..gpu.policy import GPU_START_S, GPU_STARTED_S
        from ..gpu.resident import device_graph, is_resident
        from ..gpu.streamed import resident_load_bps, resident_setup_seconds
        from ..gpu import _module
        self.wait_always = bool(wait)
        self.error = None
        self.levels = None
        if is_resident(graph, gpu_mem):
            self.est = 0.0
        else:
            gbytes = int(graph.num_edges) * int(graph.id_width) * (
                2 if graph.directed and graph.in_partitions is not None else 1)
            self.est = ((GPU_STARTED_S if _module.started() else GPU_START_S)
                        + resident_setup_seconds(graph) + gbytes / resident_load_bps(graph))
        self.ld = BackgroundLoad(lambda check: device_graph(graph, gpu_mem, check),
                                 what="the dataset")

    def left(self) -> float:
        """Estimated seconds until the load is done (0 once it is)."""
        if self.ld.ready():
            return 0.0
        return max(self.est - self.ld.elapsed(), 0.1 * self.est)

    def get(self, cpu_s: float = math.inf, gpu_s: float = 0.0):
        """The BfsLevels, waiting for the load where that pays (see the class); None: not (yet)."""
        if self.error is not None:
            return None
        if not self.ld.ready():
            if not self.wait_always and self.left() + gpu_s >= cpu_s:
                return None
            self.ld.wait()
        if self.ld.error is not None:
            e = self.ld.error
            self.error = (str(e).splitlines() or [type(e).__name__])[0][:200]
            return None
        if self.levels is None:
            from ..gpu.algorithms import BfsLevels
            self.levels = BfsLevels(self.ld.value)
        return self.levels

    @property
    def seconds(self):
        return self.ld.seconds

    def close(self):
        if not self.ld.ready():
            self.ld.cancel_and_join()


@njit(cache=True, nogil=True)
def _mark_unvisited(visited, deg, diff, mask, lo, hi):
    """The pull mask over [lo, hi): mask[v] = v is unvisited and has edges."""
    dg = np.empty(DEG_BLOCK, dtype=np.int64)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        degrees_into(deg, diff, v0, v1, dg)
        for v in range(v0, v1):            # branch-free: unvisited and with edges
            a = np.uint8(((visited[v >> 6] >> np.uint64(v & 63)) & np.uint64(1)) == 0) \
                & np.uint8(dg[v - v0] > 0)
            mask[v] = a


HYBRID = True      # run(device="auto") moves between the SSD path and the GPU level by level


def run_gpu(graph, *, src=None, gpu_mem=None, progress=None, **_ignored) -> BFSResult:
    """The whole BFS on the GPU (graphene_py.gpu: direction-optimizing, degree bins)."""
    from ..gpu import algorithms as A
    from ..gpu.resident import gpu_steps, timed
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    src = pick_source(graph) if src is None else int(src)
    st: dict = {}
    parent, depth = A.bfs(dg, src, stats=st)
    parent = parent.astype(vertex_dtype(graph.num_vertices), copy=False)
    return BFSResult(parent=parent, depth=depth, n_reached=int(np.count_nonzero(depth >= 0)),
                     src=src, levels=int(depth.max()) + 1, supersteps=gpu_steps(st, progress),
                     seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu", gpu_tier=dg.tier(),
                     **({"gpu_list_heads": dg.head("out")[1]} if dg.heads else {}))


def source(graph, src):
    """The source vertex ID a run starts from (default: pick_source); a clear error when the graph
    is empty or src is out of range (also the numpy path's: algos/small.py)."""
    return checked_source(graph, src, "BFS")


class Levels:
    """BFS levels through the engine contract (SSD, a cluster, or lists in RAM where bfs_ram does
    not apply), one `step()` per level, each choosing push or pull (EdgeMap.edge_map). The
    frontier is q[fs:fs + size]; each level is appended behind the last (q, tail, cur: a
    NextQueue); `starts` holds where each level begins. `parent` of length 0: no parents are
    written (WCC). visited / front: the level bitmaps, src already in visited and q[0]."""

    def __init__(self, em, src, parent, q, tail, cur, visited, front, force=None, steps=None,
                 progress=None, keep=0):
        self.em, self.parent, self.q, self.tail, self.cur = em, parent, q, tail, cur
        # keep: stored neighbour IDs of short lists kept in RAM from the first bottom-up level
        # on (em.keep_lists; cur needs a row for its helper thread): later bottom-up levels
        # look at the same unvisited vertices, fewer of them, and read only the longer lists
        self.keep = int(keep) if (keep and getattr(em, "local", False) and
                                  cur.shape[0] > em.threads) else 0
        self.visited, self.front, self.force = visited, front, force
        self.steps = steps if steps is not None else []
        self.progress = progress
        self.fs, self.size, self.qend, self.level = 0, 1, 1, 0
        self.starts = [0]
        self.front_cost = None      # the frontier's push bytes when the last level had them
        self.front_edges = None     # and its edges (the same degrees: pull over the out-lists)
        # degrees for the cost model: the offsets themselves on a 1x1 grid (no degree array)
        self.deg_out, self.d_out = em.degree_view("out")
        self.up = em.pull_dir is not None and force != "push"
        if self.up:
            # Direction optimisation (Beamer et al., SC'12): the pull reads the lists of the
            # unvisited vertices; their bytes and edges are kept here as they only shrink
            deg_in, d_in = self.deg_in, self.d_in = em.degree_view(em.pull_dir)
            self.mask = track("pull mask", np.zeros(em.n, dtype=np.uint8))
            self.mask_upto = -1         # q[:mask_upto] is cleared in the mask (-1: not built)
            pm = em.models[em.pull_dir]
            self.unvisited_cost = pm.all(deg_in, diff=d_in) - pm.lists(
                deg_in, q[:1], capped=False, diff=d_in)
            self.unvisited_edges = int(em.graph.num_edges) - int(_edges_of(deg_in, d_in, q[:1]))
            self.work = Work()

    @property
    def frontier(self):
        return self.q[self.fs:self.fs + self.size]

    def _unvisited(self):
        """The pull mask: built once by a pass, then kept up to date from the queue. (Called
        when a bottom-up level runs: the first asks for its short lists to be kept.)"""
        if self.keep:
            self.em.keep_lists(self.em.pull_dir, self.keep, cache=True)
            self.keep = 0
        if self.mask_upto < 0:
            self.em.on_ranges(len(self.mask), lambda t, lo, hi: _mark_unvisited(
                self.visited, self.deg_in, self.d_in, self.mask, lo, hi))   # (split over threads)
        else:
            _clear_found(self.mask, self.q, self.mask_upto, self.fs + self.size)
        self.mask_upto = self.fs + self.size
        _set_front(self.front, self.frontier)
        return self.mask

    def resume(self, f, depth):
        """Continue after levels run elsewhere (the GPU): f the frontier, depth every level so
        far (the queue does not hold them)."""
        self.fs = self.qend
        self.size = len(f)
        self.q[self.fs:self.fs + self.size] = f
        self.qend = self.fs + self.size
        _visited_from_depth(depth, self.visited)
        self.front_cost = self.front_edges = None
        if self.up:
            self.unvisited_cost = self.em.pull_cost(depth < 0)
            self.unvisited_edges = None       # (the bytes alone decide from here)
            self.mask_upto = -1               # the GPU's levels are not in the queue

    def step(self, depth=None, note=None) -> dict:
        """One level: the next is queued behind this one; depth, when given, gets its levels.
        note: fields added to the level's stats before they are reported."""
        em, q, up = self.em, self.q, self.up
        self.tail[0] = self.fs + self.size        # the next level goes behind this one
        state = (self.visited, self.front, self.parent, q, self.tail, self.cur)
        est = None
        if up:
            front_edges = (self.front_edges if self.front_edges is not None else
                           int(_edges_of(self.deg_out, self.d_out, self.frontier)))
            est = self.work.estimate(front_edges, self.unvisited_edges)
        st = em.edge_map(state, self.frontier, push=VISIT, pull=ADOPT,
                         pull_mask=self._unvisited if up else None,
                         pull_cost=self.unvisited_cost if up else None, force=self.force,
                         push_cost=self.front_cost, work=est)
        if up:
            self.work.learn(st, front_edges, self.unvisited_edges)
        fs = self.fs = self.fs + self.size
        size = self.size = int(squeeze_from(q, self.tail, self.cur, fs))
        self.qend = fs + size
        self.starts.append(fs)
        if depth is not None:
            _levels_into(depth, q, fs, self.qend, self.level + 1)
        st["level"] = self.level
        st["found"] = size
        st["device"] = "cpu"
        if note:
            st.update(note)
        self.steps.append(st)
        if self.progress is not None:
            self.progress(st)
        self.front_cost = self.front_edges = None
        if up:
            found = q[fs:fs + size]
            found_cost, found_edges = em.models[em.pull_dir].lists_and_edges(
                self.deg_in, found, diff=self.d_in)
            self.unvisited_cost -= found_cost
            if self.unvisited_edges is not None:
                self.unvisited_edges -= found_edges
            if em.pull_dir == "out":     # the same lists, by the same model: the push's bytes
                self.front_cost, self.front_edges = found_cost, found_edges
        self.level += 1
        return st

    def run(self):
        while self.size > 0:
            self.step()
        return self.starts


#: default kept-list budget, in neighbour IDs per vertex (registry: keep=(7, KEEP_PER_VERTEX));
#: kron22 from vertex 0: 1 per vertex keeps the lists of degree <= 5 and its second bottom-up
#: level reads 161 MB, 2 those of degree <= 9 and it reads 88 kB
KEEP_PER_VERTEX = 2


def keep_budget(n, in_memory, keep_edges) -> int:
    """The kept lists' budget of BFS's levels (BFS, WCC's first phase) in neighbour IDs: the
    user's keep_edges (>= 0), else KEEP_PER_VERTEX x n; none on the in-memory path."""
    if keep_edges is not None and int(keep_edges) < 0:
        raise GrapheneError(f"keep_edges must be >= 0 (got {keep_edges})")
    if in_memory:
        return 0
    return KEEP_PER_VERTEX * n if keep_edges is None else int(keep_edges)


def run(graph, *, device="cpu", in_memory=False, src=None, bottom_up=True, offload_policy=None,
        gpu_mem=None, keep_edges=None, **runtime) -> BFSResult:
    """BFS from `src` (default: pick_source). bottom_up: take a bottom-up step (unvisited vertices
    look for a parent in the frontier) whenever its estimated IO is smaller than the top-down
    step's (needs in-edges, or an undirected dataset whose out-lists are the in-lists);
    "always" makes every level bottom-up (for tests), False every level top-down.
    keep_edges: RAM for the short lists a bottom-up level reads, kept for the next bottom-up
    levels, in stored neighbour IDs (default KEEP_PER_VERTEX x n; 0: none). On kron22 the first
    bottom-up level reads every unvisited list, and every vertex the next one looks at but 132
    has at most 9 neighbours: it reads 88 kB instead of 466 MB (Levels.keep). Part of the
    adjacency cache, not of the state (`--memory none`: none)."""
    keep = keep_budget(graph.num_vertices, in_memory, keep_edges)
    from ..iterator.edgemap import EdgeMap
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    t0 = time.perf_counter()
    n = graph.num_vertices
    src = source(graph, src)
    hyb, device_note = _hybrid(graph, device, offload_policy, gpu_mem)
    vdt = vertex_dtype(n)       # parents and queues: 4-byte IDs while they fit (as GAPBS)
    parent = np.full(n, -1, dtype=vdt)
    threads = runtime.get("threads") or config.default_threads()
    # one queue for every level, one after the other (GAPBS's sliding queue): the frontier is
    # q[fs:fs + size] and the next level is appended behind it; a vertex enters once, so n slots
    # (plus one block per thread, squeezed out) hold the whole run, and the places of the levels
    # (starts) give the depths at the end
    # (one more thread's block and cursor: the kept lists' helper thread, tid = threads)
    q = np.empty(n + (threads + 1) * BLOCK, dtype=vdt)
    tail = np.zeros(1, dtype=np.int64)
    cur = np.zeros((threads + 1, 8), dtype=np.int64)    # per-thread block cursor (64-byte rows)
    front = np.zeros((n + 63) // 64, dtype=np.uint64)
    visited = np.zeros((n + 63) // 64, dtype=np.uint64)
    track("parent", parent)
    track("queue", q)
    track("level bitmaps", front, visited)
    depth = None                    # the hybrid's: the GPU's levels read and write depths
    gl = None                       # ... and its BfsLevels, once loaded
    if hyb is not None:
        depth = track("depth", np.full(n, -1, dtype=np.int32))
        depth[src] = 0
    visited[src >> 6] |= np.uint64(1) << np.uint64(src & 63)
    parent[src] = src
    q[0] = src
    steps = []
    force = "pull" if bottom_up == "always" else None
    on = "cpu"                      # where depth/parent/frontier live now
    em = EdgeMap(graph, pull=bool(bottom_up), in_memory=in_memory, **runtime)
    lv = None
    try:
        setup = em.open_seconds
        if hyb is None and in_memory and bfs_ram.usable(em):
            # the lists are in RAM: GAPBS's loop over them, without the engine's supersteps
            starts = bfs_ram.levels(em, src, parent, q, visited, front,
                                    bottom_up if em.pull_dir is not None else False,
                                    progress, steps)
        else:
            lv = Levels(em, src, parent, q, tail, cur, visited, front, force, steps, progress,
                        keep=keep)
            starts = lv.starts
        while lv is not None and lv.size > 0:
            if hyb is not None:
                side, pol = hyb
                ef = gl.ef if on == "gpu" else int(_edges_of(lv.deg_out, lv.d_out, lv.frontier))
                if gl is None:
                    gl, note = _gpu_levels(side, pol, lv.size, ef)
                    if gl is None and note is not None:     # the GPU is still loading
                        lv.step(depth, note=note)
                        continue
                if pol.decide(lv.size, ef) == "gpu":
                    gl = gl or side.get()
                    if gl is None:                          # its load failed: the CPU goes on
                        lv.step(depth)
                        continue
                    if on == "cpu":
                        gl.load(depth, parent, lv.frontier, lv.level)
                        on = "gpu"
                    t1 = time.perf_counter()
                    kind, nlev = gl.step()
                    st = {"frontier": lv.size, "active_edges": ef,
                          "seconds": time.perf_counter() - t1, "mode": f"gpu-{kind}",
                          "device": "gpu", "direction": kind, "level": lv.level, "levels": nlev,
                          "found": gl.L}
                    lv.size, lv.level = gl.L, gl.level
                    steps.append(st)
                    if progress is not None:
                        progress(st)
                    continue
                if on == "gpu":             # the state comes back to the SSD path
                    gl.store(depth, parent)
                    lv.resume(gl.frontier_host(), depth)
                    on = "cpu"
            lv.step(depth)
        if on == "gpu":
            gl.store(depth, parent)
    finally:
        if hyb is not None:
            hyb[0].close()
        em.close()
    if depth is None:
        scratch = lv.mask if lv is not None and lv.up else track("depth scratch", np.empty(
            n if len(starts) <= 255 else 0, dtype=np.uint8))
        _depths_in_queue(q, np.array(starts, dtype=np.int64), n, scratch)
        depth = q[:n] if vdt == np.int32 else q[:n].astype(np.int32)
    n_reached = int(np.count_nonzero(depth >= 0))
    extra = {"device_note": device_note} if device == "auto" else {}
    if hyb is not None:
        summ = hyb[1].summary()
        extra.update(cpu_supersteps=summ["cpu"], gpu_supersteps=summ["gpu"],
                     device_moves=summ["moves"])
        extra["device"] = ("cpu+gpu" if summ["gpu"] and summ["cpu"] else
                           "gpu" if summ["gpu"] else "cpu")
        if hyb[0].seconds is not None:
            extra["gpu_load_seconds"] = round(hyb[0].seconds, 3)
        if hyb[0].error is not None:
            extra["device_note"] = f"hybrid CPU/GPU, the GPU's load failed: {hyb[0].error}"
    return BFSResult(parent=parent, depth=depth, n_reached=n_reached, src=src,
                     levels=int(depth.max()) + 1, supersteps=steps, setup_seconds=setup,
                     seconds=time.perf_counter() - t0, **extra)


# -- verification (independent, serial) --------------------------------------------------------
@njit(cache=True)
def _check_parents(indptr, indices, parent, depth, src):
    """Index of the first vertex whose parent is not a valid BFS parent, else -1."""
    for v in range(parent.shape[0]):
        if depth[v] < 0:
            if parent[v] != -1:
                return v
            continue
        if v == src:
            if parent[v] != src:
                return v
            continue
        p = parent[v]
        if p < 0 or p >= parent.shape[0] or depth[p] != depth[v] - 1:
            return v
        lo = indptr[p]
        hi = indptr[p + 1]
        while lo < hi:   # adjacency lists are sorted: binary search for v
            mid = (lo + hi) >> 1
            if indices[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo >= indptr[p + 1] or indices[lo] != v:
            return v
    return -1


def verify(graph, result, **options) -> list:
    problems = []
    n = graph.num_vertices
    src = int(result.src)
    parent, depth = np.asarray(result.parent), np.asarray(result.depth)
    if parent.shape != (n,) or depth.shape != (n,):
        return [f"result arrays have shapes {parent.shape}/{depth.shape}, want ({n},)"]
    indptr, indices, _ = graph.to_csr("out")
    ref = serial_bfs_depth(indptr, indices, src, n)
    bad = np.flatnonzero(ref != depth)
    if len(bad):
        v = int(bad[0])
        problems.append(f"{len(bad)} vertices have a wrong depth (first: vertex {v} depth "
                        f"{int(depth[v])}, serial BFS says {int(ref[v])})")
    v = int(_check_parents(indptr, indices, parent, depth, src))
    if v >= 0:
        problems.append(f"vertex {v} has an invalid parent {int(parent[v])} (depth {int(depth[v])})")
    nr = int(np.count_nonzero(ref >= 0))
    if int(result.n_reached) != nr:
        problems.append(f"n_reached is {int(result.n_reached)}, serial BFS reaches {nr}")
    return problems


CLI_OPTIONS = [
    click.Option(["--src", "-r"], type=str, default=None,
                 help="Source vertex: its ID 0..|V|-1, or its name on a dataset partitioned with "
                      "--labels (--relabel: its original ID) (default: a random vertex with "
                      "out-edges, fixed seed)."),
    click.Option(["--top-down", "bottom_up"], flag_value=False, default=True,
                 help="Top-down steps only (no direction optimisation)."),
    click.Option(["--keep-edges", "keep_edges"], type=click.IntRange(min=0), default=None,
                 help="RAM for the short lists a bottom-up level reads, kept for the next ones, "
                      "in neighbour IDs (default 2 per vertex; 0: keep none; --memory none: "
                      "none)."),
]
