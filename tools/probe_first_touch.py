#!/usr/bin/env python3
"""How long fresh anonymous memory takes to come in, four ways, each in a fresh process on a
dropped page cache (root): first writes from user space (one byte per 4 KB page) to 4 KB pages
(MADV_NOHUGEPAGE, as the adjacency cache's: "touch_4k") and to a plain numpy array (which numpy
asks to be in transparent huge pages: "touch_numpy"), the kernel populating 4 KB pages
(MADV_POPULATE_WRITE, Linux >= 5.14), mmap(MAP_POPULATE), and a copy of as many bytes (from
memory already faulted in, as the IO buffers are) into fresh 4 KB pages ("copy_4k", as the
adjacency cache is filled; its second copy is the copy alone).

    sudo .venv/bin/python tools/probe_first_touch.py --mib 512 --rounds 2

Prints one line per run: the way, its seconds, and a second touch of the same pages (the
pages are then there: this is the floor of the write loop itself).
"""
import argparse
import ctypes
import mmap
import os
import subprocess
import sys
import time

WAYS = ("touch_4k", "touch_numpy", "populate", "map_populate", "copy_4k")


def one(way, nbytes):
    import numpy as np
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    src = None
    if way == "copy_4k":
        src = np.ones(nbytes, np.uint8)        # faulted in before the clock starts
    t0 = time.perf_counter()
    if way == "touch_numpy":
        a = np.empty(nbytes, np.uint8)
        a[::4096] = 1
    elif way in ("touch_4k", "populate", "copy_4k"):
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        a = np.frombuffer(m, np.uint8)
        libc.madvise(a.ctypes.data, nbytes, 15)                  # MADV_NOHUGEPAGE
        if way == "touch_4k":
            a[::4096] = 1
        elif way == "copy_4k":
            np.copyto(a, src)
        elif libc.madvise(a.ctypes.data, nbytes, 23) != 0:      # MADV_POPULATE_WRITE
            raise OSError(ctypes.get_errno(), "madvise(MADV_POPULATE_WRITE)")
    else:
        m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x8000)
        a = np.frombuffer(m, np.uint8)
    t1 = time.perf_counter()
    if way == "copy_4k":
        np.copyto(a, src)
    else:
        a[::4096] = 2
    t2 = time.perf_counter()
    print(f"{way:13s} {t1 - t0:.3f} s  (second touch {t2 - t1:.3f} s)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--one", choices=WAYS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        return one(a.one, a.mib << 20)
    for _ in range(a.rounds):
        for way in WAYS:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            subprocess.run([sys.executable, __file__, "--mib", str(a.mib), "--one", way],
                           check=True)


if __name__ == "__main__":
    sys.exit(main())
