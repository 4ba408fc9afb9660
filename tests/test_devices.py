"""Disk folders on one physical device share one IO worker; separate devices keep one each.

The decision (graphene_py/io/devices.py) is tested with injected device keys and a fake sysfs tree,
since every folder this machine can create lives on one device; the iterator tests check that the
engine is built with the worker mapping (a factory records disk_of) and that results stay exact.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from graphene_py import config
from graphene_py.io import devices as D
from graphene_py.io import engines as E
from graphene_py.io.offsets import decode
from graphene_py.iterator import Frontier, IoIterator
from graphene_py.iterator import session as S
from graphene_py.partition import partition_arrays
from tests import graphs
from tests import graphs as tg
from tests.test_iterator import reference, run_counts

pytestmark = pytest.mark.timeout(120)


# -- the pure decision ------------------------------------------------------------------------
@pytest.mark.parametrize("keys,want", [
    (["block:vda", "block:vda"], [0, 0]),                  # two folders, one disk: one worker
    (["block:nvme0n1", "block:nvme1n1"], [0, 1]),          # two SSDs: one worker each
    ([None, None], [0, 1]),                                # unknown: never merged
    (["block:sda", None, "block:sda", "block:sdb"], [0, 1, 0, 2]),
    (["block:sdb", "block:sda", "block:sdb"], [0, 1, 0]),  # numbered by first appearance
    ([], []),
])
def test_assign_workers(keys, want):
    assert D.assign_workers(keys) == want


def _fake_sysfs(tmp_path, target_rel, files=()):
    """A /sys/dev/block lookalike whose entry for tmp_path's st_dev points at target_rel."""
    st = os.stat(tmp_path)
    mm = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    root = tmp_path / "sys"
    node = root / "devices" / target_rel
    node.mkdir(parents=True)
    for rel in files:
        p = root / "devices" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("1\n")
    (root / "dev" / "block").mkdir(parents=True)
    os.symlink(node, root / "dev" / "block" / mm)
    return str(root / "dev" / "block")


def test_device_key_whole_disk_and_partition(tmp_path):
    sys_root = _fake_sysfs(tmp_path, "pci0/nvme/nvme0n1/nvme0n1p2", ["pci0/nvme/nvme0n1/nvme0n1p2/partition"])
    # a partition resolves to its whole disk: two partitions of one SSD share a worker
    assert D.device_key(str(tmp_path), sys_root) == "block:nvme0n1"


def test_device_key_follows_single_slave(tmp_path):
    # dm-0 (LVM) over one partition of sdb -> sdb
    sys_root = _fake_sysfs(tmp_path, "virtual/block/dm-0",
                           ["pci0/sdb/sdb1/partition"])
    base = tmp_path / "sys" / "devices"
    (base / "virtual/block/dm-0/slaves").mkdir()
    os.symlink(base / "pci0/sdb/sdb1", base / "virtual/block/dm-0/slaves/sdb1")
    assert D.device_key(str(tmp_path), sys_root) == "block:sdb"


def test_device_key_without_sysfs_and_missing(tmp_path):
    st = os.stat(tmp_path)
    key = D.device_key(str(tmp_path), str(tmp_path / "no-sysfs"))
    assert key == f"dev:{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    assert D.device_key(str(tmp_path / "missing")) is None
    # two folders of one filesystem always agree
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert D.device_key(str(tmp_path / "a")) == D.device_key(str(tmp_path / "b")) is not None


def test_describe_sharing():
    lines = D.describe_sharing(["/x", "/y", "/z"], ["block:vda", "block:vdb", "block:vda"],
                               [0, 1, 0])
    assert lines == ["disk folders /x, /z share device vda: one IO worker"]
    assert D.describe_sharing(["/x", "/y"], ["block:a", "block:b"], [0, 1]) == []


# -- the iterator builds its engine per device ------------------------------------------------
@pytest.fixture(scope="module")
def ds3(tmp_path_factory):
    """powerlaw, 2x2 partitions over three folders of this machine's one disk."""
    g = tg.by_name("powerlaw")
    base = tmp_path_factory.mktemp("dev")
    disks = []
    for i in range(3):
        os.makedirs(base / f"d{i}")
        disks.append(str(base / f"d{i}"))
    G = partition_arrays(g.src, g.dst, weights=g.weights, num_vertices=g.n, disks=disks,
                         name="t", rows=2, cols=2, register=False)
    return g, G


class Recorder:
    def __init__(self):
        self.disk_of = None

    def __call__(self, files, disk_of, pool, queue_depth=64, direct=True):
        self.disk_of = np.asarray(disk_of).copy()
        self.queue_depth = queue_depth
        return E.make_engine("uring", files, disk_of, pool, queue_depth=queue_depth, direct=direct)


def _check_counts(it, g):
    n = g.n
    for fr, act in [(Frontier.all(n), None),
                    (Frontier.from_mask(np.arange(n) % 3 == 0), np.arange(n) % 3 == 0)]:
        deg, nsum, _ = reference(g, act)
        d1, s1, _, _, _ = run_counts(it, n, fr)
        assert np.array_equal(d1, deg) and np.array_equal(s1, nsum)


def test_same_device_folders_share_one_worker(ds3):
    g, G = ds3
    file_disks = {p.disk for p in G.partitions if p.num_edges}
    assert len(file_disks) > 1   # the dataset really spans several folders
    rec = Recorder()
    with IoIterator(G, threads=2, engine=rec, weights=True) as it:
        assert it.io_workers == "device" and it.nworkers == 1
        assert set(rec.disk_of.tolist()) == {0}   # every file (and weight file) on worker 0
        assert rec.queue_depth == config.QUEUE_DEPTH   # the whole depth, not a split of it
        assert any("share device" in x for x in it.notes)
        _check_counts(it, g)
    with IoIterator(G, threads=2, engine="uring") as it:
        assert len(it.engine.stats()["per_disk"]) == 1      # one ring, one IO thread
        assert "share device" in E.last_notice()
        _check_counts(it, g)


def test_per_folder_workers_on_request(ds3):
    g, G = ds3
    rec = Recorder()
    with IoIterator(G, threads=2, engine=rec, io_workers="disk") as it:
        fd = np.array([G.partitions[i].disk for i in it.file_parts])
        assert it.nworkers == len(set(fd.tolist()))
        # workers are the folders, compacted to 0..k-1 in folder order
        assert np.array_equal(rec.disk_of, np.unique(fd, return_inverse=True)[1])
        assert not any("share device" in x for x in it.notes)
        _check_counts(it, g)
    with pytest.raises(ValueError, match="io_workers"):
        IoIterator(G, io_workers="ssd")


def test_separate_devices_keep_their_workers(ds3, monkeypatch):
    g, G = ds3
    # folder i on device "dev<i % 2>": folders 0 and 2 share one, folder 1 has its own
    def folder(path):   # ".../d<i>/t[/version]" -> i
        import re
        return int(re.findall(r"/d(\d+)/", path + "/")[-1])
    monkeypatch.setattr(D, "device_key", lambda path, *a: f"block:dev{folder(path) % 2}")
    rec = Recorder()
    with IoIterator(G, threads=2, engine=rec) as it:
        fd = np.array([G.partitions[i].disk for i in it.file_parts])
        assert set(fd.tolist()) == {0, 1, 2}
        want = (fd == 1).astype(np.int32)   # folders 0, 2 -> worker 0 (first seen); 1 -> 1
        assert it.nworkers == 2
        assert np.array_equal(rec.disk_of, want)
        assert sum("share device dev0" in x for x in it.notes) == 1
        _check_counts(it, g)
    # all on distinct devices: one worker per folder, no note
    monkeypatch.setattr(D, "device_key", lambda path, *a: "block:" + path)
    rec = Recorder()
    with IoIterator(G, threads=2, engine=rec) as it:
        assert it.nworkers == len({G.partitions[i].disk for i in it.file_parts})
        assert not any("share device" in x for x in it.notes)
        _check_counts(it, g)


def test_config_default_is_per_device():
    assert config.IO_WORKERS == os.environ.get("GRAPHENE_IO_WORKERS", "device")


# -- offsets loading --------------------------------------------------------------------------
def test_offsets_loaded_in_parallel_match_files(ds3):
    g, G = ds3
    with IoIterator(G, threads=2) as it:
        for i, p in enumerate(G.partitions):
            want = np.fromfile(p.off_path, dtype="<u8")
            got = decode(it.offs, it.part_base[i], it.part_base[i + 1])
            assert np.array_equal(got, want)
            # held compact: the whole array they were read into is not kept by the Partition
            assert p._off is None


def test_offsets_numpy_path_for_big_endian_hosts(ds3, monkeypatch):
    g, G = ds3
    from graphene_py.graph import Graph
    G = Graph.open(G.dirs[0])   # nothing cached
    monkeypatch.setattr(S.sys, "byteorder", "big")
    with IoIterator(G, threads=2) as it:
        for i, p in enumerate(G.partitions):
            assert np.array_equal(decode(it.offs, it.part_base[i], it.part_base[i + 1]),
                                  np.fromfile(p.off_path, dtype="<u8"))


@pytest.mark.parametrize("damage", ["truncate", "extend", "last"])
def test_offsets_damage_is_a_clear_error(tmp_path, damage):
    from graphene_py.errors import GrapheneError
    from graphene_py.graph import Graph
    g = tg.by_name("powerlaw")
    disks = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    for d in disks:
        os.makedirs(d)
    G = partition_arrays(g.src, g.dst, num_vertices=g.n, disks=disks, name="t", rows=2, cols=2,
                         register=False)
    G = Graph.open(disks[0] + "/t")   # opened (sizes checked) before the file changes
    p = G.partitions[3]
    raw = open(p.off_path, "rb").read()
    if damage == "truncate":
        raw = raw[:-16]
    elif damage == "extend":
        raw = raw + raw[-8:]
    else:
        raw = raw[:-8] + np.array([int(p.num_edges) + 1], "<u8").tobytes()
    with open(p.off_path, "wb") as f:
        f.write(raw)
    with pytest.raises(GrapheneError, match="offsets do not match the manifest|damaged data: .*out_r1_c1.off"):
        IoIterator(G, threads=2)


# -- marking on several threads ---------------------------------------------------------------
def test_parallel_marking_plans_like_serial(ds3, monkeypatch):
    g, G = ds3
    n = g.n
    rng = np.random.default_rng(3)
    from graphene_py.io import planner as PL
    monkeypatch.setattr(PL, "PAR_MARK_QUEUE", 8)
    calls = []
    orig = S.Helpers.run

    def spy(self, job):
        calls.append(1)
        return orig(self, job)
    monkeypatch.setattr(S.Helpers, "run", spy)
    mask = rng.random(n) < 0.2
    ids = np.flatnonzero(rng.random(n) < 0.05).astype(np.int64)
    with IoIterator(G, threads=1) as one, IoIterator(G, threads=3) as three:
        for fr in (Frontier.from_mask(mask), Frontier.from_queue(ids, n)):
            if fr.kind == "queue":
                one.mask[ids] = three.mask[ids] = 1
            a = one._plan(fr)
            calls.clear()
            b = three._plan(fr)
            assert calls, "marking did not run on the helper threads"
            for x, y in zip(a[:3], b[:3]):
                assert np.array_equal(x, y)
            assert a[3:] == b[3:]
            one.mask[:] = three.mask[:] = 0


# --------------------------------------------------------------------------------------------
# distinct real devices: four tmpfs mounts (each its own st_dev), as on a machine with four SSDs
@pytest.fixture(scope="module")
def four_devices(tmp_path_factory):
    import subprocess
    if os.geteuid() != 0:
        pytest.skip("mounting tmpfs needs root")
    root = tmp_path_factory.mktemp("devs")
    mounts = []
    try:
        for i in range(4):
            m = root / f"ssd{i}"
            m.mkdir()
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(m)],
                               capture_output=True, text=True)
            if r.returncode:
                pytest.skip(f"cannot mount tmpfs: {r.stderr.strip()}")
            mounts.append(str(m))
        yield mounts
    finally:
        for m in mounts:
            subprocess.run(["umount", "-l", m], capture_output=True)


def test_distinct_devices_one_worker_each_and_even_bytes(four_devices, tmp_path):
    """A 2x2 dataset over four tmpfs mounts: four devices, four IO workers; a dense superstep
    reads within 5% of the same bytes from each (row-column balance), and BFS and PageRank give
    the answers the same graph gives from one folder."""
    import graphene_py as gp
    g = graphs.powerlaw(scale=13, edge_factor=8, seed=4)
    G4 = partition_arrays(g.src, g.dst, num_vertices=g.n, disks=four_devices, name="four",
                          rows=2, cols=2, symmetrize=True, register=False, durable=False)
    one = tmp_path / "one"
    one.mkdir()
    G1 = partition_arrays(g.src, g.dst, num_vertices=g.n, disks=[str(one)], name="one",
                          rows=1, cols=1, symmetrize=True, register=False, durable=False)
    if len({D.device_key(m) for m in four_devices}) != 4:
        pytest.skip("the tmpfs mounts do not report distinct devices here")
    with IoIterator(G4, threads=2, engine="uring") as it:
        assert it.nworkers == 4 and not any("share device" in x for x in it.notes)
        assert len(it.engine.stats()["per_disk"]) == 4
    pr = gp.pagerank(G4, variant="pull", max_iter=3, tolerance=0, threads=2, engine="uring")
    per = np.array(pr.totals()["bytes_read_per_disk"], dtype=np.float64)
    assert len(per) == 4 and per.min() > 0
    assert per.max() / per.min() <= 1.05, per
    ref = gp.pagerank(G1, variant="pull", max_iter=3, tolerance=0, threads=2)
    np.testing.assert_allclose(pr.scores, ref.scores, rtol=1e-12)
    src = int(np.argmax(G1.degrees("out")))
    assert np.array_equal(gp.bfs(G4, src=src, threads=2).depth,
                          gp.bfs(G1, src=src, threads=2).depth)
