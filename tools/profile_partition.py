#!/usr/bin/env python3
"""Where partitioning time goes: partition() of a text edge list with its phases timed (reading +
parsing the input, the counting sort of each batch, writing spilled runs, the end of the batch
phase, writing the dataset).

    NUMBA_NUM_THREADS=2 .venv/bin/python tools/profile_partition.py [INPUT] [--runs 2] \
        [-s] [--in-edges] [--memory-limit 1G]

INPUT defaults to the edge list tools/bench_partition.py generates (/tmp/partitioner/bench/
kron22_16.el). The dataset (1x1) goes to a scratch folder that is removed afterwards. Phases
nest: "finish batches" includes the last batch's sort and run (and, in memory, the whole sort;
past the limit with a grid, the merge), "write dataset" includes a 1x1 dataset's merge (it is
merged as it is written); "count + scatter" and "write runs" are summed over every batch.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from graphene_py.partition import extsort, partitioner, readers  # noqa: E402

T: dict = {}


def _timed(owner, name, label):
    f = getattr(owner, name)

    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[label] = T.get(label, 0.0) + time.perf_counter() - t
    setattr(owner, name, g)


def _timed_reader():
    orig = readers.open_edges

    def open_edges(*a, **k):
        rd = orig(*a, **k)

        class Timed:
            def __iter__(self):
                it = iter(rd)
                while True:
                    t = time.perf_counter()
                    ch = next(it, None)
                    T["read + parse"] = T.get("read + parse", 0.0) + time.perf_counter() - t
                    if ch is None:
                        return
                    yield ch

            def __getattr__(self, n):
                return getattr(rd, n)
        return Timed()
    readers.open_edges = open_edges


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input", nargs="?", default="/tmp/partitioner/bench/kron22_16.el")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("-s", "--symmetrize", action="store_true")
    ap.add_argument("--in-edges", action="store_true")
    ap.add_argument("--memory-limit", default=None)
    a = ap.parse_args()
    _timed(extsort, "sort_to_csr", "count + scatter")
    _timed(extsort.ExternalSorter, "add_run", "write runs")
    _timed(extsort.Batcher, "finish", "finish batches")
    _timed(partitioner, "write_dataset", "write dataset")
    _timed_reader()
    for r in range(a.runs):
        T.clear()
        work = tempfile.mkdtemp(prefix="profile_partition_")
        try:
            t = time.perf_counter()
            g = partitioner.partition(a.input, [work], name="p", rows=1, cols=1, quiet=True,
                                      force=True, register=False, symmetrize=a.symmetrize,
                                      in_edges=a.in_edges, memory_limit=a.memory_limit)
            T["total"] = time.perf_counter() - t
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(f"run {r}: {g.num_edges:,} edges; " +
              ", ".join(f"{k} {v:.2f} s" for k, v in T.items()), flush=True)


if __name__ == "__main__":
    main()
