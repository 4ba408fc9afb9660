"""The offload policy (gpu/policy.py) and GPU-free helpers: CPU-only tests."""
import pytest
from hypothesis import given, settings, strategies as st

from graphene_py.gpu import policy
from graphene_py.gpu.policy import OffloadPolicy, choose_device, step_costs

N = 4_000_000


def test_small_frontier_stays_on_cpu():
    assert choose_device(1, N, 20, resident=True) == "cpu"
    assert choose_device(100, N, 3_000, resident=True) == "cpu"


def test_hot_frontier_goes_to_gpu_when_resident():
    assert choose_device(1_800_000, N, 60_000_000, resident=True) == "gpu"
    assert choose_device(1_800_000, N, 60_000_000, resident=False) == "cpu"


def test_forced_modes():
    assert choose_device(1_800_000, N, 60_000_000, resident=True, mode="cpu") == "cpu"
    assert choose_device(1, N, 1, resident=True, mode="gpu") == "gpu"
    with pytest.raises(RuntimeError):
        choose_device(1, N, 1, resident=False, mode="gpu")
    with pytest.raises(ValueError):
        choose_device(1, N, 1, resident=True, mode="tpu")
    with pytest.raises(ValueError):
        choose_device(-1, N, 1, resident=True)


def test_threshold_matches_cost_model():
    # The crossover from the model: E/cpu + oc = E/gpu + og + move  ->  E* below.
    move = 12 * N / policy.PCIE_BYTES_PER_S
    e_star = (policy.GPU_STEP_OVERHEAD_S + move - policy.CPU_STEP_OVERHEAD_S) / (
        1 / policy.CPU_EDGES_PER_S - 1 / policy.GPU_EDGES_PER_S)
    assert choose_device(10, N, int(e_star * 0.98), resident=True) == "cpu"
    assert choose_device(10, N, int(e_star * 1.02) + 1, resident=True) == "gpu"


def test_hysteresis_state_stays_where_it_is():
    """Once the state is on the GPU, a medium frontier stays there (moving back costs PCIe time)."""
    pol = OffloadPolicy(num_vertices=N, resident=True)
    medium = 40_000
    assert pol.decide(10, medium) == "cpu"            # from CPU: not worth moving
    assert pol.decide(1_000_000, 30_000_000) == "gpu"
    assert pol.moved
    assert pol.decide(10, medium) == "gpu"            # already there: stays
    assert not pol.moved
    s = pol.summary()
    assert (s["cpu"], s["gpu"], s["moves"]) == (1, 2, 1)
    assert [x["device"] for x in s["steps"]] == ["cpu", "gpu", "gpu"]


def test_bfs_like_sequence_on_power_law():
    """Level sizes of the scale-22 Kronecker BFS (BASELINES.md): tiny levels on CPU, the two big
    middle levels on GPU."""
    levels = [1, 9, 29_633, 1_839_260, 523_093, 2_639, 10]
    pol = OffloadPolicy(num_vertices=4_194_302, resident=True, state_bytes_per_vertex=12)
    devs = [pol.decide(f, f * 30) for f in levels]
    assert devs[:2] == ["cpu", "cpu"]
    assert devs[3] == "gpu" and devs[4] == "gpu"
    assert pol.summary()["gpu"] >= 2


def test_not_resident_never_gpu():
    pol = OffloadPolicy(num_vertices=N, resident=False)
    assert {pol.decide(f, f * 50) for f in (1, 10**5, 10**7)} == {"cpu"}
    assert "not resident" in pol.summary()["steps"][0]["reason"]
    with pytest.raises(RuntimeError):
        OffloadPolicy(num_vertices=N, resident=False, mode="gpu")


@settings(max_examples=200, deadline=None)
@given(e1=st.integers(0, 10**10), e2=st.integers(0, 10**10), n=st.integers(1, 10**9),
       on=st.sampled_from(["cpu", "gpu"]))
def test_monotone_in_frontier_edges(e1, e2, n, on):
    """More edges never moves a superstep from GPU back to CPU (for the same state placement)."""
    lo, hi = sorted((e1, e2))
    d_lo = choose_device(1, n, lo, resident=True, state_on=on)
    d_hi = choose_device(1, n, hi, resident=True, state_on=on)
    assert not (d_lo == "gpu" and d_hi == "cpu")


def test_step_costs_charge_move_to_the_other_side():
    c0, g0 = step_costs(1000, 0, "cpu")
    c1, g1 = step_costs(1000, 10**9, "cpu")
    assert c1 == c0 and g1 > g0
    c2, g2 = step_costs(1000, 10**9, "gpu")
    assert c2 > c0 and g2 == g0


def test_parse_bytes():
    from graphene_py.errors import GrapheneError
    from graphene_py.gpu.device_graph import parse_bytes
    assert parse_bytes("4G") == 4 << 30
    assert parse_bytes("512M") == 512 << 20
    assert parse_bytes("1.5GiB") == int(1.5 * (1 << 30))
    assert parse_bytes(1234) == 1234
    assert parse_bytes(None) is None
    with pytest.raises(GrapheneError):
        parse_bytes("lots")


def test_available_never_raises():
    from graphene_py import gpu
    assert gpu.available() in (True, False)


# -- --device auto for a whole run (policy.plan_run, registry.choose_device with a graph) ---------
KRON22_BYTES = 513_245_800          # GAPBS kron22's adjacency, 4-byte IDs


def test_plan_run_pays_the_load_only_over_enough_passes():
    """One BFS reads the graph about twice: loading it onto the GPU costs more than the whole CPU
    run. Twelve PageRank iterations, or a k-core decomposition, repay it; a resident dataset
    costs nothing to load, so then the GPU wins even for BFS. A tiny graph never pays the GPU's
    start."""
    assert policy.plan_run("bfs", {}, KRON22_BYTES, resident=False)[0] == "cpu"
    assert policy.plan_run("wcc", {}, KRON22_BYTES, resident=False)[0] == "cpu"
    assert policy.plan_run("pagerank-pull", {}, KRON22_BYTES, resident=False)[0] == "gpu"
    assert policy.plan_run("pagerank-pull", {"max_iter": 2}, KRON22_BYTES, False)[0] == "cpu"
    assert policy.plan_run("kcore", {}, 4 * KRON22_BYTES, resident=False)[0] == "gpu"
    assert policy.plan_run("kcore", {"membership_only": True}, 4 * KRON22_BYTES, False)[0] == "cpu"
    assert policy.plan_run("bfs", {}, KRON22_BYTES, resident=True)[0] == "gpu"
    assert policy.plan_run("pagerank-pull", {}, 1_000_000, resident=False)[0] == "cpu"
    dev, cpu, gpu, why = policy.plan_run("pagerank-pull", {}, KRON22_BYTES, resident=False)
    assert gpu < cpu and f"{cpu:.2f}" in why and f"{gpu:.2f}" in why and "load" in why


def test_plan_run_passes_follow_the_options():
    assert policy.run_passes("pagerank-pull", {"max_iter": 30, "tolerance": 0}) == 30
    assert policy.run_passes("pagerank-pull", {"max_iter": 30}) == 12
    assert policy.run_passes("pagerank", {"variant": "pull", "max_iter": 5}) == 5
    assert policy.run_passes("msbfs", {"num_sources": 128}) == 4 * policy.run_passes("msbfs", {})
    assert policy.run_passes("apsp", {"sources": [1, 2, 3]}) == policy.RUN_PASSES["apsp"]


def test_auto_plans_the_whole_run_when_a_gpu_is_there(tmp_path, monkeypatch):
    """With a GPU (stood in for: no CuPy here), `--device auto` follows plan_run: a small dataset
    stays on the CPU with the estimate as its reason, BFS too (not even its hybrid: that would
    load the dataset first); once the dataset is resident, PageRank runs on the GPU and BFS
    hybrid. Without a graph the old answers stand."""
    import numpy as np
    from graphene_py.algos import registry
    from graphene_py.gpu import resident
    from graphene_py.partition import partition_arrays
    g = partition_arrays(np.arange(99), np.arange(1, 100), num_vertices=100,
                         disks=[str(tmp_path)], name="auto_plan", register=False, symmetrize=True)
    def no_probe():
        raise AssertionError("the plan kept the run on the CPU: CuPy must not be imported")

    monkeypatch.setattr(registry, "gpu_may_be_available", lambda: "")
    monkeypatch.setattr(registry, "gpu_available", no_probe)
    where, why = registry._choose("pagerank-pull", "auto", g, {})
    assert where == "cpu" and why.startswith("--device auto: est. cpu")
    assert registry._choose("bfs", "auto", g, {})[0] == "cpu"
    monkeypatch.setattr(registry, "gpu_available", lambda: (True, ""))
    assert registry.choose_device("bfs", "auto") == "hybrid"
    assert registry.choose_device("pagerank-pull", "auto") == "hybrid"   # (gpu/handoff.py)
    assert registry.choose_device("wcc", "auto") == "hybrid"            # (gpu/handoff.py)
    assert registry.choose_device("spmv", "auto") == "gpu"
    assert registry.choose_device("pagerank-pull", "gpu", g, {}) == "gpu"
    monkeypatch.setattr(resident, "is_resident", lambda graph, gpu_mem=None: True)
    assert registry._choose("pagerank-pull", "auto", g, {})[0] == "gpu"
    assert registry._choose("bfs", "auto", g, {})[0] == "hybrid"
    assert registry._choose("bc", "auto", g, {})[0] == "cpu"         # no GPU entry
    # SpMV's GPU path streams the lists (it has no resident path): one pass on the CPU is
    # cheaper than the GPU's start plus the same pass
    assert registry._choose("spmv", "auto", g, {})[0] == "cpu"
    monkeypatch.setattr(registry, "gpu_available", lambda: (False, "no CUDA device"))
    assert registry._choose("pagerank-pull", "auto", g, {}) == (
        "cpu", "--device auto: no GPU (no CUDA device)")
    monkeypatch.setattr(registry, "gpu_may_be_available", lambda: "CuPy is not installed")
    assert registry._choose("pagerank-pull", "auto", g, {})[1] == (
        "--device auto: no GPU (CuPy is not installed)")


def test_auto_plan_counts_streaming_for_algorithms_that_stream(monkeypatch):
    """--device auto's whole-run plan for PageRank, WCC and SpMV takes the GPU's start plus its
    cheapest tier (gpu/streamed.tier_costs), not a resident load: one WCC on 4.3 GB of lists goes
    to the GPU (a union-find pass streamed from the SSD), on kron22's 0.5 GB it stays on the
    CPU; SpMV's one pass never repays the start. No GPU is asked (no CuPy here)."""
    from graphene_py.algos import registry
    from graphene_py.iterator import memory
    from tests.graphs import standin
    monkeypatch.setattr(registry, "gpu_may_be_available", lambda: "")
    monkeypatch.setattr(registry, "gpu_available", lambda: (True, ""))
    monkeypatch.setattr(memory, "memory_available", lambda: 64 << 30)
    from graphene_py.gpu import _module
    monkeypatch.setattr(_module, "_modules", {})     # as if no GPU run came before (CuPy started)
    big, kron22 = standin(1 << 30), standin(128_311_450)
    where, why = registry._choose("wcc", "auto", big, {})
    assert where == "gpu" and "stream-ssd" in why, why
    assert registry._choose("wcc", "auto", kron22, {})[0] == "cpu"
    assert registry._choose("pagerank-pull", "auto", big, {})[0] == "gpu"
    assert registry._choose("spmv", "auto", big, {})[0] == "cpu"
    # a BFS the plan sends to the GPU runs there whole while its dataset must be loaded first
    # (its hybrid would open the CPU path beside the load: slower than both at scale 24); only
    # a dataset already in GPU memory gets the per-level hybrid
    where, why = registry._choose("bfs", "auto", big, {})
    assert where == "gpu" and "load" in why, why
    from graphene_py.gpu import resident
    monkeypatch.setattr(resident, "is_resident", lambda graph, gpu_mem=None: True)
    assert registry._choose("bfs", "auto", big, {})[0] == "hybrid"
    # the tier model's numbers against the resident plan's: streaming is the cheaper GPU run
    from graphene_py.gpu import policy
    _, cpu, gpu, _ = policy.plan_run("wcc", {}, 4 << 30, False)
    _, cpu2, gpu2, _ = policy.plan_run("wcc", {}, 4 << 30, False, tiers={"stream-host": 2.7})
    assert cpu == cpu2 and gpu2 == policy.GPU_START_S + 2.7 < gpu


def test_list_heads_take_what_the_budget_leaves():
    """The heads' size (DeviceGraph.from_csr, zero-copy edge arrays): 4 bytes per edge kept, per
    list, per array, never past the budget nor HEAD_MAX, a forced count only lowered by them."""
    from graphene_py.gpu.device_graph import HEAD_MAX, head_edges
    n = 1000
    assert head_edges(4 * n * 7, n, 1) == 7
    assert head_edges(4 * n * 7 - 1, n, 1) == 6
    assert head_edges(4 * n * 7, n, 2) == 3            # out- and in-lists share the budget
    assert head_edges(4 * n * 1000, n, 1) == HEAD_MAX
    assert head_edges(4 * n * 1000, n, 1, heads=3) == 3
    assert head_edges(4 * n * 2, n, 1, heads=5) == 2    # a forced count still fits the budget
    assert head_edges(4 * n * 7, n, 1, heads=0) == 0
    assert head_edges(4 * n - 1, n, 1) == 0
    for left, nn, arrays in ((0, n, 1), (-5, n, 1), (10 ** 9, 0, 1), (10 ** 9, n, 0)):
        assert head_edges(left, nn, arrays) == 0


# -- the hybrid BFS while its GPU side loads (algos/bfs.py GpuLevels; no GPU needed) -------------
def _loading_side(load, est):
    """A GpuLevels over a BackgroundLoad of `load` (no dataset, no CuPy): its BfsLevels stand-in
    is the string "levels"."""
    from graphene_py.algos.bfs import GpuLevels
    from graphene_py.gpu.handoff import BackgroundLoad
    side = GpuLevels.__new__(GpuLevels)
    side.wait_always, side.error, side.levels, side.est = False, None, "levels", est
    side.ld = BackgroundLoad(load)
    return side


def test_hybrid_bfs_levels_run_on_the_cpu_while_the_load_has_long_to_go():
    import threading
    from graphene_py.algos.bfs import _gpu_levels
    gate = threading.Event()
    side = _loading_side(lambda check: gate.wait(30) and "dg", est=100.0)
    pol = OffloadPolicy(num_vertices=N, resident=True)
    try:
        # a small level: the CPU's anyway, no note, nothing recorded by the side
        assert _gpu_levels(side, pol, 1, 20) == (None, None) and not pol.steps
        # a hot level (est. cpu 20 s) with ~100 s of load to go: the CPU, said and recorded
        gl, note = _gpu_levels(side, pol, 1_800_000, 1_000_000_000)
        assert gl is None and "the GPU is loading" in note["handoff"]
        assert [s.device for s in pol.steps] == ["cpu"] and pol.state_on == "cpu"
        # the same level once the load's rest is short: waits for it and takes the GPU side
        side.est = 0.0
        threading.Timer(0.2, gate.set).start()
        gl, note = _gpu_levels(side, pol, 1_800_000, 1_000_000_000)
        assert gl == "levels" and note is None and side.ld.ready()
    finally:
        gate.set()
        side.close()


def test_hybrid_bfs_stays_on_the_cpu_when_the_load_fails():
    from graphene_py.algos.bfs import _gpu_levels

    def load(check):
        raise MemoryError("out of GPU memory\nsecond line")

    side = _loading_side(load, est=0.0)
    pol = OffloadPolicy(num_vertices=N, resident=True)
    side.ld.wait(10)
    assert _gpu_levels(side, pol, 1_800_000, 1_000_000_000) == (None, None)
    assert side.error == "out of GPU memory" and not pol.resident
    assert pol.decide(1_800_000, 1_000_000_000) == "cpu"       # every later level too
    assert side.get() is None


def test_auto_falls_back_to_the_cpu_only_when_the_gpu_is_short_of_memory():
    """registry._gpu_short_of_memory: what `--device auto` may run on the CPU instead of
    failing (the dataset against the GPU budget, or an allocation CuPy could not make), and
    what it must not hide (any other error)."""
    from graphene_py.algos.registry import _gpu_short_of_memory
    from graphene_py.errors import GrapheneError
    from graphene_py.gpu.device_graph import GpuMemoryError
    assert _gpu_short_of_memory(GpuMemoryError("kron: needs 3 GiB\nmore")) == "kron: needs 3 GiB"
    oom = type("OutOfMemoryError", (MemoryError,), {"__module__": "cupy.cuda.memory"})
    assert _gpu_short_of_memory(oom("out of memory allocating 1 bytes")) is not None
    assert _gpu_short_of_memory(MemoryError("host")) is None
    assert _gpu_short_of_memory(GrapheneError("damaged data")) is None
    assert _gpu_short_of_memory(type("OutOfMemoryError", (Exception,), {})("x")) is None


def test_tier_slowdown_follows_the_measured_points():
    from graphene_py.gpu import policy
    assert policy.tier_slowdown("bfs", 0.0) == 7.0
    assert policy.tier_slowdown("bfs", 0.25) == pytest.approx(1.45)
    assert policy.tier_slowdown("bfs", 1.0) == policy.tier_slowdown("bfs", 3.0) == 1.0
    assert 4.3 < policy.tier_slowdown("sssp", 0.125) < 8.9
    assert policy.tier_slowdown("apsp", 0.1) == policy.tier_slowdown("bfs", 0.1)
    assert policy.tier_slowdown("pagerank", 0.0) == 1.0          # (it streams: tier_costs)
    assert policy.resident_share(100, 200, 1000) is None
    assert policy.resident_share(700, 200, 1000) == 0.5
    assert policy.resident_share(5000, 200, 1000) == 1.0


def test_auto_plan_counts_a_gpu_budget_below_the_lists(monkeypatch):
    """--gpu-mem below the CSR: a frontier-driven GPU run reads the rest over the bus, and the
    plan charges its passes the measured slowdown. BFS on 1 G edges goes to the GPU with room for
    everything, stays on the CPU when the budget holds none of its lists, and a budget below
    the offsets and per-vertex state keeps it on the CPU with that reason. No GPU is asked."""
    from graphene_py.algos import registry
    from graphene_py.gpu import _module
    from graphene_py.gpu.device_graph import STATE_BYTES_PER_VERTEX
    from graphene_py.iterator import memory
    from tests.graphs import standin
    monkeypatch.setattr(registry, "gpu_may_be_available", lambda: "")
    monkeypatch.setattr(registry, "gpu_available", lambda: (True, ""))
    monkeypatch.setattr(memory, "memory_available", lambda: 64 << 30)
    monkeypatch.setattr(_module, "_modules", {})
    big = standin(1 << 30)
    n, m = big.num_vertices, big.num_edges
    vb = (n + 1) * 8 + STATE_BYTES_PER_VERTEX * n
    assert registry._choose("bfs", "auto", big, {"gpu_mem": str(vb + m * 4 + (1 << 20))})[0] == "gpu"
    where, why = registry._choose("bfs", "auto", big, {"gpu_mem": str(vb + 1024)})
    assert where == "cpu" and "0% of the edge bytes in GPU memory" in why and "7.0x" in why, why
    where, why = registry._choose("bfs", "auto", big, {"gpu_mem": str(vb // 2)})
    assert where == "cpu" and "holds not even the offsets" in why, why


def test_may_be_available_names_the_missing_gpu_before_cupy(monkeypatch):
    """Without a device node the reason is the GPU, whether CuPy is there or not (installing
    CuPy would not help); with one and no CuPy, CuPy."""
    import importlib.util
    from graphene_py.gpu import _module
    nodes = {"on": False}
    monkeypatch.setattr(_module.os.path, "exists", lambda p: nodes["on"] and p.startswith("/dev/nvidia"))
    for spec in (None, object()):
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, s=spec: s)
        assert _module.may_be_available() == "no NVIDIA GPU here (no /dev/nvidia0)"
    nodes["on"] = True
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert _module.may_be_available() == "CuPy is not installed"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    assert _module.may_be_available() == ""
