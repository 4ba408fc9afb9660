"""Time the partitioner's list sort alone (steady state: kernels compiled, data in RAM): the lists
of a dataset's degree sequence filled with random neighbour IDs, sorted and deduplicated in place
by `extsort._sort_lists`, against the same kernel forced to quicksort (no radix) and split
statically by vertex (no edge-balanced pieces). Run once in the dataset's vertex order and once
with the lists ordered hubs first (an unpermuted graph). BENCHMARKS.md, "Lists sorted by radix".

    .venv/bin/python tools/bench_sort_lists.py --graph kron22 [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit, prange

import graphene_py as gp
from graphene_py.partition import extsort as X


@njit(parallel=True, cache=True)
def _static(indptr, idx, w, newdeg):
    """Every list by quicksort, a static split by vertex (the kernel before the change)."""
    for v in prange(indptr.shape[0] - 1):
        a, b = indptr[v], indptr[v + 1]
        X._sort_list(idx, w, a, b, False)
        k = a + 1 if b > a else a
        for i in range(a + 1, b):
            if idx[i] != idx[k - 1]:
                idx[k] = idx[i]
                k += 1
        newdeg[v] = k - a


@njit(parallel=True, cache=True)
def _static_radix(indptr, idx, w, newdeg):
    """Radix for long lists, a static split by vertex."""
    for v in prange(indptr.shape[0] - 1):
        X._sort_dedupe(indptr, idx, w, False, True, newdeg, v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graph", default="kron22")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    deg = gp.Graph.open(a.graph).degrees("out").astype(np.int64)
    rng = np.random.default_rng(0)
    w = np.zeros(0, np.float32)
    for order, d in (("vertex order", deg), ("hubs first", np.sort(deg)[::-1].copy())):
        indptr = np.zeros(len(d) + 1, np.int64)
        np.cumsum(d, out=indptr[1:])
        m, n = int(indptr[-1]), len(d)
        base = rng.integers(0, n, m, dtype=np.int64).astype(np.uint32)
        ref = None
        for name, f in (("quicksort, static split", _static),
                        ("radix, static split", _static_radix),
                        ("radix, edge-balanced pieces", lambda *x: X._sort_lists(
                            x[0], x[1], x[2], False, True, x[3]))):
            newdeg = np.empty(n, np.int64)
            ts = []
            for _ in range(a.repeat + 1):          # the first call compiles or loads the kernel
                idx = base.copy()
                t = time.perf_counter()
                f(indptr, idx, w, newdeg)
                ts.append(time.perf_counter() - t)
            got = int(newdeg.sum())
            ref = got if ref is None else ref
            assert got == ref, (name, got, ref)
            best = min(ts[1:])
            print(f"{a.graph} {order:12s} {name:28s} {best:.3f} s  {best / m * 1e9:5.1f} ns/edge"
                  f"  ({m:,} edges, {got:,} after dedupe)")


if __name__ == "__main__":
    main()
