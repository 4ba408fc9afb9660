#!/usr/bin/env python3
"""How a thread that holds the GIL (a background load: CuPy's import is mostly Python) slows the
CPU path, and what a shorter switch interval gives back.

    .venv/bin/python tools/probe_gil_load.py DATASET [--algo wcc] [--threads 2] [--reps 3]

Runs the algorithm once to warm up, then --reps times each: alone; beside a thread running a
Python loop, at the interpreter's default switch interval (5 ms); beside it at 0.5 ms and at
0.1 ms (gpu/handoff.py LOAD_SWITCH_S, what a background load sets). Prints seconds per run.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--algo", default="wcc")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    from graphene_py.algos import registry
    from graphene_py.graph import Graph
    g = Graph.open(a.dataset)

    def once():
        t0 = time.perf_counter()
        registry.dispatch(a.algo, g, threads=a.threads)
        return time.perf_counter() - t0
    once()
    default = sys.getswitchinterval()
    for label, busy, interval in (("alone", False, default), ("busy thread, 5 ms", True, default),
                                  ("busy thread, 0.5 ms", True, 5e-4),
                                  ("busy thread, 0.1 ms", True, 1e-4)):
        stop = threading.Event()

        def spin():
            x = 0
            while not stop.is_set():
                for i in range(1000):
                    x += i
        t = threading.Thread(target=spin, daemon=True) if busy else None
        sys.setswitchinterval(interval)
        if t:
            t.start()
        ts = [once() for _ in range(a.reps)]
        stop.set()
        if t:
            t.join()
        sys.setswitchinterval(default)
        print(f"{label:22s} " + " ".join(f"{x:.3f}" for x in ts) + " s", flush=True)


if __name__ == "__main__":
    main()
