"""PageRank, WCC and SpMV on the GPU with the lists streamed in (graphene_py/gpu/streamed.py).

The chunk plan and the tier choice need no GPU and run everywhere; the streamed runs are marked
`gpu` (skipped without CuPy and a GPU) and are compared with the CPU paths (PageRank's pull
computes the same iteration; WCC's labels are each component's smallest ID on both) on graphs
whose lists are cut into many chunks: a hub longer than a chunk, column partitions that split
every row, directed datasets (pulled over their in-edges; WCC over their out-lists), and a
damaged page. And BFS past the GPU budget: the lists zero-copy, their heads in GPU memory.
"""
import os

import numpy as np
import pytest

from graphene_py.algos import bfs, pagerank, spmv, wcc
from graphene_py.errors import GrapheneError
from graphene_py.gpu import lists, streamed
from graphene_py.partition import partition_arrays

from . import graphs as tg


def test_plan_chunks_cover_every_row_once_within_the_cap():
    deg = np.array([3, 0, 50, 1, 1, 1, 0, 7, 2], dtype=np.int64)     # row 2 alone exceeds 10
    off = np.concatenate([[0], np.cumsum(deg)]).astype(np.uint64)
    chunks = streamed.plan_chunks(off, 10)
    rows = [r for (r0, r1, _, _) in chunks for r in range(r0, r1)]
    assert rows == list(range(len(deg)))
    for r0, r1, e0, e1 in chunks:
        assert (e0, e1) == (int(off[r0]), int(off[r1]))
        assert e1 - e0 <= 10 or r1 - r0 == 1        # only a lone long row goes over
    assert (2, 3, 3, 53) in chunks
    assert streamed.plan_chunks(np.zeros(1, np.uint64), 10) == []
    assert streamed._pages(1023, 1025, 4) == (0, 2) and streamed._pages(0, 1024, 4) == (0, 1)


def test_auto_tier_takes_the_least_time_for_one_command(tmp_path, monkeypatch):
    """--gpu-tier auto by the tier model: a dataset already in GPU memory stays resident; else
    one pass streams from the SSD (a host copy would never be used again, and pinning it costs),
    as do a dozen when GPU memory keeps every list after the first; a dozen that it cannot keep
    stream from host memory (reading the lists once beats assembling and loading the CSR), many
    passes with host memory short load it, few stream from the SSD; a tier asked for
    is kept; a tier the GPU budget or host memory cannot hold is never chosen."""
    from types import SimpleNamespace
    from graphene_py.gpu import resident
    from graphene_py.iterator import memory
    big = SimpleNamespace(num_vertices=1 << 23, num_edges=1 << 28, id_width=4, directed=False,
                          in_partitions=None, uuid="u", weighted=False, parts=lambda d: [])
    lists = big.num_edges * 4
    host = 64 << 30
    assert streamed.auto_tier(big, "80G", lists, host, passes=1) == "stream-ssd"
    # a dozen: every list kept in GPU memory after the first pass (no host copy wanted), or,
    # with no room to keep them, copied from host memory
    assert streamed.auto_tier(big, "80G", lists, host, passes=12) == "stream-ssd"
    assert streamed.auto_tier(big, "100M", lists, host, passes=12) == "stream-host"
    monkeypatch.setattr(resident, "is_resident", lambda graph, gpu_mem=None: True)
    assert streamed.auto_tier(big, "80G", lists, host, passes=1) == "resident"
    assert streamed.auto_tier(big, "100M", lists, host, passes=12) == "stream-host"  # no room
    assert streamed.auto_tier(big, "100M", lists, host, passes=1) == "stream-ssd"
    monkeypatch.setattr(resident, "is_resident", lambda graph, gpu_mem=None: False)
    host = 1 << 30                                                            # host short
    assert streamed.auto_tier(big, "80G", lists, host, passes=1) == "stream-ssd"
    # many passes: the lists read from the SSD once and kept in GPU memory beat the CSR's load
    assert streamed.auto_tier(big, "80G", lists, host, passes=20) == "stream-ssd"
    assert streamed.auto_tier(big, "100M", lists, host, passes=20) == "stream-ssd"
    # with no room to keep them, 20 reads of the lists lose to loading the CSR
    monkeypatch.setattr(streamed, "keep_budget", lambda *a, **k: 0)
    assert streamed.auto_tier(big, "80G", lists, host, passes=20) == "resident"
    assert "resident" not in streamed.tier_costs(big, "80G", lists, host, resident_ok=False)
    d = tmp_path / "d"
    d.mkdir()
    g = partition_arrays(np.arange(99), np.arange(1, 100), disks=[str(d)], name="t",
                         register=False, durable=False, symmetrize=True)
    assert pagerank.choose_gpu_tier(g, gpu_mem=1 << 10, tier="stream-host") == "stream-host"
    monkeypatch.setattr(memory, "memory_available", lambda: 100)
    assert pagerank.choose_gpu_tier(g, gpu_mem=1 << 10) == "stream-ssd"
    assert wcc.choose_gpu_tier(g, gpu_mem=1 << 10) == "stream-ssd"
    monkeypatch.setattr(memory, "memory_available", lambda: 1 << 30)
    assert pagerank.choose_gpu_tier(g, gpu_mem=1 << 10) == "stream-host"    # copied from RAM
    assert wcc.choose_gpu_tier(g, gpu_mem=1 << 10) == "stream-ssd"          # one pass


def test_chunks_are_sized_for_overlap_on_small_lists():
    """Lists are cut into at least MIN_CHUNKS chunks (a pass overlaps reads, copies and kernels)
    unless that makes chunks below MIN_CHUNK_BYTES; large lists keep CHUNK_BYTES; page
    multiples."""
    f = streamed.chunk_bytes_for
    assert f(0) == f(1) == streamed.MIN_CHUNK_BYTES
    assert f(513_245_800) == 64_159_744            # kron22: 8 chunks of ~64 MB, not 2 of 256
    assert f(513_245_800) % streamed.PAGE == 0 and 8 * f(513_245_800) >= 513_245_800
    assert f(8 << 30) == streamed.CHUNK_BYTES
    assert f(100 << 20) == streamed.MIN_CHUNK_BYTES


def test_keep_plan_and_the_kept_share_in_the_model():
    """Chunks kept in GPU memory: in order, each that still fits what is left (a large one is
    skipped, a later small one kept); the model charges later passes only the lists not kept,
    and a budget below the per-vertex state keeps nothing."""
    from types import SimpleNamespace
    assert streamed.keep_plan([10, 20, 5, 30, 1], 36) == [True, True, True, False, True]
    assert streamed.keep_plan([10, 20], 0) == [False, False]
    assert streamed.keep_plan([0, 4], 4) == [False, True]          # an empty chunk holds nothing
    g = SimpleNamespace(num_vertices=1 << 20, num_edges=1 << 28, id_width=4, directed=False,
                        in_partitions=None, uuid="k")
    lists = g.num_edges * 4
    state = streamed.STREAM_STATE_BYTES_PER_VERTEX * g.num_vertices + 8 * (g.num_vertices + 1) \
        + 2 * streamed.CHUNK_BYTES
    assert streamed.keep_budget(g, state - 1, lists) == 0
    assert streamed.keep_budget(g, state + 12345, lists) == 12345
    assert streamed.keep_budget(g, "80G", lists) == lists
    assert streamed.keep_budget(g, None, lists, probe=False) == lists
    host = 64 << 30
    half = streamed.tier_costs(g, state + lists // 2, lists, host, passes=11, resident_ok=False)
    none = streamed.tier_costs(g, state, lists, host, passes=11, resident_ok=False)
    one = streamed.tier_costs(g, state, lists, host, passes=1, resident_ok=False)
    for t in ("stream-host", "stream-ssd"):
        assert half[t] < none[t]
    # 10 later passes of half the lists by SSD: half the 10 reads, plus their GPU passes
    saved = 10 * (lists // 2) / streamed.SSD_BYTES_PER_S
    assert abs((none["stream-ssd"] - half["stream-ssd"]) - saved) < 0.1 * saved
    assert one["stream-ssd"] == lists / streamed.SSD_BYTES_PER_S        # one pass keeps nothing


@pytest.fixture(autouse=True)
def _float64_pagerank(monkeypatch):
    """The streamed GPU PageRank is float64 throughout; the CPU references it must equal to 1e-9
    too (by default the CPU's rows read at random are float32 while the change is large)."""
    from graphene_py.algos.pagerank import pull
    monkeypatch.setattr(pull, "SINGLE_UNTIL", np.inf)


def _dataset(tmp_path, c, grid, directed):
    disks = [str(tmp_path / f"d{i}") for i in range(grid[0] * grid[1])]
    for x in disks:
        os.makedirs(x, exist_ok=True)
    return partition_arrays(c.src, c.dst, num_vertices=c.n, disks=disks, name=c.name,
                            rows=grid[0], cols=grid[1], symmetrize=not directed,
                            in_edges=directed, register=False, durable=False)


@pytest.mark.gpu
@pytest.mark.parametrize("source", ["host", "ssd"])
@pytest.mark.parametrize("name,grid,directed", [
    ("star", (1, 1), False), ("powerlaw", (2, 2), False), ("powerlaw", (2, 3), True),
    ("disconnected", (1, 1), True), ("chain", (1, 1), False)])
def test_streamed_pagerank_equals_the_cpu_pull(tmp_path, source, name, grid, directed):
    c = getattr(tg, name)()
    g = _dataset(tmp_path, c, grid, directed)
    ref = pagerank.run(g, variant="pull", tolerance=0, max_iter=15)
    st = {}
    # 16 KB chunks: many per partition, and a hub's list longer than one
    got = streamed.pagerank(g, source=source, tol=0, max_iter=15, chunk_bytes=16 << 10, stats=st,
                            keep_bytes=0)
    assert st["iterations"] == 15 and st["tier"] == f"stream-{source}"
    np.testing.assert_allclose(got, ref.scores, rtol=1e-9, atol=1e-15)
    assert abs(got.sum() - 1.0) < 1e-9
    assert st["bytes_moved"] >= 15 * 4 * g.num_edges       # every list, every iteration
    assert st["kept_bytes"] == 0
    # some chunks kept in GPU memory, then all: the same scores; later iterations move only
    # the chunks not kept (the SSD source reads whole pages of them)
    parts = g.parts(streamed._pull_direction(g, "PageRank"))
    lists = 4 * sum(p.num_edges for p in parts)
    sizes = [(e1 - e0) * 4 for p in parts
             for (_, _, e0, e1) in streamed.plan_chunks(streamed._offsets(p), (16 << 10) // 4)
             if e1 > e0]
    for keep in (lists // 3, lists):
        st = {}
        got = streamed.pagerank(g, source=source, tol=0, max_iter=15, chunk_bytes=16 << 10,
                                stats=st, keep_bytes=keep)
        np.testing.assert_allclose(got, ref.scores, rtol=1e-9, atol=1e-15)
        kept = st["kept_bytes"]
        plan = streamed.keep_plan(sizes, keep)
        assert kept == sum(b for b, k in zip(sizes, plan) if k) and kept <= keep
        assert st["kept_chunks"] == sum(plan)
        first, later = st["supersteps"][0], st["supersteps"][1:]
        assert first["bytes_moved"] >= lists and first["kept_bytes"] == kept
        for s in later:
            if source == "host":
                assert s["bytes_moved"] == lists - kept
            else:
                assert lists - kept <= s["bytes_moved"] <= first["bytes_moved"]
                assert s["bytes_moved"] < first["bytes_moved"] or not kept
        if keep == lists:
            assert kept == lists
            assert all(s["bytes_moved"] == 0 for s in later)


@pytest.mark.gpu
def test_host_tier_reads_the_files_on_the_first_pass_only(tmp_path):
    """stream-host: the first pass reads every chunk into pinned memory of its own (page-checked,
    as the SSD source reads); later passes copy from there. With the list files moved away
    after the first pass, the next run on the same stream still gives the CPU's scores."""
    g = _dataset(tmp_path, tg.powerlaw(), (2, 2), False)
    ref = pagerank.run(g, variant="pull", tolerance=0, max_iter=4)
    sp = streamed.StreamedPageRank(g, source="host", chunk_bytes=16 << 10, keep_bytes=0)
    assert sp.lists.host == {}                     # nothing read before the first pass
    sp.run(0.85, 0.0, 1)
    assert sorted(sp.lists.host) == [c.i for c in sp.chunks] and len(sp.chunks) > 4
    for p in g.parts("out"):
        os.rename(p.adj_path, p.adj_path + ".away")
    st = {}
    got = sp.run(0.85, 0.0, 4, stats=st)
    np.testing.assert_allclose(got, ref.scores, rtol=1e-9, atol=1e-15)
    lists = 4 * sum(p.num_edges for p in g.parts("out"))
    assert all(s["bytes_moved"] == lists for s in st["supersteps"])   # the edges alone


@pytest.mark.gpu
def test_streamed_pagerank_within_a_gpu_budget(tmp_path):
    """--gpu-mem through dispatch: a budget that holds the state and a share of the lists keeps
    that share (and answers as the CPU does); one below the state is a clear error naming both."""
    from graphene_py.algos import registry
    from graphene_py.gpu.device_graph import GpuMemoryError
    c = tg.powerlaw()
    g = _dataset(tmp_path, c, (1, 1), False)
    ref = pagerank.run(g, variant="pull")
    n = g.num_vertices
    lists = 4 * g.num_edges
    state = streamed.STREAM_STATE_BYTES_PER_VERTEX * n + 8 * (n + 1) + 2 * streamed.CHUNK_BYTES
    res = registry.dispatch("pagerank-pull", g, device="gpu", gpu_tier="stream-host",
                            gpu_mem=state + lists // 2)
    np.testing.assert_allclose(res.scores, ref.scores, rtol=1e-9, atol=1e-15)
    kept = res.supersteps[-1]["kept_bytes"]
    assert 0 <= kept <= lists // 2
    with pytest.raises(GpuMemoryError, match="per-vertex state"):
        registry.dispatch("pagerank-pull", g, device="gpu", gpu_tier="stream-ssd", gpu_mem=1024)


@pytest.mark.gpu
def test_streamed_run_through_the_cli_entry_and_a_damaged_page(tmp_path):
    from graphene_py.algos import registry
    c = tg.powerlaw()
    g = _dataset(tmp_path, c, (1, 1), False)
    ref = pagerank.run(g, variant="pull")
    res = registry.dispatch("pagerank-pull", g, device="gpu", gpu_tier="stream-ssd")
    assert res.gpu_tier == "stream-ssd" and res.iterations == ref.iterations
    np.testing.assert_allclose(res.scores, ref.scores, rtol=1e-9, atol=1e-15)
    # --json says where every superstep ran: each iteration on the GPU, streamed from the SSD
    import json
    from click.testing import CliRunner
    from graphene_py.cli import main
    r = CliRunner().invoke(main, ["run", "pagerank-pull", "-g", str(g.path), "--device", "gpu",
                                  "--gpu-tier", "stream-ssd", "--json"])
    assert r.exit_code == 0, r.output
    pl = json.loads(r.stdout)["placement"]
    assert [(e["device"], e["mode"], e["supersteps"]) for e in pl] == [
        ("gpu", "gpu-stream-ssd", ref.iterations)]
    assert pl[0]["bytes_to_gpu"] >= 4 * g.num_edges      # (every list kept after the first)
    _refused_when_damaged(g, lambda source: streamed.pagerank(g, source=source, max_iter=2))


def _refused_when_damaged(g, run):
    """One flipped bit in the first page of the first out-list file: both sources refuse it."""
    p = g.parts("out")[0]
    with open(p.adj_path, "r+b") as f:
        b = bytearray(f.read(1))
        f.seek(0)
        f.write(bytes([b[0] ^ 1]))
    for source in ("ssd", "host"):
        with pytest.raises(GrapheneError, match="CRC32C"):
            run(source)


def test_spmv_streams_unweighted_lists_only(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    g = partition_arrays(np.arange(99), np.arange(1, 100), disks=[str(d)], name="t",
                         register=False, durable=False, symmetrize=True)
    with pytest.raises(GrapheneError, match="streams its lists once"):
        spmv.run_gpu(g, gpu_tier="resident")
    w = partition_arrays(np.arange(9), np.arange(1, 10), weights=np.ones(9, np.float32),
                         disks=[str(d)], name="tw", register=False, durable=False)
    with pytest.raises(GrapheneError, match="weighted"):
        streamed.spmv(w, np.ones(10), source="host")


WCC_CASES = [("star", (1, 1), False), ("powerlaw", (2, 2), False), ("powerlaw", (2, 3), True),
             ("disconnected", (1, 1), True), ("disconnected", (2, 2), False),
             ("chain", (1, 1), True), ("isolated_ends", (2, 1), False),
             ("duplicates", (1, 2), True)]


@pytest.mark.gpu
@pytest.mark.parametrize("source", ["host", "ssd"])
@pytest.mark.parametrize("name,grid,directed", WCC_CASES)
def test_streamed_wcc_and_spmv_equal_the_cpu(tmp_path, source, name, grid, directed):
    c = getattr(tg, name)()
    g = _dataset(tmp_path, c, grid, directed)
    ref = wcc.run(g)
    st = {}
    got = streamed.wcc(g, source=source, chunk_bytes=16 << 10, stats=st)
    assert np.array_equal(got, ref.labels) and st["n_components"] == ref.n_components
    assert st["bytes_moved"] >= 4 * g.num_edges and st["tier"] == f"stream-{source}"
    x = spmv.make_x(g.num_vertices, "random")
    want = spmv.run(g, x=x).y
    y = streamed.spmv(g, x, source=source, chunk_bytes=16 << 10)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("algo", ["wcc", "spmv"])
def test_streamed_wcc_spmv_through_dispatch_and_a_damaged_page(tmp_path, algo):
    from graphene_py.algos import registry
    c = tg.powerlaw()
    g = _dataset(tmp_path, c, (1, 1), False)
    ref = registry.dispatch(algo, g)
    for tier in ("stream-host", "stream-ssd"):
        res = registry.dispatch(algo, g, device="gpu", gpu_tier=tier)
        assert res.gpu_tier == tier and res.device == "gpu"
        if algo == "wcc":
            assert np.array_equal(res.labels, ref.labels)
        else:
            np.testing.assert_allclose(res.y, ref.y, rtol=1e-12)
    if algo == "wcc":
        _refused_when_damaged(g, lambda source: streamed.wcc(g, source=source))
    else:
        _refused_when_damaged(g, lambda source: streamed.spmv(g, np.ones(g.num_vertices),
                                                              source=source))


@pytest.mark.gpu
@pytest.mark.parametrize("grid,directed", [((1, 1), False), ((2, 3), True)])
def test_bfs_past_the_gpu_budget_through_dispatch(tmp_path, grid, directed):
    """`--gpu-mem` below the lists: BFS on the GPU reads them zero-copy with their heads in GPU
    memory, says so in its result, and answers as the CPU does (a directed dataset's in-lists
    get heads too)."""
    from graphene_py.algos import registry
    from graphene_py.gpu.device_graph import STATE_BYTES_PER_VERTEX
    c = tg.powerlaw()
    g = _dataset(tmp_path, c, grid, directed)
    n, m = g.num_vertices, g.num_edges
    arrays = 2 if g.in_partitions is not None else 1
    budget = (n + 1) * 8 * arrays + STATE_BYTES_PER_VERTEX * n + m * 4 // 2
    for src in (0, 77, n - 1):
        ref = bfs.run(g, src=src)
        res = registry.dispatch("bfs", g, device="gpu", gpu_mem=budget, src=src)
        assert res.gpu_tier == "host"
        assert res.gpu_list_heads == min(32, (m * 4 // 2) // (4 * n * arrays)) > 0
        np.testing.assert_array_equal(res.depth, ref.depth)


LOAD_CASES = WCC_CASES + [("one_vertex", (1, 1), False), ("only_self_loops", (2, 2), True),
                          ("isolated_ends", (3, 2), True)]


@pytest.mark.gpu
@pytest.mark.parametrize("name,grid,directed", LOAD_CASES)
def test_resident_load_reads_the_lists_straight_into_gpu_memory(tmp_path, monkeypatch, name,
                                                                 grid, directed):
    """The resident tier's load (lists.load_resident) gives the CSR that Graph.to_csr
    assembles on the host, in one chunk or in chunks of 16 IDs (many per partition, a hub's list
    a chunk of its own, column partitions splitting every row); DeviceGraph.from_graph takes it
    (never assembling the CSR on the host) and its kernels answer as the CPU path does."""
    from graphene_py.gpu import DeviceGraph, _module
    import graphene_py.gpu as gpu
    cp = _module.cupy()
    c = getattr(tg, name)()
    g = _dataset(tmp_path, c, grid, directed)
    assert lists.resident_loadable(g)
    dirs = ["out"] + (["in"] if directed else [])
    want = {d: g.to_csr(d, index_dtype=np.int32)[:2] for d in dirs}
    for d in dirs:
        for chunk in (None, 64):
            ptr, idx = lists.load_resident(g, d, chunk_bytes=chunk)
            assert isinstance(ptr, cp.ndarray) and ptr.dtype == cp.int64
            np.testing.assert_array_equal(cp.asnumpy(ptr), want[d][0])
            np.testing.assert_array_equal(cp.asnumpy(idx), want[d][1])
    monkeypatch.setattr(type(g), "to_csr", lambda *a, **k: pytest.fail("assembled on the host"))
    dg = DeviceGraph.from_graph(g)
    assert dg.placement == {d: "gpu" for d in dirs} and dg.symmetric == (not directed)
    np.testing.assert_array_equal(cp.asnumpy(dg.idx), want["out"][1])
    if directed:
        np.testing.assert_array_equal(cp.asnumpy(dg.in_csr()[0]), want["in"][0])
        np.testing.assert_array_equal(cp.asnumpy(dg.in_csr()[1]), want["in"][1])
    monkeypatch.undo()
    np.testing.assert_array_equal(gpu.wcc(dg), wcc.run(g).labels)
    src = c.n - 1
    np.testing.assert_array_equal(gpu.bfs(dg, src)[1], bfs.run(g, src=src).depth)


@pytest.mark.gpu
def test_resident_load_refuses_damage_and_stops_when_told(tmp_path):
    """A list out of its partition's columns (the range taken narrower here) and a flipped bit
    are refused, naming what; a load told to stop (check raising) stops, its reader joined."""
    import threading
    from graphene_py.gpu import DeviceGraph
    c = tg.powerlaw()
    g = _dataset(tmp_path, c, (2, 2), True)
    p = g.parts("out")[1]
    hi, p.col_hi = p.col_hi, p.col_lo + 1
    with pytest.raises(GrapheneError, match="outside its partition's columns in the out-lists"):
        DeviceGraph.from_graph(g)
    p.col_hi = hi
    calls = []

    def check():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        lists.load_resident(g, "out", check=check, chunk_bytes=64)
    assert len(calls) == 3 and threading.active_count() == before
    _refused_when_damaged(g, lambda source: DeviceGraph.from_graph(g))


@pytest.mark.gpu
@pytest.mark.parametrize("grid", [(1, 1), (2, 2)])
def test_damaged_offsets_are_refused_before_any_kernel(tmp_path, grid):
    """The offsets are checked on a thread while the first lists are read: an offset made huge
    (its CRC32 then differs) is refused as damaged data by the resident load and by a streamed
    pass (not a GPU allocation failure or a kernel's stray write), and no reader is left."""
    from graphene_py.gpu import DeviceGraph
    from graphene_py.integrity import DamagedDataError
    g = _dataset(tmp_path, tg.powerlaw(), grid, False)
    p = g.parts("out")[0]
    raw = bytearray(open(p.off_path, "rb").read())
    raw[8 * 3 + 6] ^= 0x40            # offset 3 += 2^54
    with open(p.off_path, "wb") as f:
        f.write(raw)
    with pytest.raises(DamagedDataError, match="CRC32"):
        lists.load_resident(g, "out")
    with pytest.raises(DamagedDataError, match="CRC32"):
        DeviceGraph.from_graph(g)
    for source in ("ssd", "host"):
        with pytest.raises(DamagedDataError, match="CRC32"):
            streamed.wcc(g, source=source)
        with pytest.raises(DamagedDataError, match="CRC32"):
            streamed.pagerank(g, source=source)
    assert not _stream_threads()


def _stream_threads():
    import threading
    return [t for t in threading.enumerate() if t.name.startswith("graphene-gpu-")]


@pytest.mark.gpu
@pytest.mark.parametrize("source,engine", [("ssd", True), ("ssd", False), ("host", False)])
def test_reads_begun_ahead_are_taken_by_the_pass_or_stopped(tmp_path, monkeypatch, source,
                                                             engine):
    """ListStream.start() begins a pass's reads (and the staging buffers' pinning) before the
    caller's set-up: the next each() takes them and gives what a pass begun by itself gives;
    close() stops them when no pass follows, an error in the set-up after start() (the resident
    load's) leaves no thread reading, and a later pass still reads every chunk. "ssd" reads
    through the IO engine (engine) or through reader threads and staging buffers."""
    from graphene_py.gpu import _module
    cp = _module.cupy()
    monkeypatch.setattr(lists, "ENGINE_READS", engine)
    c = tg.powerlaw()
    g = _dataset(tmp_path, c, (2, 2), True)
    before = _stream_threads()

    def sums(ls):
        got = {}

        def launch(ch, dbuf, first, s):
            s.synchronize()
            a = cp.asnumpy(dbuf[ch.e0 - first:ch.e1 - first]).astype(np.int64)
            got[ch.i] = int(a.sum())
        moved = ls.each(launch)
        return got, moved
    plain = lists.ListStream(g, "out", source, chunk_bytes=64)
    want, moved = sums(plain)
    assert len(want) == len(plain.chunks) > 4 and moved > 0
    ahead = lists.ListStream(g, "out", source, chunk_bytes=64)
    ahead.start()
    ahead.start()                        # (once: a second call does nothing)
    assert sums(ahead) == (want, moved) and len(ahead.buffers()[2]) == (
        lists.STAGING if source == "ssd" and not engine else 0)
    assert (ahead._reads is not None) == engine      # (the engines' reads, kept for the next)
    assert sums(ahead)[0] == want        # a later pass ("host": from its pinned copies)
    stopped = lists.ListStream(g, "out", source, chunk_bytes=64)
    stopped.start()
    stopped.close()
    assert _stream_threads() == before
    assert sums(stopped)[0] == want      # nothing lost: the next pass reads every chunk
    stopped.close()                      # (nothing begun: a no-op)
    monkeypatch.setattr(lists, "_load_into_slots",
                        lambda *a: (_ for _ in ()).throw(MemoryError("set-up failed")))
    with pytest.raises(MemoryError, match="set-up failed"):
        lists.load_resident(g, "out", chunk_bytes=64)
    assert _stream_threads() == before


@pytest.mark.gpu
@pytest.mark.parametrize("grid,directed", [((1, 1), False), ((2, 2), True), ((2, 3), False)])
def test_resident_load_of_weights(tmp_path, grid, directed, monkeypatch):
    """A weighted dataset's weights load as its lists do (lists.load_resident kind "wgt"): each
    list's weights at its CSR slot, in one chunk or many, equal to what Graph.to_csr assembles;
    DeviceGraph.from_graph never assembles the CSR on the host, and the GPU's SSSP gives the
    CPU path's distances. A flipped bit in a weights file is refused, naming that file."""
    from graphene_py.algos import sssp
    from graphene_py.gpu import DeviceGraph, _module
    import graphene_py.gpu as gpu
    cp = _module.cupy()
    c = tg.powerlaw()
    disks = [str(tmp_path / f"d{i}") for i in range(grid[0] * grid[1])]
    for x in disks:
        os.makedirs(x, exist_ok=True)
    w = partition_arrays(c.src, c.dst, weights=c.weights, num_vertices=c.n, disks=disks,
                         name="w", rows=grid[0], cols=grid[1], symmetrize=not directed,
                         in_edges=directed, register=False, durable=False)
    assert lists.resident_loadable(w)
    ptr, idx, wts = w.to_csr("out", index_dtype=np.int32)
    for chunk in (None, 64):
        got_ptr, got = lists.load_resident(w, "out", chunk_bytes=chunk, kind="wgt")
        np.testing.assert_array_equal(cp.asnumpy(got_ptr), ptr)
        assert got.dtype == cp.float32
        np.testing.assert_array_equal(cp.asnumpy(got), wts)
    monkeypatch.setattr(type(w), "to_csr", lambda *a, **k: pytest.fail("assembled on the host"))
    dg = DeviceGraph.from_graph(w)
    assert dg.placement["weights"] == "gpu"
    np.testing.assert_array_equal(cp.asnumpy(dg.weights), wts)
    np.testing.assert_array_equal(cp.asnumpy(dg.idx), idx)
    monkeypatch.undo()
    src = int(np.argmax(np.diff(ptr)))
    np.testing.assert_array_equal(np.asarray(gpu.sssp(dg, src)), sssp.run(w, src=src).dist)
    p = w.parts("out")[0]
    with open(p.wgt_path, "r+b") as f:
        b = bytearray(f.read(1))
        f.seek(0)
        f.write(bytes([b[0] ^ 1]))
    with pytest.raises(GrapheneError, match=r"CRC32C") as e:
        DeviceGraph.from_graph(w)
    assert os.path.basename(p.wgt_path) in str(e.value)


@pytest.mark.gpu
def test_engine_reads_into_reserved_hugepages(tmp_path, monkeypatch):
    """With huge pages reserved (vm.nr_hugepages), stream-ssd's engines read into hugetlb pools
    registered with CUDA: every chunk as the reader threads bring it, and a streamed PageRank
    and WCC as the CPU paths compute them. Skipped where too few huge pages are free (CI and
    most machines reserve none)."""
    from graphene_py.gpu import engine_reads
    from graphene_py.io.buffers import hugepages_free
    free, size = hugepages_free()
    need = engine_reads.ENGINES * (engine_reads.QUEUE_DEPTH + engine_reads.SPARE_SLOTS) * \
        engine_reads.SLOT_BYTES
    if free * size < need:
        pytest.skip(f"{need >> 20} MiB of huge pages are not reserved here")
    c = tg.powerlaw()
    g = _dataset(tmp_path, c, (2, 2), False)

    def sums(engine):
        monkeypatch.setattr(lists, "ENGINE_READS", engine)
        ls = lists.ListStream(g, "out", "ssd", chunk_bytes=16 << 10)
        got = {}

        def launch(ch, dbuf, first, s):
            s.synchronize()
            got[ch.i] = int(dbuf[ch.e0 - first:ch.e1 - first].astype(np.int64).sum().get())
        ls.each(launch)
        kinds = {p.kind for p in ls._reads.pools} if engine else None
        ls.close()
        return got, kinds
    got, kinds = sums(True)
    assert kinds == {"hugetlb"}
    assert got == sums(False)[0] and len(got) > 8
    monkeypatch.setattr(lists, "ENGINE_READS", True)
    ref = pagerank.run(g, variant="pull", tolerance=0, max_iter=15)
    x = streamed.pagerank(g, source="ssd", tol=0, max_iter=15, chunk_bytes=16 << 10,
                          keep_bytes=0)
    np.testing.assert_allclose(x, ref.scores, rtol=1e-9, atol=1e-15)
    assert np.array_equal(streamed.wcc(g, source="ssd", chunk_bytes=16 << 10),
                          wcc.run(g).labels)
