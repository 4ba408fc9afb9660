"""Reproduce "k-core: vertex V: S neighbours read, its degree says D" with correct code: a compiled
superstep kernel cached from an older kcore (issue 10; the code is now algos/kcore/full.py).

iterator/specialize.py named a generated kernel by a hash of the user module's file *as it was on
disk when the first superstep ran*, but compiled it with the code the process *imported*. A process
that imported kcore.py before an edit landed (a shared working tree, a test run during development)
therefore compiled the old `_read_round` and cached it on disk under the new file's hash; every
later process running the new, correct kcore.py loaded that kernel and failed the same way, until
kcore.py, kernels.py or atomics.py changes again. Nothing here touches the repository or the user's
kernel cache: the package is copied to a temporary folder with its own GRAPHENE_KERNEL_CACHE.

    .venv/bin/python tools/kcore_stale_kernel_repro.py

Prints one line per process: the control (fresh cache, new file: ok), P1 (imported the old file,
the edit lands before its first superstep: fails, it runs the old code) and P2 (a fresh process,
new file only). Before the fix P2 failed too, e.g. "vertex 4094: 5 neighbours read, its degree
says 7"; now iterator/specialize.py names a kernel by the code the process imported (kernel_name),
so P1's old code is cached under the old code's name and P2 is ok. P1 itself still runs the old
code it imported, as any process would.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import os, shutil, sys, tempfile
sys.path.insert(0, sys.argv[1])
import numpy as np
from graphene_py.algos import kcore
from tests import test_kcore as T
if sys.argv[2] == "p1":                     # the edit lands after the import
    shutil.copy(sys.argv[3], os.path.join(sys.argv[1], "graphene_py", "algos", "kcore", "full.py"))
root = tempfile.mkdtemp()
c = T.case_of("powerlaw", "in")
g = T.make_dataset(root, c.tg, "in", (3, 2))
try:
    r = kcore.run(g, engine="auto", buffer_mb=2, threads=2)
    ok = np.array_equal(r.core_number, T.naive_core(c))
    print(sys.argv[2], "ok" if ok else "WRONG core numbers")
except Exception as e:
    print(sys.argv[2], "ERROR:", e)
'''


def main():
    tmp = tempfile.mkdtemp(prefix="kcore_stale")
    try:
        work = os.path.join(tmp, "repo")
        ign = shutil.ignore_patterns("__pycache__", "*.pyc")
        for d in ("graphene_py", "tests"):
            shutil.copytree(os.path.join(REPO, d), os.path.join(work, d), ignore=ign)
        new = os.path.join(tmp, "kcore_new.py")
        old = os.path.join(tmp, "kcore_old.py")
        kpath = os.path.join(work, "graphene_py", "algos", "kcore", "full.py")
        shutil.copy(kpath, new)
        src = open(new).read()
        # an "older" _read_round: loading lists skip neighbours that load in the same superstep
        a, b = src.index("def _read_round"), src.index("def _after_read")
        body = src[a:b].replace("] < _PENDING:", "] < _LOADING:")
        assert body != src[a:b]
        with open(old, "w") as f:
            f.write(src[:a] + body + src[b:])
        env = dict(os.environ, GRAPHENE_HOME=os.path.join(tmp, "home"),
                   GRAPHENE_KERNEL_CACHE=os.path.join(tmp, "kernels"), PYTHONDONTWRITEBYTECODE="1")

        def child(phase, label):
            out = subprocess.run([sys.executable, "-c", CHILD, work, phase, new], env=env,
                                 capture_output=True, text=True)
            line = (out.stdout.strip().splitlines() or [out.stderr.strip()[-300:]])[-1]
            print(f"{label}: {line}", flush=True)

        child("control", "control (fresh kernel cache, new kcore.py)")
        shutil.rmtree(env["GRAPHENE_KERNEL_CACHE"], ignore_errors=True)
        shutil.copy(old, kpath)
        child("p1", "P1 (imported the old kcore.py; the new one lands before its first superstep)")
        child("p2", "P2 (fresh process, new kcore.py only)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
