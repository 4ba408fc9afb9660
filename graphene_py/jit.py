"""numba, made ready once per process before any kernel runs.

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
"""
from __future__ import annotations

import sys
import threading
import time

_LOCK = threading.Lock()
_READY = {"seconds": None}
_PATCH = {"installed": False, "fallbacks": 0}


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
        # what numba's own load_overload does, less the refresh: the runtime (NRT) must be up
        # before machine code that calls it is linked in
        try:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:      # noqa: BLE001 - never worse than numba's own path
            _PATCH["fallbacks"] += 1
            return orig(self, sig, target_context)

    load_overload.__doc__ = orig.__doc__
    load_overload._graphene_lazy = True
    cls.load_overload = load_overload
    _PATCH["installed"] = True
    return True


def ready(blas: bool = True) -> float:
    """Import numba and make its CPU target ready to load cached kernels (idempotent). Returns the
    seconds it took (0.0 when it was ready already)."""
    with _LOCK:
        if _READY["seconds"] is not None:
            return 0.0
        t0 = time.perf_counter()
        from numba.core.registry import cpu_target
        if _install_locked():
            cpu_target.target_context        # noqa: B018 - creates the code generator
        else:
            _refresh(cpu_target, blas)
        _READY["seconds"] = time.perf_counter() - t0
        return _READY["seconds"]


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


def fallbacks() -> int:
    """How many cached loads needed numba's own path (a refresh) in this process."""
    return _PATCH["fallbacks"]
