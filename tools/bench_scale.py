"""A graph far larger than the memory a run may use, end to end: generate a Kronecker graph, partition
it with a memory limit, then run each algorithm from SSD inside a memory cgroup (limit: --cap) and
again outside it with --in-memory as the reference; compare the results and record time, device
bytes, the cgroup's peak and bytes per vertex. Every run a fresh process on a dropped page cache.

    sudo .venv/bin/python tools/bench_scale.py --scale 24 --edge-factor 64 --work /work/scale24 \\
        --disks /tmp/disk0 /tmp/disk1 /tmp/disk2 /tmp/disk3 --rows 2 --cols 2 \\
        --partition-memory 2G --cap 1200M --json benchmarks/scale24.json

The generated edge list and the dataset stay outside git (--work, --disks); --keep reuses them.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ab_runs  # noqa: E402
from bench_algos import _cgroup_report, _make_cgroup  # noqa: E402

EXE = os.path.join(os.path.dirname(sys.executable), "graphene")

RUNS = [
    ("BFS", ["bfs", "--src", "0"], "depth", "exact"),
    ("WCC", ["wcc"], "labels", "exact"),
    ("k-core membership (k=32)", ["kcore", "--k", "32", "--membership-only"], "in_k_core", "exact"),
    ("k-core decomposition", ["kcore"], "core_number", "exact"),
    ("SpMV", ["spmv"], "y", "close"),
    ("delta PageRank (1e-4)", ["pagerank"], "scores", "pr"),
    ("pull PageRank (10 it.)", ["pagerank-pull", "--max-iter", "10", "--tol", "0"], "scores",
     "close"),
    ("MS-BFS 32 sources", ["apsp", "--num-sources", "32"], "depths", "exact"),
]


def timed(cmd, cgroup=None, timeout=7200):
    """Run cmd in a fresh process (inside cgroup if given): wall, peak RSS, exit code, output."""
    ab_runs.drop_caches()
    dev = ab_runs.block_device("/tmp")
    s0 = ab_runs.sectors_read(dev)
    pre = None
    if cgroup:
        def pre():
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=pre)
    out, err = p.communicate(timeout=timeout)
    wall = time.perf_counter() - t0
    return {"rc": p.returncode, "wall": wall, "stdout": out, "stderr": err[-2000:],
            "device_bytes": (ab_runs.sectors_read(dev) - s0) * 512}


#: fio's block sizes when supersteps are set against it (--steps)
FIO_STEP_SIZES = ("4k", "16k", "64k", "128k", "512k", "1m")


def step_row(st: dict) -> dict:
    """What --steps keeps of one superstep (`graphene run --nl`'s line)."""
    keep = ("superstep", "frontier", "bytes_read", "requests", "seconds", "io_seconds",
            "compute_seconds", "wait_seconds", "mode", "io_plan")
    return {k: st[k] for k in keep if k in st}


def _bytes(size: str) -> int:
    return int(size[:-1]) << (10 if size[-1] == "k" else 20)


def fio_at(fio: dict, req_bytes: float) -> float:
    """fio's MB/s at a request size, interpolated in log(size) between the sizes measured (the
    ends held flat)."""
    pts = sorted((_bytes(k), v["MBps"]) for k, v in fio.items())
    if req_bytes <= pts[0][0]:
        return pts[0][1]
    for (s0, b0), (s1, b1) in zip(pts, pts[1:]):
        if req_bytes <= s1:
            t = (np.log(req_bytes) - np.log(s0)) / (np.log(s1) - np.log(s0))
            return float(b0 + t * (b1 - b0))
    return pts[-1][1]


def steps_vs_fio(steps, fio_start, fio_end, min_bytes=32 << 20):
    """The IO-bound supersteps (compute threads waited longer than they computed, at least
    min_bytes read): each one's device MB/s over its seconds against fio's ceiling at its mean
    request size (the lower and the higher of fio's two measurements), and the byte-weighted
    share of the run's IO-bound reading."""
    rows, got, ceil_lo, ceil_hi = [], 0.0, 0.0, 0.0
    for st in steps:
        b, rq, sec = st.get("bytes_read", 0), st.get("requests", 0), st.get("seconds", 0.0)
        if b < min_bytes or not rq or sec <= 0:
            continue
        if st.get("wait_seconds", 0.0) < st.get("compute_seconds", 0.0):
            continue
        req = b / rq
        lo, hi = sorted((fio_at(fio_start, req), fio_at(fio_end, req)))
        mbps = b / sec / 1e6
        rows.append({"superstep": st["superstep"], "MB": round(b / 1e6, 1),
                     "request_KiB": round(req / 1024, 1), "MBps": round(mbps, 1),
                     "fio_MBps": [round(lo, 1), round(hi, 1)]})
        got += b
        ceil_lo += b * mbps / lo
        ceil_hi += b * mbps / hi
    share = ({"of_fio_low": round(ceil_lo / got, 3), "of_fio_high": round(ceil_hi / got, 3)}
             if got else {})
    return {"io_bound_steps": rows, "io_bound_MB": round(got / 1e6, 1), **share}


def compare(kind, a, b):
    if a.shape != b.shape:
        return f"shapes differ: {a.shape} vs {b.shape}"
    if kind == "exact":
        bad = int(np.count_nonzero(a != b))
        return "equal" if bad == 0 else f"{bad} entries differ"
    if kind == "pr":      # both stop at L1 error 1e-4 of their own iteration order
        d = float(np.abs(a - b).sum())
        return f"L1 distance {d:.2e}" + (" (within 2e-4)" if d <= 2e-4 else " (MORE THAN 2e-4)")
    d = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))
    return f"max relative difference {d:.1e}" + ("" if d <= 1e-9 else " (MORE THAN 1e-9)")


def compare_rows(x, y):
    """Two (S, n) memmaps, row by row (never both whole in RAM)."""
    if x.shape != y.shape:
        return f"shapes differ: {x.shape} vs {y.shape}"
    bad = sum(int(np.count_nonzero(np.asarray(x[i]) != np.asarray(y[i]))) for i in range(len(x)))
    return "equal" if bad == 0 else f"{bad} entries differ"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=24)
    ap.add_argument("--edge-factor", type=int, default=64)
    ap.add_argument("--work", required=True, help="folder for the edge list and result arrays")
    ap.add_argument("--disks", nargs="+", required=True)
    ap.add_argument("--rows", type=int, default=2)
    ap.add_argument("--cols", type=int, default=2)
    ap.add_argument("--partition-memory", default="2G")
    ap.add_argument("--cap", default="1200M", help="memory cgroup limit of the SSD runs")
    ap.add_argument("--only", nargs="*", default=None, help="labels of RUNS to run")
    ap.add_argument("--keep", action="store_true", help="reuse the edge list and the dataset")
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--fio", default=None)
    ap.add_argument("--steps", action="store_true",
                    help="also record every superstep (--nl) and set the IO-bound ones' device "
                         "MB/s against fio's at their mean request size (fio at more sizes)")
    ap.add_argument("--json", required=True)
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    name = f"kron{a.scale}ef{a.edge_factor}"
    el = os.path.join(a.work, f"{name}.bin32")
    out = {"graph": name, "machine": " ".join(os.uname()), "cpus": os.cpu_count(), "runs": []}
    sizes = FIO_STEP_SIZES if a.steps else ("4k", "16k", "128k")
    if a.fio:
        out["fio_start"] = ab_runs.fio_ceiling(a.fio, sizes=sizes)
        print("fio start", out["fio_start"], flush=True)
    have = subprocess.run([EXE, "list"], capture_output=True, text=True).stdout
    if not (a.keep and (os.path.exists(el) or f" {name} " in have)):
        r = timed([sys.executable, os.path.join(os.path.dirname(__file__), "generate.py"), "kron",
                   "--scale", str(a.scale), "--edge-factor", str(a.edge_factor), "-o", el])
        out["generate"] = {"wall": r["wall"], "info": r["stdout"].strip()[-500:]}
        print("generated", out["generate"], flush=True)
    if not (a.keep and f" {name} " in have):
        cmd = ["/usr/bin/time", "-v", EXE, "partition", el, "--disks", *a.disks, "--name", name,
               "-s", "--rows", str(a.rows), "--cols", str(a.cols), "--memory-limit",
               a.partition_memory, "--force"]
        r = timed(cmd)
        rss = [ln for ln in r["stderr"].splitlines() if "Maximum resident" in ln]
        out["partition"] = {"rc": r["rc"], "wall": r["wall"], "max_rss": rss,
                            "tail": r["stderr"][-800:], "stdout": r["stdout"][-800:]}
        print("partitioned", json.dumps(out["partition"]), flush=True)
        if r["rc"]:
            raise SystemExit("partition failed")
    info = json.loads(subprocess.run([EXE, "info", name, "--json"], capture_output=True,
                                     text=True).stdout)
    out["dataset"] = {k: info.get(k) for k in ("num_vertices", "num_edges", "rows", "cols")}
    adj = sum(p.get("adj_bytes", 0) for p in info.get("partitions", []))
    out["dataset"]["adjacency_bytes"] = adj
    print("dataset", out["dataset"], flush=True)
    cap = a.cap
    from graphene_py.partition.partitioner import parse_size
    cg, kind = _make_cgroup(parse_size(cap))
    out["cap"] = {"limit": cap, "bytes": parse_size(cap), "cgroup": kind,
                  "adjacency_over_cap": adj / parse_size(cap) if adj else None}
    try:
        for label, args, key, how in RUNS:
            if a.only and label not in a.only:
                continue
            # MS-BFS streams its depths (4 B per vertex per source) into a .npy; the rest: .npz
            ext = ".npy" if key == "depths" else ".npz"
            res = os.path.join(a.work, f"{args[0]}_{label.split()[0]}{ext}")
            ref = os.path.join(a.work, f"{args[0]}_{label.split()[0]}_ref{ext}")
            _cgroup_report(cg, kind)        # resets the v1 high-water mark
            r = timed([EXE, "run", *args, "--graph", name, "--json", "-q", "-o", res]
                      + (["--nl"] if a.steps else []), cgroup=cg)
            row = {"label": label, "args": args, "rc": r["rc"], "wall": r["wall"],
                   "device_bytes": r["device_bytes"], "cgroup": _cgroup_report(cg, kind)}
            if r["rc"] == 0:
                lines = r["stdout"].strip().splitlines()
                d = json.loads(lines[-1])
                if a.steps:
                    row["steps"] = [step_row(json.loads(ln)) for ln in lines[:-1]]
                row.update(seconds=d["trials"][0]["seconds"], peak_rss_mb=d["peak_rss_mb"],
                           setup=d["setup"], totals=d["result"]["totals"],
                           memory={k: v for k, v in d["memory"].items() if k != "arrays"},
                           arrays={k: v["bytes_per_vertex"] for k, v in
                                   d["memory"]["arrays"].items()})
            else:
                row["stderr"] = r["stderr"]
            if r["rc"] == 0 and not a.no_reference:
                q = timed([EXE, "run", *args, "--graph", name, "--json", "-q", "--in-memory",
                           "-o", ref])
                row["reference"] = {"rc": q["rc"], "wall": q["wall"]}
                if q["rc"] == 0:
                    if ext == ".npy":
                        x, y = np.load(res, mmap_mode="r"), np.load(ref, mmap_mode="r")
                        row["agreement"] = compare_rows(x, y)
                    else:
                        with np.load(res) as x, np.load(ref) as y:
                            row["agreement"] = compare(how, x[key], y[key])
                else:
                    row["reference"]["stderr"] = q["stderr"]
            for f in (res, ref):
                if os.path.exists(f):
                    os.unlink(f)
            out["runs"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("arrays",)}), flush=True)
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
    finally:
        try:
            os.rmdir(cg)
        except OSError:
            pass
    if a.fio:
        out["fio_end"] = ab_runs.fio_ceiling(a.fio, sizes=sizes)
        if a.steps:
            for row in out["runs"]:
                if row.get("steps"):
                    row["steps_vs_fio"] = steps_vs_fio(row["steps"], out["fio_start"],
                                                       out["fio_end"])
                    print(row["label"], json.dumps(row["steps_vs_fio"]), flush=True)
        print("fio end", out["fio_end"], flush=True)
    with open(a.json, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
