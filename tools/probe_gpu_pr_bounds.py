"""Probe: GPU PageRank ms per iteration for several in-degree bin bounds (tiled hub bin), beside the
CuPy baseline, on Kronecker scale 22 and 24. Run on a GPU machine:

    PYTHONPATH=. python3 tools/probe_gpu_pr_bounds.py      # writes $OUT/probe.json (or /tmp)
    PYTHONPATH=. python3 tools/probe_gpu_pr_bounds.py --scales 22 \
        --variants '[[[8,64,128],null],[[8,64,128],{"gbits":12,"sbits":12}]]'   # (bounds, tile opts)
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bench_gpu as B
import cupy as cp
from graphene_py import gpu
ap = argparse.ArgumentParser()
ap.add_argument("--scales", type=int, nargs="+", default=[22, 24])
ap.add_argument("--variants", default=None, help="JSON list of [bounds, tile options or null]")
args = ap.parse_args()
VARIANTS = ([(tuple(b), o) for b, o in json.loads(args.variants)] if args.variants else
            [((8, 64, 512), None), ((8, 64, 256), None), ((8, 64, 128), None), ((8, 32, 128), None),
             ((4, 32, 256), None), ((8, 128, 256), None)])
sync = cp.cuda.Device().synchronize
out = {}
for scale in args.scales:
    n, dg, A, outdeg = B.pagerank_case(scale)
    def per_iter(fn):
        fn(2); sync()
        t0 = time.perf_counter(); fn(5); sync(); t5 = time.perf_counter() - t0
        t0 = time.perf_counter(); fn(20); sync(); t20 = time.perf_counter() - t0
        return (t20 - t5) / 15 * 1e3
    ref = gpu.pagerank(dg, tol=0.0, max_iter=20, to_host=False)
    res = {}
    for rep in range(2):
        res.setdefault("baseline", []).append(per_iter(lambda k: B.baseline_pagerank(A, outdeg, n, k)))
        for b, o in VARIANTS:
            key = f"{b} {o}" if o else f"{b}"
            dg.drop_tiles()
            st = {}
            sc = gpu.pagerank(dg, tol=0.0, max_iter=20, bounds=b, tile=o, to_host=False, stats=st)
            res[key + " l1"] = float(cp.abs(sc - ref).sum())
            res[key + " method"] = st.get("method")
            res.setdefault(key, []).append(per_iter(
                lambda k: gpu.pagerank(dg, tol=0.0, max_iter=k, bounds=b, tile=o, to_host=False)))
    out[scale] = {k: (min(v) if isinstance(v, list) else v) for k, v in res.items()}
    base = out[scale]["baseline"]
    for k, v in out[scale].items():
        if isinstance(v, float) and not k.endswith("l1"):
            print(scale, k, round(v, 3), round(v / base, 3), flush=True)
    dg = A = None
    cp.get_default_memory_pool().free_all_blocks()
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe.json"), "w"), indent=1, default=str)
