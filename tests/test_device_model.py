"""The device-aware planner: calibrated device profiles (io/calibrate.py) and the per-superstep choice
of merge gap and request cap (io/planner.DeviceModel), against the real planner and real reads."""
import json
import os
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphene_py as gp
from click.testing import CliRunner
from graphene_py.cli import main
from graphene_py.io import calibrate as C
from graphene_py.io import planner as P
from graphene_py.partition import partition_arrays
from tests import graphs

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _bits(nblocks, blocks):
    bits = np.zeros((nblocks + 63) // 64 + 1, dtype=np.uint64)
    for b in blocks:
        bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return bits


@st.composite
def bitmaps(draw):
    nblocks = draw(st.integers(1, 3000))
    dens = draw(st.sampled_from([0.001, 0.01, 0.1, 0.5, 0.95]))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    on = set(np.flatnonzero(rng.random(nblocks) < dens).tolist())
    for _ in range(draw(st.integers(0, 4))):     # long runs: hubs' lists over many blocks
        a = int(rng.integers(0, nblocks))
        on.update(range(a, min(nblocks, a + int(rng.integers(1, 700)))))
    return nblocks, sorted(on)


@SETTINGS
@given(bitmaps(), st.sampled_from([512, 4096]))
def test_simulate_counts_what_plan_emits(case, bs):
    """For every (gap, cap) at once, the simulator's extents and bytes are exactly those of the
    planner's extent list (the file a whole number of blocks: no end clipping)."""
    nblocks, on = case
    bits = _bits(nblocks, on)
    nbytes = nblocks * bs
    gaps = [0, 1, 2, 7, 16, 100, 5000]
    caps = [bs, 2 * bs, 16384, 131072, 524288]
    got = P.simulate(bits, nbytes, bs, gaps, caps)
    for gi, g in enumerate(gaps):
        for ci, c in enumerate(caps):
            o, ln = P.plan(bits.copy(), nbytes, bs, g, c)
            assert (len(o), int(ln.sum())) == tuple(got[gi, ci]), (g, c)


def test_simulate_accumulates_files():
    a = _bits(200, [1, 2, 50, 199])
    b = _bits(100, [0, 99])
    acc = P.simulate(a, 200 * 512, 512, [0, 64], [131072])
    P.simulate(b, 100 * 512, 512, [0, 64], [131072], acc=acc)
    assert acc[0, 0].tolist() == [3 + 2, (2 + 1 + 1 + 1 + 1) * 512]
    # gap 64: 1-2 and 50 merge (gap 47), 199 alone; file b: 0 and 99 stay apart (gap 98)
    assert acc[1, 0].tolist() == [2 + 2, (50 + 1 + 1 + 1) * 512]


# -- profiles ----------------------------------------------------------------------------------
def _iops_bound(iops=5000.0):
    """A throttled volume: the same IOPS at every size (bandwidth to spare)."""
    return C.Profile(sizes=list(C.SIZES), iops=[iops] * len(C.SIZES))


def _bw_bound(mbps=200.0):
    """A bandwidth-capped device: every size runs at the same MB/s."""
    return C.Profile(sizes=list(C.SIZES), iops=[mbps * 1e6 / s for s in C.SIZES])


def test_profile_interpolates_and_extrapolates():
    p = C.Profile(sizes=[4096, 65536], iops=[40000.0, 10000.0])
    assert p.iops_at(4096) == pytest.approx(40000)
    assert p.iops_at(65536) == pytest.approx(10000)
    mid = float(p.iops_at(16384))                 # log-log: halfway in log size
    assert mid == pytest.approx(20000, rel=1e-9)
    assert p.iops_at(1024) == pytest.approx(40000)
    # past the largest size: bandwidth-bound at the best MB/s seen (65536 x 10000)
    assert p.iops_at(262144) == pytest.approx(65536 * 10000 / 262144)
    assert p.seconds_for(0, 0) == 0
    assert p.seconds_for(20000, 20000 * 16384) == pytest.approx(1.0)


def test_profile_slot_is_where_bandwidth_saturates():
    assert _bw_bound().slot_bytes() == 131072          # flat MB/s: the smallest allowed
    assert _iops_bound().slot_bytes() == 524288        # MB/s grows with size to the end
    sat = C.Profile(sizes=list(C.SIZES), iops=[60000, 50000, 20000, 9000, 6100, 3100])
    assert sat.slot_bytes() == 262144                  # 1.6 GB/s at 256K, within 90% of 1.63


def test_profile_store_round_trip_and_rejects_bad_entries(tmp_path):
    p = _iops_bound()
    C.save("block:x", p)
    q = C.lookup("block:x")
    assert q.sizes == p.sizes and q.iops == p.iops
    bad = {"block:old": dict(p.to_dict(), version=0),
           "block:neg": dict(p.to_dict(), iops=[0] * len(C.SIZES)),
           "block:short": dict(p.to_dict(), sizes=[4096], iops=[1.0]),
           "block:junk": "nonsense"}
    C._update(lambda d: d.update(bad))
    for k in bad:
        assert C.lookup(k) is None
    assert set(C.forget(["block:x", "block:junk"])) == {"block:x", "block:junk"}
    assert C.lookup("block:x") is None and "block:old" in C.load_all()


def test_store_is_never_half_written(monkeypatch):
    """A failure while the store is written leaves the old store and no temporary file."""
    from graphene_py import config
    C.save("block:a", _iops_bound())

    def boom(*a, **k):
        raise OSError("disk full")
    with monkeypatch.context() as m:
        m.setattr(C.json, "dump", boom)
        with pytest.raises(OSError):
            C.save("block:b", _bw_bound())
    assert set(C.load_all()) == {"block:a"}
    assert not [f for f in os.listdir(config.home_dir()) if f.startswith(".devices.")
                and f != ".devices.lock"]


def test_cgroup_key(tmp_path, monkeypatch):
    v1 = tmp_path / "v1"
    v1.write_text("12:memory:/m\n5:blkio:/slow\n0::/x\n")
    assert C.cgroup_of(str(v1)) == "/slow"
    v2 = tmp_path / "v2"
    v2.write_text("0::/user.slice/a\n")
    assert C.cgroup_of(str(v2)) == "/user.slice/a"
    root = tmp_path / "root"
    root.write_text("5:blkio:/\n")
    assert C.cgroup_of(str(root)) == ""
    monkeypatch.setattr(C, "cgroup_of", lambda *a: "/slow")
    assert C.profile_key(str(tmp_path)).endswith("@/slow")
    assert C.profile_key(str(tmp_path / "missing")) is None


# -- the choice --------------------------------------------------------------------------------
def _grid_best(bits, nbytes, bs, profile, model):
    """Brute force: plan every candidate with the real planner and time it with the profile."""
    best = None
    for g in model.gaps:
        for c in model.caps:
            o, ln = P.plan(bits.copy(), nbytes, bs, int(g), int(c))
            t = float(profile.seconds_for(len(o), int(ln.sum()))) + len(o) * model.extent_cost
            best = t if best is None else min(best, t)
    return best


def test_choice_is_the_fastest_candidate_and_follows_the_device():
    rng = np.random.default_rng(3)
    nblocks = 40000
    on = np.flatnonzero(rng.random(nblocks) < 0.02)    # scattered lists, 1 in 50 blocks
    bits = _bits(nblocks, on)
    picks = {}
    for name, profile in (("iops", _iops_bound()), ("bw", _bw_bound())):
        model = P.DeviceModel([profile], 512, 524288, 512)
        acc = P.simulate(bits, nblocks * 512, 512, model.gaps, model.caps)[None]
        gap, cap, t = model.choose(acc)
        assert t <= _grid_best(bits, nblocks * 512, 512, profile, model) * P.MODEL_SLACK + 1e-12
        o, ln = P.plan(bits.copy(), nblocks * 512, 512, gap, cap)
        assert float(profile.seconds_for(len(o), int(ln.sum()))) + len(o) * model.extent_cost \
            == pytest.approx(t)
        picks[name] = (gap, cap, len(o), int(ln.sum()))
    # a throttled volume: few IOs, whatever the bytes (the widest gap, large requests);
    # a bandwidth cap: gap bytes cost, so a narrow gap and far fewer bytes
    assert picks["iops"][0] * 512 >= 65536 and picks["iops"][1] >= 262144
    assert picks["bw"][0] < picks["iops"][0]
    assert picks["bw"][3] * 4 < picks["iops"][3]
    assert picks["iops"][2] * 4 < picks["bw"][2]


def test_choice_takes_the_slowest_worker():
    """Two IO workers: the plan is timed on each one's own profile and bytes; the slower decides."""
    model = P.DeviceModel([_bw_bound(1000.0), _iops_bound(2000.0)], 512, 524288, 512)
    rng = np.random.default_rng(4)
    bits = _bits(20000, np.flatnonzero(rng.random(20000) < 0.05))
    one = P.simulate(bits, 20000 * 512, 512, model.gaps, model.caps)
    acc = np.stack([one, one])
    _, _, t = model.choose(acc)
    t_iops_only = P.DeviceModel([_iops_bound(2000.0)], 512, 524288, 512).choose(one[None])[2]
    assert t >= t_iops_only - 1e-12


# -- runs --------------------------------------------------------------------------------------
SSD = {"engine": "uring", "threads": 2, "buffer_mb": 64}


@pytest.fixture(scope="module")
def plg(tmp_path_factory):
    g = graphs.powerlaw(scale=14, edge_factor=16, seed=9)
    d = [str(tmp_path_factory.mktemp("dm") / f"d{i}") for i in range(2)]
    for x in d:
        os.makedirs(x)
    w = np.random.default_rng(9).random(len(g.src)).astype(np.float32) + 0.01
    return partition_arrays(g.src, g.dst, weights=w, num_vertices=g.n, symmetrize=True, disks=d,
                            name="dm",
                            rows=2, cols=2, register=False, durable=False)


def _store(ds, profile):
    for d in ds.disks:
        C.save(C.profile_key(d), profile)


def test_model_plans_fewer_requests_on_an_iops_bound_device_same_answer(plg):
    # (no kept lists: what later levels read again would depend on them, not on the plan alone)
    fixed = gp.bfs(plg, src=0, keep_edges=0, **SSD)
    assert all("io_plan" not in s for s in fixed.supersteps)
    _store(plg, _iops_bound())
    try:
        mod = gp.bfs(plg, src=0, keep_edges=0, **SSD)
        assert np.array_equal(mod.depth, fixed.depth)
        planned = [s for s in mod.supersteps if s["mode"] != "all" and s["extents"]]
        assert planned and all("io_plan" in s for s in planned)
        # larger, merged requests: fewer of them, more bytes
        assert mod.totals()["extents"] < fixed.totals()["extents"]
        assert mod.totals()["bytes_read"] >= fixed.totals()["bytes_read"]
        # a caller's fixed setting wins over the model
        fx = gp.bfs(plg, src=0, max_gap=16, keep_edges=0, **SSD)
        assert all("io_plan" not in s for s in fx.supersteps)
        assert np.array_equal(fx.depth, fixed.depth)
        _store(plg, _bw_bound())
        bw = gp.bfs(plg, src=0, keep_edges=0, **SSD)
        assert np.array_equal(bw.depth, fixed.depth)
        # a bandwidth-bound device reads no gap bytes: no more than the fixed 16-block gap reads
        assert bw.totals()["bytes_read"] <= fixed.totals()["bytes_read"]
    finally:
        C.forget()


@pytest.mark.parametrize("algo", ["wcc", "kcore", "sssp", "pagerank", "pull"])
def test_model_gives_the_same_answers(plg, algo, tmp_path):
    fns = {"wcc": (lambda **kw: gp.wcc(plg, **kw), "labels"),
           "kcore": (lambda **kw: gp.kcore(plg, **kw), "core_number"),
           "sssp": (lambda **kw: gp.sssp(plg, src=0, **kw), "dist"),
           # (converged: both runs within 1e-9 / (1 - alpha) of the fixed point; the default 20
           # iterations stop short of 1e-9 here, where two runs' orders may differ by ~1e-7)
           "pagerank": (lambda **kw: gp.pagerank(plg, tolerance=1e-9, max_iter=200, **kw),
                        "scores"),
           "pull": (lambda **kw: gp.pagerank(plg, variant="pull", tolerance=1e-12, max_iter=30,
                                             **kw), "scores")}
    fn, key = fns[algo]
    ref = getattr(fn(**SSD), key)
    _store(plg, _iops_bound(3000.0))
    try:
        got = getattr(fn(**SSD), key)
    finally:
        C.forget()
    if algo == "pagerank":     # delta PageRank: pushes in completion order, stops at L1 1e-9
        assert np.abs(got - ref).sum() < 5e-8
    elif algo == "pull":       # the same sums, split at other extent boundaries
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-15)
    else:
        assert np.array_equal(got, ref)


# -- measuring, and the command ----------------------------------------------------------------
@pytest.mark.parametrize("engine", ["uring", "pread"])
def test_measure_reads_a_real_file(tmp_path, engine):
    f = tmp_path / "data"
    f.write_bytes(np.random.default_rng(1).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes())
    p = C.measure([str(f)], engine=engine, seconds=0.02, sizes=(4096, 65536, 524288))
    assert p.sizes == [4096, 65536, 524288] and len(p.iops) == 3
    assert all(i > 0 for i in p.iops)
    assert p.engine == engine and p.bytes_over == 4 << 20
    with pytest.raises(ValueError):
        C.measure([str(f)], sizes=(8 << 20,))


def _cli(*args, env=None):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return subprocess.CompletedProcess(args, r.exit_code, r.stdout, r.stderr)


def test_calibrate_command(tmp_path):
    env = dict(os.environ)
    d = tmp_path / "disk"
    d.mkdir()
    r = _cli("calibrate", "--disks", str(d), "--seconds", "0.05", "--json", env=env)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    (key, prof), = got.items()
    assert key == C.profile_key(str(d))
    assert prof["iops"] and min(prof["iops"]) > 0
    assert os.listdir(d) == []                  # the scratch file is gone
    r = _cli("calibrate", "--show", env=env)
    assert r.returncode == 0 and key in r.stdout and "IOPS" in r.stdout
    r = _cli("calibrate", "--forget", "--disks", str(d), env=env)
    assert r.returncode == 0 and key in r.stdout
    assert C.lookup(key) is None
    r = _cli("calibrate", "--disks", str(tmp_path / "nope"), env=env)
    assert r.returncode == 1 and r.stderr.startswith("Error: --disks") and "Traceback" not in r.stderr
    r = _cli("calibrate", "--show", "--forget", env=env)
    assert r.returncode == 2
    # the dataset as `graphene run` takes it too: -g NAME
    r = _cli("calibrate", "-g", "nope", env=env)
    assert r.returncode == 1 and "nope" in r.stderr and "Traceback" not in r.stderr
    r = _cli("calibrate", "x", "-g", "y", env=env)
    assert r.returncode == 2 and "not both" in r.stderr


def test_partition_calibrates_only_big_new_devices(tmp_path, monkeypatch):
    """A small dataset (less than MIN_BYTES on the device) measures nothing and the run says why it
    plans with the fixed sizes; past MIN_BYTES a new device is measured once, not again, and never
    with --no-calibrate."""
    el = tmp_path / "g.el"
    el.write_text("".join(f"{i} {(i * 7 + 1) % 5000}\n" for i in range(60000)))
    d = tmp_path / "d0"
    d.mkdir()
    r = _cli("partition", str(el), "--disks", str(d), "--name", "small")
    assert r.returncode == 0, r.stderr
    assert C.load_all() == {} and "stored for runs" not in r.stderr
    r = _cli("run", "bfs", "-g", "small", "--src", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["io_plan"].startswith("fixed (no device profile")
    monkeypatch.setattr(C, "MIN_BYTES", 1)       # every dataset is big enough now
    monkeypatch.setattr(C, "SECONDS", 0.02)
    r = _cli("partition", str(el), "--disks", str(d), "--name", "small", "--force",
             "--no-calibrate")
    assert r.returncode == 0, r.stderr
    assert C.load_all() == {}
    r = _cli("partition", str(el), "--disks", str(d), "--name", "small", "--force")
    assert r.returncode == 0, r.stderr
    key = C.profile_key(str(d))
    assert f"{key}: 4K" in r.stderr and C.lookup(key) is not None
    when = C.lookup(key).measured_at
    r = _cli("partition", str(el), "--disks", str(d), "--name", "small", "--force")
    assert r.returncode == 0 and C.lookup(key).measured_at == when       # measured once
    r = _cli("run", "bfs", "-g", "small", "--src", "0", "--json")
    assert json.loads(r.stdout)["io_plan"] == f"device model ({key})"


def test_partition_counts_a_devices_bytes_over_all_its_folders(tmp_path, monkeypatch):
    """Two folders of one device, each with less than MIN_BYTES but more together: the device
    is measured (what the dataset puts on the device counts, not what one folder holds)."""
    el = tmp_path / "g.el"
    el.write_text("".join(f"{i} {(i * 7 + 1) % 5000}\n" for i in range(60000)))
    ds = [tmp_path / "d0", tmp_path / "d1"]
    for d in ds:
        d.mkdir()
    r = _cli("partition", str(el), "--disks", *map(str, ds), "--name", "two", "--no-calibrate")
    assert r.returncode == 0, r.stderr
    from graphene_py.graph import Graph
    files = C.dataset_files(Graph.open("two"))
    per = [sum(os.path.getsize(p) for p in files.get(str(d), [])) for d in ds]
    assert min(per) > 0
    key = C.profile_key(str(ds[0]))
    assert key is not None and key == C.profile_key(str(ds[1]))
    monkeypatch.setattr(C, "MIN_BYTES", max(per) + 1)    # more than a folder, less than both
    monkeypatch.setattr(C, "SECONDS", 0.02)
    r = _cli("partition", str(el), "--disks", *map(str, ds), "--name", "two", "--force")
    assert r.returncode == 0, r.stderr
    assert C.lookup(key) is not None and f"{key}: 4K" in r.stderr


def test_bfs_direction_by_time_where_the_device_is_calibrated(plg, monkeypatch):
    """With a calibrated device, BFS's direction is the faster by max(IO at the device's
    bandwidth, compute over the threads); without one, the fewer bytes. Compute made to dominate
    one way or the other flips every level, and the depths stay the same."""
    from graphene_py.algos import bfs as B
    from graphene_py.iterator.edgemap import EdgeMap
    ref = gp.bfs(plg, src=0, bottom_up=False, **SSD)
    by_bytes = gp.bfs(plg, src=0, **SSD)
    dirs = {s["direction"] for s in by_bytes.supersteps}
    assert dirs == {"top-down", "bottom-up"}          # the bytes rule mixes them on this graph
    monkeypatch.setattr(B.Work, "LEARN_EDGES", 1 << 62)
    _store(plg, _bw_bound())
    try:
        with EdgeMap(plg, pull=True, **SSD) as em:
            assert em.io_seconds("out", 10**9) == pytest.approx(10**9 / C.Profile(
                sizes=list(C.SIZES), iops=_bw_bound().iops).bandwidth)
            assert em._pull_wins(100, 1000, None) is False             # bytes alone
            assert em._pull_wins(100, 1000, (10.0, 0.0)) is True       # the push computes long
            assert em._pull_wins(1000, 100, (0.0, 10.0)) is False
        monkeypatch.setattr(B.Work, "PUSH", 1.0)       # a second per frontier edge: pull always
        monkeypatch.setattr(B.Work, "PULL", 1e-15)
        up = gp.bfs(plg, src=0, **SSD)
        assert {s["direction"] for s in up.supersteps} == {"bottom-up"}
        assert np.array_equal(up.depth, ref.depth)
        monkeypatch.setattr(B.Work, "PUSH", 1e-15)     # and the other way round: push always
        monkeypatch.setattr(B.Work, "PULL", 1.0)
        down = gp.bfs(plg, src=0, **SSD)
        assert {s["direction"] for s in down.supersteps} == {"top-down"}
        assert np.array_equal(down.depth, ref.depth)
    finally:
        C.forget()
    C.forget()
    again = gp.bfs(plg, src=0, **SSD)          # no profile: the bytes decide, as before
    assert [s["direction"] for s in again.supersteps] == \
        [s["direction"] for s in by_bytes.supersteps]
