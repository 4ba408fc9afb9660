"""Kernels compiled ahead of time: a fresh process whose kernels were all built into the
extension module imports neither numba nor llvmlite (issue 11, item 1).

A cold `graphene run` spent 0.4-0.9 s importing numba, most of it reading llvmlite's 178 MB
library from the disk, and then loaded its cached kernels (jit.py). `graphene prepare --aot`
(`make install` runs it) compiles every kernel that the built-in commands used in earlier runs
(prepare's own runs and, with `--aot all`, the per-algorithm lists of jit.save_preload) into
extension modules (one per compiling process) with numba's ahead-of-time compiler (numba.pycc),
machine code for this CPU, the GIL released in every call as numba's nogil kernels do. A process then imports those modules (a few
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

import functools
import importlib.machinery
import importlib.util
import json
import os
import sys
import threading

import numpy as np

from . import startfiles

try:    # CPython's own SHA-1: hashlib would load OpenSSL's libcrypto first (15-18 ms of a cold
    from _sha1 import sha1      # start here, against ~1 ms), for the same digests
except ImportError:             # (a Python built without it)
    from hashlib import sha1


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
        ks = [key_of_value(x) for x in v]
        return None if None in ks else ("t", *ks)
    if t is np.ndarray or t is np.memmap:      # (no subclass numba types otherwise: np.matrix...)
        name = _dtype_name(v.dtype)
        if name is None:
            return None
        f = v.flags
        layout = "C" if f.c_contiguous else ("F" if f.f_contiguous else "A")
        return ("a", name, v.ndim, layout, not f.writeable, bool(f.aligned))
    if v is None:
        return ("n",)
    if isinstance(v, np.ndarray):
        return None
    if isinstance(v, np.generic):
        dt = v.dtype
        if dt.kind in _KINDS and dt.isnative and dt.fields is None:
            return ("s", dt.name)
    return None


_DTYPE_NAMES = {}


def _dtype_name(dt):
    """The name of an element type compiled functions take (None: not one), remembered per
    dtype: numpy's dtype.name is Python code, 2.7 us a call here, and a kernel call's key asked
    it once per array (11 arrays: 30 of the key's 35 us, on every call of every kernel)."""
    try:
        return _DTYPE_NAMES[dt]
    except KeyError:
        pass
    name = dt.name if dt.fields is None and dt.kind in _KINDS and dt.isnative else None
    if len(_DTYPE_NAMES) < 256:
        _DTYPE_NAMES[dt] = name
    return name


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


@functools.lru_cache(maxsize=1)
def _numba_version() -> str:
    """numba's installed version, without importing numba: where its package is and the text of
    its generated `_version.py`. (importlib.metadata.version scans every distribution of
    site-packages: 76-86 ms of a cold process here, against 3-4 ms.)"""
    try:
        spec = importlib.util.find_spec("numba")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return "none"
    folder = os.path.dirname(spec.origin)
    for name in ("_version.py", "__init__.py"):
        try:
            with open(os.path.join(folder, name), "rb") as f:
                return f"{folder}|{sha1(f.read()).hexdigest()}"
        except OSError:
            continue
    return folder


def build_key(root: str = None) -> str:
    """A hash of what a compiled module must match: the package's sources (size and mtime of
    each .py file under `root`, by default graphene_py's folder), numba's and Python's versions,
    this CPU."""
    h = sha1()
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


#: generated kernels' modules (iterator/specialize.py); named in preload lists and here as
#: GENERATED_PREFIX + template, with "is_active|compute" as their qualname
GENERATED_PREFIX = "graphene_py._kernels."


#: where generated kernels live (startfiles.py: stdlib only, the `graphene` command's first step)
kernel_cache_dir = startfiles.kernel_cache_dir


def lib_dir() -> str:
    """Where compiled modules live: `aot/` beside the generated kernels (kernel_cache_dir)."""
    return os.path.join(os.path.dirname(kernel_cache_dir()), "aot")


def _paths(key):
    """(the modules' name stem, the manifest's path) of the build for key."""
    name = f"_gp_aot_{key}"
    return name, os.path.join(lib_dir(), name + ".json")


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
        if enabled() and os.path.isdir(lib_dir()):    # (no build: no hash of the sources)
            try:
                tab = _load(build_key())
            except Exception:      # noqa: BLE001 - a damaged module: numba's path, as without
                tab = {}
        _STATE["table"] = tab
        return tab


def _load(key) -> dict:
    _, manifest = _paths(key)
    if not os.path.exists(manifest):
        return {}
    with open(manifest) as f:
        m = json.load(f)
    startfiles.note(manifest)
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


def lookup(module: str, qualname: str, args, generated=None, used=None):
    """The compiled function for a call of kernel `module.qualname` on `args` (a tuple), or None.
    A generated kernel's module (iterator/specialize.py) is named by what it specializes
    (`generated`: module name -> (template, is_active, compute), jit.GENERATED). A hit is
    recorded in `used` (jit's record of the kernels a run used, for its preload list)."""
    tab = _STATE["table"]
    if tab is None:
        tab = table()
    if not tab:
        return None
    if module.startswith(GENERATED_PREFIX) and "|" not in qualname:
        spec = (generated or {}).get(module)
        if spec is None:
            return None
        module, qualname = GENERATED_PREFIX + spec[0], spec[1] + "|" + spec[2]
    fns = tab.get((module, qualname))
    if not fns:
        return None
    got = fns.get(key_of_value(args))
    if got is None:
        return None
    _STATE["hits"] += 1
    fn, rec = got
    if used is not None and rec[:3] not in used:   # a kernel this run used, as numba's loads
        used[rec[:3]] = rec[3]                     # are (its preload list keeps it)
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
