#!/usr/bin/env python3
"""Random-read benchmark of the IO engines against fio, side by side in one run.

For each request size (default 512 B, 4 KB, 16 KB, 64 KB) at queue depth 64 on one real file
(O_DIRECT, page cache dropped before every measurement), it runs fio (--ioengine=io_uring --direct=1
--rw=randread) and then each engine through graphene_py.io.engines.make_engine (uring, liburing,
pread), each reading uniformly random size-aligned extents for --seconds, and prints a markdown
table of IOPS and MB/s with ratios to fio. Measurements of one size are interleaved over --repeats
rounds (fio, engine A, fio, engine B, ...); the table gives each one's median over the rounds and
the median of the per-round ratios to fio (each engine run compared with the fio run just before
it), so a noisy neighbour on the shared CPUs or disk does not favour one side. CPU us/req is the
process CPU time (user + system, all threads) per request: a load-independent efficiency measure.

    sudo .venv/bin/python tools/bench_io.py                      # /tmp/bench_io/file, 2 GiB
    .venv/bin/python tools/bench_io.py --sizes 4096 --variants   # uring with features toggled
    .venv/bin/python tools/bench_io.py --replay /tmp/disk0/bench_kron22_1x1   # real requests

--replay DATASET (a 1x1 dataset): realistic requests instead of uniform ones. Frontiers of the
sizes of BFS levels on Kronecker graphs (--frontiers, vertices drawn with probability proportional
to degree, as a BFS level reaches them) are translated into extents by the IoIterator's own
bitmap + planner (max_gap 16 blocks, 16 KB cap; 128 KB for supersteps marking >= 16 MB). The very
same extent list is read by every engine and, as a fio iolog v2 trace (--read_iolog,
--replay_no_stall: as fast as the queue allows), by fio with io_uring at the same queue depth.

The engine's consumer is one Python thread calling get(0, 256) and releasing the slots at once,
i.e. the engine's own overhead with no compute. Targets (issue 3): uring >= 90% of fio's IOPS at 4 KB
and >= 90% of fio's MB/s at 16 KB.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from graphene_py.io.buffers import BufferPool  # noqa: E402


def ensure_file(path: str, gib: float) -> None:
    want = int(gib * (1 << 30))
    if os.path.exists(path) and os.path.getsize(path) >= want:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    print(f"creating {path} ({gib} GiB of random bytes)...", file=sys.stderr)
    chunk = os.urandom(64 << 20)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for i in range(0, want, len(chunk)):
            f.write(chunk[: min(len(chunk), want - i)])
    os.replace(tmp, path)


def ensure_fio() -> bool:
    """fio on PATH, installing it with apt-get (Debian/Ubuntu, as root) when missing."""
    if shutil.which("fio"):
        return True
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    print("fio not found: installing it with apt-get ...", file=sys.stderr)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "fio"]):
        if subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            return False
    return shutil.which("fio") is not None


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def run_fio(path: str, bs: int, qd: int, seconds: float, extra=()) -> dict:
    cmd = ["fio", "--name=bench", f"--filename={path}", "--ioengine=io_uring", "--direct=1",
           "--rw=randread", f"--bs={bs}", f"--iodepth={qd}", f"--runtime={seconds}", "--time_based",
           "--numjobs=1", "--norandommap", "--randrepeat=0", "--output-format=json", *extra]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out[out.index("{"):])["jobs"][0]
    job = j["read"]
    cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * j["job_runtime"] / 1000.0
    return {"iops": float(job["iops"]), "mbs": float(job["bw_bytes"]) / 1e6,
            "cpu_us": cpu_s / max(1, job["total_ios"]) * 1e6}


def replay_extents(dataset: str, sizes, seed: int = 1):
    """(adjacency file, offsets, lengths) of the planned extents of degree-biased random frontiers
    of the given sizes on a 1x1 dataset, concatenated in plan order."""
    from graphene_py.graph import Graph
    from graphene_py.iterator import Frontier, IoIterator
    g = Graph.open(dataset)
    if len(g.partitions) != 1:
        raise SystemExit(f"--replay wants a 1x1 dataset ({g.name} has {len(g.partitions)} partitions)")
    deg = g.degrees("out")
    nz = np.flatnonzero(deg)
    p = deg[nz] / deg[nz].sum()
    rng = np.random.default_rng(seed)
    offs, lens = [], []
    with IoIterator(g, "out", engine="pread", threads=1) as it:
        for k in sizes:
            mask = np.zeros(g.num_vertices, dtype=np.uint8)
            mask[rng.choice(nz, size=min(k, len(nz)), replace=True, p=p)] = 1
            _, o, ln, _, _, _ = it._plan(Frontier.from_mask(mask))
            offs.append(o)
            lens.append(ln)
    return g.partitions[0].adj_path, np.concatenate(offs), np.concatenate(lens)


def run_fio_replay(path: str, offs, lens, qd: int, log_path: str) -> dict:
    """fio replaying exactly these reads (iolog v2) with io_uring, O_DIRECT, queue depth qd."""
    with open(log_path, "w") as f:
        f.write(f"fio version 2 iolog\n{path} add\n{path} open\n")
        for o, ln in zip(offs.tolist(), lens.tolist()):
            f.write(f"{path} read {o} {ln}\n")
        f.write(f"{path} close\n")
    cmd = ["fio", "--name=replay", f"--read_iolog={log_path}", "--replay_no_stall=1",
           "--ioengine=io_uring", "--direct=1", f"--iodepth={qd}", "--output-format=json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out[out.index("{"):])["jobs"][0]
    job = j["read"]
    secs = j["job_runtime"] / 1000.0
    cpu_s = (j["usr_cpu"] + j["sys_cpu"]) / 100.0 * secs
    return {"iops": job["total_ios"] / secs, "mbs": job["io_bytes"] / secs / 1e6,
            "cpu_us": cpu_s / max(1, job["total_ios"]) * 1e6, "requests": job["total_ios"]}


def drain(eng) -> int:
    """Consume every completion of what was submitted (releasing the slots at once); their count."""
    done = 0
    while True:
        got = eng.get(0, 256)
        if len(got) == 0:
            return done
        eng.release(got[:, 1])
        done += len(got)


def run_engine_replay(name: str, path: str, offs, lens, qd: int, pool_kind="auto") -> dict:
    from graphene_py.io.engines import make_engine
    slot = int(max(4096, (int(lens.max()) + 4095) // 4096 * 4096))
    pool = BufferPool(slot, qd + 64, hugepages=pool_kind)
    if pool_kind not in ("auto", pool.kind):
        kind = pool.kind
        pool.close()
        raise RuntimeError(f"asked for a {pool_kind} pool, got {kind}")
    eng = make_engine(name, [path], [0], pool, queue_depth=qd, direct=True)
    done = 0
    try:
        if not eng.direct:
            raise RuntimeError(f"{name}: O_DIRECT not in effect ({eng.notes})")
        t0 = time.perf_counter()
        c0 = time.process_time()
        eng.submit(np.zeros(len(offs), np.int32), offs, lens)
        done = drain(eng)
        el = time.perf_counter() - t0
        cpu = time.process_time() - c0
    finally:
        eng.close()
        pool.close()
    if done != len(offs):
        raise RuntimeError(f"{name}: {done} of {len(offs)} reads completed")
    return {"iops": done / el, "mbs": float(lens.sum()) / el / 1e6, "cpu_us": cpu / done * 1e6}


def reserve_hugepages(pages: int):
    """Reserve `pages` 2 MB hugepages (root); returns the previous nr_hugepages, or None."""
    path = "/proc/sys/vm/nr_hugepages"
    try:
        with open(path) as f:
            old = int(f.read())
        with open(path, "w") as f:
            f.write(str(old + pages))
        return old
    except OSError:
        return None


def replay_pools(args, path, offs, lens):
    """uring over the replay list with each buffer-pool kind (hugetlb reserved for the run)."""
    kinds = [k for k in args.pools.split(",") if k]
    slot = int(max(4096, (int(lens.max()) + 4095) // 4096 * 4096))
    need = -(-(slot * (args.qd + 64)) // (2 << 20)) + 1
    old = reserve_hugepages(need) if "hugetlb" in kinds else None
    res, notes = {}, {}
    try:
        for rep in range(args.repeats):
            for k in kinds:
                drop_caches()
                try:
                    r = run_engine_replay("uring", path, offs, lens, args.qd, pool_kind=k)
                except (RuntimeError, OSError) as e:
                    notes[k] = str(e)
                    continue
                res.setdefault(k, []).append(r)
                print(f"  round {rep} pool {k}: {r['iops']:.0f} IOPS", file=sys.stderr)
    finally:
        if old is not None:
            with open("/proc/sys/vm/nr_hugepages", "w") as f:
                f.write(str(old))
    print(f"\nBuffer pool kinds, uring over the same replay, median of {args.repeats} interleaved "
          f"rounds\n\n| pool | IOPS | MB/s | CPU us/req |\n|---|---:|---:|---:|")
    for k in kinds:
        if k in res:
            r = {x: float(np.median([y[x] for y in res[k]])) for x in ("iops", "mbs", "cpu_us")}
            print(f"| {k} | {r['iops']:.0f} | {r['mbs']:.0f} | {r['cpu_us']:.1f} |")
        else:
            print(f"| {k} | skipped: {notes.get(k, 'unavailable')} | | |")


def replay_main(args, have_fio):
    sizes = [int(x) for x in args.frontiers.split(",")]
    path, offs, lens = replay_extents(args.replay, sizes)
    hist = np.bincount(np.minimum(lens // 4096, 32))
    print(f"replay: {len(offs):,} extents, {lens.sum() / 1e6:.1f} MB from {path}; sizes: "
          f"{np.count_nonzero(lens <= 4096) / len(lens):.0%} <= 4 KB, "
          f"{np.count_nonzero(lens <= 16384) / len(lens):.0%} <= 16 KB, max {lens.max() // 1024} KB",
          file=sys.stderr)
    del hist
    results = {}
    engines = [e for e in args.engines.split(",") if e]
    log_path = os.path.join(os.path.dirname(args.file), "replay.iolog")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    for rep in range(args.repeats):
        for eng in engines:
            if have_fio:
                drop_caches()
                f = run_fio_replay(path, offs, lens, args.qd, log_path)
                results.setdefault("fio", []).append(f)
            drop_caches()
            r = run_engine_replay(eng, path, offs, lens, args.qd)
            if have_fio:
                r["ratio_iops"] = r["iops"] / f["iops"]
            results.setdefault(eng, []).append(r)
            print(f"  round {rep} {eng}: {r['iops']:.0f} IOPS {r['mbs']:.0f} MB/s"
                  + (f" (fio just before: {f['iops']:.0f} IOPS)" if have_fio else ""), file=sys.stderr)
    print(f"\nReplay of {len(offs):,} planned extents ({lens.sum() / 1e6:.0f} MB, frontiers "
          f"{args.frontiers}) of {args.replay}, QD {args.qd}, O_DIRECT, median of {args.repeats} "
          f"interleaved rounds\n")
    print("| engine | IOPS | MB/s | IOPS / fio | CPU us/req |")
    print("|---|---:|---:|---:|---:|")
    for label in (["fio"] if have_fio else []) + engines:
        rs = results.get(label)
        if not rs:
            continue
        r = {k: float(np.median([x[k] for x in rs])) for k in ("iops", "mbs", "cpu_us")}
        ratio = f"{np.median([x['ratio_iops'] for x in rs]):.2f}" if have_fio and label != "fio" else (
            "1.00" if have_fio else "-")
        print(f"| {label} | {r['iops']:.0f} | {r['mbs']:.0f} | {ratio} | {r['cpu_us']:.1f} |")
    if args.pools:
        replay_pools(args, path, offs, lens)


def run_engine(name: str, path: str, bs: int, qd: int, seconds: float, batch: int, **kw) -> dict:
    from graphene_py.io.engines import make_engine
    size = os.path.getsize(path)
    slot = max(bs, 4096)
    pool = BufferPool(slot, qd + 64, hugepages="auto")
    eng = make_engine(name, [path], [0], pool, queue_depth=qd, direct=True, **kw)
    rng = np.random.default_rng(12345)
    nblk = size // bs
    fids = np.zeros(batch, dtype=np.int32)
    lens = np.full(batch, bs, dtype=np.int64)
    done = 0
    try:
        if not eng.direct:
            raise RuntimeError(f"{name}: O_DIRECT not in effect ({eng.notes})")
        t0 = time.perf_counter()
        c0 = time.process_time()
        while True:
            offs = rng.integers(0, nblk, batch, dtype=np.int64) * bs
            eng.submit(fids, offs, lens)
            done += drain(eng)
            el = time.perf_counter() - t0
            if el >= seconds:
                break
        cpu = time.process_time() - c0
        st = eng.stats()
    finally:
        eng.close()
        pool.close()
    return {"iops": done / el, "mbs": done * bs / el / 1e6, "stats": st, "cpu_us": cpu / done * 1e6}


def fmt_size(b: int) -> str:
    return f"{b // 1024} KB" if b >= 1024 else f"{b} B"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", default="/tmp/bench_io/file")
    ap.add_argument("--gib", type=float, default=2.0, help="create the file with this size if missing")
    ap.add_argument("--sizes", default="512,4096,16384,65536")
    ap.add_argument("--qd", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20000, help="requests per submitted batch")
    ap.add_argument("--engines", default="uring,liburing,pread")
    ap.add_argument("--no-fio", action="store_true")
    ap.add_argument("--variants", action="store_true",
                    help="also run uring with fixed buffers / fixed files / defer-taskrun turned off")
    ap.add_argument("--uring", action="append", default=[], metavar="KEY=VAL[,KEY=VAL]",
                    help="an extra uring run with these keyword arguments (repeatable), "
                         "e.g. complete_batch=8")
    ap.add_argument("--replay", default=None, metavar="DATASET",
                    help="replay planned extents of random frontiers on this 1x1 dataset")
    ap.add_argument("--frontiers", default="2000,30000,500000,1800000",
                    help="--replay: frontier sizes (vertices)")
    ap.add_argument("--pools", default="",
                    help="--replay: also compare buffer-pool kinds for uring, e.g. hugetlb,thp,normal "
                         "(hugetlb pages are reserved for the run when root, then released)")
    args = ap.parse_args(argv)
    if args.replay:
        have_fio = not args.no_fio and ensure_fio()
        return replay_main(args, have_fio)

    ensure_file(args.file, args.gib)
    have_fio = not args.no_fio and ensure_fio()
    if not have_fio and not args.no_fio:
        print("fio not found and could not be installed (apt-get install -y fio); running "
              "without it", file=sys.stderr)
    dropped = drop_caches()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = [(e, e, {}) for e in args.engines.split(",") if e]
    if args.variants:
        runs += [("uring -fixedbufs", "uring", {"fixed_buffers": False}),
                 ("uring -fixedfiles", "uring", {"fixed_files": False}),
                 ("uring -defer", "uring", {"defer_taskrun": False}),
                 ("uring plain", "uring", {"fixed_buffers": False, "fixed_files": False,
                                           "defer_taskrun": False})]
    for spec in args.uring:
        kw = {k: int(v) for k, v in (kv.split("=") for kv in spec.split(","))}
        runs.append((f"uring {spec}", "uring", kw))
    results = {}
    skipped = {}
    for bs in sizes:
        for rep in range(args.repeats):
            for label, eng, kw in runs:
                if label in skipped:
                    continue
                if have_fio:   # a fresh fio run right before every engine run: paired ratios
                    drop_caches()
                    f = run_fio(args.file, bs, args.qd, args.seconds)
                    results.setdefault(("fio", bs), []).append(f)
                    print(f"  {fmt_size(bs):>6} round {rep} fio: {f['iops']:.0f} IOPS", file=sys.stderr)
                drop_caches()
                try:
                    r = run_engine(eng, args.file, bs, args.qd, args.seconds, args.batch, **kw)
                except (OSError, ImportError, RuntimeError) as e:
                    skipped[label] = str(e)
                    continue
                if have_fio:
                    r["ratio_iops"] = r["iops"] / f["iops"]
                    r["ratio_mbs"] = r["mbs"] / f["mbs"]
                results.setdefault((label, bs), []).append(r)
                st = r["stats"]
                print(f"  {fmt_size(bs):>6} round {rep} {label}: {r['iops']:.0f} IOPS "
                      f"(submit calls/req {st.get('submit_calls', 0) / max(1, st['requests']):.3f})",
                      file=sys.stderr)

    labels = (["fio"] if have_fio else []) + [label for label, _, _ in runs if label not in skipped]
    print(f"\nRandom reads, QD {args.qd}, {args.file} ({os.path.getsize(args.file) / 2**30:.1f} GiB), "
          f"O_DIRECT, median of {args.repeats} interleaved rounds x {args.seconds:g} s"
          f"{'' if dropped else ' (page cache NOT dropped: not root)'}\n")
    print("| size | engine | IOPS | MB/s | IOPS / fio | MB/s / fio | CPU us/req |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for bs in sizes:
        ref = results.get(("fio", bs))
        for label in labels:
            rs = results.get((label, bs))
            if not rs:
                continue
            r = {k: float(np.median([x[k] for x in rs])) for k in ("iops", "mbs", "cpu_us")}
            ri = f"{np.median([x['ratio_iops'] for x in rs]):.2f}" if ref and label != "fio" else "1.00"
            rm = f"{np.median([x['ratio_mbs'] for x in rs]):.2f}" if ref and label != "fio" else "1.00"
            if not ref:
                ri = rm = "-"
            print(f"| {fmt_size(bs)} | {label} | {r['iops']:.0f} | {r['mbs']:.1f} | {ri} | {rm} | "
                  f"{r['cpu_us']:.1f} |")
    for label, why in skipped.items():
        print(f"\nskipped {label}: {why}")


if __name__ == "__main__":
    main()
