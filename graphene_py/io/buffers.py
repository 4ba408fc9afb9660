"""The IO buffer pool: fixed memory carved into equal slots, hugepage-backed when possible (§4.6).

Graphene preallocates 2 MB hugepages for IO buffers and lets many requests share one hugepage
(consecutive requests use consecutive space). `BufferPool` does the same: one anonymous mapping of
``nslots * slot_bytes`` bytes, slot s at ``[s*slot_bytes, (s+1)*slot_bytes)``, so with 16 KB slots 128
slots share each 2 MB page. Which memory backs it (``kind``):

* ``"hugetlb"``: MAP_HUGETLB 2 MB pages, used when /proc/meminfo reports enough free reserved pages
  (``HugePages_Free``) and the mapping succeeds;
* ``"thp"``: private anonymous mapping aligned to 2 MB + madvise(MADV_HUGEPAGE) (transparent
  hugepages; the kernel may or may not back it with huge pages: ``note`` says how many MiB it did,
  read from /proc/self/smaps);
* ``"normal"``: plain 4 KB pages.

``note`` says which one was used and why the better ones were not (never a crash when no hugepages
are reserved — the C++ prototype's known defect). The mapping is touched once at creation so page
faults do not land in the IO path. ``view`` is a writable, 4096-aligned (2 MB-aligned for huge kinds)
uint8 numpy array suitable for O_DIRECT.
"""
from __future__ import annotations

import mmap
import os

import numpy as np

HUGE = 2 * 1024 * 1024
_MAP_HUGETLB = getattr(mmap, "MAP_HUGETLB", 0x40000)
_PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS


def hugepages_free(meminfo: str = "/proc/meminfo") -> tuple[int, int]:
    """(free reserved hugepages, hugepage size in bytes) from /proc/meminfo; (0, 2 MB) if unknown.
    Free means not promised to a mapping either (HugePages_Free counts the pages a MAP_HUGETLB
    mapping has reserved, HugePages_Rsvd, until they are written), and within what this
    process's hugetlb cgroup still lets it fault in: a limit there is charged at the first
    write, where going over it is a SIGBUS, not a failed mmap."""
    free, rsvd, size = 0, 0, HUGE
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("HugePages_Free:"):
                    free = int(line.split()[1])
                elif line.startswith("HugePages_Rsvd:"):
                    rsvd = int(line.split()[1])
                elif line.startswith("Hugepagesize:"):
                    size = int(line.split()[1]) * 1024
    except OSError:
        pass
    free = max(0, free - rsvd)
    room = hugetlb_cgroup_room(size)
    if room is not None:
        free = min(free, room // size)
    return free, size


def hugetlb_cgroup_room(page_bytes: int, proc_cgroup: str = "/proc/self/cgroup",
                        root: str = "/sys/fs/cgroup"):
    """Bytes of `page_bytes` huge pages this process's hugetlb cgroup and its ancestors still let
    it fault in (the least of limit - usage over the chain), or None without a limit (no hugetlb
    controller, "max", or nothing readable). cgroup v1 (`hugetlb.2MB.limit_in_bytes`,
    `usage_in_bytes`) and v2 (`hugetlb.2MB.max`, `.current`)."""
    name = f"{page_bytes >> 20}MB" if page_bytes < (1 << 30) else f"{page_bytes >> 30}GB"
    try:
        with open(proc_cgroup) as f:
            lines = [ln.rstrip("\n").split(":", 2) for ln in f]
    except OSError:
        return None
    chains = []
    for parts in lines:
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if "hugetlb" in ctrls.split(","):
            chains.append((os.path.join(root, "hugetlb"), path, "limit_in_bytes",
                           "usage_in_bytes"))
        elif ctrls == "":
            chains.append((root, path, "max", "current"))
    room = None
    for base, path, lim_name, use_name in chains:
        path = path.strip("/")
        while True:
            d = os.path.join(base, path) if path else base
            lim = _read_number(os.path.join(d, f"hugetlb.{name}.{lim_name}"))
            use = _read_number(os.path.join(d, f"hugetlb.{name}.{use_name}"))
            if lim is not None and lim < (1 << 62):        # (v1's "no limit" is near 2^63)
                left = max(0, lim - (use or 0))
                room = left if room is None else min(room, left)
            if not path:
                break
            path = os.path.dirname(path)
    return room


def _read_number(path):
    try:
        with open(path) as f:
            v = f.read().strip()
    except OSError:
        return None
    try:
        return int(v)
    except ValueError:
        return None          # "max"


def smaps_field(addr: int, field: str):
    """The number (kB for sizes) that /proc/self/smaps gives `field` (e.g. "AnonHugePages",
    "KernelPageSize") for the mapping holding address addr; None where it cannot be read."""
    try:
        with open("/proc/self/smaps") as f:
            inside = False
            for line in f:
                head = line.split(" ", 1)[0]
                if "-" in head and ":" not in head:
                    a, b = (int(x, 16) for x in head.split("-"))
                    inside = a <= addr < b
                elif inside and line.startswith(field + ":"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            s = f.read()
        return s[s.index("[") + 1:s.index("]")]
    except (OSError, ValueError):
        return "unknown"


class BufferPool:
    def __init__(self, slot_bytes: int, nslots: int, hugepages="auto"):
        slot_bytes, nslots = int(slot_bytes), int(nslots)
        if slot_bytes <= 0 or slot_bytes % 4096:
            raise ValueError(f"slot_bytes must be a positive multiple of 4096, got {slot_bytes}")
        if nslots <= 0:
            raise ValueError(f"nslots must be positive, got {nslots}")
        if hugepages not in ("auto", True, False, "hugetlb", "thp", "normal", "never"):
            raise ValueError(f"hugepages must be auto/hugetlb/thp/normal, got {hugepages!r}")
        self.slot_bytes = slot_bytes
        self.nslots = nslots
        self.nbytes = slot_bytes * nslots
        self._mm = None
        self.kind, self.note = None, ""
        want = {True: "hugetlb", False: "normal", "never": "normal"}.get(hugepages, hugepages)
        why = []
        if want in ("auto", "hugetlb"):
            free, psize = hugepages_free()
            need = -(-self.nbytes // psize)
            if free >= need:
                try:
                    size = need * psize
                    self._mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_HUGETLB,
                                         prot=mmap.PROT_READ | mmap.PROT_WRITE)
                    self._off = 0
                    self.kind = "hugetlb"
                    self.note = f"{need} reserved {psize >> 20} MB hugetlb pages"
                except OSError as e:
                    why.append(f"MAP_HUGETLB failed ({e.strerror or e})")
            else:
                why.append(f"{free} reserved hugepages free, {need} needed "
                           f"(reserve with: echo {need} > /proc/sys/vm/nr_hugepages)")
        if self._mm is None and want in ("auto", "hugetlb", "thp"):
            mode = _thp_mode()
            if mode == "never":
                why.append("transparent hugepages disabled (never)")
            elif not hasattr(mmap, "MADV_HUGEPAGE"):
                why.append("madvise(MADV_HUGEPAGE) unavailable")
            else:
                try:
                    # private: MADV_HUGEPAGE on a shared (shmem) mapping only works when
                    # /sys/kernel/mm/transparent_hugepage/shmem_enabled allows it
                    self._mm = mmap.mmap(-1, self.nbytes + HUGE, flags=_PRIVATE)
                    base = np.frombuffer(self._mm, dtype=np.uint8, count=1).ctypes.data
                    self._off = (-base) % HUGE
                    self._mm.madvise(mmap.MADV_HUGEPAGE, self._off & ~4095,
                                     (self.nbytes + 4095) & ~4095)
                    self.kind = "thp"
                    self.note = f"transparent hugepages via madvise(MADV_HUGEPAGE), THP mode {mode}"
                except (OSError, ValueError) as e:
                    why.append(f"madvise(MADV_HUGEPAGE) failed ({e})")
                    self._mm = None
        if self._mm is None:
            self._mm = mmap.mmap(-1, self.nbytes, flags=_PRIVATE)
            self._off = 0
            self.kind = "normal"
            self.note = "normal 4 KB pages"
        self.view = np.frombuffer(self._mm, dtype=np.uint8, count=self.nbytes, offset=self._off)
        self.view[::4096] = 0   # fault the pages in now, not during IO
        self._mv = memoryview(self._mm)[self._off:self._off + self.nbytes]
        if self.kind == "thp":   # THP is advice: say how much the kernel really backed
            huge = self.huge_bytes()
            if huge is not None:
                self.note += f" ({huge >> 20} of {self.nbytes >> 20} MiB on huge pages)"
        if why:
            self.note += "; " + "; ".join(why)

    def huge_bytes(self):
        """Bytes of this pool backed by huge pages now (AnonHugePages of its mapping in
        /proc/self/smaps; hugetlb pools: all of it), or None when smaps cannot be read."""
        if self.kind == "hugetlb":
            return self.nbytes
        kb = smaps_field(self.address - self._off, "AnonHugePages")
        return None if kb is None else kb * 1024

    @property
    def address(self) -> int:
        return int(self.view.ctypes.data)

    def slot(self, s: int) -> np.ndarray:
        """Slot s as a numpy view."""
        return self.view[s * self.slot_bytes:(s + 1) * self.slot_bytes]

    def memoryview(self, start: int, stop: int) -> memoryview:
        """A writable memoryview of pool bytes [start, stop) (for preadv / Iovec)."""
        return self._mv[start:stop]

    def close(self) -> None:
        if self._mm is None:
            return
        self.view = None
        try:
            self._mv.release()
        except Exception:
            pass
        self._mv = None
        try:
            self._mm.close()
        except BufferError:
            pass  # someone still holds a view; the mapping goes away with it
        self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"BufferPool({self.nslots} x {self.slot_bytes} B = {self.nbytes >> 10} KiB, "
                f"{self.kind}; {self.note})")


# -- reuse within a process ----------------------------------------------------------------------
# Mapping a pool and faulting its pages in costs 20-220 ms (transparent hugepages: the kernel zeroes
# and may compact 2 MB pages). An iterator gives its pool back here when it closes, and the next
# one with the same geometry takes it (later trials, the next direction). At most SPARE_BYTES wait.
SPARE_BYTES = 256 << 20
_SPARE = []


def acquire(slot_bytes: int, nslots: int) -> BufferPool:
    for i, p in enumerate(_SPARE):
        if p.slot_bytes == slot_bytes and p.nslots == nslots and p._mm is not None:
            return _SPARE.pop(i)
    return BufferPool(slot_bytes, nslots)


def give_back(pool: BufferPool) -> None:
    if pool is None or pool._mm is None:
        return
    _SPARE.append(pool)
    while sum(p.nbytes for p in _SPARE) > SPARE_BYTES:
        _SPARE.pop(0).close()


def drop_spares() -> None:
    """Unmap every pool waiting for reuse."""
    while _SPARE:
        _SPARE.pop().close()
