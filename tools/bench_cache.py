"""Time against the `--memory` budget: each algorithm at budgets that leave 0, 25, 50 and 100% of
the adjacency bytes for the cache (on top of what the run needs without one: runtime, IO buffers,
O(|V|) state), every run a fresh process on a cold page cache, the budgets interleaved, medians;
fio's ceiling at the start and the end (tools/ab_runs.py does the runs). Writes the runs as JSON,
a Markdown table on stdout and, with matplotlib installed (`pip install -e '.[plots]'`), a PNG.

    sudo .venv/bin/python tools/bench_cache.py --graph kron22g4 -n 3 --fio /tmp/fio.dat \\
        --json benchmarks/cache_kron22.json --png benchmarks/cache_kron22.png
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ab_runs  # noqa: E402

ALGOS = {"BFS": "bfs --src 0", "PageRank-10": "pagerank-pull --max-iter 10 --tol 0"}


def budgets(graph_name, algo_args, fractions):
    """--memory values (MiB, rounded up) for each fraction of the adjacency."""
    from graphene_py.algos.registry import memory_plan
    from graphene_py.graph import Graph
    from graphene_py.iterator import IoIterator
    g = Graph.open(graph_name)
    dirs = ["out"] + (["in"] if g.directed and g.in_partitions is not None else [])
    adj = 0
    for d in dirs:
        with IoIterator(g, d) as it:
            adj += int(it.file_bytes.sum())
    name = shlex.split(algo_args)[0]
    plan = memory_plan(name, g, "1T", {}, {})
    need = plan["memory_bytes"] - plan["cache_bytes"]
    mib = 1 << 20
    return adj, need, {f: -(-(need + int(f * adj) + (4096 if f >= 1 else 0)) // mib)
                       for f in fractions}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", required=True)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0, 0.25, 0.5, 1.0])
    ap.add_argument("--algo", action="append", default=None, metavar="LABEL=ARGS",
                    help="e.g. 'BFS=bfs --src 0' (default: BFS and PageRank-10)")
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--fio", default=None, metavar="FILE")
    ap.add_argument("--json", required=True)
    ap.add_argument("--png", default=None)
    a = ap.parse_args(argv)
    algos = dict(s.split("=", 1) for s in a.algo) if a.algo else ALGOS
    exe = os.path.join(os.path.dirname(sys.executable), "graphene")
    runs, meta = [], {}
    for label, args in algos.items():
        adj, need, mem = budgets(a.graph, args, a.fractions)
        meta[label] = {"adjacency_bytes": adj, "fixed_bytes": need, "memory_mib": mem}
        for f, m in mem.items():
            runs += ["--run", f"{label}@{int(round(f * 100))}%={exe} run {args} --graph {a.graph} "
                              f"--memory {m}M -q"]
    tmp = a.json + ".runs"
    argv2 = runs + ["-n", str(a.n), "--json", tmp, "--data-dir", "/tmp"]
    if a.fio:
        argv2 += ["--fio", a.fio]
    ab_runs.main(argv2)
    with open(tmp) as f:
        res = json.load(f)
    os.unlink(tmp)
    res["budgets"] = meta
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    print("\n| algorithm | cache (% of adjacency) | --memory | own s | process wall s | device MB "
          "| peak RSS MiB |\n|---|---:|---:|---:|---:|---:|---:|")
    series = {}
    for label in algos:
        for f, m in meta[label]["memory_mib"].items():
            key = f"{label}@{int(round(f * 100))}%"
            s = res["summary"][key]
            med = (lambda k: s[k]["median"] if s.get(k) else float("nan"))
            print(f"| {label} | {int(round(f * 100))}% | {m}M | {med('own'):.3f} | "
                  f"{med('wall'):.3f} | {med('device_bytes') / 1e6:.0f} | {med('maxrss_mb'):.0f} |")
            series.setdefault(label, []).append((f * 100, med("own"), med("wall")))
    if a.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed (pip install -e '.[plots]'): no PNG")
            return 0
        fig, axes = plt.subplots(1, len(series), figsize=(5 * len(series), 3.6), squeeze=False)
        for ax, (label, pts) in zip(axes[0], series.items()):
            x = [p[0] for p in pts]
            ax.plot(x, [p[1] for p in pts], "o-", label="own time (trial 1)")
            ax.plot(x, [p[2] for p in pts], "s--", label="process wall")
            ax.set_title(f"{label} on {a.graph}")
            ax.set_xlabel("cache budget, % of adjacency bytes")
            ax.set_ylabel("seconds (median, cold cache)")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            ax.legend()
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print(f"wrote {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
