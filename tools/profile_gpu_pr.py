#!/usr/bin/env python3
"""Run a few PageRank iterations on a Kronecker graph for Nsight Compute (ncu) to profile pr_pull:

    ncu -k regex:pr_pull --launch-skip 8 --launch-count 4 --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis python3 tools/profile_gpu_pr.py --scale 22

--method pull (the hubs as one block per vertex) or tile (default: pr_tile, regex:pr_tile).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_gpu import kronecker_gpu  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--scale", type=int, default=22)
ap.add_argument("--method", default="tile", choices=["tile", "pull"])
ap.add_argument("--tile", default=None, help="pagerank tile options as JSON, e.g. '{\"fixed\": false}'")
a = ap.parse_args()
from graphene_py import gpu  # noqa: E402
from graphene_py.gpu import DeviceGraph  # noqa: E402
n, ptr, idx = kronecker_gpu(a.scale, 16)
dg = DeviceGraph.from_csr(ptr, idx, symmetric=True)
dg.gather_layout()
import json  # noqa: E402
gpu.pagerank(dg, tol=0.0, max_iter=4, method=a.method, tile=json.loads(a.tile) if a.tile else None,
             to_host=False)
