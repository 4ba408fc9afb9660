"""`--device auto` per superstep for an algorithm whose state is one vector (PageRank, WCC): the CPU path
runs supersteps while a thread of its own loads the dataset into GPU memory, and after each
superstep the run asks whether to go on there. Pure Python until the load starts; no CuPy import
in this module.

Why: a GPU run first pays CuPy's start, the CUDA context and the dataset's load (on kron22,
H100: 1.1 s and 2.3 s, against a PageRank iteration of ~0.5 s on 16 cores), while the CPU path
starts at once. With the load behind the CPU's supersteps, the run ends no later than the CPU
alone would (up to the load's share of the cores and the disk), and each superstep after the
load costs a GPU pass instead of a CPU one: a whole-run choice (policy.plan_run) can only pick one
of the two, on estimates.

    load = BackgroundLoad(lambda cancelled: ..., what="the dataset")   # starts the thread
    ho = Handoff(load, n=..., graph_bytes=..., max_iter=..., tol=...)
    for each CPU superstep st:
        ... run it ...
        if ho.after(st, iters, err):     # marks st with the device and why; True: move now
            break                        # the state goes to the GPU, which runs the rest
    ho.finish()                          # a load the run no longer needs is stopped and joined

A `Handoff(..., force_at=k)` moves after superstep k whatever the estimate says, waiting there
for the load (tests: every hand-off point gives the same result).
"""
from __future__ import annotations

import math
import sys
import threading
import time

import numpy as np

from . import _module
from .policy import GPU_PASS_BYTES_PER_S, PCIE_BYTES_PER_S


class Cancelled(Exception):
    """Raised inside a background load that the run no longer needs."""


#: The interpreter's switch interval while a background load runs (Python's default: 5 ms). The
#: load is mostly Python (CuPy's import, its kernels' set-up) and holds the GIL; the CPU path's
#: threads take the GIL for every request and chunk they hand on, and each waited up to the whole
#: interval: WCC on Kronecker scale 21 (2 compute threads, the 2-vCPU machine) took 1.53-1.77 s
#: beside a busy Python thread against 0.21-0.25 s alone; 0.54 s at 0.5 ms, 0.33-0.39 s at
#: 0.1 ms (tools/probe_gil_load.py). On the H200 machine a forced WCC hand-off at scale 22 took
#: 2.95-3.27 s own against the CPU's 0.89-1.03 s alone, at the default interval.
LOAD_SWITCH_S = 1e-4


class BackgroundLoad:
    """Runs `load(check)` on a thread of its own, started at once. `check()` raises Cancelled once
    `cancel()` was called: the load calls it between its stages (a stage already running is
    finished first). `ready()`: it ended (value or error); `value`, `error`, `seconds`. While it
    runs the interpreter hands the GIL on every LOAD_SWITCH_S (restored when it ends)."""

    def __init__(self, load, what: str = "the dataset", switch_s: float = LOAD_SWITCH_S):
        self.what = what
        self.value = None
        self.error = None
        self.seconds = None
        self._cancel = threading.Event()
        self._done = threading.Event()
        self._switch = None
        if switch_s and switch_s < sys.getswitchinterval():
            self._switch = sys.getswitchinterval()
            sys.setswitchinterval(switch_s)
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, args=(load,), name="gpu-load",
                                        daemon=True)
        self._thread.start()

    def _check(self):
        if self._cancel.is_set():
            raise Cancelled()

    def _run(self, load):
        try:
            self.value = load(self._check)
        except BaseException as e:       # (reported by the run: it stays on the CPU)
            self.error = e
        finally:
            self.seconds = time.perf_counter() - self._t0
            if self._switch is not None:
                sys.setswitchinterval(self._switch)
            self._done.set()

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def ready(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout=None) -> bool:
        return self._done.wait(timeout)

    def cancel_and_join(self, timeout=None) -> bool:
        """Stop the load at its next stage and wait for the thread; True once it has ended."""
        self._cancel.set()
        self._thread.join(timeout)
        return self.ready()


class Handoff:
    """The per-superstep decision of a CPU run whose GPU part is prepared meanwhile.

    `load.value`, once ready, is the GPU's part: anything with `cost(due)`, the estimated seconds
    of `due` of its supersteps (PageRankPart). After CPU superstep k (wall `seconds`, L1 change
    `err`), once the load is done, the run moves when the GPU's estimate for the supersteps still
    due is below the CPU's:
        due = max_iter - k, or fewer while the change shrinks geometrically toward tol
              (rate = this change / the last one)
        cpu = due * this superstep's measured seconds
        gpu = the state's move (state_bytes over PCIe) + load.value.cost(due)
    Every CPU superstep's stats get device "cpu" and `handoff`: why it stayed or moves.
    Without max_iter (WCC: how many supersteps are left is not known) one superstep is due: the
    run moves once the GPU's estimate for all the rest is below the CPU's last superstep."""

    def __init__(self, load: BackgroundLoad, *, state_bytes: int, max_iter=None, tol: float = 0.0,
                 force_at=None, pcie: float = PCIE_BYTES_PER_S):
        self.load = load
        self.state_bytes = int(state_bytes)
        # max_iter None: a run of unknown length (WCC): one superstep is counted due
        self.max_iter = None if max_iter is None else int(max_iter)
        self.tol = float(tol)
        self.force_at = force_at
        self.pcie = float(pcie)
        self.moved_after = None          # the CPU superstep after which the run moved
        self.cpu_steps = 0
        self._last_err = None

    def due(self, k: int, err: float) -> int:
        """Supersteps still due after superstep k with L1 change err (at least 1; 1 for a run
        of unknown length)."""
        if self.max_iter is None:
            return 1
        left = self.max_iter - k
        last, self._last_err = self._last_err, err
        if self.tol > 0 and last and 0 < err < last and err > self.tol:
            rate = err / last
            left = min(left, math.ceil(math.log(self.tol / err) / math.log(rate)))
        return max(1, left)

    def mark(self, st: dict):
        """Every CPU superstep of the run: its stats say so, and it is counted."""
        self.cpu_steps += 1
        st["device"] = "cpu"

    def after(self, st: dict, k: int, err: float, cpu_s=None) -> bool:
        """Called after CPU superstep k (1-based, marked) whose stats are st, unless the run
        stops there anyway. True: the rest runs on the GPU (load.value is ready). cpu_s: the
        CPU's estimate for all the rest, where the run makes its own (SSSP: the edges it has
        yet to relax at its rate so far) instead of due x this superstep's seconds."""
        due = self.due(k, err)
        if self.force_at is not None and k >= self.force_at:
            self.load.wait()                 # a forced point moves once the load is done
        if not self.load.ready():
            st["handoff"] = f"loading ({self.load.elapsed():.1f} s so far)"
            return False
        if self.load.error is not None:
            msg = (str(self.load.error).splitlines() or [type(self.load.error).__name__])[0]
            st["handoff"] = f"the load failed, the CPU goes on: {msg[:160]}"
            return False
        if self.force_at is not None:
            move = k >= self.force_at
            why = f"forced after superstep {self.force_at}"
        else:
            cpu = due * float(st.get("seconds", 0.0)) if cpu_s is None else float(cpu_s)
            gpu = self.state_bytes / self.pcie + self.load.value.cost(due)
            move = gpu < cpu
            why = f"est. cpu {cpu:.3f} s vs gpu {gpu:.3f} s for the rest"
        st["handoff"] = ("moves here: " if move else "loaded, CPU goes on: ") + why
        if move:
            self.moved_after = k
        return move

    @property
    def moved(self) -> bool:
        return self.moved_after is not None

    def finish(self, timeout=None):
        """After the CPU's part: a load not needed any more is stopped at its next stage (and the
        thread joined, so no CUDA work outlives the run)."""
        if not self.moved:
            self.load.cancel_and_join(timeout)

    def summary(self, gpu_steps: int) -> dict:
        """The result's fields: where the supersteps ran and the load's time."""
        return {"cpu_supersteps": self.cpu_steps, "gpu_supersteps": int(gpu_steps),
                "device_moves": int(self.moved),
                "gpu_load_seconds": (round(self.load.seconds, 3)
                                     if self.load.seconds is not None else None)}


class PageRankPart:
    """The GPU's part of a PageRank handed over in mid-run, made on the load's thread: the tier a
    GPU run would take (`tier`: resident, stream-host or stream-ssd), its setup (resident: the
    CSR loaded and one iteration run, which builds the renumbered layout and the hub tiles;
    streamed: the plan, offsets and degrees, for stream-host the lists read into pinned memory)
    and the estimate of its passes. run() iterates from the CPU's scores."""

    def __init__(self, graph, gpu_mem, tier, alpha, check, host_free=0):
        from .resident import device_graph
        self.graph, self.gpu_mem, self.tier = graph, gpu_mem, tier
        self.host_free = int(host_free)     # memory available to the run (stream-host's room)
        dirs = 2 if graph.in_partitions is not None else 1
        self.stream_bytes = graph.num_edges * int(graph.id_width) * dirs
        self.dg = self.sp = None
        if tier == "resident":
            from . import algorithms as A
            self.dg = device_graph(graph, gpu_mem, check=check)
            check()
            A.pagerank(self.dg, alpha=alpha, tol=0.0, max_iter=1, to_host=False)
        else:
            from .streamed import StreamedPageRank
            self.sp = StreamedPageRank(graph, source=tier[len("stream-"):], gpu_mem=gpu_mem)

    def cost(self, due: int) -> float:
        """Estimated seconds of `due` iterations, the setup done (gpu/streamed.py's rates)."""
        if self.dg is not None:
            return due * self.stream_bytes / GPU_PASS_BYTES_PER_S
        from . import streamed as S
        costs = S.tier_costs(self.graph, self.gpu_mem, self.stream_bytes, self.host_free,
                             passes=due, resident_ok=False)
        c = costs.get(self.tier, costs["stream-ssd"])
        if self.tier == "stream-host":       # its first read into pinned memory is done
            c -= max(self.stream_bytes / S.SSD_BYTES_PER_S, self.stream_bytes / S.PIN_BYTES_PER_S)
        return max(c, 0.0)

    def run(self, scores, alpha, tol, max_iter, stats):
        if self.dg is not None:
            from . import algorithms as A
            out = A.pagerank(self.dg, alpha=alpha, tol=tol, max_iter=max_iter, stats=stats,
                             init=scores)
            stats["tier"] = "resident" if self.dg.tier() == "gpu" else self.dg.tier()
            return out
        return self.sp.run(alpha, tol, max_iter, stats=stats, init=scores)


def pagerank_part(graph, gpu_mem, tier_of, alpha, host_free=0) -> BackgroundLoad:
    """A BackgroundLoad of PageRank's GPU part: CuPy's start, then `tier_of()` (the tier, asked
    once CuPy is there: it may ask the GPU's free memory) and its setup (PageRankPart);
    cancelled between the stages (CuPy, the out-lists' assembly, the in-lists', the copy).
    host_free: the memory available to the run (the tier model's room for stream-host)."""
    def load(check):
        from . import _module
        check()
        _module.cupy()
        _module.module()
        check()
        return PageRankPart(graph, gpu_mem, tier_of(), alpha, check, host_free)
    return BackgroundLoad(load)


class WCCPart:
    """The GPU's part of a WCC handed over in mid-run, made on the load's thread. Resident: the
    dataset loaded (DeviceGraph), then Afforest from the CPU's labels; streamed (stream-host,
    stream-ssd): one union-find pass over the out-lists from them, its reads after the move.
    The CPU's labels at any superstep boundary are a forest of its components (every label is
    an ID of the vertex's component, no larger than the vertex; a label's own label is no
    larger): linking every edge on top of it gives each component's smallest ID."""

    def __init__(self, graph, gpu_mem, tier, check, host_free=0):
        from .resident import device_graph
        self.graph, self.gpu_mem, self.tier = graph, gpu_mem, tier
        self.host_free = int(host_free)
        self.stream_bytes = graph.num_edges * int(graph.id_width)     # the out-lists
        self.dg = device_graph(graph, gpu_mem, check=check) if tier == "resident" else None

    def cost(self, due: int) -> float:
        """Estimated seconds of everything left (`due` is not used: the GPU ends the run), the
        setup done: at most one pass over the lists (resident: at the GPU's rate; streamed: the
        tier model's one pass, its set-up and read included: they come after the move)."""
        if self.dg is not None:
            return self.stream_bytes / GPU_PASS_BYTES_PER_S
        from . import streamed as S
        costs = S.tier_costs(self.graph, self.gpu_mem, self.stream_bytes, self.host_free,
                             passes=1.0, resident_ok=False,
                             setup_s=S.stream_setup_seconds(self.graph, "wcc"))
        return costs.get(self.tier, costs["stream-ssd"])

    def run(self, labels, stats):
        """The components' labels (int64 or the IDs' width) from the CPU's `labels`."""
        if self.dg is not None:
            from . import algorithms as A
            out = A.wcc(self.dg, stats=stats, init=labels)
            stats["tier"] = "resident" if self.dg.tier() == "gpu" else self.dg.tier()
            return out
        from . import streamed
        return streamed.wcc(self.graph, source=self.tier[len("stream-"):], stats=stats,
                            init=labels)


class SSSPPart:
    """The GPU's part of an SSSP handed over between two supersteps, made on the load's thread:
    the weighted dataset loaded (DeviceGraph, resident: the GPU's SSSP has no streamed tier).
    Every distance below `lo` (the start of the lowest bucket the CPU still holds) is final then,
    so the GPU goes on from the CPU's distances with the vertices at `lo` or beyond
    (algorithms.sssp's init)."""

    def __init__(self, graph, gpu_mem, check):
        from .resident import device_graph
        self.graph = graph
        self.dg = device_graph(graph, gpu_mem, check=check)

    @classmethod
    def from_ram(cls, graph, gpu_mem, indptr, ids, weights) -> "SSSPPart":
        """The part from the lists and weights the CPU holds in RAM (a one-partition grid: its
        CSR, 4-byte IDs, read and checked by the CPU's first pass): copied to the GPU as they
        are, without reading the disks again (which the CPU's first pass shares with a load
        from the files: gpu_notes.md)."""
        from .device_graph import STATE_BYTES_PER_VERTEX, DeviceGraph, GpuMemoryError, \
            _budget, _gib, csr_bytes
        cp = _module.cupy()
        n, m = graph.num_vertices, len(ids)
        budget = _budget(gpu_mem)
        need = csr_bytes(n, m, True) + STATE_BYTES_PER_VERTEX * n
        if need > budget:
            raise GpuMemoryError(f"{graph.name}: SSSP on the GPU needs {_gib(need)}, the budget "
                                 f"is {_gib(budget)} (--gpu-mem)")
        ptr = cp.asarray(np.asarray(indptr, dtype=np.int64))
        dg = DeviceGraph(n, ptr, cp.asarray(ids).view(cp.int32), cp.asarray(weights), None,
                         None, not graph.directed, budget)
        dg.placement = {"out": "gpu", "weights": "gpu"}
        part = cls.__new__(cls)
        part.graph, part.dg = graph, dg
        return part

    def cost(self, due: int) -> float:
        """Estimated seconds of all the rest (`due` is not used): two passes over the lists and
        their weights at the GPU's rate (its delta-stepping relaxes about each edge once)."""
        return 2.0 * self.dg.num_edges * 8 / GPU_PASS_BYTES_PER_S

    def run(self, dist, lo, delta, stats):
        """Distances (float64, inf unreached) from the CPU's `dist` (float64), final below lo."""
        from . import algorithms as A
        out = A.sssp(self.dg, 0, delta=delta, stats=stats, init=(dist, lo))
        stats["tier"] = "resident" if self.dg.tier() == "gpu" else self.dg.tier()
        return out


def sssp_part(graph, gpu_mem):
    """(BackgroundLoad of SSSP's GPU part, feed): CuPy's start, then a wait for the CPU's word,
    `feed(arrays)`: (indptr, IDs, weights) held in RAM after its first pass (SSSPPart.from_ram),
    or None (the part loads the dataset's files: SSSPPart). Cancelled between the stages."""
    fed = threading.Event()
    box = {}

    def feed(arrays):
        box["arrays"] = arrays
        fed.set()

    #: where the part's time went, filled as it goes (the result's gpu_part_stages): CuPy's
    #: start, the wait for the CPU's first pass, the copy from RAM or the load from the files
    stages = {}

    def load(check):
        t0 = time.perf_counter()
        check()
        _module.cupy()
        _module.module()
        check()
        t1 = time.perf_counter()
        stages["start"] = round(t1 - t0, 3)
        while not fed.wait(0.01):
            check()
        t2 = time.perf_counter()
        stages["wait"] = round(t2 - t1, 3)
        arrays = box.pop("arrays", None)
        part = (SSSPPart.from_ram(graph, gpu_mem, *arrays) if arrays is not None else
                SSSPPart(graph, gpu_mem, check))
        stages["from_ram" if arrays is not None else "from_files"] = round(
            time.perf_counter() - t2, 3)
        return part
    bg = BackgroundLoad(load)
    bg.stages = stages
    return bg, feed


def _part_load(make) -> BackgroundLoad:
    """A BackgroundLoad of a GPU part: CuPy's start, then make(check) (the part's setup);
    cancelled between the stages."""
    def load(check):
        check()
        _module.cupy()
        _module.module()
        check()
        return make(check)
    return BackgroundLoad(load)


def wcc_part(graph, gpu_mem, tier_of, host_free=0) -> BackgroundLoad:
    """A BackgroundLoad of WCC's GPU part: CuPy's start, then `tier_of()`'s setup (WCCPart);
    cancelled between the stages."""
    return _part_load(lambda check: WCCPart(graph, gpu_mem, tier_of(), check, host_free))


#: the GPU's k-core decomposition in passes over the lists at GPU_PASS_BYTES_PER_S (Kronecker 24:
#: 0.39-0.41 s for 2.08 GB of lists, H200; benchmarks/gpu_h200_kcore_loop_probe.txt)
KCORE_GPU_PASSES = 2.0


class KCorePart:
    """The GPU's part of a k-core decomposition handed over between two CPU rounds, made on the
    load's thread: the dataset loaded (DeviceGraph, resident). At a round's end every vertex
    the CPU removed has its core number and every other its degree among the vertices left, so
    the GPU peels on from the CPU's core numbers and level (algorithms.kcore's init)."""

    def __init__(self, graph, gpu_mem, check, passes=KCORE_GPU_PASSES):
        from .resident import device_graph
        self.dg = device_graph(graph, gpu_mem, check=check)
        self.list_bytes = graph.num_edges * 4 * (1 if self.dg.symmetric else 2)
        self.passes = float(passes)

    def cost(self, due: int) -> float:
        """Estimated seconds of all the rest (`due` is not used): the run's passes (the whole
        decomposition's, or one K-core's) at the GPU's rate (an upper bound: part of the peel
        is done)."""
        return self.passes * self.list_bytes / GPU_PASS_BYTES_PER_S

    def run(self, core, k, stats, stop=None):
        """Core numbers (int32) from the CPU's `core` (-1: not removed yet) at level k; with
        `stop` (one K-core: K) the peel ends at that level, the vertices left -1."""
        from . import algorithms as A
        out = A.kcore(self.dg, stats=stats, init=(core, k), stop=stop)
        stats["tier"] = "resident" if self.dg.tier() == "gpu" else self.dg.tier()
        return out


def kcore_part(graph, gpu_mem, passes=KCORE_GPU_PASSES) -> BackgroundLoad:
    """A BackgroundLoad of k-core's GPU part (KCorePart; passes: its estimate's)."""
    return _part_load(lambda check: KCorePart(graph, gpu_mem, check, passes))


class MSBFSPart:
    """The GPU's part of a multi-source BFS handed over between two levels of a CPU pass, made on
    the load's thread: the dataset loaded (DeviceGraph, resident) with its in-lists (the
    bit-parallel levels pull over them: a transpose on the GPU where the dataset has none, so a
    GPU short of memory for it fails the load, not the run). The pass's bits so far (which
    sources reached each vertex by the level the CPU ended) go on as bit-parallel levels
    (algorithms.msbfs's init); the sources of later passes run on the GPU whole, 64 at a time.
    `plan`: what the CPU says before each question, read by cost(): "sources_left" (from the
    pass under way on) and "keep" (whether depths rows come back to host memory)."""

    def __init__(self, graph, gpu_mem, check, plan):
        from .resident import device_graph
        self.dg = device_graph(graph, gpu_mem, check=check)
        check()
        self.dg.in_csr()
        self.list_bytes = graph.num_edges * 4 * (1 if self.dg.symmetric else 2)
        self.plan = plan

    def cost(self, due: int) -> float:
        """Estimated seconds of all the rest (`due` is not used): MS-BFS's passes over the lists
        for 32 sources (policy.RUN_PASSES) at its GPU rate, per 32 sources left (at least one
        group: the pass under way), and the depths rows to host memory when they are kept (the
        pass's up and back, the later sources' back)."""
        from .policy import GPU_PASS_BYTES, GPU_RESULT_TO_HOST_BPS, RUN_PASSES
        left = int(self.plan.get("sources_left", 0))
        run = max(1.0, left / 32) * RUN_PASSES["msbfs"] * self.list_bytes / GPU_PASS_BYTES["msbfs"]
        rows = (left + min(left, 64)) * 4 * self.dg.num_vertices if self.plan.get("keep") else 0
        return run + rows / GPU_RESULT_TO_HOST_BPS

    def run(self, visited, level, group, rows, rest, rest_rows, stats):
        """The pass of sources `group` on from the CPU's `visited` words after `level`, then the
        sources `rest` whole, 64 at a time. rows / rest_rows: their depths rows on the host,
        filled here (the pass's rows hold the CPU's levels, -1 elsewhere), or None (only the
        counts). Returns (reached, sums): per source of group + rest, the vertices reached and
        their depths' sum, from the GPU's new levels only for group (the CPU counted its own),
        whole for rest."""
        from . import algorithms as A
        cp = _module.cupy()
        n = self.dg.num_vertices
        reached = np.zeros(len(group) + len(rest), dtype=np.int64)
        sums = np.zeros(len(reached), dtype=np.int64)
        st: dict = {}
        dev = None if rows is None else cp.asarray(rows)
        dev = A.msbfs(self.dg, group, stats=st, to_host=False, init=(visited, level), depth=dev)
        levels = int(st.get("levels", 0))
        for i in range(len(group)):            # the counts on the GPU (run_gpu's habit)
            row = dev[i]
            new = row > level
            reached[i] = int(cp.count_nonzero(new))
            sums[i] = int(cp.where(new, row, 0).sum(dtype=cp.int64))
        if rows is not None:
            dev.get(out=rows)
        del dev
        for c0 in range(0, len(rest), 64):     # (S x n rows would not need to fit at once)
            sub = rest[c0:c0 + 64]
            st2: dict = {}
            dr = A.msbfs(self.dg, sub, stats=st2, to_host=False)
            levels = max(levels, int(st2.get("levels", 0)))
            for i in range(len(sub)):
                row = dr[i]
                r = int(cp.count_nonzero(row >= 0))
                reached[len(group) + c0 + i] = r
                sums[len(group) + c0 + i] = int(row.sum(dtype=cp.int64)) + (n - r)
            if rest_rows is not None:
                dr.get(out=rest_rows[c0:c0 + len(sub)])
            del dr
        stats.update(levels=levels)
        stats["tier"] = "resident" if self.dg.tier() == "gpu" else self.dg.tier()
        return reached, sums


def msbfs_part(graph, gpu_mem, plan) -> BackgroundLoad:
    """A BackgroundLoad of MS-BFS's GPU part (MSBFSPart; plan: its cost's inputs, a dict the
    CPU updates)."""
    return _part_load(lambda check: MSBFSPart(graph, gpu_mem, check, plan))


def resident_prep_seconds(graph, host_free: int):
    """(setup, 0.0): the plan's estimate of a resident part's setup (the dataset's load, both
    edge directions where it has in-partitions), or None where the load would assemble the CSR
    on the host beside the CPU's run without room for it (host_free: the memory available)."""
    from . import streamed as S
    dirs = 2 if graph.directed and graph.in_partitions is not None else 1
    csr = (graph.num_edges * int(graph.id_width) + 8 * (graph.num_vertices + 1)) * dirs
    if not S.resident_loadable(graph) and host_free < 2 * csr:
        return None
    return S.resident_setup_seconds(graph) + csr / S.resident_load_bps(graph), 0.0
