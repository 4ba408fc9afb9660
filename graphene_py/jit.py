"""numba, made ready once per process before any kernel runs.

numba initializes its compilation target on the first call of any jitted function: it imports
its typing and lowering registries, and with them `numba.np.arraymath`, which imports
`scipy.linalg` (when SciPy is installed) only to learn whether np.dot can use BLAS. That costs
0.15-0.25 s on a warm disk and ~100 MB of reads on a cold one, in every process, before the first
superstep. No graphene_py kernel uses BLAS (np.dot/np.linalg), so `ready(blas=False)`, which the
CLI calls, initializes the target without SciPy; the Python API leaves numba's default alone
(a user's own kernels may want np.dot).
"""
from __future__ import annotations

import sys
import threading
import time

_LOCK = threading.Lock()
_READY = {"seconds": None}


def ready(blas: bool = True) -> float:
    """Import numba and initialize its CPU target (idempotent). Returns the seconds it took (0.0
    when it was ready already)."""
    with _LOCK:
        if _READY["seconds"] is not None:
            return 0.0
        t0 = time.perf_counter()
        key = "scipy.linalg.cython_blas"
        hide = not blas and key not in sys.modules and "numba.np.arraymath" not in sys.modules
        if hide:
            sys.modules[key] = None          # numba's BLAS probe then finds no SciPy BLAS
        try:
            from numba.core.registry import cpu_target
            cpu_target.target_context.refresh()
            cpu_target.typing_context.refresh()
        finally:
            if hide:
                del sys.modules[key]
        _READY["seconds"] = time.perf_counter() - t0
        return _READY["seconds"]
