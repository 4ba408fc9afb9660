"""Partitioner: round trips against a naive reference, balance, external sort, atomicity, errors."""
from __future__ import annotations

import errno
import filecmp
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from graphene_py.errors import GrapheneError, InputFormatError
from graphene_py.graph import Graph
from graphene_py.partition import partition_arrays
from graphene_py.partition.partitioner import balanced_bounds, parse_size, partition
from graphene_py.partition import writer as writer_mod
from tests import graphs

GRIDS = [(1, 1), (2, 2), (3, 2)]


def reference(src, dst, w, symmetrize=False, drop_self_loops=True, drop_duplicates=True):
    """Naive: python tuples, sorted; of duplicates the smallest weight survives."""
    w = np.ones(len(src), np.float32) if w is None else w
    es = []
    for s, d, x in zip(src.tolist(), dst.tolist(), w.tolist()):
        if s == d:
            if not drop_self_loops:
                es.append((s, d, x))
            continue
        es.append((s, d, x))
        if symmetrize:
            es.append((d, s, x))
    es.sort()
    out = []
    for e in es:
        if drop_duplicates and out and out[-1][:2] == e[:2]:
            continue
        out.append(e)
    a = np.array(out, dtype=np.float64).reshape(-1, 3)
    return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.float32)


def make_disks(tmp_path, k, tag="d"):
    ds = []
    for i in range(k):
        p = tmp_path / f"{tag}{i}"
        p.mkdir(parents=True, exist_ok=True)
        ds.append(str(p))
    return ds


def check_graph(G, src, dst, w, n, weighted=True, **opts):
    rs, rd, rw = reference(src, dst, w if weighted else None, **opts)
    s, d = G.edges()
    assert G.num_vertices == n
    assert G.num_edges == len(rs)
    np.testing.assert_array_equal(s, rs)
    np.testing.assert_array_equal(d, rd)
    if weighted:
        _, _, ww = G.to_csr()
        np.testing.assert_array_equal(ww, rw)
    ptr32, d32, _ = G.to_csr(index_dtype=np.int32)      # the GPU path's load: 4-byte IDs
    assert d32.dtype == np.int32 and ptr32[-1] == len(rd)
    np.testing.assert_array_equal(d32, rd)
    assert G.verify() == []
    # every partition holds exactly the edges of its rectangle, sorted by (src, dst)
    for p in G.partitions:
        off = p.offsets().astype(np.int64)
        adj = np.asarray(p.adjacency(), dtype=np.int64)
        assert off[0] == 0 and off[-1] == p.num_edges == len(adj)
        assert np.all(np.diff(off) >= 0)
        if len(adj):
            assert adj.min() >= p.col_lo and adj.max() < p.col_hi
        assert os.path.getsize(p.adj_path) % 512 == 0
    return rs, rd, rw


# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gf", graphs.ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_round_trip_arrays(tmp_path, gf, grid):
    g = gf()
    disks = make_disks(tmp_path, 3)
    for sym in (False, True):
        G = partition_arrays(g.src, g.dst, weights=g.weights, num_vertices=g.n, disks=disks,
                             name="g", rows=grid[0], cols=grid[1], symmetrize=sym, force=True)
        assert G.num_rows == grid[0] and G.num_cols == grid[1]
        assert G.directed == (not sym) and G.weighted
        check_graph(G, g.src, g.dst, g.weights, g.n, symmetrize=sym)
        assert G.stats["input_edges"] == g.m
        assert G.stats["self_loops_dropped"] == int(np.sum(g.src == g.dst))


@pytest.mark.parametrize("gf", [graphs.duplicates, graphs.only_self_loops, graphs.uniform],
                         ids=lambda f: f.__name__)
def test_keep_loops_and_duplicates(tmp_path, gf):
    g = gf()
    disks = make_disks(tmp_path, 2)
    for loops, dups in ((False, False), (True, False), (False, True), (True, True)):
        for sym in (False, True):
            G = partition_arrays(g.src, g.dst, weights=g.weights, num_vertices=g.n, disks=disks,
                                 name="g", rows=2, cols=2, symmetrize=sym, force=True,
                                 drop_self_loops=not loops, drop_duplicates=not dups)
            rs, rd, rw = reference(g.src, g.dst, g.weights, symmetrize=sym,
                                   drop_self_loops=not loops, drop_duplicates=not dups)
            s, d = G.edges()
            np.testing.assert_array_equal(s, rs)
            np.testing.assert_array_equal(d, rd)
            _, _, ww = G.to_csr()
            # with duplicates kept, equal (src, dst) come sorted by weight
            np.testing.assert_array_equal(ww, rw)


@pytest.mark.parametrize("width", [4, 8])
def test_id_width_and_unweighted(tmp_path, width):
    g = graphs.isolated_ends()
    disks = make_disks(tmp_path, 1)
    G = partition_arrays(g.src, g.dst, num_vertices=g.n, disks=disks, name="g", id_width=width,
                         rows=2, cols=3)
    assert G.id_width == width and not G.weighted
    check_graph(G, g.src, g.dst, None, g.n, weighted=False)
    p = G.partitions[0]
    assert p.adjacency().dtype.itemsize == width


def test_default_num_vertices_and_grid(tmp_path):
    G = partition_arrays(np.array([0, 3]), np.array([3, 7]), disks=make_disks(tmp_path, 1), name="a")
    assert G.num_vertices == 8 and G.num_rows == 1 and G.num_cols == 1
    G = partition_arrays(np.array([], np.int64), np.array([], np.int64),
                         disks=make_disks(tmp_path, 4, "e"), name="b")
    assert G.num_vertices == 0 and G.num_edges == 0 and (G.num_rows, G.num_cols) == (2, 2)
    assert G.verify() == []


def test_in_edges(tmp_path):
    g = graphs.powerlaw()
    G = partition_arrays(g.src, g.dst, weights=g.weights, num_vertices=g.n,
                         disks=make_disks(tmp_path, 2), name="g", rows=3, cols=2, in_edges=True)
    rs, rd, rw = reference(g.src, g.dst, g.weights)
    s, d = G.edges("in")
    o = np.lexsort((rs, rd))
    np.testing.assert_array_equal(s, rd[o])
    np.testing.assert_array_equal(d, rs[o])
    _, _, win = G.to_csr("in")
    np.testing.assert_array_equal(win, rw[o])
    # the transposed graph has its own bounds, balanced by in-degree
    assert G.manifest["in"]["rows"] != G.manifest["out"]["rows"]
    indeg = np.bincount(rd, minlength=g.n)
    rows = G.manifest["in"]["rows"]
    for r in range(3):
        assert abs(indeg[rows[r]:rows[r + 1]].sum() - len(rs) / 3) <= indeg.max()


def test_undirected_in_edges_are_the_out_files(tmp_path):
    """-s with --in-edges: the in-partitions are the out-partitions' own files under the in-names
    (hard links; no second sort), every in-list equals the transpose's, the dataset verifies,
    and pull PageRank equals the one over the same edges stored as a directed dataset (whose
    in-partitions are sorted as a transpose)."""
    from graphene_py.algos import pagerank
    g = graphs.powerlaw()
    disks = make_disks(tmp_path, 2)
    G = partition_arrays(g.src, g.dst, weights=g.weights, num_vertices=g.n, disks=disks,
                         name="u", rows=3, cols=2, symmetrize=True, in_edges=True)
    s, d = G.edges("in")
    t, u = G.edges("out")
    o = np.lexsort((t, u))                 # the transpose, sorted as the in-lists are
    np.testing.assert_array_equal(s, u[o])
    np.testing.assert_array_equal(d, t[o])
    np.testing.assert_array_equal(G.to_csr("in")[2], G.to_csr("out")[2][o])
    assert G.manifest["in"]["rows"] == G.manifest["out"]["rows"]
    for pi, po in zip(G.parts("in"), G.parts("out")):
        for a, b in ((pi.adj_path, po.adj_path), (pi.off_path, po.off_path),
                     (pi.wgt_path, po.wgt_path)):
            assert a != b and os.path.samefile(a, b)
    assert G.verify() == []
    mem = pagerank.run(G, variant="pull", in_memory=True, threads=2).scores
    directed = partition_arrays(np.concatenate([g.src, g.dst]), np.concatenate([g.dst, g.src]),
                                weights=np.concatenate([g.weights, g.weights]), num_vertices=g.n,
                                disks=make_disks(tmp_path, 1, "d"), name="d", in_edges=True)
    ref = pagerank.run(directed, variant="pull", in_memory=True, threads=2).scores
    # float32's rounding apart: the undirected dataset's PageRank rounds y = p / degree, the
    # directed one's the contributions only (its scores stay float64)
    np.testing.assert_allclose(mem, ref, rtol=1e-6, atol=1e-15)


def test_bad_arrays(tmp_path):
    disks = make_disks(tmp_path, 1)
    with pytest.raises(GrapheneError, match="negative"):
        partition_arrays(np.array([0, -1]), np.array([1, 2]), disks=disks, name="x")
    with pytest.raises(GrapheneError, match="num_vertices"):
        partition_arrays(np.array([0, 5]), np.array([1, 2]), num_vertices=3, disks=disks, name="x")
    with pytest.raises(GrapheneError, match="equal length"):
        partition_arrays(np.array([0, 5]), np.array([1]), disks=disks, name="x")
    assert os.listdir(disks[0]) == []


# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
def test_balanced_bounds_nearest(seed):
    """Every bound is a vertex whose edge prefix is nearest (brute force over all vertices) to
    j*|E|/k; bounds are non-decreasing from 0 to n; no edges -> an even split of the vertices."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    deg = rng.integers(0, 6, n) * (rng.random(n) < 0.7)
    if n and seed % 3 == 0:
        deg[rng.integers(0, n)] = 100          # a hub
    cum = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    total = int(cum[-1])
    for k in (1, 2, 3, 5):
        b = balanced_bounds(cum, k)
        assert len(b) == k + 1 and b[0] == 0 and b[-1] == n
        assert all(x <= y for x, y in zip(b, b[1:]))
        for j in range(1, k):
            if total == 0:
                assert b[j] == j * n // k
                continue
            best = min(abs(k * int(c) - j * total) for c in cum)
            assert abs(k * int(cum[b[j]]) - j * total) == best, (deg, k, j, b)
            # hence within half an adjacency list of the ideal
            assert abs(k * int(cum[b[j]]) - j * total) <= k * deg.max() / 2


def test_balance_powerlaw(tmp_path):
    """Row-column balanced split on a Kronecker graph: every row within one adjacency list (max
    out-degree) of |E|/R, every partition within one list (max in-degree in its row) of its row's
    |E_r|/C."""
    g = graphs.powerlaw(scale=13, edge_factor=16)
    R, C = 3, 4
    G = partition_arrays(g.src, g.dst, num_vertices=g.n, disks=make_disks(tmp_path, 4), name="k",
                         rows=R, cols=C)
    s, d = G.edges()
    m = len(s)
    outdeg = np.bincount(s, minlength=g.n)
    rows = G.rows
    counts = {(p.row, p.col): p.num_edges for p in G.partitions}
    for r in range(R):
        row_m = outdeg[rows[r]:rows[r + 1]].sum()
        assert abs(row_m - m / R) <= outdeg.max()
        assert sum(counts[(r, c)] for c in range(C)) == row_m
        sel = (s >= rows[r]) & (s < rows[r + 1])
        indeg_r = np.bincount(d[sel], minlength=g.n)
        for c in range(C):
            assert abs(counts[(r, c)] - row_m / C) <= indeg_r.max(), (r, c)
            assert abs(counts[(r, c)] - m / (R * C)) <= outdeg.max() / C + indeg_r.max()
    # plain 2D (equal vertex ranges) would be far worse on this graph; ours is close to 1
    assert G.summary()["imbalance"] < 1.25
    # bytes per disk: greedy largest-first keeps the spread within the largest partition
    per_disk = G.summary()["bytes_per_disk"]
    sizes = [sum(os.path.getsize(path) for _, path in p.files()) for p in G.partitions]
    # (the short-list file, partition/short.py, goes to the disk least filled by then)
    ent = G.manifest["short"]["out"]
    before = list(per_disk)
    before[ent["disk"]] -= ent["bytes"]
    assert before[ent["disk"]] == min(before)
    assert max(before) - min(before) <= max(sizes) + 4096


# ----------------------------------------------------------------------------------------------
FORMATS = ["el", "wel", "mtx", "bin32", "bin64", "wbin32", "wbin64"]
SUFFIX = {"el": ".el", "wel": ".wel", "mtx": ".mtx", "bin32": ".bin32", "bin64": ".bin64",
          "wbin32": ".wbin32", "wbin64": ".wbin64"}
WEIGHTED = {"wel", "wbin32", "wbin64"}


def write_input(tmp_path, g, fmt, gz=False, weights=None):
    from graphene_py.partition.edgelists import write_edges
    path = tmp_path / f"in{SUFFIX[fmt]}{'.gz' if gz else ''}"
    w = g.weights if (fmt in WEIGHTED or (fmt == "mtx" and weights)) else None
    write_edges(str(path), g.src, g.dst, w, fmt=fmt, num_vertices=g.n)
    return str(path), w


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("gname", ["star", "duplicates", "isolated_ends", "empty", "one_vertex"])
def test_round_trip_formats(tmp_path, fmt, gname):
    g = graphs.by_name(gname)
    path, w = write_input(tmp_path, g, fmt, gz=(gname == "duplicates"))
    disks = make_disks(tmp_path, 2)
    if g.m == 0 and (fmt != "mtx" or g.n == 0):
        # no edges and no header to say otherwise: an error, nothing written (an MTX header that
        # declares vertices and no entries is a graph)
        with pytest.raises(GrapheneError, match="no edges"):
            partition(path, disks, name="g", rows=3, cols=2, quiet=True)
        assert all(os.listdir(d) == [] for d in disks)
        return
    G = partition(path, disks, name="g", rows=3, cols=2, quiet=True)
    # the vertex count survives only where the format can say it (MTX header)
    n = g.n if fmt == "mtx" else (int(max(g.src.max(), g.dst.max())) + 1 if g.m else 0)
    check_graph(G, g.src, g.dst, w, n, weighted=w is not None)
    assert G.stats["input_edges"] == g.m
    assert G.manifest["input"]["format"] == fmt


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("width", [4, 8])
def test_formats_grids_widths(tmp_path, fmt, grid, width):
    g = graphs.powerlaw(scale=10, edge_factor=8)
    path, w = write_input(tmp_path, g, fmt)
    G = partition(path, make_disks(tmp_path, 3), name="g", rows=grid[0], cols=grid[1], quiet=True,
                  id_width=width, symmetrize=(width == 8))
    assert G.id_width == width
    n = g.n if fmt == "mtx" else int(max(g.src.max(), g.dst.max())) + 1
    check_graph(G, g.src, g.dst, w, n, weighted=w is not None, symmetrize=(width == 8))


def test_mtx_header_isolated_max_id_and_symmetric(tmp_path):
    p = tmp_path / "s.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real symmetric\n% c\n10 10 3\n2 1 5\n3 2 1.5\n"
                 "4 4 2\n")
    G = partition(str(p), make_disks(tmp_path, 1), name="s", quiet=True)
    assert G.num_vertices == 10 and not G.directed and G.weighted
    s, d = G.edges()
    assert list(zip(s.tolist(), d.tolist())) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    assert G.stats["self_loops_dropped"] == 1
    assert G.degrees()[9] == 0


def test_default_name_and_register(tmp_path):
    from graphene_py import registry
    g = graphs.one_edge()
    path, _ = write_input(tmp_path, g, "el", gz=True)
    G = partition(path, make_disks(tmp_path, 1), quiet=True)
    assert G.name == "in"
    assert registry.lookup("in") == G.path == os.path.join(G.disks[0], "in")


def test_relabel(tmp_path):
    p = tmp_path / "sparse.el"
    src = [10 ** 12, 5, 7, 10 ** 12, 99]
    dst = [5, 10 ** 12, 99, 7, 99]
    p.write_text("".join(f"{a}\t{b}\n" for a, b in zip(src, dst)))
    G = partition(str(p), make_disks(tmp_path, 2), name="r", relabel=True, quiet=True, rows=2,
                  cols=2)
    rel = np.asarray(G.relabel_map())
    np.testing.assert_array_equal(rel, [5, 7, 99, 10 ** 12])
    assert G.num_vertices == 4 and G.id_width == 4
    s, d = G.edges()
    got = sorted(zip(rel[s].tolist(), rel[d].tolist()))
    want = sorted({(a, b) for a, b in zip(src, dst) if a != b})
    assert got == want
    assert os.path.exists(os.path.join(G.dirs[0], "relabel.npy"))


def test_id_width_4_too_big_is_file_line_error(tmp_path):
    p = tmp_path / "big.el"
    p.write_text("0 1\n1 2\n2 4294967296\n")
    disks = make_disks(tmp_path, 1)
    with pytest.raises(InputFormatError) as e:
        partition(str(p), disks, name="b", id_width=4, quiet=True)
    assert str(e.value).startswith(f"{p}:3:")
    assert os.listdir(disks[0]) == []
    # without --id-width: ID 2^32 means 2^32+1 vertices; their O(|V|) arrays exceed the limit ->
    # a clean error suggesting --relabel, nothing written (1 GB of working memory whatever this
    # test process already holds)
    with pytest.raises(GrapheneError, match="--relabel"):
        partition(str(p), disks, name="b", quiet=True, work_memory="1G")
    from graphene_py.partition.partitioner import rss_bytes
    with pytest.raises(GrapheneError, match="--relabel"):
        partition(str(p), disks, name="b", quiet=True,
                  memory_limit=str(rss_bytes() + (64 << 20) + (1 << 30)))
    assert os.listdir(disks[0]) == []
    G = partition(str(p), disks, name="b", quiet=True, relabel=True, id_width=4)
    assert G.num_vertices == 4 and G.num_edges == 3
    assert np.asarray(G.relabel_map())[-1] == 4294967296


# ----------------------------------------------------------------------------------------------
def _files_equal(a: Graph, b: Graph):
    ma, mb = dict(a.manifest), dict(b.manifest)
    for k in ("created", "uuid", "options", "disks", "input", "name", "manifest_crc"):
        ma.pop(k), mb.pop(k)
    assert ma == mb
    fa = sorted(path for _, _, path in a.all_files())
    fb = sorted(path for _, _, path in b.all_files())
    assert [os.path.basename(x) for x in fa] == [os.path.basename(x) for x in fb]
    for x, y in zip(fa, fb):
        assert filecmp.cmp(x, y, shallow=False), x


@pytest.mark.parametrize("grid", [(3, 2, 2), (1, 1, 1)])
@pytest.mark.parametrize("sym", [False, True])
def test_external_sort_identical(tmp_path, sym, grid, monkeypatch):
    """Edges spilled to bucket files and sorted bucket by bucket give the files of the in-memory
    sort; on one partition (1x1, and undirected with its in-edges) the sorted buckets are written
    as they go (extsort.BucketStore), a grid writes them to one merged file first."""
    from graphene_py.partition import extsort
    g = graphs.powerlaw(scale=14, edge_factor=8)
    path, _ = write_input(tmp_path, g, "wel")
    R, C, k = grid
    merged = []
    spill = extsort.spill_blocks
    monkeypatch.setattr(extsort, "spill_blocks",
                        lambda *a, **kw: merged.append(1) or spill(*a, **kw))
    a = partition(path, make_disks(tmp_path, k, "a"), name="a", rows=R, cols=C, symmetrize=sym,
                  in_edges=True, quiet=True)
    b = partition(path, make_disks(tmp_path, k, "b"), name="b", rows=R, cols=C, symmetrize=sym,
                  in_edges=True, quiet=True, work_memory="1M")
    assert a.manifest["options"]["spilled_runs"] == 0
    assert b.manifest["options"]["spilled_runs"] >= 4
    # a merged file is written for a grid (per direction), and on 1x1 only for the out-edges
    # of a directed graph (its in-edges are their transposition)
    assert len(merged) == (1 if sym else 2) - ((R, C) == (1, 1))
    _files_equal(a, b)
    check_graph(b, g.src, g.dst, g.weights, g.n, symmetrize=sym)
    # no spill files left behind
    for d, v in zip(b.disks, b.dirs):
        assert sorted(os.listdir(d)) == ["b"]
        assert not any(f.startswith(".") for f in os.listdir(v))


def test_parse_size():
    assert parse_size("4G") == 4 << 30
    assert parse_size("512M") == 512 << 20
    assert parse_size("1.5g") == int(1.5 * (1 << 30))
    assert parse_size(2 << 20) == 2 << 20
    for bad in ("lots", "4Q", "-1G", "10"):
        with pytest.raises(GrapheneError):
            parse_size(bad)


# ----------------------------------------------------------------------------------------------
def test_existing_dataset_error_before_reading(tmp_path):
    g = graphs.one_edge()
    disks = make_disks(tmp_path, 2)
    G = partition_arrays(g.src, g.dst, disks=disks, name="x")
    bad = tmp_path / "bad.el"
    bad.write_text("0 1\nnot an edge\n")
    with pytest.raises(GrapheneError, match="already exists"):
        partition(str(bad), disks, name="x", quiet=True)
    with pytest.raises(InputFormatError, match=r"bad\.el:2:"):
        partition(str(bad), disks, name="x", quiet=True, force=True)
    # the failed --force run left the old dataset untouched and nothing else
    assert Graph.open(G.dirs[0]).uuid == G.uuid
    for d in disks:
        assert os.listdir(d) == ["x"]


def test_missing_or_unwritable_disk(tmp_path):
    g = graphs.one_edge()
    ok = make_disks(tmp_path, 1)
    with pytest.raises(GrapheneError, match="does not exist"):
        partition_arrays(g.src, g.dst, disks=ok + [str(tmp_path / "nope")], name="x")
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(GrapheneError, match="not a folder"):
        partition_arrays(g.src, g.dst, disks=ok + [str(f)], name="x")
    assert os.listdir(ok[0]) == []


def test_force_replaces(tmp_path):
    g = graphs.uniform()
    disks = make_disks(tmp_path, 2)
    a = partition_arrays(g.src, g.dst, disks=disks, name="x")
    b = partition_arrays(g.src[:10], g.dst[:10], disks=disks, name="x", force=True, rows=1, cols=1)
    assert a.uuid != b.uuid and Graph.open("x").num_edges == b.num_edges
    for d in disks:
        assert os.listdir(d) == ["x"]


def test_disk_full_is_clean(tmp_path, monkeypatch):
    g = graphs.uniform()
    disks = make_disks(tmp_path, 2)
    real = writer_mod.PartFile.write
    calls = {"n": 0}

    def full(self, arr):
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError(errno.ENOSPC, "No space left on device", self.path)
        return real(self, arr)

    monkeypatch.setattr(writer_mod.PartFile, "write", full)
    with pytest.raises(GrapheneError, match="disk full") as e:
        partition_arrays(g.src, g.dst, disks=disks, name="x", rows=2, cols=2)
    assert any(d in str(e.value) for d in disks)
    for d in disks:
        assert os.listdir(d) == []


# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_batcher_runs_merge_equals_in_memory(tmp_path, seed, weighted):
    """Many tiny runs (cap 1024 edges) whose vertex ranges grow run by run (later runs see larger
    IDs) merge to exactly the in-memory CSR, with weights, symmetrize, loops and duplicates."""
    from graphene_py.partition import extsort
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2000, 9000))
    n = int(rng.integers(50, 3000))
    src = np.sort(rng.integers(0, n, m))          # IDs grow through the input
    dst = rng.integers(0, n, m)
    dup = rng.integers(0, m, m // 5)
    src = np.concatenate([src, src[dup]])
    dst = np.concatenate([dst, dst[dup]])
    w = rng.integers(1, 9, len(src)).astype(np.float32) if weighted else None
    sym, loops, dedupe = bool(seed % 2), seed % 3 == 0, seed != 4
    ref = extsort.sort_to_csr(src, dst, w, n, symmetrize=sym, drop_self_loops=not loops,
                              dedupe=dedupe)
    spill = tmp_path / "spill"
    spill.mkdir()
    b = extsort.Batcher(1024, weighted, lambda: [str(spill)], symmetrize=sym,
                        drop_self_loops=not loops, dedupe=dedupe, merge_budget=700)
    for i in range(0, len(src), 333):
        b.add(src[i:i + 333], dst[i:i + 333], w[i:i + 333] if weighted else None)
    store = b.finish(n)
    assert b.spilled_runs >= 2 and isinstance(store, extsort.SpilledCSR)
    np.testing.assert_array_equal(store.indptr, ref[0])
    idx, ww = store.get(0, n)
    np.testing.assert_array_equal(idx, ref[1])
    if weighted:
        np.testing.assert_array_equal(ww, ref[2])
    else:
        assert ww is None and ref[2] is None
    assert b.loops == ref[3]
    wr = w if weighted else np.ones(len(src), dtype=np.float32)
    rs, rd, rw = reference(src, dst, wr, symmetrize=sym, drop_self_loops=not loops,
                           drop_duplicates=dedupe)
    np.testing.assert_array_equal(np.repeat(np.arange(n), np.diff(ref[0])), rs)
    np.testing.assert_array_equal(ref[1], rd)
    if weighted:
        np.testing.assert_array_equal(ref[2], rw)
    store.close()
    assert os.listdir(spill) == []


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_batcher_buckets_equal_in_memory(tmp_path, seed, weighted, stream, monkeypatch):
    """Past one batch, edges go to bucket files by source range and are sorted bucket by bucket
    (extsort.BucketSorter): exactly the in-memory CSR, with weights, symmetrize, loops and
    duplicates, whether read as blocks (a 1x1 dataset) or as one merged file (a grid); a hub's
    bucket larger than a bucket's sort may hold goes through runs of its own; every vertex is
    in one block, in order, and no file is left."""
    from graphene_py.partition import extsort
    rng = np.random.default_rng(seed)
    m = int(rng.integers(3000, 9000))
    n = int(rng.integers(300, 3000))
    hub = int(rng.integers(0, n))
    big = 20_000                        # the hub's edges: more than one bucket's sort holds
    src = np.concatenate([rng.integers(0, n, m), np.full(big, hub)])
    dst = np.concatenate([rng.integers(0, n, m), rng.integers(0, n, big)])
    dup = rng.integers(0, len(src), len(src) // 5)
    src = np.concatenate([src, src[dup]])
    dst = np.concatenate([dst, dst[dup]])
    order = rng.permutation(len(src))
    src, dst = src[order], dst[order]
    w = rng.integers(1, 9, len(src)).astype(np.float32) if weighted else None
    sym, loops, dedupe = bool(seed % 2), seed % 3 == 0, seed != 2
    ref = extsort.sort_to_csr(src, dst, w, n, symmetrize=sym, drop_self_loops=not loops,
                              dedupe=dedupe)
    large = []
    sort_large = extsort.BucketSorter._sort_large
    monkeypatch.setattr(extsort.BucketSorter, "_sort_large",
                        lambda self, *a: large.append(1) or sort_large(self, *a))
    spill = tmp_path / "spill"
    spill.mkdir()
    cap = 1 << 14                       # edges one bucket's sort may hold (the least)
    b = extsort.Batcher(1024, weighted, lambda: [str(spill)], symmetrize=sym,
                        drop_self_loops=not loops, dedupe=dedupe, merge_budget=700,
                        sort_bytes=16 * n + extsort.BYTES_PER_EDGE_SORT * cap)
    b.expected_input = len(src) if seed < 2 else None
    for i in range(0, len(src), 2000):
        b.add(src[i:i + 2000], dst[i:i + 2000], w[i:i + 2000] if weighted else None)
    store = b.finish(n, stream=stream)
    assert b.buckets is not None and b.spilled_runs >= 1
    if stream:
        assert isinstance(store, extsort.BucketStore)
        ptr, idx, ww, at = [np.zeros(1, np.int64)], [], [], 0
        for v0, v1, lp, i_, w_ in store.blocks():
            assert v0 == at and v1 > v0 and len(lp) == v1 - v0 + 1 and lp[0] == 0
            at = v1
            ptr.append(ptr[-1][-1] + lp[1:])
            idx.append(np.array(i_))
            ww.append(None if w_ is None else np.array(w_))
        assert at == n and store.m == ref[1].size
        indptr, idx = np.concatenate(ptr), np.concatenate(idx)
        ww = np.concatenate(ww) if weighted else None
    else:
        assert isinstance(store, extsort.SpilledCSR)
        indptr = store.indptr
        idx, ww = store.get(0, n)
    np.testing.assert_array_equal(indptr, ref[0])
    np.testing.assert_array_equal(idx, ref[1])
    assert idx.dtype == ref[1].dtype
    if weighted:
        np.testing.assert_array_equal(ww, ref[2])
    else:
        assert ww is None and ref[2] is None
    assert b.loops == ref[3] and large
    store.close()
    assert os.listdir(spill) == []


from hypothesis import given, settings, HealthCheck, strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_round_trip_hypothesis(tmp_path_factory, data):
    n = data.draw(st.integers(1, 40))
    m = data.draw(st.integers(0, 120))
    src = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    dst = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m)), np.int64)
    w = np.array(data.draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, 255.0]), min_size=m,
                                    max_size=m)), np.float32)
    R, C = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    sym, loops, dups = data.draw(st.booleans()), data.draw(st.booleans()), data.draw(st.booleans())
    extra = data.draw(st.integers(0, 3))
    disks = make_disks(tmp_path_factory.mktemp("h"), data.draw(st.integers(1, 3)))
    G = partition_arrays(src, dst, weights=w, num_vertices=n + extra, disks=disks, name="h",
                         rows=R, cols=C, symmetrize=sym, drop_self_loops=not loops,
                         drop_duplicates=not dups, in_edges=True, id_width=data.draw(
                             st.sampled_from([None, 4, 8])), register=False)
    rs, rd, rw = reference(src, dst, w, symmetrize=sym, drop_self_loops=not loops,
                           drop_duplicates=not dups)
    s, d = G.edges()
    np.testing.assert_array_equal(s, rs)
    np.testing.assert_array_equal(d, rd)
    np.testing.assert_array_equal(G.to_csr()[2], rw)
    si, di = G.edges("in")
    o = np.lexsort((rs, rd))
    np.testing.assert_array_equal(si, rd[o])
    np.testing.assert_array_equal(di, rs[o])
    assert G.num_vertices == n + extra and G.verify() == []


def test_relabel_dense_and_sparse_paths_agree(tmp_path):
    """IDs up to ~200k: the default limit maps them through a dense table, a 1M limit (65,536 IDs
    of table) through binary search; both give the same dataset, and the map is the sorted IDs."""
    rng = np.random.default_rng(5)
    ids = np.unique(rng.integers(0, 200_000, 3000))
    src = rng.choice(ids, 20_000)
    dst = rng.choice(ids, 20_000)
    # the first 8000 edges use only IDs < 60,000: the 1M run starts dense and switches mid-way
    low = ids[ids < 60_000]
    src[:8000], dst[:8000] = rng.choice(low, 8000), rng.choice(low, 8000)
    p = tmp_path / "sp.el"
    p.write_text("".join(f"{a} {b}\n" for a, b in zip(src, dst)))
    a = partition(str(p), make_disks(tmp_path, 2, "a"), name="a", relabel=True, quiet=True)
    b = partition(str(p), make_disks(tmp_path, 2, "b"), name="b", relabel=True, quiet=True,
                  work_memory="1M")
    used = np.unique(np.concatenate([src, dst]))
    np.testing.assert_array_equal(np.asarray(a.relabel_map()), used)
    _files_equal(a, b)
    np.testing.assert_array_equal(np.asarray(a.relabel_map()), np.asarray(b.relabel_map()))
    s, d = a.edges()
    rel = np.asarray(a.relabel_map())
    rs, rd, _ = reference(src, dst, None)
    np.testing.assert_array_equal(rel[s], rs)
    np.testing.assert_array_equal(rel[d], rd)


def _kernels_loaded(tmp_path):
    """One partition first, so that the sort's kernels are loaded (and the process's RSS has
    grown by them) before a test derives a limit from the RSS: alone, the test's first partition
    would load them inside the limit it measured."""
    p = tmp_path / "warm.el"
    p.write_text("0 1\n1 2\n")
    (tmp_path / "warm").mkdir()
    partition(str(p), [str(tmp_path / "warm")], name="warm", quiet=True, register=False,
              symmetrize=True)


def test_memory_limit_counts_the_process_and_refuses_too_small(tmp_path):
    """--memory-limit bounds the whole process: a limit below what the process already holds, or one
    that leaves too little for the per-vertex arrays, fails with the size it needs and writes
    nothing; a sufficient one works and records the working memory it derived."""
    from graphene_py.partition.partitioner import BYTES_PER_VERTEX, rss_bytes
    p = tmp_path / "g.el"
    p.write_text("0 1\n1 2\n2 0\n")
    disk = tmp_path / "d"
    disk.mkdir()
    with pytest.raises(GrapheneError, match="too small: this process itself needs"):
        partition(str(p), [str(disk)], name="tiny", quiet=True, memory_limit="2M", register=False)
    _kernels_loaded(tmp_path)
    big = tmp_path / "big.el"
    n = 600_000                                   # 600k vertices x 48 B = 28.8 MB of arrays
    big.write_text(f"0 {n - 1}\n")
    limit = rss_bytes() + (64 << 20) + (20 << 20)     # leaves 20 MiB of working memory
    with pytest.raises(GrapheneError, match="per-vertex arrays while sorting"):
        partition(str(big), [str(disk)], name="big", quiet=True, memory_limit=str(limit),
                  register=False)
    assert os.listdir(disk) == []
    g = partition(str(big), [str(disk)], name="big", quiet=True,
                  memory_limit=str(limit + BYTES_PER_VERTEX * n), register=False)
    assert g.num_vertices == n and g.num_edges == 1



def test_default_memory_limit_grows_for_the_vertices(tmp_path, monkeypatch):
    """The default limit (config.PARTITION_MEMORY) grows when the per-vertex arrays need more
    (up to the fraction of RAM), where the same size given as --memory-limit refuses; the grown
    limit is what the manifest records."""
    from graphene_py import config
    from graphene_py.partition.partitioner import BYTES_PER_VERTEX, rss_bytes
    n = 600_000                                   # 600k vertices x 48 B = 28.8 MB of arrays
    big = tmp_path / "big.el"
    big.write_text(f"0 {n - 1}\n5 7\n7 5\n")
    disk = tmp_path / "d"
    disk.mkdir()
    _kernels_loaded(tmp_path)
    small = rss_bytes() + (64 << 20) + (20 << 20)    # 20 MiB of working memory
    monkeypatch.setattr(config, "PARTITION_MEMORY", small)
    g = partition(str(big), [str(disk)], name="big", quiet=True, register=False)
    assert g.num_vertices == n and g.num_edges == 3
    got = g.manifest["options"]["memory_limit"]
    assert BYTES_PER_VERTEX * n <= got <= BYTES_PER_VERTEX * n * 5 // 4 + (16 << 20)
    with pytest.raises(GrapheneError, match="per-vertex arrays while sorting"):
        partition(str(big), [str(disk)], name="big2", quiet=True, memory_limit=str(small),
                  register=False)
    # a default that needs no growth keeps its size (the 1 GiB, less what the process holds)
    monkeypatch.setattr(config, "PARTITION_MEMORY", small + (200 << 20))
    g = partition(str(big), [str(disk)], name="big3", quiet=True, register=False)
    assert abs(g.manifest["options"]["memory_limit"] - (200 << 20) - (20 << 20)) < (64 << 20)
    # the ceiling stays: a fraction of RAM too small for the vertices still refuses
    monkeypatch.setattr(config, "PARTITION_MEMORY", small)
    monkeypatch.setattr(config, "MEMORY_LIMIT_FRACTION",
                        (small + (8 << 20)) / __import__("psutil").virtual_memory().total)
    with pytest.raises(GrapheneError, match="per-vertex arrays while sorting"):
        partition(str(big), [str(disk)], name="big4", quiet=True, register=False)

@pytest.mark.parametrize("top", [1, 200, 1 << 22, 1 << 24, (1 << 25) + 3, (1 << 32) - 1])
def test_radix_sorted_lists_equal_numpy(top):
    """Long unweighted lists go through the LSD radix sort (one, two or three passes, the odd
    count ending in the scratch copy): every list sorted and deduplicated as numpy does, beside
    short lists that keep the quicksort."""
    from graphene_py.partition import extsort
    rng = np.random.default_rng(top % 1000)
    lens = [0, 1, extsort.RADIX_MIN - 1, extsort.RADIX_MIN, 5000, 3, 70000]
    indptr = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=indptr[1:])
    idx = rng.integers(0, top, int(indptr[-1]), dtype=np.uint64).astype(np.uint32)
    idx[indptr[4]:indptr[4] + 50] = top - 1                  # duplicates of the largest ID
    ref = [np.unique(idx[indptr[v]:indptr[v + 1]]) for v in range(len(lens))]
    newdeg = np.empty(len(lens), dtype=np.int64)
    extsort._sort_lists(indptr, idx, np.zeros(0, np.float32), False, True, newdeg)
    for v in range(len(lens)):
        assert newdeg[v] == len(ref[v])
        np.testing.assert_array_equal(idx[indptr[v]:indptr[v] + newdeg[v]], ref[v])


def test_runs_with_hubs_merge_equals_in_memory(tmp_path):
    """Hubs with hundreds of edges in every spilled run (lists sorted by radix in the merge),
    merge blocks of a few vertices: the merged CSR equals the in-memory one."""
    from graphene_py.partition import extsort
    rng = np.random.default_rng(5)
    n = 700
    src = np.concatenate([np.repeat([5, 300, 699], 1000), rng.integers(0, n, 6000)])
    dst = np.concatenate([rng.integers(0, n, 3000), rng.integers(0, n, 6000)])
    order = rng.permutation(len(src))
    src, dst = src[order], dst[order]
    ref = extsort.sort_to_csr(src, dst, None, n, symmetrize=True)
    spill = tmp_path / "spill"
    spill.mkdir()

    def batcher():
        b = extsort.Batcher(4000, False, lambda: [str(spill)], symmetrize=True,
                            drop_self_loops=True, dedupe=True, merge_budget=900)
        for i in range(0, len(src), 500):
            b.add(src[i:i + 500], dst[i:i + 500], None)
        return b
    b = batcher()
    store = b.finish(n)
    assert b.spilled_runs >= 3
    np.testing.assert_array_equal(store.indptr, ref[0])
    np.testing.assert_array_equal(store.get(0, n)[0], ref[1])
    assert int(np.diff(ref[0]).max()) > 2 * extsort.RADIX_MIN
    store.close()
    # merged as a stream: the same lists, block by block, and the runs deleted at its end
    s = batcher().finish(n, stream=True)
    assert isinstance(s, extsort.MergingCSR) and s.m is None and s.m_upper >= len(ref[1])
    got = [(v0, v1, lptr.copy(), idx.copy()) for v0, v1, lptr, idx, _ in s.blocks()]
    assert len(got) >= 3 and s.m == len(ref[1])
    assert [v0 for v0, *_ in got] == sorted(v0 for v0, *_ in got)
    np.testing.assert_array_equal(np.concatenate([g[3] for g in got]), ref[1])
    deg = np.zeros(n, dtype=np.int64)
    for v0, v1, lptr, _ in got:
        deg[v0:v1] = np.diff(lptr)
    np.testing.assert_array_equal(deg, np.diff(ref[0]))
    assert os.listdir(spill) == []


def test_a_batch_cut_down_lets_its_pages_go(tmp_path):
    """The batch's arrays serve every batch; when the partitioner cuts the batch down (more IDs
    seen: their per-vertex arrays take the memory), the next spill lets the larger arrays go, and
    the runs still merge into the in-memory result."""
    from graphene_py.partition import extsort
    rng = np.random.default_rng(9)
    n = 500
    src, dst = rng.integers(0, n, 6000), rng.integers(0, n, 6000)
    ref = extsort.sort_to_csr(src, dst, None, n, symmetrize=True)
    spill = tmp_path / "spill"
    spill.mkdir()
    b = extsort.Batcher(4000, False, lambda: [str(spill)], symmetrize=True, drop_self_loops=True,
                        dedupe=True)
    b.add(src[:4000], dst[:4000], None)
    assert b.spilled_runs == 1 and len(b.bsrc) == 4000 and b.scratch
    b.cap = 1000
    b.add(src[4000:5000], dst[4000:5000], None)
    assert b.spilled_runs == 2 and len(b.bsrc) == 0 and not b.scratch
    b.add(src[5000:], dst[5000:], None)
    assert b.spilled_runs == 3 and len(b.bsrc) == 1000
    store = b.finish(n)
    np.testing.assert_array_equal(store.indptr, ref[0])
    np.testing.assert_array_equal(store.get(0, n)[0], ref[1])


def test_edge_pieces_cover_and_balance():
    """The parallel list loops' pieces: every vertex in exactly one piece, in order, and each
    piece within one list of the average edge count (hubs first, as in unpermuted graphs)."""
    from graphene_py.partition import extsort
    rng = np.random.default_rng(3)
    deg = np.sort(rng.zipf(1.8, 5000).clip(max=3000))[::-1]
    indptr = np.zeros(len(deg) + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    for k in (1, 2, 32, 64):
        b = extsort._edge_pieces(indptr, k)
        assert b[0] == 0 and b[-1] == len(deg) and np.all(np.diff(b) >= 0)
        edges = indptr[b[1:]] - indptr[b[:-1]]
        assert edges.sum() == indptr[-1]
        assert edges.max() <= indptr[-1] / k + deg.max()
    assert np.array_equal(extsort._edge_pieces(np.zeros(1, dtype=np.int64), 4), np.zeros(5))


def test_the_writer_imports_no_numba():
    """A cluster node writes the partitions it is sent through partition/writer.py: importing it
    (and the package) leaves numba out; the partitioner's names still resolve, bringing it in."""
    code = ("import sys; from graphene_py.partition.writer import DatasetWriter; "
            "a = 'numba' in sys.modules; import graphene_py.partition as P; "
            "b = 'numba' in sys.modules; f = P.partition_arrays; "
            "print(a, b, 'numba' in sys.modules, callable(f), 'partition' in dir(P))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True", "True", "True"]


def test_direct_appender_and_read_range(tmp_path):
    """partition/direct.py: bytes appended in odd pieces through small staging buffers (written
    by a background thread, whole pages O_DIRECT, the last partial page through the cache) are
    the file's bytes exactly; read_range reads any byte range, across pages and to the file's
    short end; a failed background write comes out of the next call."""
    from graphene_py.partition import direct
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, 100_003, dtype=np.uint8)
    p = str(tmp_path / "f")
    ap = direct.DirectAppender(p, stage_bytes=8192)
    at = 0
    while at < len(data):
        k = int(rng.integers(1, 5000))
        ap.write(data[at:at + k])
        at += k
    assert ap.size == len(data)
    # buffers grow from 16 KiB to the cap (a wide grid's many small files keep small ones)
    assert max(len(b) for b in ap.bufs if b is not None) == 8192
    small = direct.DirectAppender(str(tmp_path / "s"))
    small.write(data[:100])
    assert len(small.buf) == direct.FIRST_STAGE_BYTES and small.bufs[1] is None
    small.write(data[:direct.FIRST_STAGE_BYTES])
    assert len(small.buf) == 2 * direct.FIRST_STAGE_BYTES
    small.close()
    ap.close(fsync=True)
    assert open(p, "rb").read() == data.tobytes()
    fd, is_direct = direct.open_direct(p, os.O_RDONLY)
    try:
        scratch = {}
        for off, n in [(0, 1), (4095, 2), (5000, 20000), (len(data) - 7, 7), (0, len(data))]:
            got = direct.read_range(fd, is_direct, scratch, "r", off, n)
            assert got.tobytes() == data[off:off + n].tobytes()
        with pytest.raises(OSError):
            direct.read_range(fd, is_direct, scratch, "r", len(data) - 3, 10)
    finally:
        os.close(fd)
    ap = direct.DirectAppender(str(tmp_path / "g"), stage_bytes=8192)
    os.close(ap.fd)             # the background write of the first full buffer fails
    ap.fd = os.open(str(tmp_path / "g"), os.O_RDONLY)
    with pytest.raises(OSError):
        for _ in range(4):
            ap.write(data[:8192])
        ap.close()
    ap.abort()


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_bucket_gather_pieces(tmp_path, wide, weighted):
    """A bucket's pieces of records (uint32 columns: local source, destination low bits, high
    bits once an ID needs them, weight bits) gathered in parallel into int64 sources and
    destinations and float32 weights, in piece order, from any start."""
    from graphene_py.partition import extsort
    rng = np.random.default_rng(int(wide) * 2 + int(weighted))
    bs = extsort.BucketSorter([str(tmp_path)], weighted, 4, 100, False, True, True)
    cols = bs._cols(wide)
    rows = rng.integers(0, 1 << 32, (5000, cols), dtype=np.uint64).astype(np.uint32)
    pieces = [(0, 7), (4000, 1000), (10, 0), (100, 2500), (3999, 1)]
    bs._alloc("g", 4000)
    at = bs._gather(rows, wide, pieces, 300, "g")
    assert at == 300 + 3508
    s, d, w = bs._columns("g", at)
    sel = np.concatenate([np.arange(r0, r0 + c) for r0, c in pieces])
    np.testing.assert_array_equal(s[300:], rows[sel, 0].astype(np.int64))
    want_d = rows[sel, 1].astype(np.int64)
    if wide:
        want_d |= rows[sel, 2].astype(np.int64) << 32
    np.testing.assert_array_equal(d[300:], want_d)
    if weighted:
        np.testing.assert_array_equal(w[300:].view(np.uint32), rows[sel, -1])
    else:
        assert w is None
