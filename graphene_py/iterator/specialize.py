"""Compiled kernels per (is_active, compute): cached on disk, called without dispatch overhead.

numba specializes `kernels.process_batch` on the user functions it receives as arguments, but a
kernel typed on dispatcher objects cannot be cached across processes, so every process would pay
seconds of LLVM time per algorithm. When both user functions are importable by name (module-level
@njit functions, as in every built-in algorithm) we instead generate a tiny module

    from <module> import <is_active> as is_active
    from <module> import <compute> as compute
    @njit(cache=True, nogil=True)
    def kernel(state, tid, comp, n, ...):   # process_batch's body, user functions as globals

under $XDG_CACHE_HOME/graphene_py/kernels (or GRAPHENE_KERNEL_CACHE) named by a hash of the code
this process imported of kernels.py, atomics.py and the user functions' modules (an edit anywhere
invalidates it; a file edited after this process imported it cannot name a kernel compiled from
the old code), and numba's own on-disk cache makes the next process load it in milliseconds. Functions that
are not importable (defined in __main__ scripts, closures) use process_batch directly.

`Kernel.bind(args)` types one superstep's arguments once and returns the compiled entry point, so
the per-batch calls skip numba's argument dispatch (~20 us -> ~2 us per call).
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import tempfile
import threading
import types

from .. import aot as _aot
from .. import jit
from . import kernels as K

_LOCK = threading.Lock()
_KERNELS = {}


def cache_dir() -> str:
    return jit.kernel_cache_dir()


def _importable(fn):
    """(module name, attribute name, module file) when `fn` can be imported by name, else None.
    A kernel numba has not been imported for yet is looked at as it stands (jit._Lazy)."""
    if type(fn) is jit._Lazy and fn._real is None:
        py = fn.__wrapped__
        if not callable(py) or getattr(py, "__code__", None) is None:
            return None
    else:
        from numba.core.registry import CPUDispatcher
        fn = jit.real(fn)
        py = getattr(fn, "py_func", None)
        if py is None or not isinstance(fn, CPUDispatcher):
            return None
    modname, qual = py.__module__, py.__qualname__
    if not modname or modname == "__main__" or "<" in qual or "." in qual:
        return None
    mod = sys.modules.get(modname)
    if mod is None or getattr(mod, qual, None) not in (fn, getattr(fn, "_real", fn)):
        return None
    path = getattr(mod, "__file__", None)
    if not path or not os.path.exists(path):
        return None
    return modname, qual, path


def _code_bytes(code) -> bytes:
    """A code object's instructions, names and constants, stable across processes (sets sorted:
    marshal would follow hash randomization)."""
    parts = [code.co_name.encode(), code.co_code, repr(code.co_names).encode(),
             repr(code.co_varnames).encode(), repr(code.co_freevars).encode()]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            parts.append(_code_bytes(c))
        elif isinstance(c, frozenset):
            parts.append(repr(sorted(repr(x) for x in c)).encode())
        else:
            parts.append(repr(c).encode())
    return b"\0".join(parts)


def _code_digest(h, mod) -> None:
    """Feed `h` with what this process imported of `mod` (not the file as it is now: a file edited
    after the import would otherwise name a cached kernel compiled from the old code): the code of
    every function in its namespace (numba dispatchers: their Python function; helpers imported from
    other modules included) and the simple constants numba freezes into a kernel."""
    ns = vars(mod)
    for name in sorted(ns):
        if name.startswith("__"):      # __file__, __cached__...: where it came from, not what
            continue
        v = ns[name]
        # a kernel's Python function, whether numba has made it yet or not (jit._Lazy)
        fn = v.__wrapped__ if type(v) is jit._Lazy else getattr(v, "py_func", v)
        code = getattr(fn, "__code__", None)
        if code is not None:
            h.update(name.encode() + b"\0" + _code_bytes(code))
        elif isinstance(v, (bool, int, float, str, bytes)) or v is None:
            h.update(f"{name}={v!r}".encode())


#: the generated modules' form (in their names: a module of an older form is never reused)
GENERATED_VERSION = 6

#: the package whose kernels a generated module takes in whole (inline="always", below)
INLINED_PACKAGE = "graphene_py."

#: the kernels that can be specialized per (is_active, compute): kernels.<name>(is_active, compute, ...)
TEMPLATES = ("process_batch", "serve_kept", "serve_short")


def _import_line(spec, name):
    """The generated module's line binding `name` to the user function `spec` (module, name,
    path): graphene_py's own kernels are taken into the generated kernel whole (jit.inlined:
    numba's inline="always"), a user's are called. A call passes the whole state tuple as
    arguments, flattened (7-9 words per array): delta PageRank's 8 slots made about 60 stores
    per vertex, and its sweep took 0.28 s on kron22 in RAM where a pull superstep with 2 slots
    took 0.20 s (2 threads, the 2-vCPU AMD EPYC guest); inlined, the sweep took 0.18 s
    (BENCHMARKS.md). A user's kernel keeps the call: the inlining was tried on the built-in
    kernels only, and a small kernel's call costs little (LLVM may inline it itself)."""
    if spec[0].startswith(INLINED_PACKAGE):
        return f"from {spec[0]} import {spec[1]} as _{name}\n{name} = inlined(_{name})\n"
    return f"from {spec[0]} import {spec[1]} as {name}\n"


def _generated_source(a, c, template="process_batch"):
    src = inspect.getsource(getattr(K, template))
    head, body = src.split("):\n", 1)
    params = head.split(f"def {template}(", 1)[1]
    params = params.replace("is_active, compute, ", "", 1)
    look = f"{c[0]}.{c[1]}" in K.LOOK_AHEAD       # (kernels.looks_ahead)
    return (
        "# generated by graphene_py.iterator.specialize: do not edit\n"
        "import numpy as np\n"
        "from graphene_py.jit import inlined, njit\n"
        "from graphene_py.iterator.kernels import (AHEAD, keep_chunk, off3, prefetch, unowned,\n"
        "                                          unowned_all)\n"
        + _import_line(a, "is_active") + _import_line(c, "compute") + "\n"
        f"LOOK = {look}\n\n\n"
        "@njit(cache=True, nogil=True)\n"
        f"def kernel({params}):\n{body}"
    )


def kernel_name(a, c, template="process_batch") -> str:
    """The cached kernel's name for importable (is_active, compute) `a`, `c` (see _importable)."""
    from . import atomics
    from ..io import offsets
    h = _aot.sha1()
    for mod in (K, atomics, offsets, sys.modules[a[0]], sys.modules[c[0]]):
        _code_digest(h, mod)
    from ..aot import _numba_version
    look = f"{c[0]}.{c[1]}" in K.LOOK_AHEAD      # (marking a kernel later changes no code object)
    h.update(f"{GENERATED_VERSION}|{template}|{a[0]}.{a[1]}|{c[0]}.{c[1]}|{_numba_version()}|"
             f"{sys.version}|look={look}".encode())
    return f"gk_{h.hexdigest()[:20]}"


def _load_generated(a, c, template="process_batch"):
    name = kernel_name(a, c, template)
    d = cache_dir()
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name + ".py")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".py")
        with os.fdopen(fd, "w") as f:
            f.write(_generated_source(a, c, template))
        os.replace(tmp, path)
    modname = f"graphene_py._kernels.{name}"
    if modname in sys.modules:
        return sys.modules[modname].kernel
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[modname] = mod
    jit.GENERATED[modname] = (template, f"{a[0]}.{a[1]}", f"{c[0]}.{c[1]}")    # preload names
    return mod.kernel


def generated_kernel(template, active, compute):
    """The generated kernel for functions named "module.name" (jit's preload: what was generated
    in an earlier process), or None when either is not imported yet or not a kernel of one."""
    if template not in TEMPLATES:
        return None
    fns = []
    for qual in (active, compute):
        modname, _, name = qual.rpartition(".")
        mod = sys.modules.get(modname)
        fn = getattr(mod, name, None) if mod is not None else None
        spec = _importable(fn) if fn is not None else None
        if spec is None:
            return None
        fns.append(spec)
    with _LOCK:
        return _load_generated(fns[0], fns[1], template)


class Kernel:
    """A per-batch kernel for one (is_active, compute): call(state, tid, rows, n, *fixed); or
    another template's kernel (TEMPLATES), called through `call(*args)`."""

    def __init__(self, is_active, compute, template="process_batch"):
        self.is_active, self.compute = is_active, compute
        self.template = template
        a, c = _importable(is_active), _importable(compute)
        #: importable user functions: the generated kernel's names, its module loaded (written
        #: first if new) only when a call misses the kernels compiled ahead of time: a hit
        #: needs neither (a cold run spent ~25 ms per kernel on the cache folder's lookups)
        self._spec = (a, c) if a and c else None
        self.generic = self._spec is None
        self.disp = getattr(K, template) if self.generic else None
        self._aot_name = (None if self.generic else
                          (jit.GENERATED_PREFIX + template, f"{a[0]}.{a[1]}|{c[0]}.{c[1]}"))
        self._entries = {}
        #: the callable of an earlier bind, by its arguments' types as aot.key_of_value gives
        #: them (a few microseconds of Python, where numba's typeof of a superstep's arguments
        #: took ~20% of a cluster node's small superstep; the key is exactly what numba types)
        self._by_key = {}

    def _dispatcher(self):
        """The kernel's numba dispatcher: the generated module's (loaded now), or the generic
        template when that module cannot be written or imported."""
        if self.disp is None:
            with _LOCK:               # (a helper thread's call may come first)
                if self.disp is None:
                    a, c = self._spec
                    try:
                        disp = _load_generated(a, c, self.template)
                    except (OSError, ImportError, SyntaxError):
                        disp = getattr(K, self.template)
                        self.generic = True
                    self.disp = disp
        return self.disp

    def bind(self, args):
        """args: the full argument tuple of one call (without the user functions for generated
        kernels). Returns a callable taking the same arguments that skips numba's dispatch."""
        args = tuple(args)
        key = _aot.key_of_value(args)
        if key is not None:
            entry = self._by_key.get(key)
            if entry is not None:
                return entry
        entry = self._bind(args)
        if key is not None and getattr(entry, "__func__", None) is not Kernel._slow:
            self._by_key[key] = entry
        return entry

    def _bind(self, args):
        if not self.generic:
            fn = jit.compiled(*self._aot_name, args)
            if fn is not None:             # compiled ahead of time for these types (aot.py)
                return fn
        disp = self._dispatcher()
        full = (self.is_active, self.compute) + args if self.generic else args
        try:
            sig = tuple(disp.typeof_pyval(x) for x in full)
        except Exception:  # noqa: BLE001 - untypable here: let the dispatcher report it
            return self._slow
        entry = self._entries.get(sig)
        if entry is None:
            with _LOCK:
                cres = disp.overloads.get(sig)
                if cres is None:
                    disp(*full[:5], 0, *full[6:]) if self.generic else \
                        disp(*full[:3], 0, *full[4:])
                    cres = disp.overloads.get(sig)
            if cres is None:
                return self._slow
            ep = cres.entry_point
            if self.generic:
                ia, cp = self.is_active, self.compute
                entry = (lambda *a: ep(ia, cp, *a))
            else:
                entry = ep
            self._entries[sig] = entry
        return entry

    def call(self, *args):
        """The kernel on `args` (the user functions apart): the function compiled ahead of time
        for their types, else through numba's dispatch (for any template: bind's compile-only
        call knows process_batch's arguments)."""
        if not self.generic:
            fn = jit.compiled(*self._aot_name, args)
            if fn is not None:
                return fn(*args)
        return self._slow(*args)

    def _slow(self, *args):
        disp = self._dispatcher()
        if self.generic:
            return disp(self.is_active, self.compute, *args)
        return disp(*args)


def kernel_for(is_active, compute, template="process_batch") -> Kernel:
    key = (id(is_active), id(compute), template)
    k = _KERNELS.get(key)
    if k is None or k.is_active is not is_active or k.compute is not compute:
        with _LOCK:
            k = Kernel(is_active, compute, template)
            _KERNELS[key] = k
    return k
