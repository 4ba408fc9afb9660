"""NetworkX alone vs the graphene backend on graphs of ~10^4, ~10^6 and ~10^8 edges.

    .venv/bin/python tools/bench_nx.py [--sizes 1e4,1e6] [--big kron22] [--out benchmarks/nx.json]

For each size a Kronecker graph (graphene_py.generate, undirected, edge factor 8) is built as an
nx.Graph; then nx.pagerank (weight=None), nx.connected_components, nx.core_number and
nx.single_source_shortest_path_length run three ways: NetworkX alone, `backend="graphene"` (the
nx graph converted to a scratch dataset each call: conversion included), and on the same graph
partitioned once as a graphene dataset (graphene_py.Graph.open(...): what a user with data on
disk calls). --big names a dataset already partitioned (GAPBS kron22: 1.28 * 10^8 directed edges),
which only the dataset column can run (as an nx.Graph it would take ~100 GB). One process, numba
kernels compiled first on a tiny graph: steady state, not cold-start numbers. Each timing is the
median of --repeat runs; NetworkX alone is skipped above --nx-max edges.
nx-parallel implements none of these four functions (it covers betweenness, all-pairs paths and
a few others), so it has no column.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

FUNCS = {
    "pagerank": lambda nx, G, **kw: nx.pagerank(G, weight=None, **kw),
    "connected_components": lambda nx, G, **kw: list(nx.connected_components(G, **kw)),
    "core_number": lambda nx, G, **kw: nx.core_number(G, **kw),
    "bfs (sssp length)": lambda nx, G, **kw: nx.single_source_shortest_path_length(G, SRC[0], **kw),
}
SRC = [0]      # the source of the BFS: a vertex of maximum degree of the graph at hand


def kron_edges(m, seed=1):
    """~m undirected edges of a Kronecker graph (scale chosen for edge factor 8)."""
    import numpy as np

    from graphene_py.generate import kronecker
    scale = max(6, int(round(np.log2(max(1, m) / 8))))
    parts = list(kronecker(scale, 8, seed=seed))
    s = np.concatenate([p[0] for p in parts])
    d = np.concatenate([p[1] for p in parts])
    keep = s != d
    return s[keep], d[keep], 1 << scale


def timed(fn, repeat):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1e4,1e6")
    ap.add_argument("--big", default="kron22", help="a partitioned dataset (~10^8 edges), or ''")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nx-max", type=float, default=2e7)
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "nx.json"))
    a = ap.parse_args(argv)
    import networkx as nx

    import graphene_py as gp
    nx.config.warnings_to_ignore.add("cache")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warm = nx.gnm_random_graph(300, 3000, seed=0)   # vertex 0 (SRC) has edges here
        for f in FUNCS.values():                       # compile graphene's kernels once
            f(nx, warm, backend="graphene")
        for size in [float(x) for x in a.sizes.split(",") if x]:
            s, d, n = kron_edges(int(size))
            H = nx.Graph()
            H.add_nodes_from(range(n))
            H.add_edges_from(zip(s.tolist(), d.tolist()))
            disk = os.path.join(tmp, f"d{int(size)}")
            os.makedirs(disk)
            G = gp.partition_arrays(s, d, num_vertices=n, disks=[disk], name=f"nx{int(size)}",
                                    symmetrize=True, rows=1, cols=1, register=False)
            SRC[0] = int(max(H.degree, key=lambda x: x[1])[0])
            for name, f in FUNCS.items():
                row = {"edges": H.number_of_edges(), "vertices": n, "function": name}
                if H.number_of_edges() <= a.nx_max:
                    row["networkx_s"] = timed(lambda: f(nx, H), a.repeat)
                H.__networkx_cache__.clear()
                row["graphene_backend_s"] = timed(
                    lambda: (H.__networkx_cache__.clear(), f(nx, H, backend="graphene")), a.repeat)
                row["graphene_dataset_s"] = timed(lambda: f(nx, G), a.repeat)
                rows.append(row)
                print(json.dumps(row), flush=True)
        if a.big:
            G = gp.Graph.open(a.big)
            SRC[0] = int(G.degrees("out").argmax())
            for name, f in FUNCS.items():
                if name == "connected_components" and G.directed:
                    continue
                row = {"edges": G.num_edges // (1 if G.directed else 2), "vertices": G.num_vertices,
                       "function": name, "dataset": a.big,
                       "graphene_dataset_s": timed(lambda: f(nx, G), 1)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump({"machine": " ".join(os.uname()), "cpus": os.cpu_count(), "rows": rows}, fh,
                  indent=1)


if __name__ == "__main__":
    main()
