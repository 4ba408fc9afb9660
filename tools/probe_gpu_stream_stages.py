#!/usr/bin/env python3
"""What bounds a stream-ssd pass (gpu/lists.py ListStream, source "ssd"): the same dataset's
out-lists brought to the GPU several ways, each on a dropped page cache, in one process (CuPy and
the kernels loaded first):

- pass_noop: ListStream.each with a launch that does nothing (reads, page checks, copies);
- pass_nocheck: the same without the page checks;
- wcc: gpu/streamed.py's WCC pass (reads, checks, copies and the union-find kernels);
- threads: READERS threads of PIECE-byte O_DIRECT preadv into one pinned buffer, nothing else
  (tools/probe_gpu_load_stages.py's ceiling);
- pagerank3: a streamed PageRank's set-up and 3 iterations, nothing kept in GPU memory;
- resident_load: DeviceGraph.from_graph (gpu/lists.py load_resident's pass);
each of these with ListStream's reads through the threads and through the engine (--reads);
- engine: the IO engine (io/uring_engine.py: one io_uring, queue_depth reads in flight) reading
  the file into its buffer pool, the pool registered with CUDA (cudaHostRegister), each slot
  page-checked and copied to GPU memory as it completes (--slot-mib, --qd, --check).

    PYTHONPATH=. python3 tools/probe_gpu_stream_stages.py --scale 24 --work /tmp/a24 \
        --reps 2 --json out.jsonl

Prints one JSON line per measurement: seconds and GB/s of the lists' bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from bench_auto_device import make_dataset  # noqa: E402
from bench_io import drop_caches  # noqa: E402


def engine_read(path, table, cp, slot_mib, qd, check, register=True):
    """Seconds to bring `path` whole to GPU memory through the IO engine (see the module)."""
    from graphene_py import _uring
    from graphene_py.io.buffers import BufferPool
    from graphene_py.io.uring_engine import UringEngine
    slot = slot_mib << 20
    nslots = max(4, (256 << 20) // slot)
    pool = BufferPool(slot, nslots)
    base = pool.address
    if register:
        cp.cuda.runtime.hostRegister(base, slot * nslots, 0)
    size = os.path.getsize(path)
    nbytes = -(-size // 4096) * 4096
    dev = cp.empty(nbytes, dtype=cp.uint8)
    offs = np.arange(0, nbytes, slot, dtype=np.int64)
    lens = np.minimum(slot, -(-(size - offs) // 512) * 512).astype(np.int64)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    eng = UringEngine([path], [0], pool, queue_depth=qd)
    drop_caches()
    t0 = time.perf_counter()
    eng.submit(np.zeros(len(offs), np.int32), offs, lens)
    pending = deque()
    k = 0
    while True:
        while pending and pending[0][0].done:
            eng.release(np.array([pending.popleft()[1]]))
        if len(pending) >= nslots - 1:
            ev, s = pending.popleft()
            ev.synchronize()
            eng.release(np.array([s]))
        got = eng.get(0, 16)
        if not len(got):
            break
        for req, s in got.tolist():
            n = int(lens[req])
            if check and table is not None:
                v = pool.view[s * slot:s * slot + n]
                crcs = np.frombuffer(_uring.page_crcs(v, 4096), "<u4")
                p0 = int(offs[req]) // 4096
                if not np.array_equal(crcs, table[p0:p0 + len(crcs)]):
                    raise SystemExit(f"page check failed at {offs[req]}")
            st = streams[k % 2]
            k += 1
            cp.cuda.runtime.memcpyAsync(dev.data.ptr + int(offs[req]), base + s * slot, n,
                                        cp.cuda.runtime.memcpyHostToDevice, st.ptr)
            ev = cp.cuda.Event()
            ev.record(st)
            pending.append((ev, s))
    for st in streams:
        st.synchronize()
    t = time.perf_counter() - t0
    stats = eng.stats()
    eng.close()
    if register:
        cp.cuda.runtime.hostUnregister(base)
    pool.close()
    del dev
    return t, size, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=24)
    ap.add_argument("--work", required=True)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--slot-mib", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--qd", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--json", default=None)
    ap.add_argument("--engine-qd", type=int, nargs=2, default=None, metavar=("QD", "SPARE"),
                    help="engine_reads.QUEUE_DEPTH and SPARE_SLOTS for the passes")
    ap.add_argument("--reads", nargs="+", default=["threads", "engine"],
                    help="ListStream's reads: threads (gpu/lists.py ENGINE_READS False), engine "
                         "(True), engineN (True, N engines: engine_reads.ENGINES)")
    ap.add_argument("--skip", nargs="*", default=[],
                    help="measurements left out (pass_noop pass_nocheck wcc pagerank3 resident_load threads)")
    a = ap.parse_args()
    path = make_dataset(a.scale, a.work)
    if a.engine_qd:
        from graphene_py.gpu import engine_reads as er0
        er0.QUEUE_DEPTH, er0.SPARE_SLOTS = a.engine_qd
    from graphene_py.graph import Graph
    from graphene_py.gpu import _module, lists, streamed
    from probe_gpu_load_stages import ceiling
    cp = _module.cupy()
    _module.module()
    _module.warm_cupyx()
    _module.settle()
    g = Graph.open(path)
    p = g.parts("out")[0]
    lbytes = p.num_edges * int(g.id_width)
    out = open(a.json, "a") if a.json else None

    def emit(row):
        print(json.dumps(row), flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()

    def each_noop(nocheck):
        s = lists.ListStream(g, "out", source="ssd")
        if nocheck:
            s._tabs = [None] * len(s.parts)
        drop_caches()
        t0 = time.perf_counter()
        s.each(lambda *x: None)
        t = time.perf_counter() - t0
        s.close()
        return t

    def wcc():
        drop_caches()
        t0 = time.perf_counter()
        streamed.wcc(g, source="ssd", stats={})
        cp.cuda.Device().synchronize()
        return time.perf_counter() - t0

    def pagerank3():
        """A streamed PageRank's set-up and 3 iterations, every chunk streamed (none kept)."""
        drop_caches()
        t0 = time.perf_counter()
        sp = streamed.StreamedPageRank(g, source="ssd", keep_bytes=0)
        sp.run(0.85, 0.0, 3)
        cp.cuda.Device().synchronize()
        t = time.perf_counter() - t0
        sp.lists.close()
        return t

    def load():
        from graphene_py.gpu import DeviceGraph
        cp.get_default_memory_pool().free_all_blocks()
        drop_caches()
        t0 = time.perf_counter()
        dg = DeviceGraph.from_graph(Graph.open(path))
        cp.cuda.Device().synchronize()
        t = time.perf_counter() - t0
        del dg
        return t

    def setup():
        """The engine reads' set-up, step by step: pools made, registered, engines opened."""
        from graphene_py.gpu import engine_reads as er
        from graphene_py.io.buffers import BufferPool
        from graphene_py.io.engines import make_engine
        nslots = er.QUEUE_DEPTH + er.SPARE_SLOTS
        row = {"what": "setup", "pool_mib": nslots * er.SLOT_BYTES >> 20, "engines": er.ENGINES}
        t0 = time.perf_counter()
        pools = [BufferPool(er.SLOT_BYTES, nslots) for _ in range(er.ENGINES)]
        t1 = time.perf_counter()
        for q in pools:
            cp.cuda.runtime.hostRegister(q.address, er.SLOT_BYTES * nslots, 0)
        t2 = time.perf_counter()
        engs = [make_engine("auto", [p.adj_path], np.zeros(1, np.int32), q,
                            queue_depth=er.QUEUE_DEPTH) for q in pools]
        t3 = time.perf_counter()
        for e in engs:
            e.close()
        for q in pools:
            cp.cuda.runtime.hostUnregister(q.address)
            row["pool_kind"] = q.kind
            q.close()
        row.update(pools_s=round(t1 - t0, 3), register_s=round(t2 - t1, 3),
                   engines_s=round(t3 - t2, 3), engine=engs[0].name)
        return row

    table = lists.ListStream(g, "out", source="ssd")._tables()[0]
    for r in range(a.reps):
        emit({"round": r, **setup()})
        from graphene_py.gpu import engine_reads as er
        top = er.ENGINES
        for reads in (a.reads if r % 2 == 0 else a.reads[::-1]):    # (order alternated)
            lists.ENGINE_READS = reads.startswith("engine")
            er.ENGINES = int(reads[6:]) if reads[:6] == "engine" and reads[6:] else top
            for name, fn in (("pass_noop", lambda: each_noop(False)),
                             ("pass_nocheck", lambda: each_noop(True)),
                             ("wcc", wcc), ("pagerank3", pagerank3),
                             ("resident_load", load)):
                if name in a.skip:
                    continue
                t = fn()
                moved = lbytes * (3 if name == "pagerank3" else 1)
                emit({"round": r, "reads": reads, "what": name, "seconds": round(t, 3),
                      "gb_per_s": round(moved / t / 1e9, 3)})
        if "threads" not in a.skip:
            c = ceiling(p.adj_path, lists.READERS, lists.PIECE, cp)
            emit({"round": r, "what": "threads", **c})
        for slot in a.slot_mib:
            for qd in a.qd:
                for check in (True, False):
                    t, size, st = engine_read(p.adj_path, table, cp, slot, qd, check)
                    emit({"round": r, "what": "engine", "slot_mib": slot, "qd": qd,
                          "check": check, "seconds": round(t, 3),
                          "gb_per_s": round(size / t / 1e9, 3),
                          "max_inflight": st.get("max_inflight")})


if __name__ == "__main__":
    sys.exit(main())
