"""All tunables of graphene_py in one place, with the default and the reason for each.

Numbers come from Graphene (Liu & Huang, FAST'17; dissertation Chapter 4); see
shared/design/GRAPHENE_FACTS.md. Every CLI option that tunes the engine defaults to a value here.
"""
import os
import re

#: Granularity of IO planning: one bit per block of an adjacency file. 512 B loads ~21% less data
#: than 4 KB pages on graph workloads (§4.4.1, Fig 4.4); 99% of requests are < 4 KB (Fig 4.3).
BLOCK_SIZE = 512

#: Adjacency/weight files are padded to a multiple of this many bytes, so any 512-byte aligned read
#: with O_DIRECT stays inside the file.
FILE_ALIGN = 512

#: Two runs of set blocks separated by at most this many unneeded blocks are merged into one IO.
#: 16 blocks (8 KB) was best for BFS on Twitter and UK (§4.4.3, Fig 4.6).
MAX_GAP_BLOCKS = 16

#: Upper bound on one IO request. 16 KB is Graphene's default (8-32 KB all good; > 1 MB grows
#: submission time, §4.4.3).
MAX_IO_BYTES = 16 * 1024

#: IOs in flight per disk. The device here peaks at QD ~64 (fio); Graphene: 16-64 contexts per SSD.
QUEUE_DEPTH = 64

#: IO workers (one io_uring ring + thread, QUEUE_DEPTH reads in flight each): "device" = one per
#: physical block device, disk folders on the same device share it (Graphene: one IO thread per
#: SSD); "disk" = one per disk folder. Per folder, k folders of one device get k x QUEUE_DEPTH
#: reads in flight and k IO threads; per device they get what a one-folder dataset gets. On this
#: machine's one virtual disk the two measured within noise (graphene_py/io/devices.py); separate
#: devices keep one worker each either way. Override: $GRAPHENE_IO_WORKERS or IoIterator(io_workers=).
IO_WORKERS = os.environ.get("GRAPHENE_IO_WORKERS", "device")

#: IO buffer pool size in MiB (fixed memory; the IO thread waits when consumers hold every chunk).
BUFFER_MB = 64

#: Verify the CRC32C of every 4 KB page read from SSD as it arrives (graphene_py/integrity.py); reads
#: are widened to whole pages. Neighbour IDs and weights are range-checked always, whatever this says.
#: `--check/--no-check` per run. Cost measured on kron22 in BENCHMARKS.md ("Integrity checks").
CHECK_PAGES = True

#: Frontier size (fraction of |V|) above which request translation scans the vertex bitmap instead of
#: walking the frontier queue. The C++ Graphene switches at 2% of |V|.
SCAN_THRESHOLD = 0.02

#: Edge-list chunk parsed per step by the readers (bytes of text).
READ_CHUNK_BYTES = 16 * 1024 * 1024

#: Default --memory-limit for partitioning: PARTITION_MEMORY, grown when the per-vertex arrays
#: need more, up to this fraction of physical RAM. A larger limit only made it slower: GAPBS's
#: kron22 text (`-s --in-edges`) took 13.6-16.1 s in 3.4 GiB at 6 GiB against 8.2-9.1 s in 583
#: MiB at 1G, Kronecker 24's 37.5-41.3 s in 3.1 GiB against 30.9 s in 529 MiB (the edge batches
#: and bucket sorts outgrow the caches; BENCHMARKS.md, "Partitioning kron22's text").
MEMORY_LIMIT_FRACTION = 0.25
PARTITION_MEMORY = 1 << 30

#: Fixed seed for random sources (GAPBS habit: reproducible runs).
SEED = 27491095

#: PageRank (GAPBS): damping, tolerance on the L1 change, iteration cap.
PR_ALPHA = 0.85
PR_TOLERANCE = 1e-4
PR_MAX_ITERS = 20

#: Where the dataset registry lives (`graphene list`). Override with $GRAPHENE_HOME.
def home_dir() -> str:
    return os.environ.get("GRAPHENE_HOME", os.path.join(os.path.expanduser("~"), ".graphene"))


def default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


def vm_bytes(field: str) -> int:
    """A size line of /proc/self/status in bytes ("VmRSS", "VmHWM", ...); 0 where unknown."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(i?b?)\s*$", re.I)


def parse_size(text) -> int:
    """'4G', '512M', '1.5g', '100000' (bytes) -> bytes (powers of 1024)."""
    import numpy as np
    from .errors import GrapheneError
    if isinstance(text, (int, np.integer)):
        v = int(text)
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise GrapheneError(f"bad memory size {text!r} (use e.g. 4G, 512M, 100000)")
        mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m[2].lower()]
        v = int(float(m[1]) * mult)
    if v < (1 << 20):
        raise GrapheneError(f"memory limit {text} is too small (at least 1M)")
    return v
