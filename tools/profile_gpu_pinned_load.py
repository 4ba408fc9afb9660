"""Where the stream-host tier's setup goes: pinning host memory for the lists, and reading them into
it (buffered or O_DIRECT, with READERS threads), each read on a dropped page cache where we are root.

    PYTHONPATH=. python3 tools/profile_gpu_pinned_load.py --graph k24e64 --readers 4 8 --out prof.json

(GRAPHENE_HOME as the dataset was registered; tools/bench_gpu_past_memory.py makes one.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import drop_caches  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--direction", default="out")
    ap.add_argument("--readers", type=int, nargs="+", default=[4])
    ap.add_argument("--out", default="pinned_load.json")
    a = ap.parse_args()
    import cupy as cp
    import graphene_py as gp
    from graphene_py.gpu import streamed
    g = gp.Graph.open(a.graph)
    nbytes = sum(p.num_edges for p in g.parts(a.direction)) * int(g.id_width)
    out = {"graph": a.graph, "list_bytes": nbytes, "runs": []}
    cp.zeros(1)                                   # the CUDA context, not timed
    t = time.perf_counter()
    pin = cp.cuda.alloc_pinned_memory(nbytes)
    out["pin_alloc_s"] = time.perf_counter() - t
    del pin
    print(f"{a.graph}: {nbytes / 1e9:.2f} GB of {a.direction}-lists; pinning them alone "
          f"{out['pin_alloc_s']:.2f} s", flush=True)
    for direct in (False, True):
        for r in a.readers:
            streamed.READERS = r
            cold = drop_caches()
            t = time.perf_counter()
            ls = streamed.ListStream(g, a.direction, "host", direct=direct)
            s = time.perf_counter() - t
            del ls
            row = {"direct": direct, "readers": r, "seconds": s, "cold": cold,
                   "gb_per_s": nbytes / s / 1e9}
            out["runs"].append(row)
            print(f"direct={direct} readers={r}: {s:.2f} s, {row['gb_per_s']:.2f} GB/s "
                  f"(cold cache: {cold})", flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
