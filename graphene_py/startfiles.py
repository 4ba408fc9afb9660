"""The files a command's start reads, asked for ahead (issue 11: a fresh process on a cold cache).

A fresh `graphene run kcore --k 17 --membership-only -g kron22` on a cold page cache imports about
270 files before its trial: click, numpy and its 40 MB of libraries, the compiled kernels, this
package's modules. The imports read them one after another, each open waiting for its directory
and inode blocks and each library's page faults for their reads: on the 2-vCPU machine of
BENCHMARKS.md the same command took 0.55 s with those files already in the page cache against
0.80 s without (the graph's own lists cold in both; BENCHMARKS.md has the commands).

So the first time a command line of a kind runs, `record` writes the files it loaded (its modules'
sources and bytecode, the shared libraries it mapped, the kernels' manifest) to
`startup/<kind>.txt` beside the kernel cache; every later run of that kind hands the list to a
few native threads (`_uring.warm_files`) before it imports click or numpy. They stat each
source and ask the kernel to read each other file ahead (POSIX_FADV_WILLNEED), all at once,
while the imports go on. A kind is the command's leading words and its device
(`run-kcore`, `run-bfs-gpu`, `partition`): a CPU run never asks for CuPy's libraries that a GPU
run loaded. A run whose files differ from its kind's list writes its own in its place; nothing
is read into the process, and a file that fails is skipped.
`GRAPHENE_STARTFILES=off` turns both sides off. Stdlib only: this runs before numpy is imported.
"""
from __future__ import annotations

import os
import sys

#: "off": no list is read or written
ENV = "GRAPHENE_STARTFILES"
#: native threads that go through the list (their opens wait for metadata reads in parallel)
THREADS = 8
#: most paths kept in one list; larger files than this are left to be read as they are needed
MAX_FILES = 4000
MAX_FILE_BYTES = 256 << 20
#: a library's touched pages closer than this are asked for in one range
MERGE_GAP = 64 << 10
#: commands whose second word names what they run (an algorithm, a subcommand): their kinds
#: keep it; any other command's second word is a file or a dataset (`partition web.el`)
_TWO_WORDS = ("run", "bench", "cluster")
#: devices whose runs import other modules than a CPU run (their own lists)
_DEVICE_KINDS = ("gpu", "auto", "hybrid")

#: lists: {list path: its lines} as start() read them (record() compares); started: start() ran
_STATE = {"lists": {}, "started": False}
_NOTED = []                   # files a start reads besides modules and libraries (note())


def kernel_cache_dir() -> str:
    """Where generated kernels live: $GRAPHENE_KERNEL_CACHE, else
    $XDG_CACHE_HOME/graphene_py/kernels (~/.cache/graphene_py/kernels); the preload lists go to
    `preload/` beside it, the compiled modules to `aot/`, the start's file lists to `startup/`."""
    d = os.environ.get("GRAPHENE_KERNEL_CACHE")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        d = os.path.join(base, "graphene_py", "kernels")
    return d


def kind(argv) -> str:
    """The list a command line uses: its command (and for `run`, `bench` and `cluster` the word
    after it, before any option), and its device when that imports more than a CPU run does.
    `graphene --debug run bfs -g x --device gpu` -> "run-bfs-gpu"; `graphene partition web.el`
    -> "partition"."""
    words = []
    for a in argv[1:]:
        if a.startswith("-"):
            if words:
                break
            continue
        words.append(a)
        if len(words) == 2 or words[0] not in _TWO_WORDS:
            break
    device, cluster = None, False
    for i, a in enumerate(argv[1:], 1):
        if a == "--device" and i + 1 < len(argv):
            device = argv[i + 1]
        elif a.startswith("--device="):
            device = a.split("=", 1)[1]
        elif a == "--cluster" or a.startswith("--cluster="):
            cluster = True
    parts = words or ["none"]
    if device in _DEVICE_KINDS:
        parts.append(device)
    if cluster:
        parts.append("cluster")
    return _safe("-".join(parts))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:64]


def list_path(name: str) -> str:
    return os.path.join(os.path.dirname(kernel_cache_dir()), "startup", name + ".txt")


def _off() -> bool:
    return os.environ.get(ENV, "").lower() in ("off", "0", "no")


def _read_list(path):
    try:
        with open(path) as f:
            return [p for p in f.read().split("\n") if p]
    except (OSError, UnicodeDecodeError):
        return None


def start(argv) -> int:
    """Hand the list of argv's kind to native threads (returns at once); the threads started."""
    if _off():
        return 0
    _STATE["started"] = True
    lp = list_path(kind(argv))
    paths = _STATE["lists"][lp] = _read_list(lp)
    if not paths:
        return 0
    try:
        from . import _uring
        return int(_uring.warm_files(paths, THREADS))
    except (ImportError, AttributeError, OSError):  # no native module built: imports as before
        return 0


def note(path: str) -> None:
    """A file this run's start read besides its modules and libraries (the kernels' manifest,
    the registry): kept in its kind's list."""
    if path not in _NOTED:
        _NOTED.append(path)


def _mapped_libraries() -> dict:
    """{path: [(file offset, bytes), ...]} of the shared libraries this process mapped, in address
    order: the pages present in its mappings (/proc/self/pagemap), runs closer than MERGE_GAP
    joined. A library's whole file (None) where pagemap cannot be read."""
    maps = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    p = parts[5].strip()
                    if p.startswith("/") and ".so" in os.path.basename(p):
                        lo, hi = (int(x, 16) for x in parts[0].split("-"))
                        maps.append((p, lo, hi, int(parts[2], 16)))
    except (OSError, ValueError):
        return {}
    page = os.sysconf("SC_PAGE_SIZE")
    pages = {}
    try:
        fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    except OSError:
        return {p: None for p, *_ in maps}
    try:
        for p, lo, hi, off in maps:
            got = pages.setdefault(p, [])
            if got is None:
                continue
            try:
                words = memoryview(os.pread(fd, (hi - lo) // page * 8, lo // page * 8)).cast("Q")
            except OSError:
                pages[p] = None
                continue
            for i, w in enumerate(words):
                if w >> 62:                 # present (bit 63) or swapped (62): the run used it
                    got.append(off + i * page)
    finally:
        os.close(fd)
    out = {}
    for p, offs in pages.items():
        if offs is None:
            out[p] = None
            continue
        runs = []
        for o in sorted(set(offs)):
            if runs and o <= runs[-1][0] + runs[-1][1] + MERGE_GAP:
                runs[-1][1] = o + page - runs[-1][0]
            else:
                runs.append([o, page])
        out[p] = [tuple(r) for r in runs]
    return out


def _entry(path, runs) -> str:
    """A list line: the path, and its ranges after a tab (csrc/warm.c reads them)."""
    if not runs:
        return path
    return path + "\t" + ",".join(f"{o}+{n}" for o, n in runs)


def loaded_files() -> list:
    """The files this process's start read, in the order it needed them (list lines, _entry):
    each module's source and bytecode (or its extension module's pages) in import order; the
    noted files and the other shared libraries' pages after them."""
    out, seen = [], set()

    def add(p, runs=None):
        if p and isinstance(p, str) and p not in seen:
            seen.add(p)
            out.append(_entry(p, runs))

    libs = _mapped_libraries()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str):
            continue
        if f.endswith(".py"):
            add(f)
            add(getattr(mod, "__cached__", None))
        else:
            add(f, libs.get(f))
    for p in _NOTED:
        add(p)
    for lib, runs in libs.items():
        if runs != []:
            add(lib, runs)
    return out


def record(argv) -> int:
    """Write this run's files as the list of argv's kind where they differ from it (1 when
    written): runs of one kind load the same files, so this is rare; a run that imported
    numba once (sources changed before `graphene prepare`) leaves no 150 MB in the list of the
    runs after it."""
    if _off() or not _STATE["started"]:     # not the `graphene` command (start() never ran)
        return 0
    return _write(list_path(kind(argv)), loaded_files())


def _write(path, entries) -> int:
    have = _STATE["lists"].get(path)
    if have is None:
        have = _read_list(path) or []
    known = {e.split("\t", 1)[0] for e in have}
    keep, now = [], set()
    for e in entries:
        p = e.split("\t", 1)[0]
        try:
            st = os.stat(p)
        except OSError:
            continue
        if (st.st_size <= MAX_FILE_BYTES or "\t" in e) and len(keep) < MAX_FILES:
            keep.append(e)         # (a range of a large file: only that range is asked for)
            now.add(p)
    if now == known:
        return 0
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(keep) + "\n")
        os.replace(tmp, path)
    except OSError:             # a read-only cache: the next start reads its files as they come
        return 0
    _STATE["lists"][path] = keep
    return 1
