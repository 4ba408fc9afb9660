"""graphene_py beside the C++ Graphene and GAPBS on GAPBS's own kron22, where the user sits.

    sudo .venv/bin/python tools/bench_anchors.py prepare [--scratch /work/anchors]
    sudo .venv/bin/python tools/bench_anchors.py run [--algos bfs0,pr10,...] [-n 3] [--out benchmarks/anchors]
        [--tree graphene_py=/tmp/after --tree before=/tmp/before]   # trees of other commits too

`prepare` builds both anchors from ../shared/anchors (build.sh) into SCRATCH/build, makes GAPBS's
kron22 (`converter -g22 -k16`: .sg, .el, .wsg) and the C++ Graphene 1x1 layout
(prepare_kron22.sh) into SCRATCH/data, and partitions the same .el with graphene_py
(`graphene partition kron22.el -s --in-edges`, 1x1) into --disk under the name kron22. Nothing of
the anchors is copied into this repository.

`run` follows ../shared/anchors/README.md's protocol: fio ceilings (4k/16k/128k QD64) at the start
and the end; for each algorithm graphene_py (A) and the C++ Graphene (B) interleaved A1 B1 A2 B2 A3
B3, each a fresh process after `sync; echo 3 > drop_caches` and a 0.5 s pause, recording each
system's own reported time (graphene: `Trial 1`; C++: `Total time`, which leaves out its setup),
the process wall, peak RSS (+ the hugepages the C++ maps: HugePages_Total - HugePages_Free sampled
every 50 ms), and device bytes read (/sys/block/DEV/stat). Then GAPBS in memory, one process per
kernel (median of its 3 in-process trials, loading excluded). 600 hugepages are reserved for the
C++ Graphene at the start and set back at the end. Writes SUMMARY.md (the table BENCHMARKS.md
leads with) and runs.json into --out.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ab_runs  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), "shared", "anchors")
GRAPHENE = os.path.join(ROOT, ".venv", "bin", "graphene")
MAXDEG = 1345714          # the max-degree vertex of kron22 (anchors README)

#: name -> (label, graphene_py arguments after `graphene run`, C++ app and last argument or None)
ALGOS = {
    "bfs0": ("BFS from 0", "bfs --src 0", ("aio_bfs.bin", "0")),
    "bfsmax": (f"BFS from {MAXDEG}", f"bfs --src {MAXDEG}", ("aio_bfs.bin", str(MAXDEG))),
    "pr10": ("PageRank 10 it.", "pagerank-pull --max-iter 10 --tol 0", ("aio_pagerank.bin", "10")),
    "wcc": ("WCC", "wcc", ("aio_wcc_hybrid.bin", None)),
    "kcore17": ("17-core membership", "kcore --k 17 --membership-only", ("aio_kcore.bin", "16")),
    "apsp32": ("APSP 32 sources", "apsp --sources " + ",".join(str(i) for i in range(32)),
               ("aio_apsp.bin", None)),
    "spmv": ("SpMV", "spmv", ("aio_spmv.bin", None)),
    "dpr": ("delta PageRank to 1e-4", "pagerank --tol 1e-4", None),
    "sssp": ("SSSP from 0 (kron22 weighted)", "sssp --src 0 --graph kron22w", None),
}
#: GAPBS kernels (in memory): name -> (label, binary and arguments)
GAPBS = {
    "bfs0": ("BFS from 0", "bfs -f kron22.sg -r 0 -n 3"),
    "bfsmax": (f"BFS from {MAXDEG}", f"bfs -f kron22.sg -r {MAXDEG} -n 3"),
    "pr10": ("PageRank 10 it.", "pr -f kron22.sg -i 10 -t 0 -n 3"),
    "dpr": ("delta PageRank to 1e-4", "pr -f kron22.sg -i 20 -t 1e-4 -n 3"),
    "wcc": ("WCC", "cc -f kron22.sg -n 3"),
    "sssp": ("SSSP from 0 (kron22 weighted)", "sssp -f kron22.wsg -r 0 -n 3"),
}


def cfg_path(scratch):
    return os.path.join(scratch, "bench_anchors.json")


def prepare(a):
    scratch = os.path.abspath(a.scratch)
    build, data = os.path.join(scratch, "build"), os.path.join(scratch, "data")
    os.makedirs(scratch, exist_ok=True)
    if not os.path.exists(os.path.join(build, "graphene", "aio_bfs.bin")):
        subprocess.run(["bash", os.path.join(SHARED, "build.sh"), build], check=True,
                       env=dict(os.environ, JOBS=str(os.cpu_count())))
    if not os.path.exists(os.path.join(data, "graphene", "row_0_col_0")):
        subprocess.run(["bash", os.path.join(SHARED, "prepare_kron22.sh"), build], check=True,
                       env=dict(os.environ, DATA=data))
    el = os.path.join(data, "gapbs", "kron22.el")
    os.makedirs(a.disk, exist_ok=True)
    if subprocess.run([GRAPHENE, "info", "kron22"], capture_output=True).returncode != 0:
        subprocess.run([GRAPHENE, "partition", el, "--disks", a.disk, "--name", "kron22", "-s",
                        "--in-edges", "--force"], check=True)
    cfg = {"build": build, "data": data, "disk": os.path.abspath(a.disk)}
    with open(cfg_path(scratch), "w") as f:
        json.dump(cfg, f, indent=1)
    print(f"ready: {cfg}")


class HugeSampler:
    """Peak hugepages in use (HugePages_Total - HugePages_Free) while a run goes, every 50 ms."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def used():
        tot = free = 0
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("HugePages_Total:"):
                    tot = int(line.split()[1])
                elif line.startswith("HugePages_Free:"):
                    free = int(line.split()[1])
        return tot - free

    def _loop(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.used())
            time.sleep(0.05)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def set_hugepages(n):
    try:
        with open("/proc/sys/vm/nr_hugepages", "w") as f:
            f.write(f"{n}\n")
    except OSError as e:
        print(f"cannot set nr_hugepages ({e}); the C++ Graphene needs them", file=sys.stderr)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def rng(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def run(a):
    scratch = os.path.abspath(a.scratch)
    with open(cfg_path(scratch)) as f:
        cfg = json.load(f)
    B = os.path.join(cfg["build"], "graphene")
    D = os.path.join(cfg["data"], "graphene")
    args = f"1 1 2 {D} {D} kron22.el-split_beg kron22.el-split_csr 512 16384 4 16 65536 2"
    dev = ab_runs.block_device(cfg["disk"])
    names = a.algos.split(",") if a.algos else list(ALGOS)
    os.makedirs(a.out, exist_ok=True)
    res = {"machine": {"cpus": os.cpu_count(), "uname": " ".join(os.uname())}, "device": dev,
           "protocol": "fresh process, cold cache, A/B interleaved, medians", "algos": {}}
    old_huge = None
    try:
        with open("/proc/sys/vm/nr_hugepages") as f:
            old_huge = int(f.read())
    except OSError:
        pass
    set_hugepages(600)
    try:
        if a.fio:
            res["fio_start"] = ab_runs.fio_ceiling(a.fio)
            print("fio start:", res["fio_start"], flush=True)
        for name in names:
            label, ours, cpp = ALGOS[name]
            run_args = ["run", *shlex.split(ours), *([] if "--graph" in ours else
                                                      ["--graph", "kron22"]), "-t", "2", "-q"]
            cmds = {}
            for tlabel, path in trees(a):
                cmds[tlabel] = ([GRAPHENE] if path is None else tree_command(path)) + run_args
            if cpp is not None:
                app, last = cpp
                cmds["cpp"] = [os.path.join(B, app), *args.split()] + ([last] if last else [])
            rows = {k: [] for k in cmds}
            for i in range(a.n):
                for k, cmd in cmds.items():
                    with HugeSampler() as hs:
                        r = ab_runs.one_run(cmd, ab_runs.OWN_RE, dev, a.timeout)
                    r["huge_mb"] = hs.peak * 2
                    rows[k].append(r)
                    print(f"{name:>8} {k:>11} #{i + 1}: own {r['own']}  wall {r['wall']:.3f}  "
                          f"rss {r['maxrss_mb']:.0f} MiB + huge {r['huge_mb']} MiB  dev "
                          f"{r['device_bytes'] / 1e6:.0f} MB" + (f"  rc {r['rc']} {r['tail']}"
                                                                 if r["rc"] else ""), flush=True)
            res["algos"][name] = {"label": label, "commands": {k: " ".join(c) for k, c in cmds.items()},
                                  "runs": rows}
        gap = os.path.join(cfg["build"], "gapbs")
        gd = os.path.join(cfg["data"], "gapbs")
        for name in names:
            if name not in GAPBS:
                continue
            cmd = [os.path.join(gap, GAPBS[name][1].split()[0])] + GAPBS[name][1].split()[1:]
            ab_runs.drop_caches()
            p = subprocess.run(cmd, cwd=gd, capture_output=True, text=True,
                               env=dict(os.environ, OMP_NUM_THREADS="2"), timeout=a.timeout)
            trials = [float(line.split()[-1]) for line in p.stdout.splitlines()
                      if line.startswith("Trial Time:")]
            res["algos"].setdefault(name, {"label": GAPBS[name][0]})["gapbs"] = {
                "command": " ".join(cmd), "trials": trials, "median": med(trials)}
            print(f"{name:>8} gapbs: {trials}", flush=True)
        if a.fio:
            res["fio_end"] = ab_runs.fio_ceiling(a.fio)
            print("fio end:", res["fio_end"], flush=True)
    finally:
        if old_huge is not None:
            set_hugepages(old_huge)
    with open(os.path.join(a.out, "runs.json"), "w") as f:
        json.dump(res, f, indent=1)
    table = summary(res)
    with open(os.path.join(a.out, "SUMMARY.md"), "w") as f:
        f.write(table)
    print(table)


def trees(a):
    """(label, tree folder or None for the installed graphene) of every graphene_py to run: the
    first is "graphene_py", the one the table leads with."""
    out = []
    for t in getattr(a, "tree", None) or []:
        label, _, path = t.partition("=")
        if not path or not os.path.isdir(os.path.join(path, "graphene_py")):
            raise SystemExit(f"--tree {t}: LABEL=FOLDER with a graphene_py package (built in place)")
        out.append((label, os.path.abspath(path)))
    if not out:
        return [("graphene_py", None)]
    lead = next((i for i, (lbl, _) in enumerate(out) if lbl == "graphene_py"), 0)
    return [("graphene_py", out[lead][1])] + out[:lead] + out[lead + 1:]


def tree_command(path):
    """graphene from a source tree (e.g. `git archive` of an earlier commit with its extension
    built in place), in the same interpreter, run as its `graphene` command is (its console entry:
    run_cli, or main in trees from before it). The tree goes first on
    sys.path (before `-c`'s working directory, which may hold another graphene_py)."""
    return [sys.executable, "-c",
            f"import sys; sys.path[0:0] = [{path!r}]; sys.argv[0] = 'graphene'; "
            "from graphene_py import cli; getattr(cli, 'run_cli', cli.main)()"]


def summary(res) -> str:
    def cell(rows, key, scale=1.0, fmt="{:.2f}"):
        vals = [r[key] * scale for r in rows if r.get(key) is not None and r["rc"] == 0]
        if not vals:
            return "-"
        lo, hi = rng(vals)
        return f"{fmt.format(med(vals))} ({fmt.format(lo)}-{fmt.format(hi)})"

    out = ["| algorithm | graphene_py own | C++ own | own ratio | graphene_py wall | C++ wall | "
           "wall ratio | graphene_py RSS MiB | C++ RSS + huge MiB | device MB ours / C++ | GAPBS "
           "in memory |", "|" + "---|" * 11]
    for name, r in res["algos"].items():
        runs = r.get("runs", {})
        ours, cpp = runs.get("graphene_py", []), runs.get("cpp", [])

        def ratio(key):
            a = med([x[key] for x in ours if x["rc"] == 0])
            b = med([x[key] for x in cpp if x["rc"] == 0])
            return f"{b / a:.2f}x" if a and b else "-"
        huge = med([x.get("huge_mb") for x in cpp]) if cpp else None
        rss = cell(cpp, "maxrss_mb", fmt="{:.0f}") + (f" + {huge:.0f}" if huge else "")
        gap = r.get("gapbs", {}).get("median")
        out.append(f"| {r['label']} | {cell(ours, 'own')} | {cell(cpp, 'own')} | {ratio('own')} | "
                   f"{cell(ours, 'wall')} | {cell(cpp, 'wall')} | {ratio('wall')} | "
                   f"{cell(ours, 'maxrss_mb', fmt='{:.0f}')} | {rss if cpp else '-'} | "
                   f"{cell(ours, 'device_bytes', 1e-6, '{:.0f}')} / "
                   f"{cell(cpp, 'device_bytes', 1e-6, '{:.0f}') if cpp else '-'} | "
                   f"{f'{gap:.3f}' if gap else '-'} |")
    others = [k for r in res["algos"].values() for k in r.get("runs", {})
              if k not in ("graphene_py", "cpp")]
    others = list(dict.fromkeys(others))
    if others:
        out += ["", "The same runs, interleaved with other graphene_py trees (own / wall, s):", "",
                "| algorithm | graphene_py | " + " | ".join(others) + " |",
                "|" + "---|" * (2 + len(others))]
        for name, r in res["algos"].items():
            runs = r.get("runs", {})
            row = [f"{cell(runs.get(k, []), 'own')} / {cell(runs.get(k, []), 'wall')}"
                   for k in ["graphene_py"] + others]
            out.append(f"| {r['label']} | " + " | ".join(row) + " |")
    out.append("")
    out.append("Ratios are C++ / graphene_py (above 1: graphene_py faster). Medians (min-max) of "
               "fresh processes on a cold page cache, interleaved.")
    if "fio_start" in res:
        out.append(f"fio at the start: {res['fio_start']}; at the end: {res.get('fio_end')}")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--scratch", default="/work/anchors")
    p.add_argument("--disk", default="/tmp/disk0", help="graphene_py's disk folder")
    r = sub.add_parser("run")
    r.add_argument("--scratch", default="/work/anchors")
    r.add_argument("--algos", default=None, help=f"comma list of {','.join(ALGOS)}")
    r.add_argument("-n", type=int, default=3)
    r.add_argument("--fio", default="/tmp/fio.dat", help="fio test file ('' to skip)")
    r.add_argument("--timeout", type=float, default=900)
    r.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "anchors"))
    r.add_argument("--tree", action="append", metavar="LABEL=FOLDER",
                   help="run graphene_py from this source tree (repeatable; interleaved with the "
                        "others; the label graphene_py, or else the first, leads the table)")
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        prepare(a)
    else:
        run(a)


if __name__ == "__main__":
    main()
