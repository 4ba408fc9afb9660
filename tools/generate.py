#!/usr/bin/env python
"""Generate a synthetic graph into an edge-list file (any reader format, by suffix or --format).

    python tools/generate.py kron --scale 22 --edge-factor 16 -o /tmp/k22.el
    python tools/generate.py kron --scale 20 --weighted -o /tmp/k20.wbin32
    python tools/generate.py uniform -n 1000000 -m 16000000 -o /tmp/u.el.gz

Kronecker = Graph500 R-MAT (a, b, c = 0.57, 0.19, 0.19) with a seeded vertex permutation; uniform =
GAPBS `-u`. Weights (--weighted) are integers 1..255 like GAPBS. Same --seed, same file.
Prints one JSON line (path, format, vertices, edges, bytes, seconds) on stdout.
"""
from __future__ import annotations

import json
import os
import sys

import click

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from graphene_py import config  # noqa: E402
from graphene_py.generate import generate_to_file  # noqa: E402


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
def main(kind, output, scale, edge_factor, num_vertices, num_edges, seed, fmt, weighted):
    """Generate a KIND ('kron' or 'uniform') graph into OUTPUT."""
    if kind == "kron" and scale is None:
        raise click.UsageError("kron needs --scale")
    if kind == "uniform" and num_vertices is None and scale is None:
        raise click.UsageError("uniform needs -n (or --scale)")
    try:
        info = generate_to_file(output, kind, scale=scale, edge_factor=edge_factor, n=num_vertices,
                                m=num_edges, seed=seed, fmt=fmt, weighted=weighted)
    except (ValueError, OSError) as e:
        raise click.ClickException(str(e))
    click.echo(json.dumps(info))


if __name__ == "__main__":
    main()
