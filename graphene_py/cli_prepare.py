"""`graphene prepare`: compile the kernels of every built-in command once, ahead of the first run.

numba compiles a kernel the first time a process calls it and keeps the machine code in its
on-disk cache (beside the module, or the generated kernels' folder, jit.kernel_cache_dir). Without
this step a user's first `graphene partition` pays ~20 s of compilation and a first `graphene run
bfs` ~13 s, on any graph. `make install` runs it; run it again after upgrading numba.

It builds nine small datasets in a temporary folder (undirected on one disk and on two, directed
with in-edges, weighted with whole and with fractional weights, two with many small components,
one of vertex names and one relabelled)
through `graphene partition`, then
runs every built-in algorithm on them through `graphene run` as a user would: from the SSD path
(the default read-through cache, and without it), in memory, with verification; and a few
through the Python API (a cache that holds a file in part). The engine path is forced
(GRAPHENE_SMALL_EDGES=0; a graph this small would otherwise take the small-graph path). The
runs are split over `jobs` processes; numba's cache takes concurrent writers. A few runs follow
with the other request planner (OTHER_PLANNER_RUNS). Nothing is left behind but the caches: the
datasets live in a temporary GRAPHENE_HOME that is removed at the end.

Before all that (bytecode) it compiles graphene_py's own modules to bytecode beside them, as pip
does for a package it installs: an editable install (`make install`) has none until a run writes
them, and a process started with PYTHONDONTWRITEBYTECODE (set in many container images) never
writes them, so every such start compiled each module it imports (~0.3 s of a cold `graphene run`).

Then (build_aot) the kernels those runs used, and with `--aot all` those of every preload list
(a user's own runs), are compiled ahead of time into extension modules that a process imports
instead of numba (graphene_py/aot.py): one module per process of `jobs`, each kernel with the
exact numba signature it was called with, machine code for this CPU.
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from .errors import GrapheneError

#: (dataset, graphene run arguments): every built-in algorithm on the paths a user takes
RUNS = [
    ("sym", "bfs -v"), ("sym", "bfs --in-memory"), ("sym", "bfs --memory none"),
    # PageRank's rows are float32 until the change is below 1e-5, then float64: a run that stops
    # above it ends from float32, a tight tolerance passes through both
    ("sym", "pagerank -v"), ("sym", "pagerank --in-memory"),
    ("sym", "pagerank --tol 1e-9 --max-iter 60"),
    ("sym", "pagerank-pull -v"), ("sym", "pagerank-pull --in-memory"),
    ("sym", "pagerank-pull --memory none"),
    ("sym", "pagerank-pull --tol 1e-7 --max-iter 40"),
    ("sym", "pagerank-pull --in-memory --tol 1e-7 --max-iter 40"),
    ("sym", "wcc -v"), ("sym", "wcc --in-memory"),
    ("sym", "kcore -v"), ("sym", "kcore --in-memory"), ("sym", "kcore --k 3 --membership-only"),
    ("sym", "apsp -v"), ("sym", "apsp --in-memory"),
    ("sym", "spmv -v"), ("sym", "spmv --in-memory"),
    ("sym", "bc -v"),
    ("sym2", "bfs"), ("sym2", "pagerank"), ("sym2", "pagerank-pull"),
    ("sym2", "wcc"), ("sym2", "kcore"),
    ("dir", "bfs -v"), ("dir", "pagerank -v"), ("dir", "pagerank-pull -v"),
    ("dir", "pagerank-pull --tol 1e-7 --max-iter 40"), ("dir", "wcc -v"), ("dir", "kcore -v"),
    ("dir", "apsp"), ("dir", "spmv"),
    ("w", "sssp -v"), ("w", "sssp --in-memory"), ("w", "sssp --memory none"), ("w", "spmv -v"),
    # narrow buckets: a superstep's hits fall into several, which its bins sort by counting
    # (sssp._counting_order: GAPBS's weighted kron22 imported numba for it after `make install`)
    ("w", "sssp --delta 1"),
    ("wf", "sssp -v"), ("wf", "sssp --in-memory"), ("wf", "sssp --memory none"),
    ("wf", "sssp --delta 1"),
    ("sparse", "kcore --k 16 --membership-only"), ("sparse", "wcc"),
    # a grid's in-memory BFS walks its own bottom-up kernel (bfs_ram); a graph whose BFS goes
    # bottom-up and leaves many small components serves WCC's propagation from kept lists
    ("sym2", "bfs --in-memory"), ("tail", "wcc"), ("tail", "bfs"),
    ("names", "bfs"), ("relabeled", "wcc"),
    # without the read-through cache (`--memory none`) a superstep's kernel takes other
    # arguments: each algorithm once that way, so that such a run imports no numba either
    ("sym", "pagerank --memory none"), ("sym", "wcc --memory none"), ("sym", "kcore --memory none"),
    ("sym", "kcore --k 3 --membership-only --memory none"), ("sym", "apsp --memory none"),
    ("sym", "spmv --memory none"), ("sparse", "kcore --k 16 --membership-only --memory none"),
    ("tail", "wcc --memory none"),
]

#: runs again with the other planner (prepare's folder with a device profile when the user has
#: none for it, without one when the user has one): a device profiled after install (`graphene
#: calibrate`, or the calibration at partition) plans its requests with a cost model of its own
#: (io/planner.py), which has kernels of its own
OTHER_PLANNER_RUNS = [
    ("sym", "bfs"), ("sym", "pagerank"), ("sym", "pagerank-pull"), ("sym", "wcc"),
    ("sym", "kcore"), ("sym", "kcore --k 3 --membership-only"), ("sym", "apsp"), ("sym", "spmv"),
    ("sym", "bc"), ("sym2", "bfs"), ("sym2", "wcc"), ("sym2", "kcore"), ("sym2", "pagerank"),
    ("dir", "bfs"), ("dir", "wcc"), ("dir", "kcore"), ("dir", "apsp"), ("w", "sssp"),
    ("wf", "sssp"), ("tail", "wcc"), ("tail", "bfs"), ("sparse", "kcore --k 16 --membership-only"),
]

#: a device profile for OTHER_PLANNER_RUNS where the user has none (a virtio disk's, measured)
SYNTHETIC_PROFILE = {"sizes": [4096, 16384, 65536, 131072, 262144, 524288],
                     "iops": [45000.0, 37000.0, 19000.0, 9400.0, 6600.0, 3400.0]}

#: (dataset, algorithm, API options): runs through the Python API, for what the CLI cannot ask
#: for exactly: an adjacency cache that holds one file in part (a quota), as a tight `--memory`
#: gives (iterator/session.py)
API_RUNS = [("tail", "pagerank", {"tolerance": 1e-6}), ("tail", "kcore", {})]

#: the cache of API_RUNS: less than the "tail" dataset's one file, at least PARTIAL_MIN
PARTIAL_CACHE = 2 << 20

SCALE, EDGE_FACTOR = 11, 8          # 2,048 vertices, 16,384 edges: a hub and several levels
SPARSE_PATHS = 1000                 # paths of 4 vertices beside it in the "sparse" dataset
#: the "tail" dataset: Kronecker 32,768 vertices, ~0.9 M directed edges (3.5 MB of lists: more
#: than PARTIAL_CACHE) and SPARSE_PATHS paths, where BFS from the hub goes bottom-up
TAIL_SCALE, TAIL_EDGE_FACTOR = 15, 16


#: a share of the runs in another process: python -c SHARE K N
SHARE = ("import sys; from graphene_py.cli import main; from graphene_py.cli_prepare import runs; "
         "runs(main, int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])")


def _child_env(env=None) -> dict:
    """The environment of a child Python process that imports this graphene_py (the folder it
    was imported from first on its path, as in a source tree that is not the installed one)."""
    env = dict(os.environ if env is None else env)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([here] + [p for p in
                                                  env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


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
        # the generator's weights are already GAPBS's integers 1..255 (an earlier `1 + int(x *
        # 255) % 255` made every one 1: SSSP was BFS here, and its bins never sorted by bucket)
        f.writelines(f"{a} {b} {int(x)}\n" for a, b, x in zip(src, dst, w))
    disks = [os.path.join(root, "d0"), os.path.join(root, "d1")]
    for d in disks:
        os.makedirs(d, exist_ok=True)
    # one disk (one partition: the offsets' own degrees) and two (a grid)
    _cli(main, ["partition", el, "--disks", disks[0], "--name", "sym", "-s", "-q"])
    _cli(main, ["partition", el, "--disks", *disks, "--name", "sym2", "-s", "-q"])
    _cli(main, ["partition", el, "--disks", *disks, "--name", "dir", "--in-edges", "-q"])
    _cli(main, ["partition", wel, "--disks", disks[0], "--name", "w", "-s", "-q"])
    # weights with fractions: SSSP's float64 distances (whole weights get uint32 ones)
    wfl = os.path.join(root, "gf.wel")
    with open(wfl, "w") as f:
        f.writelines(f"{a} {b} {x + 0.5}\n" for a, b, x in zip(src, dst, w))
    _cli(main, ["partition", wfl, "--disks", disks[1], "--name", "wf", "-s", "-q"])
    # the same graph and SPARSE_PATHS short paths beside it: most vertices below K, as in a large
    # graph's tail, so k-core membership keeps lists in RAM and WCC labels many small
    # components by propagation (paths these small graphs do not take otherwise)
    sp = os.path.join(root, "sparse.el")
    np.savetxt(sp, np.concatenate([np.stack([src, dst], 1), _short_paths(1 << SCALE)]), fmt="%d")
    _cli(main, ["partition", sp, "--disks", disks[0], "--name", "sparse", "-s", "-q"])
    tl = tail_edges(os.path.join(root, "tail.bin32"))
    _cli(main, ["partition", tl, "--disks", disks[0], "--name", "tail", "-s", "-q"])
    # vertex names (--labels) and sparse IDs compacted (--relabel): their readers' own kernels
    nm = os.path.join(root, "names.el")
    with open(nm, "w") as f:
        f.writelines(f"v{a} v{b}\n" for a, b in zip(src[:4096], dst[:4096]))
    _cli(main, ["partition", nm, "--disks", disks[1], "--name", "names", "--labels", "-q"])
    rl = os.path.join(root, "sparse_ids.el")
    np.savetxt(rl, np.stack([src[:4096] * 1000 + 7, dst[:4096] * 1000 + 7], 1), fmt="%d")
    _cli(main, ["partition", rl, "--disks", disks[1], "--name", "relabeled", "--relabel", "-q"])


def tail_edges(path: str) -> str:
    """The "tail" dataset's edges written to `path` (.bin32): Kronecker TAIL_SCALE and
    SPARSE_PATHS paths of 4 vertices beside it. Returns path."""
    from .generate import kronecker
    src, dst = next(kronecker(TAIL_SCALE, TAIL_EDGE_FACTOR, chunk=TAIL_EDGE_FACTOR << TAIL_SCALE))
    edges = np.concatenate([np.stack([src, dst], 1), _short_paths(1 << TAIL_SCALE)])
    edges.astype(np.uint32).tofile(path)
    return path


def _short_paths(first: int) -> np.ndarray:
    """SPARSE_PATHS paths of 4 vertices from vertex `first` on, as (src, dst) rows."""
    base = first + np.arange(SPARSE_PATHS, dtype=np.int64)[:, None] * 4
    return np.concatenate([np.stack([base + j, base + j + 1], -1).reshape(-1, 2)
                           for j in range(3)])


def runs(main, part: int, parts: int, used: str = None) -> None:
    """Share `part` of `parts` of RUNS; the kernels it used (jit.used()) written to `used`."""
    from . import jit
    for i, (ds, args) in enumerate(RUNS):
        if i % parts == part:
            _cli(main, ["run", *args.split(), "-g", ds, "-q"])
    for i, (ds, name, opts) in enumerate(API_RUNS):
        if (len(RUNS) + i) % parts == part:
            _api_run(ds, name, opts)
    if used:
        with open(used, "w") as f:
            json.dump(jit.used(), f)


def _other_planner(main, root) -> None:
    """OTHER_PLANNER_RUNS with the device profile of prepare's folder flipped: a synthetic one
    where the user's profiles (copied into prepare's home) have none, none where they have one;
    put back as it was afterwards."""
    from .io import calibrate
    key = calibrate.profile_key(root)
    if key is None:
        return
    had = calibrate.load_all().get(key)
    if had is None:
        calibrate.save(key, calibrate.Profile(folders=[root], **SYNTHETIC_PROFILE))
    else:
        calibrate.forget([key])
    try:
        for ds, args in OTHER_PLANNER_RUNS:
            _cli(main, ["run", *args.split(), "-g", ds, "-q"])
    finally:
        if had is None:
            calibrate.forget([key])
        else:
            calibrate._update(lambda d: d.__setitem__(key, had))


def _api_run(ds, name, opts) -> None:
    """One API_RUNS entry: algorithm `name` on dataset `ds` with a cache of PARTIAL_CACHE bytes."""
    from .algos import registry
    from .graph import Graph
    from .iterator.memory import CacheBudget
    registry.dispatch(name, Graph.open(ds), cache=CacheBudget(PARTIAL_CACHE), **opts)


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


def _device_profiles(home: str) -> None:
    """The user's stored device profiles (`graphene calibrate`) copied into prepare's own home:
    runs on a calibrated device plan their requests by its model, and those kernels are compiled
    too (the datasets here sit in a temporary folder, mostly on the same device)."""
    from . import config
    from .io.calibrate import STORE
    src = os.path.join(config.home_dir(), STORE)
    if os.path.exists(src):
        os.makedirs(home, exist_ok=True)
        shutil.copyfile(src, os.path.join(home, STORE))


def prepare(main, jobs: int = 2, say=print, aot: str = "all") -> float:
    """Compile and cache every built-in command's kernels (main: the `graphene` click group),
    then compile them ahead of time into the extension modules of graphene_py/aot.py: aot
    "builtin" those of prepare's runs, "all" with the kernels of every run that saved a preload
    list (jit.save_preload), "none" nothing; returns the seconds it took."""
    from . import jit
    t0 = time.perf_counter()
    if not bytecode():
        say("note: graphene_py's folder is not writable; its modules compile on each start")
    entries = []
    with tempfile.TemporaryDirectory(prefix="graphene-prepare-") as root:
        env = dict(os.environ, GRAPHENE_HOME=os.path.join(root, "home"), GRAPHENE_SMALL_EDGES="0")
        _device_profiles(env["GRAPHENE_HOME"])
        old = {k: os.environ.get(k) for k in ("GRAPHENE_HOME", "GRAPHENE_SMALL_EDGES")}
        os.environ.update({k: env[k] for k in old})
        try:
            say("compiling the partitioner's kernels ...")
            _datasets(main, root)
            procs = "processes" if jobs > 1 else "process"
            say(f"compiling the algorithms' kernels ({len(RUNS)} runs, {jobs} {procs}) ...")
            used = [os.path.join(root, f"used{k}.json") for k in range(jobs)]
            procs = [subprocess.Popen([sys.executable, "-c", SHARE, str(k), str(jobs), used[k]],
                                      env=_child_env(env), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)
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
            _other_planner(main, root)
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
        got = build_aot(entries + (_preload_lists() if aot == "all" else []), jobs=jobs, say=say)
        say(f"{got['kernels']} kernels compiled ahead of time in {got['seconds']:.1f} s"
            + (f" ({got['failed']} left to numba)" if got["failed"] else ""))
    return time.perf_counter() - t0


def bytecode(folder: str = None) -> bool:
    """Compile every module under `folder` (graphene_py's own by default) to its __pycache__
    .pyc, whatever PYTHONDONTWRITEBYTECODE says (py_compile writes regardless). Every module is
    compiled again (force): compileall's own test of a .pyc compares whole-second mtimes only,
    where the import system also compares sizes, so a module edited within the second of its
    last compile would keep a .pyc that imports never use. False when some could not be written
    (a read-only install: pip compiled those already)."""
    import compileall
    folder = folder or os.path.dirname(os.path.abspath(__file__))
    with contextlib.redirect_stdout(io.StringIO()):
        return bool(compileall.compile_dir(folder, quiet=2, workers=1, force=True))


# -- kernels compiled ahead of time (aot.py) --------------------------------------------------

#: python -c PART ENTRIES.json NAME FOLDER: one share of the kernels compiled in its own process
PART = ("import sys; from graphene_py.cli_prepare import _compile_part; "
        "_compile_part(*sys.argv[1:4])")


def build_aot(entries, jobs: int = 2, say=None) -> dict:
    """Compile the kernels `entries` name ([module, qualname, pickled signature, ...] as jit.used()
    and the preload lists hold them) into the modules for this process's build_key(), in `jobs`
    processes at once (one module each). Entries whose kernel or types cannot be compiled ahead
    are skipped, and so is a share whose compilation fails (its kernels stay numba's). Returns
    {"path", "kernels", "skipped", "failed", "seconds"}."""
    import importlib.machinery
    from .aot import _STATE, _paths, build_key, key_of_type, lib_dir
    from . import jit
    t0 = time.perf_counter()
    jit.ready()
    from numba.core import types
    from .iterator.preload import _dispatcher, _import_modules

    key = build_key()
    os.makedirs(lib_dir(), exist_ok=True)
    _import_modules(entries)
    seen, todo, skipped = set(), [], 0
    for mod, qual, sig, *_ in entries:
        try:
            argkey = key_of_type(types.Tuple(tuple(pickle.loads(base64.b64decode(sig)))))
            disp = _dispatcher(mod, qual)
        except Exception:      # noqa: BLE001 - a stale entry
            skipped += 1
            continue
        if disp is None or argkey is None:
            skipped += 1
            continue
        if (mod, qual, argkey) in seen:
            continue
        if getattr(jit.real(disp), "targetoptions", {}).get("parallel"):
            skipped += 1               # numba.pycc compiles no parallel loops
            continue
        seen.add((mod, qual, argkey))
        todo.append([mod, qual, sig, argkey])
    jobs = max(1, min(int(jobs), len(todo)))
    build_dir = tempfile.mkdtemp(prefix=".build-", dir=lib_dir())
    name, manifest = _paths(key)
    parts, procs = [], []
    try:
        if say:
            say(f"compiling {len(todo)} kernels ahead of time ({jobs} "
                f"{'processes' if jobs > 1 else 'process'}) ...")
        for j in range(jobs):
            share = todo[j::jobs]
            pj = f"{name}_{j}"
            with open(os.path.join(build_dir, pj + ".in.json"), "w") as f:
                json.dump(share, f)
            parts.append((pj, share))
            procs.append(subprocess.Popen(
                [sys.executable, "-c", PART, os.path.join(build_dir, pj + ".in.json"), pj,
                 build_dir], env=_child_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        listed, failed, stale = [], 0, 0
        for (pj, share), p in zip(parts, procs):
            out = p.communicate()[0]
            done = os.path.join(build_dir, pj + ".out.json")
            if p.returncode != 0 or not os.path.exists(done):
                failed += len(share)
                if say:
                    tail = out.decode(errors="replace").strip().splitlines()[-1:] or [""]
                    say(f"  {len(share)} kernels left to numba (their compilation failed: "
                        f"{tail[0][:200]})")
                continue
            with open(done) as f:
                got = json.load(f)
            stale += len(got["stale"])
            if say and got["stale"]:
                say(f"  {len(got['stale'])} entries of earlier runs' kernel lists skipped: "
                    f"this version's kernels take other types (harmless; e.g. "
                    f"{got['stale'][0].split(':')[0]})")
            got = got["listed"]
            suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
            final = os.path.join(lib_dir(), pj + suffix)
            os.replace(os.path.join(build_dir, pj + suffix), final)
            for e in got:
                listed.append(dict(e, part=pj))
        tmp = os.path.join(build_dir, "manifest.json")
        with open(tmp, "w") as f:
            json.dump({"key": key, "entries": listed}, f)
        os.replace(tmp, manifest)            # the modules first, then the list that names them
        _prune(KEEP_BUILDS)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        import shutil
        shutil.rmtree(build_dir, ignore_errors=True)
    _STATE["table"] = None
    return {"path": manifest, "kernels": len(listed), "skipped": skipped + stale,
            "failed": failed, "seconds": time.perf_counter() - t0}


#: builds kept in lib_dir (each checkout or edit of the package has its own key): the newest
KEEP_BUILDS = 4


def _prune(keep: int) -> None:
    """Delete the modules of all but the `keep` newest builds (a process using one keeps its
    mapping of the file)."""
    from .aot import lib_dir
    d = lib_dir()
    try:
        names = os.listdir(d)
    except OSError:
        return
    manifests = sorted((n for n in names if n.startswith("_gp_aot_") and n.endswith(".json")),
                       key=lambda n: os.path.getmtime(os.path.join(d, n)), reverse=True)
    for m in manifests[keep:]:
        stem = m[:-len(".json")]
        for n in names:
            if n == m or (n.startswith(stem + "_") and not n.endswith(".json")):
                try:
                    os.unlink(os.path.join(d, n))
                except OSError:
                    pass


def _compile_part(entries_path, name, out_dir) -> None:
    """One share of build_aot(): its kernels into module `name` in out_dir, and name.out.json
    listing what it exports (module, qualname, argument key, symbol)."""
    from . import jit
    jit.ready()
    from numba.core.registry import cpu_target
    jit._refresh(cpu_target, True)      # compiling needs every typing and lowering registry
    import numba.pycc.compiler as pcc
    from numba.pycc import CC
    from .iterator.preload import _dispatcher, _import_modules
    with open(entries_path) as f:
        entries = json.load(f)
    _import_modules([e[:3] for e in entries])
    compile_extra = pcc.compile_extra

    def compile_one(typing, target, fn, args, ret, flags, locals, library=None):
        # numba.pycc hands every export the same flags, and numba's inliner switches SSA off
        # in the flags it is given: each export gets its own copy, with SSA on as numba's JIT
        # compiles, and its call releasing the GIL (numba's nogil=True)
        f = flags.copy()
        f.enable_ssa = True
        f.release_gil = True
        return compile_extra(typing, target, fn, args, ret, f, locals, library=library)

    cc = CC(name)
    cc.output_dir = out_dir
    cc.target_cpu = "host"
    cc.verbose = False
    listed, stale = [], []
    for i, (mod, qual, b64, argkey) in enumerate(entries):
        disp = jit.real(_dispatcher(mod, qual))
        sig = tuple(pickle.loads(base64.b64decode(b64)))
        try:                # a list saved by an older version of the kernel: left to numba
            disp.compile(sig)
        except Exception as e:      # noqa: BLE001 - numba's typing errors have many classes
            stale.append(f"{mod}.{qual}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
            continue
        cres = disp.overloads[sig]
        sym = f"k{i}"
        cc.export(sym, cres.signature)(disp.py_func)
        listed.append({"module": mod, "qualname": qual, "args": argkey, "symbol": sym,
                       "sig": b64, "sigstr": str(sig)})
    pcc.compile_extra = compile_one
    try:
        cc.compile()
    finally:
        pcc.compile_extra = compile_extra
    with open(os.path.join(out_dir, name + ".out.json"), "w") as f:
        json.dump({"listed": listed, "stale": stale}, f)
