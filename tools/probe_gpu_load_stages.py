#!/usr/bin/env python3
"""Where the resident tier's load (DeviceGraph.from_graph -> gpu/lists.py load_resident) spends
its time, stage by stage, on a dropped page cache; beside it the disk's own ceiling for the same
file: READERS threads reading PIECE-byte pieces with O_DIRECT into pinned memory, nothing else.

    PYTHONPATH=. python3 tools/probe_gpu_load_stages.py --scale 24 --work /tmp/a24 --reps 2 \
        [--readers 8]

The dataset: tools/bench_auto_device.make_dataset. Each stage's time is wall time on the thread
that ran it; the readers' times are summed over their threads (so they can exceed the wall).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_auto_device import make_dataset  # noqa: E402
from bench_io import drop_caches  # noqa: E402

_acc: dict = {}
_lock = threading.Lock()


def _timed(mod, name, key=None):
    """Wrap mod.name so that its wall time is added to _acc[key]."""
    fn = getattr(mod, name)
    key = key or name

    def wrapper(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            with _lock:
                _acc[key] = _acc.get(key, 0.0) + time.perf_counter() - t0
    setattr(mod, name, wrapper)
    return fn


def ceiling(path, readers, piece, cp):
    """Seconds to read `path` whole with `readers` threads of `piece`-byte O_DIRECT preadv
    into one pinned buffer (the load's reads without their checks, copies or kernels)."""
    size = os.path.getsize(path)
    nbytes = -(-size // 4096) * 4096
    pin = cp.cuda.alloc_pinned_memory(nbytes)
    import numpy as np
    view = memoryview(np.frombuffer(pin, dtype=np.uint8, count=nbytes))
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)

    def one(a):
        v = view[a:a + piece]
        got = 0
        while got < len(v):
            try:
                k = os.preadv(fd, [v[got:]], a + got)
            except OSError:
                break
            if k <= 0:
                break
            got += k
        return got
    drop_caches()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(readers) as pool:
        total = sum(pool.map(one, range(0, nbytes, piece)))
    t = time.perf_counter() - t0
    os.close(fd)
    return {"readers": readers, "piece_mb": piece >> 20, "seconds": round(t, 3),
            "gb_per_s": round(total / t / 1e9, 3)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--work", required=True)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--readers", type=int, default=None,
                    help="reader threads of the load (gpu/lists.py READERS; default: its own)")
    a = ap.parse_args()
    path = make_dataset(a.scale, a.work)
    from graphene_py.graph import Graph
    from graphene_py.gpu import DeviceGraph, _module, lists
    from graphene_py import integrity
    cp = _module.cupy()
    _module.module()
    if a.readers:
        lists.READERS = a.readers
    _timed(lists, "_offsets")
    _timed(lists, "_check_pages")
    _timed(lists.ListStream, "_tables")
    _timed(lists.ListStream, "each")
    _timed(lists.ListStream, "__init__", "ListStream.__init__")
    _timed(lists, "load_resident")
    _timed(integrity, "check_offsets")
    real_preadv = os.preadv

    def preadv(*x):
        t0 = time.perf_counter()
        try:
            return real_preadv(*x)
        finally:
            with _lock:
                _acc["preadv (summed over threads)"] = \
                    _acc.get("preadv (summed over threads)", 0.0) + time.perf_counter() - t0
    rows = []
    for r in range(a.reps):
        g = Graph.open(path)
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()
        drop_caches()
        _acc.clear()
        os.preadv = preadv
        t0 = time.perf_counter()
        dg = DeviceGraph.from_graph(g)
        cp.cuda.Device().synchronize()
        t = time.perf_counter() - t0
        os.preadv = real_preadv
        row = {"round": r, "readers": lists.READERS, "from_graph_s": round(t, 3),
               "lists_gb": round(g.num_edges * 4 / 1e9, 3),
               "stages": {k: round(v, 3) for k, v in sorted(_acc.items())}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del dg
    adj = Graph.open(path).parts("out")[0].adj_path
    for readers in (4, 8, 16):
        row = {"ceiling": ceiling(adj, readers, lists.PIECE, cp)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
