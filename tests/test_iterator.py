"""IoIterator vs naive per-vertex references, on every test graph, partitioning, engine and mode.

The reference for every check is computed from the *input edge arrays* with numpy (self-loops and
duplicates dropped as the partitioner documents: a duplicate keeps its smallest weight), never from
the dataset files, so a partitioning or iterator bug cannot cancel out.
"""
from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from numba import njit

from graphene_py.errors import GrapheneError, GrapheneIOError
from graphene_py.iterator import (Frontier, IoIterator, atomic_add, atomic_cas, atomic_min,
                                  prefetch)
from graphene_py.io.offsets import decode, degrees_into
from graphene_py.iterator.edgemap import EdgeMap
from graphene_py.partition import partition_arrays
from tests import graphs as tg

GRIDS = [(1, 1), (2, 2), (3, 2)]


# -- references ------------------------------------------------------------------------------
def clean_edges(g, symmetrize=False):
    s, d, w = g.src, g.dst, g.weights.astype(np.float64)
    if symmetrize:
        s, d, w = np.concatenate([s, d]), np.concatenate([d, s]), np.concatenate([w, w])
    keep = s != d
    s, d, w = s[keep], d[keep], w[keep]
    order = np.lexsort((w, d, s))
    s, d, w = s[order], d[order], w[order]
    first = np.ones(len(s), bool)
    first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    return s[first], d[first], w[first]


def reference(g, active=None, reverse=False):
    s, d, w = clean_edges(g)
    if reverse:
        s, d = d, s
    n = g.n
    act = np.ones(n, bool) if active is None else active
    sel = act[s]
    deg = np.bincount(s[sel], minlength=n)
    nsum = np.bincount(s[sel], weights=d[sel].astype(np.float64), minlength=n)
    wsum = np.bincount(s[sel], weights=w[sel], minlength=n)
    return deg, nsum, wsum


# -- custom algorithm written only with the public API ---------------------------------------
@njit
def _always(v, state):
    return True


@njit
def _count(v, nbrs, wts, tid, state):
    deg, nsum, wsum, calls = state
    deg[tid, v] += nbrs.shape[0]
    calls[tid, v] += 1
    for i in range(nbrs.shape[0]):
        nsum[tid, v] += np.int64(nbrs[i])
        if wts.shape[0]:
            wsum[tid, v] += wts[i]


def run_counts(it, n, frontier):
    T = it.threads
    state = (np.zeros((T, n), np.int64), np.zeros((T, n), np.int64), np.zeros((T, n)),
             np.zeros((T, n), np.int64))
    st = it.run(_always, _count, state, frontier)
    return state[0].sum(0), state[1].sum(0), state[2].sum(0), state[3].sum(0), st


# -- datasets --------------------------------------------------------------------------------
_CACHE = {}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    def make(gname, R=1, C=1, weights=True, in_edges=False, id_width=None, ndisks=2):
        key = (gname, R, C, weights, in_edges, id_width, ndisks)
        if key not in _CACHE:
            g = tg.by_name(gname)
            base = tmp_path_factory.mktemp("ds")
            disks = []
            for i in range(ndisks):
                os.makedirs(base / f"disk{i}")
                disks.append(str(base / f"disk{i}"))
            G = partition_arrays(g.src, g.dst, weights=g.weights if weights else None,
                                 num_vertices=g.n, disks=disks, name="t", rows=R, cols=C,
                                 in_edges=in_edges, id_width=id_width, register=False)
            _CACHE[key] = (g, G)
        return _CACHE[key]
    return make


def frontiers(n, rng):
    mask = rng.random(n) < 0.3
    ids = np.flatnonzero(mask).astype(np.int64)
    rng.shuffle(ids)
    small = ids[: max(1, len(ids) // 50)] if len(ids) else ids
    smask = np.zeros(n, bool)
    smask[small] = True
    return [(Frontier.all(n), np.ones(n, bool)), (Frontier.from_queue(ids, n), mask),
            (Frontier.from_mask(mask), mask), (Frontier.from_queue(small, n), smask)]


# -- tests -----------------------------------------------------------------------------------
@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
@pytest.mark.parametrize("gname", [f.__name__ for f in tg.ALL])
def test_counts_every_graph(dataset, gname, grid):
    g, G = dataset(gname, *grid)
    n = g.n
    rng = np.random.default_rng(5)
    with IoIterator(G, threads=2, weights=True) as it, \
            IoIterator(G, threads=2, weights=True, in_memory=True) as mem:
        for fr, act in frontiers(n, rng):
            deg, nsum, wsum = reference(g, act)
            d1, s1, w1, c1, st = run_counts(it, n, fr)
            assert np.array_equal(d1, deg), (gname, grid, fr)
            assert np.array_equal(s1, nsum)
            assert np.allclose(w1, wsum)
            d2, s2, w2, c2, st2 = run_counts(mem, n, fr)
            # in-memory mode runs the same plan: results identical, bit for bit
            assert np.array_equal(d2, d1) and np.array_equal(s2, s1)
            assert np.array_equal(np.sort(w2), np.sort(w1)) or np.allclose(w2, w1)
            assert st["active_edges"] == int(deg.sum()) == st2["active_edges"]
            assert st["extents"] == st2["extents"] and st["bytes_useful"] == st2["bytes_useful"]
            if st["extents"]:
                assert 0 < st["io_utility"] <= 1.0 + 1e-12
                assert st["bytes_read"] >= st["bytes_useful"]
                assert st["bytes_read"] % 512 == 0


@pytest.mark.parametrize("io_workers", ["device", "disk"])
@pytest.mark.parametrize("engine", ["uring", "liburing", "pread"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("gname,grid", [("powerlaw", (2, 2)), ("star", (3, 2)), ("grid", (1, 1))])
def test_engines(dataset, engine, threads, gname, grid, io_workers):
    # the test folders share one device: "device" runs one IO worker, "disk" one per folder
    g, G = dataset(gname, *grid)
    n = g.n
    rng = np.random.default_rng(9)
    for weights in (False, True):
        with IoIterator(G, engine=engine, threads=threads, weights=weights,
                        io_workers=io_workers) as it:
            assert it.engine_name == engine
            if grid != (1, 1):
                assert it.nworkers == (1 if io_workers == "device" else 2)
            for fr, act in frontiers(n, rng)[:3]:
                deg, nsum, wsum = reference(g, act)
                d1, s1, w1, _, st = run_counts(it, n, fr)
                assert np.array_equal(d1, deg) and np.array_equal(s1, nsum)
                if weights:
                    assert np.allclose(w1, wsum)
                else:
                    assert not w1.any()   # wts is an empty array without weights
            assert it.stats["supersteps"] == 3


def test_hub_lists_arrive_in_chunks(dataset):
    g, G = dataset("star", 1, 1)
    n = g.n
    deg, nsum, wsum = reference(g)
    with IoIterator(G, threads=2, max_io=4096, weights=True) as it:
        d1, s1, w1, calls, st = run_counts(it, n, Frontier.from_queue(np.arange(n), n))
    assert np.array_equal(d1, deg) and np.allclose(w1, wsum)
    hub = 3
    # 70,000 4-byte IDs = 280,000 bytes in 4 KB extents: the hub's list comes in >= 68 chunks
    assert calls[hub] >= 68
    assert st["extents"] >= 68


def test_compute_only_on_frontier_vertices(dataset):
    """is_active returning True everywhere must not leak gap blocks' vertices into compute."""
    g, G = dataset("uniform_2000_16000" if False else "uniform", 1, 1)
    n = g.n
    q = np.array([5, 700, 1999, 1200], dtype=np.int64)
    act = np.zeros(n, bool)
    act[q] = True
    deg, nsum, _ = reference(g, act)
    with IoIterator(G, threads=2, max_gap=64) as it:
        d1, s1, _, calls, st = run_counts(it, n, Frontier.from_queue(q, n))
    assert np.array_equal(d1, deg) and np.array_equal(s1, nsum)
    assert set(np.flatnonzero(calls)) <= set(q.tolist())
    assert st["mode"] == "queue" and st["frontier"] == 4


@njit
def _even(v, state):
    return v % 2 == 0


def test_is_active_filters(dataset):
    g, G = dataset("powerlaw", 2, 2)
    n = g.n
    act = np.arange(n) % 2 == 0
    deg, nsum, _ = reference(g, act)
    T = 2
    state = (np.zeros((T, n), np.int64), np.zeros((T, n), np.int64), np.zeros((T, n)),
             np.zeros((T, n), np.int64))
    with IoIterator(G, threads=T) as it:
        it.run(_even, _count, state, Frontier.all(n))
    assert np.array_equal(state[0].sum(0), deg)


@pytest.mark.parametrize("grid", [(1, 1), (2, 2)])
def test_in_edges(dataset, grid):
    g, G = dataset("powerlaw", *grid, in_edges=True)
    n = g.n
    rng = np.random.default_rng(1)
    for mem in (False, True):
        with IoIterator(G, "in", threads=2, weights=True, in_memory=mem) as it:
            for fr, act in frontiers(n, rng)[:3]:
                deg, nsum, wsum = reference(g, act, reverse=True)
                d1, s1, w1, _, _ = run_counts(it, n, fr)
                assert np.array_equal(d1, deg) and np.array_equal(s1, nsum)
                assert np.allclose(w1, wsum)


def test_no_in_edges_is_a_clear_error(dataset):
    g, G = dataset("powerlaw", 1, 1)
    with pytest.raises(GrapheneError, match="in-edge"):
        IoIterator(G, "in")


@pytest.mark.parametrize("gname", ["powerlaw", "star"])
def test_id_width_8(dataset, gname):
    g, G = dataset(gname, 2, 2, id_width=8)
    assert G.id_width == 8
    n = g.n
    rng = np.random.default_rng(2)
    for mem in (False, True):
        with IoIterator(G, threads=2, weights=True, in_memory=mem, max_io=8192) as it:
            for fr, act in frontiers(n, rng):
                deg, nsum, wsum = reference(g, act)
                d1, s1, w1, _, _ = run_counts(it, n, fr)
                assert np.array_equal(d1, deg) and np.array_equal(s1, nsum)
                assert np.allclose(w1, wsum)


def test_tiny_buffer_weighted_no_deadlock(dataset):
    g, G = dataset("star", 2, 2)
    n = g.n
    deg, nsum, wsum = reference(g)
    with IoIterator(G, threads=2, weights=True, buffer_mb=0.1, queue_depth=4) as it:
        d1, s1, w1, _, st = run_counts(it, n, Frontier.all(n))
        assert np.array_equal(d1, deg) and np.allclose(w1, wsum)
        assert it.notes  # the raised pool size is reported


def test_no_direct_and_block_size(dataset):
    g, G = dataset("powerlaw", 2, 2)
    n = g.n
    rng = np.random.default_rng(3)
    with IoIterator(G, threads=2, direct=False, block_size=4096, max_gap=0, max_io=4096) as it:
        for fr, act in frontiers(n, rng):
            deg, nsum, _ = reference(g, act)
            d1, s1, _, _, st = run_counts(it, n, fr)
            assert np.array_equal(d1, deg) and np.array_equal(s1, nsum)


def test_stats_keys_and_modes(dataset):
    g, G = dataset("powerlaw", 2, 2)
    n = g.n
    keys = {"frontier", "active_edges", "blocks_marked", "extents", "bytes_useful", "bytes_read",
            "io_utility", "io_seconds", "compute_seconds", "wait_seconds", "plan_seconds",
            "seconds", "mode"}
    with IoIterator(G, threads=2) as it:
        st_small = run_counts(it, n, Frontier.from_queue(np.array([1, 2, 3]), n))[-1]
        st_big = run_counts(it, n, Frontier.from_queue(np.arange(n // 2), n))[-1]
        st_mask = run_counts(it, n, Frontier.from_mask(np.ones(n, bool)))[-1]
        st_all = run_counts(it, n, Frontier.all(n))[-1]
        for st in (st_small, st_big, st_mask, st_all):
            assert keys <= set(st)
        assert (st_small["mode"], st_big["mode"], st_mask["mode"], st_all["mode"]) == \
            ("queue", "scan", "scan", "all")
        # dense streaming reads every byte of the adjacency files once, in large extents
        assert st_all["bytes_read"] == sum(p.adj_bytes for p in G.partitions if p.num_edges)
        assert st_all["extents"] <= st_mask["extents"]
        assert st_mask["active_edges"] == st_all["active_edges"] == G.num_edges
        assert it.stats["supersteps"] == 4
        assert it.stats["bytes_read"] == sum(s["bytes_read"] for s in
                                             (st_small, st_big, st_mask, st_all))


def test_frontier_validation(dataset):
    g, G = dataset("powerlaw", 1, 1)
    n = g.n
    with pytest.raises(ValueError):
        Frontier.from_queue(np.array([n]), n)
    with pytest.raises(ValueError):
        Frontier.from_queue(np.array([-1]), n)
    with IoIterator(G, threads=1) as it:
        with pytest.raises(ValueError):
            run_counts(it, n, Frontier.all(n + 1))
        with pytest.raises(TypeError):
            it.run(_always, _count, (), np.arange(3))
    with pytest.raises(GrapheneError, match="no weights"):
        _, Gu = dataset("powerlaw", 1, 1, weights=False)
        IoIterator(Gu, weights=True)
    assert len(Frontier.from_mask(np.array([0, 3, 0, 1]))) == 2


def test_io_error_propagates_and_iterator_survives(dataset):
    from graphene_py.io.faults import FaultEngine
    g, G = dataset("powerlaw", 1, 1)
    n = g.n
    made = {}

    def factory(files, disk_of, pool, queue_depth=64, direct=True):
        made["e"] = FaultEngine(files, disk_of, pool, queue_depth=queue_depth, direct=direct,
                                eio_at={(0, 0)})
        return made["e"]

    with IoIterator(G, threads=2, engine=factory) as it:
        with pytest.raises(GrapheneIOError):
            run_counts(it, n, Frontier.all(n))
        # the batch was drained: the next superstep (which avoids block 0) still works
        made["e"].eio_at = set()
        deg, nsum, _ = reference(g)
        d1, s1, _, _, _ = run_counts(it, n, Frontier.all(n))
        assert np.array_equal(d1, deg)


@pytest.mark.parametrize("weights", [False, True])
@pytest.mark.parametrize("mem", [False, True])
def test_python_api_table_4_1(dataset, weights, mem):
    g, G = dataset("star", 2, 2)
    n = g.n
    rng = np.random.default_rng(4)
    fr, act = frontiers(n, rng)[1]
    deg_ref, nsum_ref, wsum_ref = reference(g, act)
    deg = np.zeros(n, np.int64)
    nsum = np.zeros(n, np.int64)
    wsum = np.zeros(n)
    with IoIterator(G, weights=weights, in_memory=mem, max_io=4096) as it:
        it.start(fr)
        blocks = 0
        while it.has_more():
            it.next()
            blocks += 1
            while True:
                v = it.current()
                if v < 0:
                    break
                nb = it.get_neighbors(v)
                assert nb.dtype == np.int64
                deg[v] += len(nb)
                nsum[v] += int(nb.sum())
                if weights:
                    w = it.get_weights(v)
                    assert len(w) == len(nb)
                    wsum[v] += float(w.astype(np.float64).sum())
        assert blocks > 1
        assert not it.has_more()
        # a second superstep with the block-iteration form
        it.start(Frontier.all(n))
        deg2 = np.zeros(n, np.int64)
        while it.has_more():
            for v in it.next():
                deg2[v] += len(it.get_neighbors(v))
    assert np.array_equal(deg, deg_ref) and np.array_equal(nsum, nsum_ref)
    if weights:
        assert np.allclose(wsum, wsum_ref)
    assert np.array_equal(deg2, reference(g)[0])


def test_python_api_abandoned_superstep(dataset):
    g, G = dataset("powerlaw", 1, 1)
    n = g.n
    with IoIterator(G, max_io=4096) as it:
        it.start(Frontier.all(n))
        assert it.has_more()
        it.next()
        it.start(Frontier.all(n))   # abandon: drained and released, then a full pass works
        deg = np.zeros(n, np.int64)
        while it.has_more():
            for v in it.next():
                deg[v] += len(it.get_neighbors(v))
        assert np.array_equal(deg, reference(g)[0])
        d1 = run_counts(it, n, Frontier.all(n))[0]
        assert np.array_equal(d1, deg)


def test_empty_graph(dataset):
    g, G = dataset("empty", 1, 1)
    with IoIterator(G) as it:
        st = run_counts(it, 0, Frontier.all(0))[-1]
        assert st["extents"] == 0 and st["active_edges"] == 0


# -- atomics ---------------------------------------------------------------------------------
@njit(nogil=True)
def _hammer(cnt, claim, mins, tid, reps):
    won = 0
    for i in range(reps):
        atomic_add(cnt, 0, np.int64(1))
        j = i % claim.shape[0]
        if atomic_cas(claim, j, np.int32(-1), np.int32(tid)) == -1:
            won += 1
        atomic_min(mins, j, np.int64(reps - i + tid))
    return won


def test_atomics_under_threads():
    cnt = np.zeros(1, np.int64)
    claim = np.full(1000, -1, np.int32)
    mins = np.full(1000, 1 << 40, np.int64)
    won = [0, 0]

    def work(t):
        won[t] = _hammer(cnt, claim, mins, t, 200_000)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert cnt[0] == 400_000
    assert sum(won) == 1000 and (claim >= 0).all()
    # the minimum over both threads of reps - i + tid for i = j (mod 1000)
    reps = 200_000
    j = np.arange(1000)
    last_i = j + ((reps - 1 - j) // 1000) * 1000
    assert np.array_equal(mins, reps - last_i)


@njit
def _gather_ahead(c, idx, ahead):
    s = 0.0
    for i in range(idx.shape[0]):
        prefetch(c, idx[(i + ahead) % idx.shape[0]] if ahead >= 0 else np.int64(1) << 50)
        s += c[idx[i]]
    return s


def test_prefetch_is_only_a_hint():
    """A prefetch changes no value, and one far outside the array (never read) does not fault."""
    c = np.arange(1000, dtype=np.float64)
    idx = np.random.default_rng(3).integers(0, 1000, 5000)
    want = float(c[idx].sum())
    for ahead in (0, 7, 64, -1):
        assert _gather_ahead(c, idx, ahead) == want
    assert _gather_ahead(c.astype(np.int32).astype(np.float64), idx.astype(np.int32), 3) == want


def test_unowned_views_read_and_write_the_same_memory():
    """atomics.unowned / unowned_all (process_batch's buffer and state without numba's owner
    record): a view cut from them reads the array's values, a write through them lands in the
    array itself, non-array members pass through, and the arrays' owners are untouched (their
    Python reference counts as before)."""
    import sys
    from graphene_py.iterator.atomics import unowned, unowned_all
    from graphene_py.jit import njit

    @njit
    def cut_and_write(buf, state):
        b = unowned(buf)
        st = unowned_all(state)
        a, k, c = st
        s = 0
        for i in range(2, 6):
            s += b[i:i + 3].sum()          # views of the unowned buffer
        a[k] = 7.5                         # written through the unowned member
        c[0] = b[1:4][1]
        return s, k
    buf = np.arange(10, dtype=np.uint32)
    a, c = np.zeros(4), np.zeros(1, dtype=np.int64)
    before = [sys.getrefcount(x) for x in (buf, a, c)]
    s, k = cut_and_write(buf, (a, 2, c))
    assert s == sum(int(buf[i:i + 3].sum()) for i in range(2, 6)) and k == 2
    assert a.tolist() == [0, 0, 7.5, 0] and c[0] == 2
    assert [sys.getrefcount(x) for x in (buf, a, c)] == before


def test_in_memory_load_is_reused_and_droppable(dataset):
    from graphene_py.iterator import drop_memory_cache
    g, G = dataset("powerlaw", 2, 2)
    a = IoIterator(G, in_memory=True)
    b = IoIterator(G, in_memory=True)
    assert a.mem is b.mem            # loaded once per process (GAPBS: load once, run trials)
    drop_memory_cache()
    c = IoIterator(G, in_memory=True)
    assert c.mem is not a.mem and np.array_equal(c.mem, a.mem)
    for it in (a, b, c):
        it.close()


def test_in_memory_lists_loaded_once_with_or_without_weights(dataset, monkeypatch):
    """The lists loaded without weights serve a run with weights: only the weight files are read
    then (`graphene run sssp --in-memory`'s set-up loads the lists, its run the weights too), and
    lists loaded with weights serve a run without; the weights are the dataset's."""
    from graphene_py.iterator import drop_memory_cache, session
    g, G = dataset("powerlaw", 2, 2)
    read = []
    real = session._read_into
    monkeypatch.setattr(session, "_read_into", lambda path, dst: (read.append(path),
                                                                   real(path, dst))[1])
    drop_memory_cache()
    a = IoIterator(G, in_memory=True)
    lists_read = list(read)
    assert lists_read and all(p.endswith(".adj") for p in lists_read)
    b = IoIterator(G, in_memory=True, weights=True)
    assert b.mem is a.mem
    assert sorted(read[len(lists_read):]) == sorted(p[:-4] + ".wgt" for p in lists_read)
    c = IoIterator(G, in_memory=True)
    assert c.mem is a.mem and len(read) == 2 * len(lists_read)
    for it in (b, c):
        for f, i in enumerate(it.file_parts):
            p = it.parts[i]
            got = it.wbuf[it.wfile_base[f] // 4:it.wfile_base[f] // 4 + p.num_edges]
            if it.weights:
                np.testing.assert_array_equal(got, p.weights())
    for it in (a, b, c):
        it.close()
    drop_memory_cache()


# -- offsets held as int32 (every partition below 2^31 edges) or uint64 ---------------------------
@pytest.mark.parametrize("narrow", [0, 1 << 31], ids=["uint64", "int32"])
@pytest.mark.parametrize("chunk", [7, 1 << 20], ids=["chunk7", "chunk1M"])
def test_offsets_narrow_or_wide_same_lists(dataset, monkeypatch, narrow, chunk):
    # the held dtype follows the partitions' edge counts; reading through a 7-entry staging
    # buffer (CRC32 over chunks, narrowing across chunk borders) gives the very same lists
    from graphene_py.iterator import session
    monkeypatch.setattr(session, "NARROW_EDGES", narrow)
    monkeypatch.setattr(session, "NARROW_CHUNK", chunk)
    g, G0 = dataset("powerlaw", 3, 2, in_edges=True)
    from graphene_py.graph import Graph
    G = Graph.open(G0.path)            # nothing loaded yet: every offsets file is read here
    try:
        rng = np.random.default_rng(4)
        for direction, rev in (("out", False), ("in", True)):
            with IoIterator(G, direction, engine="uring", threads=2, weights=True) as it:
                # held compact (io/offsets.py), whatever the width read: the files' values
                assert it.offs[0].dtype == np.uint16
                for i, p in enumerate(it.parts):
                    assert np.array_equal(
                        decode(it.offs, it.part_base[i], it.part_base[i + 1]),
                        np.fromfile(p.off_path, dtype="<u8").astype(np.int64))
                for fr, act in frontiers(g.n, rng):
                    deg, nsum, wsum, _, _ = run_counts(it, g.n, fr)
                    rdeg, rnsum, rwsum = reference(g, act, reverse=rev)
                    assert np.array_equal(deg, rdeg) and np.array_equal(nsum, rnsum)
                    assert np.allclose(wsum, rwsum)
                assert np.array_equal(it.degrees(), G.degrees(direction))
    finally:
        G.close()


def test_offset_beyond_int32_is_damage_not_a_wrong_list(dataset, tmp_path):
    # an offsets file whose CRC32 matches but one value does not fit int32 (only a damaged or
    # forged file can hold one: the partition has < 2^31 edges) is refused, naming the file
    import shutil
    import zlib
    from graphene_py.graph import Graph
    g, G0 = dataset("powerlaw", 1, 1, weights=False)
    G = Graph.open(G0.path)
    p = G.partitions[0]
    off = np.fromfile(p.off_path, dtype="<u8")
    bad = off.copy()
    bad[len(bad) // 2] += np.uint64(1 << 32)
    shutil.copy(p.off_path, tmp_path / "keep")
    try:
        bad.tofile(p.off_path)
        p.checksums["off"] = f"{zlib.crc32(bad.tobytes()):08x}"
        with pytest.raises(GrapheneError, match="offset") as e:
            IoIterator(G, "out", engine="uring", threads=1)
        assert os.path.basename(p.off_path) in str(e.value)
    finally:
        shutil.copy(tmp_path / "keep", p.off_path)
        G.close()


@njit
def _degrees_by_blocks(n, offs, dd, block):
    out = np.full(n, -1, np.int64)
    for v0 in range(0, n, block):
        v1 = min(v0 + block, n)
        degrees_into(offs, dd, v0, v1, out[v0:v1])
    return out


@pytest.mark.parametrize("grid", [(1, 1), (3, 2), (2, 3)], ids=lambda g: f"{g[0]}x{g[1]}")
def test_degrees_from_the_offsets_by_blocks(dataset, grid):
    # EdgeMap.degree_view + degrees_into (PageRank's degree-free passes, split over threads by
    # vertex ranges): every vertex's degree, summed over its row's column partitions, from the
    # compact offsets the iterators hold, for blocks that do and do not align with the groups
    g, G = dataset("powerlaw", *grid, in_edges=True)
    with EdgeMap(G, pull=True, threads=1) as em:
        for direction in ("out", "in"):
            offs, dd = em.degree_view(direction)
            for block in (1, 7, 512):
                got = _degrees_by_blocks(g.n, offs, dd, block)
                assert np.array_equal(got, G.degrees(direction)), (direction, block)


@pytest.mark.parametrize("weights", [False, True])
def test_a_dataset_smaller_than_the_pool_gets_a_pool_its_size(dataset, weights):
    """The IO pool of a small dataset has the queues' slots plus its bytes twice over, not 64 MiB
    (~0.1 s to fault in); slots keep their size (the same requests as before), and a dense
    superstep over a hub of 70k edges reads every byte (the counts equal the reference)."""
    g, G = dataset("star", 2, 2, weights=weights)
    with IoIterator(G, threads=2, weights=weights, buffer_mb=64) as it:
        pool = it.pool
        data = sum(p.adj_bytes + (p.num_edges * 4 if weights else 0) for p in G.partitions)
        need = it._slots_needed()
        assert pool.slot_bytes >= 128 * 1024
        assert need <= pool.nslots <= need + -(-2 * data // pool.slot_bytes)
        assert pool.nbytes < 64 << 20
        act = np.ones(g.n, bool)
        deg, nsum, wsum = reference(g, act)
        d1, s1, w1, c1, st = run_counts(it, g.n, Frontier.all(g.n))
        assert np.array_equal(d1, deg) and np.array_equal(s1, nsum)
        if weights:
            assert np.allclose(w1, wsum)


def test_update_reads_is_checked():
    """Update.reads names a state slot or (slot, row); anything else, or a slot the state does
    not have, is a clear error, not a traceback from inside the engine."""
    from graphene_py.iterator.edgemap import Update
    a = np.zeros(4)
    ok = Update(None, None, combine="sum", reads=1)
    assert ok.ahead((a, a + 1)) is not None and ok.ahead((a, a + 1))[0] == 1.0
    assert Update(None, None, combine="sum", reads=(0, 1)).ahead((np.eye(4),))[1] == 1.0
    assert Update(None, None, combine="sum").ahead((a,)) is None
    for bad in (-1, "x", (0,), (0, -2), True, 1.5):
        with pytest.raises(ValueError, match="reads names a state slot"):
            Update(None, None, combine="sum", reads=bad)
    with pytest.raises(ValueError, match=r"reads=3 names no slot of this state \(2 slots\)"):
        Update(None, None, combine="sum", reads=3).ahead((a, a))


# -- a kernel that asks for its reads ahead itself (kernels.looks_ahead) -----------------------
from graphene_py.iterator.kernels import AHEAD, looks_ahead  # noqa: E402


@looks_ahead
@njit
def _look(v, nbrs, wts, tid, state):
    """Checks what the engine gives a looks_ahead kernel: wts[i] must be the ID AHEAD places after
    nbrs[i] in the partition's list file (ids: its IDs in file order; start: where each vertex's
    list begins), and never longer than nbrs."""
    ids, start, bad, looked, edges = state
    n = nbrs.shape[0]
    edges[tid] += n
    if n == 0:
        return
    p = start[v]                       # where this chunk of v's sorted list begins
    while ids[p] != nbrs[0]:
        p += 1
    k = wts.shape[0]
    if k > n:
        bad[tid] += 1
    for i in range(min(k, n)):
        if np.int64(wts[i]) != np.int64(ids[p + i + AHEAD]):
            bad[tid] += 1
    looked[tid] += k


@pytest.mark.parametrize("gname,max_io,in_memory", [("star", 4096, False), ("powerlaw", 4096, False),
                                                     ("powerlaw", None, False),
                                                     ("powerlaw", None, True)])
def test_a_kernel_that_looks_ahead_gets_the_ids_ahead(dataset, gname, max_io, in_memory):
    """In an unweighted superstep a looks_ahead kernel's wts are the neighbour IDs AHEAD entries
    on in the extent (across list ends; cut at the extent's end, as 4 KB extents often do), from
    the SSD or from RAM; a plain kernel still gets none; results are unchanged."""
    g, G = dataset(gname, 1, 1, weights=False)
    p = G.parts("out")[0]
    ids = np.asarray(p.adjacency(), dtype=np.int64)
    start = np.asarray(p.offsets()[:-1], dtype=np.int64)
    deg, _, _ = reference(g)
    with IoIterator(G, threads=2, max_io=max_io, in_memory=in_memory) as it:
        state = (ids, start, np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(2, np.int64))
        it.run(_always, _look, state, Frontier.all(g.n))
        d1, _, w1, _, _ = run_counts(it, g.n, Frontier.all(g.n))
    assert state[2].sum() == 0
    assert state[4].sum() == deg.sum()
    assert state[3].sum() >= deg.sum() - AHEAD * (len(ids) // 1024 + 2) > 0  # cut at extents only
    assert np.array_equal(d1, deg) and not w1.any()


def test_a_kernel_marked_to_look_ahead_gets_its_own_generated_kernel(monkeypatch):
    """The generated kernel of a looks_ahead compute says so (LOOK = True), a plain one's not, and
    marking a kernel changes the generated kernel's name (no code object changes with the mark)."""
    from graphene_py.iterator import kernels, specialize
    a, look, plain = (__name__, "_always"), (__name__, "_look"), (__name__, "_count")
    assert "LOOK = True" in specialize._generated_source(a, look)
    assert "LOOK = False" in specialize._generated_source(a, plain)
    marked = specialize.kernel_name(a, look)
    monkeypatch.setattr(kernels, "LOOK_AHEAD", kernels.LOOK_AHEAD - {f"{__name__}._look"})
    assert "LOOK = False" in specialize._generated_source(a, look)
    assert specialize.kernel_name(a, look) != marked
