"""A `--device gpu` run's CUDA start, begun while the process is still importing.

A fresh GPU run spends, before any work (tools/profile_gpu_start.py, H200 machine): ~0.3 s
importing numpy, ~0.7 s importing CuPy, ~0.3 s making the CUDA context, ~0.2 s loading this
package's kernels. The context is the driver's own work (cuInit, then device 0's primary
context), so a thread that asks for it through ctypes holds no GIL while it waits: it runs beside
the imports instead of after them. CuPy's runtime later takes that same primary context
(the runtime API uses a device's primary context), so nothing is made twice.

cli.py calls start(sys.argv) before it imports anything else, for `graphene run|bench ...
--device gpu|auto`. `auto` too: at Kronecker scale 25 on the H200 machine, an `auto` run that
chose the GPU spent 0.47 s more outside its trial than the same `--device gpu` run
(BENCHMARKS.md). A run that `auto` keeps on the CPU pays one core's cuInit beside its
imports and a primary context it does not use (given back beside the run once the plan has
chosen the CPU: release_unused); a CPU run (the default) starts nothing. Only
stdlib here (no numpy, no CuPy).

GRAPHENE_GPU_EARLY: `context` (the default) as above; `import` also imports CuPy on that thread
once the context is there; `off` (or 0) starts nothing early.
"""
from __future__ import annotations

import os
import threading
import time

ENV = "GRAPHENE_GPU_EARLY"
MODES = ("context", "import", "off")

#: what start() began: the thread, the mode, and once it ended its seconds and any failure
state: dict = {"thread": None, "mode": None, "seconds": None, "error": None}


def mode() -> str:
    """The mode GRAPHENE_GPU_EARLY asks for (an unknown value: the default)."""
    v = os.environ.get(ENV, "context").strip().lower()
    if v in ("0", "no", "false", "off"):
        return "off"
    return v if v in MODES else "context"


def wanted(argv) -> bool:
    """Whether the command line is a run that may use the GPU: `run` or `bench` with `--device
    gpu` or `--device auto` (or `--device=...`)."""
    args = list(argv[1:]) if argv else []
    if not any(a in ("run", "bench") for a in args):
        return False
    for i, a in enumerate(args):
        if a in ("--device=gpu", "--device=auto") or (
                a == "--device" and i + 1 < len(args) and args[i + 1] in ("gpu", "auto")):
            return True
    return False


def start(argv) -> bool:
    """Begin the CUDA start on a thread of its own when `argv` is a GPU run and a device node
    is there; True when begun. Never raises: the run's own CuPy start reports any problem."""
    m = mode()
    if m == "off" or state["thread"] is not None or not wanted(argv):
        return False
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")):
        return False
    t = threading.Thread(target=_run, args=(m,), name="graphene-cuda-start", daemon=True)
    state.update(thread=t, mode=m)
    t.start()
    return True


def _run(m):
    t0 = time.perf_counter()
    try:
        primary_context()
        if m == "import":
            import cupy  # noqa: F401, WPS433 - the run imports it next anyway
    except Exception as e:  # noqa: BLE001 - reported by the run's own start, if it matters
        state["error"] = f"{type(e).__name__}: {e}"
    finally:
        state["seconds"] = time.perf_counter() - t0


def primary_context(ordinal: int = 0):
    """cuInit, then retain device `ordinal`'s primary context (kept for the process: CuPy's
    runtime uses it). Raises OSError when the driver is missing, RuntimeError on a CUDA error."""
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    for what, rc in (("cuInit", lambda: lib.cuInit(0)),
                     ("cuDeviceGet", lambda: lib.cuDeviceGet(ctypes.byref(dev), ordinal)),
                     ("cuDevicePrimaryCtxRetain",
                      lambda: lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))):
        code = rc()
        if code != 0:
            raise RuntimeError(f"{what} returned CUDA error {code}")
    return ctx.value


def release_unused():
    """--device auto kept the whole run on the CPU: hand the early primary context back on a
    thread of its own (once the start has ended), beside the run. Its teardown otherwise lands in
    the process's exit: the release took 0.054-0.057 s on the H200 machine
    (tools/probe_cuda_context_exit.py). No-op where nothing was begun."""
    t = state["thread"]
    if t is None or state.get("released"):
        return
    state["released"] = True

    def work():
        t.join()
        if state["error"] is not None:
            return
        try:
            import ctypes
            lib = ctypes.CDLL("libcuda.so.1")
            dev = ctypes.c_int()
            if lib.cuDeviceGet(ctypes.byref(dev), 0) == 0:
                lib.cuDevicePrimaryCtxRelease(dev)
        except OSError:
            pass

    threading.Thread(target=work, name="graphene-cuda-release", daemon=True).start()


def seconds():
    """How long the early start took (None while it runs, or when none was begun)."""
    return state["seconds"]
