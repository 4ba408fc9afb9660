"""The one registry of built-in algorithms, and the one dispatcher that the CLI (`graphene run`),
the Python API (`graphene_py.bfs(...)`) and any later front end use.

An algorithm is a module `graphene_py/algos/<module>.py` (or a package) plus one line in ENTRIES.
The module provides:

    run(graph, *, device="cpu", in_memory=False, progress=None, <options>, **runtime) -> Result
        the SSD path (and the in-memory one: in_memory=True); device="auto" is passed only when
        the module says HYBRID = True (it then chooses a device per superstep itself)
    run_gpu(graph, *, gpu_mem=None, progress=None, <options>, **ignored) -> Result     (optional)
        the whole algorithm on the GPU, through the graphene_py.gpu device library
    verify(graph, result, **options) -> list[str]        an independent serial check
    CLI_OPTIONS                                          click options of `graphene run NAME`
    HYBRID = False                                       (optional)

`dispatch(name, graph, device=..., **options)` checks the options (one set of ranges for every
front end), picks the device — cpu: `run`; gpu: `run_gpu` or a clear error; auto: a hybrid
module's own choice, else the GPU when one is usable and the module has a GPU entry, else the
CPU — and runs it.
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field


from ..errors import GrapheneError


@dataclass(frozen=True)
class Entry:
    name: str                       # what users type: `graphene run NAME`, graphene_py.NAME(...)
    module: str                     # graphene_py.algos.<module>
    summary: str                    # one whole sentence for `graphene run -h`
    fixed: dict = field(default_factory=dict)   # options the name fixes (pagerank-pull: variant)
    #: O(|V|) state in bytes per vertex beyond the offsets: (fixed, per compute thread); measured
    #: with tools/bench_memory.py (the `memory` block's state on kron22, 2 threads), rounded up.
    #: `graphene run --memory` plans with it.
    state: tuple = (64, 8)
    #: adjacency lists kept in RAM (`--keep-edges`): (bytes per vertex of slots once any list is
    #: kept, default budget in neighbour IDs per vertex); each kept ID costs the ID width on top.
    #: Not counted in `state`; `--memory` picks the budget that fits when the user gives none.
    keep: tuple = None
    #: numpy temporaries between supersteps, per vertex (TEMP_BYTES_PER_VERTEX, or 0 where the
    #: measured trial growth stays below the allocated state: k-core, MS-BFS)
    temp: int = None
    #: {option: state} where an option, when set, changes the state (kcore --membership-only)
    state_if: dict = field(default_factory=dict)
    #: whether the default `--memory auto` gives it an adjacency cache: not where a run reads a
    #: block at most about twice, so the copy of its second read is never used (BFS: own time
    #: +35% at a cache of the whole adjacency on kron22 4x4, +123% at scale 24; BENCHMARKS.md,
    #: "The `--memory` knob with the read-through cache")
    auto_cache: bool = True
    #: whether its kept lists are part of the adjacency cache (reported apart from the O(|V|)
    #: state; `--memory none` keeps none) rather than of its state (k-core, MS-BFS)
    keep_cache: bool = False

    def state_for(self, opts: dict) -> tuple:
        for opt, st in self.state_if.items():
            if opts.get(opt):
                return st
        return self.state


ENTRIES = {e.name: e for e in (
    Entry("bfs", "bfs", "Breadth-first search from one source (direction-optimizing).",
          state=(20, 0), keep=(7, 2), auto_cache=False, keep_cache=True),
    Entry("pagerank", "pagerank",
          "Delta PageRank: Gauss-Seidel sweeps, then pushes of the large changes.",
          {"variant": "delta"}, state=(19, 0), temp=0),
    Entry("pagerank-pull", "pagerank", "Classic pull PageRank (power iteration, GAPBS stop rule).",
          {"variant": "pull"}, state=(34, 8)),
    Entry("wcc", "wcc", "Weakly connected components (BFS, then label propagation).",
          state=(21, 0), keep=(7, 2), keep_cache=True),
    Entry("kcore", "kcore", "k-core decomposition: core numbers, or one K-core with --k.",
          state=(27, 8), keep=(12, 4), state_if={"membership_only": (10, 0)}, temp=0),
    Entry("apsp", "msbfs", "Shortest-path depths from many sources at once (bit-parallel BFS).",
          state=(26, 0), keep=(7, 1), temp=0),
    Entry("msbfs", "msbfs", "Multi-source BFS, bit-parallel (the same as apsp).", state=(26, 0),
          keep=(7, 1), temp=0),
    Entry("spmv", "spmv", "Sparse matrix-vector product y = A x.", state=(17, 0)),
    Entry("sssp", "sssp", "Single-source shortest paths by delta-stepping (weighted datasets).",
          state=(36, 0)),
    Entry("bc", "bc", "Betweenness centrality (Brandes), from sampled sources or all of them.",
          state=(54, 0)),
)}


def names() -> list:
    return sorted(ENTRIES)


def on_cluster(name: str, opts: dict = None) -> bool:
    """Whether algorithm `name` (with these options) runs on a cluster: its module says CLUSTER =
    True (every superstep through the engine contract, with declared writes), or a predicate of
    the options."""
    e = entry(name)
    ok = getattr(module(name), "CLUSTER", False)
    return bool(ok({**e.fixed, **(opts or {})}) if callable(ok) else ok)


def cluster_names() -> list:
    """The algorithms that run on a cluster (with their default options)."""
    return [n for n in names() if on_cluster(n)]


def entry(name: str) -> Entry:
    try:
        return ENTRIES[name]
    except KeyError:
        raise GrapheneError(f"unknown algorithm {name!r}; choose from {', '.join(names())}") from None


def module(name: str):
    """The module implementing algorithm `name` (ImportError when it cannot be imported)."""
    return importlib.import_module(f"graphene_py.algos.{entry(name).module}")


def gpu_available():
    """(True, "") when the GPU path can run here, else (False, why). Never raises."""
    try:
        from .. import gpu
        if gpu.available():
            return True, ""
        return False, gpu.why_unavailable()
    except Exception as e:  # noqa: BLE001 - any failure means "not available"
        return False, f"graphene_py.gpu cannot be used ({e})"


def choose_device(name: str, device: str, graph=None, opts: dict = None) -> str:
    """Where `dispatch` runs algorithm `name` for the requested device: "cpu", "gpu" or "hybrid"
    (the module decides per superstep). Raises GrapheneError when "gpu" cannot be honoured.
    With a graph, "auto" is planned for the whole run (gpu/policy.py plan_run): the GPU only where
    its start and the dataset's load pay off over the run (for a hybrid module: before its first
    superstep moves anything), else the CPU."""
    return _choose(name, device, graph, opts)[0]


def _choose(name, device, graph=None, opts=None):
    """(where, reason): choose_device and why (None unless --device auto planned it)."""
    mod = module(name)
    if device in (None, "cpu"):
        return "cpu", None
    if device not in ("gpu", "auto"):
        raise GrapheneError(f"unknown device {device!r} (cpu, gpu or auto)")
    hybrid = device == "auto" and getattr(mod, "HYBRID", False)
    has_gpu_entry = callable(getattr(mod, "run_gpu", None))
    if device == "gpu" and not has_gpu_entry:
        gpu_names = [n for n in names() if callable(getattr(module(n), "run_gpu", None))]
        raise GrapheneError(f"no GPU implementation of {name!r} (GPU: {', '.join(gpu_names)})")
    if hybrid and graph is None:
        return "hybrid", None
    if device == "auto" and graph is not None:
        return _plan_auto(name, hybrid, has_gpu_entry, graph, opts)
    ok, why = gpu_available() if has_gpu_entry else (False, "")
    if device == "gpu" and not ok:
        raise GrapheneError(f"GPU path not available: {why}")
    return ("gpu" if ok else "cpu"), None


def _plan_auto(name, hybrid, has_gpu_entry, graph, opts):
    """--device auto for one whole run: the plan first (no CuPy import: ~1 s on a GPU machine,
    which a run the plan keeps on the CPU should not pay), then whether the GPU is really there."""
    if not (has_gpu_entry or hybrid):
        return "cpu", None
    why = gpu_may_be_available()
    if why:
        return "cpu", f"--device auto: no GPU ({why})"
    from ..gpu.policy import (GPU_START_S, GPU_STARTED_S, cpu_setup_seconds, gpu_pass_rate,
                              plan_run)
    from ..gpu.resident import is_resident
    opts = {**entry(name).fixed, **(opts or {})}
    gbytes = int(graph.num_edges) * int(graph.id_width) * (
        2 if graph.directed and graph.in_partitions is not None else 1)
    mod = module(name)
    resident = getattr(mod, "GPU_RESIDENT", True) and \
        is_resident(graph, opts.get("gpu_mem"))    # (a streaming-only path never is)
    tiers = None
    if getattr(mod, "GPU_STREAMS", False) and callable(getattr(mod, "gpu_tier_costs", None)):
        tiers = mod.gpu_tier_costs(graph, opts) or None
        forced = str(opts.get("gpu_tier", "auto"))
        if tiers and forced != "auto":            # --gpu-tier given: that tier's estimate
            tiers = {forced: tiers[forced]} if forced in tiers else None
    cpu_bps, later_bps = cpu_rates(graph, opts, name)
    start = GPU_STARTED_S if _gpu_started() else GPU_START_S    # (an earlier run paid it)
    gpu_bps = gpu_pass_rate(name.split("-")[0])
    past = _past_the_budget(name, graph, opts) if tiers is None else None
    if past is not None:
        share, slow = past
        if share is None:
            from ..gpu import early
            early.release_unused()
            return "cpu", (f"--device auto: --gpu-mem {opts.get('gpu_mem')} holds not even the "
                           f"offsets and per-vertex state")
        gpu_bps /= slow
    from ..gpu.streamed import resident_load_bps, resident_setup_seconds
    dev, cpu_s, gpu_s, reason = plan_run(name, opts, gbytes, resident, tiers=tiers,
                                         cpu_bps=cpu_bps, later_bps=later_bps, start_s=start,
                                         load_bps=resident_load_bps(graph),
                                         load_setup_s=resident_setup_seconds(graph),
                                         gpu_bps=gpu_bps,
                                         result_bytes=_gpu_result_bytes(mod, graph, opts),
                                         cpu_setup_s=cpu_setup_seconds(name,
                                                                       graph.num_vertices))
    if past is not None and past[1] > 1.0:
        reason += (f" (--gpu-mem {opts.get('gpu_mem')}: {past[0]:.0%} of the edge bytes in GPU "
                   f"memory, passes est. {past[1]:.1f}x slower)")
    if hybrid and getattr(mod, "HANDOFF", False) and not resident:
        # it can move in mid-run: the CPU starts, the GPU's part is set up meanwhile
        # (gpu/handoff.py); a tier that cannot hold the run has no setup time
        from ..gpu.policy import plan_handoff, run_passes
        prep = mod.handoff_prep_seconds(graph, opts)
        if prep is not None:
            hand, why = plan_handoff(cpu_s, gpu_s, prep[0], run_passes(name, opts),
                                     after_s=prep[1], start_s=start)
            if hand:
                dev, reason = "hybrid", why
    if dev == "cpu":
        from ..gpu import early
        early.release_unused()      # the CUDA context begun early (cli.py) is not needed
        return "cpu", reason
    if dev == "hybrid":      # CuPy starts on the load's thread; a GPU not there keeps the CPU
        return "hybrid", reason
    ok, why = gpu_available()
    if not ok:
        return "cpu", f"--device auto: no GPU ({why})"
    if hybrid and not getattr(mod, "HANDOFF", False) and resident:
        return "hybrid", reason     # (BFS: per level, the dataset in GPU memory already)
    # (a BFS whose dataset must be loaded first runs whole on the GPU: at Kronecker scale 24
    # on the H200 its hybrid, the load beside the CPU's set-up and first levels, took 1.13-1.25x
    # the GPU's wall and more than the CPU's: BENCHMARKS.md)
    return "gpu", reason


def _past_the_budget(name, graph, opts):
    """(share of the edge bytes in GPU memory, the GPU passes' slowdown: gpu/policy.py
    tier_slowdown) for a run whose --gpu-mem leaves edge arrays in host memory; share None when
    the budget holds not even the offsets and per-vertex state; None without --gpu-mem (the
    default budget, 90% of the card, is not known before CuPy starts) or when all fits."""
    from ..gpu.device_graph import STATE_BYTES_PER_VERTEX, parse_bytes
    from ..gpu.policy import resident_share, tier_slowdown
    budget = parse_bytes(opts.get("gpu_mem"))
    if budget is None:
        return None
    n, m = int(graph.num_vertices), int(graph.num_edges)
    arrays = 2 if graph.in_partitions is not None else 1
    vb = (n + 1) * 8 * arrays + STATE_BYTES_PER_VERTEX * n
    eb = m * 4 * arrays + (m * 4 if getattr(graph, "weighted", False) else 0)
    share = resident_share(budget, vb, eb)
    if share is not None and share >= 1.0:
        return None
    return share, (tier_slowdown(name.split("-")[0], share) if share is not None else None)


def _gpu_result_bytes(mod, graph, opts) -> int:
    """Bytes the module's GPU run copies back to host memory for these options (its
    `gpu_result_bytes`; none by default)."""
    fn = getattr(mod, "gpu_result_bytes", None)
    return int(fn(graph, opts)) if callable(fn) else 0


def _gpu_started() -> bool:
    """Whether an earlier run of this process started CuPy and compiled the kernels."""
    from ..gpu import _module
    return _module.started()


def cpu_rates(graph, opts, name=None):
    """(first pass, later passes) bytes/s of the CPU path on `graph` for --device auto's plan
    (gpu/policy.py cpu_pass_rates): its compute threads (`threads`, default every core; how
    algorithm `name` gains from them: policy.threads_exponent), the stored profiles of its
    disks (io/calibrate.py; none: the fixed default), whether its lists fit the memory
    available (later passes read them from memory)."""
    from .. import config
    from ..gpu.policy import cpu_pass_rates, threads_exponent
    from ..iterator.memory import memory_available
    threads = int((opts or {}).get("threads") or config.default_threads())
    disk = None
    try:
        from ..io import calibrate as cal
        keys = {cal.profile_key(d) for d in graph.disks}
        profs = [cal.lookup(k) for k in keys]
        if profs and all(p is not None for p in profs):
            disk = sum(p.bandwidth for p in profs)
    except (AttributeError, OSError, TypeError, ValueError):
        disk = None              # (a stand-in graph, an unreadable store: the default)
    dirs = 2 if graph.directed and graph.in_partitions is not None else 1
    lists = int(graph.num_edges) * int(graph.id_width) * dirs
    base = (name or "").split("-")[0]         # kcore, pagerank-pull: their family's
    return cpu_pass_rates(threads, disk, fits=lists <= memory_available() // 2,
                          exponent=threads_exponent(base))


def gpu_may_be_available() -> str:
    """'' when a GPU may be usable (cheap: no CuPy import), else why not."""
    from ..gpu import may_be_available
    return may_be_available()


#: runtime options every algorithm takes (the IO engine's, memory, GPU), beside its own
RUNTIME_OPTIONS = frozenset({"engine", "threads", "queue_depth", "max_gap", "max_io", "buffer_mb",
                             "block_size", "direct", "in_memory", "io_workers", "check", "cache",
                             "gpu_mem", "gpu_tier"})
_ACCEPTED: dict = {}


def accepted_options(name: str, mod=None) -> frozenset:
    """The keywords dispatch takes for algorithm `name`: the runtime options, the keyword
    parameters of its run() and run_gpu(), its command-line options and the ones its name fixes."""
    got = _ACCEPTED.get(name)
    if got is None:
        import inspect
        mod = mod or module(name)
        names = set(RUNTIME_OPTIONS) | set(entry(name).fixed)
        for fn in (getattr(mod, "run", None), getattr(mod, "run_gpu", None)):
            if callable(fn):
                names.update(p.name for p in inspect.signature(fn).parameters.values()
                             if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        names.update(o.name for o in getattr(mod, "CLI_OPTIONS", ()) if o.name)
        names.discard("graph")
        got = _ACCEPTED[name] = frozenset(names)
    return got


def dispatch(name: str, graph, *, device: str = "cpu", progress=None, **options):
    """Run algorithm `name` on `graph` with `options` (algorithm options and runtime options of
    `graphene run`, as keywords). Returns the module's Result."""
    from . import common
    from ..names import resolve_options, vertex_names
    if isinstance(graph, (str, os.PathLike)):      # a dataset's name or folder, as --graph
        from ..graph import Graph
        graph = Graph.open(os.fspath(graph))
    elif not hasattr(graph, "num_vertices"):
        raise TypeError(f"{name.replace('-', '_')}() needs a graph: a Graph "
                        f"(graphene_py.Graph.open), a dataset's name or its folder, not "
                        f"{type(graph).__name__}")
    e = entry(name)
    mod = module(name)
    bad = sorted(set(options) - accepted_options(name, mod))
    if bad:     # what Python says of a misspelt keyword, at the call, on every path
        own = sorted(accepted_options(name, mod) - RUNTIME_OPTIONS - {"device", "progress"})
        raise TypeError(f"{name.replace('-', '_')}() got an unexpected keyword argument "
                        f"{bad[0]!r}; its options: {', '.join(own) or 'none'}, and the runtime "
                        f"options {', '.join(sorted(RUNTIME_OPTIONS))}")
    opts = dict(e.fixed)
    opts.update(options)
    opts = resolve_options(graph, opts)          # sources given by name -> vertex IDs
    common.check_options(name, graph, opts)      # the same ranges for every front end
    if getattr(graph, "cluster", None) is not None:
        if not on_cluster(name, opts):
            rule = getattr(mod, "CLUSTER", None)
            why = (" ".join((rule.__doc__ or "").split()) if callable(rule) else
                   "it is not written against the engine contract")
            raise GrapheneError(f"{name} does not run on a cluster with these options yet ({why}); "
                                f"on a cluster: {', '.join(cluster_names())}")
        if device == "gpu":
            raise GrapheneError("a cluster run is CPU only (--device gpu is for one machine)")
        device = "cpu"
    where, reason = _choose(name, device, graph, opts)
    from . import small
    if small.eligible(name, graph, where, opts):    # a small graph: whole in RAM, numpy only
        res = small.run(name, graph, mod, progress=progress, **opts)
    elif where == "gpu":
        if str(opts.get("gpu_tier", "auto")).startswith("stream") and \
                not getattr(mod, "GPU_STREAMS", False):
            streams = [n for n in names() if getattr(module(n), "GPU_STREAMS", False)]
            raise GrapheneError(f"--gpu-tier {opts['gpu_tier']}: {name} does not stream its "
                                f"lists to the GPU yet (these do: {', '.join(streams)}); it runs "
                                f"resident (--gpu-tier resident)")
        try:
            res = mod.run_gpu(graph, progress=progress, **opts)
        except Exception as e:  # noqa: BLE001 - re-raised unless `auto` can run it on the CPU
            why = _gpu_short_of_memory(e) if device == "auto" else None
            if why is None:
                raise
            # --device auto planned the GPU, which could not hold the run: the CPU runs it
            where, reason = "cpu", f"{reason}; the GPU could not hold it ({why}): ran on the CPU"
            res = _run_cpu(mod, graph, where, opts, progress)
    else:
        res = _run_cpu(mod, graph, where, opts, progress)
    res.set_names(vertex_names(graph))
    if reason is not None:           # --device auto: where the whole run went, and why
        res.device = getattr(res, "device", None) or ("gpu" if where == "gpu" else "cpu")
        res.device_reason = reason
    return res


def _run_cpu(mod, graph, where, opts, progress):
    """The module's CPU run ("cpu") or its hybrid ("hybrid"), from dispatch's options."""
    from .. import jit
    opts = dict(opts)
    if "numba" in sys.modules:      # (else materialize() installs it, if numba comes in)
        jit.lazy_refresh()        # cached kernels load without numba's registries (jit.py)
    gpu_mem = opts.pop("gpu_mem", None)        # the GPU budget: only hybrid runs use it here
    tier = opts.pop("gpu_tier", None)
    if where == "hybrid":
        if getattr(mod, "HANDOFF", False) and tier is not None:
            opts["gpu_tier"] = tier           # the tier of the GPU's part
        return mod.run(graph, device="auto", progress=progress, gpu_mem=gpu_mem, **opts)
    return mod.run(graph, device="cpu", progress=progress, **opts)


def _gpu_short_of_memory(e):
    """The first line of e when it says the GPU's memory could not hold a run (the dataset
    against the budget: GpuMemoryError; an allocation CuPy could not make: its
    OutOfMemoryError), else None."""
    from ..gpu.device_graph import GpuMemoryError
    if isinstance(e, GpuMemoryError) or (type(e).__name__ == "OutOfMemoryError"
                                         and type(e).__module__.startswith("cupy")):
        return (str(e).splitlines() or [type(e).__name__])[0][:200]
    return None


#: What the interpreter, numpy, numba and the loaded kernels hold before any graph state (RSS
#: before the first trial, minus the offsets and the IO pool, was 140-147 MiB here; the rest is
#: margin for the allocator and the kernels' stacks). A process that holds more before its graph
#: (shared libraries in 2 MiB file pages: +45 MiB seen on a fresh install) plans with that + 16 MiB.
RUNTIME_BYTES = 176 << 20
#: added to the runtime measured when the plan is made: what the process still faults in later
#: (shared libraries mapped in 2 MiB file pages where the kernel collapses them, numba's loaded
#: kernels). 16 MiB left a fresh clone's test run 2 MiB over a tight budget.
RUNTIME_MARGIN = 32 << 20
TEMP_BYTES_PER_VERTEX = 16


def memory_plan(name, graph, memory, runtime, opts, output=None, runtime_bytes=None) -> dict:
    """`graphene run --memory SIZE`: the budget split into the runtime, the IO buffers, the
    algorithm's O(|V|) state (offsets of each edge direction plus the registry's per-vertex
    estimate), kept adjacency lists and what is left: the adjacency cache. A budget below the
    first three is an error naming both sizes. Options the user left out are picked to fit:
    `buffer_mb` (the default, halved down to 16 MiB while short) and `keep_edges` (as many kept
    neighbour IDs as fit, up to the algorithm's default; none below one per 4 vertices):
    the plan's `keep_edges` and `io_buffer_bytes` are then what the run must use."""
    from ..config import parse_size
    from .. import config as _config
    budget = parse_size(memory)
    n = graph.num_vertices
    threads = int(runtime.get("threads") or _config.default_threads())
    fixed, per_thread = entry(name).state_for(opts)
    per_vertex = fixed + per_thread * threads
    if name in ("apsp", "msbfs") and output is None and opts.get("keep_depths", True):
        # the depths rows, kept in RAM (no more sources than vertices: the rest are dropped),
        # and the log's second n entries (an on-disk depths, or only counts: a log of n entries)
        per_vertex += 4 * min(module(name).source_count(opts), max(n, 1)) + 8
    # offsets: every partition keeps an entry per row of its row range, so each edge direction
    # holds cols (out-lists) or rows (in-lists) x n entries, compact (io/offsets.py
    # bound_bytes: 2 bytes per entry, 8 per group of 128, a group held whole per 65536 edges
    # and per partition); the degrees come from them
    from ..io.offsets import bound_bytes
    dirs = ["out"] + (["in"] if graph.directed and graph.in_partitions is not None else [])
    offsets_bytes = sum(bound_bytes(graph.parts(d)) for d in dirs)
    # + temporaries: numpy expressions over n-sized arrays between supersteps (cost estimates,
    # masks, sums) hold up to two 8-byte arrays at once (kron22 4x4 BFS: 45 MiB above its state)
    # (k-core and MS-BFS: their trial growth stays below their allocated state; scale 24 edge
    # factor 64 without kept lists: 29 and 31 B/vertex against 38 and 34 allocated)
    per_vertex += TEMP_BYTES_PER_VERTEX if entry(name).temp is None else entry(name).temp
    # kept adjacency lists: the user's budget, else (picked below) what fits, up to the default
    e = entry(name)
    given_keep = opts.get("keep_edges")
    keep_slot = keep_id = 0
    if e.keep is not None and not (name == "kcore" and opts.get("membership_only")):
        keep_slot, keep_id = e.keep[0] * n, graph.id_width
        if given_keep is not None:
            per_vertex += e.keep[0] if int(given_keep) > 0 else 0
    state = n * per_vertex + offsets_bytes + (int(given_keep) * keep_id if keep_id and given_keep
                                              else 0)
    per_vertex += offsets_bytes // max(1, n)        # (for the message)
    # the runtime: what this process holds now (imports, numba's target: pass it from the run's
    # own process, where shared libraries may sit in 2 MiB file pages) plus a margin, or the
    # measured constant
    rt = max(RUNTIME_BYTES, int(runtime_bytes or 0))
    # the IO buffers: the user's, else the default, halved down to 16 MiB where the budget is short
    if runtime.get("buffer_mb"):
        io = int(float(runtime["buffer_mb"]) * (1 << 20))
    else:
        io = int(_config.BUFFER_MB) << 20
        while io > (16 << 20) and budget < rt + io + state:
            io //= 2
    need = rt + io + state
    mib = (lambda b: f"{b / 2**20:,.0f} MiB")
    if budget < need:
        raise GrapheneError(
            f"--memory {memory} ({mib(budget)}) is less than this run needs before any adjacency "
            f"is cached: {mib(need)} (runtime ~{mib(rt)} + IO buffers {mib(io)} + "
            f"O(|V|) state ~{mib(state)}: {n:,} vertices x {per_vertex} B)")
    plan = {"memory_bytes": budget, "runtime_bytes": rt}
    if keep_id and given_keep is None:
        # kept lists come before the adjacency cache (each spares a re-read of a list the
        # algorithm reads again), up to the algorithm's default budget; none when not even the
        # slots and one ID per 4 vertices fit (kron22 k-core: 13.0 s with none, 9.8 s with n/4,
        # 5.1 s with n, 2.5 s with the default 4n); and before IO buffers above 16 MiB, when
        # the user left those out (the k-core decomposition of Kronecker scale 20 at --memory
        # 300M: 7.98 s with 64 MiB of buffers and no kept lists, 0.82 s with 32 MiB and 4n;
        # BENCHMARKS.md)
        want = int(e.keep[1] * n)

        def kept(io_):
            ids = int(min(want, max(0, budget - (rt + io_ + state) - keep_slot) // keep_id))
            return 0 if ids < n // 4 else ids
        tries = [io]
        while not runtime.get("buffer_mb") and tries[-1] > (16 << 20):
            tries.append(tries[-1] // 2)
        ids, io = max((kept(x), x) for x in tries)     # the most kept IDs, then the most buffers
        plan["keep_edges"] = ids
        if ids:
            state += keep_slot + ids * keep_id
    plan.update(io_buffer_bytes=io, state_bytes_estimate=state,
                cache_bytes=budget - rt - io - state)
    return plan
