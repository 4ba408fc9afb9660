#!/usr/bin/env python3
"""Run a few PageRank iterations on a Kronecker graph for Nsight Compute (ncu) to profile pr_pull:

    ncu -k regex:pr_pull --launch-skip 8 --launch-count 4 --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis python3 tools/profile_gpu_pr.py --scale 22
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_gpu import kronecker_gpu  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--scale", type=int, default=22)
a = ap.parse_args()
from graphene_py import gpu  # noqa: E402
from graphene_py.gpu import DeviceGraph  # noqa: E402
n, ptr, idx = kronecker_gpu(a.scale, 16)
dg = DeviceGraph.from_csr(ptr, idx, symmetric=True)
dg.gather_layout()
gpu.pagerank(dg, tol=0.0, max_iter=4, to_host=False)
