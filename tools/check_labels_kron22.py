"""Check a --labels dataset against the integer dataset it was made from (BENCHMARKS.md, "Vertex
names"). The names file comes from GAPBS's kron22.el through

    awk '{printf "user%x user%x\\n", $1*2654435761%4294967296, $2*2654435761%4294967296}'

(awk computes in doubles: name_of() reproduces that). Checks: the same edge count, the same degree
sequence, the same degree by name as by ID on 2000 random vertices, the same BFS depth histogram
from a source given by name; then times saving the BFS result as .csv and .parquet with names.

    .venv/bin/python tools/check_labels_kron22.py k22ints k22names
"""
from __future__ import annotations

import math
import sys
import time

import numpy as np

import graphene_py as gp


def name_of(v: int) -> str:
    return "user%x" % int(math.fmod(float(v) * 2654435761.0, 4294967296.0))


def main(ints: str, named: str, out: str = "/tmp/bfs_names") -> None:
    a, b = gp.Graph.open(ints), gp.Graph.open(named)
    assert a.num_edges == b.num_edges, (a.num_edges, b.num_edges)
    da, db = a.degrees("out"), b.degrees("out")
    used = np.flatnonzero(da)
    assert len(used) == b.num_vertices and np.array_equal(np.sort(da[used]), np.sort(db))
    names = b.vertex_names()
    sample = np.random.default_rng(0).choice(used, 2000, replace=False)
    t = time.perf_counter()
    ids = [names.id_of(name_of(v)) for v in sample]
    look = time.perf_counter() - t
    assert all(da[v] == db[i] for v, i in zip(sample, ids))
    ra = gp.bfs(a, src=int(sample[0]))
    rb = gp.bfs(b, src=name_of(sample[0]))
    assert np.array_equal(np.bincount(ra.depth[ra.depth >= 0]), np.bincount(rb.depth[rb.depth >= 0]))
    t = time.perf_counter()
    rb.save(out + ".csv")
    csv_s = time.perf_counter() - t
    t = time.perf_counter()
    rb.save(out + ".parquet")
    pq_s = time.perf_counter() - t
    print(f"OK: {b.num_vertices:,} names, {b.num_edges:,} edges; 2000 lookups by name "
          f"{look:.2f} s (the first 4 scan the table, then an index); BFS reached "
          f"{rb.n_reached:,} either way; saved with names: .csv {csv_s:.2f} s, .parquet {pq_s:.2f} s")


if __name__ == "__main__":
    main(*sys.argv[1:])
