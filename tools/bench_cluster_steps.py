"""The cluster backend's fixed cost per superstep: BFS along a chain (one vertex per level, so a
superstep does almost no work) on K simulated Ray nodes of this machine. Prints the medians of
the superstep time, the driver's shipping and merging and the slowest node's own time.

    .venv/bin/python tools/bench_cluster_steps.py --levels 400 --nodes 3 [--inline-bytes 0]

With --algo wcc or --algo kcore: WCC, or the full k-core decomposition, on the same chain made
directed with in-edges, whose vertices hop between the nodes' rows (0, n/K, 2n/K, 1, ...): every
superstep reads the out- and the in-lists; prints the supersteps and the run's seconds.

With --star N: pull PageRank (10 iterations) on a star of N leaves instead, whose supersteps move
8 B per vertex each way (N = 70000: 560 KB messages, the size the engine sends in pieces under
Ray's inline limit; --inline-max 0 sends them through the object store, as before).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", type=int, default=400)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--inline-bytes", type=int, default=None,
                    help="State messages up to this size go inline with the calls (default: the "
                         "engine's; 0: every message through the object store).")
    ap.add_argument("--star", type=int, default=0, metavar="N")
    ap.add_argument("--algo", choices=("bfs", "wcc", "kcore"), default="bfs")
    ap.add_argument("--inline-max", type=int, default=None,
                    help="Messages and changes up to this size travel in pieces inline (default: "
                         "the engine's; 0: through the object store).")
    a = ap.parse_args()
    import numpy as np
    import ray
    from ray.cluster_utils import Cluster as RayCluster
    import graphene_py as gp
    from graphene_py.cluster import Cluster, engine
    if a.inline_bytes is not None:
        engine.INLINE = a.inline_bytes
    if a.inline_max is not None:
        engine.INLINE_MAX = a.inline_max
    root = tempfile.mkdtemp(prefix="graphene_steps_")
    os.environ["GRAPHENE_HOME"] = os.path.join(root, "home")
    os.makedirs(f"{root}/src")
    if a.star:
        leaves = np.arange(1, a.star + 1)
        g = gp.partition_arrays(np.zeros(a.star, np.int64), leaves, num_vertices=a.star + 1,
                                disks=[f"{root}/src"], name="chain", rows=a.nodes, cols=2,
                                symmetrize=True, register=False)
    elif a.algo != "bfs":
        n = a.levels - a.levels % a.nodes
        order = np.arange(n).reshape(a.nodes, -1).T.reshape(-1)
        g = gp.partition_arrays(order[:-1], order[1:], num_vertices=n, disks=[f"{root}/src"],
                                name="chain", rows=a.nodes, cols=2, in_edges=True,
                                register=False)
    else:
        v = np.arange(a.levels - 1)
        g = gp.partition_arrays(v, v + 1, num_vertices=a.levels, disks=[f"{root}/src"],
                                name="chain", rows=a.nodes, cols=2, register=False)
    rc = RayCluster(initialize_head=True, head_node_args={"num_cpus": 1,
                                                          "resources": {"graphene:n0": 1}})
    for i in range(1, a.nodes):
        rc.add_node(num_cpus=1, resources={f"graphene:n{i}": 1})
    ray.init(address=rc.address, logging_level="ERROR", log_to_driver=False)
    try:
        for i in range(a.nodes):
            os.makedirs(f"{root}/n{i}/d0")
        c = Cluster(rc.address)
        c.distribute(g, [f"{root}/{{node}}/d0"])
        cg = c.open("chain")
        for t in range(2):                    # the first run compiles the nodes' kernels
            t0 = time.perf_counter()
            r = (gp.pagerank_pull(cg, max_iter=10, tolerance=0, threads=2) if a.star else
                 gp.wcc(cg, threads=2) if a.algo == "wcc" else
                 gp.kcore(cg, threads=2) if a.algo == "kcore" else
                 gp.bfs(cg, src=0, threads=2))
            wall = time.perf_counter() - t0
        if a.algo != "bfs" and not a.star:
            print(f"{a.nodes} nodes, {a.algo} on a directed chain of {g.num_vertices} with "
                  f"in-edges: {len(r.supersteps)} supersteps, {wall:.2f} s (second run)")
            return
        st = r.supersteps
        med = {k: 1e3 * statistics.median(s[k] for s in st)
               for k in ("seconds", "ship_seconds", "merge_seconds", "coordination_seconds")}
        node = 1e3 * statistics.median(max(s["node_seconds"]) for s in st)
        what = f"{len(st)} PageRank iterations on a star of {a.star}" if a.star else \
            f"{r.levels} levels"
        print(f"{a.nodes} nodes, {what}: {wall:.2f} s; per superstep (median ms): "
              f"total {med['seconds']:.1f}, shipping {med['ship_seconds']:.2f}, merging "
              f"{med['merge_seconds']:.2f}, beyond the slowest node {med['coordination_seconds']:.1f}"
              f", slowest node {node:.2f}")
    finally:
        ray.shutdown()
        rc.shutdown()


if __name__ == "__main__":
    main()
