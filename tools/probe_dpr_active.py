#!/usr/bin/env python3
"""Delta PageRank's sweeps: after each Gauss-Seidel sweep, the L1 change, the vertices whose change
is above the push threshold ("active") and their out-edges' share of |E| (what a switch to pushes
would read: algos/pagerank/delta.py switches below PULL_FRACTION).

    .venv/bin/python tools/probe_dpr_active.py --graph kron22 [--tol 1e-4] [--in-memory]

Wraps `_sweep_tail` (whatever its arguments) and prints one line per sweep.
"""
from __future__ import annotations

import argparse


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True, help="a dataset folder or registered name")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--in-memory", action="store_true")
    a = ap.parse_args()
    import graphene_py as gp
    from graphene_py.algos.pagerank import delta as D
    g = gp.Graph.open(a.graph)
    m = max(1, int(g.num_edges))
    tail = D._sweep_tail

    def wrapped(*args, **kw):
        err, act_edges, act, dmass = tail(*args, **kw)
        print(f"sweep: change {err:.3g}  active {act:,} vertices  their out-edges "
              f"{int(act_edges):,} ({act_edges / m:.2f} of |E|)", flush=True)
        return err, act_edges, act, dmass
    D._sweep_tail = wrapped
    r = gp.pagerank(g, tolerance=a.tol, threads=a.threads, in_memory=a.in_memory)
    print(f"{r.iterations} iterations, change {r.error:.3g}")


if __name__ == "__main__":
    main()
