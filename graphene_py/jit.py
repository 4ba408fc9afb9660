"""numba, imported when first needed and made ready once per process before any kernel runs.

Every graphene_py kernel is compiled with `cache=True`, so a process after the first one loads
machine code from numba's on-disk cache instead of compiling. numba itself does not take that
short path: before loading a cached function it "refreshes" its CPU target, importing and
installing every typing and lowering registry (`numba.cpython.*`, `numba.np.arraymath` and with
it `scipy.linalg` to learn whether np.dot may use BLAS, the random generators, typed containers,
...). Those registries are what *compiling* needs; loading compiled code needs only the target's
code generator and numba's runtime (NRT). The refresh costs ~0.3 s of CPU in every process on
this project's 2-vCPU machine, ~0.7 s on a cold page cache (measured: BENCHMARKS.md, "No
per-process tax").

`ready()` therefore makes the target ready to *load*: it creates the code generator, and
installs `lazy_refresh()`, which replaces numba's cache load with one that initializes the
runtime and loads, without the refresh. Anything that really compiles (a cache miss, a new
specialization, a user's own kernel) still refreshes first: numba's compiler does that itself
(`CompilerBase.__init__`), and so does its lowering on the first unknown function. Where a
numba version lacks the internals the short path uses, or a load without the refresh fails, the
refresh is done as numba would and the load retried, so the result is never different, only
slower.

`ready(blas=False)` (the CLI) also keeps SciPy's BLAS probe out of a refresh that does happen in
ready() on the fallback path. No graphene_py kernel uses np.dot / np.linalg.

numba itself is imported only when a kernel is first needed: graphene_py's modules decorate with
`jit.njit` / `jit.intrinsic`, which stand in for numba's objects until something calls one (or
`ready()` runs); `materialize()` then imports numba, makes them all and points the modules'
globals at the real ones. A command that runs no kernel (`graphene info`, `--help`, a small graph
on the numpy path of algos/small.py) never imports numba (0.3-0.9 s of a fresh process here).

Kernels used last time, loaded before the first trial. Loading one cached kernel still costs
5-60 ms (reading and unpickling it, linking its machine code, the first parallel one starting
numba's thread pool), ~0.15-0.25 s for the 15-25 kernels of one run, which a fresh process paid
inside its first trial. Every graphene_py kernel this process loads or compiles is recorded
here (module, name and numba signature); `graphene run` saves the list per algorithm, its flags
and kind of dataset (`save_preload`), and the next process loads those kernels from numba's
cache on a thread of its own while the main thread opens the dataset (iterator/preload.py).
"""
from __future__ import annotations

import base64
import json
import os
import pickle
import sys
import tempfile
import threading
import time

from . import aot as _aot

_LOCK = threading.RLock()
_READY = {"seconds": None}
_PATCH = {"installed": False, "fallbacks": 0, "saved": False}
#: (module, qualname, pickled signature) of every graphene_py kernel loaded or compiled here
_USED = {}
#: (id of a dispatcher's cache, signature) -> its compiled overload, loaded by prepare() and not
#: yet asked for by the dispatcher (kept alive with the dispatcher: module-level kernels)
_PREPARED = {}
#: generated kernels' modules (iterator/specialize.py); recorded as GENERATED_PREFIX + template
GENERATED_PREFIX = _aot.GENERATED_PREFIX
#: generated module name -> (template, is_active "module.name", compute "module.name"), filled
#: by iterator/specialize.py as it loads them
GENERATED = {}
#: most kernels kept in one preload list
PRELOAD_MAX = 96


# -- numba imported when a kernel is first needed ------------------------------------------------

#: every _Lazy made before numba was imported, in the order they were made
_LAZY = []
_MAT = {"done": False, "seconds": 0.0}
_MAT_LOCK = _LOCK        # one lock: ready() makes the kernels while it holds it


class _Lazy:
    """A numba object (an @njit dispatcher, an intrinsic) that is made when numba is first needed:
    importing numba costs 0.3-0.9 s of a fresh process, which a command that compiles nothing (a
    small graph's whole-graph path, `graphene info`, `--help`) should not pay. Calling one, or
    reading any attribute numba's dispatchers have, imports numba and makes every pending object
    (materialize()); the module globals that named them then name the real objects."""

    def __init__(self, factory, like=None):
        self._factory = factory
        self._real = None
        self.__wrapped__ = like
        self.__name__ = getattr(like, "__name__", "kernel")
        self.__qualname__ = getattr(like, "__qualname__", self.__name__)
        self.__module__ = getattr(like, "__module__", __name__)
        self.__doc__ = getattr(like, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if self._real is None and not kwargs:       # compiled ahead of time (aot.py), if so
            fn = compiled(self.__module__, self.__qualname__, args)
            if fn is not None:
                return fn(*args)
        return real(self)(*args, **kwargs)

    def __copy__(self):                 # like a function: copies are the object itself
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):               # pickled as the numba object it stands for
        return real(self).__reduce__()

    def __getattr__(self, name):
        # only what numba's objects have: never our own fields (missing only on an instance not
        # yet initialized, as copy and pickle make one) nor protocol dunders
        if name in ("_factory", "_real") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(real(self), name)

    @property
    def _numba_type_(self):
        # numba asks this first when it types a value: a stand-in left in a user's module (`from
        # graphene_py.iterator import atomic_add` before any kernel ran) or in a container types
        # as the object it stands for (a dispatcher; an intrinsic, through the typing context)
        from numba.core.registry import cpu_target
        obj, ctx = real(self), cpu_target.typing_context
        try:
            return ctx.resolve_value_type(obj)
        except Exception:      # noqa: BLE001 - made after the context's last refresh
            ctx.refresh()        # (an intrinsic registers itself there)
            return ctx.resolve_value_type(obj)

    def __repr__(self):
        state = "made" if self._real is not None else "pending numba"
        return f"<{self.__module__}.{self.__qualname__} ({state})>"


def lazy(factory, like=None):
    """`factory()` (which imports numba) now when numba is in use, else a _Lazy standing for it."""
    if _MAT["done"]:
        return factory()
    lz = _Lazy(factory, like)
    with _MAT_LOCK:
        if _MAT["done"]:
            return factory()
        _LAZY.append(lz)
    return lz


def njit(*args, **options):
    """numba.njit, made when numba is first needed (`@njit`, `@njit(cache=True, ...)`)."""
    if len(args) == 1 and callable(args[0]) and not options:
        fn = args[0]
        return lazy(lambda: __import__("numba").njit(fn), fn)
    if args:
        raise TypeError("graphene_py.jit.njit takes options only (no explicit signatures)")

    def deco(fn):
        return lazy(lambda: __import__("numba").njit(**options)(fn), fn)
    return deco


def inlined(fn):
    """A kernel as numba's inline="always" makes it, from its Python function (an @njit kernel,
    made or not yet): numba puts its body into each kernel calling it, instead of a call
    (iterator/specialize.py's generated kernels)."""
    py = fn.__wrapped__ if type(fn) is _Lazy else getattr(fn, "py_func", fn)
    return njit(inline="always")(py)


def intrinsic(fn):
    """numba.extending.intrinsic, made when numba is first needed."""
    def make():
        from numba.extending import intrinsic as _intrinsic
        return _intrinsic(fn)
    return lazy(make, fn)


def real(obj):
    """The numba object a _Lazy stands for (importing numba and making it); obj itself otherwise."""
    if type(obj) is not _Lazy:
        return obj
    if obj._real is None:
        materialize()
    return obj._real


def materialized() -> bool:
    """Whether numba has been imported for graphene_py's kernels in this process."""
    return _MAT["done"]


def materialize() -> float:
    """Import numba and make every pending kernel and intrinsic, then point the graphene_py
    modules' globals at them (numba resolves a kernel's callees through its module's globals).
    Idempotent; returns the seconds it took (0.0 when done before)."""
    if _MAT["done"]:
        return 0.0
    with _MAT_LOCK:
        if _MAT["done"]:
            return 0.0
        t0 = time.perf_counter()
        _install_locked()           # their cached code loads without the registries' refresh
        for lz in _LAZY:
            lz._real = lz._factory()
        _MAT["done"] = True
        for name, mod in list(sys.modules.items()):
            if mod is None or not (name == "graphene_py" or name.startswith("graphene_py.")):
                continue
            d = getattr(mod, "__dict__", None) or {}
            for k, v in list(d.items()):
                if type(v) is _Lazy:
                    d[k] = v._real
        _LAZY.clear()
        _MAT["seconds"] = time.perf_counter() - t0
        return _MAT["seconds"]


def lazy_refresh() -> bool:
    """Make numba load cached functions without refreshing its target's registries (see the
    module's text). Idempotent, process-wide. Returns False, changing nothing, when this numba
    lacks what the short path needs."""
    with _LOCK:
        return _install_locked()


def _install_locked() -> bool:
    if _PATCH["installed"]:
        return True
    try:
        from numba.core import caching
        from numba.core.runtime import rtsys
    except ImportError:
        return False
    cls = getattr(caching, "Cache", None)
    orig = getattr(cls, "load_overload", None)
    if (orig is None or not hasattr(cls, "_load_overload")
            or not hasattr(cls, "_guard_against_spurious_io_errors")
            or not hasattr(rtsys, "initialize")):
        return False

    def load_overload(self, sig, target_context):
        # what numba's own load_overload does, less the refresh (_load)
        _record(getattr(self, "_py_func", None), sig)
        ready = _PREPARED.pop(_prepared_key(self, sig), None)
        if ready is not None:           # loaded ahead by prepare(): this run asks for it now
            return ready
        try:
            return _load(self, sig, target_context)
        except Exception:      # noqa: BLE001 - never worse than numba's own path
            _PATCH["fallbacks"] += 1
            return orig(self, sig, target_context)

    load_overload.__doc__ = orig.__doc__
    cls.load_overload = load_overload
    _PATCH["installed"] = True
    return True


def _load(cache, sig, target_context):
    """The compiled overload for sig from cache's files (None when they lack it), without the
    refresh: the runtime (NRT) must be up before machine code that calls it is linked in."""
    from numba.core.runtime import rtsys
    rtsys.initialize(target_context)
    with cache._guard_against_spurious_io_errors():
        return cache._load_overload(sig, target_context)


def ready(blas: bool = True) -> float:
    """Import numba and make its CPU target ready to load cached kernels (idempotent). Returns the
    seconds it took (0.0 when it was ready already)."""
    with _LOCK:
        if _READY["seconds"] is not None:
            return 0.0
        t0 = time.perf_counter()
        materialize()
        from numba.core.registry import cpu_target
        if _install_locked():
            cpu_target.target_context        # noqa: B018 - creates the code generator
        else:
            _refresh(cpu_target, blas)
        _READY["seconds"] = time.perf_counter() - t0
        return _READY["seconds"]


def compiled(module: str, qualname: str, args):
    """The function compiled ahead of time (aot.py) for a call of kernel module.qualname on the
    tuple `args`, or None (numba's dispatch then)."""
    return _aot.lookup(module, qualname, args, GENERATED, _USED)


def ready_for_run() -> float:
    """Before a run's graph state (the CLI): the module of kernels compiled ahead of time, when
    one fits this process (aot.py: numba is then imported only if a call needs a kernel it
    lacks), else numba made ready (ready(blas=False)). Returns the seconds it took."""
    if not _MAT["done"]:
        t0 = time.perf_counter()
        if _aot.active():
            return time.perf_counter() - t0
    return ready(blas=False)


def import_seconds() -> float:
    """What importing numba and making the kernels took in this process (materialize())."""
    return _MAT["seconds"]


def seconds() -> float:
    """What ready() took in this process (0.0 before it ran)."""
    return _READY["seconds"] or 0.0


def _refresh(cpu_target, blas):
    """numba's full target initialization (what it does before compiling)."""
    key = "scipy.linalg.cython_blas"
    hide = not blas and key not in sys.modules and "numba.np.arraymath" not in sys.modules
    if hide:
        sys.modules[key] = None          # numba's BLAS probe then finds no SciPy BLAS
    try:
        cpu_target.target_context.refresh()
        cpu_target.typing_context.refresh()
    finally:
        if hide:
            del sys.modules[key]


def _prepared_key(cache, sig):
    try:
        return (id(cache), tuple(sig))
    except TypeError:           # a Signature object (explicitly typed @njit): never prepared
        return (id(cache), None)


def prepare(disp, sig) -> bool:
    """Load disp's overload for sig from numba's on-disk cache now (the expensive part: reading,
    unpickling, linking the machine code) and keep it until the dispatcher itself asks for it:
    the run's first call then takes it at once (and only then is it recorded as used, so a stale
    preload list shrinks to what runs use). True when it is ready (or already installed); False,
    doing nothing, when the cache lacks it: compiling stays with the thread that needs it."""
    from numba.core.compiler_lock import global_compiler_lock
    cache = disp._cache
    key = _prepared_key(cache, sig)
    with global_compiler_lock:
        if disp.overloads.get(tuple(sig)) is not None or key in _PREPARED:
            return True
        cres = _load(cache, sig, disp.targetctx)
        if cres is None:
            return False
        _PREPARED[key] = cres
        return True


def installed() -> bool:
    """Whether cached kernels load without the refresh in this process (lazy_refresh())."""
    return _PATCH["installed"]


def fallbacks() -> int:
    """How many cached loads needed numba's own path (a refresh) in this process."""
    return _PATCH["fallbacks"]


# -- kernels used last time, loaded before the first trial ---------------------------------------

def _record(py_func, sig):
    """Note a graphene_py kernel this process loads or compiles (numba asks its cache first)."""
    mod = getattr(py_func, "__module__", None) or ""
    qual = getattr(py_func, "__qualname__", "")
    if not mod.startswith("graphene_py") or "<" in qual:
        return
    if mod.startswith(GENERATED_PREFIX):     # named by what it specializes, not by its hash
        spec = GENERATED.get(mod)          # filled by iterator/specialize.py
        if spec is None:
            return
        mod, qual = GENERATED_PREFIX + spec[0], spec[1] + "|" + spec[2]
    try:
        key = (mod, qual, str(tuple(sig)))     # pickles differ between processes (type codes)
        if key not in _USED:
            _USED[key] = base64.b64encode(pickle.dumps(tuple(sig))).decode("ascii")
    except Exception:      # noqa: BLE001 - an unpicklable signature is just not preloaded
        return


def used() -> list:
    """[module, qualname, pickled signature, signature as text] of every graphene_py kernel
    loaded, compiled or run compiled ahead of time so far, in the order of their first use."""
    return [[m, q, p, s] for (m, q, s), p in _USED.items()]


kernel_cache_dir = _aot.kernel_cache_dir


def preload_path(key: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)
    return os.path.join(os.path.dirname(kernel_cache_dir()), "preload", safe + ".json")


def save_preload(key: str) -> None:
    """Store the kernels this process loaded or compiled under `key`, replacing what was there
    (at most PRELOAD_MAX). Only the first save of a process does it: one `graphene run` is one
    process, and a process that ran several things (tests, a script calling the CLI's main)
    holds kernels of all of them. Best effort: an unwritable cache folder only costs time."""
    if not _USED or _PATCH["saved"]:
        return
    _PATCH["saved"] = True
    path = preload_path(key)
    try:
        entries = used()[:PRELOAD_MAX]
        if entries == read_preload(path):
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(entries, f)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    except (OSError, ValueError):
        pass


def read_preload(path) -> list:
    """The [module, qualname, signature] entries stored at path ([] when none or damaged)."""
    try:
        with open(path) as f:
            entries = json.load(f)
    except (OSError, ValueError):
        return []
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, list) and len(e) in (3, 4)
            and all(isinstance(x, str) for x in e)]


#: what importing numba and making its target ready adds to a process (RSS; measured on the
#: 2-vCPU machine: BFS on a 65 k-vertex graph peaked at 196 MiB with numba, 105 without)
NUMBA_IMPORT_BYTES = 112 << 20


def numba_margin() -> int:
    """Memory a run must keep for importing numba later: 0 once numba is in; else
    NUMBA_IMPORT_BYTES. A run on kernels compiled ahead of time (aot.py) may still meet one they
    lack (another signature, a path the compiled runs never took) and import numba mid-run, and
    nothing says beforehand that it will not: its last run of the same kind took other paths
    at another budget (a read-through cache against the whole graph in RAM)."""
    return 0 if _MAT["done"] else NUMBA_IMPORT_BYTES


@intrinsic
def prefetch(typingctx, ary, idx):
    """A hint that ary[idx] will be read soon (LLVM's llvm.prefetch: read, keep in every cache
    level); never faults, whatever idx is. A loop over a list that reads state[list[i]] runs
    1.5-1.7x faster here when it asks for the element of a few dozen entries ahead: the random
    reads overlap instead of waiting one by one."""
    from numba import types
    if not (isinstance(ary, types.Array) and ary.ndim == 1 and isinstance(idx, types.Integer)):
        return None
    sig = types.void(ary, idx)

    def codegen(context, builder, signature, args):
        from llvmlite import ir
        arr, i = args
        a = context.make_array(signature.args[0])(context, builder, arr)
        i = context.cast(builder, i, signature.args[1], types.intp)
        ptr = builder.gep(a.data, [i])        # no bounds check: a prefetch never faults
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]))
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen
