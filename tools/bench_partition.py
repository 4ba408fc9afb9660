#!/usr/bin/env python3
"""Benchmark: text edge list -> dataset, end to end, side by side with a plain numpy baseline.

    .venv/bin/python tools/bench_partition.py [--scale 22] [--edge-factor 16] [--threads 2]
        [--memory-limit 512M ...] [--work /tmp/partitioner/bench] [--json OUT]

Input: a Graph500 Kronecker graph (graphene_py.generate, scale 22 / edge factor 16 by default) as a
text edge list `src dst` per line, generated once into --work and reused. Each measured run is a
fresh subprocess (so peak RSS is its own, from getrusage) with the page cache of the input warm
(the input is read once before the first run), NUMBA_NUM_THREADS=--threads:

  ours          graphene_py.partition(input, 1 disk, 1x1 grid), default memory limit (in memory)
  ours-limit    the same with --memory-limit L (external sort: spilled runs + merge), per L given
  numpy         baseline: read the text whole, parse with np.fromstring(sep=' ') (a vectorized
                digit-mask parser was slower), drop self-loops, key=src*n+dst, np.unique (sort + dedupe), CSR via bincount,
                write uint32 adj + uint64 offsets (1x1, no checksums, not atomic).

Reported: seconds, input edges/s (end to end, input edges / wall seconds), CPU seconds (user+sys,
incl. process start and imports), peak RSS, ratio to the baseline. The machine is shared: compare
the ratios of one run. Numba compilation is warmed in a first small run that is not measured.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

OURS = r"""
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
from graphene_py.partition.partitioner import partition
t = time.perf_counter()
g = partition({inp!r}, [{disk!r}], name="bench", rows=1, cols=1, quiet=True, force=True,
              register=False, memory_limit={limit!r})
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"seconds": dt, "edges": g.num_edges, "input_edges": g.stats["input_edges"],
                  "rss": ru.ru_maxrss * 1024, "cpu": ru.ru_utime + ru.ru_stime,
                  "runs": g.manifest["options"]["spilled_runs"]}}))
"""

BASELINE = r"""
import json, os, resource, time
import numpy as np

t = time.perf_counter()
with open({inp!r}, "rb") as f:
    text = f.read()
a = np.fromstring(text, dtype=np.int64, sep=" ")   # whitespace-separated integers
del text
src, dst = a[0::2], a[1::2]
m_in = len(src)
n = int(max(src.max(), dst.max())) + 1 if m_in else 0
keep = src != dst
key = np.unique(src[keep] * n + dst[keep])      # sort + dedupe
del a, src, dst, keep
s = key // n
adj = (key % n).astype("<u4")
off = np.zeros(n + 1, dtype="<u8")
np.cumsum(np.bincount(s, minlength=n), out=off[1:])
os.makedirs({disk!r}, exist_ok=True)
adj.tofile(os.path.join({disk!r}, "adj"))
off.tofile(os.path.join({disk!r}, "off"))
for p in ("adj", "off"):
    fd = os.open(os.path.join({disk!r}, p), os.O_RDONLY); os.fsync(fd); os.close(fd)
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"seconds": dt, "edges": int(len(adj)), "input_edges": m_in,
                  "rss": ru.ru_maxrss * 1024, "cpu": ru.ru_utime + ru.ru_stime}}))
"""


def sub(code, threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"run failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--memory-limit", action="append", default=[],
                    help="also run with this --memory-limit (repeatable), e.g. 512M")
    ap.add_argument("--work", default="/tmp/partitioner/bench")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    from graphene_py.generate import generate_to_file

    os.makedirs(args.work, exist_ok=True)
    inp = os.path.join(args.work, f"kron{args.scale}_{args.edge_factor}.el")
    if not os.path.exists(inp):
        t = time.perf_counter()
        info = generate_to_file(inp, "kron", scale=args.scale, edge_factor=args.edge_factor)
        print(f"generated {inp}: {info['num_edges']:,} edges, {info['bytes'] / 1e6:.0f} MB "
              f"in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    size = os.path.getsize(inp)
    with open(inp, "rb") as f:                      # warm the page cache for every contender
        while f.read(64 << 20):
            pass
    disk = os.path.join(args.work, "disk")
    os.makedirs(disk, exist_ok=True)
    # warm numba's cache on a tiny input (not measured)
    tiny = os.path.join(args.work, "tiny.el")
    with open(tiny, "w") as f:
        f.write("0 1\n1 2\n2 0\n")
    sub(OURS.format(root=ROOT, inp=tiny, disk=disk, limit=None), args.threads)

    results = []

    def record(name, r):
        r["name"] = name
        r["edges_per_s"] = r["input_edges"] / r["seconds"]
        results.append(r)
        extra = f", {r['runs']} runs spilled" if r.get("runs") else ""
        print(f"{name:<26} {r['seconds']:7.2f} s  {r['edges_per_s'] / 1e6:6.2f} M input edges/s  "
              f"cpu {r['cpu']:6.1f} s  "
              f"peak RSS {r['rss'] / 2**20:7.0f} MiB  ({r['edges']:,} edges kept{extra})", flush=True)

    print(f"input {inp}: {size / 1e6:.0f} MB text; {args.threads} threads", flush=True)
    if not args.no_baseline:
        record("numpy baseline", sub(BASELINE.format(inp=inp, disk=os.path.join(disk, "np")),
                                     args.threads))
        shutil.rmtree(os.path.join(disk, "np"), ignore_errors=True)
    record("ours (in memory)", sub(OURS.format(root=ROOT, inp=inp, disk=disk, limit=None),
                                   args.threads))
    for lim in args.memory_limit:
        record(f"ours --memory-limit {lim}",
               sub(OURS.format(root=ROOT, inp=inp, disk=disk, limit=lim), args.threads))
    shutil.rmtree(os.path.join(disk, "bench"), ignore_errors=True)
    if not args.no_baseline:
        base = results[0]["seconds"]
        for r in results[1:]:
            print(f"{r['name']:<26} speedup vs numpy baseline: {base / r['seconds']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"input": inp, "bytes": size, "threads": args.threads, "results": results},
                      f, indent=1)


if __name__ == "__main__":
    main()
