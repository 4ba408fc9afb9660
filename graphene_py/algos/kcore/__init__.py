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
of the vertices that the previous round took from degree K to K-1 (the same mask), until a round
takes none. Kernels skip neighbours no longer in the core (a bitmap of the vertices of degree >= K
when the round began, read-only during a superstep: n/8 bytes, in cache) and decrement the others'
degrees atomically; after the round a serial pass over that bitmap finds the vertices whose degree
fell below K and clears their bits, so each vertex crosses K exactly once. On the SSD path round 1
also keeps in RAM the lists of the vertices of degree just above K (`kept_lists` of them: at most
1/16 of round 1's edges, sharing one row of n entries with the bitmap; their blocks lie among the
ones read anyway): when such a vertex drops, its list is peeled at once in memory (cascading
through other kept lists) instead of costing another round of small random reads; round 2 on
Kronecker graphs shrinks from ~5,000 lists to a handful. State: two rows of n degrees-sized
integers and the status mask (9 bytes per vertex with 4-byte degrees), plus the offsets.
After the last round, degree >= K <=> in the K-core (a member's degree is then its degree inside
the K-core).
"""
from __future__ import annotations

import time

import click
import numpy as np

from ...errors import GrapheneError
from ..common import vertex_dtype
from .base import KEEP_PER_VERTEX, KCoreResult, Moved, _peel_serial, _result  # noqa: F401  (KCoreResult: the API; _result: algos/small.py)
from .full import _run_full
from .membership import _run_membership
from .scan import _run_scan


CLUSTER = True     # both modes run on a cluster (without kept lists there)


def run_gpu(graph, *, k=None, gpu_mem=None, progress=None, **_ignored) -> KCoreResult:
    """Core numbers on the GPU (peeling); with k also the K-core's membership."""
    from ...gpu import algorithms as A
    from ...gpu.resident import gpu_steps, timed
    if k is not None and int(k) < 0:
        raise GrapheneError("--k must be >= 0")
    dg, t_load = timed(graph, gpu_mem)
    t0 = time.perf_counter()
    st: dict = {"tier": dg.tier()} if dg.tiered else {}   # (mode gpu-mixed, gpu-host)
    core = A.kcore(dg, stats=st).astype(vertex_dtype(dg.num_vertices), copy=False)
    return KCoreResult(core_number=core, max_core=int(core.max()) if len(core) else 0,
                       k=None if k is None else int(k),
                       in_k_core=None if k is None else core >= int(k),
                       rounds=st.get("rounds", 0), supersteps=gpu_steps(st, progress),
                       seconds=time.perf_counter() - t0, load_seconds=t_load, device="gpu", gpu_tier=dg.tier())


HYBRID = True       # run(device="auto"): both modes start on the CPU; the GPU may take over
HANDOFF = True      # between two rounds once a thread has loaded it (KCorePart)


def _handoff(graph, gpu_mem, handoff_at, membership=False):
    """(Handoff or None, note) for device="auto": the GPU's part (the dataset loaded resident:
    gpu/handoff.py KCorePart) is made on a thread of its own while the CPU peels."""
    from ..registry import gpu_may_be_available
    why = gpu_may_be_available()     # (no CuPy here: it starts on the load's thread)
    if why:
        return None, f"no GPU ({why})"
    from ...gpu.handoff import KCORE_GPU_PASSES, Handoff, kcore_part
    from ...gpu.policy import RUN_PASSES
    passes = RUN_PASSES["kcore-membership"] if membership else KCORE_GPU_PASSES
    return Handoff(kcore_part(graph, gpu_mem, passes), state_bytes=4 * graph.num_vertices,
                   force_at=handoff_at), "hybrid CPU/GPU: the GPU takes over once it is ready"


def handoff_prep_seconds(graph, opts):
    """(setup, once after the move) estimated seconds of the GPU's part of a hand-off (both
    modes: the full decomposition and one K-core): the dataset's resident load, then nothing.
    None where no hand-off runs: a directed dataset without in-edges (the scan), a load that
    would assemble the CSR on the host beside the CPU's run without room."""
    if graph.directed and graph.in_partitions is None:
        return None
    from ...gpu.handoff import resident_prep_seconds
    from ...iterator.memory import memory_available
    return resident_prep_seconds(graph, memory_available())


def run(graph, *, device="cpu", in_memory=False, k=None, membership_only=False, keep_edges=None,
        tail_edges=None, gpu_mem=None, gpu_tier=None, handoff_at=None,
        **runtime) -> KCoreResult:
    """Core numbers of every vertex (membership_only: only the K-core for k=K). keep_edges: RAM
    budget of the full decomposition for kept lists, in neighbour IDs (default 4n; 0: none;
    tail_edges: its old name).
    device="auto" (dispatch's "hybrid"): either mode peels on the CPU while a thread loads the
    dataset into GPU memory; after a round, once it is there, the GPU peels the rest from the
    core numbers so far when its estimate is below the CPU's for the rest (gpu/handoff.py; one
    K-core: the vertices left, from level K - 1). handoff_at: move after that CPU superstep,
    waiting there for the load (tests). gpu_tier: the part is resident (the GPU's k-core reads lists zero-copy past the
    budget, it does not stream)."""
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
    n = graph.num_vertices
    scan = graph.directed and graph.in_partitions is None
    if membership_only:
        if k is None:
            raise GrapheneError("membership_only needs k (which core to compute: --k K)")
        if device != "auto" or n == 0 or graph.num_edges == 0 or scan:
            return _run_membership(graph, k, in_memory, runtime, progress, t0)
        return _hybrid(graph, gpu_mem, handoff_at, progress, t0, lambda ho: _run_membership(
            graph, k, in_memory, runtime, progress, t0, ho=ho), k=int(k), membership=True)
    if scan:
        if getattr(graph, "cluster", None) is not None:
            raise GrapheneError(f"{graph.name}: k-core on a cluster needs an undirected dataset "
                                f"or in-edge partitions (re-partition with --in-edges)")
        budget = n if keep_edges is None else int(keep_edges)
        return _run_scan(graph, budget, in_memory, runtime, progress, t0, k)
    budget = KEEP_PER_VERTEX * n if keep_edges is None else int(keep_edges)
    dirs = ["out", "in"] if graph.directed else ["out"]
    if device != "auto" or n == 0 or graph.num_edges == 0:
        return _run_full(graph, dirs, budget, in_memory, runtime, progress, t0, k)
    return _hybrid(graph, gpu_mem, handoff_at, progress, t0, lambda ho: _run_full(
        graph, dirs, budget, in_memory, runtime, progress, t0, k, ho=ho), k=k,
        keep_edges=int(budget))


def _hybrid(graph, gpu_mem, handoff_at, progress, t0, cpu_run, k, membership=False,
            keep_edges=None) -> KCoreResult:
    """device="auto": cpu_run(ho) peels on the CPU while a thread loads the dataset into GPU
    memory (_handoff); a run that moved (Moved) ends on the GPU from the peel so far: the
    core numbers, or for membership the K-core's members (core number >= K)."""
    ho, note = _handoff(graph, gpu_mem, handoff_at, membership)
    try:
        got = cpu_run(ho)
    finally:
        if ho is not None:
            ho.finish()
    if ho is None:
        got.device, got.device_note = "cpu", note
        return got
    if not isinstance(got, Moved):
        got.__dict__.update(ho.summary(0), device="cpu", device_note=note)
        return got
    from ...gpu.resident import gpu_steps
    gst: dict = {}
    if membership:       # the GPU's peel ends at level K: every vertex left (-1) is a member
        core = np.asarray(ho.load.value.run(got.core, got.level, gst, stop=k))
    else:
        core = np.asarray(ho.load.value.run(got.core, got.level, gst)).astype(
            vertex_dtype(graph.num_vertices), copy=False)
    steps = got.steps + gpu_steps(gst, progress)
    rounds = got.rounds + int(gst.get("rounds", 0))
    if membership:
        in_k = (core >= k) | (core < 0)
        res = KCoreResult(core_number=None, max_core=None, k=k, in_k_core=in_k,
                          k_core_size=int(np.count_nonzero(in_k)), membership_only=True,
                          rounds=rounds, kept_lists=got.kept, supersteps=steps,
                          seconds=time.perf_counter() - t0)
    else:
        res = _result(core, k, rounds, steps, t0, kept_lists=got.kept, keep_edges=keep_edges)
    res.__dict__.update(ho.summary(len(steps) - len(got.steps)), device="cpu+gpu",
                        device_note=note)
    return res


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
