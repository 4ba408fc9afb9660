"""Multi-source BFS (graphene_py.algos.msbfs) against an independent per-source queue BFS.

Covers: top-down only, bottom-up whenever the cost model allows (default) and bottom-up every level
("always"); undirected datasets (bottom-up over out-lists), directed with in-edges (bottom-up over
in-lists) and directed without (top-down fallback); 1x1 and 3x2 partitions; SSD and in-memory
paths; 1-3 compute threads; a chain of thousands of levels, a star whose hub list spans many
512-byte blocks (chunks on different threads), disconnected graphs with sources in tiny components
(their BFS dies early), 8-byte vertex IDs, more than 32 and more than 64 sources (uint64 words, two
passes), duplicate sources, memmap output, closeness and `reached`. A stand-in iterator cuts every
list into random pieces handed out in random order with random thread ids, so the kernels must be
exact on any chunking.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from graphene_py.algos import msbfs
from graphene_py.errors import GrapheneError
from graphene_py.partition import partition_arrays
from tests import graphs as tg


# ---------------------------------------------------------------------------------------------
# reference: plain queue BFS over Python adjacency lists built from the raw edges
def ref_depths(n, src, dst, sources, symmetric):
    adj = tg.naive_adjacency(n, src, dst, symmetric)
    out = np.full((len(sources), n), -1, dtype=np.int32)
    for i, s in enumerate(sources):
        out[i] = tg.naive_bfs_depth(adj, s)
    return out


def ref_closeness(row):
    n = len(row)
    r = int(np.count_nonzero(row >= 0))
    tot = int(row[row >= 0].sum())
    if tot == 0 or n <= 1:
        return 0.0
    return ((r - 1) / (n - 1)) * ((r - 1) / tot)


# ---------------------------------------------------------------------------------------------
# graphs
def g_chain(n=3000):
    v = np.arange(n - 1, dtype=np.int64)
    return n, v, v + 1


def g_star(hub_degree=20_000, hub=3):
    # hub list: 20,000 IDs = 80 KB = 157 blocks of 512 bytes; plus a few leaf-leaf edges, a tail
    n = hub_degree + 8
    leaves = np.array([v for v in range(n - 3) if v != hub], dtype=np.int64)[:hub_degree]
    s = np.concatenate([np.full(hub_degree, hub), leaves[100:140], [n - 3, n - 2]])
    d = np.concatenate([leaves, leaves[200:240], [n - 2, n - 1]])
    return n, s, d


def g_disconnected(seed=5):
    # a random dense-ish component, a sparse long-ish one, tiny ones, isolated vertices
    rng = np.random.default_rng(seed)
    parts_s, parts_d = [], []
    a = np.arange(0, 600)
    parts_s.append(rng.choice(a, 5000))
    parts_d.append(rng.choice(a, 5000))
    b = np.arange(700, 900)
    parts_s.append(b[:-1])
    parts_d.append(b[1:])
    parts_s.append(rng.choice(b, 30))
    parts_d.append(rng.choice(b, 30))
    parts_s.append(np.array([950, 951, 960]))
    parts_d.append(np.array([951, 952, 961]))
    return 1000, np.concatenate(parts_s), np.concatenate(parts_d)


def g_powerlaw():
    g = tg.powerlaw(scale=11, edge_factor=8, seed=7)
    return g.n, g.src, g.dst


GRAPHS = {"chain": g_chain, "star": g_star, "disconnected": g_disconnected,
          "powerlaw": g_powerlaw}

_DATA = {}


def dataset(root, gname, kind, grid, id_width=None):
    """kind: sym (undirected), in (directed + in-edges), out (directed, no in-edges)."""
    key = (gname, kind, grid, id_width)
    if key not in _DATA:
        n, s, d = GRAPHS[gname]()
        R, C = grid
        disks = [os.path.join(root, f"m{i}") for i in range(2)]
        for x in disks:
            os.makedirs(x, exist_ok=True)
        g = partition_arrays(s, d, num_vertices=n, disks=disks,
                             name=f"ms_{gname}_{kind}_{R}x{C}_{id_width or 4}",
                             symmetrize=(kind == "sym"), in_edges=(kind == "in"), rows=R, cols=C,
                             id_width=id_width, force=True, register=False)
        _DATA[key] = (g, n, s, d)
    return _DATA[key]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("msbfs_data"))


def sources_of(gname, n, count):
    if gname == "chain":
        return [0, 1, n // 2, n - 1][:count]     # source 0: a BFS of n levels
    rng = np.random.default_rng(count)
    pick = rng.choice(n, size=count - 3, replace=False).tolist()
    return pick + [pick[0], 0, n - 1]           # a duplicate, both ends


def check(g, n, s, d, srcs, kind, **kw):
    ref = ref_depths(n, s, d, srcs, kind == "sym")
    r = msbfs.run(g, sources=srcs, closeness=True, **kw)
    assert r.depths.shape == (len(srcs), n) and r.depths.dtype == np.int32
    bad = np.argwhere(r.depths != ref)
    assert len(bad) == 0, (f"{len(bad)} wrong depths, first (source #{bad[0][0]}, vertex "
                           f"{bad[0][1]}): {r.depths[tuple(bad[0])]} != {ref[tuple(bad[0])]}")
    assert np.array_equal(r.reached, (ref >= 0).sum(axis=1))
    for i in range(len(srcs)):
        assert r.closeness[i] == pytest.approx(ref_closeness(ref[i]), rel=1e-12, abs=0)
    assert r.passes == (len(srcs) + 63) // 64
    return r


SSD = {"engine": "uring", "buffer_mb": 2}


# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bottom_up", [True, "always", False])
@pytest.mark.parametrize("kind", ["sym", "in", "out"])
@pytest.mark.parametrize("grid", [(1, 1), (3, 2)])
@pytest.mark.parametrize("gname", ["star", "disconnected", "powerlaw"])
def test_vs_reference(gname, grid, kind, bottom_up, root):
    g, n, s, d = dataset(root, gname, kind, grid)
    srcs = sources_of(gname, n, 12)
    r = check(g, n, s, d, srcs, kind, bottom_up=bottom_up, threads=2, **SSD)
    dirs = {st["direction"] for st in r.supersteps}
    if kind == "out" or bottom_up is False:
        assert dirs == {"top-down"}
    elif bottom_up == "always":
        assert dirs == {"bottom-up"}


@pytest.mark.parametrize("bottom_up", [True, "always", False])
@pytest.mark.parametrize("kind", ["sym", "in"])
def test_chain_thousands_of_levels(kind, bottom_up, root):
    g, n, s, d = dataset(root, "chain", kind, (3, 2))
    r = check(g, n, s, d, sources_of("chain", n, 4), kind, bottom_up=bottom_up, threads=2, **SSD)
    assert len(r.supersteps) >= n - 1


@pytest.mark.parametrize("count", [40, 64, 70, 130])
@pytest.mark.parametrize("bottom_up", [True, "always", False])
def test_many_sources(count, bottom_up, root):
    g, n, s, d = dataset(root, "powerlaw", "sym", (3, 2))
    srcs = sources_of("powerlaw", n, count)
    check(g, n, s, d, srcs, "sym", bottom_up=bottom_up, threads=2, **SSD)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("in_memory", [False, True])
@pytest.mark.parametrize("gname", ["star", "powerlaw", "disconnected"])
def test_threads_memory_idwidth(gname, in_memory, threads, root):
    g, n, s, d = dataset(root, gname, "in", (1, 1), id_width=8)
    for bottom_up in (True, "always"):
        check(g, n, s, d, sources_of(gname, n, 33), "in", bottom_up=bottom_up, threads=threads,
              in_memory=in_memory, **SSD)


def test_sources_in_tiny_components(root):
    # sources whose BFS ends after one or two levels must stop being wanted: the other sources'
    # bottom-up levels then read only the vertices still missing live bits
    g, n, s, d = dataset(root, "disconnected", "sym", (1, 1))
    srcs = [950, 960, 5, 700, 999, 1]          # 999: isolated
    r = check(g, n, s, d, srcs, "sym", threads=2, **SSD)
    assert r.reached[srcs.index(999)] == 1 and r.reached[srcs.index(960)] == 2


def test_default_sources_and_memmap(root, tmp_path):
    g, n, s, d = dataset(root, "powerlaw", "sym", (1, 1))
    out = str(tmp_path / "depths.npy")
    r = msbfs.run(g, output=out, threads=2, **SSD)
    assert isinstance(r.depths, np.memmap)
    ref = ref_depths(n, s, d, r.sources.tolist(), True)
    assert np.array_equal(np.load(out), ref)
    assert np.array_equal(np.asarray(r.depths), ref)
    assert msbfs.verify(g, r) == []


def test_direction_chosen_by_cost(root):
    # on a power-law graph with 32 sources the dense middle levels go bottom-up, the first level
    # (32 short lists) top-down; bottom-up levels read fewer bytes in total than top-down only
    g, n, s, d = dataset(root, "powerlaw", "sym", (1, 1))
    srcs = sources_of("powerlaw", n, 32)
    a = check(g, n, s, d, srcs, "sym", threads=2, **SSD)
    b = check(g, n, s, d, srcs, "sym", threads=2, bottom_up=False, **SSD)
    dirs = [st["direction"] for st in a.supersteps]
    assert dirs[0] == "top-down" and "bottom-up" in dirs
    assert a.totals()["bytes_read"] < b.totals()["bytes_read"]
    # short lists read by one bottom-up level are served from RAM by the later ones
    assert any(st.get("kept_lists", 0) > 0 for st in a.supersteps)


@pytest.mark.parametrize("grid", [(1, 1), (3, 2)])
def test_cached_lists_split_over_chunks(grid, root):
    # bottom-up every level and enough levels that the cache serves most vertices: the grid's
    # lists are split over column partitions (chunks that claim cache slots concurrently)
    g, n, s, d = dataset(root, "powerlaw", "sym", grid)
    srcs = sources_of("powerlaw", n, 20)
    r = check(g, n, s, d, srcs, "sym", bottom_up="always", threads=3, **SSD)
    assert sum(st.get("kept_lists", 0) for st in r.supersteps) > n // 4


# ---------------------------------------------------------------------------------------------
# adversarial chunking: every list cut into random pieces, shuffled, random thread ids
class _Frontier:
    def __init__(self, ids, n):
        self.ids, self.n = ids, n

    @classmethod
    def from_mask(cls, mask, again=False):        # (again: the read-through cache's hint)
        return cls(np.flatnonzero(np.asarray(mask)).astype(np.int64), len(mask))

    @classmethod
    def from_queue(cls, ids, n):
        return cls(np.asarray(ids, dtype=np.int64), n)


class _Chunking:
    def __init__(self, graph, direction="out", *, threads=3, seed=0, **_ignored):
        self.indptr, idx, _ = graph.to_csr(direction)
        self.indices = idx.astype(np.uint32)
        self.threads = threads
        self.rng = np.random.default_rng(seed)

    def run(self, is_active, compute, state, frontier, keep=None, ahead=None):
        pieces = []
        for v in frontier.ids.tolist():
            lo, hi = int(self.indptr[v]), int(self.indptr[v + 1])
            if hi <= lo:
                continue
            cuts = sorted(set(self.rng.integers(lo, hi, size=3).tolist()) | {lo, hi})
            pieces += [(v, a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        for k in self.rng.permutation(len(pieces)):
            v, a, b = pieces[k]
            if is_active(v, state):
                compute(v, self.indices[a:b], self.indices[:0], int(self.rng.integers(self.threads)),
                        state)
        return {"frontier": len(frontier.ids)}

    def close(self):
        pass


@pytest.mark.parametrize("bottom_up", [True, "always", False])
@pytest.mark.parametrize("kind", ["sym", "in"])
@pytest.mark.parametrize("gname", ["star", "disconnected", "powerlaw"])
def test_any_chunking(gname, kind, bottom_up, root, monkeypatch):
    import graphene_py.iterator as itmod
    monkeypatch.setattr(itmod, "IoIterator", _Chunking)
    monkeypatch.setattr(itmod, "Frontier", _Frontier)
    g, n, s, d = dataset(root, gname, kind, (1, 1))
    for count in (9, 70):
        check(g, n, s, d, sources_of(gname, n, count), kind, bottom_up=bottom_up)


def check_counts(g, n, s, d, srcs, kind, **kw):
    """keep_depths=False: no depths, the reference's reached counts and closeness."""
    ref = ref_depths(n, s, d, srcs, kind == "sym")
    r = msbfs.run(g, sources=srcs, closeness=True, keep_depths=False, **kw)
    assert r.depths is None and not r.depths_kept
    assert np.array_equal(r.reached, (ref >= 0).sum(axis=1))
    for i in range(len(srcs)):
        assert r.closeness[i] == pytest.approx(ref_closeness(ref[i]), rel=1e-12, abs=0)
    assert "depths" not in r.scalars() and r.passes == (len(srcs) + 63) // 64
    return r


@pytest.mark.parametrize("bottom_up", [True, "always", False])
@pytest.mark.parametrize("kind", ["sym", "in", "out"])
@pytest.mark.parametrize("gname", ["star", "disconnected", "powerlaw", "chain"])
def test_counts_without_depths(gname, kind, bottom_up, root, tmp_path):
    """keep_depths=False counts the logged levels into reached and the depth sums (a log of n
    entries, flushed as it fills, on 2 threads), as the depths would give them, for 12 and 70
    sources (two passes); saving the missing depths is refused; output= keeps them anyway."""
    if gname == "chain" and kind == "out":
        pytest.skip("(the chain's directed cases are covered by sym and in)")
    g, n, s, d = dataset(root, gname, kind, (3, 2) if gname != "star" else (1, 1))
    for count in (12, 70) if gname != "chain" else (4,):
        srcs = sources_of(gname, n, count)
        r = check_counts(g, n, s, d, srcs, kind, bottom_up=bottom_up, threads=2, **SSD)
    with pytest.raises(GrapheneError, match="kept no depths"):
        r.save(str(tmp_path / "d.npy"))
    r2 = msbfs.run(g, sources=srcs, keep_depths=False, output=str(tmp_path / "d2.npy"), **SSD)
    assert r2.depths is not None and np.array_equal(r2.reached, r.reached)


@pytest.mark.parametrize("bottom_up", [True, "always"])
def test_log_flushed_every_few_levels(bottom_up, root, monkeypatch):
    # a flush every 2 levels: the first writes every entry (-1 included), the later ones only the
    # logged bits; depths, reached and closeness must not change
    monkeypatch.setattr(msbfs.depths, "_MAX_LOG_LEVELS", 2)
    for gname in ("powerlaw", "disconnected"):
        g, n, s, d = dataset(root, gname, "sym", (3, 2))
        check(g, n, s, d, sources_of(gname, n, 70), "sym", bottom_up=bottom_up, threads=2, **SSD)
        check_counts(g, n, s, d, sources_of(gname, n, 70), "sym", bottom_up=bottom_up,
                     threads=2, **SSD)


@pytest.mark.parametrize("kind", ["sym", "in"])
@pytest.mark.parametrize("gname", ["star", "powerlaw", "disconnected"])
def test_keep_edges_zero(gname, kind, root):
    # no short lists kept: every bottom-up level reads them again; the same depths
    g, n, s, d = dataset(root, gname, kind, (3, 2))
    for bottom_up in (True, "always"):
        check(g, n, s, d, sources_of(gname, n, 12), kind, bottom_up=bottom_up, threads=2,
              keep_edges=0, **SSD)
    with pytest.raises(Exception, match="keep_edges"):
        msbfs.run(g, sources=[0], keep_edges=-1, **SSD)


@pytest.mark.parametrize("gname,count,max_levels",
                         [("star", 70, 256), ("star", 33, 2), ("powerlaw", 33, 256),
                          ("disconnected", 12, 256), ("chain", 4, 256)])
def test_depths_written_back_to_the_file(gname, count, max_levels, root, tmp_path, monkeypatch):
    # an on-disk depths larger than half the memory left goes back to its file span by span
    # (sync_file_range, then its pages dropped) as the first flush writes it: small spans so
    # every thread hands back many; later flushes (forced every 2 levels, the chain's 256-level
    # cap, a second pass of sources) then write into pages read back from the file
    monkeypatch.setattr(msbfs, "memory_available", lambda: 0)
    monkeypatch.setattr(msbfs.depths, "_SPAN", 2048)    # 8 KB of a row: a whole page or two
    monkeypatch.setattr(msbfs.depths, "_TILE", 256)
    monkeypatch.setattr(msbfs.depths, "_MAX_LOG_LEVELS", max_levels)
    from graphene_py.iterator import memory as mem
    used = []
    real = mem.WriteBack.finish

    def finish(self, token):
        used.append(token is not None)
        return real(self, token)
    monkeypatch.setattr(mem.WriteBack, "finish", finish)
    g, n, s, d = dataset(root, gname, "sym", (3, 2))
    out = str(tmp_path / "depths.npy")
    srcs = sources_of(gname, n, count)
    r = check(g, n, s, d, srcs, "sym", threads=2, output=out, **SSD)
    assert isinstance(r.depths, np.memmap)
    assert any(used) or n < 3000          # rows of a few pages: spans hold no whole page
    assert np.array_equal(np.load(out), ref_depths(n, s, d, srcs, True))


def test_log_room_bound_saves_a_flush(root, tmp_path, monkeypatch):
    # the log makes room only for what the next level can find (vertices still missing a live
    # source's bit), not n per level: a power-law graph's levels all fit in one flush
    flushes = []
    real = msbfs.depths.Log.flush

    def flush(self, background=False):
        flushes.append(self.init)
        return real(self, background)
    monkeypatch.setattr(msbfs.depths.Log, "flush", flush)
    monkeypatch.setattr(msbfs, "memory_available", lambda: 0)    # written back: no early flush
    real_init = msbfs.depths.Log.__init__

    def init(self, *args, entries=None, **kw):          # the default log of 2n entries
        real_init(self, *args, **kw)
    monkeypatch.setattr(msbfs.depths.Log, "__init__", init)
    g, n, s, d = dataset(root, "powerlaw", "sym", (1, 1))
    check(g, n, s, d, sources_of("powerlaw", n, 32), "sym", threads=2,
          output=str(tmp_path / "d.npy"), **SSD)
    assert flushes == [True]


def test_written_back_log_holds_n_entries(root, tmp_path, monkeypatch):
    # depths written back: a log of n entries (what the memory plan counts), flushed as often as
    # the levels need; on this graph the levels log more than n words, so some flushes write into
    # pages read back from the file, and the depths stay exact
    sizes, flushes = [], []
    real_init, real_flush = msbfs.depths.Log.__init__, msbfs.depths.Log.flush

    def init(self, *args, **kw):
        real_init(self, *args, **kw)
        sizes.append(len(self.v))

    def flush(self, background=False):
        flushes.append(self.init)
        return real_flush(self, background)
    monkeypatch.setattr(msbfs.depths.Log, "__init__", init)
    monkeypatch.setattr(msbfs.depths.Log, "flush", flush)
    monkeypatch.setattr(msbfs, "memory_available", lambda: 0)
    g, n, s, d = dataset(root, "powerlaw", "sym", (1, 1))
    check(g, n, s, d, sources_of("powerlaw", n, 32), "sym", threads=2,
          output=str(tmp_path / "d.npy"), **SSD)
    assert sizes == [max(n, 1024)] and flushes[0] and len(flushes) >= 2 and not any(flushes[1:])


def test_memory_available_is_bounded_by_a_cgroup_or_ram():
    from graphene_py.iterator.memory import memory_available
    avail = memory_available()
    with open("/proc/meminfo") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
    assert 0 < avail <= info["MemAvailable"] * 1.1 + (64 << 20)
