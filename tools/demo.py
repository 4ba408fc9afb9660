"""`make demo`: the main job on the built-in default graph, through the real CLI.

Generates a Graph500 Kronecker graph (scale 18, edge factor 16: 262k vertices, ~4.2 M edges) as a text
edge list, partitions it (symmetrized, with in-edges) onto two disk directories under ./data/demo,
shows `graphene info`, then runs BFS, PageRank and WCC with verification. Every command it runs is
printed first, so it doubles as a tutorial. The dataset is named `demo`, unless that name (in the
registry that every checkout on this machine shares) belongs to a dataset outside this checkout:
then `demo-` and a short hash of this checkout's path, so one checkout's demo never replaces
another's.
"""
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "demo")
BIN = os.path.dirname(sys.executable)
SCALE = int(os.environ.get("DEMO_SCALE", "18"))


def sh(*args):
    print("$ " + " ".join(shlex.quote(a) for a in args), flush=True)
    r = subprocess.run(args)
    if r.returncode != 0:
        sys.exit(r.returncode)


def dataset_name() -> str:
    """`demo`, or `demo-XXXXXXXX` (this checkout's own) when `demo` names a dataset elsewhere."""
    sys.path.insert(0, ROOT)
    from graphene_py import registry
    try:
        where = registry.lookup("demo")
    except Exception:           # a damaged registry: the partition below reports it
        where = None
    if where is None or os.path.abspath(where).startswith(os.path.abspath(DATA) + os.sep):
        return "demo"
    import zlib
    return f"demo-{zlib.crc32(os.path.abspath(ROOT).encode()):08x}"


def main():
    os.makedirs(DATA, exist_ok=True)
    name = dataset_name()
    el = os.path.join(DATA, f"kron{SCALE}.el")
    disks = [os.path.join(DATA, "disk0"), os.path.join(DATA, "disk1")]
    for d in disks:
        os.makedirs(d, exist_ok=True)
    if not os.path.exists(el):
        sh(sys.executable, os.path.join(ROOT, "tools", "generate.py"), "kron", "--scale", str(SCALE),
           "--edge-factor", "16", "-o", el)
    graphene = os.path.join(BIN, "graphene")
    # (--num-vertices: the generator's 2^scale, isolated vertices above the largest ID included)
    sh(graphene, "partition", el, "--disks", *disks, "--name", name, "-s", "--in-edges", "--force",
       "--num-vertices", str(1 << SCALE))
    sh(graphene, "info")
    sh(graphene, "run", "bfs", "-v", "-n", "3")
    sh(graphene, "run", "pagerank", "-v")
    sh(graphene, "run", "wcc", "-v")
    print("\nDemo done. Try `graphene run --help` (every algorithm), `graphene run kcore --help`, "
          "`graphene list`.", flush=True)


if __name__ == "__main__":
    main()
