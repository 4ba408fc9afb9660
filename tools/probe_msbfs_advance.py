#!/usr/bin/env python3
"""How long MS-BFS's level ends take (algos/msbfs `_advance`: the next frontier, the direction
masks and their bytes, the level's words into the log) inside one APSP run, in process, after
`sync; echo 3 > drop_caches` (root): each call's seconds, their sum, the levels' own seconds and
the run's total.

    sudo .venv/bin/python tools/probe_msbfs_advance.py --graph /tmp/disk0/kron22 --sources 32 \
        [--runs 3]

Run it with PYTHONPATH=<a source tree> (and that tree's GRAPHENE_KERNEL_CACHE) to time another
version: `_advance` is wrapped whatever its arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True, help="a dataset folder or registered name")
    ap.add_argument("--sources", type=int, default=32, help="sources 0..N-1")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    from graphene_py.graph import Graph
    import graphene_py.algos.msbfs as M
    g = Graph.open(a.graph)
    real = M._advance
    times = []

    def timed(*x, **k):
        t = time.perf_counter()
        try:
            return real(*x, **k)
        finally:
            times.append(time.perf_counter() - t)
    M._advance = timed
    for run in range(a.runs):
        times.clear()
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        t = time.perf_counter()
        r = M.run(g, sources=np.arange(a.sources), keep_depths=False, closeness=True,
                  threads=a.threads)
        total = time.perf_counter() - t
        print(json.dumps({"run": run, "tree": os.path.dirname(os.path.dirname(M.__file__)),
                          "total_s": round(total, 3),
                          "levels_s": round(sum(s.get("seconds", 0) for s in r.supersteps), 3),
                          "advance_s": round(sum(times), 3),
                          "advance_calls_s": [round(x, 3) for x in times]}), flush=True)


if __name__ == "__main__":
    main()
