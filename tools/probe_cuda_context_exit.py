#!/usr/bin/env python3
"""What a CUDA primary context begun early and never used costs a process (gpu/early.py
release_unused): per round, three fresh processes: none (no context), ctx (retained, left to the
process's exit), release (retained, then released before the exit). Run on a GPU machine.

    PYTHONPATH=. python3 tools/probe_cuda_context_exit.py [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = r"""
import ctypes, sys, time
sys.path.insert(0, sys.argv[2])
from graphene_py.gpu.early import primary_context
mode = sys.argv[1]
t0 = time.perf_counter()
if mode != "none":
    primary_context()
t1 = time.perf_counter()
if mode == "release":
    lib = ctypes.CDLL("libcuda.so.1"); dev = ctypes.c_int(); lib.cuDeviceGet(ctypes.byref(dev), 0)
    lib.cuDevicePrimaryCtxRelease(dev)
print(f"context {t1 - t0:.3f} s, release {time.perf_counter() - t1:.3f} s")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    for _ in range(a.rounds):
        for mode in ("none", "ctx", "release"):
            t = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", CHILD, mode, ROOT], capture_output=True,
                                 text=True)
            wall = time.perf_counter() - t
            print(f"{mode:8s} process wall {wall:.3f} s  ({out.stdout.strip() or out.stderr[-200:]})",
                  flush=True)


if __name__ == "__main__":
    main()
