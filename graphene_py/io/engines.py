"""Engine selection: `make_engine(name, ...)` for "uring", "liburing", "pread" or "auto".

"auto" tries them in that order (fastest first) and keeps the first whose construction works; the
reason each faster one was skipped is recorded in the engine's `notes` and in `last_notice()` as one
line, e.g. ``io engine: pread (uring: io_uring_setup: Operation not permitted; liburing: ...)``.

An explicit name that cannot work here raises EngineUnavailable, an OSError whose message names the
engine and the reason (``liburing: unavailable (probe died with SIGILL: ...)``); the CLI prints it as
``Error: ...`` with exit code 1. No engine can take the process down: the `liburing` package is
native code we do not build, so it is first run in a child process (graphene_py/io/probe.py; verdict
cached on disk). The native `uring` engine needs no such probe: it is our own C, compiled on this
machine by its compiler for the baseline ISA, and every io_uring failure it meets is an errno.

GRAPHENE_DISABLE_URING=1 makes both io_uring engines fail as if io_uring_setup returned EPERM, so
tests and users can exercise the fallback on machines where io_uring works.
"""
from __future__ import annotations

import errno
import os

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


class EngineUnavailable(OSError):
    """An explicitly requested IO engine cannot work on this machine. str(): "NAME: unavailable
    (REASON)"; errno: the underlying errno (EPERM when io_uring is refused, ...)."""

    def __init__(self, engine, err, reason):
        super().__init__(err or errno.ENOTSUP, f"{engine}: unavailable ({reason})")
        self.engine = engine
        self.reason = reason

    def __str__(self):
        return self.strerror


def _short(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        s = e.strerror if not e.filename else f"{e.strerror}: {e.filename}"
        if e.errno and type(e).__str__ is OSError.__str__:
            # the native engine says "io_uring_setup failed (io_uring unavailable?)": add why
            why = os.strerror(e.errno)
            if why.lower() not in s.lower():
                s += f" ({errno.errorcode.get(e.errno, e.errno)}: {why})"
        return s
    return str(e) or type(e).__name__


#: What a failing engine constructor may raise when the engine cannot work here (not a dataset
#: problem: GrapheneIOError for unreadable files is a GrapheneError and passes through).
_UNAVAILABLE = (OSError, ImportError, RuntimeError, AttributeError)


def _construct(name, files, disk_of, pool, queue_depth, direct, kwargs):
    if name in ("uring", "liburing"):
        from .liburing_engine import uring_disabled_error
        err = uring_disabled_error()
        if err is not None:
            raise err
    cls = _engine_class(name)
    return cls(files, disk_of, pool, queue_depth=queue_depth, direct=direct, **kwargs)


def make_engine(name, files, disk_of, pool, queue_depth=config.QUEUE_DEPTH, direct=True, **kwargs):
    """Build an IO engine over `files` (see graphene_py/io/contract.py for the contract).

    name: "auto" or one of ENGINE_NAMES. An explicit io_uring engine that cannot work here raises
    EngineUnavailable (an OSError: "NAME: unavailable (REASON)"); "auto" falls back and records why."""
    global _last_notice
    if name != "auto":
        if name not in ENGINE_NAMES:
            raise ValueError(f"unknown IO engine {name!r}; choose auto or one of "
                             f"{', '.join(ENGINE_NAMES)}")
        try:
            eng = _construct(name, files, disk_of, pool, queue_depth, direct, kwargs)
        except _UNAVAILABLE as e:
            if name == "pread" or isinstance(e, EngineUnavailable):
                raise
            raise EngineUnavailable(name, getattr(e, "errno", None), _short(e)) from e
        _last_notice = f"io engine: {eng.name}"
        return eng
    skipped = []
    last_exc = None
    for n in ENGINE_NAMES:
        try:
            eng = _construct(n, files, disk_of, pool, queue_depth, direct, kwargs if n == "uring" else {})
        except _UNAVAILABLE as e:
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


def engine_status() -> dict:
    """{name: "" if the engine can work here, else the reason}, without opening any dataset.
    May start the liburing probe child once (its verdict is cached; see graphene_py/io/probe.py)."""
    from .liburing_engine import uring_disabled_error
    out = {}
    dis = uring_disabled_error()
    if dis is not None:
        out["uring"] = out["liburing"] = _short(dis)
    else:
        from .uring_engine import uring_available
        ok, why = uring_available()
        out["uring"] = "" if ok else why
        from .probe import liburing_verdict
        v = liburing_verdict()
        out["liburing"] = "" if v.ok else v.reason
    out["pread"] = ""
    return out
