"""The liburing probe's child process (graphene_py/io/probe.py starts it as
`python -c "from graphene_py.io.probe_child import main; main()" FILE`): it imports liburing, makes a
ring and reads one block of FILE through LiburingEngine, then prints one JSON verdict line. A
liburing build that uses CPU instructions this machine lacks dies here (SIGILL), not in the parent.
Kept apart from probe.py so that the engine and the probe do not import each other.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import sys
import time

from .probe import FAULT_ENV

def _emit(**rec):
    sys.stdout.write(json.dumps(rec) + "\n")
    sys.stdout.flush()


def main():
    """The probe itself (runs in the child process). Exit 0 and {"ok": true} when a read through
    LiburingEngine returned the right bytes; {"ok": false, "reason", "errno", "cache"} otherwise;
    or death by a signal, which the parent reports."""
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))   # a crash here needs no core dump
    except (ImportError, ValueError, OSError):
        pass
    fault = os.environ.get(FAULT_ENV, "")
    if fault in ("sigill", "segv"):
        sig = signal.SIGILL if fault == "sigill" else signal.SIGSEGV
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        time.sleep(10)
    elif fault == "hang":
        time.sleep(3600)
    elif fault == "fail":
        _emit(ok=False, reason=f"probe failed: injected by {FAULT_ENV}=fail", errno=errno.EIO,
              cache=False)
        sys.exit(1)
    try:
        from . import liburing_engine as le
        api = le.load_api()
    except ImportError as e:
        _emit(ok=False, reason=str(e), errno=errno.ENOENT, cache=True)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001
        _emit(ok=False, reason=f"import liburing failed: {type(e).__name__}: {e}", errno=errno.EIO,
              cache=True)
        sys.exit(1)
    import numpy as np

    from .buffers import BufferPool
    data = bytes((i * 7 + 3) & 0xFF for i in range(4096))
    path = sys.argv[1] if len(sys.argv) > 1 else ""
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        _emit(ok=False, reason=f"probe could not write {path!r}: {e.strerror or e}", errno=errno.EIO,
              cache=False)
        sys.exit(1)
    try:
        with BufferPool(4096, 2, hugepages="never") as pool:
            eng = le.LiburingEngine([path], [0], pool, queue_depth=4, direct=True, _probe=False)
            try:
                eng.submit(np.array([0], np.int32), np.array([512], np.int64),
                           np.array([512], np.int64))
                rows = eng.get(0, 4)
                if len(rows) != 1:
                    raise RuntimeError(f"expected one completion, got {len(rows)}")
                slot = int(rows[0, 1])
                got = bytes(pool.view[slot * 4096: slot * 4096 + 512])
                eng.release(rows[:, 1])
                if got != data[512:1024]:
                    _emit(ok=False, reason=f"probe read wrong data through liburing {api.version}",
                          errno=errno.EIO, cache=True)
                    sys.exit(1)
                direct = eng.direct
            finally:
                eng.close()
    except OSError as e:   # io_uring refused here (seccomp, io_uring_disabled, ENOSYS): environment
        _emit(ok=False, reason=(e.strerror or str(e)), errno=e.errno or errno.EIO, cache=False)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001  (API mismatch, wrong results: not cached, re-probed)
        _emit(ok=False, reason=f"probe failed: {type(e).__name__}: {e}", errno=errno.EIO, cache=False)
        sys.exit(1)
    _emit(ok=True, version=api.version, style=api.style, direct=direct)
    sys.exit(0)
