"""Compiled per-batch kernels of the IoIterator (numba, nogil).

`process_batch` is the heart of a superstep: for every completed extent (an IO request whose bytes
sit in a buffer), find the first vertex whose adjacency list overlaps it (binary search in the
partition's offsets), clip each overlapping list to the extent, and call the user's `is_active` /
`compute` on the vertices of the frontier. The user functions are numba dispatchers passed as
arguments, so numba specializes (and inlines) the kernel per (is_active, compute, state types).

Completion rows are (request, byte position of the adjacency data in `buf`, byte position of the
weight data in `wbuf` or -1): positions are slot*slot_bytes for the SSD path and file_base+offset
for the in-memory path, so both run the very same code.
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from .atomics import atomic_add, copy_into, prefetch, unowned, unowned_all
from ..io.offsets import DEG_BLOCK, degrees_into, off3

#: how many neighbour IDs ahead process_batch asks for the element of Update.reads' slot
AHEAD = 32
#: compute kernels ("module.name") that ask for their reads ahead themselves (looks_ahead)
LOOK_AHEAD: set = set()
#: whether this kernel's compute is one of LOOK_AHEAD: a generated kernel's module sets its own
#: (iterator/specialize.py); here, in the template called with any compute, never
LOOK = False


def looks_ahead(fn):
    """Mark an importable compute kernel as asking for its random reads ahead itself. In an
    unweighted superstep of its generated kernel, `wts` then holds the neighbour IDs AHEAD entries
    after those of `nbrs` (wts[i] comes AHEAD places after nbrs[i] in the extent, running on into
    the next lists; shorter near the extent's end, empty where the engine has nothing to give),
    and the engine asks for nothing itself: the kernel asks for state[wts[i]] as it reads
    state[nbrs[i]], one at a time (prefetch), which overlapped the misses better than the
    engine's pass over each list first (BENCHMARKS.md). Weighted supersteps give weights as
    ever, and the kernel must read `wts` as IDs only where it is unweighted."""
    py = getattr(fn, "__wrapped__", None) or getattr(fn, "py_func", fn)
    LOOK_AHEAD.add(f"{py.__module__}.{py.__qualname__}")
    return fn


@njit(inline="always")
def gather_sum(x, nbrs, ahead):
    """The sum of x[u] over the IDs u of nbrs (a looks_ahead kernel's list), asking for
    x[ahead[i]] as it reads x[nbrs[i]] (its `wts`: shorter than nbrs, or empty, where the engine
    has fewer IDs ahead), in four running sums. With one, each edge's add waited on the one
    before it (4 cycles each): PageRank's pull superstep on kron22 took 0.19 s warm with one
    and 0.17 s with four (2 threads, the 2-vCPU AMD EPYC guest)."""
    m = len(nbrs)
    k = len(ahead)
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    i = 0
    while i + 4 <= m:
        if i + 4 <= k:
            prefetch(x, np.int64(ahead[i]))
            prefetch(x, np.int64(ahead[i + 1]))
            prefetch(x, np.int64(ahead[i + 2]))
            prefetch(x, np.int64(ahead[i + 3]))
        else:
            for j in range(i, k):
                prefetch(x, np.int64(ahead[j]))
        s0 += x[np.int64(nbrs[i])]
        s1 += x[np.int64(nbrs[i + 1])]
        s2 += x[np.int64(nbrs[i + 2])]
        s3 += x[np.int64(nbrs[i + 3])]
        i += 4
    while i < m:
        if i < k:
            prefetch(x, np.int64(ahead[i]))
        s0 += x[np.int64(nbrs[i])]
        i += 1
    return (s0 + s1) + (s2 + s3)


@njit(nogil=True)
def process_batch(is_active, compute, state, tid, comp, n, buf, wbuf, req_file, req_off, req_len,
                  req_woff, file_part, part_base, part_row_lo, part_nedges, offs, mask, use_mask,
                  id_shift, weighted, kcache, kstart, kdone, ahead):
    edges = 0
    buf = unowned(buf)               # the lists' views below take no reference (atomics.unowned)
    wbuf = unowned(wbuf)
    state = unowned_all(state)       # nor the compute kernel's unpacking of its state
    wempty = wbuf[:0]
    look = buf[:0]
    keeping = kdone.shape[0] != 0
    olo, obase, oexc = offs          # compact offsets (io/offsets.py), unpacked once
    for k in range(n):
        r = comp[k, 0]
        pos = comp[k, 1]
        f = req_file[r]
        p = file_part[f]
        b0 = part_base[p]
        rowlen = part_base[p + 1] - b0 - 1
        row_lo = part_row_lo[p]
        e_lo = req_off[r] >> id_shift
        e_hi = (req_off[r] + req_len[r]) >> id_shift
        ne = part_nedges[p]
        if e_hi > ne:
            e_hi = ne
        if e_lo >= e_hi:
            continue
        # largest i in [0, rowlen) with offs[b0 + i] <= e_lo: the first list reaching into the extent
        lo = 0
        hi = rowlen
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if off3(olo, obase, oexc, b0 + mid) <= e_lo:
                lo = mid
            else:
                hi = mid
        i = lo
        base_idx = (pos >> id_shift) - e_lo
        wbase = np.int64(0)
        if weighted:
            wbase = ((comp[k, 2] - req_woff[r]) >> 2)
        s = off3(olo, obase, oexc, b0 + i)
        while i < rowlen:
            if s >= e_hi:
                break
            e = off3(olo, obase, oexc, b0 + i + 1)
            if e > s:
                v = row_lo + i
                if use_mask == 0 or mask[v] != 0:
                    if is_active(v, state):
                        cs = s if s > e_lo else e_lo
                        ce = e if e < e_hi else e_hi
                        nb = buf[base_idx + cs:base_idx + ce]
                        if LOOK and not weighted:
                            # the IDs AHEAD entries on: the kernel asks for them (looks_ahead)
                            look = buf[base_idx + min(cs + AHEAD, e_hi):
                                       base_idx + min(ce + AHEAD, e_hi)]
                        elif ahead.shape[0] != 0:
                            # the slot the kernel reads by neighbour (Update.reads), asked for
                            # AHEAD entries of the extent ahead: the random reads overlap
                            q1 = base_idx + min(ce + AHEAD, e_hi)
                            for q in range(base_idx + cs + AHEAD, q1):
                                prefetch(ahead, buf[q])
                        if keeping:
                            keep_chunk(kcache, kstart, kdone, v, nb)
                        if weighted:
                            compute(v, nb, wbuf[wbase + cs:wbase + ce], tid, state)
                        elif LOOK:
                            compute(v, nb, look, tid, state)
                        else:
                            compute(v, nb, wempty, tid, state)
                        edges += ce - cs
            s = e
            i += 1
    return edges


@njit(nogil=True, inline="always")
def keep_chunk(kcache, kstart, kdone, v, nb):
    """Copy a chunk of v's list into v's slot of the kept lists (iterator/shortlists.py), if v has
    one and it is not complete yet. kcache[kstart[v]] counts the IDs copied so far: chunks of one
    list (on several threads) claim their places with an atomic add; the chunk that completes the
    list flags it in kdone."""
    c0 = kstart[v]
    c1 = kstart[v + 1]
    if c1 > c0 and kdone[v] == 0:
        m = nb.shape[0]
        k = c0 + 1 + np.int64(atomic_add(kcache, c0, m))
        if k + m <= c1:
            for i in range(m):
                kcache[k + i] = nb[i]
            if k + m == c1:
                kdone[v] = 1


@njit(nogil=True)
def serve_kept(is_active, compute, state, tid, served, kcache, kstart, wbuf):
    """The superstep's part done from RAM: compute(v, v's kept list, ...) for the vertices flagged
    in `served` (their lists complete in the kept lists) that are active. Returns the edges."""
    kcache = unowned(kcache)         # (atomics.unowned: no reference per list, none per call)
    state = unowned_all(state)
    wempty = wbuf[:0]
    edges = 0
    for v in range(served.shape[0]):
        if served[v] != 0 and is_active(v, state):
            nb = kcache[kstart[v] + 1:kstart[v + 1]]
            compute(v, nb, wempty, tid, state)
            edges += nb.shape[0]
    return edges


@njit(nogil=True)
def serve_short(is_active, compute, state, tid, mask, rest, recs, gdeg, gbase, gcount, t, T,
                wbuf):
    """Thread t of T's share of every group of a short-list file in RAM (iterator/shortfile.py):
    compute(v, v's list, ...) for the vertices flagged in `mask` that are active, and rest[v] = 0
    for every flagged vertex whose list is there (what the disks need not read). Group g holds
    gcount[g] records of gdeg[g] + 1 IDs from entry gbase[g]: the vertex, then its list.
    Returns the edges."""
    recs = unowned(recs)
    state = unowned_all(state)
    wempty = wbuf[:0]
    edges = 0
    for g in range(gdeg.shape[0]):
        d = gdeg[g]
        c = gcount[g]
        lo = c * t // T
        hi = c * (t + 1) // T
        p = gbase[g] + lo * (d + 1)
        for i in range(lo, hi):
            v = np.int64(recs[p])
            if mask[v] != 0:
                rest[v] = 0
                if is_active(v, state):
                    compute(v, recs[p + 1:p + 1 + d], wempty, tid, state)
                    edges += d
            p += d + 1
    return edges


@njit(cache=True, nogil=True)
def slots_to_rows(c, slot_bytes, out):
    """Engine completions (request, slot) -> kernel rows (request, byte pos, -1)."""
    n = c.shape[0]
    for k in range(n):
        out[k, 0] = c[k, 0]
        out[k, 1] = c[k, 1] * slot_bytes
        out[k, 2] = -1
    return n


@njit(cache=True, nogil=True)
def copy_rows(rows, n, pool, fids, offs, lens, woff, wlen, fill_base, wfill_base, take, mem,
              wmem):
    """Copy kernel rows' extents (and weights) into the adjacency cache: file f's bytes live at
    mem[fill_base[f]:], its weights at wmem[wfill_base[f]:]; fill_base[f] < 0: not cached;
    take[j] false: extent j is not copied."""
    for k in range(n):
        j = rows[k, 0]
        f = fids[j]
        b = fill_base[f]
        if b < 0 or not take[j]:
            continue
        p = rows[k, 1]
        ln = lens[j]
        o = b + offs[j]
        if o < 0 or o + ln > mem.shape[0] or p < 0 or p + ln > pool.shape[0]:
            raise ValueError("copy_rows: an extent outside the cache or the IO buffers")
        copy_into(mem, o, pool, p, ln)          # a memcpy (a slice assignment: 4x slower)
        q = rows[k, 2]
        if q >= 0:
            wl = wlen[j]
            wo = wfill_base[f] + woff[j]
            if wo < 0 or wo + wl > wmem.shape[0] or q < 0 or q + wl > pool.shape[0]:
                raise ValueError("copy_rows: a weight extent outside the cache or the buffers")
            copy_into(wmem, wo, pool, q, wl)


@njit(cache=True, nogil=True)
def extents_held(fids, offs, lens, held, vbase, shift, out):
    """out[i]: every block of extent i is in the adjacency cache (its file's bits from word
    vbase[f] of held; vbase[f] < 0: the file is not cached)."""
    for i in range(fids.shape[0]):
        w0 = vbase[fids[i]]
        ok = w0 >= 0
        if ok:
            b = offs[i] >> shift
            e = (offs[i] + lens[i] + (np.int64(1) << shift) - 1) >> shift
            while b < e:
                wd = held[w0 + (b >> 6)]
                if b & 63 == 0 and e - b >= 64:
                    if wd != np.uint64(0xFFFFFFFFFFFFFFFF):
                        ok = False
                        break
                    b += 64
                    continue
                if (wd >> np.uint64(b & 63)) & np.uint64(1) == 0:
                    ok = False
                    break
                b += 1
        out[i] = ok


@njit(cache=True, nogil=True)
def mark_held(fids, offs, lens, held, vbase, shift):
    """Set the cache's bits of every block of the extents of cached files (after a superstep
    copied them in)."""
    for i in range(fids.shape[0]):
        w0 = vbase[fids[i]]
        if w0 < 0:
            continue
        b = offs[i] >> shift
        e = (offs[i] + lens[i] + (np.int64(1) << shift) - 1) >> shift
        while b < e:
            if b & 63 == 0 and e - b >= 64:
                held[w0 + (b >> 6)] = np.uint64(0xFFFFFFFFFFFFFFFF)
                b += 64
                continue
            held[w0 + (b >> 6)] |= np.uint64(1) << np.uint64(b & 63)
            b += 1


@njit(cache=True, nogil=True)
def pair_rows(c, pending, slot_bytes, out, done_slots):
    """Weighted runs submit request 2j (adjacency) and 2j+1 (weights) for extent j. Pair the halves:
    a half whose partner has not arrived waits in `pending[j]` (its slot); a completed pair becomes
    a kernel row (j, adj pos, wgt pos) and both slots go to `done_slots`. Call under a lock."""
    n = 0
    nd = 0
    for k in range(c.shape[0]):
        r = c[k, 0]
        s = c[k, 1]
        j = r >> 1
        other = pending[j]
        if other < 0:
            pending[j] = s
            continue
        pending[j] = -1
        out[n, 0] = j
        if r & 1:
            out[n, 1] = other * slot_bytes
            out[n, 2] = s * slot_bytes
        else:
            out[n, 1] = s * slot_bytes
            out[n, 2] = other * slot_bytes
        n += 1
        done_slots[nd] = s
        done_slots[nd + 1] = other
        nd += 2
    return n, nd


@njit(cache=True, nogil=True)
def mem_rows(lo, hi, req_file, req_off, req_woff, file_base, wfile_base, weighted, out):
    """In-memory path: extents [lo, hi) -> kernel rows (request, byte pos in the loaded files)."""
    n = 0
    for r in range(lo, hi):
        out[n, 0] = r
        out[n, 1] = file_base[req_file[r]] + req_off[r]
        out[n, 2] = wfile_base[req_file[r]] + req_woff[r] if weighted else -1
        n += 1
    return n


@njit(cache=True, nogil=True)
def set_mask(mask, ids, val):
    for k in range(ids.shape[0]):
        mask[ids[k]] = val


@njit(cache=True, nogil=True)
def weight_extents(offs, lens, id_width, wfile_bytes_of, file_ids, out_off, out_len, align):
    """Weight-file extent of each adjacency extent (same edges; 4-byte weights), widened to
    `align` bytes (512; 4096 when page checksums are verified, so whole pages are read)."""
    m = np.int64(align) - 1
    for k in range(offs.shape[0]):
        if id_width == 4:
            out_off[k] = offs[k]
            out_len[k] = lens[k]
        else:
            a = (offs[k] >> 1) & ~m
            b = ((offs[k] + lens[k]) >> 1)
            b = (b + m) & ~m
            lim = wfile_bytes_of[file_ids[k]]
            if b > lim:
                b = lim
            out_off[k] = a
            out_len[k] = b - a


@njit(cache=True, nogil=True)
def add_degrees(offs, part_base, part_row_lo, deg):
    olo, obase, oexc = offs
    for p in range(part_row_lo.shape[0]):
        b0 = part_base[p]
        lo = part_row_lo[p]
        for i in range(part_base[p + 1] - b0 - 1):
            deg[lo + i] += off3(olo, obase, oexc, b0 + i + 1) - off3(olo, obase, oexc, b0 + i)


@njit(cache=True, nogil=True)
def add_degrees_range(offs, dd, lo, hi, deg):
    """deg[v] += v's degree for v in [lo, hi), summed over its row's column partitions (the
    compact offsets and their grid, io/offsets.py), DEG_BLOCK vertices at a time."""
    d = np.empty(DEG_BLOCK, dtype=np.int64)
    for v0 in range(lo, hi, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, hi)
        degrees_into(offs, dd, v0, v1, d)
        for v in range(v0, v1):
            deg[v] += d[v - v0]


@njit(cache=True, nogil=True)
def part_max_degrees(offs, part_base):
    """The largest list length of each partition (offs: every partition's offsets, back to back
    from part_base[p])."""
    P = part_base.shape[0] - 1
    out = np.zeros(P, dtype=np.int64)
    olo, obase, oexc = offs
    for p in range(P):
        b0 = part_base[p]
        m = 0
        for i in range(part_base[p + 1] - b0 - 1):
            d = off3(olo, obase, oexc, b0 + i + 1) - off3(olo, obase, oexc, b0 + i)
            if d > m:
                m = d
        out[p] = m
    return out


@njit(cache=True, nogil=True)
def within_quota(fids, offs, lens, wlens, pf, quota, page, again):
    """A partly cached file fills up to its quota (quota[0] bytes left): extents of file pf that
    would be copied in (again[i]) keep their flag while the pages they make resident (adjacency,
    and weights when wlens is not empty) fit what is left, which they then use; the rest are read
    and not kept. First come, first kept: blocks read twice earliest."""
    left = quota[0]
    for i in range(fids.shape[0]):
        if not again[i] or fids[i] != pf:
            continue
        cost = ((offs[i] + lens[i] + page - 1) // page - offs[i] // page) * page
        if wlens.shape[0]:
            cost += (wlens[i] + page - 1) // page * page + page
        if cost <= left:
            left -= cost
        else:
            again[i] = False
    quota[0] = left
