"""Kernels compiled ahead of time: a fresh process whose kernels were all built into the
extension module imports neither numba nor llvmlite (issue 11, item 1).

A cold `graphene run` spent 0.4-0.9 s importing numba, most of it reading llvmlite's 178 MB
library from the disk, and then loaded its cached kernels (jit.py). `graphene prepare --aot`
(`make install` runs it) compiles every kernel that the built-in commands used in earlier runs
(prepare's own runs and the per-algorithm lists of jit.save_preload) into one extension module
with numba's ahead-of-time compiler (numba.pycc), machine code for this CPU, the GIL released
in every call as numba's nogil kernels do. A process then imports that module (a few
milliseconds) and a kernel's call (jit._Lazy.__call__, iterator/specialize.Kernel.bind) takes
the compiled function whose argument types are exactly those of the call. A call that no
compiled function fits (another signature, a kernel that was never built, a user's kernel)
imports numba and runs as before: the result is never different, only the start slower.

The types must match exactly: the compiled functions convert their arguments without checking
them (a wrong dtype would be read as the wrong type). `key_of_value` gives a call's argument
types in the same form as `key_of_type` gives a numba signature's (array: dtype, ndim, layout,
read-only, aligned; numba's rules for Python scalars), and anything it does not know (records,
lists, objects, byte-swapped arrays) is None: no compiled function, numba's dispatch.

A module is only used while it fits what built it: its file is named by a hash of the package's
source files (size and modification time of each), numba's version, Python's and the CPU's model
and flags. Any edit of the package, or another machine, finds no module and runs as before.
`GRAPHENE_AOT=0` turns it off.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import pickle
import sys
import tempfile
import threading
import time

import numpy as np

from . import jit

_LOCK = threading.Lock()
_STATE = {"table": None, "module": None, "key": None, "hits": 0}
#: numba's scalar types by numpy dtype kind (the only element types compiled functions take)
_KINDS = "biufc"


# -- argument types, without numba ------------------------------------------------------------

def key_of_value(v):
    """The type numba would give `v` as an argument, as a hashable key (key_of_type's form), or
    None when it is not one the compiled functions take."""
    t = type(v)
    if t is bool:
        return ("s", "bool")
    if t is int:
        return ("s", "int64") if -(1 << 63) < v < (1 << 63) else None
    if t is float:
        return ("s", "float64")
    if t is tuple:
        ks = tuple(key_of_value(x) for x in v)
        return None if None in ks else ("t",) + ks
    if isinstance(v, np.ndarray):
        if isinstance(v, np.ma.MaskedArray):
            return None
        dt = v.dtype
        if dt.fields is not None or dt.kind not in _KINDS or not dt.isnative:
            return None
        f = v.flags
        layout = "C" if f.c_contiguous else ("F" if f.f_contiguous else "A")
        return ("a", dt.name, v.ndim, layout, not f.writeable, bool(f.aligned))
    if v is None:
        return ("n",)
    if isinstance(v, np.generic):
        dt = v.dtype
        if dt.kind in _KINDS and dt.isnative and dt.fields is None:
            return ("s", dt.name)
    return None


def key_of_type(t):
    """A numba type as key_of_value's key (None: not a type compiled functions take)."""
    from numba.core import types
    from numba.np.numpy_support import as_dtype
    scalar = (types.Boolean, types.Integer, types.Float, types.Complex)
    if isinstance(t, types.Array):
        if not isinstance(t.dtype, scalar):
            return None
        return ("a", np.dtype(as_dtype(t.dtype)).name, int(t.ndim), t.layout, not t.mutable,
                bool(t.aligned))
    if isinstance(t, scalar):
        return ("s", np.dtype(as_dtype(t)).name)
    if isinstance(t, types.BaseTuple):
        ks = tuple(key_of_type(x) for x in t)
        return None if None in ks else ("t",) + ks
    if isinstance(t, types.NoneType):
        return ("n",)
    return None


def _tuples(x):
    """JSON's lists back into the tuples of a key."""
    return tuple(_tuples(y) for y in x) if isinstance(x, list) else x


# -- which module fits this process ----------------------------------------------------------

def _cpu() -> str:
    """This CPU's model and feature flags (what `target_cpu = host` compiled for)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read(1 << 16)
    except OSError:
        text = ""
    want = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        k = k.strip()
        if k in ("vendor_id", "model name", "flags") and k not in want:
            want[k] = v.strip()
    import platform
    return f"{platform.machine()}|{want.get('vendor_id')}|{want.get('model name')}|" \
           f"{' '.join(sorted(want.get('flags', '').split()))}"


def _numba_version() -> str:
    from importlib import metadata
    try:
        return metadata.version("numba")
    except metadata.PackageNotFoundError:
        return "none"


def build_key(root: str = None) -> str:
    """A hash of what a compiled module must match: the package's sources (size and mtime of
    each .py file under `root`, by default graphene_py's folder), numba's and Python's versions,
    this CPU."""
    h = hashlib.sha1()
    root = root or os.path.dirname(os.path.abspath(__file__))
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                h.update(f"{os.path.relpath(path, root)}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    h.update(f"{_numba_version()}|{sys.version}|{_cpu()}".encode())
    return h.hexdigest()[:20]


def lib_dir() -> str:
    """Where compiled modules live: `aot/` beside the generated kernels (jit.kernel_cache_dir)."""
    return os.path.join(os.path.dirname(jit.kernel_cache_dir()), "aot")


def _paths(key):
    """(module name stem, unused, manifest path) of the modules built for key."""
    name = f"_gp_aot_{key}"
    return name, None, os.path.join(lib_dir(), name + ".json")


def enabled() -> bool:
    return os.environ.get("GRAPHENE_AOT", "1") != "0"


def table() -> dict:
    """{(module, qualname): {argument key: compiled function}} of the module that fits this
    process ({} when none does, or when turned off). Loaded once per process."""
    tab = _STATE["table"]
    if tab is not None:
        return tab
    with _LOCK:
        if _STATE["table"] is not None:
            return _STATE["table"]
        tab = {}
        if enabled():
            try:
                tab = _load(build_key())
            except Exception:      # noqa: BLE001 - a damaged module: numba's path, as without
                tab = {}
        _STATE["table"] = tab
        return tab


def _load(key) -> dict:
    _, _, manifest = _paths(key)
    if not os.path.exists(manifest):
        return {}
    with open(manifest) as f:
        m = json.load(f)
    if m.get("key") != key:
        return {}
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    mods, tab = {}, {}
    for e in m["entries"]:
        part = e["part"]
        if part not in mods:
            so = os.path.join(lib_dir(), part + suffix)
            loader = importlib.machinery.ExtensionFileLoader(part, so)
            spec = importlib.util.spec_from_file_location(part, so, loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
            mods[part] = mod
        fn = getattr(mods[part], e["symbol"], None)
        if fn is not None:
            rec = (e["module"], e["qualname"], e["sigstr"], e["sig"])
            tab.setdefault((e["module"], e["qualname"]), {})[_tuples(e["args"])] = (fn, rec)
    _STATE["module"], _STATE["key"] = mods, key
    return tab


def lookup(module: str, qualname: str, args):
    """The compiled function for a call of kernel `module.qualname` on `args` (a tuple), or None.
    A generated kernel's module (iterator/specialize.py) is named by what it specializes."""
    tab = _STATE["table"]
    if tab is None:
        tab = table()
    if not tab:
        return None
    if module.startswith(jit.GENERATED_PREFIX) and "|" not in qualname:
        spec = jit.GENERATED.get(module)
        if spec is None:
            return None
        module, qualname = jit.GENERATED_PREFIX + spec[0], spec[1] + "|" + spec[2]
    fns = tab.get((module, qualname))
    if not fns:
        return None
    got = fns.get(key_of_value(args))
    if got is None:
        return None
    _STATE["hits"] += 1
    fn, rec = got
    if rec[:3] not in jit._USED:       # a kernel this run used, as numba's loads are recorded
        jit._USED[rec[:3]] = rec[3]      # (the run's preload list keeps it: jit.save_preload)
    return fn


def count() -> int:
    """Compiled functions in the module that fits this process."""
    return sum(len(v) for v in table().values())


def hits() -> int:
    """Calls served by compiled functions in this process."""
    return _STATE["hits"]


def active() -> bool:
    """Whether a compiled module fits this process (loading it if not done yet)."""
    return bool(table())


# -- building ---------------------------------------------------------------------------------

#: python -c PART ENTRIES.json NAME FOLDER: one share of the kernels compiled in its own process
PART = "import sys; from graphene_py.aot import _compile_part; _compile_part(*sys.argv[1:4])"


def build(entries, jobs: int = 2, say=None) -> dict:
    """Compile the kernels `entries` name ([module, qualname, pickled signature], as jit.used()
    and the preload lists hold them) into the modules for this process's build_key(), in `jobs`
    processes at once (one module each). Entries whose kernel or types cannot be compiled ahead
    are skipped, and so is a share whose compilation fails (its kernels stay numba's). Returns
    {"path", "kernels", "skipped", "failed", "seconds"}."""
    import subprocess
    t0 = time.perf_counter()
    jit.ready()
    from numba.core import types
    from .iterator.preload import _dispatcher, _import_modules

    key = build_key()
    os.makedirs(lib_dir(), exist_ok=True)
    _import_modules(entries)
    seen, todo, skipped = set(), [], 0
    for mod, qual, sig in entries:
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
    name, so, manifest = _paths(key)
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
                 build_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        listed, failed, made = [], 0, []
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
            suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
            final = os.path.join(lib_dir(), pj + suffix)
            os.replace(os.path.join(build_dir, pj + suffix), final)
            made.append(final)
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
    return {"path": manifest, "kernels": len(listed), "skipped": skipped, "failed": failed,
            "seconds": time.perf_counter() - t0}


#: builds kept in lib_dir (each checkout or edit of the package has its own key): the newest
KEEP_BUILDS = 4


def _prune(keep: int) -> None:
    """Delete the modules of all but the `keep` newest builds (a process using one keeps its
    mapping of the file)."""
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
    """One share of build(): its kernels into module `name` in out_dir, and name.out.json
    listing what it exports (module, qualname, argument key, symbol)."""
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
    listed = []
    for i, (mod, qual, b64, argkey) in enumerate(entries):
        disp = jit.real(_dispatcher(mod, qual))
        sig = tuple(pickle.loads(base64.b64decode(b64)))
        disp.compile(sig)
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
        json.dump(listed, f)
