"""A direction's short-list file in RAM: masked supersteps served from it (issue 11).

The partitioner writes every list of degree 1..D a second time, grouped by degree
(partition/short.py). An algorithm whose next supersteps read many short lists at random
places (k-core membership's first round: every vertex of degree below K) asks for the groups
it needs:

    sf = em.short_lists("out", upto=K)     # None: no file, lists elsewhere, or no room
    st = em.masked(state, update, mask)    # the flagged vertices in the file: from RAM

The groups 1..upto are one read from the file's start (buffered: the kernel's read-ahead reads
it in large requests), checked (CRC32C per group, every ID below n, each group's vertices
increasing), and held until the EdgeMap closes, inside the run's cache budget (`--memory`): a
run with no budget, or none left, reads every list from the partition files as before. A
masked superstep then computes the flagged vertices whose lists are in RAM on every compute
thread (kernels.serve_short; each thread a share of every group), and the disks serve only the
rest. Unweighted: an update that reads weights does not use it.
"""
from __future__ import annotations

import time

import numpy as np

from ..jit import njit
from .memory import track_bytes
from .. import integrity as _ig


@njit(cache=True, nogil=True)
def _check_group(recs, base, d, count, n):
    """-1 when group d's records (from entry base) hold IDs below n with increasing vertices;
    else the entry index of the first bad one."""
    p = base
    last = -1
    for _ in range(count):
        v = np.int64(recs[p])
        if v >= n or v <= last:
            return p
        last = v
        for j in range(1, d + 1):
            if np.int64(recs[p + j]) >= n:
                return p + j
        p += d + 1
    return -1


class ShortFile:
    """Groups 1..upto of a direction's short-list file, read and checked."""

    def __init__(self, graph, direction: str, upto: int):
        from .. import _uring
        from ..partition.short import group_bytes
        ent, path = graph.short_lists(direction)
        self.direction, self.path = direction, path
        counts = [int(c) for c in ent["counts"]]
        D = max(0, min(int(upto), len(counts)))
        w = int(ent["id_width"])
        dt = np.uint32 if w == 4 else np.uint64
        nbytes = group_bytes(ent, D)
        t0 = time.perf_counter()
        self.recs = np.empty(nbytes // w, dtype=dt)
        raw = memoryview(self.recs).cast("B")
        with open(path, "rb", buffering=0) as f:
            got = 0
            while got < nbytes:
                k = f.readinto(raw[got:])
                if not k:
                    raise _ig._damaged(path, f"it ends after {got} bytes, and its lists of "
                                             f"degree 1..{D} take {nbytes}")
                got += k
        self.read_seconds = time.perf_counter() - t0
        self.bytes = nbytes
        self.gdeg = np.arange(1, D + 1, dtype=np.int64)
        self.gcount = np.array(counts[:D], dtype=np.int64)
        self.gbase = np.zeros(D, dtype=np.int64)
        if D:
            self.gbase[1:] = np.cumsum(self.gcount * (self.gdeg + 1))[:-1]
        n = np.int64(graph.num_vertices)
        for g in range(D):
            a = int(self.gbase[g]) * w
            b = a + int(self.gcount[g]) * (g + 2) * w
            crc = f"{_uring.crc32c(raw[a:b], 0):08x}"
            if crc != ent["crc32c"][g]:
                raise _ig._damaged(path, f"the lists of degree {g + 1} (bytes {a}..{b}) have "
                                         f"CRC32C {crc}, the dataset recorded "
                                         f"{ent['crc32c'][g]}")
            bad = _check_group(self.recs, self.gbase[g], np.int64(g + 1), self.gcount[g], n)
            if bad >= 0:
                raise _ig._damaged(path, f"ID {int(self.recs[bad])} at byte offset {bad * w} "
                                         f"is not a vertex of this graph in order (n = {int(n)})")
        self.degree_max = D
        self.edges = int((self.gcount * self.gdeg).sum())
        self.seconds = time.perf_counter() - t0
        self.counted = False        # (its read is reported with the first superstep it serves)
        track_bytes(f"adjacency cache: short lists ({direction})", self.recs.nbytes)

    def serve(self, em, is_active, compute, state, mask, rest) -> int:
        """The flagged vertices of `mask` whose lists are here, on every compute thread; rest[v]
        becomes 0 for each of them (rest: a copy of mask). Returns the edges computed."""
        from .specialize import kernel_for
        kern = kernel_for(is_active, compute, "serve_short")
        T = max(1, em.threads)
        edges = np.zeros(T, dtype=np.int64)
        wb = np.zeros(0, dtype=np.float32)

        def job(t):
            edges[t] = kern.call(state, np.int64(t), mask, rest, self.recs, self.gdeg,
                                 self.gbase, self.gcount, np.int64(t), np.int64(T), wb)
        em.on_threads(job)
        return int(edges.sum())
