"""The device-aware planner against a sweep of fixed request settings, on device profiles emulated with
the block-IO throttle of cgroup v1 (issue 11, item 2: within 10% of the best fixed setting on each).

For each profile (none; a cap of 20k and 5k read IOPS; a cap of 200 MB/s) a blkio cgroup is made
with that throttle on the disk's whole device, `graphene calibrate` runs inside it (the profile is
stored under the device and that cgroup), then every algorithm runs as a fresh process inside it, on
a dropped page cache, with each fixed setting (--max-gap / --max-io, and today's fixed rule through
GRAPHENE_IO_PLAN=fixed) and with the model, interleaved (each round runs every setting once, in a
rotated order). The profile is measured again at the end (the disk drifts). Times are the runs' own
(trial) seconds; process wall is recorded too. Needs root.

    .venv/bin/python tools/bench_device_plan.py --graph kron22 --reps 3 --json benchmarks/device_plan_kron22.json
    .venv/bin/python tools/bench_device_plan.py --reps 7 --profiles none "20k IOPS" --algos bfs \
        --settings "fixed rule (today)" "gap 32K / 128K" "gap 256K / 256K" --json F.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

EXE = os.environ.get("GRAPHENE_EXE") or os.path.join(os.path.dirname(sys.executable), "graphene")
BLKIO = "/sys/fs/cgroup/blkio"

PROFILES = {
    "none": {},
    "20k IOPS": {"blkio.throttle.read_iops_device": 20000},
    "5k IOPS": {"blkio.throttle.read_iops_device": 5000},
    "200 MB/s": {"blkio.throttle.read_bps_device": 200 * 1000 * 1000},
}
FIXED = {
    "fixed rule (today)": [],                 # with GRAPHENE_IO_PLAN=fixed
    "gap 0 / 16K": ["--max-gap", "0", "--max-io", "16384"],
    "gap 8K / 16K": ["--max-gap", "16", "--max-io", "16384"],
    "gap 0 / 128K": ["--max-gap", "0", "--max-io", "131072"],
    "gap 8K / 128K": ["--max-gap", "16", "--max-io", "131072"],
    "gap 32K / 128K": ["--max-gap", "64", "--max-io", "131072"],
    "gap 128K / 256K": ["--max-gap", "256", "--max-io", "262144"],
    "gap 256K / 256K": ["--max-gap", "512", "--max-io", "262144"],
}
ALGOS = {
    "bfs": ["bfs", "--src", "0"],
    "wcc": ["wcc"],
    "kcore17": ["kcore", "--k", "17", "--membership-only"],
}


def _devnum(path):
    st = os.stat(path)
    dev = os.major(st.st_dev), os.minor(st.st_dev)
    # the whole disk of a partition (throttle rules take whole disks)
    sysd = os.path.realpath(f"/sys/dev/block/{dev[0]}:{dev[1]}")
    if os.path.exists(os.path.join(sysd, "partition")):
        with open(os.path.join(os.path.dirname(sysd), "dev")) as f:
            return f.read().strip()
    return f"{dev[0]}:{dev[1]}"


def _cgroup(name, limits, dev):
    if not limits:
        return None
    path = os.path.join(BLKIO, "gp_" + name.replace(" ", "").replace("/", "_"))
    os.makedirs(path, exist_ok=True)
    for f in ("blkio.throttle.read_iops_device", "blkio.throttle.read_bps_device"):
        with open(os.path.join(path, f), "w") as fh:
            fh.write(f"{dev} {limits.get(f, 0)}")
    return path


def _in(cg, cmd, env=None):
    """Run cmd (a list) inside blkio cgroup cg (None: the root)."""
    target = os.path.join(cg or BLKIO, "cgroup.procs")
    sh = ["sh", "-c", f'echo $$ > {target}; exec "$@"', "sh", *cmd]
    return subprocess.run(sh, capture_output=True, text=True, env=env)


def _drop():
    subprocess.run(["sync"])
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")


def _calibrate(cg, graph):
    r = _in(cg, [EXE, "calibrate", graph, "--json"])
    if r.returncode:
        raise SystemExit(f"calibrate failed: {r.stderr}")
    (key, prof), = json.loads(r.stdout).items()
    return key, {"iops": [round(x) for x in prof["iops"]], "sizes": prof["sizes"]}


def _run(cg, graph, algo, setting):
    env = dict(os.environ)
    args = list(ALGOS[algo])
    if setting == "model":
        env.pop("GRAPHENE_IO_PLAN", None)
    elif setting == "fixed rule (today)":
        env["GRAPHENE_IO_PLAN"] = "fixed"
    else:
        args += FIXED[setting]
    _drop()
    t0 = time.perf_counter()
    r = _in(cg, [EXE, "run", *args, "-g", graph, "--json", "--nl", "--memory", "none"], env=env)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(f"{algo} {setting}: {r.stderr}")
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    summ = lines[-1]
    steps = [x for x in lines[:-1] if "superstep" in x]
    return {"own": summ["trials"][0]["seconds"], "wall": wall,
            "bytes_read": sum(s.get("bytes_read", 0) for s in steps),
            "extents": sum(s.get("extents", 0) for s in steps),
            "io_plan": summ.get("io_plan"),
            "plans": [s.get("io_plan") for s in steps if s.get("io_plan")]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="kron22")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--profiles", nargs="*", default=list(PROFILES))
    ap.add_argument("--algos", nargs="*", default=list(ALGOS))
    ap.add_argument("--settings", nargs="*", default=None,
                    help="only these fixed settings (names as in FIXED), beside the model")
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    from graphene_py.graph import Graph
    g = Graph.open(a.graph)
    dev = _devnum(g.disks[0])
    settings = [s for s in FIXED if a.settings is None or s in a.settings] + ["model"]
    out = {"graph": a.graph, "device": dev, "reps": a.reps, "machine": os.uname().nodename,
           "started": time.strftime("%Y-%m-%d %H:%M:%S"), "profiles": {}}
    for pname in a.profiles:
        cg = _cgroup(pname, PROFILES[pname], dev)
        key, start = _calibrate(cg, a.graph)
        res = {"key": key, "calibration_start": start, "algos": {}}
        print(f"== {pname} ({key}): {start['iops']}", flush=True)
        for algo in a.algos:
            runs = {s: [] for s in settings}
            for rep in range(a.reps):
                k = rep % len(settings)
                for s in settings[k:] + settings[:k]:
                    runs[s].append(_run(cg, a.graph, algo, s))
            med = {s: statistics.median(r["own"] for r in v) for s, v in runs.items()}
            best = min((s for s in settings if s != "model"), key=med.get)
            res["algos"][algo] = {
                "median_own": med,
                "median_wall": {s: statistics.median(r["wall"] for r in v) for s, v in runs.items()},
                "bytes_read": {s: v[0]["bytes_read"] for s, v in runs.items()},
                "extents": {s: v[0]["extents"] for s, v in runs.items()},
                "model_plans": runs["model"][0]["plans"],
                "best_fixed": best, "model_over_best": med["model"] / med[best],
                "model_over_today": med["model"] / med["fixed rule (today)"],
                "runs": runs}
            print(f"  {algo}: model {med['model']:.3f} s, best fixed {best} {med[best]:.3f} s "
                  f"(x{med['model'] / med[best]:.3f}), today {med['fixed rule (today)']:.3f} s",
                  flush=True)
        res["calibration_end"] = _calibrate(cg, a.graph)[1]
        out["profiles"][pname] = res
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    # a table for BENCHMARKS.md
    for pname, res in out["profiles"].items():
        print(f"\n{pname}")
        print("| setting | " + " | ".join(a.algos) + " |")
        print("|---|" + "---|" * len(a.algos))
        for s in settings:
            cells = []
            for algo in a.algos:
                r = res["algos"][algo]
                mark = " (best fixed)" if s == r["best_fixed"] else ""
                cells.append(f"{r['median_own'][s]:.3f}{mark}")
            print(f"| {s} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
