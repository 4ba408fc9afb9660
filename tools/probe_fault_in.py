#!/usr/bin/env python3
"""What first touching fresh memory costs on this machine (BENCHMARKS.md, delta PageRank's first
pass): 512 MB copied into fresh 4 KB pages by one or two threads, faulted in by
MADV_POPULATE_WRITE (one or two threads), touched with transparent huge pages, and copied into
reserved 2 MB pages (MAP_HUGETLB, one or two threads; when vm.nr_hugepages leaves 256 free),
each in a fresh process.

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
if mode.startswith("hugetlb"):                  # reserved 2 MB pages (vm.nr_hugepages)
    import mmap
    mm = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40000)
    a = np.frombuffer(mm, np.uint8)
    lo, off = a.ctypes.data, 0
else:
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
if mode in ("copy1", "hugetlb-copy1"):
    copy(0, 1)
elif mode in ("copy2", "hugetlb-copy2"):
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
    with open("/proc/meminfo") as f:
        free = [int(x.split()[1]) for x in f if x.startswith("HugePages_Free")]
    huge = ("hugetlb-copy1", "hugetlb-copy2") if free and free[0] >= 256 else ()
    if not huge:
        print("(no hugetlb modes: fewer than 256 free reserved 2 MB pages, vm.nr_hugepages)")
    for _ in range(a.rounds):
        for mode in ("copy1", "copy2", "populate1", "populate2", "thp-touch") + huge:
            out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True,
                                 text=True, env={"OPENBLAS_NUM_THREADS": "1"})
            print(out.stdout.strip() or out.stderr.strip()[-300:], flush=True)


if __name__ == "__main__":
    main()
