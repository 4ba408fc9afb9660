"""Each superstep's device throughput against fio's ceiling at its request size, where the user
sits: fio random reads (O_DIRECT, io_uring, QD64) at 4 KB .. 512 KB on the disk at the start and
the end, then each algorithm once in a fresh process on a dropped page cache (optionally inside a
memory cgroup, as the scale-24 runs are), its supersteps from `--nl`.

A superstep's device MB/s = bytes read / the seconds its device had requests in flight
(`io_seconds`); its request size = bytes / requests; the ceiling = fio's MB/s at that size
(log-log interpolation between the measured sizes, the lower of the start and end runs). A
superstep counts as IO-bound when its compute threads waited for data at least as long as they
computed (both summed over the threads) and it read at least --min-mb. Prints a table per algorithm and writes every superstep as JSON.

    sudo .venv/bin/python tools/bench_superstep_io.py --graph kron24ef64 --cap 800 \\
        --fio /tmp/fio.dat --json benchmarks/superstep_io_kron24ef64.json \\
        --algo "BFS=bfs --src 0" --algo "WCC=wcc" --algo "PageRank-10=pagerank-pull --max-iter 10 --tol 0"
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ab_runs  # noqa: E402
from bench_algos import _cgroup_report, _make_cgroup  # noqa: E402

SIZES = ("4k", "16k", "64k", "128k", "512k")


def _kib(s: str) -> float:
    return float(s[:-1]) * {"k": 1, "m": 1024}[s[-1].lower()]


def ceiling(fio: dict, size_bytes: float) -> float:
    """fio MB/s at a request size: log-log interpolation, clamped to the measured sizes."""
    pts = sorted((_kib(k) * 1024, v["MBps"]) for k, v in fio.items())
    if size_bytes <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if size_bytes <= x1:
            t = (math.log(size_bytes) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    return pts[-1][1]


def _machine() -> str:
    with open("/proc/cpuinfo") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    return f"{model}, {os.cpu_count()} CPUs"


def run_one(exe, graph, args, cap_bytes):
    ab_runs.drop_caches()
    cmd = [exe, "run", *shlex.split(args), "--graph", graph, "--nl", "-q"]
    cg, kind = _make_cgroup(cap_bytes) if cap_bytes else (None, None)

    def pre():
        if cg:
            with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=pre)
    wall = time.perf_counter() - t0
    steps = []
    for line in r.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if isinstance(d, dict) and "superstep" in d and "bytes_read" in d:
            steps.append(d)
    out = {"cmd": cmd, "rc": r.returncode, "wall": wall, "steps": steps,
           "stderr": r.stderr[-2000:]}
    if cg:
        out["cgroup"] = _cgroup_report(cg, kind)
        try:
            os.rmdir(cg)
        except OSError:
            pass
    return out


def judge(steps, fio, min_mb):
    rows = []
    for s in steps:
        b = float(s.get("bytes_read") or 0)
        io = float(s.get("io_seconds") or 0)
        req = float(s.get("requests") or 0)
        if b <= 0 or io <= 0 or req <= 0:
            continue
        size = b / req
        mbps = b / io / 1e6
        ceil = ceiling(fio, size)
        bound = (float(s.get("wait_seconds") or 0) >= float(s.get("compute_seconds") or 0)
                 and b >= min_mb * 1e6)
        rows.append({"superstep": s.get("superstep"), "trial": s.get("trial"), "bytes": b,
                     "requests": req, "request_kib": size / 1024, "io_seconds": io,
                     "device_MBps": mbps, "fio_MBps": ceil, "ratio": mbps / ceil,
                     "io_bound": bound, "io_plan": s.get("io_plan")})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--algo", action="append", required=True, metavar="LABEL=ARGS")
    ap.add_argument("--cap", type=int, default=None, metavar="MIB", help="memory cgroup limit")
    ap.add_argument("--fio", required=True, metavar="FILE", help="fio's test file on the disk")
    ap.add_argument("--fio-seconds", type=int, default=5)
    ap.add_argument("--min-mb", type=float, default=16.0)
    ap.add_argument("--json", required=True)
    a = ap.parse_args(argv)
    exe = os.path.join(os.path.dirname(sys.executable), "graphene")
    res = {"graph": a.graph, "cap_mib": a.cap, "machine": _machine()}
    res["fio_start"] = ab_runs.fio_ceiling(a.fio, a.fio_seconds, sizes=SIZES)
    print("fio start:", res["fio_start"], flush=True)
    runs = {}
    for spec in a.algo:
        label, args = spec.split("=", 1)
        runs[label] = run_one(exe, a.graph, args, (a.cap << 20) if a.cap else None)
        print(f"{label}: rc {runs[label]['rc']}, {len(runs[label]['steps'])} supersteps, "
              f"wall {runs[label]['wall']:.1f} s", flush=True)
    res["fio_end"] = ab_runs.fio_ceiling(a.fio, a.fio_seconds, sizes=SIZES)
    print("fio end:", res["fio_end"], flush=True)
    fio = {k: {"MBps": min(res["fio_start"][k]["MBps"], res["fio_end"][k]["MBps"])}
           for k in SIZES}
    print("\n| algorithm | supersteps IO-bound / all | GB read in them | device MB/s / fio at the "
          "request size: bytes-weighted mean (min-max) | request KiB (bytes-weighted) |")
    print("|---|---:|---:|---|---:|")
    for label, r in runs.items():
        rows = judge(r["steps"], fio, a.min_mb)
        r["judged"] = rows
        b = [x for x in rows if x["io_bound"]]
        tot = sum(x["bytes"] for x in b)
        if tot:
            mean = sum(x["ratio"] * x["bytes"] for x in b) / tot
            kib = sum(x["request_kib"] * x["bytes"] for x in b) / tot
            rng = f"{mean:.2f} ({min(x['ratio'] for x in b):.2f}-{max(x['ratio'] for x in b):.2f})"
        else:
            rng, kib = "-", 0
        print(f"| {label} | {len(b)} / {len(r['steps'])} | {tot / 1e9:.2f} | {rng} | {kib:.0f} |")
    res["runs"] = runs
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
