"""The adjacency cache (`graphene run --memory SIZE`, IoIterator(cache=...)): whatever the budget —
none, part of the files, all of them — every algorithm gives the same answer, the files it holds
are not read from the disks, and a budget below the run's O(|V|) state is a clear error naming both
sizes."""

import json
import subprocess
import sys

import numpy as np
import pytest

import graphene_py as gp
from graphene_py.iterator import Frontier, IoIterator
from graphene_py.iterator.memory import CacheBudget
from graphene_py.partition import partition_arrays
from tests import graphs, naive

SSD = {"engine": "uring", "buffer_mb": 2, "threads": 2}


def _disks(tmp_path, k):
    out = []
    for i in range(k):
        d = tmp_path / f"disk{i}"
        d.mkdir()
        out.append(str(d))
    return out


@pytest.fixture(scope="module")
def directed(tmp_path_factory):
    """A directed power-law graph with in-edges on a 3x2 grid (six files per direction, of
    unequal sizes: a hub's list spans several blocks), weighted."""
    g = graphs.powerlaw(scale=12, edge_factor=8, seed=5)
    rng = np.random.default_rng(5)
    w = rng.random(len(g.src)).astype(np.float32) + 0.01
    ds = partition_arrays(g.src, g.dst, weights=w, num_vertices=g.n,
                          disks=_disks(tmp_path_factory.mktemp("cache"), 4), name="cached",
                          rows=3, cols=2, in_edges=True, register=False, durable=False)
    return ds


def _file_bytes(g, direction, weights=False):
    with IoIterator(g, direction, **SSD) as it:
        return it._file_cost() if weights else it.file_bytes.copy()


def _budgets(g):
    """0, one file's worth, half the out-lists' bytes (some files of the first direction opened
    fit, not all), everything (both directions, with weights)."""
    out = _file_bytes(g, "out")
    fb = np.concatenate([_file_bytes(g, "out", True), _file_bytes(g, "in", True)])
    return [0, int(out.min()), int(out.sum() // 2), int(fb.sum()) + 4096, int(out.max() // 3)]


@pytest.fixture(autouse=True)
def _partial_files_from_one_page(monkeypatch):
    """The test graphs' files are KBs: let a file be cached in part from one page of quota."""
    from graphene_py.iterator import session
    monkeypatch.setattr(session, "PARTIAL_MIN", session.PAGE)


ALGOS = {
    "bfs": (lambda g, **kw: gp.bfs(g, src=1, **kw), "depth"),
    "pagerank": (lambda g, **kw: gp.pagerank(g, variant="pull", tolerance=1e-12, max_iter=30,
                                             **kw), "scores"),
    "delta": (lambda g, **kw: gp.pagerank(g, tolerance=1e-9, **kw), "scores"),
    "wcc": (lambda g, **kw: gp.wcc(g, **kw), "labels"),
    "kcore": (lambda g, **kw: gp.kcore(g, **kw), "core_number"),
    "sssp": (lambda g, **kw: gp.sssp(g, src=1, **kw), "dist"),
    "spmv": (lambda g, **kw: gp.spmv(g, **kw), "y"),
    "apsp": (lambda g, **kw: gp.apsp(g, sources=[1, 2, 3], **kw), "depths"),
}


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_same_answer_at_every_budget(directed, algo):
    fn, key = ALGOS[algo]
    ref = getattr(fn(directed, **SSD), key)
    mem = getattr(fn(directed, in_memory=True, threads=2), key)
    exact = algo not in ("pagerank", "delta", "spmv", "sssp")
    budgets = _budgets(directed)
    for budget in budgets:
        b = CacheBudget(budget)
        r = fn(directed, cache=b, **SSD)
        got = getattr(r, key)
        if exact:
            assert np.array_equal(got, ref), budget
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12, err_msg=str(budget))
        assert b.left == b.total, "every iterator gives its files back when it closes"
        if budget == 0:
            assert b.used_max == 0 and not b.whole and not b.partial
        elif budget == budgets[2]:
            assert b.partial, "half the bytes: some files in RAM, the others read"
        elif budget == budgets[3]:
            assert b.whole and not b.partial, "room for all: the in-memory path"
        elif budget == budgets[4]:
            assert b.partial and b.used_max == budget // 4096 * 4096, "a third of a file: in part"
    if exact:
        assert np.array_equal(mem, ref)


def test_cached_blocks_are_read_twice_then_held(directed):
    """The cache is read through with a second chance: the first full superstep reads every file,
    the second reads them again and copies the kept files' blocks in on the way, the third reads
    exactly the other files' bytes and reports the cached extents' bytes apart (their sum is what
    no cache reads), and the next iterator of this process (a new trial) finds the blocks held."""
    g = directed
    fb = _file_bytes(g, "out")
    budget = CacheBudget(int(np.sort(fb)[-1]) + int(np.sort(fb)[-2]))   # the two largest fit

    from graphene_py.algos.spmv import _always, _row_unweighted as _pull   # a real kernel pair
    x = np.ones(g.num_vertices)

    def step(it):
        y = np.zeros(g.num_vertices)
        st = it.run(_always, _pull, (x, y), Frontier.all(g.num_vertices))
        return st["bytes_read"], st.get("bytes_cached", 0), y, st["io_utility"]

    with IoIterator(g, "out", **SSD) as it:
        read0, cached0, y0, util0 = step(it)
    with IoIterator(g, "out", cache=budget, **SSD) as it:
        assert it.cached is not None and it.cached.sum() == 2
        first, second, third = step(it), step(it), step(it)
    with IoIterator(g, "out", cache=budget, **SSD) as it:
        fourth = step(it)
    assert cached0 == 0
    for read1, cached1, y1, _ in (first, second):            # read, then read and copied
        assert read1 == read0 and cached1 == 0
        np.testing.assert_allclose(y1, y0)
    for read1, cached1, y1, util1 in (third, fourth):
        assert util1 == pytest.approx(util0) and util1 <= 1.0   # cached bytes count as brought in
        assert cached1 > 0 and read1 < read0 and read1 + cached1 == read0
        np.testing.assert_allclose(y1, y0)


def test_a_pass_made_again_is_copied_in_on_its_first_read(directed):
    """Frontier.all(n, again=True) (an iterative algorithm's pass with another to come): the
    cached files are copied in on the first read, so the second pass reads only the other files;
    the sums are those of a run without a cache."""
    from graphene_py.iterator.session import drop_memory_cache
    from graphene_py.algos.spmv import _always, _row_unweighted as _pull
    g = directed
    fb = _file_bytes(g, "out")
    drop_memory_cache()
    budget = CacheBudget(int(np.sort(fb)[-1]))                     # the largest file fits
    x = np.ones(g.num_vertices)

    def step(it, again):
        y = np.zeros(g.num_vertices)
        st = it.run(_always, _pull, (x, y), Frontier.all(g.num_vertices, again=again))
        return st["bytes_read"], st.get("bytes_cached", 0), y

    with IoIterator(g, "out", **SSD) as it:
        read0, _, y0 = step(it, False)
    with IoIterator(g, "out", cache=budget, **SSD) as it:
        assert it.cached is not None and it.cached.sum() == 1
        first, second = step(it, True), step(it, False)
    assert first[0] == read0 and first[1] == 0
    assert second[1] == int(np.sort(fb)[-1]) and second[0] + second[1] == read0
    for _, _, y in (first, second):
        np.testing.assert_allclose(y, y0)
    drop_memory_cache()


def test_a_sparse_superstep_fills_and_uses_the_blocks_it_read(directed):
    """Blocks are held one by one, with a third chance for sparse supersteps: a queue superstep
    read a second time copies nothing (a traversal rarely reads a block three times), a third
    time caches what it read, a fourth identical one reads nothing, and a wider one reads only the
    blocks not held yet."""
    g = directed
    from graphene_py.algos.spmv import _always, _row_unweighted as _pull
    x = np.ones(g.num_vertices)
    some = np.arange(0, g.num_vertices, 97, dtype=np.int64)
    more = np.arange(0, g.num_vertices, 41, dtype=np.int64)
    out = {}
    for label, cache in (("none", None), ("all", CacheBudget(10**12))):
        with IoIterator(g, "out", cache=cache, **SSD) as it:
            res = []
            for ids in (some, some, some, some, more):
                y = np.zeros(g.num_vertices)
                st = it.run(_always, _pull, (x, y), Frontier.from_queue(ids, g.num_vertices))
                res.append((st["bytes_read"], st.get("bytes_cached", 0), y))
            out[label] = res
    none, held = out["none"], out["all"]
    assert held[0][0] == held[1][0] == held[2][0] == none[0][0] > 0
    assert held[0][1] == held[1][1] == held[2][1] == 0
    assert held[3][0] == 0 and held[3][1] == none[3][0]
    assert 0 < held[4][0] < none[4][0] and held[4][1] > 0
    for a, b in zip(none, held):
        np.testing.assert_allclose(b[2], a[2])


def test_a_masked_superstep_said_to_come_again_is_copied_in_on_its_first_read(directed):
    """Frontier.from_mask(mask, again=True) (MS-BFS's heavy levels): the blocks it reads are
    copied in on this first read, so the same mask again reads nothing; without the hint the
    second read copies nothing (a traversal's third chance). Sums as without a cache."""
    from graphene_py.algos.spmv import _always, _row_unweighted as _pull
    from graphene_py.iterator.session import drop_memory_cache
    g = directed
    n = g.num_vertices
    x = np.ones(n)
    mask = np.zeros(n, dtype=np.uint8)
    mask[::3] = 1
    out = {}
    for label, cache, again in (("none", None, False), ("plain", CacheBudget(10**12), False),
                                ("again", CacheBudget(10**12), True)):
        drop_memory_cache()                 # (a cache an earlier run left holds blocks)
        with IoIterator(g, "out", cache=cache, **SSD) as it:
            res = []
            for a in (again, False):
                y = np.zeros(n)
                st = it.run(_always, _pull, (x, y), Frontier.from_mask(mask, again=a))
                res.append((st["bytes_read"], st.get("bytes_cached", 0), y))
            out[label] = res
    none, plain, again = out["none"], out["plain"], out["again"]
    assert plain[0][0] == plain[1][0] == again[0][0] == none[0][0] > 0
    assert plain[1][1] == 0                                  # read twice: nothing copied yet
    assert again[1][0] == 0 and again[1][1] == none[0][0]    # all of it from RAM
    for a, b, c in zip(none, plain, again):
        np.testing.assert_allclose(b[2], a[2])
        np.testing.assert_allclose(c[2], a[2])
    drop_memory_cache()


def test_msbfs_of_many_sources_reads_its_heavy_levels_once(directed):
    """APSP of AGAIN_SOURCES sources or more: its first heavy level copies the lists in
    (msbfs._again), so with room for them it reads each block at most once where a run without
    the cache reads the in-lists at two bottom-up levels; the depths are that run's."""
    from graphene_py.algos import msbfs
    from graphene_py.iterator.session import drop_memory_cache
    g = directed
    src = list(range(1, 1 + msbfs.AGAIN_SOURCES))
    drop_memory_cache()
    ref = gp.apsp(g, sources=src, **SSD)
    drop_memory_cache()
    got = gp.apsp(g, sources=src, cache=CacheBudget(10**12), **SSD)
    np.testing.assert_array_equal(got.depths, ref.depths)
    read = lambda r: sum(s["bytes_read"] for s in r.supersteps)         # noqa: E731
    files = int(_file_bytes(g, "out").sum() + _file_bytes(g, "in").sum())
    # without the hint a later bottom-up level reads the in-lists again; with it, never
    assert read(got) <= files < read(ref)
    drop_memory_cache()


def test_msbfs_copies_in_only_heavy_levels_of_many_sources():
    """_again: a pass of fewer than AGAIN_SOURCES sources, or a level estimated to read less than
    AGAIN_SHARE of its direction's lists, copies nothing in on its first read."""
    from graphene_py.algos.msbfs import AGAIN_SHARE, AGAIN_SOURCES, _again
    cap = 1000
    assert _again(AGAIN_SOURCES, cap, cap) and _again(64, 10 * cap, cap)
    assert _again(AGAIN_SOURCES, AGAIN_SHARE * cap, cap)
    assert not _again(AGAIN_SOURCES - 1, cap, cap)
    assert not _again(64, AGAIN_SHARE * cap - 1, cap)
    assert not _again(64, 0, 0)


def test_a_file_larger_than_the_budget_is_held_in_part(directed):
    """A budget below the densest file's bytes caches that file in part: the blocks read twice
    first are copied in until the quota (whole pages) is used, later supersteps take them from
    RAM and read the rest, the held blocks never pass the quota, and the sums stay the same."""
    g = directed
    from graphene_py.algos.spmv import _always, _row_unweighted as _pull
    x = np.ones(g.num_vertices)
    with IoIterator(g, "out", **SSD) as it:
        rows = np.array([it.parts[i].row_hi - it.parts[i].row_lo + 1 for i in it.file_parts])
        f = int(np.argmax(it.part_nedges[it.file_part] / rows))
        size = int(it.file_bytes[f])
        y = np.zeros(g.num_vertices)
        read0 = it.run(_always, _pull, (x, y), Frontier.all(g.num_vertices))["bytes_read"]
        y0 = y
    quota = size // 2 // 4096 * 4096
    assert quota >= 4096
    budget = CacheBudget(quota + 100)
    with IoIterator(g, "out", cache=budget, **SSD) as it:
        assert it.cache_partial is not None and it.cache_partial[0] == f and not it.cached.sum() - 1
        got = []
        for _ in range(4):
            y = np.zeros(g.num_vertices)
            st = it.run(_always, _pull, (x, y), Frontier.all(g.num_vertices))
            np.testing.assert_allclose(y, y0)
            got.append((st["bytes_read"], st.get("bytes_cached", 0)))
        held = it.cache_held[0]
        held_bytes = int(sum(bin(int(w)).count("1") for w in held)) * it.block_size
        left = int(it.cache_partial[1][0])
    assert got[0] == got[1] == (read0, 0)             # read once, then read and copied in part
    for read, cached in got[2:]:
        assert 0 < cached <= quota and read + cached == read0
    assert 0 < held_bytes <= quota and 0 <= left < quota
    assert budget.left == budget.total and budget.used_max == quota


def test_densest_files_are_cached_first(directed):
    with IoIterator(directed, "out", cache=CacheBudget(10**12), **SSD) as it:
        assert not it.in_memory and it.cached.all()          # all fit: every file, read through
    with IoIterator(directed, "out", **SSD) as it:
        rows = np.array([it.parts[i].row_hi - it.parts[i].row_lo + 1 for i in it.file_parts])
        dens = it.part_nedges[it.file_part] / rows
        one = int(it.file_bytes[np.argmax(dens)])
    with IoIterator(directed, "out", cache=CacheBudget(one), **SSD) as it:
        assert it.cached.sum() == 1 and it.cached[np.argmax(dens)]


def _cli(*args):
    code = "from graphene_py.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def mid(tmp_path_factory):
    """200 k vertices, 12 M directed edges on a 2x2 grid: ~48 MB of adjacency, ~12 MB a file."""
    rng = np.random.default_rng(9)
    n, m = 200_000, 6_000_000
    tmp = tmp_path_factory.mktemp("cachecli")
    ds = partition_arrays(rng.integers(0, n, m), rng.integers(0, n, m), num_vertices=n,
                          disks=_disks(tmp, 4), name="mid", rows=2, cols=2, symmetrize=True,
                          register=False, durable=False)
    return ds


def test_cli_memory_budgets(mid):
    """Budgets just above the run's fixed needs (part of one file), with room for one file, and for all:
    the same answer, the engine line says which, the blocks held are not read again (every trial's
    BFS reads the same lists: the third copies them in, the fourth finds them), the peak stays
    within the budget."""
    path = mid.path
    # the run's own plan: its runtime is what its process holds before the graph (measured there)
    p = _cli("run", "bfs", "--src", "0", "-g", path, "--json", "--memory", "64G")
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)["memory"]["plan"]
    need = plan["memory_bytes"] - plan["cache_bytes"]
    fb = _file_bytes(mid, "out")
    MiB = 1 << 20
    ref = json.loads(_cli("run", "bfs", "--src", "0", "-g", path, "--json").stdout)
    for extra, engine in ((int(fb.min()) // 2, "of adjacency cached (read through; "),
                          (int(fb.max()) + int(fb.min()) // 2, "of adjacency cached"),
                          # the runtime is measured in each process (it varies by ~0.1-1 MiB):
                          # half a file of slack either way of each boundary
                          (int(fb.sum()) + int(fb.min()) // 2, "room for the whole graph")):
        memory = f"{-(-(need + extra) // MiB)}M"
        p = _cli("run", "bfs", "--src", "0", "-g", path, "--json", "--memory", memory, "-n", "4")
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        assert engine in d["engine"], (memory, d["engine"])
        assert d["result"]["n_reached"] == ref["result"]["n_reached"]
        plan = d["memory"]["plan"]
        assert plan["memory_bytes"] == int(memory[:-1]) * MiB
        assert d["memory"]["cached_bytes"] <= plan["cache_bytes"]
        assert d["peak_rss_mb"] <= int(memory[:-1]), (memory, d["peak_rss_mb"])
        tot = d["result"]["totals"]
        if "whole" in engine:
            assert tot["bytes_read"] == 0
        elif "cached" in engine:
            assert 0 < tot["bytes_read"] < ref["result"]["totals"]["bytes_read"]
            assert tot["bytes_cached"] > 0
        else:
            assert tot["bytes_cached"] == 0


def test_cli_memory_too_small_names_both_sizes(mid):
    p = _cli("run", "pagerank", "-g", mid.path, "--memory", "100M")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    msg = p.stderr.strip()
    assert msg.startswith("Error: --memory 100M (100 MiB) is less than this run needs")
    assert "200,000 vertices" in msg and "MiB" in msg.split("needs", 1)[1]
    p = _cli("run", "bfs", "-g", mid.path, "--memory", "1G", "--in-memory")
    assert p.returncode == 2 and "not both" in p.stderr
    for bad in ("lots", "1K", "0", "-5M"):        # not a size of at least 1M: a usage error
        p = _cli("run", "bfs", "-g", mid.path, "--memory", bad)
        assert p.returncode == 2 and f"'{bad}'" in p.stderr and "--memory" in p.stderr
        assert "Traceback" not in p.stderr
    p = _cli("run", "bfs", "-g", mid.path, "--memory", "1000T")   # runs, with a warning
    assert p.returncode == 0 and "more than the memory available now" in p.stderr


def test_naive_reference_agrees_under_partial_cache(directed):
    """Independent of the engine paths: BFS depths under a partial cache equal a serial BFS."""
    s, d = directed.edges("out")
    ref = naive.bfs_depths(directed.num_vertices, s, d, 1)
    fb = _file_bytes(directed, "out")
    r = gp.bfs(directed, src=1, cache=CacheBudget(int(fb.sum() // 2)), **SSD)
    assert np.array_equal(r.depth, ref)


def test_cli_msbfs_streams_depths_to_npy(mid, tmp_path):
    """`graphene run apsp -o x.npy` writes the depths rows straight into the .npy while it runs (not
    held in RAM: the memory block has no depths array) and leaves no temporary file; the content
    equals the in-RAM result saved as .npz."""
    npy, npz = tmp_path / "d.npy", tmp_path / "d.npz"
    p = _cli("run", "apsp", "--sources", "0,5,17", "-g", mid.path, "-o", npy, "--json", "-q")
    assert p.returncode == 0, p.stderr
    streamed = json.loads(p.stdout)["memory"]["arrays"]
    q = _cli("run", "apsp", "--sources", "0,5,17", "-g", mid.path, "-o", npz, "--json", "-q")
    assert q.returncode == 0, q.stderr
    held = json.loads(q.stdout)["memory"]["arrays"]
    assert "depths" not in streamed and held["depths"]["bytes"] == 3 * 4 * 200_000
    assert np.array_equal(np.load(npy), np.load(npz)["depths"])
    assert sorted(x.name for x in tmp_path.iterdir()) == ["d.npy", "d.npz"]


# ---------------------------------------------------------------------------------------------
# options the memory plan picks where the user left them out
def _plan(g, name, memory, opts=None, runtime=None, output=None):
    from graphene_py.algos import registry
    return registry.memory_plan(name, g, memory, {"threads": 2, **(runtime or {})}, opts or {},
                                output, runtime_bytes=100 << 20)


@pytest.mark.parametrize("name,default_per_vertex", [("kcore", 4), ("msbfs", 1)])
def test_plan_picks_kept_lists_before_the_cache(mid, name, default_per_vertex):
    from graphene_py.algos import registry
    n = mid.num_vertices
    opts = {"output": "x.npy"} if name == "msbfs" else {}
    out = "x.npy" if name == "msbfs" else None
    slots = registry.entry(name).keep[0] * n
    big = _plan(mid, name, "4G", opts, output=out)
    assert big["keep_edges"] == default_per_vertex * n          # the default budget, whole
    base = big["state_bytes_estimate"] - slots - 4 * default_per_vertex * n
    # just enough for the slots and n/2 IDs beside the least IO buffers (16 MiB): n/2 of them
    # kept, no cache left
    need = big["runtime_bytes"] + (16 << 20) + base
    mid_plan = _plan(mid, name, str(need + slots + 2 * n), opts, output=out)
    assert mid_plan["keep_edges"] == n // 2 and mid_plan["cache_bytes"] == 0
    assert mid_plan["io_buffer_bytes"] == 16 << 20
    # that budget beside the default buffers (64 MiB): the buffers shrink first, to 32 MiB
    # where that holds the whole default budget of IDs
    room = big["runtime_bytes"] + (64 << 20) + base + slots + 2 * n
    p = _plan(mid, name, str(room), opts, output=out)
    assert p["keep_edges"] == default_per_vertex * n and p["io_buffer_bytes"] == 32 << 20
    # ... but not for the user's buffers
    p = _plan(mid, name, str(room), opts, runtime={"buffer_mb": 64}, output=out)
    assert p["keep_edges"] == n // 2 and p["io_buffer_bytes"] == 64 << 20
    # below the slots and n/4 IDs: none kept (not even slots), the rest is cache
    small = _plan(mid, name, str(need + slots), opts, output=out)
    assert small["keep_edges"] == 0 and small["cache_bytes"] == slots
    assert small["state_bytes_estimate"] == base
    # the user's budget is kept and counted, never replaced
    given = _plan(mid, name, "4G", {**opts, "keep_edges": 7 * n}, output=out)
    assert "keep_edges" not in given
    assert given["state_bytes_estimate"] == base + slots + 4 * 7 * n
    assert given["memory_bytes"] - given["cache_bytes"] > big["memory_bytes"] - big["cache_bytes"]


@pytest.mark.parametrize("name", ["bfs", "wcc"])
def test_plan_estimate_covers_what_the_run_holds(mid, name):
    """The plan's O(|V|) estimate (no kept lists, no cache) is at least the state the run
    allocates and what its trial grows by, on a 2x2 grid (two columns of offsets, degree
    arrays): a plan below them would let a run under a memory cap be killed."""
    from graphene_py.algos import registry
    p = _cli("run", name, "-g", mid.path, "--json", "--memory", "none")
    assert p.returncode == 0, p.stderr
    m = json.loads(p.stdout)["memory"]
    est = registry.memory_plan(name, mid, "4G", {"threads": 2}, {"keep_edges": 0}, None,
                               runtime_bytes=100 << 20)["state_bytes_estimate"]
    n = mid.num_vertices
    assert est >= m["state_bytes"] and est >= m["trial_growth_bytes_per_vertex"] * n


def test_plan_counts_apsp_depths_only_when_kept(mid):
    """APSP's depths rows: 4 bytes per source and vertex while kept in RAM, no more sources than
    vertices (a larger --num-sources runs each vertex with out-edges once), none when only the
    counts are made (keep_depths False: no -o, no --verify) or written to a file."""
    n = mid.num_vertices
    est = (lambda opts, out=None: _plan(mid, "apsp", "1024G", opts, output=out)[
        "state_bytes_estimate"])
    none = est({"num_sources": 32, "keep_depths": False})
    assert est({"num_sources": 32}) == none + (4 * 32 + 8) * n
    assert est({"num_sources": 10 ** 8}) == none + (4 * n + 8) * n
    assert est({"num_sources": 10 ** 8, "keep_depths": False}) == none
    assert est({"num_sources": 32}, out="d.npy") == none


def test_plan_membership_keeps_no_lists(mid):
    p = _plan(mid, "kcore", "4G", {"k": 5, "membership_only": True})
    assert "keep_edges" not in p


def test_plan_shrinks_the_io_buffers_before_refusing(mid):
    from graphene_py.errors import GrapheneError
    MiB = 1 << 20
    big = _plan(mid, "bfs", "4G")
    assert big["io_buffer_bytes"] == 64 * MiB
    state = big["state_bytes_estimate"]
    p = _plan(mid, "bfs", str(big["runtime_bytes"] + state + 20 * MiB))
    assert p["io_buffer_bytes"] == 16 * MiB and p["cache_bytes"] == 4 * MiB
    p = _plan(mid, "bfs", str(big["runtime_bytes"] + state + 40 * MiB))
    assert p["io_buffer_bytes"] == 32 * MiB
    with pytest.raises(GrapheneError, match="less than this run needs"):
        _plan(mid, "bfs", str(big["runtime_bytes"] + state + 8 * MiB))
    with pytest.raises(GrapheneError, match="IO buffers 64 MiB"):       # the user's, kept
        _plan(mid, "bfs", str(big["runtime_bytes"] + state + 40 * MiB), runtime={"buffer_mb": 64})


def test_cli_memory_picks_kept_lists(mid):
    """The plan's picks reach the run: its result reports the kept-list budget the plan chose,
    and its IO pool is the plan's."""
    p = _cli("run", "kcore", "-g", mid.path, "--json", "--memory", "2G")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    plan = d["memory"]["plan"]
    assert plan["keep_edges"] == 4 * mid.num_vertices
    assert d["result"]["keep_edges"] == plan["keep_edges"]
    assert plan["io_buffer_bytes"] == 64 << 20
    ref = json.loads(_cli("run", "kcore", "-g", mid.path, "--json", "--keep-edges", "0").stdout)
    assert d["result"]["max_core"] == ref["result"]["max_core"]
    p = _cli("run", "kcore", "-g", mid.path, "--memory", "2G")
    assert "--memory 2G: IO buffers 64 MiB, 800,000 kept neighbour IDs" in p.stderr


def test_cli_memory_auto_and_none(mid):
    """`--memory auto` (the default) budgets half the memory available (the run's own choices
    stay at their defaults) and gives the same answer; `--memory none` is no cache."""
    ref = json.loads(_cli("run", "wcc", "-g", mid.path, "--json", "--memory", "none").stdout)
    assert "adjacency cache" not in ref["engine"] and ref["memory"].get("plan") is None
    dflt = json.loads(_cli("run", "wcc", "-g", mid.path, "--json").stdout)
    assert dflt["memory"]["plan"]["auto"] is True
    # --device auto that stays on the CPU (no GPU here) gets the CPU's defaults too: the cache
    # (it had none: every PageRank iteration read the lists again, 4x the time on the H200 box)
    au = json.loads(_cli("run", "wcc", "-g", mid.path, "--json", "--device", "auto").stdout)
    assert au["memory"]["plan"]["auto"] is True and au["memory"]["plan"]["cache_bytes"] > 0
    assert au["result"]["device_reason"].startswith("--device auto: no GPU")
    # where the run went and why, at the top (as the README shows); a plain CPU run gives no why
    assert au["device"] == "cpu" and au["device_reason"] == au["result"]["device_reason"]
    assert (dflt["device"], dflt["device_reason"]) == ("cpu", None)
    p = _cli("run", "wcc", "-g", mid.path, "--json", "--memory", "auto", "-n", "3")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    plan = d["memory"]["plan"]
    assert plan["auto"] is True and plan["cache_bytes"] > 0
    assert "io_buffer_bytes" in plan and "keep_edges" not in plan
    assert d["result"]["n_components"] == ref["result"]["n_components"]
    assert d["result"]["totals"]["bytes_cached"] > 0           # the third trial finds its blocks
    p = _cli("run", "wcc", "-g", mid.path, "--memory", "auto", "--in-memory")
    assert p.returncode == 2 and "not both" in p.stderr
    # BFS reads a block at most about twice: the default gives it no cache, a budget still does
    b = json.loads(_cli("run", "bfs", "-g", mid.path, "--json", "--src", "0").stdout)
    assert b["memory"].get("plan") is None and "adjacency cache" not in b["engine"]
    b = json.loads(_cli("run", "bfs", "-g", mid.path, "--json", "--src", "0", "--memory",
                        "4G").stdout)
    assert b["memory"]["plan"]["cache_bytes"] > 0


def _cli_room(room, *args):
    """`graphene run` in a process whose memory available (RAM, or a memory cgroup's room) is
    `room` bytes and whose runtime counts 300 MiB: the plan's numbers are then exact."""
    code = ("import sys; import graphene_py.iterator.memory as m, graphene_py.cli_run as c; "
            f"m.memory_available = lambda: {int(room)}; c._runtime_bytes = lambda: 300 << 20; "
            "from graphene_py.cli import main; main()")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def test_auto_memory_fits_the_defaults_to_the_room(mid):
    """`--memory auto` (the default) where the memory available cannot hold the run's defaults
    (a container's memory cgroup): the k-core decomposition keeps fewer lists, as `--memory`
    would pick them, says so, and gives the same answer; where not even the least fits the
    estimate, it warns and tries with no kept lists and 16 MiB buffers; with room, defaults."""
    from graphene_py.algos import registry
    rt = 300 << 20
    full = registry.memory_plan("kcore", mid, 1 << 40, {}, {}, None, runtime_bytes=rt)
    assert full["keep_edges"] == 4 * mid.num_vertices
    need = rt + full["io_buffer_bytes"] + full["state_bytes_estimate"]
    # (the plan shrinks the IO buffers to 16 MiB for kept lists first: 48 MiB less)
    room = need - 2 * mid.num_vertices * mid.id_width - (48 << 20)
    want = registry.memory_plan("kcore", mid, room, {}, {}, None, runtime_bytes=rt)["keep_edges"]
    assert mid.num_vertices // 4 < want < 4 * mid.num_vertices
    ref = json.loads(_cli("run", "kcore", "-g", mid.path, "--json").stdout)
    assert ref["result"]["keep_edges"] == 4 * mid.num_vertices
    p = _cli_room(room, "run", "kcore", "-g", mid.path, "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["result"]["keep_edges"] == want
    assert (f"do not hold this run's defaults: running with --buffer-mb 16, --keep-edges {want}"
            in p.stderr)
    assert d["result"]["max_core"] == ref["result"]["max_core"]
    p = _cli_room(rt, "run", "kcore", "-g", mid.path, "--json", "-o", mid.path + "/../kc.npz")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert "warning:" in p.stderr and "--buffer-mb 16, --keep-edges 0" in p.stderr
    assert d["result"]["keep_edges"] == 0 and d["memory"]["io_buffer_bytes"] == 16 << 20
    assert d["result"]["max_core"] == ref["result"]["max_core"]
    p = _cli_room(need + (64 << 20), "run", "kcore", "-g", mid.path, "--json")
    assert "defaults" not in p.stderr and "warning" not in p.stderr
    assert json.loads(p.stdout)["result"]["keep_edges"] == 4 * mid.num_vertices


def test_one_cache_per_direction_with_or_without_weights(directed):
    """The lists' cache of a direction without weights (what `graphene run`'s set-up opens) gives
    way to one with them (SSSP's run) and back: one entry per dataset and direction, so the
    stale one's memory (its huge pages) goes to the new one."""
    from graphene_py.iterator import session
    from graphene_py.iterator.memory import CacheBudget
    session._MEM_CACHE.clear()
    for weights in (False, True, False):
        with IoIterator(directed, "out", weights=weights, cache=CacheBudget(1 << 30), **SSD):
            pass
        keys = [k for k in session._MEM_CACHE if k[0] == directed.uuid and k[1] == "out"]
        assert len(keys) == 1 and keys[0][2] == weights, keys
    session._MEM_CACHE.clear()
