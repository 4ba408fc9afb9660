#!/usr/bin/env python3
"""One streamed GPU pass from the SSD (gpu/streamed.py wcc / spmv with source "ssd"; or a streamed
PageRank's set-up and 3 iterations: --algo pagerank), timed in a
fresh process on a dropped page cache: run it once per source tree, alternating, to compare two
versions of the chunk reader.

    python3 tools/probe_gpu_stream_ab.py --dataset /tmp/a24/disk/kron24 --algo wcc   # one run

Prints one JSON line: the pass's seconds (CuPy started, kernels loaded before it), its bytes.
"""
import argparse
import json
import os
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--algo", choices=["wcc", "spmv", "pagerank"], default="wcc",
                    help="pagerank: a streamed PageRank's set-up (StreamedPageRank) and 3 "
                         "iterations")
    a = ap.parse_args()
    import numpy as np
    from graphene_py.graph import Graph
    from graphene_py.gpu import _module, streamed
    cp = _module.cupy()
    _module.module()
    _module.warm_cupyx()
    _module.settle()
    g = Graph.open(a.dataset)
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    st = {}
    t0 = time.perf_counter()
    setup = None
    if a.algo == "pagerank":
        sp = streamed.StreamedPageRank(g, source="ssd")
        setup = round(sp.setup_seconds, 3)
        sp.run(0.85, 0.0, 3, stats=st)
    elif a.algo == "wcc":
        streamed.wcc(g, source="ssd", stats=st)
    else:
        streamed.spmv(g, np.ones(g.num_vertices), source="ssd", stats=st)
    cp.cuda.Device().synchronize()
    t = time.perf_counter() - t0
    print(json.dumps({"tree": os.path.dirname(os.path.dirname(os.path.abspath(streamed.__file__))),
                      "algo": a.algo, "seconds": round(t, 3), "setup_seconds": setup,
                      "bytes": st.get("bytes_moved"),
                      "gb_per_s": round(st.get("bytes_moved", 0) / t / 1e9, 3)}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
