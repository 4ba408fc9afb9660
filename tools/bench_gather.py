"""The pull gather of PageRank, in three numba loop shapes, on a dataset's own lists (steady
state, one process, two threads each by a Python thread per half of the vertices):

    .venv/bin/python tools/bench_gather.py --graph kron22 [-n 3]

  range    for i in range(off[v], off[v + 1]): s += c[adj[i]]
  slice    for x in adj[off[v]:off[v + 1]]: s += c[x]
  sliced   nb = adj[off[v]:off[v + 1]]; for i in range(len(nb)): s += c[nb[i]]   (the engine's)

Needs a 1x1 dataset (its one out-partition read whole into RAM)."""
from __future__ import annotations

import argparse
import threading
import time

import numpy as np
from numba import njit

from graphene_py.graph import Graph
from graphene_py.iterator.atomics import prefetch

PF = 32


@njit(nogil=True)
def _range(off, adj, c, acc, lo, hi):
    for v in range(lo, hi):
        s = 0.0
        for i in range(off[v], off[v + 1]):
            s += c[np.int64(adj[i])]
        acc[v] = s


@njit(nogil=True)
def _slice(off, adj, c, acc, lo, hi):
    for v in range(lo, hi):
        s = 0.0
        for x in adj[off[v]:off[v + 1]]:
            s += c[x]
        acc[v] = s


@njit(nogil=True)
def _sliced(off, adj, c, acc, lo, hi):
    for v in range(lo, hi):
        s = 0.0
        nb = adj[off[v]:off[v + 1]]
        for i in range(nb.shape[0]):
            s += c[np.intp(nb[i])]
        acc[v] = s


@njit(nogil=True)
def _sliced_pf(off, adj, c, acc, lo, hi):
    """sliced, asking for c[nb[i + 32]] while it sums c[nb[i]] (within each list)"""
    for v in range(lo, hi):
        s = 0.0
        nb = adj[off[v]:off[v + 1]]
        m = nb.shape[0]
        for i in range(min(m, PF)):
            prefetch(c, nb[i])
        for i in range(m):
            if i + PF < m:
                prefetch(c, nb[i + PF])
            s += c[np.intp(nb[i])]
        acc[v] = s


@njit(nogil=True)
def _flat_pf(off, adj, c, acc, lo, hi):
    """sliced, asking for c[adj[k + 32]] of the flat adjacency (across lists)"""
    end = off[hi]
    for v in range(lo, hi):
        s = 0.0
        a, b = off[v], off[v + 1]
        nb = adj[a:b]
        for i in range(nb.shape[0]):
            k = a + i + PF
            if k < end:
                prefetch(c, adj[k])
            s += c[np.intp(nb[i])]
        acc[v] = s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", default="kron22")
    ap.add_argument("-n", type=int, default=3)
    a = ap.parse_args()
    g = Graph.open(a.graph)
    (p,) = g.parts("out")
    off = p.offsets().astype(np.int64)
    adj = p.adjacency()
    n = len(off) - 1
    c = np.random.default_rng(1).random(n)
    acc = np.zeros(n)

    def two(fn):
        h = n // 2
        t = threading.Thread(target=fn, args=(off, adj, c, acc, 0, h))
        t.start()
        fn(off, adj, c, acc, h, n)
        t.join()

    shapes = (("range", _range), ("slice", _slice), ("sliced", _sliced),
              ("sliced+prefetch", _sliced_pf), ("flat+prefetch", _flat_pf))
    for _, fn in shapes:
        fn(off, adj, c, acc, 0, 1)                  # compile
    for rep in range(a.n):
        for name, fn in shapes:
            t = time.perf_counter()
            two(fn)
            print(f"{name:>15} {time.perf_counter() - t:.3f} s", flush=True)


if __name__ == "__main__":
    main()
