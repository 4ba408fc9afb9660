"""Issue 15's headline, as a user runs it: `graphene run ALGO --device gpu --gpu-mem 2G` on a graph
whose edge lists are several times the GPU budget, beside `--device cpu` on the same machine, each a
fresh process (page cache dropped first where we are root), the results compared.

    PYTHONPATH=. python3 tools/bench_gpu_past_memory.py --scale 24 --ef 64 --gpu-mem 2G \
        --work /tmp/big --out big.json

The graph: tools/generate.py's Kronecker (Graph500 A,B,C = .57,.19,.19), partitioned 1x1 with
`graphene partition -s` (symmetrized, deduplicated). Algorithms: pull PageRank (10 iterations,
tolerance 0; scores compared by max abs difference) and WCC (labels compared exactly). Each
process's wall time is taken around it; its own JSON (`--json`) is kept whole in the output.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import drop_caches  # noqa: E402
CLI = ("import sys; from graphene_py.cli import main; sys.argv[0] = 'graphene'; "
       "sys.exit(main())")
ALGOS = {"pagerank-pull": ["--max-iter", "10", "--tol", "0"], "wcc": []}


def timed(cmd, env, log):
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    log.write(f"$ {' '.join(cmd[3:] if cmd[1] == '-c' else cmd)}\n{p.stderr[-3000:]}\n")
    log.flush()
    if p.returncode:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return wall, p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=24)
    ap.add_argument("--ef", type=int, default=64)
    ap.add_argument("--gpu-mem", default="2G")
    ap.add_argument("--work", default="/tmp/big")
    ap.add_argument("--out", default="big.json")
    ap.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    ap.add_argument("--devices", nargs="+", default=["gpu", "cpu"], choices=["gpu", "cpu", "auto"])
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ, GRAPHENE_HOME=os.path.join(a.work, "home"),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    py = sys.executable
    name = f"k{a.scale}e{a.ef}"
    src = os.path.join(a.work, name + ".bin32")
    out = {"scale": a.scale, "edge_factor": a.ef, "gpu_mem": a.gpu_mem, "runs": []}
    log = open(os.path.splitext(a.out)[0] + ".log", "w")
    if not os.path.exists(src):
        out["generate_s"], _ = timed([py, os.path.join(ROOT, "tools", "generate.py"), "kron",
                                      "-g", str(a.scale), "-k", str(a.ef), "-o", src, "-q"],
                                     env, log)
    disk = os.path.join(a.work, "d0")
    os.makedirs(disk, exist_ok=True)
    home = os.path.join(disk, name)
    if not os.path.exists(home):
        out["partition_s"], _ = timed([py, "-c", CLI, "partition", src, "--disks", disk,
                                       "--name", name, "-s", "--force"], env, log)
    lists = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(home)
                for f in fs if f.endswith(".adj"))
    out["list_bytes"] = lists
    print(f"{name}: {lists / 1e9:.2f} GB of edge lists; --gpu-mem {a.gpu_mem}", flush=True)
    for algo in a.algos:
        res = {}
        for dev in a.devices:
            path = os.path.join(a.work, f"{algo}_{dev}.npy")
            cmd = [py, "-c", CLI, "run", algo, "-g", name, "--device", dev, "--json", "-o", path,
                   *ALGOS[algo]] + (["--gpu-mem", a.gpu_mem] if dev != "cpu" else [])
            cold = drop_caches()
            wall, stdout = timed(cmd, env, log)
            js = json.loads(stdout)
            res[dev] = np.load(path)
            row = {"algo": algo, "device": dev, "wall_s": wall, "cold_cache": cold, "json": js}
            out["runs"].append(row)
            print(f"{algo} --device {dev}: {wall:.2f} s wall, own {js.get('average_seconds')}"
                  + (f" (ran on {js['trials'][0].get('device', 'cpu')}: "
                     f"{js['trials'][0].get('device_reason', '')})" if dev == "auto" else ""), flush=True)
        if "gpu" in res and "cpu" in res:
            g, c = res["gpu"], res["cpu"]
            if algo == "wcc":
                cmp = {"equal": bool(np.array_equal(g, c))}
            else:
                cmp = {"max_abs_diff": float(np.max(np.abs(g - c)))}
            out.setdefault("compare", {})[algo] = cmp
            print(f"{algo}: GPU against CPU {cmp}", flush=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    main()
