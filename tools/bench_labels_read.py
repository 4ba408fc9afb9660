"""Time the --labels reader alone (no partitioning): parse a text edge list of vertex names, look
every name up in the name table and assign IDs; the names table goes nowhere. BENCHMARKS.md,
"Vertex names" (30 M lines of kron22 with names: `head -n 30000000 kron22names.el > s30.el`).

    .venv/bin/python tools/bench_labels_read.py s30.el [--chunk-mb 64] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

from graphene_py.partition.labels import open_labeled


class _Null:
    def write(self, b):
        pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--chunk-mb", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    for _ in range(a.repeat):
        t = time.perf_counter()
        r = open_labeled(a.path, _Null(), chunk_bytes=a.chunk_mb << 20)
        m = sum(len(ch.src) for ch in r)
        print(f"{time.perf_counter() - t:.2f} s: {m:,} edges, {r.num_labels:,} names, "
              f"name table {r.table_bytes() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
