"""The small datasets of BENCHMARKS.md's start-up and small-graph sections, registered by name.

    .venv/bin/python tools/make_small_graphs.py --root /tmp/small [g10k k13 k16 k18]

g10k: 2,000 vertices, 10,000 uniform random directed edges (numpy seed 1; 9,985 after dedup);
kN: Graph500 Kronecker scale N, edge factor 16, symmetrized (k13: 0.2 M stored edges, k16: 1.8 M,
k18: 7.6 M); kNw: the same with the generator's weights (1..255). Each dataset goes to ROOT/NAME
(one disk folder, 1x1).
"""
from __future__ import annotations

import argparse
import os

import numpy as np


def edges(name):
    """(src, dst, weights or None, vertex count or None, symmetrize)"""
    if name == "g10k":
        e = np.random.default_rng(1).integers(0, 2000, size=(10000, 2))
        return e[:, 0], e[:, 1], None, 2000, False
    from graphene_py.generate import kronecker
    weighted = name.endswith("w")
    cols = list(map(np.concatenate, zip(*kronecker(int(name[1:].rstrip("w")), 16,
                                                    weights=weighted))))
    return cols[0], cols[1], cols[2] if weighted else None, None, True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("names", nargs="*", default=["g10k", "k13", "k16", "k18"])
    a = ap.parse_args(argv)
    from graphene_py.partition import partition_arrays
    for name in a.names:
        s, d, w, n, sym = edges(name)
        folder = os.path.join(a.root, name)
        os.makedirs(folder, exist_ok=True)
        g = partition_arrays(s, d, weights=w, num_vertices=n, disks=[folder], name=name,
                             symmetrize=sym, force=True)
        print(f"{name}: {g.num_vertices:,} vertices, {g.num_edges:,} stored edges in {folder}")


if __name__ == "__main__":
    main()
