"""Where a fresh `graphene` process spends its time before and around its trial.

    sudo .venv/bin/python tools/profile_startup.py [--cold] [--tree FOLDER] [-n 3] -- run kcore \
        --k 17 --membership-only --graph kron22 -t 2

Runs the command in a fresh interpreter (from FOLDER, a source tree, when given; else the
installed package), `--cold` after `sync; echo 3 > drop_caches` (root), and prints, per run, the
seconds since the process was started at which it had: the interpreter up, numpy imported,
graphene_py's CLI imported, and the command done (numba is imported when a kernel is first needed:
its time is in the setup line's `numba` part; a small graph's run never imports it); with the command's own `setup` and
`Trial 1` lines (setup: numba's target, offsets, IO pool, the kernels loaded beside them). The
run's wall minus `done` is what leaving costs: as `graphene` leaves, or with `--teardown` through
the interpreter's own teardown.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ab_runs  # noqa: E402

CHILD = """
import os, sys, time
T0 = float(os.environ["STARTUP_T0"])
marks = []
def mark(what):
    marks.append((what, time.time() - T0))
mark("interpreter")
if os.environ.get("STARTUP_TREE"):
    sys.path[0:0] = [os.environ["STARTUP_TREE"]]
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")     # as graphene_py/cli.py does, before numpy
import numpy
mark("numpy")
from graphene_py import cli
mark("cli")
sys.argv = ["graphene"] + sys.argv[1:]
code = 0
try:
    cli.main()
except SystemExit as e:
    code = e.code
mark("done")
print("STAMPS " + " ".join(f"{w}={t:.3f}" for w, t in marks), file=sys.stderr)
if os.environ.get("STARTUP_EXIT") != "teardown" and hasattr(cli, "_exit_now"):
    cli._exit_now(code)             # as the `graphene` command leaves (cli.run_cli)
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cold", action="store_true", help="drop the page cache before each run")
    ap.add_argument("--tree", default=None, help="run graphene_py from this source tree")
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--teardown", action="store_true",
                    help="leave through the interpreter's own teardown instead of the way the "
                         "`graphene` command leaves (its wall minus 'done' is what that costs)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- graphene arguments")
    a = ap.parse_args(argv)
    cmd = [x for x in a.command if x != "--"] or ["--help"]
    env = dict(os.environ)
    if a.tree:
        env["STARTUP_TREE"] = os.path.abspath(a.tree)
    if a.teardown:
        env["STARTUP_EXIT"] = "teardown"
    for i in range(a.n):
        if a.cold and not ab_runs.drop_caches():
            print("could not drop the page cache (root needed)", file=sys.stderr)
        env["STARTUP_T0"] = repr(time.time())
        p = subprocess.run([sys.executable, "-c", CHILD, *cmd], env=env, capture_output=True,
                           text=True, cwd="/tmp")
        wall = time.time() - float(env["STARTUP_T0"])
        lines = [x for x in (p.stdout + p.stderr).splitlines()
                 if x.startswith(("STAMPS", "setup", "Trial 1"))]
        print(f"run {i + 1}: wall {wall:.3f} s")
        for x in lines:
            print("  " + x[:160])


if __name__ == "__main__":
    main()
