"""The small-graph path (graphene_py/algos/small.py: whole graph in RAM, numpy only) against the
naive references and against the engine, on every graph of tests/graphs.py, 1x1 and 2x3 grids,
directed with and without in-edge partitions and symmetrized; its damaged-data errors; and that a
`graphene run` on a small graph never imports numba."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from graphene_py.algos import bc as bc_mod, bfs, kcore, pagerank, registry, small
from graphene_py.errors import GrapheneError
from graphene_py.integrity import DamagedDataError
from graphene_py.partition import partition_arrays

from . import graphs, naive

ALPHA = 0.85
KINDS = ("in", "out", "sym")
_DATA = {}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("small_data"))


def dataset(root, gname, kind, grid):
    key = (gname, kind, grid)
    if key not in _DATA:
        # a chain of 300 levels: the engine's 5000-level runs are test_algos' and test_bfs' part
        tg = graphs.by_name(gname) if gname != "chain" else graphs.chain(300)
        disks = [os.path.join(root, f"d{i}") for i in range(2)]
        for d in disks:
            os.makedirs(d, exist_ok=True)
        src, dst, w = naive.clean_edges(tg.src, tg.dst, tg.weights, symmetrize=kind == "sym")
        g = partition_arrays(tg.src, tg.dst, weights=tg.weights if kind != "out" else None,
                             num_vertices=tg.n, disks=disks, name=f"s_{gname}_{kind}_{grid[0]}"
                             f"x{grid[1]}", rows=grid[0], cols=grid[1], symmetrize=kind == "sym",
                             in_edges=kind == "in", force=True, register=False)
        _DATA[key] = (g, tg.n, src, dst, w if kind != "out" else None)
    return _DATA[key]


def both(monkeypatch, name, g, **opts):
    """(small path's result, engine's result) of registry algorithm `name`."""
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", str(1 << 30))
    s = registry.dispatch(name, g, threads=2, **opts)
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", "0")
    e = registry.dispatch(name, g, threads=2, **opts)
    assert getattr(s, "small", False) and not getattr(e, "small", False)
    return s, e


# every graph and kind on one partition; a 2x3 grid (lists split over columns, rows over disks)
# with in-edge partitions
CASES = [(f.__name__, kind, (1, 1)) for f in graphs.ALL for kind in KINDS] + \
    [(f.__name__, "in", (2, 3)) for f in graphs.ALL]


@pytest.mark.parametrize("gname,kind,grid", CASES, ids=[f"{a}-{b}-{c[0]}x{c[1]}" for a, b, c in CASES])
def test_small_path_equals_references_and_engine(root, monkeypatch, gname, kind, grid):
    g, n, src, dst, w = dataset(root, gname, kind, grid)
    sym = kind == "sym"
    # BFS: depths equal the naive BFS's and the engine's; parents pass the independent check
    if n:
        deg = np.bincount(src, minlength=n)
        picks = {0, n - 1, int(np.argmax(deg))}
        for s in sorted(picks):
            rs, re = both(monkeypatch, "bfs", g, src=s)
            assert np.array_equal(rs.depth, naive.bfs_depths(n, src, dst, s))
            assert np.array_equal(rs.depth, re.depth)
            assert rs.parent.dtype == re.parent.dtype
            assert (rs.n_reached, rs.levels) == (re.n_reached, re.levels)
            assert bfs.verify(g, rs) == []
    # WCC: the smallest ID of each component; bfs_reached as the engine counts it
    rs, re = both(monkeypatch, "wcc", g)
    assert np.array_equal(rs.labels, naive.wcc_labels(n, src, dst))
    assert np.array_equal(rs.labels, re.labels) and rs.labels.dtype == re.labels.dtype
    assert (rs.n_components, rs.bfs_reached) == (re.n_components, re.bfs_reached)
    # SpMV with the dataset's weights
    rs, re = both(monkeypatch, "spmv", g, x="random")
    ref = naive.spmv(n, src, dst, w if w is not None else np.ones(len(src)), rs.x)
    assert np.allclose(rs.y, ref, rtol=1e-12, atol=1e-9) and np.allclose(rs.y, re.y)
    # PageRank, both names: the fixed point within the stop rule's bound
    if n:
        ref = naive.pagerank(n, src, dst, ALPHA)
        for name in ("pagerank", "pagerank-pull"):
            rs, _ = both(monkeypatch, name, g, tolerance=1e-9, max_iter=500)
            assert rs.error < 1e-9 and rs.converged and rs.variant == "pull"
            assert abs(rs.scores.sum() - 1) < 1e-12
            assert np.abs(rs.scores - ref).sum() <= ALPHA / (1 - ALPHA) * rs.error * 1.001 + 1e-12
            assert pagerank.verify(g, rs) == []
    # SSSP on the weighted kinds: Dijkstra's distances, the engine's buckets
    if n and w is not None:
        for s in sorted({0, n - 1, int(np.argmax(np.bincount(src, minlength=n)))}):
            rs, re = both(monkeypatch, "sssp", g, src=s, delta=64.0)
            assert np.array_equal(rs.dist, naive.dijkstra(n, src, dst, w, s))
            assert np.array_equal(rs.dist, re.dist) and rs.n_reached == re.n_reached
            assert rs.buckets == re.buckets
    # MS-BFS: every source's depths and closeness, as the engine's bit-parallel levels give them
    if n:
        srcs = sorted({0, n - 1, n // 2, int(np.argmax(np.bincount(src, minlength=n)))})
        rs, re = both(monkeypatch, "apsp", g, sources=srcs, closeness=True)
        assert np.array_equal(rs.depths, naive.msbfs_depths(n, src, dst, srcs))
        assert np.array_equal(rs.depths, re.depths) and np.array_equal(rs.reached, re.reached)
        assert np.allclose(rs.closeness, re.closeness, rtol=1e-12, atol=0)
    # betweenness: sampled (with endpoints) and exact on the smaller graphs, as the engine's
    if n:
        rs, re = both(monkeypatch, "bc", g, k=min(n, 5), seed=3, endpoints=True)
        assert np.array_equal(rs.sources, re.sources)
        assert np.allclose(rs.bc, re.bc, rtol=1e-9, atol=1e-12)
        if n <= 200:
            rs, re = both(monkeypatch, "bc", g, exact=True)
            assert np.allclose(rs.bc, re.bc, rtol=1e-9, atol=1e-12)
            assert bc_mod.verify(g, rs) == []
    # k-core: every core number, and membership for a few K
    rs, re = both(monkeypatch, "kcore", g)
    core = naive.core_numbers(n, src, dst, directed=not sym)
    assert np.array_equal(rs.core_number, core) and np.array_equal(rs.core_number, re.core_number)
    assert rs.max_core == re.max_core and kcore.verify(g, rs) == []
    for k in (0, 1, 2, 3, int(core.max()) if n else 0):
        rs, re = both(monkeypatch, "kcore", g, k=k, membership_only=True)
        assert np.array_equal(rs.in_k_core, core >= k)
        assert np.array_equal(rs.in_k_core, re.in_k_core) and rs.k_core_size == re.k_core_size


def test_only_small_graphs_and_the_cpu(root, monkeypatch):
    g, n, src, dst, _ = dataset(root, "uniform", "sym", (1, 1))
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", str(g.num_edges - 1))
    assert not small.eligible("bfs", g)
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", str(g.num_edges))
    assert small.eligible("bfs", g) and small.eligible("kcore", g)
    assert not small.eligible("bfs", g, "gpu") and small.eligible("sssp", g)
    # multi-source BFS: edges x sources within PAIRS_PER_EDGE_LIMIT x the limit (here: k sources)
    k = small.PAIRS_PER_EDGE_LIMIT
    assert small.eligible("apsp", g, opts={"sources": ",".join(map(str, range(k)))})
    assert small.eligible("msbfs", g, opts={"num_sources": k})
    assert not small.eligible("msbfs", g, opts={"num_sources": k + 1})
    assert not small.eligible("msbfs", g)                  # the default: 32 sources
    assert small.eligible("bc", g, opts={"k": k}) and not small.eligible("bc", g, opts={"k": k + 1})
    assert not small.eligible("bc", g, opts={"exact": True})          # every vertex a source
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", "lots")
    with pytest.raises(GrapheneError, match="GRAPHENE_SMALL_EDGES"):
        small.eligible("bfs", g)


def _damage(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.mark.parametrize("what", ["id", "offsets"])
def test_damaged_data_is_an_error(tmp_path, monkeypatch, what):
    tg = graphs.uniform()
    d = str(tmp_path / "d")
    os.makedirs(d)
    g = partition_arrays(tg.src, tg.dst, num_vertices=tg.n, disks=[d], name="dmg", force=True,
                         register=False)
    p = g.parts("out")[0]
    assert p._off is None
    p.checksums.clear()           # past the CRC32: the structural checks must catch it
    if what == "id":
        _damage(p.adj_path, 8 * p.id_width, np.array([tg.n + 5], dtype=f"<u{p.id_width}").tobytes())
    else:
        _damage(p.off_path, 8 * 10, np.array([1], dtype="<u8").tobytes())
    monkeypatch.setenv("GRAPHENE_SMALL_EDGES", str(1 << 30))
    with pytest.raises(DamagedDataError, match="outside this partition" if what == "id"
                       else "is below offset"):
        registry.dispatch("bfs", g, src=0)


_FRESH = """
import sys
from graphene_py import cli
sys.argv = ["graphene"] + sys.argv[1:]
code = 0
try:
    cli.main()
except SystemExit as e:
    code = e.code
print("NUMBA" if any(m.split(".")[0] in ("numba", "llvmlite") for m in sys.modules) else "NO-NUMBA")
sys.exit(code)
"""


def _fresh(*args):
    """`graphene ARGS` in a fresh interpreter: (exit code, stdout, stderr); stdout ends with
    whether numba or llvmlite was imported."""
    env = dict(os.environ, GRAPHENE_SMALL_EDGES=str(1 << 18))
    out = subprocess.run([sys.executable, "-c", _FRESH, *args], env=env, capture_output=True,
                         text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_cli_on_a_small_graph_never_imports_numba(tmp_path):
    """A fresh `graphene run` on a small graph: numpy only (numba's import is most of what such a
    command used to cost), the same answer as the engine, the notice says where it ran; and the
    numpy path's own checks catch a damaged file (clear error, exit 1)."""
    tg = graphs.uniform()
    d = str(tmp_path / "d")
    os.makedirs(d)
    g = partition_arrays(tg.src, tg.dst, num_vertices=tg.n, disks=[d], name="tiny", force=True)
    rc, out, err = _fresh("run", "bfs", "--graph", "tiny", "--src", "3", "-o",
                          str(tmp_path / "d.npz"))
    assert rc == 0, err
    assert out.strip().endswith("NO-NUMBA"), out
    assert "a small graph" in out
    got = np.load(tmp_path / "d.npz")
    src, dst, _ = naive.clean_edges(tg.src, tg.dst)
    assert np.array_equal(got["depth"], naive.bfs_depths(tg.n, src, dst, 3))


@pytest.mark.parametrize("branch", ["numpy", "kernels"])
def test_structural_checks_numpy_and_kernels_agree(tmp_path, monkeypatch, branch):
    """integrity's checks of a whole file in RAM: numpy while numba is not imported (the small
    path), the kernels otherwise; the same errors either way, at the first bad entry."""
    from graphene_py import integrity, jit
    tg = graphs.uniform()
    d = str(tmp_path / "d")
    os.makedirs(d)
    g = partition_arrays(tg.src, tg.dst, weights=tg.weights, num_vertices=tg.n, disks=[d],
                         name="chk", force=True, register=False)
    p = g.parts("out")[0]
    p.checksums.clear()           # past the CRC32s: the structure itself is checked
    monkeypatch.setitem(jit._MAT, "done", branch == "kernels")    # numba "not imported"
    off = np.fromfile(p.off_path, dtype="<u8")
    integrity.check_offsets(p, off)                      # intact: no error
    bad = off.copy()
    bad[10], bad[20] = bad[9] - 1, 0
    with pytest.raises(DamagedDataError, match=r"offset 10 \(.*\) is below offset 9 .*byte offset 80"):
        integrity.check_offsets(p, bad)
    adj = p.adjacency().copy()
    integrity.check_array(p, "adj", adj)
    adj[7], adj[30] = tg.n + 5, tg.n + 9
    with pytest.raises(DamagedDataError, match=f"neighbour ID {tg.n + 5} at byte offset "
                                               f"{7 * p.id_width} is outside"):
        integrity.check_array(p, "adj", adj)
    w = p.weights().copy()
    integrity.check_array(p, "wgt", w)
    w[11], w[40] = np.inf, np.nan
    with pytest.raises(DamagedDataError, match="weight inf at byte offset 44 is not a finite"):
        integrity.check_array(p, "wgt", w)


def test_sssp_buckets_at_a_width_that_does_not_divide_the_distances(tmp_path, monkeypatch):
    """delta 0.1 and a vertex at distance 1.0: 1.0 // 0.1 is 9, yet 10 * 0.1 is not above 1.0, so
    taking a bucket by `d < (b + 1) * delta` took nobody and looped for ever. Both paths number
    buckets by floor(d / delta) (the engine's bins); an alarm turns a hang into a failure."""
    import signal
    src = np.array([0, 1, 2, 0], dtype=np.int64)
    dst = np.array([1, 2, 3, 3], dtype=np.int64)
    w = np.array([1.0, 0.5, 0.3, 7.0], dtype=np.float32)
    d = tmp_path / "d"
    d.mkdir()
    g = partition_arrays(src, dst, weights=w, disks=[str(d)], name="tenth", register=False,
                         durable=False)

    def hang(*_):
        raise TimeoutError("SSSP did not finish")

    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(60)
    try:
        for delta in (0.1, 0.3, 1e-9):
            rs, re = both(monkeypatch, "sssp", g, src=0, delta=delta)
            want = naive.dijkstra(4, src, dst, w, 0)
            assert np.array_equal(rs.dist, want) and np.array_equal(re.dist, want)
            assert rs.buckets == re.buckets
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _threads_after_cli_import(env):
    code = ("import os, sys\nimport graphene_py\nbefore = 'numpy' in sys.modules\n"
            "from graphene_py import cli\nimport numpy\n"
            "print(before, os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    before, setting, tasks = out.stdout.split()
    return before, setting, int(tasks)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="counts the process's threads in /proc on a machine of 2+ cores")
def test_the_command_starts_no_blas_threads():
    """`import graphene_py` imports no numpy, so the CLI sets OpenBLAS to one thread before numpy
    loads: its process then has no thread but the main one (numpy's OpenBLAS otherwise starts one
    per further core, which spin through the command's start-up). A user's own setting stays."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    assert _threads_after_cli_import(env) == ("False", "1", 1)
    before, setting, tasks = _threads_after_cli_import(dict(env, OPENBLAS_NUM_THREADS="2"))
    assert (before, setting, tasks) == ("False", "2", 2)
