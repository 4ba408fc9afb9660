"""`graphene prepare`: compile the kernels of every built-in command once, ahead of the first run.

numba compiles a kernel the first time a process calls it and keeps the machine code in its
on-disk cache (beside the module, or the generated kernels' folder, jit.kernel_cache_dir). Without
this step a user's first `graphene partition` pays ~20 s of compilation and a first `graphene run
bfs` ~13 s, on any graph. `make install` runs it; run it again after upgrading numba.

It builds four small datasets in a temporary folder (undirected on one disk and on two, directed
with in-edges, weighted) through `graphene partition`, then runs every built-in algorithm on them
through `graphene run` as a user would: from the SSD path (the default read-through cache, and
without it), in memory, with verification. The engine path is forced (GRAPHENE_SMALL_EDGES=0; a
graph this small would otherwise take the small-graph path). The runs are split over `jobs`
processes; numba's cache takes concurrent writers. Nothing is left behind but the caches: the
datasets live in a temporary GRAPHENE_HOME that is removed at the end.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from .errors import GrapheneError

#: (dataset, graphene run arguments): every built-in algorithm on the paths a user takes
RUNS = [
    ("sym", "bfs -v"), ("sym", "bfs --in-memory"), ("sym", "bfs --memory none"),
    ("sym", "pagerank -v"), ("sym", "pagerank --in-memory"),
    ("sym", "pagerank-pull -v"), ("sym", "pagerank-pull --in-memory"),
    ("sym", "pagerank-pull --memory none"),
    ("sym", "wcc -v"), ("sym", "wcc --in-memory"),
    ("sym", "kcore -v"), ("sym", "kcore --in-memory"), ("sym", "kcore --k 3 --membership-only"),
    ("sym", "apsp -v"), ("sym", "apsp --in-memory"),
    ("sym", "spmv -v"), ("sym", "spmv --in-memory"),
    ("sym", "bc -v"),
    ("sym2", "bfs"), ("sym2", "pagerank"), ("sym2", "pagerank-pull"), ("sym2", "wcc"),
    ("sym2", "kcore"),
    ("dir", "bfs -v"), ("dir", "pagerank -v"), ("dir", "pagerank-pull -v"), ("dir", "wcc -v"),
    ("dir", "kcore -v"), ("dir", "apsp"), ("dir", "spmv"),
    ("w", "sssp -v"), ("w", "sssp --in-memory"), ("w", "sssp --memory none"), ("w", "spmv -v"),
]

SCALE, EDGE_FACTOR = 11, 8          # 2,048 vertices, 16,384 edges: a hub and several levels


#: a share of the runs in another process: python -c SHARE K N
SHARE = ("import sys; from graphene_py.cli import main; from graphene_py.cli_prepare import runs; "
         "runs(main, int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])")


def _cli(main, args) -> None:
    """One `graphene` command (main: the click group) in this process, its output swallowed; an
    error raises."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main.main(list(args), standalone_mode=False)
        except SystemExit as e:
            if e.code not in (None, 0):
                raise GrapheneError(f"graphene prepare: `graphene {' '.join(args)}` exited "
                                    f"{e.code}:\n{out.getvalue()}") from None


def _datasets(main, root: str) -> None:
    from .generate import kronecker
    src, dst, w = next(kronecker(SCALE, EDGE_FACTOR, weights=True, chunk=EDGE_FACTOR << SCALE))
    el, wel = os.path.join(root, "g.el"), os.path.join(root, "g.wel")
    np.savetxt(el, np.stack([src, dst], 1), fmt="%d")
    with open(wel, "w") as f:
        f.writelines(f"{a} {b} {1 + int(x * 255) % 255}\n" for a, b, x in zip(src, dst, w))
    disks = [os.path.join(root, "d0"), os.path.join(root, "d1")]
    for d in disks:
        os.makedirs(d, exist_ok=True)
    # one disk (one partition: the offsets' own degrees) and two (a grid)
    _cli(main, ["partition", el, "--disks", disks[0], "--name", "sym", "-s", "-q"])
    _cli(main, ["partition", el, "--disks", *disks, "--name", "sym2", "-s", "-q"])
    _cli(main, ["partition", el, "--disks", *disks, "--name", "dir", "--in-edges", "-q"])
    _cli(main, ["partition", wel, "--disks", disks[0], "--name", "w", "-s", "-q"])


def runs(main, part: int, parts: int, used: str = None) -> None:
    """Share `part` of `parts` of RUNS; the kernels it used (jit.used()) written to `used`."""
    from . import jit
    for i, (ds, args) in enumerate(RUNS):
        if i % parts == part:
            _cli(main, ["run", *args.split(), "-g", ds, "-q"])
    if used:
        with open(used, "w") as f:
            json.dump(jit.used(), f)


def _preload_lists() -> list:
    """The kernels of every list `graphene run` saved (jit.save_preload): a user's own runs."""
    from . import jit
    d = os.path.dirname(jit.preload_path("x"))
    out = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return out
    for name in names:
        if name.endswith(".json"):
            out.extend(jit.read_preload(os.path.join(d, name)))
    return out


def prepare(main, jobs: int = 2, say=print, aot: str = "all") -> float:
    """Compile and cache every built-in command's kernels (main: the `graphene` click group),
    then compile them ahead of time into the extension modules of graphene_py/aot.py: aot
    "builtin" those of prepare's runs, "all" with the kernels of every run that saved a preload
    list (jit.save_preload), "none" nothing; returns the seconds it took."""
    from . import jit
    t0 = time.perf_counter()
    entries = []
    with tempfile.TemporaryDirectory(prefix="graphene-prepare-") as root:
        env = dict(os.environ, GRAPHENE_HOME=os.path.join(root, "home"), GRAPHENE_SMALL_EDGES="0")
        old = {k: os.environ.get(k) for k in ("GRAPHENE_HOME", "GRAPHENE_SMALL_EDGES")}
        os.environ.update({k: env[k] for k in old})
        try:
            say("compiling the partitioner's kernels ...")
            _datasets(main, root)
            procs = "processes" if jobs > 1 else "process"
            say(f"compiling the algorithms' kernels ({len(RUNS)} runs, {jobs} {procs}) ...")
            used = [os.path.join(root, f"used{k}.json") for k in range(jobs)]
            procs = [subprocess.Popen([sys.executable, "-c", SHARE, str(k), str(jobs), used[k]],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                     for k in range(1, jobs)]
            try:
                runs(main, 0, jobs)
            except BaseException:       # the others stop too, before their folder goes
                for p in procs:
                    p.kill()
                    p.wait()
                raise
            for p in procs:
                out = p.communicate()[0]
                if p.returncode != 0:
                    raise GrapheneError(f"graphene prepare: a share of the runs failed:\n"
                                        f"{out.decode(errors='replace')}")
            entries = jit.used()
            for path in used[1:]:
                with open(path) as f:
                    entries.extend(json.load(f))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    if aot in ("all", "builtin"):
        from . import aot as _aot
        got = _aot.build(entries + (_preload_lists() if aot == "all" else []), jobs=jobs, say=say)
        say(f"{got['kernels']} kernels compiled ahead of time in {got['seconds']:.1f} s"
            + (f" ({got['failed']} left to numba)" if got["failed"] else ""))
    return time.perf_counter() - t0

