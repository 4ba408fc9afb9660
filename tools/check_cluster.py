"""Results on a simulated cluster against the single-process engine, on a real dataset: every
algorithm that runs on a cluster, on K simulated Ray nodes of this machine (not timed; the
single-machine run is the reference: depths, labels, MS-BFS depths, K-core membership and core numbers equal, PageRank, SpMV and
betweenness within rounding or the stop rule's reach).

    .venv/bin/python tools/check_cluster.py --graph kron22g4 --nodes 4
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="kron22g4")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--root", default="/tmp/graphene_cluster_check")
    a = ap.parse_args()
    import numpy as np
    import ray
    from ray.cluster_utils import Cluster as RayCluster
    import graphene_py as gp
    from graphene_py.cluster import Cluster
    g = gp.Graph.open(a.graph)
    shutil.rmtree(a.root, ignore_errors=True)
    for i in range(a.nodes):
        os.makedirs(f"{a.root}/n{i}/d0")
    rc = RayCluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"graphene:n0": 1}, "object_store_memory": 1 << 30})
    for i in range(1, a.nodes):
        rc.add_node(num_cpus=1, resources={f"graphene:n{i}": 1}, object_store_memory=1 << 30)
    ray.init(address=rc.address, logging_level="ERROR", log_to_driver=False)
    rt = {"threads": 2}
    bad = 0
    try:
        c = Cluster(rc.address)
        c.distribute(g, [f"{a.root}/{{node}}/d0"], name=f"{a.graph}-check", force=True,
                     nodes=[f"graphene:n{i}" for i in range(a.nodes)])
        cg = c.open(f"{a.graph}-check")
        srcs = [int(v) for v in np.flatnonzero(g.degrees("out") > 0)[:8 * 997:997]]
        ref_pr = gp.pagerank_pull(g, tolerance=1e-10, max_iter=200, **rt).scores
        checks = [
            ("bfs", dict(src=0), lambda x, y: np.array_equal(x.depth, y.depth)),
            ("wcc", {}, lambda x, y: np.array_equal(x.labels, y.labels)),
            ("pagerank_pull", dict(max_iter=10, tolerance=0.0),
             lambda x, y: np.allclose(x.scores, y.scores, rtol=1e-9, atol=1e-18)),
            ("pagerank", dict(max_iter=100),
             lambda x, y: np.abs(y.scores - ref_pr).sum() < x.tolerance / 0.15),
            ("spmv", dict(x="random"), lambda x, y: np.allclose(x.y, y.y, rtol=1e-12)),
            ("msbfs", dict(sources=srcs),
             lambda x, y: np.array_equal(np.asarray(x.depths), np.asarray(y.depths))),
            ("bc", dict(k=2, seed=1), lambda x, y: np.allclose(x.bc, y.bc, rtol=1e-9, atol=1e-15)),
            ("kcore", dict(k=17, membership_only=True),
             lambda x, y: np.array_equal(x.in_k_core, y.in_k_core)),
            ("kcore", {}, lambda x, y: np.array_equal(x.core_number, y.core_number)),
        ]
        for name, kw, same in checks:
            t0 = time.perf_counter()
            x = getattr(gp, name)(g, **kw, **rt)
            t1 = time.perf_counter()
            y = getattr(gp, name)(cg, **kw, **rt)
            t2 = time.perf_counter()
            ok = bool(same(x, y))
            bad += not ok
            print(f"{name:14s} {'equal' if ok else 'DIFFERENT'}  ({len(x.supersteps)} / "
                  f"{len(y.supersteps)} supersteps; {t1 - t0:.1f} s here, {t2 - t1:.1f} s on "
                  f"{a.nodes} nodes)", flush=True)
        cg.close()
    finally:
        ray.shutdown()
        rc.shutdown()
        shutil.rmtree(a.root, ignore_errors=True)
        from graphene_py.cluster.engine import manifest_path
        try:
            os.unlink(manifest_path(f"{a.graph}-check"))
        except OSError:
            pass
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
