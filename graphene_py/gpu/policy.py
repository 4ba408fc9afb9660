"""Offload policy for `--device auto`: which device runs one superstep. Pure Python, no CuPy.

Model (per superstep, in seconds):
    cpu = frontier_edges / CPU_EDGES_PER_S + CPU_STEP_OVERHEAD_S
    gpu = frontier_edges / GPU_EDGES_PER_S + GPU_STEP_OVERHEAD_S
          + (state_bytes / PCIE_BYTES_PER_S  if the algorithm's state is on the other device)
The GPU is chosen only when the partitions are resident in GPU memory; `mode="cpu"`/`"gpu"` force
a device (`"gpu"` without residency is an error). Moving the O(|V|) state (depth/parent, ranks...)
across PCIe is charged on a switch, so a hot superstep must save more than the transfer: small
frontiers stay on the CPU, the big middle levels of a power-law BFS go to the GPU, and a long tail
of tiny levels after a GPU level stays there until it would pay to come back.

Rates are defaults measured on the machines of this project (tools/gpu_notes.md): the SSD path moves
~50 M edges/s on the 1 GB/s test disk; the H100 path ~3 G edges/s on a hot BFS level including
launches; 20 GB/s PCIe. Pass other numbers to `OffloadPolicy` to re-tune.

How an algorithm calls it (the lead integrates this into algos/):
    pol = OffloadPolicy(num_vertices=n, resident=dg is not None, mode=device,
                        state_bytes_per_vertex=12)
    for each superstep:
        dev = pol.decide(frontier_size, frontier_edges)   # 'cpu' or 'gpu'
        ... run the superstep there (moving state first when pol.moved is True) ...
    result.stats["devices"] = pol.summary()               # where each superstep ran
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

CPU_EDGES_PER_S = 50e6
GPU_EDGES_PER_S = 3e9
CPU_STEP_OVERHEAD_S = 200e-6
GPU_STEP_OVERHEAD_S = 60e-6
PCIE_BYTES_PER_S = 20e9

DEVICES = ("cpu", "gpu", "auto")


@dataclass
class Step:
    index: int
    device: str
    frontier_size: int
    frontier_edges: int
    moved: bool
    reason: str


def step_costs(frontier_edges: int, state_bytes: int, state_on: str, *,
               cpu_eps: float = CPU_EDGES_PER_S, gpu_eps: float = GPU_EDGES_PER_S,
               pcie: float = PCIE_BYTES_PER_S):
    """(cpu_seconds, gpu_seconds) of one superstep, counting the state move to the other device."""
    cpu = frontier_edges / cpu_eps + CPU_STEP_OVERHEAD_S
    gpu = frontier_edges / gpu_eps + GPU_STEP_OVERHEAD_S
    move = state_bytes / pcie
    if state_on == "cpu":
        gpu += move
    else:
        cpu += move
    return cpu, gpu


def choose_device(frontier_size: int, num_vertices: int, frontier_edges: int, resident: bool,
                  mode: str = "auto", state_on: str = "cpu", state_bytes_per_vertex: int = 12,
                  **rates) -> str:
    """'cpu' or 'gpu' for one superstep (stateless form of OffloadPolicy.decide)."""
    if mode not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, not {mode!r}")
    if frontier_size < 0 or frontier_edges < 0 or num_vertices < 0:
        raise ValueError("sizes must be non-negative")
    if mode == "cpu":
        return "cpu"
    if mode == "gpu":
        if not resident:
            raise RuntimeError("--device gpu: the graph is not resident in GPU memory")
        return "gpu"
    if not resident:
        return "cpu"
    cpu, gpu = step_costs(frontier_edges, state_bytes_per_vertex * num_vertices, state_on, **rates)
    return "gpu" if gpu < cpu else "cpu"


@dataclass
class OffloadPolicy:
    """Stateful per-run policy: remembers where the state lives and records every decision."""

    num_vertices: int
    resident: bool
    mode: str = "auto"
    state_bytes_per_vertex: int = 12
    rates: dict = field(default_factory=dict)
    state_on: str = "cpu"
    steps: list = field(default_factory=list)

    def __post_init__(self):
        if self.mode not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, not {self.mode!r}")
        if self.mode == "gpu" and not self.resident:
            raise RuntimeError("--device gpu: the graph is not resident in GPU memory")

    @property
    def moved(self) -> bool:
        """True when the last decision moved the state to the other device."""
        return bool(self.steps) and self.steps[-1].moved

    def decide(self, frontier_size: int, frontier_edges: int) -> str:
        dev = choose_device(frontier_size, self.num_vertices, frontier_edges, self.resident,
                            self.mode, self.state_on, self.state_bytes_per_vertex, **self.rates)
        moved = dev != self.state_on
        if self.mode != "auto":
            reason = f"--device {self.mode}"
        elif not self.resident:
            reason = "partitions not resident on the GPU"
        else:
            cpu, gpu = step_costs(frontier_edges, self.state_bytes_per_vertex * self.num_vertices,
                                  self.state_on, **self.rates)
            reason = f"est. cpu {cpu * 1e3:.3f} ms vs gpu {gpu * 1e3:.3f} ms"
        self.steps.append(Step(len(self.steps), dev, int(frontier_size), int(frontier_edges), moved,
                               reason))
        self.state_on = dev
        return dev

    def note(self, frontier_size: int, frontier_edges: int, device: str, reason: str):
        """Record a superstep the run placed itself (the hybrid BFS while the GPU loads)."""
        moved = device != self.state_on
        self.steps.append(Step(len(self.steps), device, int(frontier_size), int(frontier_edges),
                               moved, reason))
        self.state_on = device

    def summary(self) -> dict:
        """{'cpu': supersteps on CPU, 'gpu': on GPU, 'moves': state transfers, 'steps': [...]}."""
        return {
            "cpu": sum(s.device == "cpu" for s in self.steps),
            "gpu": sum(s.device == "gpu" for s in self.steps),
            "moves": sum(s.moved for s in self.steps),
            "steps": [{"step": s.index, "device": s.device, "frontier": s.frontier_size,
                       "edges": s.frontier_edges, "reason": s.reason} for s in self.steps],
        }


# -- the whole run: `--device auto` for an algorithm without a per-superstep hybrid ---------------
#: How long the CPU path takes for one run, in whole reads of the adjacency at CPU_BYTES_PER_S:
#: own time / one PageRank iteration's time on Kronecker scale 22 (H100 machine, 16 cores, and
#: this project's 2-core machine: BFS 1.6-1.8, WCC 2.1-3.2, delta PageRank 6.4-6.5, k-core
#: membership 0.9-1.8, the k-core decomposition 5.4-8.1, MS-BFS 32 sources 3.2-3.5; benchmarks/
#: auto_device_kron22_*.jsonl and the issue-11 anchor table). pagerank-pull: its iterations.
RUN_PASSES = {"bfs": 2.0, "wcc": 3.0, "pagerank": 6.0, "kcore-membership": 2.0, "kcore": 8.0,
              "msbfs": 3.5, "apsp": 3.5, "sssp": 10.0, "bc": 4.0, "spmv": 1.0}
CPU_BYTES_PER_S = 1.3e9        # one dense pass of the SSD path (PageRank-10: 0.38 s per 513 MB)
GPU_START_S = 1.15             # CuPy, the CUDA context and the kernels, beyond the CPU path's own
GPU_STARTED_S = 0.05           # ... once an earlier run of the process paid that (_module.started)
GPU_LOAD_BYTES_PER_S = 0.3e9   # the CSR assembled on the host and copied (where gpu/streamed.py
#: load_resident cannot read the lists straight in: weighted or format-1 datasets, a tiered GPU)
GPU_PASS_BYTES_PER_S = 10e9    # one pass of the GPU kernels, launches included
#: ... per algorithm where its GPU run differs: MS-BFS's 32 sources at Kronecker scale 24, one BFS
#: per source (gpu/algorithms.py MSBFS_METHOD) and the counts per source, ~0.1 s of kernels for
#: 3.5 passes of 2.08 GB; its depths stay in GPU memory unless the run writes them (below).
#: (Before that: ~8 GB/s with the depths' copy, ~1.3 GB/s with the bit-parallel kernel and the
#: counts taken by numpy on the host; benchmarks/auto_device_kron24_h200.jsonl; BFS there ran at
#: ~20 GB/s, 17-core at ~9)
GPU_PASS_BYTES = {"msbfs": 25e9, "apsp": 25e9, "bfs": 20e9}
#: (BFS: 0.13-0.27 s own for its 2 passes of 2.08 GB at scale 24, 15-32 GB/s, in the runs of
#: benchmarks/auto_device_kron24_h200.jsonl, auto_kron24_h200_load_pipelined.jsonl and
#: auto_kron24_h200_1x1load.jsonl)

#: The CPU path's set-up before its first trial (`graphene run`'s setup line) beyond the GPU
#: path's, per vertex, where it differs: BFS's was 0.08-0.11 s against 0.01 at Kronecker scale
#: 22 and 0.66-1.03 s against 0.25-0.47 at scale 24 on the H200 machine (the same files)
CPU_SETUP_S_PER_VERTEX = {"bfs": 25e-9}


def cpu_setup_seconds(name, num_vertices) -> float:
    """CPU_SETUP_S_PER_VERTEX of algorithm `name` times the vertices (0 by default)."""
    return CPU_SETUP_S_PER_VERTEX.get(name, 0.0) * int(num_vertices)


#: A GPU result copied to host memory, into fresh pages: MS-BFS's 2.1 GB of depths at scale 24
#: took 0.52-0.60 s with CuPy's get() (the same through pinned staging buffers)
GPU_RESULT_TO_HOST_BPS = 3.5e9


#: How much longer a frontier-driven GPU run takes with its edge arrays partly in pinned host
#: memory (--gpu-mem below the CSR: heads, chunk copies, zero-copy reads), against all
#: resident, by the share of the edge bytes the budget holds in GPU memory: points measured on
#: the H200, straight lines between them (tools/bench_gpu_tiers.py; BENCHMARKS.md "List heads
#: in GPU memory" and "Per-chunk copies or zero-copy reads"). BFS at Kronecker 25: 28.2 ms all
#: zero-copy, 5.8 with a quarter of the bytes as heads, 3.7-4.3 resident; SSSP at 24 (lists and
#: weights): 1340 / 652 / 655 (half: the lists resident) / 143-157 ms; k-core at 24: 488 /
#: 491 / 317-326 ms. MS-BFS runs one BFS per source: BFS's points (not measured apart).
TIER_SLOWDOWN = {
    "bfs": ((0.0, 7.0), (0.25, 1.45), (1.0, 1.0)),
    "sssp": ((0.0, 8.9), (0.25, 4.3), (0.5, 4.4), (1.0, 1.0)),
    "kcore": ((0.0, 1.55), (0.25, 1.55), (1.0, 1.0)),
}
TIER_SLOWDOWN["msbfs"] = TIER_SLOWDOWN["apsp"] = TIER_SLOWDOWN["bfs"]


def tier_slowdown(name, resident_share: float) -> float:
    """TIER_SLOWDOWN of algorithm `name` at that share of its edge bytes in GPU memory (1 when
    all fit, or for an algorithm without points)."""
    pts = TIER_SLOWDOWN.get(name)
    if pts is None or resident_share >= 1.0:
        return 1.0
    r = max(0.0, float(resident_share))
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if r <= x1:
            return y0 + (y1 - y0) * (r - x0) / (x1 - x0)
    return 1.0


def resident_share(budget: int, vertex_bytes: int, edge_bytes: int):
    """The share of `edge_bytes` a GPU budget holds once the offsets and per-vertex state
    (vertex_bytes) are in: 0..1, or None when it holds not even those."""
    if budget < vertex_bytes:
        return None
    if edge_bytes <= 0:
        return 1.0
    return min(1.0, (budget - vertex_bytes) / edge_bytes)


def gpu_pass_rate(name) -> float:
    """GPU_PASS_BYTES for algorithm `name` (the default: GPU_PASS_BYTES_PER_S)."""
    return GPU_PASS_BYTES.get(name, GPU_PASS_BYTES_PER_S)


#: The CPU path's compute over lists in memory grows with its threads about as threads^0.75 from
#: CPU_BYTES_PER_S on 2 (memory-bound gathers): 16 threads ~6.2 GB/s, where pull PageRank-10 on
#: kron22 took 0.72-0.83 s own on the H200 machine's 16 cores, its first pass read from its
#: disk (benchmarks/auto_handoff_kron22_h200.jsonl)
CPU_THREADS_EXPONENT = 0.75


#: ... but not for every algorithm: the frontier-driven ones wait on their levels' reads and
#: barriers more than they gather. Fitted to the CPU runs' own time on the H200 machine's 16
#: cores at Kronecker scales 22 and 24 (benchmarks/auto_device_kron2{2,4}_h200*.jsonl: each run's
#: own seconds against RUN_PASSES passes, the first at its disk's 2.15 GB/s): BFS 0.03-0.12,
#: WCC 0.08-0.16, MS-BFS 0.17, 17-core membership 0.43, delta PageRank 0.48-0.71, pull
#: PageRank-10 0.76. The estimates for BFS and WCC were 2.2-2.4x too short before. SSSP (its
#: buckets' barriers and re-relaxations): 2.3-2.6 s own on the weighted Kronecker 22 at 16
#: threads against 4.4 s on 2 (8^0.28 = 1.8x), est. 0.95 s at the default
#: (benchmarks/auto_sssp_kron2{2,4}_h200.jsonl).
CPU_THREADS_EXPONENTS = {"bfs": 0.05, "wcc": 0.1, "msbfs": 0.17, "apsp": 0.17, "kcore": 0.43,
                         "sssp": 0.28}


def threads_exponent(name) -> float:
    """CPU_THREADS_EXPONENTS for algorithm `name` (the default: CPU_THREADS_EXPONENT)."""
    return CPU_THREADS_EXPONENTS.get(name, CPU_THREADS_EXPONENT)


def cpu_pass_rates(threads: int, disk_bps=None, fits: bool = False,
                   exponent: float = CPU_THREADS_EXPONENT):
    """(first pass, later passes) bytes/s of one dense pass of the CPU path: its compute
    (CPU_BYTES_PER_S at 2 threads, x (threads/2)^exponent: threads_exponent(algorithm)), no
    faster than its disks (disk_bps: the datasets' stored profiles, summed; None:
    CPU_BYTES_PER_S, the fixed default); later passes at the compute's rate when the lists fit
    in memory (page cache, read-through cache), else the first pass's."""
    compute = CPU_BYTES_PER_S * (max(int(threads), 2) / 2) ** exponent
    first = min(compute, CPU_BYTES_PER_S if disk_bps is None else float(disk_bps))
    return first, (compute if fits and disk_bps is not None else first)


def run_passes(name: str, opts: dict) -> float:
    """RUN_PASSES for algorithm `name` with these options."""
    opts = opts or {}
    if name == "pagerank-pull" or (name == "pagerank" and opts.get("variant") == "pull"):
        it = int(opts.get("max_iter") or 20)     # 11-12 iterations reach 1e-4 on Kronecker
        return float(it if opts.get("tolerance", 1e-4) == 0 else min(it, 12))
    if name == "kcore" and opts.get("membership_only"):
        return RUN_PASSES["kcore-membership"]
    if name in ("msbfs", "apsp"):
        k = opts.get("num_sources") or 32
        srcs = opts.get("sources")
        if srcs is not None and not isinstance(srcs, str):
            k = len(srcs)
        return RUN_PASSES[name] * max(1.0, int(k) / 32)
    return RUN_PASSES.get(name, 4.0)


def plan_run(name: str, opts: dict, graph_bytes: int, resident: bool, *,
             cpu_bps: float = CPU_BYTES_PER_S, start_s: float = GPU_START_S,
             load_bps: float = GPU_LOAD_BYTES_PER_S, gpu_bps: float = GPU_PASS_BYTES_PER_S,
             tiers: dict = None, later_bps: float = None, load_setup_s: float = 0.0,
             result_bytes: int = 0, cpu_setup_s: float = 0.0):
    """('cpu' or 'gpu', est. cpu seconds, est. gpu seconds, reason) for one whole run of `name`
    on a dataset of `graph_bytes` adjacency bytes; the GPU pays its start and the dataset's load
    unless the dataset is resident already (an earlier run of this process loaded it). tiers:
    an algorithm that can stream its lists gives each GPU tier's estimated seconds
    (gpu/streamed.tier_costs: the load counted there); the GPU then costs its start plus the
    least of them. cpu_bps, later_bps: the CPU path's first and later passes (cpu_pass_rates;
    later_bps None: cpu_bps). load_setup_s: the resident load's time beyond its bytes
    (gpu/streamed.py resident_setup_seconds). result_bytes: what the GPU run copies back to host
    memory beyond the per-vertex vector its passes count (MS-BFS's depths when written out), at
    GPU_RESULT_TO_HOST_BPS. cpu_setup_s: the CPU path's set-up beyond the GPU path's
    (cpu_setup_seconds)."""
    passes = run_passes(name, opts)
    # the first pass at cpu_bps, the others at later_bps (cpu_pass_rates; default: the same)
    cpu = cpu_setup_s + graph_bytes / cpu_bps + \
        max(passes - 1.0, 0.0) * graph_bytes / (later_bps or cpu_bps)
    if tiers and not resident:
        tier = min(tiers, key=tiers.get)
        gpu = start_s + tiers[tier]
        what = f"start {start_s:.2f} s, {tier} {tiers[tier]:.2f} s"
    else:
        load = 0.0 if resident else start_s + load_setup_s + graph_bytes / load_bps
        gpu = load + passes * graph_bytes / gpu_bps
        what = "resident" if resident else f"start and load {load:.2f} s"
    if result_bytes:
        gpu += result_bytes / GPU_RESULT_TO_HOST_BPS
        what += f", the result to host memory {result_bytes / GPU_RESULT_TO_HOST_BPS:.2f} s"
    dev = "gpu" if gpu < cpu else "cpu"
    return dev, cpu, gpu, (f"--device auto: est. cpu {cpu:.2f} s vs gpu {gpu:.2f} s ({what}; "
                           f"{passes:g} passes of {graph_bytes / 1e6:,.0f} MB)")


#: How much slower the CPU path's supersteps run while the GPU's part is set up beside them (CuPy's
#: import, the CUDA context, the part's set-up on a thread of the same process). Measured on the
#: H200 machine (16 cores), the GIL handed on every 0.1 ms: WCC at Kronecker scale 22 ran its 7
#: supersteps in 2.1-2.5 s own beside the set-up against 0.99-1.17 s alone; delta PageRank at
#: scale 24 5.1-5.35 s against 3.39-3.41 s (benchmarks/handoff_interference_h200.jsonl)
HANDOFF_CPU_SLOWDOWN = 2.0


def plan_handoff(cpu_s: float, gpu_s: float, prep_s: float, passes: float, *,
                 after_s: float = 0.0, start_s: float = GPU_START_S,
                 slowdown: float = None):
    """(hand off?, reason) for an algorithm that can move to the GPU between supersteps
    (gpu/handoff.py): the CPU starts at once while CuPy starts and the GPU's part is set up
    (prep_s: the CSR loaded for the resident tier, the lists pinned for stream-host), and the
    GPU takes the supersteps left after the CPU's superstep in which it became ready; after_s:
    what its part still pays once, after the move (stream-ssd: the first read of the lists).
    With `passes` supersteps of cpu_s / passes each, `slowdown` (default HANDOFF_CPU_SLOWDOWN)
    times longer while the set-up runs beside them, and the whole GPU run's estimate gpu_s (its start, setup, once-cost, then
    `passes` passes):
        ready = start_s + prep_s;  k = ceil(ready / slowed CPU pass)
        hand-off = k slowed CPU passes + after_s + (passes - k) GPU passes
    It pays when that is below both whole runs: the CPU's when the setup is long against the run,
    the GPU's when it is short against one CPU pass (the run would wait for that pass to end).
    No: the whole-run plan (plan_run) stands."""
    ready = start_s + prep_s
    passes = max(float(passes), 1.0)
    slowdown = HANDOFF_CPU_SLOWDOWN if slowdown is None else slowdown
    cpu_pass = cpu_s / passes * max(float(slowdown), 1.0)
    if ready >= cpu_s or cpu_pass <= 0:
        return False, ""
    k = min(math.ceil(ready / cpu_pass), passes)
    gpu_pass = max(gpu_s - ready - after_s, 0.0) / passes
    est = k * cpu_pass + after_s + (passes - k) * gpu_pass
    return est < min(cpu_s, gpu_s), (
        f"--device auto: est. cpu {cpu_s:.2f} s, gpu {gpu_s:.2f} s, both {est:.2f} s (the GPU "
        f"set up meanwhile in est. {ready:.2f} s, then taking over when its estimate for the "
        f"rest is lower)")
