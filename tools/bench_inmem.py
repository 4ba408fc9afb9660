#!/usr/bin/env python3
"""`--in-memory` compute against GAPBS, interleaved (issue 11: in-memory compute <= 1.5x GAPBS).

Each round runs GAPBS's binary and `graphene run ... --in-memory -n N` of every source tree given,
one after the other, per algorithm; graphene_py's trial 1 (which loads the lists) is left out, as
GAPBS leaves out its load. Steady-state numbers: warm page cache, trials 2..N of one process.

    .venv/bin/python tools/bench_inmem.py --graph kron22 --tree new=. --tree old=/tmp/treeI \
        --rounds 3 -n 4 --json benchmarks/inmem_kron22.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

GAPBS = {"bfs": ("bfs", ["-r", "0"]), "pr10": ("pr", ["-i", "10", "-t", "0"]), "cc": ("cc", [])}
OURS = {"bfs": ["bfs", "--src", "0"], "pr10": ["pagerank-pull", "--max-iter", "10", "--tolerance", "0"],
        "cc": ["wcc"]}


def gapbs(bindir, sg, algo, trials, threads):
    exe, extra = GAPBS[algo]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([os.path.join(bindir, exe), "-f", sg, "-n", str(trials)] + extra,
                         capture_output=True, text=True, env=env, check=True).stdout
    return [float(x) for x in re.findall(r"Trial Time:\s+([0-9.]+)", out)]


def ours(tree, graph, algo, trials, threads):
    code = (f"import sys; sys.path[0:0]=[{os.path.abspath(tree)!r}]; from graphene_py import cli; "
            f"getattr(cli, 'run_cli', cli.main)()")
    cmd = [sys.executable, "-c", code, "run"] + OURS[algo] + ["-g", graph, "--in-memory", "-n",
                                                               str(trials), "-t", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return [float(x) for x in re.findall(r"^Trial \d+: ([0-9.]+) s", out, re.M)][1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", default="kron22")
    ap.add_argument("--sg", default="/work/anchors/data/gapbs/kron22.sg")
    ap.add_argument("--gapbs", default="/work/anchors/build/gapbs")
    ap.add_argument("--tree", action="append", default=[], help="LABEL=FOLDER (repeatable)")
    ap.add_argument("--algos", nargs="+", default=["bfs", "pr10", "cc"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", "--trials", type=int, default=4)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args()
    trees = [t.split("=", 1) for t in a.tree] or [["graphene_py", "."]]
    runs = {algo: {"gapbs": []} | {lb: [] for lb, _ in trees} for algo in a.algos}
    for r in range(a.rounds):
        for algo in a.algos:
            runs[algo]["gapbs"] += gapbs(a.gapbs, a.sg, algo, a.trials, a.threads)
            for lb, path in trees:
                runs[algo][lb] += ours(path, a.graph, algo, a.trials, a.threads)
            print(f"round {r + 1} {algo}: " + "  ".join(
                f"{k} {statistics.median(v):.4f}" for k, v in runs[algo].items()), flush=True)
    print("\n| algorithm | GAPBS s | " + " | ".join(f"{lb} s (x GAPBS)" for lb, _ in trees) + " |")
    print("|---|---|" + "---|" * len(trees))
    for algo, v in runs.items():
        g = statistics.median(v["gapbs"])
        cells = [f"{statistics.median(v[lb]):.3f} ({statistics.median(v[lb]) / g:.2f}x)"
                 for lb, _ in trees]
        print(f"| {algo} | {g:.3f} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"graph": a.graph, "threads": a.threads, "trials": a.trials,
                       "rounds": a.rounds, "trees": dict(trees), "seconds": runs,
                       "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f, indent=1)


if __name__ == "__main__":
    main()
