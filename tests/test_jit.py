"""No per-process tax (graphene_py/jit.py): cached kernels load without numba's target refresh, the
kernels a run used are loaded in the next process's setup, and neither changes an answer.

The fresh-process tests run real `graphene` processes (the CLI's main in a subprocess), because
what they check (which numba modules a process imports, what its first trial loads) only exists
once per process."""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from graphene_py.partition import partition_arrays
from tests import graphs as tg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: runs `graphene ARGS...` in this process, then prints what it imported and loaded as JSON
WRAPPER = textwrap.dedent("""
    import json, sys
    sys.argv = ["graphene"] + sys.argv[1:]
    from graphene_py.cli import main
    from graphene_py import jit
    try:
        main()
    except SystemExit as e:
        code = e.code
    else:
        code = 0
    print("JIT " + json.dumps({"code": code, "fallbacks": jit.fallbacks(),
                               "arraymath": "numba.np.arraymath" in sys.modules,
                               "npyimpl": "numba.np.npyimpl" in sys.modules}),
          file=sys.stderr)
""")


def _env(tmp_path, **extra):
    env = dict(os.environ, GRAPHENE_HOME=str(tmp_path / "home"),
               GRAPHENE_KERNEL_CACHE=str(tmp_path / "cache" / "kernels"), **extra)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _graphene(tmp_path, *args):
    p = subprocess.run([sys.executable, "-c", WRAPPER, *args], env=_env(tmp_path),
                       capture_output=True, text=True, timeout=300)
    line = [x for x in p.stderr.splitlines() if x.startswith("JIT ")]
    assert line, p.stderr[-3000:]
    info = json.loads(line[-1][4:])
    assert info["code"] == 0, p.stderr[-3000:]
    return p.stdout, info


@pytest.fixture
def small(tmp_path):
    g = tg.powerlaw()
    d = tmp_path / "d0"
    d.mkdir()
    os.environ["GRAPHENE_HOME"] = str(tmp_path / "home")     # the autouse fixture restores it
    partition_arrays(g.src, g.dst, num_vertices=g.n, disks=[str(d)], name="pl", rows=1, cols=1)
    return g


def _json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def test_a_fresh_process_loads_cached_kernels_without_numba_registries(small, tmp_path):
    """The second process finds every kernel in numba's cache and loads it without the target
    refresh: numba's lowering registries (numba.np.npyimpl, numba.np.arraymath) are never
    imported, no load fell back to numba's own path, and the answer is the first process's."""
    out1, first = _graphene(tmp_path, "run", "bfs", "--graph", "pl", "--src", "0", "--json",
                            "-o", str(tmp_path / "a.npz"))
    out2, second = _graphene(tmp_path, "run", "bfs", "--graph", "pl", "--src", "0", "--json",
                             "-o", str(tmp_path / "b.npz"))
    assert second["fallbacks"] == 0
    assert not second["arraymath"] and not second["npyimpl"], second
    g = small
    ref = tg.naive_bfs_depth(tg.naive_adjacency(g.n, g.src, g.dst), 0)
    for f in ("a.npz", "b.npz"):          # parents may differ (threads race to a vertex)
        assert np.array_equal(np.load(tmp_path / f)["depth"], ref)
    assert _json(out1)["trials"][0]["n_reached"] == _json(out2)["trials"][0]["n_reached"]


INLINED = textwrap.dedent("""
    import json, sys
    from graphene_py.cli import main
    from graphene_py.iterator import specialize
    if sys.argv[1] == "--calls":
        specialize.INLINED_PACKAGE = "no package: "      # every kernel called, as a user's
    sys.argv[1:2] = []
    try:
        main()
    except SystemExit:
        pass
    from graphene_py import jit
    out = {}
    for modname, (template, active, compute) in jit.GENERATED.items():
        ir = "\\n".join(jit.real(sys.modules[modname].kernel).inspect_llvm().values())
        name = compute.rpartition(".")[2]       # numba mangles it as <length><name>
        out[template + ":" + compute] = sum("call " in x and f"{len(name)}{name}" in x
                                            for x in ir.splitlines())
    print("INL " + json.dumps(out), file=sys.stderr)
""")


@pytest.mark.parametrize("mode", ["inlined", "--calls"])
def test_builtin_kernels_are_taken_into_the_generated_kernel(small, tmp_path, mode):
    """A generated superstep kernel holds graphene_py's own compute kernel inline: its machine
    code calls no function of that name (a call passed the whole state tuple, flattened, per
    vertex: delta PageRank's sweep 0.28 s -> 0.18 s in RAM on kron22). The same check finds the
    calls where the generated module calls its kernel, as it does a user's."""
    env = _env(tmp_path, GRAPHENE_AOT="0")        # compiled here, so numba has the IR
    p = subprocess.run([sys.executable, "-c", INLINED, mode, "run", "spmv", "--graph", "pl", "-q"],
                       env=env, capture_output=True, text=True, timeout=300)
    line = [x for x in p.stderr.splitlines() if x.startswith("INL ")]
    assert line, p.stderr[-3000:]
    calls = json.loads(line[-1][4:])
    key = "process_batch:graphene_py.algos.spmv._row_unweighted"
    assert key in calls, calls
    if mode == "inlined":
        assert not any(calls.values()), calls
    else:
        assert calls[key] > 0, calls


def test_the_kernels_of_the_last_run_load_in_setup(small, tmp_path):
    """After one run, the next process of the same algorithm loads its kernels during setup: the
    setup block names them, and its first trial loads none itself."""
    _graphene(tmp_path, "run", "wcc", "--graph", "pl", "--json")
    pre = tmp_path / "cache" / "preload"
    files = sorted(os.listdir(pre))
    # the algorithm, a read-through cache (--memory auto gives WCC one), the kind of dataset
    assert files == ["wcc_cache-d-id4-ssd.json"], files
    entries = json.load(open(pre / files[0]))
    mods = {e[0] for e in entries}
    assert "graphene_py.io.planner" in mods                           # engine kernels
    assert any(m.startswith("graphene_py._kernels.") for m in mods)  # specialized supersteps
    out, _ = _graphene(tmp_path, "run", "wcc", "--graph", "pl", "--json", "-o",
                       str(tmp_path / "w.npy"))
    setup = _json(out)["setup"]
    assert setup["kernels_loaded"] == len(entries) and setup["kernels_skipped"] == 0, setup
    g = small
    from tests.naive import wcc_labels
    assert np.array_equal(np.load(tmp_path / "w.npy"), wcc_labels(g.n, g.src, g.dst))


def test_a_cached_function_then_a_new_compile_in_one_process(tmp_path):
    """A function loaded lazily (no refresh) and a new function compiled after it, which calls it
    and uses numpy functions whose lowering lives in the skipped registries: both right."""
    mod = tmp_path / "lazymod.py"
    mod.write_text(textwrap.dedent("""
        import numpy as np
        from numba import njit

        @njit(cache=True)
        def total(a):
            s = 0
            for x in a:
                s += x
            return s
    """))
    prog = textwrap.dedent("""
        import sys, numpy as np
        sys.path.insert(0, sys.argv[1])
        from graphene_py import jit
        jit.ready()
        import lazymod
        a = np.arange(10, dtype=np.int64)
        assert lazymod.total(a) == 45
        print("after-load", "numba.np.arraymath" in sys.modules)
        from numba import njit
        @njit
        def later(a):
            return lazymod.total(np.sort(a[::-1])) + np.argmax(a)
        assert later(a) == 45 + 9
        print("compiled", "numba.np.arraymath" in sys.modules, jit.fallbacks())
    """)
    env = _env(tmp_path)
    outs = [subprocess.run([sys.executable, "-c", prog, str(tmp_path)], env=env,
                           capture_output=True, text=True, timeout=300) for _ in range(2)]
    for p in outs:
        assert p.returncode == 0, p.stderr[-3000:]
    # the first process compiled `total` (a refresh, as numba does to compile); the second loaded
    # it without one, then compiled `later` with the registries it needed
    assert "after-load False" in outs[1].stdout, outs[1].stdout
    assert "compiled True 0" in outs[1].stdout, outs[1].stdout


def test_a_load_that_fails_without_the_refresh_takes_numbas_own_path(monkeypatch):
    """The short path is never worse than numba's: a load that raises there is done again the
    way numba does it (refresh, then load), and counted."""
    from numba import njit
    from numba.core import caching
    from graphene_py import jit
    assert jit.lazy_refresh()
    real = caching.Cache._load_overload
    calls = {"n": 0}

    def flaky(self, sig, ctx):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated: needs the registries")
        return real(self, sig, ctx)

    monkeypatch.setattr(caching.Cache, "_load_overload", flaky)
    before = jit.fallbacks()

    @njit(cache=True)
    def _jit_fallback_probe(x):     # cache=True: numba asks its cache first
        return x * 3 + 1

    assert _jit_fallback_probe(4) == 13
    assert jit.fallbacks() == before + 1 and calls["n"] >= 2


def test_preload_skips_what_it_cannot_load_and_never_compiles(tmp_path, monkeypatch):
    """Stale or damaged preload lists cost nothing but their entries: unknown modules, a signature
    that is not in numba's cache (not compiled there), garbage in the file."""
    import base64
    import pickle

    import numba
    from graphene_py import jit
    from graphene_py.iterator import session
    from graphene_py.iterator.preload import preload
    monkeypatch.setenv("GRAPHENE_KERNEL_CACHE", str(tmp_path / "kernels"))
    assert jit.lazy_refresh()
    f64 = numba.typeof(np.zeros(2))
    absent = base64.b64encode(pickle.dumps((f64, f64))).decode()
    entries = [["graphene_py.no_such_module", "f", absent],
               ["graphene_py.iterator.session", "_narrow", absent],
               ["graphene_py.iterator.session", "_narrow", "not base64 at all"],
               ["graphene_py._kernels.process_batch", "x.y|z.w", absent]]
    path = jit.preload_path("probe")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(entries, f)
    p = preload("probe").wait()
    assert (p.loaded, p.skipped) == (0, 4)
    assert (f64, f64) not in session._narrow.overloads        # nothing was compiled
    with open(path, "w") as f:
        f.write("{not json")
    p = preload("probe").wait()
    assert (p.loaded, p.skipped) == (0, 0)


def test_save_preload_keeps_the_last_runs_kernels_once_per_process(tmp_path, monkeypatch):
    """A run's list replaces the one before (a union would make every process load the kernels
    of every variant ever run); a process saves once (later runs in it hold earlier ones' too)."""
    from graphene_py import jit
    monkeypatch.setenv("GRAPHENE_KERNEL_CACHE", str(tmp_path / "kernels"))
    monkeypatch.setattr(jit, "_PATCH", dict(jit._PATCH, saved=False))
    monkeypatch.setattr(jit, "_USED", {("graphene_py.a", "f", "S1"): "s1"})
    jit.save_preload("k")          # module, name, pickled signature, the signature as text
    assert json.load(open(jit.preload_path("k"))) == [["graphene_py.a", "f", "s1", "S1"]]
    monkeypatch.setattr(jit, "_USED", {("graphene_py.b", "g", "S2"): "s2"})
    jit.save_preload("k")                                   # the same process: not again
    assert json.load(open(jit.preload_path("k"))) == [["graphene_py.a", "f", "s1", "S1"]]
    monkeypatch.setattr(jit, "_PATCH", dict(jit._PATCH, saved=False))   # as a new process
    monkeypatch.setattr(jit, "PRELOAD_MAX", 1)
    monkeypatch.setattr(jit, "_USED", {("graphene_py.b", "g", "S2"): "s2",
                                       ("graphene_py.c", "h", "S3"): "s3"})
    jit.save_preload("k")
    assert json.load(open(jit.preload_path("k"))) == [["graphene_py.b", "g", "s2", "S2"]]
    assert not [x for x in os.listdir(os.path.dirname(jit.preload_path("k")))
                if x.startswith(".tmp-")]


def test_preload_imports_the_modules_it_names_on_the_calling_thread():
    """Modules a run imports only in its first superstep (the kept lists') are imported by
    Preload on the main thread, before its thread looks for their kernels (which imports
    nothing: no import locks taken against the main thread)."""
    prog = textwrap.dedent("""
        import sys
        m = "graphene_py.iterator.shortlists"
        before = m in sys.modules
        from graphene_py.iterator.preload import _import_modules
        _import_modules([[m, "_layout", "x"],
                             ["graphene_py._kernels.process_batch",
                              "graphene_py.algos.sssp._active|graphene_py.algos.sssp._relax", "x"],
                             ["graphene_py.no_such_module", "f", "x"], ["numpy.linalg", "f", "x"]])
        print(before, m in sys.modules, "graphene_py.algos.sssp" in sys.modules)
    """)
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["False", "True", "True"], p.stdout


def test_a_kernel_the_run_never_calls_leaves_the_preload_list(small, tmp_path):
    """Preloaded kernels count as used only when the run calls them (jit.prepare keeps them until
    the dispatcher asks), so a kernel of another algorithm put into a run's list is loaded once,
    not saved again: the list follows what runs use instead of growing with what they loaded."""
    _graphene(tmp_path, "run", "spmv", "--graph", "pl", "--memory", "none")
    # twice: the first run compiles, and compiling loads the user functions the generated
    # kernels inline, which later runs never ask for (so the second list drops them)
    for _ in range(2):
        _graphene(tmp_path, "run", "wcc", "--graph", "pl", "--memory", "none")
    pre = tmp_path / "cache" / "preload"
    spmv = json.load(open(pre / "spmv-d-id4-ssd.json"))
    wcc_path = pre / "wcc-d-id4-ssd.json"
    wcc = json.load(open(wcc_path))
    foreign = [e for e in spmv if e not in wcc and e[0].startswith("graphene_py._kernels.")]
    assert foreign, (spmv, wcc)
    json.dump(wcc + foreign, open(wcc_path, "w"))
    out, _ = _graphene(tmp_path, "run", "wcc", "--graph", "pl", "--memory", "none", "--json")
    assert _json(out)["setup"]["kernels_loaded"] == len(wcc) + len(foreign)
    again = json.load(open(wcc_path))

    def kernels(entries):          # (module, name, signature): pickles differ between processes
        return sorted((m, q, str(pickle.loads(base64.b64decode(p)))) for m, q, p, *_ in entries)
    assert kernels(again) == kernels(wcc) and not set(kernels(foreign)) & set(kernels(again))


def test_stand_ins_until_a_kernel_is_needed():
    """A fresh process: graphene_py's kernels are stand-ins and numba is not imported; a stand-in
    copies as itself (before, copy recursed without end); calling one imports numba and swaps the module's global for the
    real dispatcher, which gives the same answer."""
    prog = textwrap.dedent("""
        import copy, sys
        import numpy as np
        from graphene_py.algos import bfs
        from graphene_py.iterator import queue
        assert type(bfs._visit).__name__ == "_Lazy", type(bfs._visit)
        assert "numba" not in sys.modules
        lz = queue.squeeze_from
        assert copy.copy(lz) is lz and copy.deepcopy(lz) is lz
        assert "numba" not in sys.modules
        assert bool(bfs._always(3, None)) is True          # the call makes numba's objects
        from numba.core.registry import CPUDispatcher
        assert isinstance(bfs._visit, CPUDispatcher) and isinstance(queue.squeeze_from, CPUDispatcher)
        from graphene_py import jit
        assert jit.real(lz) is queue.squeeze_from
        print("OK")
    """)
    p = subprocess.run([sys.executable, "-c", prog], env=dict(os.environ, PYTHONPATH=ROOT),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "OK", p.stderr[-2000:]


#: runs `graphene ARGS...` in this process and prints the graphene_py kernels numba compiled
COMPILES = textwrap.dedent("""
    import json, sys
    from numba.core import event
    compiled = []

    class Compiles(event.Listener):
        def on_start(self, ev):
            f = ev.data["dispatcher"].py_func
            compiled.append(f.__module__ + "." + f.__qualname__)

        def on_end(self, ev):
            pass

    event.register("numba:compile", Compiles())
    from graphene_py.cli import main
    for args in json.loads(sys.argv[1]):
        if args[0] == "api":          # ["api", dataset, algorithm, cache bytes]
            from graphene_py.algos import registry
            from graphene_py.graph import Graph
            from graphene_py.iterator.memory import CacheBudget
            registry.dispatch(args[2], Graph.open(args[1]), cache=CacheBudget(args[3]))
            continue
        main.main(args, standalone_mode=False)
    print("COMPILED " + json.dumps([c for c in compiled if c.startswith("graphene_py")]),
          file=sys.stderr)
""")


def test_prepare_leaves_nothing_to_compile_for_a_first_run(tmp_path, monkeypatch):
    """`graphene prepare` (make install runs it) covers every built-in algorithm, and after it a
    fresh process partitions another graph and runs the algorithms on it, from disk and in
    memory, without compiling a single graphene_py kernel; so does a process whose device has
    the other kind of plan (a device profile where prepare's folder had none, or none where it
    had one), on a grid in memory, with WCC's propagation served from kept lists and with a
    cache that holds a file in part. (Cold, prepare takes about a minute; after make install it
    finds everything cached. The ahead-of-time build, which a first run would not need either,
    is tests/test_aot.py's: here it would only add a minute.)"""
    from graphene_py.algos import registry
    from graphene_py.cli_prepare import PARTIAL_CACHE, RUNS, SYNTHETIC_PROFILE, prepare, \
        tail_edges
    from graphene_py.io import calibrate
    assert {a.split()[0] for _, a in RUNS} >= set(registry.names()) - {"msbfs"}
    monkeypatch.delenv("GRAPHENE_KERNEL_CACHE", raising=False)     # the user's caches
    from graphene_py.cli import main
    prepare(main, jobs=2, say=lambda m: None, aot="none")
    g = tg.powerlaw()
    el = tmp_path / "g.el"
    el.write_text("".join(f"{a} {b}\n" for a, b in zip(g.src, g.dst)))
    disks = [str(tmp_path / "d"), str(tmp_path / "e")]
    for d in disks:
        os.mkdir(d)
    tail = tail_edges(str(tmp_path / "tail.bin32"))
    first = [["partition", str(el), "--disks", disks[0], "--name", "pl", "-s", "-q", "--force"],
             ["partition", str(el), "--disks", *disks, "--name", "pl2", "-s", "-q", "--force"],
             ["partition", tail, "--disks", disks[0], "--name", "tail", "-s", "-q", "--force"]]
    runs = []
    for a in ("bfs", "pagerank", "pagerank-pull", "wcc", "kcore", "apsp", "spmv"):
        runs += [["run", a, "-g", "pl", "-q"], ["run", a, "-g", "pl", "-q", "--in-memory"]]
    runs += [["run", "bfs", "-g", "pl2", "-q", "--in-memory"], ["run", "wcc", "-g", "tail", "-q"],
             ["api", "tail", "kcore", PARTIAL_CACHE]]
    key = calibrate.profile_key(disks[0])
    profiled = key is not None and key in calibrate.load_all()     # what prepare planned with
    for home, flip in (("home", False), ("home2", True)):
        env = dict(os.environ, GRAPHENE_HOME=str(tmp_path / home), GRAPHENE_SMALL_EDGES="0")
        env.pop("GRAPHENE_KERNEL_CACHE", None)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        (tmp_path / home).mkdir()
        if profiled != flip and key is not None:
            (tmp_path / home / calibrate.STORE).write_text(json.dumps(
                {key: calibrate.Profile(**SYNTHETIC_PROFILE).to_dict()}))
        todo = first + (runs if not flip else [r for r in runs if "--in-memory" not in r])
        p = subprocess.run([sys.executable, "-c", COMPILES, json.dumps(todo)], env=env,
                           capture_output=True, text=True, timeout=600)
        line = [x for x in p.stderr.splitlines() if x.startswith("COMPILED ")]
        assert p.returncode == 0 and line, p.stderr[-3000:]
        assert json.loads(line[-1][9:]) == [], home


def test_prepare_compiles_modules_that_a_no_bytecode_process_then_loads(tmp_path):
    """prepare's bytecode step writes each module's .pyc even under PYTHONDONTWRITEBYTECODE (as
    this project's CI and many containers run), and a process that may not write bytecode then
    loads the modules from it instead of compiling their source on every start."""
    from graphene_py.cli_prepare import bytecode
    pkg = tmp_path / "pkgx"
    (pkg / "sub").mkdir(parents=True)
    files = ["__init__.py", "a.py", "sub/__init__.py", "sub/b.py"]
    for f in files:
        (pkg / f).write_text("X = 1\n")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(tmp_path))

    def loaded_from_bytecode():
        p = subprocess.run([sys.executable, "-v", "-c", "import pkgx.a, pkgx.sub.b"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr[-2000:]
        return {f for f in files
                if f"code object from '{importlib.util.cache_from_source(str(pkg / f))}'"
                in p.stderr}

    assert loaded_from_bytecode() == set()          # nothing written by that process itself
    assert bytecode(str(pkg))
    assert loaded_from_bytecode() == set(files)
    (pkg / "a.py").write_text("X = 22\n")           # an edited module: its stale .pyc is not used
    assert loaded_from_bytecode() == set(files) - {"a.py"}
    assert bytecode(str(pkg)) and loaded_from_bytecode() == set(files)
