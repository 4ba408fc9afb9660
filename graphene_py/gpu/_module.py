"""Loading CuPy and compiling kernels.cu once per device (cupy.RawModule, NVRTC).

CuPy is imported lazily: importing graphene_py.gpu never fails on a machine without CuPy or a GPU.
"""
from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_modules: dict = {}

KERNEL_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels.cu")

#: Template instantiations compiled from kernels.cu (RawModule name_expressions).
NAME_EXPRESSIONS = (
    "bfs_push<1>", "bfs_push<32>", "bfs_push<0>", "bfs_push<-1>",
    "pr_pull<1, 0>", "pr_pull<8, 0>", "pr_pull<32, 0>", "pr_pull<0, 0>",
    "pr_pull<1, 8192>", "pr_pull<8, 8192>", "pr_pull<32, 8192>", "pr_pull<0, 8192>",
    "pr_tile<1, 0>", "pr_tile<0, 0>", "pr_tile<1, 1>", "pr_tile<0, 1>",
    "wcc_hook<1>", "wcc_hook<8>", "wcc_hook<32>", "wcc_hook<0>",
    "wcc_sv_hook<1>", "wcc_sv_hook<8>", "wcc_sv_hook<32>", "wcc_sv_hook<0>",
    "wcc_link_rest<1>", "wcc_link_rest<8>", "wcc_link_rest<32>", "wcc_link_rest<0>",
    "msbfs_pull<unsigned int>", "msbfs_pull<unsigned long long>",
    "count_nonself<1>", "count_nonself<8>", "count_nonself<32>", "count_nonself<0>",
    "count_alive_nonself<1>", "count_alive_nonself<8>", "count_alive_nonself<32>",
    "count_alive_nonself<0>",
)


def cupy():
    """The cupy module (ImportError if missing)."""
    import cupy as cp  # noqa: WPS433 (lazy on purpose)
    return cp


_warm: dict = {"thread": None}


def warm_cupyx() -> None:
    """Load cupyx on a thread of its own. CuPy's first elementwise kernel of a process runs
    cupyx's lazy module, which imports SciPy's sparse package: 0.4-0.5 s of every GPU run on the
    H200 machine (tools/profile_gpu_start.py). Started where a run begins to read its dataset
    (its reader threads wait on the disk, the run's thread on them), it is over when the kernels
    start. settle() must come before any CuPy call that may touch cupyx (an elementwise kernel):
    Python 3.11's lazy modules do not lock, and a module half-run has no attributes yet."""
    with _lock:
        if _warm["thread"] is not None:
            return

        def load():
            try:
                import cupyx  # noqa: WPS433
                getattr(cupyx, "scatter_add", None)      # (runs the lazy module's body)
            except Exception:  # noqa: BLE001 - the run's own first use reports any problem
                pass
        t = threading.Thread(target=load, name="graphene-gpu-warm", daemon=True)
        _warm["thread"] = t
        t.start()


def settle() -> None:
    """Wait for warm_cupyx's thread, if one was started."""
    t = _warm["thread"]
    if t is not None:
        t.join()


def available() -> bool:
    """True when CuPy imports and at least one CUDA device answers. Never raises."""
    try:
        cp = cupy()
        return cp.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def may_be_available() -> str:
    """'' when a GPU may be usable here, without importing CuPy or touching the driver (CuPy is
    installed and an NVIDIA device node exists: ~1 ms, where available() takes ~1 s on a GPU
    machine); else why not."""
    import importlib.util
    # (the hardware first: on a machine without a GPU, installing CuPy would not help)
    if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")):
        return "no NVIDIA GPU here (no /dev/nvidia0)"
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed"
    return ""


def why_unavailable() -> str:
    """A one-line reason when available() is False ('' when it is True)."""
    try:
        cp = cupy()
    except Exception as e:  # noqa: BLE001
        if not (os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0")):
            return "no NVIDIA GPU here (no /dev/nvidia0), and CuPy is not installed"
        return (f"CuPy is not installed ({e.__class__.__name__}: {e}; "
                f"`pip install cupy-cuda12x`, or the package's [gpu] extra)")
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        return f"CuPy finds no usable CUDA driver/device ({e})"
    return "" if n > 0 else "no CUDA device"


def module():
    """The compiled kernels for the current device (compiled on first use, then cached)."""
    cp = cupy()
    dev = cp.cuda.Device().id
    with _lock:
        mod = _modules.get(dev)
        if mod is None:
            with open(KERNEL_FILE) as f:
                src = f.read()
            mod = cp.RawModule(code=src, options=("-std=c++17",), name_expressions=NAME_EXPRESSIONS)
            mod.compile()
            _modules[dev] = mod
        return mod


_raw: dict = {}


def raw_function(src: str, name: str):
    """Kernel `name` of the CUDA source `src` (a module's own kernels beside kernels.cu) on the
    current device, each source compiled once per device."""
    cp = cupy()
    key = (cp.cuda.Device().id, src)
    if key not in _raw:
        _raw[key] = cp.RawModule(code=src, options=("-std=c++17",))
    return _raw[key].get_function(name)


def started() -> bool:
    """Whether this process has CuPy, a CUDA context and the kernels ready already (an earlier
    GPU run compiled them): a later run does not pay policy.GPU_START_S again."""
    return bool(_modules)


def kernel(name: str):
    return module().get_function(name)


def sm_count() -> int:
    cp = cupy()
    return int(cp.cuda.Device().attributes["MultiProcessorCount"])
