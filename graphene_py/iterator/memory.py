"""Memory and thread plumbing for algorithms that hold large per-run arrays (multi-source BFS's
depths: S x |V|): fault pages in ahead of use at idle priority, ask for 4 KB pages where huge ones
only cost, and run a nogil kernel on a helper thread beside the supersteps.

    small_pages(arr)          madvise(MADV_NOHUGEPAGE) over arr's pages
    populate_async(arrays)    MADV_POPULATE_WRITE on a SCHED_IDLE thread; returns it (join it)
    Side(fn, *args)           fn(*args) on a helper thread; join() re-raises its error

And the ledger behind `graphene run --json`'s `memory` block: what a run holds, array by array.

    track(name, *arrays)      record arrays' bytes under name in every open ledger (largest kept)
    ledger()                  context manager: a Ledger recording what is tracked meanwhile
    rss_bytes()               resident set size now (VmRSS), or 0
    peak_bytes()              peak RSS (VmHWM), or 0
    reset_peak()              VmHWM := RSS now (/proc/self/clear_refs 5); False where unsupported
"""
from __future__ import annotations

import numpy as np

from .. import config

_MADV_NOHUGEPAGE = 15
_MADV_POPULATE_WRITE = 23      # Linux >= 5.14


def _madvise():
    """libc's madvise (Linux), or None."""
    import sys
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes
        fn = ctypes.CDLL(None, use_errno=True).madvise
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return fn
    except (OSError, AttributeError):
        return None


def _pages(arr):
    """(address, length) of the whole pages inside arr's buffer."""
    lo = (arr.ctypes.data + 4095) & ~4095
    return lo, max(0, ((arr.ctypes.data + arr.nbytes) & ~4095) - lo)


_MADV_DONTNEED = 4
_MADV_RANDOM = 1


def _libc_fn(name, argtypes):
    import ctypes
    fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    fn.argtypes = argtypes
    return fn


class WriteBack:
    """Pages of a file mapping (an np.memmap written once, front to back) handed back soon after
    they are written, so a result larger than the memory a run may use (MS-BFS depths: 4 bytes
    per vertex per source) never piles up dirty in RAM, where a memory cgroup would throttle it
    and evict the code pages instead. `start(view)` (a slice just written) starts its writeback
    (sync_file_range) and returns a token; `finish(token)` waits for it, then drops the pages
    (MADV_DONTNEED, POSIX_FADV_DONTNEED). Keep a few tokens in flight: the disk writes while the
    caller computes. Linux only; elsewhere a no-op."""

    def __init__(self, mm):
        import ctypes
        import os
        import sys
        self.ok = sys.platform.startswith("linux") and isinstance(mm, np.memmap) and mm.size > 0
        if not self.ok:
            return
        try:
            self.sfr = _libc_fn("sync_file_range", [ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                                    ctypes.c_uint])
            self.madvise = _libc_fn("madvise", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int])
        except (OSError, AttributeError):
            self.ok = False
            return
        self.base = mm.ctypes.data                  # data start in memory ...
        self.foff = int(mm.offset)                  # ... and in the file (the same page phase)
        self.fd = os.open(mm.filename, os.O_RDONLY)
        # no read-around on its write faults: each would pull in read_ahead_kb of the file
        # (8 MiB here: all of a 512 MiB depths after one touch per row)
        lo = self.base & ~4095
        self.madvise(lo, self.base + mm.nbytes - lo, _MADV_RANDOM)

    def start(self, view):
        """(file offset, bytes) of the whole pages inside view, their writeback started."""
        if not self.ok or view.size == 0:
            return None
        a = view.ctypes.data
        lo = (a + 4095) & ~4095
        hi = (a + view.nbytes) & ~4095
        if hi <= lo:
            return None
        off = self.foff + (lo - self.base)
        self.sfr(self.fd, off, hi - lo, 2)                     # SYNC_FILE_RANGE_WRITE
        return lo, off, hi - lo

    def prefetch(self, view):
        """Start reading the file pages under view back into the page cache (POSIX_FADV_WILLNEED):
        a later pass over written-back pages then faults on cached pages, not one read each."""
        if not self.ok or view.size == 0:
            return
        import os
        a = view.ctypes.data
        lo = a & ~4095
        hi = (a + view.nbytes + 4095) & ~4095
        os.posix_fadvise(self.fd, self.foff + (lo - self.base), hi - lo, os.POSIX_FADV_WILLNEED)

    def finish(self, token):
        if token is None or not self.ok:
            return
        import os
        addr, off, size = token
        self.sfr(self.fd, off, size, 1 | 2 | 4)                # wait before, write, wait after
        self.madvise(addr, size, _MADV_DONTNEED)
        os.posix_fadvise(self.fd, off, size, os.POSIX_FADV_DONTNEED)

    def close(self):
        if self.ok:
            import os
            os.close(self.fd)
            self.ok = False


#: what this run may use in all (`graphene run --memory`), or None: see memory_available()
RUN_BUDGET = {"bytes": None}


def set_run_budget(nbytes):
    """The memory this process's run may use in all (None: no budget of its own)."""
    RUN_BUDGET["bytes"] = None if nbytes is None else int(nbytes)


def memory_available() -> int:
    """Bytes this process may still take: MemAvailable, or less where a memory cgroup (v2
    memory.max, v1 memory.limit_in_bytes) or the run's own budget (set_run_budget, less the RSS
    now) leaves less."""
    avail = None
    if RUN_BUDGET["bytes"] is not None:
        avail = max(0, RUN_BUDGET["bytes"] - rss_bytes())
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    m = int(line.split()[1]) * 1024
                    avail = m if avail is None else min(avail, m)
    except OSError:
        pass
    room = []
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                parts = line.strip().split(":", 2)
                if len(parts) != 3:
                    continue
                if parts[0] == "0" and parts[1] == "":
                    room.append(("/sys/fs/cgroup" + parts[2], "memory.max", "memory.current"))
                elif "memory" in parts[1].split(","):
                    room.append(("/sys/fs/cgroup/memory" + parts[2], "memory.limit_in_bytes",
                                 "memory.usage_in_bytes"))
    except OSError:
        pass
    import os
    for d, lim, use in room:
        try:
            with open(os.path.join(d, lim)) as f:
                t = f.read().strip()
            if t == "max":
                continue
            with open(os.path.join(d, use)) as f:
                u = int(f.read().strip())
            r = max(0, int(t) - u)
            avail = r if avail is None else min(avail, r)
        except (OSError, ValueError):
            continue
    return avail if avail is not None else 1 << 62


def small_pages(arr):
    """Fault arr in as 4 KB pages (numpy asks for transparent huge pages on big arrays): depths is
    written once, tile by tile, so huge pages buy nothing there, and faulting them in costs much
    more here (compaction; kron22 1x1: 1.2-1.5 s per run instead of 1.6-2.3 s)."""
    madvise = _madvise()
    lo, size = _pages(arr)
    if madvise is not None and size:
        madvise(lo, size, _MADV_NOHUGEPAGE)


#: an adjacency cache at least this large goes into reserved huge pages when enough are free
CACHE_HUGETLB_MIN = 64 << 20


def cache_array(nbytes: int) -> np.ndarray:
    """Zeroed bytes for the read-through adjacency cache, pages coming on first write: in
    reserved 2 MB pages (MAP_HUGETLB) when vm.nr_hugepages leaves enough free, else calloc'ed
    4 KB pages, never transparent huge ones. A fresh 4 KB page costs a fault: copying 512 MB
    into them took 0.18 s on two threads (0.31-0.37 on one), into reserved 2 MB pages 0.055-0.06
    s (0.09; tools/probe_fault_in.py, the 2-vCPU guest). Transparent huge pages took 1.2-1.4 s
    to touch there, and a scattered block makes a whole 2 MB page resident (zeroed first:
    kron22's WCC copied 14.5 MB in and faulted all 489 MiB of them, 0.45 s). A private
    MAP_HUGETLB mapping reserves its pages when made, so it fails then (and 4 KB pages are
    used) instead of at a write. GRAPHENE_CACHE_HUGETLB=off: never."""
    import os
    if nbytes >= CACHE_HUGETLB_MIN and os.environ.get("GRAPHENE_CACHE_HUGETLB", "") != "off":
        import mmap
        from ..io.buffers import _MAP_HUGETLB, hugepages_free
        free, psize = hugepages_free()
        need = -(-int(nbytes) // psize)
        if free >= need:
            try:
                mm = mmap.mmap(-1, need * psize, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                               flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_HUGETLB)
                a = np.frombuffer(mm, dtype=np.uint8, count=int(nbytes))
                note_huge(a)
                return a
            except (OSError, ValueError):
                pass
    a = np.zeros(int(nbytes), dtype=np.uint8)         # calloc: pages come on first write
    small_pages(a)
    return a


def is_hugetlb(arr) -> bool:
    """Whether arr's memory is a MAP_HUGETLB mapping (cache_array), from /proc/self/smaps."""
    from ..io.buffers import smaps_field
    return (smaps_field(arr.ctypes.data, "KernelPageSize") or 0) >= 2048


def populate_async(arrays):
    """Fault in the pages of fresh arrays on a helper thread (MADV_POPULATE_WRITE: contents
    untouched, so it may race with their writers) at idle priority, i.e. while the supersteps wait
    on IO: first touches of fresh memory are slow here and would otherwise land in the depth
    writes. Returns the thread (join it), or None."""
    import os
    import threading
    madvise = _madvise()
    if madvise is None:
        return None
    spans = [_pages(a) for a in arrays]

    def work():
        try:    # idle priority: the compute threads come first
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):
            pass
        # 4 MiB per call: the call holds the mmap lock, which the iterator's threads need too
        for lo, size in spans:
            for a in range(lo, lo + size, 4 << 20):
                if madvise(a, min(4 << 20, lo + size - a), _MADV_POPULATE_WRITE) != 0:
                    return

    t = threading.Thread(target=work, name="graphene-populate", daemon=True)
    t.start()
    return t


class Side:
    """fn(*args) (a nogil kernel) on a helper thread; join() re-raises its error."""

    def __init__(self, fn, *args):
        import threading
        self.err = None

        def work():
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - re-raised by join
                self.err = e

        self.t = threading.Thread(target=work, name="graphene-side", daemon=True)
        self.t.start()

    def join(self):
        self.t.join()
        if self.err is not None:
            raise self.err




# -- the ledger ---------------------------------------------------------------------------------
_LEDGERS = []


class Ledger:
    """Bytes a run holds, by name: its O(|V|) arrays (state, queues, degrees, offsets), the IO
    buffer pool and, on the in-memory path, the partitions. A name tracked again keeps its largest
    size (per-superstep temporaries report their peak)."""

    #: names that are not per-vertex state (reported apart from the bytes-per-vertex sum)
    NOT_STATE = ("io buffers", "partitions in RAM", "adjacency cache")

    def __init__(self):
        self.arrays = {}
        self.seen = set()       # data addresses of the tracked arrays (results are not re-counted)
        self.huge = {}          # name -> bytes of it in reserved huge pages (cache_array, pools)

    def add(self, name, nbytes, addrs=(), huge=0):
        self.arrays[name] = max(self.arrays.get(name, 0), int(nbytes))
        self.seen.update(addrs)
        if huge:
            self.huge[name] = max(self.huge.get(name, 0), int(huge))

    def holds(self, arr):
        return _addr(arr) in self.seen

    def state_bytes(self):
        return sum(b for k, b in self.arrays.items() if not k.startswith(self.NOT_STATE))


def track(name, *arrays):
    """Record the arrays' bytes under `name` in every open ledger; returns the first array."""
    if _LEDGERS:
        nbytes = sum(int(getattr(a, "nbytes", 0)) for a in arrays)
        addrs = [_addr(a) for a in arrays]
        huge = sum(int(a.nbytes) for a, ad in zip(arrays, addrs) if _is_noted_huge(ad))
        for led in _LEDGERS:
            led.add(name, nbytes, addrs, huge)
    return arrays[0] if arrays else None


#: the arrays in reserved huge pages (cache_array, the IO pools: note_huge), by data address,
#: held weakly (an address freed and reused by other memory is not counted)
_HUGE = {}


def note_huge(arr) -> None:
    """Count arr as held in reserved huge pages when it is tracked (`--json`'s memory block)."""
    import weakref
    _HUGE[_addr(arr)] = weakref.ref(arr)


def _is_noted_huge(addr) -> bool:
    ref = _HUGE.get(addr)
    if ref is None:
        return False
    if ref() is None:
        del _HUGE[addr]
        return False
    return True


def _addr(arr):
    try:
        return arr.__array_interface__["data"][0]
    except (AttributeError, KeyError, TypeError):
        return id(arr)


def track_bytes(name, nbytes):
    """Record nbytes under `name` (held in pieces that are not one array) in every open ledger."""
    for led in _LEDGERS:
        led.add(name, nbytes)


class ledger:
    """`with ledger() as led:` records what is tracked inside the block."""

    def __enter__(self):
        self.led = Ledger()
        _LEDGERS.append(self.led)
        return self.led

    def __exit__(self, *exc):
        _LEDGERS.remove(self.led)
        return False


class CacheBudget:
    """RAM that the iterators of one run may fill with adjacency files (`graphene run --memory`:
    what the budget leaves after the O(|V|) state, the IO buffers and the runtime). An iterator
    reserves whole files from it when it opens (filled as they are read: iterator/session.py) and
    gives them back when it closes."""

    def __init__(self, nbytes):
        import threading
        self.total = self.left = max(0, int(nbytes))
        self.used_max = 0           # the most bytes held at once
        self.whole = []             # directions served wholly from RAM (the in-memory path)
        self.partial = []           # directions served partly from RAM
        self.split = []             # directions with a file held in part (up to a quota)
        self._lock = threading.Lock()

    def take(self, nbytes):
        """Reserve nbytes if they fit; True when reserved."""
        with self._lock:
            if 0 < nbytes <= self.left:
                self.left -= nbytes
                self.used_max = max(self.used_max, self.total - self.left)
                return True
            return False

    def describe(self, engine):
        """The engine notice of a run under this budget."""
        used = f"{self.used_max / 2**20:,.0f} MiB"
        if self.whole and not self.partial:
            return f"{engine}, read through a cache with room for the whole graph ({used} reserved)"
        if self.used_max:
            part = "; part of a file" if self.split else ""
            return f"{engine} + {used} of adjacency cached (read through{part})"
        return f"{engine} (--memory: no room for adjacency data in the cache)"

    def give(self, nbytes):
        with self._lock:
            self.left = min(self.total, self.left + int(nbytes))

    def __repr__(self):
        return f"CacheBudget({self.total} bytes, {self.left} left)"


def as_budget(cache):
    """None, a byte count or a CacheBudget -> a CacheBudget (None: no cache)."""
    if cache is None or isinstance(cache, CacheBudget):
        return cache
    return CacheBudget(int(cache))


def rss_bytes():
    """The process's resident set size now (VmRSS)."""
    return config.vm_bytes("VmRSS")


def peak_bytes():
    """The process's peak RSS (VmHWM) since it started or since reset_peak()."""
    return config.vm_bytes("VmHWM")


def reset_peak():
    """Start VmHWM again from the RSS now (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
