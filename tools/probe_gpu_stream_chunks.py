#!/usr/bin/env python3
"""Streamed GPU PageRank (gpu/streamed.py, stream-ssd) with different chunk sizes, side by side in
one process on a dropped page cache: the setup, the first pass (the lists read from the SSD, copied
and kept in GPU memory) and the later passes.

    PYTHONPATH=. python3 tools/probe_gpu_stream_chunks.py --scale 22 --work /tmp/auto --reps 3 \\
        --chunks 268435456 auto --out X.json

The dataset: tools/bench_auto_device.make_dataset (Kronecker, edge factor 16, symmetrized, 1x1).
`auto` is the default (streamed.chunk_bytes_for). Variants interleaved, --reps rounds; PageRank
pull, 10 iterations, tolerance 0; CuPy started before the first (not in any figure).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_auto_device import make_dataset  # noqa: E402
from bench_io import drop_caches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--work", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--chunks", nargs="+", default=[str(256 << 20), "auto"])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    path = make_dataset(a.scale, a.work)
    from graphene_py.graph import Graph
    from graphene_py.gpu import _module, streamed
    cp = _module.cupy()
    _module.module()
    g = Graph.open(path)
    rows = []
    for r in range(a.reps):
        for ch in a.chunks:
            size = None if ch == "auto" else int(ch)
            drop_caches()
            cp.get_default_memory_pool().free_all_blocks()
            cp.get_default_pinned_memory_pool().free_all_blocks()
            t0 = time.perf_counter()
            sp = streamed.StreamedPageRank(g, source="ssd", chunk_bytes=size)
            t1 = time.perf_counter()
            st = {}
            sp.run(0.85, 0.0, 10, stats=st)
            t2 = time.perf_counter()
            steps = st["supersteps"]
            row = {"round": r, "chunks": ch, "n_chunks": len(sp.chunks),
                   "setup_s": t1 - t0, "first_pass_s": steps[0]["seconds"],
                   "later_passes_s": sum(s["seconds"] for s in steps[1:]), "total_s": t2 - t0}
            rows.append(row)
            print(json.dumps(row), flush=True)
            del sp
    with open(a.out, "w") as f:
        json.dump(rows, f, indent=1)
    for ch in a.chunks:
        rs = [x for x in rows if x["chunks"] == ch]
        print(ch, {k: round(statistics.median(x[k] for x in rs), 3)
                   for k in ("setup_s", "first_pass_s", "later_passes_s", "total_s")},
              "chunks", rs[0]["n_chunks"])


if __name__ == "__main__":
    main()
