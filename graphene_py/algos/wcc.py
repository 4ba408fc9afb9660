"""Weakly connected components: Graphene's hybrid (BFS for the big component, then label propagation).

Computes: `labels` int32[n] (int64 from 2^31 vertices), every vertex labelled with the smallest vertex ID of its weakly connected
component, and `n_components` (isolated vertices are components of their own).
Returns: WCCResult(labels, n_components, bfs_reached, supersteps, seconds).

Algorithm (Graphene §4.7, "hybrid WCC"):
1. BFS from the vertex of largest degree (out + in), edges treated as undirected: each level streams
   the frontier's out-lists and, when the dataset is directed and has in-edge partitions, their
   in-lists too (an undirected dataset's in-lists are its out-lists: they are never read twice). On a
   power-law graph this finds the giant component in a few supersteps of sparse IO. Every reached
   vertex gets the smallest reached ID. On an undirected dataset (one machine or a cluster) the
   levels are BFS's own (bfs.Levels; in RAM, algos/bfs_ram.py): each goes top-down or bottom-up,
   whichever is estimated faster, without parents, and their queue then holds the labels.
2. Label propagation (min label) for the rest: in a superstep every active vertex v pushes label[v]
   to its neighbours with an atomic min (no lost updates; labels only decrease, so reading a label
   another thread is lowering is harmless and speeds propagation); vertices whose label dropped are
   the next frontier. Undirected datasets and datasets with in-edges push along both directions, so
   the changed vertices are the whole frontier.
   A directed dataset *without* in-edges cannot push "backwards"; there each compute call both
   pushes the min of {v, its chunk of neighbours} to the neighbours and pulls it into v, and every
   vertex with out-edges is active every superstep (Frontier.all) until nothing changes. Correct,
   but re-reads the graph each superstep: partition with --in-edges for speed.
Labels are exact on every schedule: a superstep ends with no change only at the fixed point, where
every edge joins equal labels, i.e. every vertex holds its component's minimum ID.
"""
from __future__ import annotations

import time

import click
import numpy as np
from ..jit import njit


from . import bfs_ram
from .common import Result, vertex_dtype


CLUSTER = True     # runs on a cluster (every superstep through the engine contract)

class WCCResult(Result):
    MAIN = "labels"
    VERTEX_ARRAYS = {"labels": "component"}


# ---------------------------------------------------------------------------------------------
@njit(cache=True)
def _in_frontier(v, state):
    return state[0][v] != 0


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _bfs_visit(v, nbrs, wts, tid, state):
    """Mark unvisited neighbours (visited writes race benignly: every writer stores 1)."""
    cur, visited, nxt = state
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if visited[u] == 0:
            visited[u] = 1
            nxt[u] = 1


@njit(cache=True)
def _lp_push(v, nbrs, wts, tid, state):
    """label[u] = min(label[u], label[v]) for every neighbour u (atomic min); lowered -> changed."""
    active, label, changed = state
    lv = label[v]
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if lv < label[u]:
            if _amin(label, u, lv) > lv:
                changed[u] = 1


@njit(cache=True)
def _lp_both(v, nbrs, wts, tid, state):
    """Push and pull along out-edges (directed datasets without in-edges): v and its neighbours in
    this chunk all get the minimum label among them."""
    active, label, changed = state
    m = label[v]
    for i in range(len(nbrs)):
        lu = label[np.int64(nbrs[i])]
        if lu < m:
            m = lu
    if m < label[v]:
        if _amin(label, v, m) > m:
            changed[v] = 1
    for i in range(len(nbrs)):
        u = np.int64(nbrs[i])
        if m < label[u]:
            if _amin(label, u, m) > m:
                changed[u] = 1


from ..iterator.atomics import atomic_min as _amin  # noqa: E402
from ..iterator.edgemap import EdgeMap, Update  # noqa: E402
from ..iterator.memory import track  # noqa: E402
from ..iterator.queue import BLOCK  # noqa: E402
from ..io.offsets import DEG_BLOCK, degrees_into  # noqa: E402
from ..io.bitmap import ctz64  # noqa: E402


@njit(cache=True, nogil=True)
def _hub_and_flags(dout, diff_out, din, diff_in, both, has_edges):
    """has_edges[v] = v has an edge (out, plus in when `both`); returns the first vertex of the
    largest degree. Degrees come from degree_view (the offsets themselves on one partition): no
    degree array of n entries."""
    best = -1
    root = 0
    n = has_edges.shape[0]
    do = np.empty(DEG_BLOCK, dtype=np.int64)
    di = np.empty(DEG_BLOCK, dtype=np.int64)
    for v0 in range(0, n, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, n)
        degrees_into(dout, diff_out, v0, v1, do)
        if both:
            degrees_into(din, diff_in, v0, v1, di)
        for v in range(v0, v1):
            d = do[v - v0]
            if both:
                d += di[v - v0]
            has_edges[v] = d > 0
            if d > best:
                best = d
                root = v
    return root

#: the BFS marks flags (every writer stores 1); propagation lowers labels (min) and flags changes
BFS_VISIT = Update(_in_frontier, _bfs_visit, combine="or", writes=(1, 2), reads=1)
LP_PUSH = Update(_in_frontier, _lp_push, combine="min", writes=(1, (2, "or")), reads=1)
LP_BOTH = Update(_always, _lp_both, combine="min", writes=(1, (2, "or")), reads=1)


# ---------------------------------------------------------------------------------------------
def _reached(em, n, root, dirs, steps, progress, ho=None, box=None):
    """Phase 1 through the engine: a top-down BFS from root over every direction's lists, with
    byte flags; returns the reached flags (bool[n], the visited row itself). box: gets the row
    (a run that moves to the GPU in mid-level takes it from there)."""
    visited = np.zeros(n, dtype=np.uint8)
    visited[root] = 1
    if box is not None:
        box["visited"] = visited
    cur = np.zeros(n, dtype=np.uint8)
    cur[root] = 1
    level = 0
    while True:
        nxt = np.zeros(n, dtype=np.uint8)
        track("BFS flags", visited, cur, nxt)
        for st in em.across((cur, visited, nxt), BFS_VISIT, dirs, mask=cur):
            _note(steps, progress, st, "bfs", level, ho)
        level += 1
        if not nxt.any():
            break
        cur = nxt
    return visited.view(np.bool_)


def _bfs_levels(em, n, root, steps, progress, keep=0, ho=None, box=None):
    """Phase 1 on an undirected dataset: BFS's direction-optimizing levels without parents (in
    RAM GAPBS's loop, algos/bfs_ram.py; else the engine's, bfs.Levels: a pull reads the lists of
    the unvisited vertices where that is faster; keep: neighbour IDs of short lists kept in RAM
    from its first pull on, as BFS's). Returns (q, visited): the queue, n + a block per thread
    (and one for the kept lists' helper thread) of 4-byte IDs, which then holds the labels, and
    the visited bitmap. box: gets both as they are made (a run that moves to the GPU after a
    level takes them from there)."""
    from .bfs import Levels
    vdt = vertex_dtype(n)
    threads = em.threads
    q = track("labels (the BFS queue first)", np.empty(n + (threads + 1) * BLOCK, dtype=vdt))
    words = (n + 63) // 64
    visited, front = np.zeros(words, dtype=np.uint64), np.zeros(words, dtype=np.uint64)
    track("BFS bitmaps", visited, front)
    visited[root >> 6] |= np.uint64(1) << np.uint64(root & 63)
    q[0] = root
    if box is not None:
        box.update(q=q, visited=visited)

    def note(st):
        _note(steps, progress, st, "bfs", st.get("level", 0), ho)
    none = np.empty(0, dtype=vdt)
    if bfs_ram.usable(em):
        bfs_ram.levels(em, root, none, q, visited, front, True, note, [],
                       up_dir="out")          # undirected: the out-lists are the in-lists
    else:
        tail = np.zeros(1, dtype=np.int64)
        cur = np.zeros((threads + 1, 8), dtype=np.int64)
        Levels(em, root, none, q, tail, cur, visited, front, progress=note, keep=keep).run()
    return q, visited


@njit(cache=True, nogil=True)
def _labels_from_visited(label, visited, has_edges, active):
    """label[v] = the smallest reached ID where v was reached, else v; active[v] = 1 where v was
    not reached and has edges (propagation's first frontier). Returns how many were reached."""
    n = label.shape[0]
    first = -1
    for w in range(visited.shape[0]):
        if visited[w] != 0:
            first = w * 64 + np.int64(ctz64(visited[w]))
            break
    c = 0
    for v in range(n):            # selects, not branches: which vertices were reached follows
        r = (visited[v >> 6] >> np.uint64(v & 63)) & np.uint64(1)     # no pattern
        got = r != 0
        label[v] = first if got else v
        c += np.int64(r)
        active[v] = 0 if got else has_edges[v]
    return c


class _Move(Exception):
    """Raised after a superstep's line when a `--device auto` run moves to the GPU there."""


def _note(steps, progress, st, phase, step, ho=None):
    """Records and reports a superstep; under a hand-off (gpu/handoff.py) marks it with where it
    ran and why, and raises _Move after reporting it when the GPU takes the rest."""
    st = dict(st)
    st.update(phase=phase, step=step)
    move = False
    if ho is not None:
        ho.mark(st)
        move = ho.after(st, ho.cpu_steps, 0.0)
    steps.append(st)
    if progress is not None:
        progress(st)
    if move:
        raise _Move()


GPU_STREAMS = True     # run_gpu can stream the lists once instead (gpu/streamed.py)


def choose_gpu_tier(graph, gpu_mem=None, tier="auto"):
    """"resident" (DeviceGraph: GPU memory, the rest zero-copy; Afforest) or the out-lists
    streamed once from pinned host memory or from the SSD (union-find): auto takes the least
    estimated time, the dataset's load counted (gpu/streamed.auto_tier)."""
    if tier != "auto":
        return tier
    from ..gpu.streamed import auto_tier, stream_setup_seconds
    from ..iterator.memory import memory_available
    return auto_tier(graph, gpu_mem, graph.num_edges * int(graph.id_width), memory_available(),
                     setup_s=stream_setup_seconds(graph, "wcc"))


def gpu_tier_costs(graph, opts) -> dict:
    """Estimated seconds of each GPU tier (one union-find pass streamed, or the dataset loaded
    for Afforest), without asking the GPU: `--device auto`'s plan (algos/registry.py)."""
    from ..gpu.streamed import stream_setup_seconds, tier_costs
    from ..iterator.memory import memory_available
    return tier_costs(graph, opts.get("gpu_mem"), graph.num_edges * int(graph.id_width),
                      memory_available(), 1.0, probe=False,
                      setup_s=stream_setup_seconds(graph, "wcc"))


def run_gpu(graph, *, gpu_mem=None, gpu_tier="auto", progress=None, **_ignored) -> WCCResult:
    """WCC on the GPU: resident, Afforest (sampled linking, then the rest); streamed, union-find
    over the out-lists in one pass (gpu/streamed.py). Labels: each component's smallest ID."""
    from ..gpu import algorithms as A
    from ..gpu.resident import gpu_steps, timed
    tier = choose_gpu_tier(graph, gpu_mem, gpu_tier)
    if tier.startswith("stream"):
        from ..gpu import streamed
        t0 = time.perf_counter()
        st: dict = {}
        labels = streamed.wcc(graph, source=tier[len("stream-"):], stats=st)
        return WCCResult(labels=labels.astype(vertex_dtype(graph.num_vertices), copy=False),
                         n_components=st["n_components"], bfs_reached=0,
                         supersteps=gpu_steps(st, progress), seconds=time.perf_counter() - t0,
                         load_seconds=st.get("setup_seconds", 0.0), device="gpu", gpu_tier=tier)
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    st: dict = {}
    labels = A.wcc(dg, stats=st).astype(vertex_dtype(graph.num_vertices), copy=False)
    return WCCResult(labels=labels, n_components=st["n_components"], bfs_reached=0,
                     supersteps=gpu_steps(st, progress), seconds=time.perf_counter() - t0,
                     load_seconds=t_load, device="gpu", gpu_tier=dg.tier())


@njit(cache=True, nogil=True)
def _roots(label):
    """Components: vertices labelled with their own ID (no n-sized temporaries)."""
    c = 0
    for v in range(label.shape[0]):
        if label[v] == v:
            c += 1
    return c


HYBRID = True       # run(device="auto") starts on the CPU; the GPU may take over in mid-run
HANDOFF = True      # ... once a thread of its own has loaded it (gpu/handoff.py WCCPart)


def _handoff(graph, gpu_mem, gpu_tier, handoff_at):
    """(Handoff or None, note) for device="auto": the GPU's part (the tier a GPU run would take,
    set up: gpu/handoff.py WCCPart) is made on a thread of its own while the CPU runs."""
    from .registry import gpu_may_be_available
    why = gpu_may_be_available()     # (no CuPy here: it starts on the load's thread)
    if why:
        return None, f"no GPU ({why})"
    from ..gpu.handoff import Handoff, wcc_part
    from ..iterator.memory import memory_available
    load = wcc_part(graph, gpu_mem, lambda: choose_gpu_tier(graph, gpu_mem, gpu_tier),
                    memory_available())
    return Handoff(load, state_bytes=4 * graph.num_vertices, force_at=handoff_at), \
        "hybrid CPU/GPU: the GPU takes over once it is ready"


def handoff_prep_seconds(graph, opts):
    """(setup, once after the move) estimated seconds of the GPU's part of a hand-off
    (gpu/handoff.py WCCPart) in the tier a GPU run would take: resident, the dataset's load,
    then nothing; streamed, nothing, then the tier's one pass (its read). None when no tier can
    hold the run. Without asking the GPU (the plan)."""
    tier = str(opts.get("gpu_tier", "auto"))
    costs = gpu_tier_costs(graph, opts)
    if tier == "auto":
        tier = min(costs, key=costs.get) if costs else "resident"
    if tier == "resident":       # (None: its assembly on the host, beside the CPU's run)
        from ..gpu.handoff import resident_prep_seconds
        from ..iterator.memory import memory_available
        return resident_prep_seconds(graph, memory_available())
    return (0.0, costs[tier]) if tier in costs else None


def run(graph, *, device="cpu", in_memory=False, keep_edges=None, gpu_mem=None, gpu_tier="auto",
        handoff_at=None, **runtime) -> WCCResult:
    """Components of an undirected dataset: a direction-optimizing BFS from the largest hub,
    then label propagation over the vertices it did not reach. keep_edges: RAM for short lists
    kept from the BFS's first bottom-up level on, in stored neighbour IDs (default 2 per vertex;
    0: none): its later levels and the propagation's supersteps take them from RAM (part of the
    adjacency cache, not of the state: `--memory none` keeps none).
    device="auto" (dispatch's "hybrid"): the CPU runs while a thread loads the dataset into GPU
    memory; after each superstep, once it is there, the GPU takes the rest from the labels so
    far when its estimate is below the CPU's last superstep (gpu/handoff.py). handoff_at: move
    after that superstep, waiting there for the load (tests)."""
    from .bfs import keep_budget
    keep = keep_budget(graph.num_vertices, in_memory, keep_edges)
    runtime = dict(runtime)
    progress = runtime.pop("progress", None)
    runtime.pop("device", None)
    t0 = time.perf_counter()
    n = graph.num_vertices
    steps = []
    if graph.num_edges == 0 or n == 0:
        label = np.arange(n, dtype=vertex_dtype(n))
        return WCCResult(labels=label, n_components=n, bfs_reached=min(n, 1), supersteps=steps,
                         seconds=time.perf_counter() - t0)
    ho, note = _handoff(graph, gpu_mem, gpu_tier, handoff_at) if device == "auto" else (None, "")
    symmetric = not graph.directed
    # an undirected dataset's in-edge partitions hold the same edges as its out-edge ones
    has_in = graph.in_partitions is not None and not symmetric
    dirs = ["out", "in"] if has_in else ["out"]
    box, phase, moved = {}, "bfs", False
    label = n_reached = None
    try:
        # an undirected dataset pulls over its out-lists (its BFS levels go bottom-up)
        em = EdgeMap(graph, pull=has_in or symmetric, in_memory=in_memory, **runtime)
    except BaseException:
        if ho is not None:
            ho.finish()
        raise
    try:
        # degrees from the offsets the iterators hold (no copy of them on a 1x1 grid)
        dout, diff_out = em.degree_view("out")
        din, diff_in = em.degree_view("in") if has_in else (dout, diff_out)
        has_edges = track("has-edges flags", np.zeros(n, dtype=np.bool_))
        root = int(_hub_and_flags(dout, diff_out, din, diff_in, has_in, has_edges))
        del dout, din      # all the rest needs: 1 byte per vertex
        em.deg.clear()
        if not symmetric:
            # 4-byte labels while IDs fit (as GAPBS)
            label = track("labels", np.arange(n, dtype=vertex_dtype(n)))
        # 1. BFS from the max-degree vertex
        if symmetric:
            # direction-optimizing, no parents; the queue becomes the labels (a cluster too:
            # the levels' state goes through the engine contract as BFS's does)
            _bfs_levels(em, n, root, steps, progress, keep, ho, box)
            em.deg.clear()
        else:
            _reached(em, n, root, dirs, steps, progress, ho, box)
        label, n_reached, active = _labels_after_bfs(box, label, has_edges, symmetric)
        # 2. label propagation for the rest
        phase = "lp"
        step = 0
        if symmetric or has_in:
            while active.any():
                changed = np.zeros(n, dtype=np.uint8)
                track("propagation flags", active, changed)
                for st in em.across((active, label, changed), LP_PUSH, dirs, mask=active):
                    _note(steps, progress, st, "lp", step, ho)
                active = changed
                step += 1
        elif n_reached < n:
            ones = np.ones(n, dtype=np.uint8)
            while True:
                changed = np.zeros(n, dtype=np.uint8)
                st = em.dense((ones, label, changed), LP_BOTH)
                _note(steps, progress, st, "lp", step, ho)
                step += 1
                if not changed.any():
                    break
    except _Move:
        moved = True
        if phase == "bfs":        # the vertices reached so far are one tree under the least
            label, n_reached, _ = _labels_after_bfs(box, label, has_edges, symmetric)
    finally:
        em.close()
        if ho is not None:
            ho.finish()
    extra = {"device_note": note} if device == "auto" else {}
    n_comp = None
    if moved:
        from ..gpu.resident import gpu_steps
        gst: dict = {}
        label = np.asarray(ho.load.value.run(label, gst)).astype(vertex_dtype(n), copy=False)
        gsteps = gpu_steps(gst, progress)
        steps.extend(gsteps)
        n_comp = gst.get("n_components")
        extra.update(ho.summary(len(gsteps)), device="cpu+gpu")
    elif ho is not None:
        extra.update(ho.summary(0), device="cpu")
    if n_comp is None:
        n_comp = _roots(label)
    return WCCResult(labels=label, n_components=n_comp, bfs_reached=n_reached, supersteps=steps,
                     seconds=time.perf_counter() - t0, **extra)


def _labels_after_bfs(box, label, has_edges, symmetric):
    """(labels, vertices reached, propagation's first frontier) from the BFS's state in box (all
    of it, or as far as it went): every reached vertex gets the least reached ID, the rest their
    own."""
    n = has_edges.shape[0]
    if symmetric:
        label = box["q"][:n]
        active = np.empty(n, dtype=np.uint8)
        n_reached = int(_labels_from_visited(label, box["visited"], has_edges, active))
        box.pop("q", None)
        box.pop("visited", None)
        return label, n_reached, active
    reached = box["visited"].view(np.bool_)
    label[reached] = int(np.argmax(reached))     # the smallest reached ID
    return label, int(reached.sum()), (~reached & has_edges).view(np.uint8)


def verify(graph, result, **_ignored) -> list:
    """Serial union-find over the stored edges; labels must equal each component's minimum ID."""
    n = graph.num_vertices
    lab = np.asarray(result.labels)
    if lab.shape != (n,):
        return [f"labels has shape {lab.shape}, expected ({n},)"]
    parent = np.arange(n, dtype=np.int64)
    src, dst = graph.edges("out")
    ref = _union_find(parent, src, dst)
    problems = []
    bad = np.flatnonzero(ref != lab)
    if len(bad):
        v = int(bad[0])
        problems.append(f"{len(bad)} vertices mislabelled (vertex {v}: {int(lab[v])}, expected "
                        f"{int(ref[v])})")
    n_comp = int(np.count_nonzero(ref == np.arange(n)))
    if int(result.n_components) != n_comp:
        problems.append(f"n_components {result.n_components}, expected {n_comp}")
    return problems


@njit(cache=True)
def _union_find(parent, src, dst):
    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for i in range(src.shape[0]):
        a = find(src[i])
        b = find(dst[i])
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    out = np.empty_like(parent)
    for v in range(parent.shape[0]):
        out[v] = find(v)
    return out


CLI_OPTIONS = [
    click.Option(["--keep-edges", "keep_edges"], type=click.IntRange(min=0), default=None,
                 help="RAM for the short lists the BFS's bottom-up levels read, kept for the next "
                      "levels and the label propagation, in neighbour IDs (default 2 per vertex; "
                      "0: keep none; --memory none: none)."),
]
