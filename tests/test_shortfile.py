"""The short-list file: every list of degree 1..D written again, grouped by degree, at partition
(partition/short.py), and masked supersteps served from it in RAM (iterator/shortfile.py; k-core
membership's first round).

The file must hold exactly the lists a naive adjacency gives (each group's vertices in order, each
list sorted, D as the size rule says) for undirected and directed datasets, 1x1 and 3x2 grids, on
the shared nasty graphs; k-core membership through it must equal the naive peel and the run that
reads every list from the partition files, also when only part of round 1's lists are in it;
a damaged or truncated file must be an error naming it, never a wrong answer; a run without room
in its cache budget, or with weights, must not use it.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from graphene_py import Graph
from graphene_py.algos import kcore
from graphene_py.cli import main
from graphene_py.errors import DatasetError
from graphene_py.integrity import DamagedDataError
from graphene_py.iterator.edgemap import EdgeMap
from graphene_py.iterator.memory import CacheBudget
from graphene_py.partition import partition_arrays, short as pshort

from . import graphs
from .test_kcore import Case, naive_peel

SSD = {"engine": "uring", "buffer_mb": 2, "threads": 2}
ROOM = 1 << 30


def _disks(root, k=2):
    out = [os.path.join(root, f"d{i}") for i in range(k)]
    for d in out:
        os.makedirs(d, exist_ok=True)
    return out


def _part(root, tg, kind, grid, name, **kw):
    R, C = grid
    return partition_arrays(tg.src, tg.dst, num_vertices=tg.n, disks=_disks(root), name=name,
                            rows=R, cols=C, symmetrize=kind == "sym", in_edges=True, force=True,
                            register=False, **kw)


def _read_groups(g, direction):
    """{degree: [(vertex, list), ...]} as the file holds them."""
    ent, path = g.short_lists(direction)
    dt = np.uint32 if ent["id_width"] == 4 else np.uint64
    recs = np.fromfile(path, dtype=dt)
    assert os.path.getsize(path) == ent["bytes"] and ent["bytes"] % 512 == 0
    out, p = {}, 0
    for d, c in enumerate(ent["counts"], 1):
        out[d] = [(int(recs[p + i * (d + 1)]), recs[p + i * (d + 1) + 1:p + (i + 1) * (d + 1)]
                   .astype(np.int64).tolist()) for i in range(c)]
        p += c * (d + 1)
    assert not recs[p:].any()              # zero padding after the last group
    return out


def _naive_lists(c, direction):
    adj = [set() for _ in range(c.n)]
    for s, d in zip(c.src.tolist(), c.dst.tolist()):
        if direction == "out":
            adj[s].add(d)
        else:
            adj[d].add(s)
    return [sorted(a) for a in adj]


def _want_degree_max(lists, entries):
    per = [0] * (pshort.MAX_DEGREE + 1)
    for a in lists:
        if 1 <= len(a) <= pshort.MAX_DEGREE:
            per[len(a)] += len(a) + 1
    limit = max(entries // pshort.SHARE, pshort.SMALL_ENTRIES)
    D, tot = 0, 0
    for d in range(1, pshort.MAX_DEGREE + 1):
        tot += per[d]
        if tot > limit:
            break
        D = d
    return D if any(per[1:D + 1]) else 0


@pytest.mark.parametrize("grid", [(1, 1), (3, 2)])
@pytest.mark.parametrize("kind", ["sym", "in"])
@pytest.mark.parametrize("gname", [f.__name__ for f in graphs.ALL])
def test_file_holds_the_short_lists(gname, kind, grid, tmp_path, monkeypatch):
    """Every list of degree 1..D, grouped by degree, in vertex order; D by the size rule (here
    with a small floor, so that the share decides on these graphs too)."""
    monkeypatch.setattr(pshort, "SMALL_ENTRIES", 64)
    tg = graphs.by_name(gname)
    c = Case(tg, kind)
    g = _part(str(tmp_path), tg, kind, grid, "s")
    for direction in ("out", "in"):
        lists = _naive_lists(c, direction)
        D = _want_degree_max(lists, len(c.src))
        got = g.short_lists(direction)
        if D == 0:
            assert got is None
            continue
        assert len(got[0]["counts"]) == D
        groups = _read_groups(g, direction)
        for d in range(1, D + 1):
            want = [(v, a) for v, a in enumerate(lists) if len(a) == d]
            assert groups[d] == want, (direction, d)
    if kind == "sym" and g.short_lists("out"):      # undirected: one file for both directions
        assert g.short_lists("in")[1] == g.short_lists("out")[1]
    assert g.verify() == []
    left = [f for d in g.dirs for f in os.listdir(d) if f.startswith(".spill") or ".rec" in f]
    assert left == []


def test_no_file_without_short_lists(tmp_path):
    """A clique of 40: every degree is 39, above MAX_DEGREE: no file, no manifest section; k-core
    reads the partition files."""
    n = 40
    s, d = np.triu_indices(n, 1)
    g = partition_arrays(s, d, disks=_disks(str(tmp_path), 1), name="k40", symmetrize=True,
                         register=False)
    assert g.manifest["short"] == {"out": None} and g.short_lists("out") is None
    r = kcore.run(g, k=39, membership_only=True, cache=ROOM, **SSD)
    assert r.k_core_size == n and not any(st.get("short_lists") for st in r.supersteps)
    res = CliRunner().invoke(main, ["info", g.path])
    assert res.exit_code == 0 and "short lists none (no lists of degree 1..32" in res.output


def _as_made_before(g):
    """The dataset as an older graphene_py left it: no short-list file, no manifest section
    (every copy resealed, and the CURRENT pointers' seals with them)."""
    import json
    from graphene_py import store
    g.close()
    for ent, path in list(g._short_files()):
        os.remove(path)
    for disk, v in zip(g.disks, g.dirs):
        mp = os.path.join(v, "manifest.json")
        m = json.load(open(mp))
        m.pop("short")
        m = store.seal(m)
        json.dump(m, open(mp, "w"))
        cp = os.path.join(disk, g.name, "CURRENT")
        cur = json.load(open(cp))
        cur["manifest_crc"] = m["manifest_crc"]
        json.dump(cur, open(cp, "w"))
    return Graph.open(g.path)


def test_a_dataset_made_before_the_files_runs_as_before(tmp_path):
    tg = graphs.by_name("powerlaw")
    c = Case(tg, "sym")
    g = _as_made_before(_part(str(tmp_path), tg, "sym", (2, 2), "old"))
    assert "short" not in g.manifest and g.short_lists("out") is None and g.verify() == []
    r = kcore.run(g, k=5, membership_only=True, cache=ROOM, **SSD)
    assert _steps_short(r) == 0
    assert np.array_equal(r.in_k_core, naive_peel(c.n, c.src, c.dst, 5, False))
    res = CliRunner().invoke(main, ["info", g.path])
    assert res.exit_code == 0 and "made before graphene_py wrote them" in res.output


def _steps_short(r):
    return sum(int(st.get("short_lists", 0)) for st in r.supersteps)


@pytest.mark.parametrize("grid", [(1, 1), (3, 2)])
@pytest.mark.parametrize("kind", ["sym", "in"])
@pytest.mark.parametrize("gname", [f.__name__ for f in graphs.ALL])
def test_kcore_membership_from_the_file(gname, kind, grid, tmp_path):
    """Round 1 served from the file: the naive peel's answer, as without a cache (every list from
    the partition files); the file used wherever round 1 has a vertex in it."""
    tg = graphs.by_name(gname)
    c = Case(tg, kind)
    g = _part(str(tmp_path), tg, kind, grid, "k")
    ent = g.short_lists("out")
    deg = np.zeros(c.n, dtype=np.int64)
    for a in (c.src, c.dst) if kind != "sym" else (c.src,):
        deg += np.bincount(a, minlength=c.n) if c.n else 0
    for k in c.ks():
        r = kcore.run(g, k=k, membership_only=True, cache=ROOM, **SSD)
        want = naive_peel(c.n, c.src, c.dst, k, kind != "sym")
        assert np.array_equal(r.in_k_core, want), k
        if k == 3:          # (test_kcore runs every K without a cache)
            plain = kcore.run(g, k=k, membership_only=True, **SSD)
            assert np.array_equal(plain.in_k_core, want) and _steps_short(plain) == 0
        if ent is not None and ((deg >= 1) & (deg < k)).any():
            assert _steps_short(r) > 0, k


@pytest.mark.parametrize("gname", ["powerlaw", "star", "grid", "isolated_ends"])
def test_kcore_lists_partly_in_the_file(gname, tmp_path, monkeypatch):
    """A file that holds only degrees 1..2: round 1's longer lists come from the partition files
    in the same superstep (both parts seen in its stats), kept lists included."""
    monkeypatch.setattr(pshort, "MAX_DEGREE", 2)
    tg = graphs.by_name(gname)
    c = Case(tg, "sym")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "p")
    assert len(g.short_lists("out")[0]["counts"]) == 2
    both = False
    for k in c.ks():
        r = kcore.run(g, k=k, membership_only=True, cache=ROOM, **SSD)
        assert np.array_equal(r.in_k_core, naive_peel(c.n, c.src, c.dst, k, False)), k
        st = r.supersteps[0] if r.supersteps else {}
        both |= bool(st.get("short_lists")) and st.get("frontier", 0) > 0
    assert both


def test_round_one_reads_only_the_file(tmp_path):
    """powerlaw, K = 3: every round-1 list is in the file, so round 1 reads groups 1..cap-1 of
    it and nothing from the partition files; later rounds read from the partition files."""
    tg = graphs.by_name("powerlaw")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "r")
    r = kcore.run(g, k=3, membership_only=True, cache=ROOM, **SSD)
    st = r.supersteps[0]
    assert st["mode"] == "short lists" and st["requests"] == 0
    ent = g.short_lists("out")[0]
    assert pshort.group_bytes(ent, 2) <= st["bytes_read"] <= pshort.group_bytes(ent, 32)
    assert st["bytes_read"] < g.partitions[0].adj_bytes // 4
    assert st["short_lists"] == int(((deg := np.bincount(Case(tg, "sym").src,
                                                         minlength=tg.n)) >= 1).sum()
                                    - (deg >= 3).sum()) + r.kept_lists


def test_no_room_in_the_budget_reads_the_partition_files(tmp_path):
    tg = graphs.by_name("powerlaw")
    c = Case(tg, "sym")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "b")
    r = kcore.run(g, k=4, membership_only=True, cache=CacheBudget(4096), **SSD)
    assert _steps_short(r) == 0
    assert np.array_equal(r.in_k_core, naive_peel(c.n, c.src, c.dst, 4, False))
    r = kcore.run(g, k=4, membership_only=True, in_memory=True, threads=2)
    assert _steps_short(r) == 0


def test_weighted_reads_are_not_served_from_the_file(tmp_path):
    """The file holds IDs only: an EdgeMap that reads weights gets None; k-core (no weights) on
    a weighted dataset uses it."""
    tg = graphs.by_name("powerlaw")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "w", weights=tg.weights)
    with EdgeMap(g, weights=True, cache=ROOM, **SSD) as em:
        assert em.short_lists("out") is None
    with EdgeMap(g, cache=ROOM, **SSD) as em:
        sf = em.short_lists("out", upto=3)
        assert sf is not None and sf.degree_max == 3
        assert em.short_lists("out") is sf
        em.drop_short_lists("out")
    c = Case(tg, "sym")
    r = kcore.run(g, k=5, membership_only=True, cache=ROOM, **SSD)
    assert _steps_short(r) > 0
    assert np.array_equal(r.in_k_core, naive_peel(c.n, c.src, c.dst, 5, False))


def test_budget_given_back(tmp_path):
    tg = graphs.by_name("powerlaw")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "g")
    b = CacheBudget(ROOM)
    with EdgeMap(g, cache=b, **SSD) as em:
        left = b.left
        sf = em.short_lists("out")
        assert b.left == left - sf.bytes
    assert b.left == b.total


def _flip(path, off):
    with open(path, "r+b") as f:
        f.seek(off)
        x = f.read(1)
        f.seek(off)
        f.write(bytes([x[0] ^ 0x10]))


def test_damaged_file_is_an_error_naming_it(tmp_path):
    tg = graphs.by_name("powerlaw")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "dmg")
    ent, path = g.short_lists("out")
    off = pshort.group_bytes(ent, 1) + 5          # a byte of the lists of degree 2
    _flip(path, off)
    g = Graph.open(g.path)
    with pytest.raises(DamagedDataError, match=r"degree 2.*CRC32C") as e:
        kcore.run(g, k=4, membership_only=True, cache=ROOM, **SSD)
    assert path in str(e.value)
    assert any(path in p for p in g.verify())
    res = CliRunner().invoke(main, ["run", "kcore", "--k", "4", "--membership-only", "-g", g.path,
                                    "-t", "2"], env={"GRAPHENE_SMALL_EDGES": "0"})
    assert res.exit_code == 1 and "Error: damaged data" in res.output and path in res.output
    assert "Traceback" not in res.output
    # the run that needs only degree 1 is unharmed (the groups are checked as they are read)
    c = Case(tg, "sym")
    r = kcore.run(g, k=2, membership_only=True, cache=ROOM, **SSD)
    assert np.array_equal(r.in_k_core, naive_peel(c.n, c.src, c.dst, 2, False))


def test_out_of_range_id_with_a_matching_crc_is_caught(tmp_path, monkeypatch):
    """A record whose ID is no vertex (its group's CRC32C recomputed): an error, no write
    outside the state."""
    from graphene_py import _uring
    tg = graphs.by_name("powerlaw")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "oob")
    ent, path = g.short_lists("out")
    recs = np.fromfile(path, dtype=np.uint32)
    recs[1] = g.num_vertices + 5                   # the first list of degree 1
    recs.tofile(path)
    a, b = 0, pshort.group_bytes(ent, 1)
    crc = f"{_uring.crc32c(recs.view(np.uint8)[a:b], 0):08x}"
    real = Graph.short_lists

    def patched(self, direction="out"):
        got = real(self, direction)
        if got is not None:
            got = (dict(got[0], crc32c=[crc] + got[0]["crc32c"][1:]), got[1])
        return got
    monkeypatch.setattr(Graph, "short_lists", patched)
    with pytest.raises(DamagedDataError, match="not a vertex"):
        kcore.run(g, k=3, membership_only=True, cache=ROOM, **SSD)


def test_truncated_file_is_caught_at_open(tmp_path):
    tg = graphs.by_name("powerlaw")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "tr")
    ent, path = g.short_lists("out")
    os.truncate(path, ent["bytes"] - 512)
    with pytest.raises(DatasetError, match="short lists|has .* bytes"):
        Graph.open(g.path)
    os.remove(path)
    with pytest.raises(DatasetError, match="missing file"):
        Graph.open(g.path)


def test_cli_run_uses_the_file(tmp_path):
    """`graphene run kcore --membership-only` (the default cache): the first superstep's line
    says how many lists came from the file; the answer passes verification."""
    tg = graphs.by_name("powerlaw")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "cli")
    res = CliRunner().invoke(main, ["run", "kcore", "--k", "4", "--membership-only", "-g", g.path,
                                    "-t", "2", "-v"], env={"GRAPHENE_SMALL_EDGES": "0"})
    assert res.exit_code == 0, res.output
    assert "short lists" in res.output and "Verification: PASS" in res.output


def test_eight_byte_ids(tmp_path):
    """A dataset of 8-byte IDs: the file's records are 8 bytes each; k-core through it."""
    tg = graphs.by_name("powerlaw")
    c = Case(tg, "sym")
    g = _part(str(tmp_path), tg, "sym", (1, 1), "w8", id_width=8)
    ent = g.short_lists("out")[0]
    assert ent["id_width"] == 8
    lists = _naive_lists(c, "out")
    groups = _read_groups(g, "out")
    for d in range(1, len(ent["counts"]) + 1):
        assert groups[d] == [(v, a) for v, a in enumerate(lists) if len(a) == d]
    for k in (2, 5, 9):
        r = kcore.run(g, k=k, membership_only=True, cache=ROOM, **SSD)
        assert _steps_short(r) > 0
        assert np.array_equal(r.in_k_core, naive_peel(c.n, c.src, c.dst, k, False)), k
