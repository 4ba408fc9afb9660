"""SSSP's relax loop alone, over every list of a weighted dataset in a random vertex order (steady
state, one process, two threads by numba's prange): plain, and asking for the distance of the
neighbour AHEAD entries on (graphene_py.jit.prefetch), with float64 and int32 distances.

    .venv/bin/python tools/bench_relax.py --graph kron22w [--ahead 8,16,32,64]

Each line: distance dtype, how far ahead (0: plain), seconds for one pass over every edge, and
whether the distances equal the plain loop's."""
from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit, prange

from graphene_py.graph import Graph
from graphene_py.jit import prefetch


@njit(parallel=True, nogil=True)
def _relax(indptr, idx, w, dist, order, ahead):
    for k in prange(len(order)):
        v = order[k]
        dv = dist[v] - 1
        a, b = indptr[v], indptr[v + 1]
        if ahead > 0:
            for j in range(a, min(a + ahead, b)):
                prefetch(dist, idx[j])
        for j in range(a, b):
            if ahead > 0 and j + ahead < b:
                prefetch(dist, idx[j + ahead])
            u = idx[j]
            nd = dv + w[j]
            if nd < dist[u]:
                dist[u] = nd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="kron22w")
    ap.add_argument("--ahead", default="8,16,32,64")
    a = ap.parse_args()
    g = Graph.open(a.graph)
    indptr, idx, w = g.to_csr("out")
    idx = idx.astype(np.int32)
    w = np.ones(len(idx), np.float32) if w is None else w
    n = len(indptr) - 1
    order = np.random.default_rng(0).permutation(n).astype(np.int32)
    for dt in (np.float64, np.int32):
        d0 = np.full(n, 10 ** 8, dtype=dt)
        want = None
        for ahead in [0] + [int(x) for x in a.ahead.split(",")]:
            _relax(indptr, idx, w, d0.copy(), order[:10], ahead)      # compile
            d = d0.copy()
            t = time.perf_counter()
            _relax(indptr, idx, w, d, order, ahead)
            s = time.perf_counter() - t
            want = d if want is None else want
            print(f"{np.dtype(dt).name:>7} ahead {ahead:3d}: {s:.3f} s  same {np.array_equal(d, want)}",
                  flush=True)


if __name__ == "__main__":
    main()
