"""Benchmark the block bitmap + planner (Graphene §4.4): IO utility and bytes read for 512 B vs 4 KB
blocks and several max_gap values, and marking+planning time as a share of the time to actually read
the planned extents.

Graph: a synthetic CSR with a Kronecker-like power-law degree distribution (scale 22 by default:
4,194,304 vertices, ~43% isolated, mean degree ~30.6 over all vertices, hubs up to ~160k, degrees
randomly permuted over vertex IDs as Graph500 relabels), uint32 IDs. Only the offsets are needed for
planning; the IO part reads a real file of the same size (created once, random bytes) with O_DIRECT
through the best available engine (so the page cache plays no part).

Frontiers: uniformly random non-isolated vertices (sizes chosen like BFS levels on Kron-22), and a
degree-biased variant ("bfs-like": probability proportional to degree, as a BFS level reaches
vertices through edges). Request translation uses the queue walk below 2% of |V| and the scan above
(Graphene's switch).

    .venv/bin/python tools/bench_planner.py                  # full run (scale 22, IO measured)
    .venv/bin/python tools/bench_planner.py --scale 18 --no-io
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from graphene_py import config  # noqa: E402
from graphene_py.io import bitmap as B  # noqa: E402
from graphene_py.io import planner as P  # noqa: E402


def powerlaw_offsets(scale, edge_factor=16, seed=config.SEED):
    n = 1 << scale
    rng = np.random.default_rng(seed)
    m_dir = 2 * edge_factor * n * 0.956        # Kron-22: 128.3M directed edges after dedup
    iso = rng.random(n) < 0.43                 # Kron-22: 1.80M of 4.19M isolated
    # Pareto-tailed degrees (alpha ~1.1), scaled to the edge count, capped like Kron's max degree
    d = rng.pareto(1.1, n) + 1.0
    d[iso] = 0
    d *= m_dir / d.sum()
    cap = 162_839 * (n / (1 << 22)) ** 0.6
    d = np.minimum(np.maximum(np.rint(d), (~iso).astype(np.float64)), cap).astype(np.int64)
    off = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(d, out=off[1:])
    return off, d


def frontiers(deg, sizes, rng, kind):
    nz = np.flatnonzero(deg)
    out = []
    for s in sizes:
        s = min(s, len(nz))
        if kind == "uniform":
            v = rng.choice(nz, s, replace=False)
        else:
            p = deg[nz] / deg[nz].sum()
            v = np.unique(rng.choice(nz, s, replace=True, p=p))
        out.append(np.sort(v).astype(np.int64))
    return out


def mark(bits, off, frontier, n, bs, width):
    if len(frontier) > config.SCAN_THRESHOLD * n:
        active = np.zeros(n, dtype=np.bool_)
        active[frontier] = True
        t = time.perf_counter()
        r = B.mark_scan(bits, off, 0, active, width, bs)
    else:
        t = time.perf_counter()
        r = B.mark_queue(bits, off, 0, frontier, width, bs)
    return r, time.perf_counter() - t


def read_extents(eng, pool, offs, lens):
    fid = np.zeros(len(offs), np.int32)
    t = time.perf_counter()
    eng.submit(fid, offs, lens)
    n = 0
    while True:
        r = eng.get(0, 256)
        if r.shape[0] == 0:
            break
        n += r.shape[0]
        eng.release(r[:, 1])
    assert n == len(offs)
    return time.perf_counter() - t


def make_file(path, nbytes):
    nbytes = (nbytes + 511) // 512 * 512
    if os.path.exists(path) and os.path.getsize(path) == nbytes:
        return
    chunk = np.random.default_rng(1).integers(0, 256, 8 << 20, dtype=np.uint8).tobytes()
    with open(path, "wb") as f:
        left = nbytes
        while left:
            k = min(left, len(chunk))
            f.write(chunk[:k])
            left -= k
        f.flush()
        os.fsync(f.fileno())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=22)
    ap.add_argument("--sizes", default="10,1000,30000,500000,1800000")
    ap.add_argument("--gaps", default="0,4,8,16,32")
    ap.add_argument("--blocks", default="512,4096")
    ap.add_argument("--max-io", type=int, default=config.MAX_IO_BYTES)
    ap.add_argument("--kinds", default="uniform,bfs-like")
    ap.add_argument("--no-io", action="store_true", help="skip reading the extents")
    ap.add_argument("--io-gaps", default="0,16", help="gaps whose extents are actually read")
    ap.add_argument("--file", default="/tmp/iopy/bench_planner.adj")
    ap.add_argument("--engine", default="auto")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()

    width = 4
    off, deg = powerlaw_offsets(a.scale)
    n = len(deg)
    nbytes = int(off[-1]) * width
    print(f"# CSR: {n:,} vertices, {int(off[-1]):,} edges, max degree {deg.max():,}, "
          f"{(deg == 0).mean():.0%} isolated, adjacency {nbytes / 1e6:.0f} MB (uint32)", flush=True)
    sizes = [int(s) for s in a.sizes.split(",")]
    gaps = [int(g) for g in a.gaps.split(",")]
    bss = [int(b) for b in a.blocks.split(",")]
    io_gaps = {int(g) for g in a.io_gaps.split(",")}

    eng = pool = None
    if not a.no_io:
        from graphene_py.io.buffers import BufferPool
        from graphene_py.io.engines import last_notice, make_engine
        os.makedirs(os.path.dirname(a.file), exist_ok=True)
        make_file(a.file, nbytes)
        pool = BufferPool(max(a.max_io, 4096) // 4096 * 4096, 512)
        eng = make_engine(a.engine, [a.file], [0], pool, direct=True)
        print(f"# {last_notice()}; O_DIRECT={eng.direct}; pool {pool.kind}", flush=True)

    # warm up numba
    wb = B.new_bitmap(nbytes, 512)
    B.mark_queue(wb, off, 0, np.arange(10, dtype=np.int64), width, 512)
    B.mark_scan(wb, off, 0, np.zeros(n, np.bool_), width, 512)
    P.plan(wb, nbytes, 512, 16, a.max_io, clear=True)

    rng = np.random.default_rng(config.SEED)
    rows = []
    hdr = (f"{'frontier':>17} {'block':>5} {'gap':>3} {'blocks':>9} {'extents':>8} {'useful MB':>9} "
           f"{'read MB':>8} {'utility':>7} {'mark ms':>8} {'plan ms':>8} {'io ms':>8} {'plan/io':>7}")
    print(hdr)
    for kind in a.kinds.split(","):
        for fr in frontiers(deg, sizes, rng, kind):
            for bs in bss:
                for gap in gaps:
                    bits = B.new_bitmap(nbytes, bs)
                    (new, useful), tm = mark(bits, off, fr, n, bs, width)
                    t = time.perf_counter()
                    offs, lens = P.plan(bits, nbytes, bs, gap, a.max_io, clear=True)
                    tp = time.perf_counter() - t
                    read = int(lens.sum())
                    tio = None
                    if eng is not None and gap in io_gaps and len(offs):
                        tio = read_extents(eng, pool, offs, lens)
                    row = dict(kind=kind, frontier=len(fr), block=bs, max_gap=gap, blocks=int(new),
                               extents=len(offs), useful_bytes=int(useful), read_bytes=read,
                               io_utility=useful / read if read else 1.0, mark_s=tm, plan_s=tp,
                               io_s=tio, share=(tm + tp) / tio if tio else None)
                    rows.append(row)
                    print(f"{kind[:7]:>7} {len(fr):>9,} {bs:>5} {gap:>3} {new:>9,} {len(offs):>8,} "
                          f"{useful / 1e6:>9.2f} {read / 1e6:>8.2f} {row['io_utility']:>7.3f} "
                          f"{tm * 1e3:>8.2f} {tp * 1e3:>8.2f} "
                          f"{(tio * 1e3 if tio else float('nan')):>8.1f} "
                          f"{(row['share'] * 100 if row['share'] else float('nan')):>6.1f}%",
                          flush=True)
    # summary: 512 vs 4096 at equal gap (bytes), utility gain
    print("\n# IO utility 512 B vs 4 KB blocks (same max_gap in blocks):")
    for kind in a.kinds.split(","):
        for gap in gaps:
            r512 = [r for r in rows if r["kind"] == kind and r["block"] == 512 and r["max_gap"] == gap]
            r4k = [r for r in rows if r["kind"] == kind and r["block"] == 4096 and r["max_gap"] == gap]
            if not r512 or not r4k:
                continue
            u512 = sum(r["useful_bytes"] for r in r512) / max(1, sum(r["read_bytes"] for r in r512))
            u4k = sum(r["useful_bytes"] for r in r4k) / max(1, sum(r["read_bytes"] for r in r4k))
            rb = sum(r["read_bytes"] for r in r4k) / max(1, sum(r["read_bytes"] for r in r512))
            print(f"#   {kind:8} gap {gap:>2}: utility {u512:.3f} vs {u4k:.3f} "
                  f"(x{u512 / u4k:.2f}); 4 KB reads x{rb:.2f} the bytes")
    sh = [r for r in rows if r["share"] is not None and r["block"] == 512 and r["max_gap"] == 16]
    if sh:
        tot = sum(r["mark_s"] + r["plan_s"] for r in sh) / sum(r["io_s"] for r in sh)
        print(f"# mark+plan time / IO time (512 B, gap 16, all frontiers): {tot:.1%} "
              f"(Graphene reports ~3.4%)")
    if eng is not None:
        eng.close()
        pool.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
