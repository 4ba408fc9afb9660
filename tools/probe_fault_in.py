#!/usr/bin/env python3
"""What first touching fresh memory costs on this machine (BENCHMARKS.md, delta PageRank's first
pass): 512 MB copied into fresh 4 KB pages by one or two threads, faulted in by
MADV_POPULATE_WRITE (one or two threads), and touched with transparent huge pages, each in a
fresh process.

    .venv/bin/python tools/probe_fault_in.py [--rounds 2]
"""
from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = r"""
import ctypes, sys, threading, time
import numpy as np
n = 512 << 20
lib = ctypes.CDLL(None)
lib.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
mode = sys.argv[1]
src = np.ones(n, np.uint8)                      # the source, touched before the clock
a = np.zeros(n + (4 << 20), np.uint8)
lo = (a.ctypes.data + (2 << 20) - 1) & ~((2 << 20) - 1)
off = lo - a.ctypes.data
lib.madvise(lo, n, 14 if mode == "thp-touch" else 15)   # MADV_HUGEPAGE / MADV_NOHUGEPAGE
dst = a[off:off + n]

def copy(i, k):
    h = n // k
    for s in range(i * h, (i + 1) * h, 1 << 20):
        dst[s:s + (1 << 20)] = src[s:s + (1 << 20)]

def pop(i, k):
    h = n // k
    for s in range(i * h, (i + 1) * h, 4 << 20):
        lib.madvise(lo + s, 4 << 20, 23)        # MADV_POPULATE_WRITE

def threads(fn, k):
    ts = [threading.Thread(target=fn, args=(i, k)) for i in range(k)]
    [t.start() for t in ts]
    [t.join() for t in ts]

t = time.perf_counter()
if mode == "copy1":
    copy(0, 1)
elif mode == "copy2":
    threads(copy, 2)
elif mode == "populate1":
    pop(0, 1)
elif mode == "populate2":
    threads(pop, 2)
elif mode == "thp-touch":
    dst[::4096] = 1
print(f"{mode:10s} {time.perf_counter() - t:.3f} s")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    for _ in range(a.rounds):
        for mode in ("copy1", "copy2", "populate1", "populate2", "thp-touch"):
            out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True,
                                 text=True, env={"OPENBLAS_NUM_THREADS": "1"})
            print(out.stdout.strip() or out.stderr.strip()[-300:], flush=True)


if __name__ == "__main__":
    main()
