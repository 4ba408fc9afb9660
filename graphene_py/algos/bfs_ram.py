"""BFS on the in-memory path (`in_memory=True`): GAPBS's direction-optimizing loop over the lists
in RAM, without the engine's superstep machinery.

The engine's superstep (plan extents, cut them into rows, a callback per list, a pull mask) is
what the SSD path needs; in RAM it cost ~2.5x GAPBS's own bottom-up step per level on kron22
(0.15 s against 0.056 s at level 2). Here each level is one nogil kernel per compute thread over
the iterator's lists (`IoIterator.ram_lists`: every partition of the grid, global neighbour IDs),
the threads taking chunks by an atomic counter:

- top-down: the frontier is a slice of one queue (the SSD path's sliding queue); a neighbour is
  claimed by a fetch-or on its visited bit, its parent set and appended behind the frontier; the
  kernel adds up the found vertices' out-degrees (GAPBS's scout count);
- bottom-up: each thread owns whole 64-vertex words; an unvisited vertex scans its in-list (the
  out-list when undirected) and takes the first neighbour in the frontier's bitmap. No atomics:
  a word's visited and next bits are written by its owner only. The found vertices are then
  appended to the queue in vertex order, and `next` becomes the frontier's bitmap.

Direction as GAPBS (Beamer et al.): go bottom-up when the frontier's out-edges exceed 1/15 of the
edges not yet checked; back top-down when a bottom-up level wakes fewer vertices than the one
before and fewer than n/18. Depths come from the queue's levels at the end, as on the SSD path.
Results equal the SSD path's: the same depths, a valid parent for every vertex.
"""
from __future__ import annotations

import time

import numpy as np

from ..io.bitmap import ctz64, popcount64
from ..iterator.atomics import atomic_add, atomic_or
from ..iterator.queue import push, squeeze_from
from ..iterator.memory import track
from ..iterator.ramlists import RamLists, degree, list_span, row_of, step_stats
from ..jit import njit

ALPHA = 15       # top-down -> bottom-up when scout > edges_to_check / ALPHA (GAPBS)
BETA = 18        # bottom-up -> top-down when awake < n / BETA and shrinking (GAPBS)
TD_CHUNK = 1024  # frontier vertices a thread takes at a time (at most; fewer on small frontiers)
SAMPLE = 4096    # frontier vertices whose degrees estimate the scout count
BU_WORDS = 256   # 64-vertex words a thread takes at a time (16,384 vertices)


@njit(cache=True, nogil=True)
def _top_down(tid, counter, chunk, q, fs, fe, buf, offs, row_lo, row_part, pbase, plo, ebase,
              visited, parent, tail, cur, out):
    """Thread tid's share of one top-down level over q[fs:fe]; out[tid, 0] = edges scanned."""
    edges = 0
    while True:
        c = atomic_add(counter, 0, np.int64(1))
        lo = fs + c * chunk
        if lo >= fe:
            break
        hi = min(fe, lo + chunk)
        for k in range(lo, hi):
            v = np.int64(q[k])
            r = row_of(row_lo, v)
            for j in range(row_part[r], row_part[r + 1]):
                eb = ebase[j]
                if eb < 0:
                    continue
                s, e = list_span(offs, pbase, plo, j, v)
                edges += e - s
                for i in range(eb + s, eb + e):
                    u = np.int64(buf[i])
                    w = u >> 6
                    bit = np.uint64(1) << np.uint64(u & 63)
                    if visited[w] & bit == 0:
                        if atomic_or(visited, w, bit) & bit == 0:
                            if parent.shape[0]:
                                parent[u] = v
                            push(q, tail, cur, tid, u)
    out[tid, 0] = edges


@njit(cache=True, nogil=True)
def _bottom_up(tid, counter, n, buf, offs, row_lo, row_part, pbase, plo, ebase, visited, front,
               nxt, parent, out):
    """Thread tid's share of one bottom-up level; out[tid] = (edges examined, vertices found)."""
    nw = visited.shape[0]
    edges = 0
    awake = 0
    while True:
        c = atomic_add(counter, 0, np.int64(1))
        w0 = c * BU_WORDS
        if w0 >= nw:
            break
        w1 = min(nw, w0 + BU_WORDS)
        r = row_of(row_lo, w0 * 64)
        for w in range(w0, w1):
            vis = visited[w]
            if vis == np.uint64(0xFFFFFFFFFFFFFFFF):
                continue
            new = np.uint64(0)
            for v in range(w * 64, min(n, w * 64 + 64)):
                bit = np.uint64(1) << np.uint64(v & 63)
                if vis & bit:
                    continue
                while v >= row_lo[r + 1]:
                    r += 1
                found = False
                for j in range(row_part[r], row_part[r + 1]):
                    eb = ebase[j]
                    if eb < 0:
                        continue
                    b = pbase[j] + v - plo[j]
                    s = np.int64(offs[b])
                    e = np.int64(offs[b + 1])
                    for i in range(eb + s, eb + e):
                        u = np.int64(buf[i])
                        if front[u >> 6] & (np.uint64(1) << np.uint64(u & 63)):
                            if parent.shape[0]:
                                parent[v] = u
                            new |= bit
                            found = True
                            edges += i - eb - s + 1
                            break
                    if found:
                        break
                    edges += e - s
            if new:
                visited[w] = vis | new
                nxt[w] = new
                awake += popcount64(new)
    out[tid, 0] = edges
    out[tid, 1] = awake


@njit(cache=True, nogil=True)
def _bottom_up_csr(tid, counter, n, buf, offs, eb, visited, front, nxt, parent, out):
    """_bottom_up on a 1x1 grid: one list per vertex, offs[v]..offs[v + 1] from buf[eb]."""
    nw = visited.shape[0]
    edges = 0
    awake = 0
    while True:
        c = atomic_add(counter, 0, np.int64(1))
        w0 = c * BU_WORDS
        if w0 >= nw:
            break
        w1 = min(nw, w0 + BU_WORDS)
        for w in range(w0, w1):
            vis = visited[w]
            if vis == np.uint64(0xFFFFFFFFFFFFFFFF):
                continue
            new = np.uint64(0)
            for v in range(w * 64, min(n, w * 64 + 64)):
                bit = np.uint64(1) << np.uint64(v & 63)
                if vis & bit:
                    continue
                s = eb + np.int64(offs[v])
                e = eb + np.int64(offs[v + 1])
                i = s
                while i < e:
                    u = np.int64(buf[i])
                    if front[u >> 6] & (np.uint64(1) << np.uint64(u & 63)):
                        if parent.shape[0]:
                            parent[v] = u
                        new |= bit
                        i += 1
                        break
                    i += 1
                edges += i - s
            if new:
                visited[w] = vis | new
                nxt[w] = new
                awake += popcount64(new)
    out[tid, 0] = edges
    out[tid, 1] = awake


@njit(cache=True)
def _scout(q, lo, hi, offs, row_lo, row_part, pbase, plo):
    """GAPBS's scout count, the out-edges of q[lo:hi]: exact up to SAMPLE vertices, else
    estimated from SAMPLE of them evenly spaced (each read is a cache miss; the count only
    steers the direction choice)."""
    m = hi - lo
    if m <= 0:
        return 0
    step = 1 if m <= SAMPLE else m // SAMPLE
    s = 0
    k = lo
    c = 0
    while k < hi:
        s += degree(offs, row_lo, row_part, pbase, plo, np.int64(q[k]))
        c += 1
        k += step
    return s * m // c


@njit(cache=True)
def _bits_to_queue(bits, q, at):
    """Append the set bits' vertices to q from q[at] on, in vertex order; returns the count."""
    k = at
    for w in range(bits.shape[0]):
        x = bits[w]
        while x:
            q[k] = w * 64 + np.int64(ctz64(x))
            k += 1
            x &= x - np.uint64(1)
    return k - at


@njit(cache=True)
def _bits_from_queue(bits, q, lo, hi):
    bits[:] = 0
    for k in range(lo, hi):
        u = q[k]
        bits[u >> 6] |= np.uint64(1) << np.uint64(u & 63)


def usable(em) -> bool:
    """Whether this EdgeMap's lists can be walked here: a local run with every list in RAM."""
    return RamLists.of(em, "out") is not None


def levels(em, src, parent, q, visited, front, bottom_up, progress, steps, up_dir=None):
    """Run every level from `src` (already visited, parent set, q[0] == src). Returns the queue's
    level starts (level l is q[starts[l]:starts[l + 1]]). `front`: a zeroed bitmap row to use.
    An empty `parent` row: no parents are written (WCC needs only who was reached). `up_dir`:
    the lists bottom-up levels read (default em.pull_dir; "out" on an undirected dataset)."""
    n = em.n
    down = RamLists.of(em, "out")
    up_dir = em.pull_dir if up_dir is None else up_dir
    up = RamLists.of(em, up_dir) if (bottom_up and up_dir is not None) else None
    threads = down.threads
    tail = np.zeros(1, dtype=np.int64)
    cur = np.zeros((threads, 8), dtype=np.int64)
    buf, offs, row_lo, row_part, pbase, plo, ebase = down.table
    nxt = track("next bitmap", np.zeros_like(visited)) if up is not None else None
    starts = [0]
    fs, fe = 0, 1
    edges_to_check = int(em.graph.num_edges)
    scout = int(degree(offs, row_lo, row_part, pbase, plo, src)) if n else 0
    always = bottom_up == "always"
    bu_last = None          # frontier size before the last bottom-up level; None: top-down now
    level = 0
    while fe > fs:
        t0 = time.perf_counter()
        size = fe - fs
        go_up = up is not None and (always or (
            scout > edges_to_check / ALPHA if bu_last is None else
            (size >= bu_last or size > n / BETA)))
        if go_up:
            if bu_last is None:              # entering bottom-up: the frontier's bitmap
                _bits_from_queue(front, q, fs, fe)
            c, out = up.counter, up.out
            if up.csr is not None:           # a 1x1 grid
                ub, uoffs, ueb = up.csr

                def job(tid):
                    _bottom_up_csr(tid, c, n, ub, uoffs, ueb, visited, front, nxt, parent, out)
            else:
                ut = up.table

                def job(tid):
                    _bottom_up(tid, c, n, *ut, visited, front, nxt, parent, out)
            res = up.run(job)
            found = int(_bits_to_queue(nxt, q, fe))
            front, nxt = nxt, front
            nxt[:] = 0
            bu_last = size
            direction, mode = "bottom-up", "scan"
            scout = 1
        else:
            bu_last = None
            edges_to_check -= scout
            tail[0] = fe
            chunk = max(1, min(TD_CHUNK, size // (4 * threads)))
            c, out = down.counter, down.out

            def job(tid):
                _top_down(tid, c, chunk, q, fs, fe, buf, offs, row_lo, row_part, pbase, plo,
                          ebase, visited, parent, tail, cur, out)
            res = down.run(job)
            found = int(squeeze_from(q, tail, cur, fe))
            scout = int(_scout(q, fe, fe + found, offs, row_lo, row_part, pbase, plo))
            direction, mode = "top-down", "queue"
        dt = time.perf_counter() - t0
        st = step_stats(size, res[:, 0].sum(), dt, mode, direction=direction, level=level,
                        found=found)
        steps.append(st)
        if progress is not None:
            progress(st)
        fs, fe = fe, fe + found
        starts.append(fs)
        level += 1
    return starts
