"""The cluster backend against the single-process engine: one dataset, the same algorithms, on 1,
2 and 4 simulated Ray nodes on this one machine (ray.cluster_utils.Cluster: every node a raylet
with its own disk folders and `graphene:nK` resource). Reports per algorithm the time (the
algorithm's own seconds, the page cache dropped before each run), supersteps, and per superstep
the coordination time (driver time beyond the slowest node: shipping the state, waiting, merging)
and the bytes exchanged: sent (from the driver: the state changes and each node's frontier slice),
back (to the driver: the changes, or the owners' combined results, and the queues) and between
(from node to node: the parts the owners combine and the allgather of their results and of a
large message's parts).

All nodes share this machine's cores and disk, so this measures the backend's overhead, not a
cluster's speed-up; the model in BENCHMARKS.md turns the measured per-superstep volumes into
predictions for real clusters.

    .venv/bin/python tools/bench_cluster.py --graph kron22g4 --nodes 1 2 4 -n 3 \\
        --json benchmarks/cluster_kron22.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ALGOS = {"bfs": {"src": 0}, "wcc": {}, "pagerank-pull": {"max_iter": 10, "tolerance": 0.0},
         "spmv": {}}


def drop_caches():
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def summarize(kind, nodes, algo, res, wall):
    st = res.supersteps
    row = {"engine": kind, "nodes": nodes, "algorithm": algo, "seconds": float(res.seconds),
           "wall": wall, "supersteps": len(st)}
    if st and "exchange_bytes" in st[0]:
        row["coord_ms_median"] = 1e3 * statistics.median(s["coordination_seconds"] for s in st)
        row["exchange_mb_median"] = statistics.median(s["exchange_bytes"] for s in st) / 1e6
        row["exchange_mb_total"] = sum(s["exchange_bytes"] for s in st) / 1e6
        row["sent_mb_total"] = sum(s["bytes_sent"] for s in st) / 1e6
        row["back_mb_total"] = sum(s["bytes_back"] for s in st) / 1e6
        row["between_mb_total"] = sum(s.get("bytes_between", 0) for s in st) / 1e6
        row["combined_by_owners"] = sum(s.get("combined_by") == "owners" for s in st)
        row["node_seconds_max_sum"] = sum(max(s["node_seconds"]) for s in st)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="kron22g4")
    ap.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--algos", nargs="+", default=list(ALGOS))
    ap.add_argument("-n", "--trials", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--root", default="/tmp/graphene_cluster_bench")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import ray
    from ray.cluster_utils import Cluster as RayCluster
    import graphene_py as gp
    from graphene_py.algos.registry import dispatch
    from graphene_py.cluster import Cluster
    g = gp.Graph.open(a.graph)
    rows = []
    rt = {"threads": a.threads}
    for k in a.nodes:
        shutil.rmtree(a.root, ignore_errors=True)
        for i in range(k):
            os.makedirs(f"{a.root}/n{i}/d0")
        rc = RayCluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "resources": {"graphene:n0": 1}, "object_store_memory": 1 << 30})
        for i in range(1, k):
            rc.add_node(num_cpus=1, resources={f"graphene:n{i}": 1}, object_store_memory=1 << 30)
        ray.init(address=rc.address, logging_level="ERROR", log_to_driver=False)
        try:
            c = Cluster(rc.address)
            t0 = time.perf_counter()
            c.distribute(g, [f"{a.root}/{{node}}/d0"], name=f"{a.graph}-bench", force=True,
                         nodes=[f"graphene:n{i}" for i in range(k)])
            print(f"{k} node(s): distributed in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
            cg = c.open(f"{a.graph}-bench")
            cg.engines(dict(rt))
            for algo in a.algos:
                dispatch(algo, cg, **ALGOS[algo], **rt)          # kernels compiled on the nodes
                for t in range(a.trials):
                    for kind, graph in (("single", g), ("cluster", cg)):
                        if kind == "single" and k != a.nodes[0]:
                            continue                            # once is enough
                        drop_caches()
                        w0 = time.perf_counter()
                        res = dispatch(algo, graph, **ALGOS[algo], **rt)
                        row = summarize(kind, k if kind == "cluster" else 0, algo, res,
                                        time.perf_counter() - w0)
                        row["trial"] = t
                        rows.append(row)
                        print(json.dumps(row), file=sys.stderr)
            cg.close()
        finally:
            ray.shutdown()
            rc.shutdown()
    shutil.rmtree(a.root, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    print("| algorithm | engine | nodes | seconds (median) | supersteps | coordination ms/step "
          "| exchanged MB/step (median) | sent MB total | back MB total | between MB total |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["algorithm"], r["engine"], r["nodes"]) for r in rows})
    for algo, kind, k in keys:
        rs = [r for r in rows if (r["algorithm"], r["engine"], r["nodes"]) == (algo, kind, k)]
        med = statistics.median(r["seconds"] for r in rs)
        c = rs[0]
        print(f"| {algo} | {kind} | {k or '-'} | {med:.2f} | {c['supersteps']} | "
              f"{c.get('coord_ms_median', 0):.1f} | {c.get('exchange_mb_median', 0):.1f} | "
              f"{c.get('sent_mb_total', 0):.0f} | {c.get('back_mb_total', 0):.0f} | "
              f"{c.get('between_mb_total', 0):.0f} |")


if __name__ == "__main__":
    main()
