#!/usr/bin/env python
"""Generate a synthetic graph into an edge-list file (any reader format, by suffix or --format).

    python tools/generate.py kron --scale 22 --edge-factor 16 -o /tmp/k22.el
    python tools/generate.py kron --scale 20 --weighted -o /tmp/k20.wbin32
    python tools/generate.py uniform -n 1000000 -m 16000000 -o /tmp/u.el.gz

Kronecker = Graph500 R-MAT (a, b, c = 0.57, 0.19, 0.19) with a seeded vertex permutation; uniform =
GAPBS `-u`. Weights (--weighted) are integers 1..255 like GAPBS. Same --seed, same file.
Prints one JSON line (path, format, vertices, edges, bytes, seconds, cpu_seconds) on stdout.

`--read-back` then streams the file through `graphene_py.partition.readers.open_edges` (the reader
benchmark), checks the edge count and adds read_seconds, read_cpu_seconds, read_MBps (file bytes per
wall second) and read_MBps_per_cpu (per CPU second, the number that survives a shared machine).
`--keep/--no-keep` with `--read-back` on an existing file skips generation (reuse a big file).
"""
from __future__ import annotations

import json
import os
import sys
import time

import click

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from graphene_py import config  # noqa: E402
from graphene_py.generate import generate_to_file  # noqa: E402
from graphene_py.progress import Progress  # noqa: E402


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("kind", type=click.Choice(["kron", "uniform"]))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Output file.")
@click.option("--scale", "-g", type=int, help="log2 of the vertex count (kron; uniform if no -n).")
@click.option("--edge-factor", "-k", type=int, default=16, show_default=True,
              help="Edges per vertex (m = edge_factor * 2^scale).")
@click.option("-n", "num_vertices", type=int, help="uniform: vertex count.")
@click.option("-m", "num_edges", type=int, help="uniform: edge count.")
@click.option("--seed", type=int, default=config.SEED, show_default=True)
@click.option("--format", "fmt", help="el, wel, mtx, bin32, bin64, wbin32, wbin64 (+.gz); "
              "default from the output suffix.")
@click.option("--weighted", is_flag=True, help="Add integer weights 1..255.")
@click.option("--read-back", is_flag=True, help="Then time reading the file with open_edges.")
@click.option("--reuse", is_flag=True, help="With --read-back: if OUTPUT exists, do not regenerate.")
@click.option("--chunk-bytes", type=int, default=config.READ_CHUNK_BYTES, show_default=True,
              help="Reader chunk size for --read-back.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar on stderr.")
@click.option("--compare-loadtxt", is_flag=True,
              help="With --read-back on text: also time numpy.loadtxt (whole file in RAM) and "
                   "check it reads the same edges.")
def main(kind, output, scale, edge_factor, num_vertices, num_edges, seed, fmt, weighted, read_back,
         reuse, chunk_bytes, quiet, compare_loadtxt):
    """Generate a KIND ('kron' or 'uniform') graph into OUTPUT."""
    if kind == "kron" and scale is None:
        raise click.UsageError("kron needs --scale")
    if kind == "uniform" and num_vertices is None and scale is None:
        raise click.UsageError("uniform needs -n (or --scale)")
    try:
        if reuse and read_back and os.path.exists(output):
            info = {"path": output, "reused": True}
        else:
            c0 = time.process_time()
            bar = None if quiet else Progress(units={"generate": "edges"})
            try:
                info = generate_to_file(output, kind, scale=scale, edge_factor=edge_factor,
                                        n=num_vertices, m=num_edges, seed=seed, fmt=fmt,
                                        weighted=weighted, progress=bar)
            finally:
                if bar is not None:
                    bar.done()
            info["cpu_seconds"] = time.process_time() - c0
        if read_back:
            info.update(read_benchmark(output, fmt, chunk_bytes, info.get("num_edges"),
                                       compare_loadtxt))
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e))
    click.echo(json.dumps(info))


def read_benchmark(path, fmt, chunk_bytes, expect_edges=None, compare_loadtxt=False):
    import numpy as np

    from graphene_py.partition.readers import open_edges

    def ours(keep):
        t0, c0 = time.perf_counter(), time.process_time()
        m = 0
        with open_edges(path, fmt=fmt, chunk_bytes=chunk_bytes) as r:
            for ch in r:
                m += len(ch.src)
                if keep is not None:
                    keep.append((ch.src, ch.dst))
        return m, r, time.perf_counter() - t0, time.process_time() - c0

    keep = [] if compare_loadtxt else None
    m, r, dt, dc = ours(keep)
    if expect_edges is not None and m != expect_edges:
        raise click.ClickException(f"read back {m} edges, expected {expect_edges}")
    out = {"read_edges": m, "read_seconds": round(dt, 3), "read_cpu_seconds": round(dc, 3),
           "read_MBps": round(r.total_bytes / dt / 1e6, 1),
           "read_MBps_per_cpu": round(r.total_bytes / dc / 1e6, 1)}
    if compare_loadtxt and r.kind == "text" and not r.weighted:
        # numpy's C loadtxt, side by side on the same file (it holds everything in RAM). Ours
        # runs again after it and the better of our two passes counts: the first pass warmed
        # the page cache for loadtxt, the second gets the cache loadtxt left.
        t1, c1 = time.perf_counter(), time.process_time()
        a = np.loadtxt(path, dtype=np.int64, comments=("#", "%"), ndmin=2)
        lt, lc = time.perf_counter() - t1, time.process_time() - c1
        _, _, dt2, dc2 = ours(None)
        if dt2 < dt:
            dt, dc = dt2, dc2
            out.update({"read_seconds": round(dt, 3), "read_cpu_seconds": round(dc, 3),
                        "read_MBps": round(r.total_bytes / dt / 1e6, 1),
                        "read_MBps_per_cpu": round(r.total_bytes / dc / 1e6, 1)})
        src = np.concatenate([k[0] for k in keep]) if keep else np.empty(0, np.int64)
        dst = np.concatenate([k[1] for k in keep]) if keep else np.empty(0, np.int64)
        out.update({"loadtxt_seconds": round(lt, 3), "loadtxt_cpu_seconds": round(lc, 3),
                    "speedup_vs_loadtxt_wall": round(lt / dt, 1),
                    "speedup_vs_loadtxt_cpu": round(lc / dc, 1),
                    "loadtxt_agrees": bool(len(a) == m and np.array_equal(a[:, 0], src)
                                           and np.array_equal(a[:, 1], dst))})
    out["load_avg_1min"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    main()
