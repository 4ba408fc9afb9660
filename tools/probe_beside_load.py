#!/usr/bin/env python3
"""What slows the CPU path while a GPU part is set up beside it (gpu/handoff.py): one fresh
process per mode, the algorithm run once to warm up, then timed while a thread does MODE.

    PYTHONPATH=. python3 tools/probe_beside_load.py DATASET [--algo wcc] [--reps 3] \\
        [--modes none loop import context cupy-start] [--switch 1e-4]

Modes (the thread's work): none; loop (a Python loop: the GIL held); import (`import cupy`);
context (cuInit and device 0's primary context through ctypes: no GIL); cupy-start (CuPy imported,
its context, this package's CUDA kernels: what a hand-off's load does before its set-up). Prints,
per run, the algorithm's seconds and how long the thread's work took. --switch: the interpreter's
switch interval meanwhile (a background load's LOAD_SWITCH_S; 0: the default 5 ms).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(a):
    sys.path.insert(0, ROOT)
    from graphene_py.algos import registry
    from graphene_py.graph import Graph
    g = Graph.open(a.dataset)
    registry.dispatch(a.algo, g, threads=a.threads)          # warm: kernels, first reads
    stop = threading.Event()
    took = {}

    def beside():
        t0 = time.perf_counter()
        if a.child == "loop":
            x = 0
            while not stop.is_set() and time.perf_counter() - t0 < 30:
                for i in range(1000):
                    x += i
        elif a.child == "import":
            import cupy  # noqa: F401
        elif a.child == "context":
            from graphene_py.gpu import early
            early.primary_context()
        elif a.child == "cupy-start":
            from graphene_py.gpu import _module
            _module.cupy().cuda.runtime.getDeviceCount()
            _module.module()
        took["s"] = time.perf_counter() - t0
    if a.switch:
        sys.setswitchinterval(a.switch)
    t = threading.Thread(target=beside, daemon=True) if a.child != "none" else None
    if t:
        t.start()
    t0 = time.perf_counter()
    registry.dispatch(a.algo, g, threads=a.threads)
    dt = time.perf_counter() - t0
    stop.set()
    if t:
        t.join()
    print(f"{a.child:11s} {a.algo} {dt:.3f} s   beside {took.get('s', 0.0):.3f} s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--algo", default="wcc")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", nargs="*", default=["none", "loop", "import", "context",
                                                   "cupy-start"])
    ap.add_argument("--switch", type=float, default=1e-4)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    for _ in range(a.reps):
        for m in a.modes:
            cmd = [sys.executable, __file__, a.dataset, "--algo", a.algo, "--child", m,
                   "--switch", str(a.switch)] + (["--threads", str(a.threads)] if a.threads else [])
            subprocess.run(cmd, check=False)


if __name__ == "__main__":
    main()
