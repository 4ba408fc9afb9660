"""Engine selection: `make_engine(name, ...)` for "uring", "liburing", "pread" or "auto".

"auto" tries them in that order (fastest first) and keeps the first whose construction works; the
reason each faster one was skipped is recorded in the engine's `notes` and in `last_notice()` as one
line, e.g. ``io engine: pread (uring: io_uring_setup: Operation not permitted; liburing: ...)``.

GRAPHENE_DISABLE_URING=1 makes both io_uring engines fail as if io_uring_setup returned EPERM, so
tests and users can exercise the fallback on machines where io_uring works.
"""
from __future__ import annotations

import errno

from .. import config

ENGINE_NAMES = ("uring", "liburing", "pread")

_last_notice = ""


def last_notice() -> str:
    """The one-line notice of the most recent make_engine call."""
    return _last_notice


def add_notice(text: str) -> None:
    """Append a remark to the current notice ("io engine: uring; disk folders ... share ...")."""
    global _last_notice
    if text and text not in _last_notice:
        _last_notice = f"{_last_notice}; {text}" if _last_notice else text


def _engine_class(name):
    if name == "uring":
        from .uring_engine import UringEngine   # native extension; imported lazily
        return UringEngine
    if name == "liburing":
        from .liburing_engine import LiburingEngine
        return LiburingEngine
    if name == "pread":
        from .pread_engine import PreadEngine
        return PreadEngine
    raise ValueError(f"unknown IO engine {name!r}; choose auto or one of {', '.join(ENGINE_NAMES)}")


def _short(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror if not e.filename else f"{e.strerror}: {e.filename}"
    return str(e) or type(e).__name__


def _construct(name, files, disk_of, pool, queue_depth, direct, kwargs):
    if name in ("uring", "liburing"):
        from .liburing_engine import uring_disabled_error
        err = uring_disabled_error()
        if err is not None:
            raise err
    cls = _engine_class(name)
    return cls(files, disk_of, pool, queue_depth=queue_depth, direct=direct, **kwargs)


def make_engine(name, files, disk_of, pool, queue_depth=config.QUEUE_DEPTH, direct=True, **kwargs):
    """Build an IO engine over `files` (see graphene_py/io/engine.py for the contract).

    name: "auto" or one of ENGINE_NAMES. An explicit name that cannot be built raises (OSError /
    ImportError with the reason); "auto" falls back and records why."""
    global _last_notice
    if name != "auto":
        if name not in ENGINE_NAMES:
            raise ValueError(f"unknown IO engine {name!r}; choose auto or one of "
                             f"{', '.join(ENGINE_NAMES)}")
        eng = _construct(name, files, disk_of, pool, queue_depth, direct, kwargs)
        _last_notice = f"io engine: {eng.name}"
        return eng
    skipped = []
    last_exc = None
    for n in ENGINE_NAMES:
        try:
            eng = _construct(n, files, disk_of, pool, queue_depth, direct, kwargs if n == "uring" else {})
        except (OSError, ImportError, RuntimeError, AttributeError) as e:
            if isinstance(e, OSError) and e.errno in (errno.ENOENT, errno.EACCES) and n == "pread":
                raise
            skipped.append(f"{n}: {_short(e)}")
            last_exc = e
            continue
        msg = f"io engine: {eng.name}"
        if skipped:
            msg += " (skipped " + "; ".join(skipped) + ")"
            eng.notes.insert(0, msg)
        _last_notice = msg
        return eng
    raise OSError(getattr(last_exc, "errno", errno.EIO),
                  "no IO engine could be started: " + "; ".join(skipped))
