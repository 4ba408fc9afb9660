"""Bytes per vertex, per algorithm and per array: each algorithm in a fresh `graphene run --json`
process on one dataset; prints a Markdown table (the `memory` block's state, IO buffers, trial growth
and the process's peak RSS, all per vertex) and writes every run's block to a JSON-lines file.

    .venv/bin/python tools/bench_memory.py --graph kron22 --out benchmarks/memory_kron22.jsonl
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import click

RUNS = {
    "BFS": ["bfs", "--src", "0"],
    "delta PageRank": ["pagerank"],
    "pull PageRank (10 it.)": ["pagerank-pull", "--max-iter", "10", "--tol", "0"],
    "WCC": ["wcc"],
    "SpMV": ["spmv"],
    "17-core membership": ["kcore", "--k", "17", "--membership-only"],
    "k-core decomposition": ["kcore"],
    "APSP 32 sources": ["apsp"],
}


def _run(graph, args, extra):
    code = "from graphene_py.cli import main; main()"
    p = subprocess.run([sys.executable, "-c", code, "run", *args, "--graph", graph, "--json",
                        *extra], capture_output=True, text=True)
    if p.returncode:
        raise click.ClickException(f"{' '.join(args)}: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout)


@click.command()
@click.option("--graph", required=True, help="Dataset name or folder.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="JSON-lines output.")
@click.option("--only", multiple=True, help="Run only these (names as in the table).")
@click.option("--extra", default="", help="More options for every run (e.g. '-t 2').")
def main(graph, out, only, extra):
    rows = []
    for name, args in RUNS.items():
        if only and name not in only:
            continue
        d = _run(graph, args, extra.split())
        m = d["memory"]
        n = d.get("num_vertices") or round(m["state_bytes"] / max(m["state_bytes_per_vertex"], 1e-9))
        rows.append({"run": name, "args": args, "num_vertices": n, "peak_rss_mib": d["peak_rss_mb"],
                     "memory": m, "machine": platform.node()})
        io = m["io_buffer_bytes"] / n
        top = ", ".join(f"{k} {v['bytes_per_vertex']:g}" for k, v in m["arrays"].items()
                        if not k.startswith(("io buffers", "partitions")) and
                        v["bytes_per_vertex"] >= 1)
        print(f"| {name} | {m['state_bytes_per_vertex']:.1f} | {io:.1f} | "
              f"{m['trial_growth_bytes_per_vertex']:.1f} | {d['peak_rss_mb']:.0f} "
              f"({d['peak_rss_mb'] * 2**20 / n:.0f}) | {top} |", flush=True)
    if out:
        with open(out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
