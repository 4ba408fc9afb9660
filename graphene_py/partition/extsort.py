"""Sorting edges into CSR, in memory or externally (spilled runs grouped by source + merge).

`sort_to_csr` turns one batch of edges into CSR sorted by (src, dst[, weight]): a counting sort by
source (O(m), no comparison sort of the whole batch) followed by a sort of each adjacency list
(numba, parallel over vertices). Self-loops are removed during the scatter and duplicates while the
lists are compacted; of duplicate edges the smallest weight is kept (order-independent, so the
result does not depend on how the input was split into runs, and symmetric for --symmetrize).

`BucketSorter` is used when the edges do not fit in the memory limit (`Batcher`): each full
batch is distributed by source range into bucket files (reversed edges added, self-loops
dropped), written and read in whole pages with O_DIRECT; then the buckets are sorted one at a
time in memory (`sort_to_csr`: sorted, deduplicated lists) and come out in vertex order, to be
written as they come (a 1x1 dataset: `BucketStore`) or into one merged `SpilledCSR` (a grid,
whose bounds need a pass over every list first). No step costs O(|V|) per batch.

`ExternalSorter` sorts a bucket that alone exceeds the memory: the bucket read in pieces, each
grouped by source into a CSR *run* (its lists unsorted: the merge sorts them whole) spilled to
disk (list lengths in a byte per vertex, indices, weights). Because a run is CSR, the edges of a
vertex block [v0, v1) are one contiguous range in every run; the merge reads that range from
every run, gathers it into the block's CSR slots and sorts/dedups it per vertex (the same
kernel), one vertex block at a time, with block sizes chosen so the block's edges over all runs
fit the budget.
"""
from __future__ import annotations

import bisect
import contextlib
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit, prange

from ..jit import prefetch
from .direct import (ALIGN, DirectAppender, aligned_array, io_pool, open_direct, pread_all,
                     pwrite_all, read_range)
from .scratch import read_into, scratch_array

# Bytes of memory one edge costs while a batch is being sorted: input src+dst int64 (16) + weight (4)
# + output indices int64 (8) + weight (4) + slack for compaction.
BYTES_PER_EDGE_SORT = 40


# ----------------------------------------------------------------------------------------------
# kernels
#: Edges per batch at most: symmetrized, under 2^31 slots, so the counting sort's rows are int32.
MAX_BATCH_EDGES = (1 << 30) - 1

#: Most edge-list parts count and scatter in parallel: each part has its own count row, so its
#: (random) writes need no atomics. T rows of |V|+1 int64 are part of the per-vertex memory
#: (partitioner.BYTES_PER_VERTEX assumes at most 4).
MAX_SCATTER_PARTS = 4


#: how many edges ahead the counting sort asks for the counters (and slots) it will touch: its
#: increments and scatters land anywhere in 8 bytes per vertex, mostly outside the caches
AHEAD = 16


@njit(cache=True, nogil=True)
def _count_part(src, dst, lo, hi, sym, drop_self, c):
    loops = 0
    for i in range(lo, hi):
        if i + AHEAD < hi:
            prefetch(c, src[i + AHEAD] + 1)
            if sym:
                prefetch(c, dst[i + AHEAD] + 1)
        s = src[i]
        d = dst[i]
        if s == d:
            loops += 1
            if drop_self:
                continue
            c[s + 1] += 1
            continue
        c[s + 1] += 1
        if sym:
            c[d + 1] += 1
    return loops


@njit(parallel=True, cache=True, nogil=True)
def _count(src, dst, sym, drop_self, counts):
    """counts[t, v + 1] += the edges of source v (and of dst v when sym) in part t of the chunk
    (T = counts.shape[0] equal parts). Returns the self-loops seen."""
    T = counts.shape[0]
    m = src.shape[0]
    loops = np.zeros(T, dtype=np.int64)
    for t in prange(T):
        loops[t] = _count_part(src, dst, m * t // T, m * (t + 1) // T, sym, drop_self, counts[t])
    return loops.sum()


@njit(parallel=True, cache=True, nogil=True)
def count_ids(hists, idx):
    """hists[t, v] += the occurrences of v in part t of idx (T = hists.shape[0] equal parts)."""
    T = hists.shape[0]
    m = idx.shape[0]
    for t in prange(T):
        h = hists[t]
        for i in range(m * t // T, m * (t + 1) // T):
            h[np.int64(idx[i])] += 1


@njit(cache=True, nogil=True)
def prefix_of_counts(hists, cum):
    """cum[0] = 0, cum[v + 1] = cum[v] + the sum over t of hists[t, v]."""
    c = np.int64(0)
    cum[0] = 0
    for v in range(hists.shape[1]):
        for t in range(hists.shape[0]):
            c += hists[t, v]
        cum[v + 1] = c


@njit(cache=True, nogil=True)
def _positions(indptr, counts):
    """counts[t, v + 1] -> the first slot of part t's edges of v (indptr[v] + the parts before)."""
    T = counts.shape[0]
    for v in range(indptr.shape[0] - 1):
        acc = indptr[v]
        for t in range(T):
            c = counts[t, v + 1]
            counts[t, v + 1] = acc
            acc += c


@njit(cache=True, nogil=True)
def _sum_counts(counts, indptr):
    """indptr[v] = the edges of every part's vertices before v (counts[t, v + 1]: part t's edges
    of v): the parts' sum and its prefix sum in one pass, no n-sized temporary."""
    acc = 0
    for v in range(indptr.shape[0]):
        for t in range(counts.shape[0]):
            acc += counts[t, v]
        indptr[v] = acc


#: a spilled run's list length of RUN_ESCAPE or more is kept in its escape arrays (in memory)
RUN_ESCAPE = 255


@njit(cache=True, nogil=True)
def _run_degrees(indptr, total, deg, esc_v, esc_d):
    """One pass over a run's indptr: total[v] += v's list length, deg[v] = that length in a byte
    (RUN_ESCAPE and the length in (esc_v, esc_d) when it does not fit). Returns the escapes."""
    k = 0
    for v in range(indptr.shape[0] - 1):
        d = indptr[v + 1] - indptr[v]
        total[v] += d
        if d < RUN_ESCAPE:
            deg[v] = d
        else:
            deg[v] = RUN_ESCAPE
            esc_v[k] = v
            esc_d[k] = d
            k += 1
    return k


@njit(cache=True, nogil=True)
def _run_offsets(deg, esc_v, esc_d, e, v0, start, lp):
    """lp[0] = start, lp[i + 1] = lp[i] + the length of run vertex v0 + i (deg, or the escape
    arrays from index e on: esc_v is sorted)."""
    acc = start
    lp[0] = acc
    for i in range(deg.shape[0]):
        d = deg[i]
        if d == RUN_ESCAPE:
            while esc_v[e] < v0 + i:
                e += 1
            acc += esc_d[e]
        else:
            acc += d
        lp[i + 1] = acc


@njit(cache=True, nogil=True)
def _scatter_part(src, dst, lo, hi, w, has_w, sym, drop_self, q, out_idx, out_w):
    for i in range(lo, hi):
        if i + AHEAD < hi:
            prefetch(q, src[i + AHEAD] + 1)
            if sym:
                prefetch(q, dst[i + AHEAD] + 1)
        if i + AHEAD // 2 < hi:        # the slots: where those counters point by now
            prefetch(out_idx, q[src[i + AHEAD // 2] + 1])
            if sym:
                prefetch(out_idx, q[dst[i + AHEAD // 2] + 1])
        s = src[i]
        d = dst[i]
        if s == d and drop_self:
            continue
        p = q[s + 1]
        out_idx[p] = d
        if has_w:
            out_w[p] = w[i]
        q[s + 1] = p + 1
        if sym and s != d:
            p = q[d + 1]
            out_idx[p] = s
            if has_w:
                out_w[p] = w[i]
            q[d + 1] = p + 1


@njit(parallel=True, cache=True, nogil=True)
def _scatter(src, dst, w, has_w, sym, drop_self, pos, out_idx, out_w):
    """Part t of the chunk writes its edges at pos[t, v + 1] (advanced): disjoint slots per part."""
    T = pos.shape[0]
    m = src.shape[0]
    for t in prange(T):
        _scatter_part(src, dst, m * t // T, m * (t + 1) // T, w, has_w, sym, drop_self, pos[t],
                      out_idx, out_w)


@njit(cache=True, nogil=True)
def _less(a_i, a_w, b_i, b_w, has_w):
    if a_i != b_i:
        return a_i < b_i
    if has_w:
        return a_w < b_w
    return False


@njit(cache=True, inline="always")
def _swap(idx, w, i, j, has_w):
    t = idx[i]
    idx[i] = idx[j]
    idx[j] = t
    if has_w:
        tw = w[i]
        w[i] = w[j]
        w[j] = tw


@njit(cache=True, nogil=True)
def _insertion(idx, w, a, b, has_w):
    for i in range(a + 1, b):
        xi = idx[i]
        xw = w[i] if has_w else np.float32(0)
        j = i - 1
        while j >= a and _less(xi, xw, idx[j], w[j] if has_w else np.float32(0), has_w):
            idx[j + 1] = idx[j]
            if has_w:
                w[j + 1] = w[j]
            j -= 1
        idx[j + 1] = xi
        if has_w:
            w[j + 1] = xw


@njit(cache=True, nogil=True)
def _sort_list(idx, w, a, b, has_w):
    """In-place sort of idx[a:b] (with w[a:b] alongside) by (idx, w): quicksort with median-of-3
    pivots and an explicit stack (smaller side first, so <= 64 levels), insertion sort below 24.
    Short lists (the most) allocate nothing."""
    if b - a <= 24:
        _insertion(idx, w, a, b, has_w)
        return
    stack = np.empty((64, 2), dtype=np.int64)
    sp = 0
    lo = a
    hi = b
    while True:
        while hi - lo > 24:
            mid = (lo + hi) >> 1
            l1 = hi - 1
            # median of three to idx[mid]
            if _less(idx[mid], w[mid] if has_w else np.float32(0), idx[lo],
                     w[lo] if has_w else np.float32(0), has_w):
                _swap(idx, w, mid, lo, has_w)
            if _less(idx[l1], w[l1] if has_w else np.float32(0), idx[mid],
                     w[mid] if has_w else np.float32(0), has_w):
                _swap(idx, w, l1, mid, has_w)
                if _less(idx[mid], w[mid] if has_w else np.float32(0), idx[lo],
                         w[lo] if has_w else np.float32(0), has_w):
                    _swap(idx, w, mid, lo, has_w)
            pi = idx[mid]
            pw = w[mid] if has_w else np.float32(0)
            i = lo
            j = hi - 1
            while i <= j:                       # Hoare-style partition around (pi, pw)
                while _less(idx[i], w[i] if has_w else np.float32(0), pi, pw, has_w):
                    i += 1
                while _less(pi, pw, idx[j], w[j] if has_w else np.float32(0), has_w):
                    j -= 1
                if i <= j:
                    _swap(idx, w, i, j, has_w)
                    i += 1
                    j -= 1
            # [lo, j] <= pivot <= [i, hi)
            if j + 1 - lo < hi - i:
                stack[sp, 0] = i
                stack[sp, 1] = hi
                hi = j + 1
            else:
                stack[sp, 0] = lo
                stack[sp, 1] = j + 1
                lo = i
            sp += 1
        _insertion(idx, w, lo, hi, has_w)
        if sp == 0:
            break
        sp -= 1
        lo = stack[sp, 0]
        hi = stack[sp, 1]


#: Unweighted lists of at least this many entries are sorted by LSD radix (two passes of 11-12
#: bits below 2^24 vertices) instead of quicksort (tools/bench_sort_lists.py: kron22's lists with
#: random IDs, 2 threads, 17.6 ns per edge -> 5.6; thresholds from 64 to 256 did about equally).
RADIX_MIN = 128


@njit(cache=True, nogil=True)
def _radix_list(idx, a, b):
    """In-place LSD radix sort of idx[a:b] (non-negative IDs): digits of <= 12 bits, as many
    passes as the list's largest ID needs, through a scratch copy of the list."""
    mx = 0
    for i in range(a, b):
        x = np.int64(idx[i])
        if x > mx:
            mx = x
    bits = 1
    while (mx >> bits) != 0:
        bits += 1
    passes = (bits + 11) // 12
    db = (bits + passes - 1) // passes
    mask = (1 << db) - 1
    cnt = np.empty(1 << db, dtype=np.int64)
    tmp = np.empty(b - a, dtype=idx.dtype)
    m = b - a
    in_idx = True
    for p in range(passes):
        sh = p * db
        cnt[:] = 0
        if in_idx:
            for i in range(a, b):
                cnt[(np.int64(idx[i]) >> sh) & mask] += 1
        else:
            for i in range(m):
                cnt[(np.int64(tmp[i]) >> sh) & mask] += 1
        acc = 0
        for d in range(mask + 1):
            c = cnt[d]
            cnt[d] = acc
            acc += c
        if in_idx:
            for i in range(a, b):
                x = idx[i]
                d = (np.int64(x) >> sh) & mask
                tmp[cnt[d]] = x
                cnt[d] += 1
        else:
            for i in range(m):
                x = tmp[i]
                d = (np.int64(x) >> sh) & mask
                idx[a + cnt[d]] = x
                cnt[d] += 1
        in_idx = not in_idx
    if not in_idx:
        for i in range(m):
            idx[a + i] = tmp[i]


#: Parallel loops over lists run over this many pieces per thread, each with about the same
#: number of edges (a static split by vertex puts the hubs of a graph whose hubs have the low IDs
#: on one thread while the others wait: tools/bench_sort_lists.py, hubs first, 10.2 -> 7.9 ns
#: per edge).
PIECES_PER_THREAD = 16


@njit(cache=True, nogil=True)
def _edge_pieces(indptr, k):
    """k + 1 vertex bounds splitting the lists of indptr into k pieces of about equal edges."""
    n = indptr.shape[0] - 1
    bounds = np.empty(k + 1, dtype=np.int64)
    e0 = indptr[0]
    tot = indptr[n] - e0
    bounds[0] = 0
    for c in range(1, k):
        bounds[c] = max(bounds[c - 1], np.searchsorted(indptr[:n], e0 + tot * c // k))
    bounds[k] = n
    return bounds


def _sort_lists(indptr, idx, w, has_w, dedupe, newdeg):
    """Sort (and with dedupe deduplicate) every list of the CSR in place; newdeg[v] = v's new
    length."""
    _sort_pieces(indptr, idx, w, has_w, dedupe, newdeg, _pieces())


def _pieces() -> int:
    # numba.get_num_threads() inside a kernel is a dynamic global: the kernel would not cache
    return numba.get_num_threads() * PIECES_PER_THREAD


@njit(parallel=True, cache=True, nogil=True)
def _sort_pieces(indptr, idx, w, has_w, dedupe, newdeg, pieces):
    bounds = _edge_pieces(indptr, pieces)
    for c in prange(bounds.shape[0] - 1):
        for v in range(bounds[c], bounds[c + 1]):
            _sort_dedupe(indptr, idx, w, has_w, dedupe, newdeg, v)


@njit(cache=True, nogil=True)
def _sort_dedupe(indptr, idx, w, has_w, dedupe, newdeg, v):
    a = indptr[v]
    b = indptr[v + 1]
    if not has_w and b - a >= RADIX_MIN:
        _radix_list(idx, a, b)
    else:
        _sort_list(idx, w, a, b, has_w)
    if dedupe and b - a > 1:
        # sorted by (dst, weight): the first of equal dsts has the smallest weight
        k = a + 1
        for i in range(a + 1, b):
            if idx[i] != idx[k - 1]:
                idx[k] = idx[i]
                if has_w:
                    w[k] = w[i]
                k += 1
        newdeg[v] = k - a
    else:
        newdeg[v] = b - a


@njit(cache=True, nogil=True)
def _compact(indptr, newptr, idx, w, has_w):
    """Close the gaps left by deduplication, in place (serial: later lists move down)."""
    n = indptr.shape[0] - 1
    for v in range(n):
        a = indptr[v]
        o = newptr[v]
        if a == o:
            continue
        for j in range(newptr[v + 1] - o):
            idx[o + j] = idx[a + j]
            if has_w:
                w[o + j] = w[a + j]


@njit(parallel=True, cache=True, nogil=True)
def _scatter_run(lp, ridx, rw, has_w, pos, out_idx, out_w, pieces):
    """One run's lists of a vertex block (local indptr lp, its indices/weights from lp[0])
    appended to each vertex's slots at pos[v] (advanced): the merge's gather, no source array."""
    base = lp[0]
    bounds = _edge_pieces(lp, pieces)
    for c in prange(bounds.shape[0] - 1):
        for v in range(bounds[c], bounds[c + 1]):
            a = lp[v] - base
            b = lp[v + 1] - base
            p = pos[v]
            for e in range(a, b):
                out_idx[p + e - a] = ridx[e]
                if has_w:
                    out_w[p + e - a] = rw[e]
            pos[v] = p + b - a


def idx_dtype(n: int):
    """Indices dtype while sorting: uint32 when every vertex ID fits (half the memory traffic)."""
    return np.dtype(np.uint32) if n <= (1 << 32) else np.dtype(np.int64)


_EMPTY_W = np.zeros(0, dtype=np.float32)


def sort_to_csr(src, dst, weights, n, *, symmetrize=False, drop_self_loops=True, dedupe=True,
                base=0, sort_lists=True, scratch=None, idx_n=None):
    """Edges (src, dst int64 in [base, base+n); arrays, or lists of chunk arrays, so a batch needs
    no concatenation copy) -> (indptr int64[n+1] local to base, indices (uint32, or int64 past 2^32
    vertices: `idx_dtype`), weights float32|None, self_loops_seen). Lists sorted by (dst, weight);
    duplicates removed when `dedupe` (smallest weight kept). `sort_lists=False`: grouped by source
    only, each list in input order and nothing deduplicated (a spilled run: the merge sorts and
    deduplicates every list anyway). scratch: a dict whose arrays are reused across calls
    (scratch_array); the returned arrays are then views of them, valid until the next call.
    idx_n: the vertex count the indices' dtype must hold (default base + n; a bucket's sources
    are local, its destinations global)."""
    if not isinstance(src, (list, tuple)):
        src, dst = [src], [dst]
        weights = None if weights is None else [weights]
    has_w = weights is not None
    if symmetrize and base:
        raise ValueError("symmetrize needs base 0")
    chunks = []
    for i in range(len(src)):
        s = np.ascontiguousarray(src[i], dtype=np.int64)
        if base:
            s = s - base
        chunks.append((s, np.ascontiguousarray(dst[i], dtype=np.int64),
                       np.ascontiguousarray(weights[i], dtype=np.float32) if has_w else _EMPTY_W))
    parts = max(1, min(numba.get_num_threads(), MAX_SCATTER_PARTS))
    # (MAX_BATCH_EDGES keeps a partitioner's batches below 2^31 slots: int32 counts, in its
    # BYTES_PER_VERTEX)
    # 4-byte counters (then positions) while the batch's slots fit: half the cache footprint of
    # the random increments and scatters (n+1 per part)
    m_max = sum(len(c[0]) for c in chunks) * (2 if symmetrize else 1)
    counts = scratch_array(scratch, "counts", (parts, n + 1),
                           np.int32 if m_max < (1 << 31) - 1 else np.int64, zero=True)
    loops = 0
    for s, d, _ in chunks:
        loops += _count(s, d, symmetrize, drop_self_loops, counts)
    indptr = scratch_array(scratch, "indptr", n + 1, np.int64)
    _sum_counts(counts, indptr)
    m = int(indptr[-1])
    idx = scratch_array(scratch, "idx", m, idx_dtype(idx_n or base + n))
    ow = scratch_array(scratch, "w", m, np.float32) if has_w else _EMPTY_W
    _positions(indptr, counts)
    for s, d, w in chunks:
        _scatter(s, d, w, has_w, symmetrize, drop_self_loops, counts, idx, ow)
    del counts, chunks
    if not sort_lists:
        return indptr, idx, (ow if has_w else None), int(loops)
    newdeg = np.empty(n, dtype=np.int64)
    _sort_lists(indptr, idx, ow, has_w, dedupe, newdeg)
    if dedupe:
        newptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(newdeg, out=newptr[1:])
        if newptr[-1] != m:
            m2 = int(newptr[-1])
            _compact(indptr, newptr, idx, ow, has_w)
            idx, ow, indptr = idx[:m2], ow[:m2] if has_w else ow, newptr
    return indptr, idx, (ow if has_w else None), int(loops)


# ----------------------------------------------------------------------------------------------
# edge stores: what the partition writer reads (an in-memory or spilled CSR)
class MemoryCSR:
    """CSR held in memory."""

    def __init__(self, indptr, indices, weights):
        self.indptr, self.indices, self.weights = indptr, indices, weights
        self.n = len(indptr) - 1
        self.m = int(indptr[-1])

    def get(self, v0: int, v1: int, scratch=None):
        a, b = int(self.indptr[v0]), int(self.indptr[v1])
        w = self.weights[a:b] if self.weights is not None else None
        return self.indices[a:b], w

    def close(self):
        pass


class SpilledCSR:
    """CSR whose indices (`dtype`) and weights (float32) live in files; indptr in memory."""

    def __init__(self, indptr, idx_path, w_path, dtype):
        self.indptr, self.idx_path, self.w_path = indptr, idx_path, w_path
        self.dtype = np.dtype(dtype)
        self.n = len(indptr) - 1
        self.m = int(indptr[-1])
        self.weights = w_path is not None
        self._files = None      # the two files, opened by the first get()

    def get(self, v0: int, v1: int, scratch=None):
        """The indices and weights (None when unweighted) of vertices [v0, v1); with a scratch
        dict, views of its arrays (scratch_array), valid until the next call with it."""
        a, b = int(self.indptr[v0]), int(self.indptr[v1])
        if self._files is None:     # (fd, O_DIRECT) of each (read_range: whole pages)
            self._files = [open_direct(p, os.O_RDONLY) if p else None
                           for p in (self.idx_path, self.w_path)]
        fi, fw = self._files
        isz = self.dtype.itemsize
        idx = read_range(*fi, scratch, "get_idx", a * isz, (b - a) * isz).view(self.dtype)
        w = (read_range(*fw, scratch, "get_w", a * 4, (b - a) * 4).view(np.float32)
             if fw is not None else None)
        return idx, w

    def close(self):
        for f in self._files or ():
            if f is not None:
                os.close(f[0])
        self._files = None
        for p in (self.idx_path, self.w_path):
            if p:
                try:
                    os.unlink(p)
                except OSError:
                    pass


def vertex_blocks(indptr, v0: int, v1: int, budget_edges: int):
    """Split [v0, v1) into consecutive blocks of at most `budget_edges` edges (a vertex whose list
    alone exceeds it gets a block of its own)."""
    if budget_edges is None or int(indptr[v1]) - int(indptr[v0]) <= budget_edges:
        if v1 > v0:
            yield v0, v1
        return
    a = v0
    while a < v1:
        target = int(indptr[a]) + budget_edges
        b = int(np.searchsorted(indptr, target, side="right")) - 1
        b = min(max(b, a + 1), v1)
        yield a, b
        a = b


_SORTERS = [0]


class ExternalSorter:
    """CSR runs (grouped by source) spilled to `spill_dirs` (round robin), merged one vertex block
    at a time.
    Runs may cover fewer vertices than the final graph (IDs seen so far); missing ones are empty."""

    def __init__(self, spill_dirs, weighted, budget_edges, dedupe=True):
        self.dirs = spill_dirs
        self.weighted = weighted
        self.budget = max(1, int(budget_edges))
        self.dedupe = dedupe
        # (lengths path, escape vertices, escape lengths, idx path, w path, n_run, idx dtype)
        self.runs = []
        _SORTERS[0] += 1
        self.tag = f"s{os.getpid()}_{_SORTERS[0]}"
        self.total_deg = np.zeros(0, dtype=np.int64)   # edges per source over all runs (pre-merge)
        self.scratch = {}       # add_run's lengths row, the same pages for every run
        self.idx_n = None       # the indices' vertex count when the runs' sources are local

    def add_run(self, indptr, idx, w):
        k = len(self.runs)
        d = self.dirs[k % len(self.dirs)]
        p = os.path.join(d, f"{self.tag}_run{k:05d}")
        n_run = len(indptr) - 1
        if len(self.total_deg) < n_run:
            self.total_deg = np.concatenate(
                [self.total_deg, np.zeros(n_run - len(self.total_deg), dtype=np.int64)])
        # a run's list lengths in one byte per vertex (RUN_ESCAPE: the length is in the escape
        # arrays, held in memory): a run past the memory limit has ~1 edge per vertex, so 4- or
        # 8-byte offsets were as many bytes as its neighbour IDs (kron24 ef64 at 1G: 8.6 GB)
        deg = scratch_array(self.scratch, "deg8", n_run, np.uint8)
        esc_v = np.empty(int(indptr[-1]) // RUN_ESCAPE + 1, dtype=np.int64)
        esc_d = np.empty(len(esc_v), dtype=np.int64)
        k_esc = _run_degrees(indptr, self.total_deg, deg, esc_v, esc_d)
        deg.tofile(p + ".deg")
        idx.tofile(p + ".idx")
        if w is not None:
            w.tofile(p + ".w")
        self.runs.append((p + ".deg", esc_v[:k_esc].copy(), esc_d[:k_esc].copy(), p + ".idx",
                          (p + ".w") if w is not None else None, n_run, idx.dtype))

    def _run_ptr(self, fdeg, esc_v, esc_d, n_run, v0, v1, start, scratch):
        """Local indptr of run vertices [v0, v1), starting at edge `start` (vertices past the
        run's end are empty), from the run's open lengths file fdeg."""
        a0, a1 = min(v0, n_run), min(v1, n_run)
        deg = read_into(fdeg, scratch_array(scratch, "run_deg", a1 - a0, np.uint8), a0)
        lp = scratch_array(scratch, "run_ptr", v1 - v0 + 1, np.int64)
        e0 = int(np.searchsorted(esc_v, a0))
        _run_offsets(deg, esc_v, esc_d, e0, a0, start, lp)
        lp[a1 - a0 + 1:] = lp[a1 - a0]
        return lp

    def merge_blocks(self, n, progress=None):
        """Merge all runs, one vertex block at a time: yields (v0, v1, local indptr, indices,
        weights (None when unweighted)) of each block of [0, n) with edges, sorted and
        deduplicated, as views valid until the next block; deletes the runs when done (or
        closed)."""
        deg = np.zeros(n, dtype=np.int64)
        deg[:len(self.total_deg)] = self.total_deg
        cum = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(deg, out=cum[1:])
        del deg
        self.total_deg = None
        blocks = list(vertex_blocks(cum, 0, n, self.budget))
        # one buffer for every block (the largest block's edges): the same pages each time
        biggest = max([int(cum[v1] - cum[v0]) for v0, v1 in blocks] or [0])
        buf_i = np.empty(biggest, dtype=idx_dtype(self.idx_n or n))
        buf_w = np.empty(biggest if self.weighted else 0, dtype=np.float32)
        has_w = bool(self.weighted)
        scratch = {}            # per-block temporaries: the same pages for every block
        try:
            with contextlib.ExitStack() as stack:
                self.scratch.clear()
                runs = [(stack.enter_context(open(deg_p, "rb")), esc_v, esc_d,
                         stack.enter_context(open(idx_p, "rb")),
                         stack.enter_context(open(w_p, "rb")) if w_p else None, n_run,
                         np.dtype(rdt))
                        for deg_p, esc_v, esc_d, idx_p, w_p, n_run, rdt in self.runs]
                at = [0] * len(runs)     # each run's next edge: the blocks come in vertex order
                for v0, v1 in blocks:
                    m = int(cum[v1] - cum[v0])
                    if m == 0:
                        continue
                    # every run's lists of [v0, v1) gathered straight into the block's CSR
                    # slots; block arrays: indptr and pos (later the new indptr), 16 B per vertex
                    # of the block beside cum
                    indptr = scratch_array(scratch, "indptr", v1 - v0 + 1, np.int64)
                    np.subtract(cum[v0:v1 + 1], cum[v0], out=indptr)
                    idx, ow = buf_i[:m], (buf_w[:m] if has_w else _EMPTY_W)
                    pos = scratch_array(scratch, "pos", v1 - v0 + 1, np.int64)
                    pos[:] = indptr
                    for j, (fdeg, esc_v, esc_d, fidx, fwt, n_run, rdt) in enumerate(runs):
                        if v0 >= n_run:
                            continue
                        lp = self._run_ptr(fdeg, esc_v, esc_d, n_run, v0, v1, at[j], scratch)
                        a, b = int(lp[0]), int(lp[-1])
                        at[j] = b
                        if b == a:
                            continue
                        ridx = read_into(fidx, scratch_array(scratch, "ridx", b - a, rdt),
                                         a * rdt.itemsize)
                        rw = (read_into(fwt, scratch_array(scratch, "rw", b - a, np.float32),
                                        a * 4) if fwt is not None else _EMPTY_W)
                        _scatter_run(lp, ridx, rw, has_w, pos[:-1], idx, ow, _pieces())
                    newdeg = scratch_array(scratch, "newdeg", v1 - v0, np.int64)
                    _sort_lists(indptr, idx, ow, has_w, self.dedupe, newdeg)
                    newptr = pos
                    newptr[0] = 0
                    np.cumsum(newdeg, out=newptr[1:])
                    m2 = int(newptr[-1])
                    if m2 != m:
                        _compact(indptr, newptr, idx, ow, has_w)
                    yield v0, v1, newptr, idx[:m2], (ow[:m2] if has_w else None)
                    if progress:
                        progress("merge", int(cum[v1]), int(cum[-1]))
        finally:
            scratch.clear()
            self.discard()

    def discard(self):
        """Delete the runs' files."""
        for r in self.runs:
            for p in (r[0], r[3], r[4]):
                if p:
                    try:
                        os.unlink(p)
                    except OSError:
                        pass
        self.runs = []

    def merge(self, n, out_dir, progress=None):
        """Merge all runs into one deduplicated SpilledCSR over n vertices in `out_dir`; deletes
        the runs."""
        return spill_blocks(self.merge_blocks(n, progress), n, out_dir, self.tag, self.weighted,
                            idx_dtype(self.idx_n or n))


def spill_blocks(blocks, n, out_dir, tag, weighted, dtype):
    """A SpilledCSR in `out_dir` of the sorted blocks (v0, v1, local indptr, indices, weights)
    of [0, n) (vertices in no block have no edges)."""
    idx_path = os.path.join(out_dir, f"{tag}_merged.idx")
    w_path = os.path.join(out_dir, f"{tag}_merged.w") if weighted else None
    final_deg = np.zeros(n, dtype=np.int64)
    fi = DirectAppender(idx_path)
    fw = DirectAppender(w_path) if w_path else None
    try:
        for v0, v1, lptr, idx, w in blocks:
            np.subtract(lptr[1:], lptr[:-1], out=final_deg[v0:v1])
            fi.write(np.ascontiguousarray(idx))
            if fw is not None:
                fw.write(np.ascontiguousarray(w))
        fi.close()
        if fw is not None:
            fw.close()
    finally:
        fi.abort()
        if fw is not None:
            fw.abort()
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(final_deg, out=indptr[1:])
    return SpilledCSR(indptr, idx_path, w_path, dtype)


class _StreamedStore:
    """Sorted blocks read once, as the writer writes them (no merged file written and read
    back): `m` (the edges after deduplication) is known once blocks() has run to its end,
    m_upper (the edges before) from the start."""
    streamed = True

    def __init__(self, sorter, n, m_upper):
        self.sorter, self.n = sorter, n
        self.weights = bool(sorter.weighted)
        self.m_upper = int(m_upper)
        self.m = None

    def _source(self, progress):
        raise NotImplementedError

    def blocks(self, progress=None):
        m = 0
        for blk in self._source(progress):
            m += len(blk[3])
            yield blk
        self.m = m

    def close(self):
        self.sorter.discard()


class MergingCSR(_StreamedStore):
    """The runs' merge (ExternalSorter.merge_blocks) as the writer reads it."""

    def __init__(self, sorter, n):
        super().__init__(sorter, n, sorter.total_deg.sum())

    def _source(self, progress):
        return self.sorter.merge_blocks(self.n, progress)


# ----------------------------------------------------------------------------------------------
# distribution by source range: a batch past the memory limit goes to bucket files
@njit(cache=True, nogil=True)
def _bucket_count(src, dst, sym, drop_self, shift, cnt):
    """cnt[b] += the edges (and reversed edges when sym) whose source lies in bucket b (source >>
    shift), self-loops as the counting sort takes them; returns the self-loops seen."""
    loops = 0
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        if s == d:
            loops += 1
            if drop_self:
                continue
            cnt[s >> shift] += 1
            continue
        cnt[s >> shift] += 1
        if sym:
            cnt[d >> shift] += 1
    return loops


@njit(cache=True, nogil=True)
def _bucket_scatter(src, dst, w, has_w, sym, drop_self, shift, pos, out, wide):
    """Each edge (and its reverse when sym) to its bucket's records from pos[b] on: a record is
    one row of `out` (uint32): the source local to the bucket (source & (2^shift - 1)), the
    destination's low 32 bits, its high 32 bits when `wide`, the weight's bits when has_w."""
    mask = (np.int64(1) << shift) - 1
    wc = 3 if wide else 2
    for i in range(src.shape[0]):
        s = src[i]
        d = dst[i]
        if s == d and drop_self:
            continue
        for k in range(2 if (sym and s != d) else 1):
            a, c = (s, d) if k == 0 else (d, s)
            b = a >> shift
            p = pos[b]
            out[p, 0] = np.uint32(a & mask)
            out[p, 1] = np.uint32(c & 0xFFFFFFFF)
            if wide:
                out[p, 2] = np.uint32(c >> 32)
            if has_w:
                out[p, wc] = w[i]
            pos[b] = p + 1


@njit(parallel=True, cache=True, nogil=True)
def _bucket_count_parts(src, dst, sym, drop_self, shift, cnt):
    """_bucket_count over T = cnt.shape[0] equal parts of the batch, part t into row cnt[t]."""
    T = cnt.shape[0]
    m = src.shape[0]
    loops = np.zeros(T, dtype=np.int64)
    for t in prange(T):
        a, b = m * t // T, m * (t + 1) // T
        loops[t] = _bucket_count(src[a:b], dst[a:b], sym, drop_self, shift, cnt[t])
    return loops.sum()


@njit(parallel=True, cache=True, nogil=True)
def _bucket_scatter_parts(src, dst, w, has_w, sym, drop_self, shift, pos, out, wide):
    """_bucket_scatter of part t of the batch from pos[t] on (disjoint slots per part)."""
    T = pos.shape[0]
    m = src.shape[0]
    for t in prange(T):
        a, b = m * t // T, m * (t + 1) // T
        _bucket_scatter(src[a:b], dst[a:b], w[a:b] if has_w else w, has_w, sym, drop_self,
                        shift, pos[t], out, wide)


#: at most this many buckets (files per direction): past it, buckets are wider than planned and
#: the larger ones are sorted through runs of their own (BucketSorter.blocks)
MAX_BUCKETS = 4096


@njit(parallel=True, cache=True, nogil=True)
def _gather_pieces(rows, first, at_p, wide, weighted, s64, d64, w32):
    """Records rows[first[p]:first[p] + at_p[p + 1] - at_p[p]] of piece p into s64/d64 (and the
    weight bits into w32) at at_p[p]:, pieces in parallel."""
    last = rows.shape[1] - 1
    for p in prange(first.shape[0]):
        r = first[p]
        for i in range(at_p[p], at_p[p + 1]):
            s64[i] = rows[r, 0]
            d = np.int64(rows[r, 1])
            if wide:
                d |= np.int64(rows[r, 2]) << 32
            d64[i] = d
            if weighted:
                w32[i] = rows[r, last]
            r += 1


class BucketSorter:
    """Edges past the memory limit, distributed by source range into bucket files (bucket b holds
    the sources [b * 2^shift, (b + 1) * 2^shift), reversed edges added for --symmetrize, self-loops
    dropped as the counting sort drops them), then sorted one bucket at a time in memory: the
    buckets' blocks come out in vertex order, each list sorted and deduplicated, as the runs'
    merge gives them. Nothing per batch is as large as |V| (the runs' counting sort was: at
    kron24 ef64 under 1 GiB a run had ~1 edge per vertex). A bucket larger than the memory
    allows is sorted through runs of its own (ExternalSorter over its vertex range).
    A bucket's file holds records of uint32 columns: the source (local), the destination (low
    32 bits, and high 32 bits once an ID needs them: a segment file of its own), the weight's
    bits. Each batch appends one piece per bucket, padded to 4 KiB and written with O_DIRECT
    where the folder allows it: on the 2-vCPU KVM machine a page-cache write cost ~2 s of
    kernel time per GB (dd: 492 MB/s buffered, 1.7 GB/s direct) and a cold buffered read ~1 s
    per GB, and the bucket files are twice the graph's adjacency."""

    def __init__(self, spill_dirs, weighted, shift, bucket_edges, sym, drop_self, dedupe):
        self.dirs = spill_dirs
        self.weighted = bool(weighted)
        self.shift = int(shift)
        self.cap = max(1, int(bucket_edges))
        self.sym, self.drop_self, self.dedupe = sym, drop_self, dedupe
        _SORTERS[0] += 1
        self.tag = f"b{os.getpid()}_{_SORTERS[0]}"
        # (bucket, wide) -> [path, records, file bytes, [(byte offset, records) per piece]]
        self.segs = {}
        self.direct = True      # O_DIRECT until a folder refuses it
        self.writing = None     # the last batch's pieces being written (io_pool)
        self.m_upper = 0
        self.loops = 0
        self.scratch = {}

    def add(self, src, dst, w=None, maxid=None):
        """A batch of input edges (int64 arrays) into the buckets; returns the self-loops."""
        m = len(src)
        if m == 0:
            return 0
        if maxid is None:
            maxid = max(int(src.max()), int(dst.max()))
        self.wait()             # `out` is free again
        nb = (int(maxid) >> self.shift) + 1
        parts = max(1, min(numba.get_num_threads(), MAX_SCATTER_PARTS))
        cnts = np.zeros((parts, nb), dtype=np.int64)
        s = np.ascontiguousarray(src, dtype=np.int64)
        d = np.ascontiguousarray(dst, dtype=np.int64)
        has_w = w is not None and self.weighted
        ww = (np.ascontiguousarray(w, dtype=np.float32).view(np.uint32) if has_w
              else np.zeros(0, np.uint32))
        loops = _bucket_count_parts(s, d, self.sym, self.drop_self, self.shift, cnts)
        cnt = cnts.sum(axis=0)
        k = int(cnt.sum())
        wide = maxid >= (1 << 32)
        cols = self._cols(wide)
        rb = 4 * cols
        ra = ALIGN // math.gcd(ALIGN, rb)        # records in a whole number of 4 KiB pages
        padded = (cnt + ra - 1) // ra * ra
        starts = np.zeros(nb + 1, dtype=np.int64)
        np.cumsum(padded, out=starts[1:])
        out = aligned_array(self.scratch, "out", int(starts[-1]) * rb).view(np.uint32)
        out = out.reshape(int(starts[-1]), cols)
        if self.weighted and not has_w:
            out[:, cols - 1] = np.float32(1.0).view(np.uint32)
        pos = starts[:-1] + np.cumsum(cnts, axis=0) - cnts     # part t after parts < t
        _bucket_scatter_parts(s, d, ww, has_w, self.sym, self.drop_self, self.shift, pos, out,
                              wide)
        jobs = []
        for b in np.flatnonzero(cnt):
            a, c, e = int(starts[b]), int(cnt[b]), int(starts[b] + padded[b])
            key = (int(b), bool(wide))
            seg = self.segs.get(key)
            if seg is None:
                d0 = self.dirs[int(b) % len(self.dirs)]
                seg = self.segs[key] = [os.path.join(
                    d0, f"{self.tag}_{int(b):05d}{'_wide' if wide else ''}.bkt"), 0, 0, []]
            jobs.append((seg[0], a, e, seg[2]))
            seg[3].append((seg[2], c))
            seg[1] += c
            seg[2] += (e - a) * rb
        # written by a thread while the next batch is read and copied in (add waits for it
        # before it scatters into `out` again)
        self.writing = io_pool().submit(self._write_pieces, out, jobs)
        self.m_upper += k
        self.loops += int(loops)
        return int(loops)

    def _write_pieces(self, out, jobs):
        for path, a, e, offset in jobs:
            fd = self._open(path, os.O_WRONLY | os.O_CREAT)
            try:
                pwrite_all(fd, memoryview(out[a:e]).cast("B"), offset)
            finally:
                os.close(fd)

    def wait(self):
        """The last batch's pieces are on disk (their write's error raised here)."""
        if self.writing is not None:
            w, self.writing = self.writing, None
            w.result()

    def _cols(self, wide):
        return 2 + bool(wide) + self.weighted

    def release(self):
        """The batches' records let go (the sort of each bucket needs the memory)."""
        self.wait()
        self.scratch.clear()

    def _open(self, path, flags):
        """An fd of `path`, O_DIRECT while the folders allow it."""
        if not self.direct:
            return os.open(path, flags, 0o644)
        fd, self.direct = open_direct(path, flags)  # refused (tmpfs): the same layout, cached
        return fd

    def _segments(self, b):
        return [(seg, wide) for (bb, wide), seg in sorted(self.segs.items()) if bb == b]

    def _gather(self, rows, wide, pieces, at, name):
        """The records `pieces` [(first row, count)] of `rows` into the reused int64 sources and
        destinations (and float32 weights) from index `at` on; returns the next index."""
        s64, d64 = self.scratch[name + "s"], self.scratch[name + "d"]
        w32 = self.scratch[name + "w"] if self.weighted else np.zeros(0, np.float32)
        first = np.array([r0 for r0, _ in pieces], dtype=np.int64)
        at_p = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([c for _, c in pieces], out=at_p[1:])
        at_p += at
        _gather_pieces(rows, first, at_p, bool(wide), self.weighted, s64, d64,
                       w32.view(np.uint32))
        return int(at_p[-1])

    def _alloc(self, name, m):
        """Room for m gathered records under `name` (_gather, _columns)."""
        scratch_array(self.scratch, name + "s", m, np.int64)
        scratch_array(self.scratch, name + "d", m, np.int64)
        if self.weighted:
            scratch_array(self.scratch, name + "w", m, np.float32)

    def _columns(self, name, m):
        return (self.scratch[name + "s"][:m], self.scratch[name + "d"][:m],
                self.scratch[name + "w"][:m] if self.weighted else None)

    def _read_rows(self, path, offset, nbytes, cols, name="read"):
        """Rows (uint32, `cols` wide) of file bytes [offset, offset + nbytes) (both aligned),
        read into the reused buffer `name`."""
        buf = aligned_array(self.scratch, name, nbytes)
        fd = self._open(path, os.O_RDONLY)
        try:
            pread_all(fd, memoryview(buf), offset)
        finally:
            os.close(fd)
        return buf.view(np.uint32).reshape(-1, cols)

    def _load(self, b, slot):
        """Bucket b's files read whole into the reused buffers of `slot` (blocks() reads the
        next bucket into them while this one is sorted): [(rows, wide, pieces)]."""
        out = []
        for i, ((path, m, nbytes, parts), wide) in enumerate(self._segments(b)):
            cols = self._cols(wide)
            rows = self._read_rows(path, 0, nbytes, cols, f"raw{slot}_{i}")
            out.append((rows, wide, [(off // (4 * cols), c) for off, c in parts]))
        return out

    def _read(self, b, loaded=None):
        """Bucket b's edges: ([local sources], [destinations], [weights] or None), one array
        each (views of reused arrays, valid until the next read); `loaded`: its files as
        _load read them."""
        at = 0
        self._alloc("g", sum(seg[1] for seg, _ in self._segments(b)))
        for rows, wide, pieces in (loaded if loaded is not None else self._load(b, 0)):
            at = self._gather(rows, wide, pieces, at, "g")
        s_, d_, w_ = self._columns("g", at)
        return [s_], [d_], ([w_] if self.weighted else None)

    def _pieces(self, b, k):
        """Bucket b's edges in pieces of at most k: (local sources, destinations, weights)."""
        for (path, m, nbytes, parts), wide in self._segments(b):
            cols = self._cols(wide)
            rb = 4 * cols
            for off, c in parts:
                for a in range(0, c, k):
                    n_ = min(k, c - a)
                    # whole pages of whole records: the piece starts at a multiple of L
                    L = ALIGN * rb // math.gcd(ALIGN, rb)
                    lo = (off + a * rb) // L * L
                    hi = -(-(off + (a + n_) * rb) // L) * L
                    rows = self._read_rows(path, lo, hi - lo, cols)
                    self._alloc("p", n_)
                    got = self._gather(rows, wide, [((off + a * rb - lo) // rb, n_)], 0, "p")
                    yield self._columns("p", got)

    def blocks(self, n, progress=None):
        """(v0, v1, local indptr, indices, weights or None) covering [0, n) in vertex order,
        every list sorted (by destination, then weight) and deduplicated (smallest weight kept);
        deletes each bucket's files once it is sorted."""
        self.wait()
        width = 1 << self.shift
        done = 0
        scratch = {}
        nb = (n + width - 1) // width if n else 0
        sizes = [sum(seg[1] for seg, _ in self._segments(b)) for b in range(nb)]
        small = [b for b in range(nb) if 0 < sizes[b] <= self.cap]
        ahead = {}          # the next small bucket's files, read by a thread while one sorts
        pool = ThreadPoolExecutor(1, thread_name_prefix="graphene-bucket") if small else None

        def read_ahead(after):
            i = bisect.bisect_right(small, after)
            if i < len(small):
                nxt = small[i]
                # one slot: it is asked for once the bucket before has been gathered out of it
                ahead[nxt] = pool.submit(self._load, nxt, 0)
        try:
            if small:
                read_ahead(-1)
            for b in range(nb):
                v0, v1 = b * width, min(n, (b + 1) * width)
                m = sizes[b]
                if m == 0:
                    lp = scratch_array(scratch, "empty_ptr", v1 - v0 + 1, np.int64, zero=True)
                    yield v0, v1, lp, np.zeros(0, idx_dtype(n)), (_EMPTY_W if self.weighted
                                                                  else None)
                    continue
                if m <= self.cap:
                    loaded = ahead.pop(b).result()
                    ls, ld, lw = self._read(b, loaded)
                    del loaded
                    read_ahead(b)       # its rows are gathered: the slot is free
                    ptr, idx, w, _ = sort_to_csr(
                        ls, ld, lw, v1 - v0, symmetrize=False, drop_self_loops=False,
                        dedupe=self.dedupe, scratch=scratch, idx_n=n)
                    del ls, ld, lw
                    yield v0, v1, ptr, idx, w
                else:
                    yield from self._sort_large(b, v0, v1, n, scratch)
                self._drop(b)
                done += m
                if progress:
                    progress("merge", done, self.m_upper)
        finally:
            for f in ahead.values():
                try:
                    f.result()
                except Exception:
                    pass
            if pool is not None:
                pool.shutdown()
            scratch.clear()
            self.discard()

    def _sort_large(self, b, v0, v1, n, scratch):
        """A bucket larger than memory allows: runs of its own, merged (vertices local)."""
        es = ExternalSorter(self.dirs, self.weighted, self.cap, self.dedupe)
        es.idx_n = n
        try:
            for ls, ld, lw in self._pieces(b, self.cap):
                ptr, idx, w, _ = sort_to_csr(ls, ld, lw if self.weighted else None, v1 - v0,
                                             symmetrize=False, drop_self_loops=False,
                                             dedupe=self.dedupe, sort_lists=False,
                                             scratch=scratch, idx_n=n)
                es.add_run(ptr, idx, w)
            nxt = 0
            for a, e, lp, idx, w in es.merge_blocks(v1 - v0):
                if a > nxt:     # vertices with no edges between the merge's blocks
                    z = scratch_array(scratch, "gap_ptr", a - nxt + 1, np.int64, zero=True)
                    yield v0 + nxt, v0 + a, z, idx[:0], (w[:0] if w is not None else None)
                yield v0 + a, v0 + e, lp, idx, w
                nxt = e
            if nxt < v1 - v0:
                z = scratch_array(scratch, "gap_ptr", v1 - v0 - nxt + 1, np.int64, zero=True)
                yield v0 + nxt, v1, z, np.zeros(0, idx_dtype(n)), (_EMPTY_W if self.weighted
                                                                   else None)
        finally:
            es.discard()

    def _drop(self, b):
        for key in [k for k in self.segs if k[0] == b]:
            try:
                os.unlink(self.segs.pop(key)[0])
            except OSError:
                pass

    def discard(self):
        """Delete every bucket's files."""
        try:
            self.wait()
        except OSError:
            pass
        for b in {k[0] for k in self.segs}:
            self._drop(b)


class BucketStore(_StreamedStore):
    """The buckets sorted (BucketSorter.blocks) as the writer reads them."""

    def __init__(self, sorter, n):
        super().__init__(sorter, n, sorter.m_upper)

    def _source(self, progress):
        return self.sorter.blocks(self.n, progress)

    def spilled(self, out_dir):
        """The sorted buckets written as one SpilledCSR (a grid's bounds need a pass first)."""
        return spill_blocks(self.sorter.blocks(self.n), self.n, out_dir, self.sorter.tag,
                            self.weights, idx_dtype(self.n))


def bucket_shift(n_est, edges_est, bucket_edges):
    """log2 of the vertices per bucket: the buckets average at most half of `bucket_edges` (room
    for skew) if `edges_est` directed edges spread over `n_est` vertices as they do on average;
    no more than MAX_BUCKETS buckets."""
    n_est = max(1, int(n_est))
    per_vertex = max(1e-9, edges_est / n_est)
    width = max(1, int(bucket_edges / 2 / per_vertex))
    shift = max(0, width.bit_length() - 1)
    while (n_est >> shift) >= MAX_BUCKETS:
        shift += 1
    return shift



class Batcher:
    """Collects edge chunks (copied into the batch's arrays, the same for every batch) up to
    `budget` edges. When everything fits in one batch, `finish(n)` returns a MemoryCSR. When a
    batch fills, its edges and every later chunk go to bucket files by source range
    (BucketSorter; `sort_bytes`: the memory one bucket's sort may use, with 16 B per vertex of
    the graph held beside it), and finish(n) returns the sorted buckets as the writer reads them
    (stream) or as a SpilledCSR. `expected_input`: the input edges the caller expects in all (the
    buckets' width is planned from it; None: four times those seen when the first batch fills).
    Counts self-loops seen (for the stats)."""

    def __init__(self, budget_edges, weighted, spill_dirs_fn, *, symmetrize, drop_self_loops,
                 dedupe, merge_budget=None, progress=None, sort_bytes=None):
        self.cap = min(MAX_BATCH_EDGES, max(1024, int(budget_edges)))
        self.weighted = weighted
        self.spill_dirs_fn = spill_dirs_fn
        self.sym, self.drop_self, self.dedupe = symmetrize, drop_self_loops, dedupe
        self.merge_budget = merge_budget or self.cap
        self.progress = progress
        # the current batch: its edges copied in as they come, into the same arrays for every
        # batch (the reader's chunks may be reused: open_edges(reuse=True))
        self.bsrc = self.bdst = self.bw = np.zeros(0, np.int64)
        self.fill = 0
        self.maxid = -1
        self.loops = 0
        self.sorter = None
        self.input_edges = 0
        self.spilled_runs = 0
        self.scratch = {}       # the runs' sort arrays, reused by every spilled batch
        self.buckets = None     # a BucketSorter once a batch has filled
        self.expected_input = None
        self.sort_bytes = sort_bytes

    def add(self, src, dst, w=None, maxid=None):
        self.cap = min(self.cap, MAX_BATCH_EDGES)
        m = len(src)
        self.input_edges += m
        if m:
            if maxid is None:
                maxid = max(int(src.max()), int(dst.max()))
            self.maxid = max(self.maxid, maxid)
        pos = 0
        while pos < m:
            k = min(self.cap - self.fill, m - pos)
            f = self.fill
            self._room(f + k)
            self.bsrc[f:f + k] = src[pos:pos + k]
            self.bdst[f:f + k] = dst[pos:pos + k]
            if self.weighted:
                self.bw[f:f + k] = w[pos:pos + k]
            self.fill += k
            pos += k
            if self.fill == self.cap:
                self._spill()

    def _release(self):
        """The batch's and the runs' arrays let go (the merge needs the memory)."""
        self.bsrc = self.bdst = self.bw = np.zeros(0, np.int64)
        self.scratch.clear()

    def _room(self, need):
        """The batch's arrays hold at least `need` edges (grown, what they hold kept)."""
        if need <= len(self.bsrc):
            return
        size = max(need, min(self.cap, MAX_BATCH_EDGES))
        for name, dt in (("bsrc", np.int64), ("bdst", np.int64), ("bw", np.float32)):
            if name == "bw" and not self.weighted:
                continue
            old = getattr(self, name)
            new = np.empty(size, dt)
            new[:self.fill] = old[:self.fill]
            setattr(self, name, new)
            del old

    def _sort_batch(self, n, sort_lists=True, scratch=None):
        f, self.fill = self.fill, 0
        ptr, idx, w, loops = sort_to_csr([self.bsrc[:f]], [self.bdst[:f]],
                                         [self.bw[:f]] if self.weighted else None, n,
                                         symmetrize=self.sym, drop_self_loops=self.drop_self,
                                         dedupe=self.dedupe, sort_lists=sort_lists,
                                         scratch=scratch)
        self.loops += loops
        return ptr, idx, w

    def _bucket_edges(self, n):
        """Edges one bucket's sort may hold (BYTES_PER_EDGE_SORT each) beside 16 B per vertex."""
        have = self.sort_bytes if self.sort_bytes is not None else \
            self.merge_budget * BYTES_PER_EDGE_SORT
        return max(1 << 14, (int(have) - 16 * int(n)) // BYTES_PER_EDGE_SORT)

    def _to_buckets(self):
        """The full batch goes to bucket files (BucketSorter; made at the first), and so will
        every later one: in records of each bucket written together."""
        if self.buckets is None:
            n_est = self.maxid + 1
            seen = max(1, self.input_edges)
            expect = self.expected_input if self.expected_input else 4 * seen
            edges = max(expect, seen) * (2 if self.sym else 1)
            cap = self._bucket_edges(n_est)
            self.buckets = BucketSorter(self.spill_dirs_fn(), self.weighted,
                                        bucket_shift(n_est, edges, cap), cap, self.sym,
                                        self.drop_self, self.dedupe)
        f, self.fill = self.fill, 0
        self.loops += self.buckets.add(self.bsrc[:f], self.bdst[:f],
                                       self.bw[:f] if self.weighted else None, self.maxid)
        if len(self.bsrc) > self.cap:       # the batch was cut down: its pages beyond go
            self._release()
        self.spilled_runs += 1
        if self.progress:
            self.progress("spill", self.spilled_runs, None)

    def _spill(self):
        if self.sort_bytes is not None or self.buckets is not None:
            self._to_buckets()
            return
        if self.sorter is None:
            self.sorter = ExternalSorter(self.spill_dirs_fn(), self.weighted, self.merge_budget,
                                         self.dedupe)
        # a run is grouped by source only: the merge sorts and deduplicates each list whole
        # (sorting here too did the work twice; kron22 -s: 8.3 s of list sorting in all)
        ptr, idx, w = self._sort_batch(self.maxid + 1, sort_lists=False, scratch=self.scratch)
        self.sorter.add_run(ptr, idx, w)        # written out: the scratch arrays are free again
        del ptr, idx, w
        if len(self.bsrc) > self.cap:
            # the batch was cut down (the IDs seen grew, and their per-vertex arrays with them):
            # the pages beyond the new size go, as the memory limit counts on
            self._release()
        self.spilled_runs += 1
        if self.progress:
            self.progress("spill", len(self.sorter.runs), None)

    def finish(self, n, merge_budget=None, stream=False):
        """merge_budget: edges per merge block, when the caller knows better now (|V| is known only
        at the end: the merge's O(|V|) arrays come out of the same memory). stream: when runs were
        spilled, a MergingCSR (merged as its reader goes) instead of the merged SpilledCSR."""
        if self.buckets is not None:
            if self.fill:
                self._to_buckets()
            self._release()
            self.buckets.release()
            self.buckets.cap = self._bucket_edges(n)     # |V| is known now
            self.spilled_runs = len({k[0] for k in self.buckets.segs})
            store = BucketStore(self.buckets, n)
            return store if stream else store.spilled(self.buckets.dirs[0])
        if self.sorter is None:
            ptr, idx, w = self._sort_batch(n)
            self._release()
            return MemoryCSR(ptr, idx, w)
        if self.fill:
            self._spill()
        self._release()
        if merge_budget is not None:
            self.sorter.budget = max(1, int(merge_budget))
        if stream:
            return MergingCSR(self.sorter, n)
        return self.sorter.merge(n, self.sorter.dirs[0], self.progress)


def set_threads(threads):
    if threads:
        numba.set_num_threads(max(1, min(int(threads), numba.config.NUMBA_NUM_THREADS)))
