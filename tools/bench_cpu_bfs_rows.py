#!/usr/bin/env python3
"""The CPU rows beside tools/bench_gpu_tiers.py: BFS on the same Kronecker graph by our CPU paths on
the GPU machine's own cores, as a user runs them (issue 15, measure (c)).

    PYTHONPATH=. python3 tools/bench_cpu_bfs_rows.py --scale 25 --work /tmp/cpu25 --out cpu25.json

The dataset: tools/bench_auto_device.make_dataset (Graph500 Kronecker, edge factor 16,
symmetrized, 1x1, its disk calibrated as `graphene partition` does). Each run is a fresh
`graphene run bfs --src S --json` process: from the SSD on a dropped page cache (`ssd`), and with
`--in-memory` (`in-memory`: the lists read into RAM in the setup, not in the trial's time), from
--sources random vertices of non-zero degree (seeded). Records the trial's own seconds, the
process wall, and GTEPS: the undirected edges of the vertices reached / own seconds, as
tools/bench_gpu_tiers.py counts them.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_auto_device import CLI, make_dataset  # noqa: E402
from bench_io import drop_caches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=25)
    ap.add_argument("--work", required=True)
    ap.add_argument("--sources", type=int, default=4)
    ap.add_argument("--modes", nargs="*", default=["ssd", "in-memory"])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    t = time.perf_counter()
    path = make_dataset(a.scale, a.work)
    print(f"dataset {path} ready in {time.perf_counter() - t:.1f} s", flush=True)
    from graphene_py.graph import Graph
    g = Graph.open(path)
    deg = g.degrees("out")
    rng = np.random.default_rng(1)
    srcs = [int(x) for x in rng.choice(np.flatnonzero(deg), a.sources, replace=False)]
    rows = []
    for src in srcs:
        for mode in a.modes:
            extra = ["--in-memory"] if mode == "in-memory" else []
            dropped = drop_caches()
            t0 = time.perf_counter()
            res = os.path.join(a.work, "bfs_result.npz")
            p = subprocess.run([sys.executable, "-c", CLI, "run", "bfs", "-g", path, "--src",
                                str(src), "--json", "-q", "-o", res, *extra],
                               capture_output=True, text=True)
            wall = time.perf_counter() - t0
            row = {"src": src, "mode": mode, "wall": round(wall, 3), "rc": p.returncode,
                   "dropped": dropped}
            if p.returncode == 0:
                d = json.loads(p.stdout)
                r = d["result"]
                own = float(d["trials"][0]["seconds"])
                # the undirected edges of the vertices reached, as the GPU rows count them
                reached = np.load(res)["depth"] >= 0
                edges = int(deg[reached].sum()) // 2
                row.update(own=own, n_reached=r.get("n_reached"), levels=r.get("levels"),
                           bytes_read=r.get("totals", {}).get("bytes_read"), edges=edges,
                           gteps=edges / own / 1e9)
            else:
                row["stderr"] = p.stderr[-400:]
            rows.append(row)
            print(json.dumps(row), flush=True)
            with open(a.out, "w") as f:
                json.dump({"scale": a.scale, "num_edges": g.num_edges, "rows": rows}, f, indent=1)
    for mode in a.modes:
        rs = [r for r in rows if r["mode"] == mode and r["rc"] == 0]
        if rs:
            own = statistics.median(r["own"] for r in rs)
            print(f"{mode}: own {own:.3f} s, wall {statistics.median(r['wall'] for r in rs):.2f} s, "
                  f"{statistics.median(r['gteps'] for r in rs):.3f} GTEPS (medians of {len(rs)})")


if __name__ == "__main__":
    main()
