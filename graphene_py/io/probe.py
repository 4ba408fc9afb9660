"""Is the `liburing` engine safe in this process? Asked of a child process once, remembered on disk.

The PyPI `liburing` package is native code we do not build: the 2026.3.30 wheel (a Zig build)
contains AVX-512 instructions, so on a CPU without AVX-512 `Ring()` kills the whole process with
SIGILL, and no Python `except` can catch that. So before the first use of liburing in a process,
`require_liburing()` runs the engine in a child process: import liburing, create a ring, read one
512-byte aligned block of a temporary file with O_DIRECT through LiburingEngine itself (the same
code path the engine uses), exit 0. A child that dies by a signal, fails, or exceeds the timeout
makes the engine unavailable with the reason (an OSError, which `auto` skips and the CLI prints as
`Error: liburing: unavailable (...)`).

The verdict is cached in ``$XDG_CACHE_HOME/graphene_py`` (default ``~/.cache/graphene_py``;
GRAPHENE_PROBE_CACHE names another folder), one small JSON file per key. The key covers everything that can change the answer: the liburing
package (version, and path, size and mtime of its __init__.py and native libraries), the Python
build and executable, the kernel release, the CPU flags line of /proc/cpuinfo, this module's and
liburing_engine.py's size and mtime, and the test fault hook. Reinstalling liburing, moving the
disk to another machine or upgrading the kernel therefore re-probes; a cached failure never hides
a later fix. Only verdicts that are properties of the installation are written to disk (the probe
worked; the child died by a signal; the package cannot be imported or has an unsupported API; the
read returned wrong bytes).
Failures that depend on the environment of one run (io_uring refused by seccomp or
kernel.io_uring_disabled, a temp file that cannot be written, a timeout) are remembered only for the
current process, so the next process, maybe outside the container, asks again.

Costs (see `stats`): a probe is one Python start plus numpy and liburing imports (~0.3 s); a cached
lookup is a few stat calls, reading the first CPU's flags line and one small file (well under
1 ms); a repeated lookup in one process recomputes the key (~0.2 ms) and hits a dictionary. When io_uring itself is refused
(checked with the native extension's io_uring_setup probe, a plain syscall returning errno), no
child is started at all.

Test hook: GRAPHENE_FAULT_LIBURING_PROBE=sigill|segv|hang|fail makes the child kill itself with that
signal (or sleep, or report a failure) before touching liburing; the value is part of the cache key,
so a fault run never poisons a normal one. GRAPHENE_LIBURING_PROBE_TIMEOUT overrides the timeout
(seconds, default 30).
"""
from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

#: Bump when the probe's meaning changes (old cache entries are then ignored).
PROBE_VERSION = 1
DEFAULT_TIMEOUT = 30.0
FAULT_ENV = "GRAPHENE_FAULT_LIBURING_PROBE"
TIMEOUT_ENV = "GRAPHENE_LIBURING_PROBE_TIMEOUT"
GOOD_VERSION = "2024.5.3"
FIX_HINT = (f"pip install --force-reinstall --no-binary liburing liburing=={GOOD_VERSION}")

#: Counters for tests and measurements: children started, disk cache hits, in-process hits.
stats = {"spawned": 0, "disk_hits": 0, "memo_hits": 0, "precheck_refusals": 0}

_memo: dict[str, "Verdict"] = {}
_lock = threading.Lock()     # one probe at a time per process (engines built from several threads)
_cpu_flags: str | None = None


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str = ""          # why not, for users ("probe died with SIGILL: ...")
    errno: int = 0            # errno for the OSError raised when not ok
    cacheable: bool = False   # a property of the installation (written to disk)
    source: str = "probe"     # "probe", "disk", "memo", "precheck", "missing"
    seconds: float = 0.0      # how long the probe child took (when source == "probe")


class LiburingUnavailable(OSError):
    """The liburing engine cannot work here; str() is the reason alone (no "[Errno N]")."""

    def __init__(self, err, reason):
        super().__init__(err or errno.ENOTSUP, reason)

    def __str__(self):
        return self.strerror


# --------------------------------------------------------------------------- key
def cache_dir() -> str:
    d = os.environ.get("GRAPHENE_PROBE_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "graphene_py")


def _read_cpu_flags() -> str:
    global _cpu_flags
    if _cpu_flags is None:
        flags = ""
        try:
            with open("/proc/cpuinfo", "rb") as f:   # the first CPU's line; stop reading there
                for line in f:
                    if line.startswith((b"flags", b"Features")):
                        flags = line.split(b":", 1)[-1].strip().decode("ascii", "replace")
                        break
        except OSError:
            pass
        _cpu_flags = flags
    return _cpu_flags


def _stat_sig(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def package_fingerprint():
    """Identity of the installed liburing package without importing it, or None if absent."""
    try:
        spec = importlib.util.find_spec("liburing")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None
    pkg_dir = os.path.dirname(spec.origin)
    files = {os.path.basename(spec.origin): _stat_sig(spec.origin)}
    try:
        with os.scandir(pkg_dir) as it:
            for ent in it:
                if ent.name.endswith(".so"):
                    st = ent.stat()
                    files[ent.name] = [st.st_size, st.st_mtime_ns]
    except OSError:
        pass
    version = None
    site = os.path.dirname(pkg_dir)
    try:
        for name in os.listdir(site):
            if name.startswith("liburing-") and name.endswith((".dist-info", ".egg-info")):
                version = name[len("liburing-"):].rsplit(".", 1)[0]
                break
    except OSError:
        pass
    return {"path": pkg_dir, "version": version, "files": sorted(files.items())}


def cache_key(fingerprint=None) -> str:
    fp = fingerprint if fingerprint is not None else package_fingerprint()
    here = os.path.dirname(os.path.abspath(__file__))
    parts = {
        "probe": PROBE_VERSION,
        "package": fp,
        "python": [sys.version, sys.executable, sys.implementation.cache_tag],
        "kernel": os.uname().release,
        "machine": os.uname().machine,
        "cpu_flags": _read_cpu_flags(),
        "code": [_stat_sig(os.path.join(here, "probe.py")),
                 _stat_sig(os.path.join(here, "liburing_engine.py")),
                 _stat_sig(os.path.join(here, "probe_child.py"))],
        "fault": os.environ.get(FAULT_ENV, ""),
    }
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


def _cache_path(key):
    return os.path.join(cache_dir(), f"liburing-probe-{key}.json")


# --------------------------------------------------------------------------- verdict
def _timeout() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV, "") or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


def _precheck():
    """None, or a Verdict when io_uring itself is refused here (seccomp, io_uring_disabled, old
    kernel): asked through the native extension, whose io_uring_setup call just returns errno."""
    try:
        from .. import _uring
    except ImportError:
        return None
    probe = getattr(_uring, "probe", None)
    if probe is None:
        return None
    err = probe()
    if err in (errno.EPERM, errno.ENOSYS, errno.EACCES):
        stats["precheck_refusals"] += 1
        return Verdict(False, f"io_uring_setup: {os.strerror(err)}", err, False, "precheck")
    return None


def _signal_reason(signum):
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    if signum == signal.SIGILL:
        return (f"probe died with SIGILL: the installed liburing package uses CPU instructions "
                f"this machine lacks; {FIX_HINT}")
    return f"probe died with {name}: the installed liburing package crashes on this machine; {FIX_HINT}"


def _temp_file():
    """A file for the child to read (made here so that it is removed whatever the child does):
    in the cache folder first (usually a disk filesystem, where O_DIRECT works), else the temp dir."""
    import tempfile
    for d in (cache_dir(), tempfile.gettempdir()):
        try:
            os.makedirs(d, exist_ok=True)
            fd, path = tempfile.mkstemp(prefix="liburing-probe-", suffix=".bin", dir=d)
            os.close(fd)
            return path
        except OSError:
            continue
    return None


def _run_child(timeout):
    """Start the probe child; returns a Verdict (source "probe")."""
    stats["spawned"] += 1
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTHONFAULTHANDLER", None)
    code = "from graphene_py.io.probe_child import main; main()"
    path = _temp_file()
    if path is None:
        return Verdict(False, "probe could not create a temporary file", errno.EIO, False)
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable or "python3", "-c", code, path], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout, cwd=root)
    except subprocess.TimeoutExpired:
        return Verdict(False, f"probe timed out after {timeout:g} s (liburing hangs here?)",
                       errno.ETIMEDOUT, False, seconds=time.perf_counter() - t0)
    except OSError as e:
        return Verdict(False, f"probe could not start: {e.strerror or e}", e.errno or errno.EIO,
                       False, seconds=time.perf_counter() - t0)
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    dt = time.perf_counter() - t0
    if p.returncode < 0:
        return Verdict(False, _signal_reason(-p.returncode), errno.ENOTSUP, True, seconds=dt)
    out = p.stdout.decode("utf-8", "replace").strip().splitlines()
    rec = None
    if out:
        try:
            rec = json.loads(out[-1])
        except ValueError:
            rec = None
    if p.returncode == 0 and rec and rec.get("ok"):
        return Verdict(True, "", 0, True, seconds=dt)
    if rec and not rec.get("ok", True):
        return Verdict(False, str(rec.get("reason") or "probe failed"),
                       int(rec.get("errno") or errno.EIO), bool(rec.get("cache")), seconds=dt)
    tail = p.stderr.decode("utf-8", "replace").strip().splitlines()
    why = tail[-1] if tail else ""
    return Verdict(False, f"probe exited with status {p.returncode}" + (f" ({why})" if why else ""),
                   errno.EIO, False, seconds=dt)


def _load(key):
    try:
        with open(_cache_path(key)) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or d.get("key") != key or "ok" not in d:
        return None
    return Verdict(bool(d["ok"]), str(d.get("reason", "")), int(d.get("errno", 0)), True, "disk",
                   float(d.get("seconds", 0.0)))


def _store(key, v, fingerprint):
    d = {"key": key, "ok": v.ok, "reason": v.reason, "errno": v.errno, "seconds": round(v.seconds, 4),
         "when": time.strftime("%Y-%m-%dT%H:%M:%S"), "liburing": (fingerprint or {}).get("version"),
         "python": sys.executable, "kernel": os.uname().release}
    path = _cache_path(key)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(d, f)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return
    _prune(os.path.dirname(path), path)


#: verdicts kept in the cache folder: every interpreter, package build and kernel has its own
#: (a machine's venvs and checkouts add up), the newest this many stay
KEEP_VERDICTS = 16


def _prune(folder, keep_path):
    """Remove all but the KEEP_VERDICTS newest verdict files (never keep_path): a removed one
    only costs its interpreter one probe again."""
    try:
        names = [n for n in os.listdir(folder)
                 if n.startswith("liburing-probe-") and n.endswith(".json")]
        files = sorted((os.path.join(folder, n) for n in names),
                       key=lambda p: os.stat(p).st_mtime, reverse=True)
    except OSError:
        return
    for p in files[KEEP_VERDICTS:]:
        if p != keep_path:
            try:
                os.unlink(p)
            except OSError:
                pass


def liburing_verdict(use_cache=True) -> Verdict:
    """Whether the liburing engine works in this process (see the module docstring)."""
    fp = package_fingerprint()
    if fp is None:
        return Verdict(False, f"the liburing package is not installed (pip install liburing=={GOOD_VERSION})",
                       errno.ENOENT, False, "missing")
    key = cache_key(fp)
    with _lock:
        if use_cache:
            v = _memo.get(key)
            if v is not None:
                stats["memo_hits"] += 1
                return Verdict(v.ok, v.reason, v.errno, v.cacheable, "memo", v.seconds)
            v = _load(key)
            if v is not None:
                stats["disk_hits"] += 1
                _memo[key] = v
                return v
        v = None
        if not os.environ.get(FAULT_ENV):   # the fault hook must reach the child
            v = _precheck()
        if v is None:
            v = _run_child(_timeout())
            if v.cacheable:
                _store(key, v, fp)
        _memo[key] = v
        return v


def require_liburing() -> None:
    """Raise LiburingUnavailable (an OSError) unless the liburing engine works in this process."""
    v = liburing_verdict()
    if not v.ok:
        raise LiburingUnavailable(v.errno, v.reason)


def clear_memo() -> None:
    """Forget in-process verdicts (tests; the disk cache stays)."""
    _memo.clear()
