"""An iterator's offsets held in about 2 bytes per entry instead of 4 or 8 (issue 13).

The offsets of every partition (`part_base[p]:part_base[p + 1]`, each partition's positions
from 0 to its edge count) are what a run keeps per vertex and column partition. Held as int32
they cost 4 bytes per vertex on a 1x1 grid and 8 on a 2x2 one: half of BFS's per-vertex state
on the 2x2 grid of issue 13's scale-24 graph. Here they are cut into groups of GROUP (128)
consecutive entries: a group whose values never decrease and span at most SPAN (65535) stores
its first value once (`base`, int64) and each entry as its distance from it (`lo`, uint16); any
other group (a hub's list, the last entries of one partition beside the first of the next)
stores its entries whole (`exc`, int64) and `base` says where, as -(its index + 1). An entry is then two
loads:

    O = compact(full)                  # (lo, base, exc): one tuple, the kernels' argument
    off_at(O, b)                       # == full[b], inside numba kernels
    decode(O, b0, b1)                  # full[b0:b1] (Python side)

The group size is a constant, not chosen per dataset: numba then compiles the shifts and masks
as such, and a sequential walk over compact offsets costs what one over an int32 array does
(kron22, 4.2 M entries: 3.9 against 4.0 ms); with the group size a variable it took 6-50 ms.
On a Kronecker graph nearly every group is short: kron22's offsets take 2.06 bytes per entry.

`grid(...)` describes the rows of an iterator's partitions for per-vertex degrees,
`deg_at(O, dd, v)`: v's degree summed over its row's partitions, for what reads a few degrees
(the cost model's frontier sums). Passes over every vertex read `DegreeBytes` instead.
"""
from __future__ import annotations

import numpy as np

from ..jit import njit

#: entries per group (a power of two: SHIFT) and the largest span a group stores in uint16
SHIFT = 7
GROUP = 1 << SHIFT
SPAN = 0xFFFF


@njit
def off_at(O, b):
    """Entry b of compact offsets O (int64)."""
    lo, base, exc = O
    return off3(lo, base, exc, b)


@njit
def off3(lo, base, exc, b):
    """off_at over O's three arrays: a kernel that reads many entries unpacks O once (a tuple
    unpacked in every call costs a reference count per array where numba cannot prune it)."""
    x = base[b >> 7]
    if x >= 0:
        y = x + np.int64(lo[b])
    else:
        y = exc[((-x - 1) << 7) + (b & 127)]
    return y


@njit(inline="always")
def n_of(dd):
    """The vertex count of a deg_at descriptor."""
    return dd[2 + dd[0]]


@njit
def deg_at(O, dd, v):
    """v's degree: its list lengths summed over its row's partitions, dd = grid(...)'s
    descriptor [R, C, row bounds (R + 1), then for row r and column c the index in O of the
    row's first vertex (R * C)]. For what reads degrees here and there (a frontier's); a pass
    over every vertex takes them a block at a time (degrees_into)."""
    lo, base, exc = O
    R = dd[0]
    C = dd[1]
    r = 0
    while r + 1 < R and v >= dd[3 + r]:
        r += 1
    k = 3 + R + r * C
    kend = k + C
    d = np.int64(0)
    while k < kend:
        d += _len3(lo, base, exc, dd[k] + v)
        k += 1
    return d


@njit
def _len3(lo, base, exc, b):
    """off3(b + 1) - off3(b): one base entry when both are in one short group."""
    x = base[b >> 7]
    if x >= 0 and (b & 127) != 127:
        d = np.int64(lo[b + 1]) - np.int64(lo[b])
    else:
        d = off3(lo, base, exc, b + 1) - off3(lo, base, exc, b)
    return d


#: vertices per block of degrees_into (a pass's scratch row: DEG_BLOCK int64)
DEG_BLOCK = 512


@njit
def degrees_into(O, dd, v0, v1, out):
    """out[:v1 - v0] = the degrees of vertices v0..v1 (at most out.shape[0] of them), walking
    each column's offsets in order: what a pass over every vertex reads, DEG_BLOCK at a time:

        deg = np.empty(DEG_BLOCK, dtype=np.int64)
        for v0 in range(lo, hi, DEG_BLOCK):
            v1 = min(v0 + DEG_BLOCK, hi)
            degrees_into(O, dd, v0, v1, deg)
            for v in range(v0, v1):
                d = deg[v - v0]
    """
    lo, base, exc = O
    R = dd[0]
    C = dd[1]
    for i in range(v1 - v0):
        out[i] = 0
    v = v0
    r = 0
    while v < v1:
        while r + 1 < R and v >= dd[3 + r]:
            r += 1
        e = min(v1, dd[3 + r])
        k = 3 + R + r * C
        for c in range(C):
            _lengths_add(lo, base, exc, dd[k + c] + v, e - v, out, v - v0)
        v = e


@njit
def _lengths_add(lo, base, exc, b, m, out, o):
    """out[o + i] += the list length of entry b + i (off3(b + i + 1) - off3(b + i)), i < m:
    inside a short group a difference of two uint16 (a loop the compiler vectorizes)."""
    i = 0
    while i < m:
        j = b + i
        g = j >> 7
        stop = min(((g + 1) << 7) - 1, b + m)      # j + 1 stays in group g below this
        if base[g] >= 0 and j < stop:
            q = o - b
            for t in range(j, stop):
                out[q + t] += np.int64(lo[t + 1]) - np.int64(lo[t])
            i = stop - b
        else:
            out[o + i] += off3(lo, base, exc, j + 1) - off3(lo, base, exc, j)
            i += 1


@njit(inline="always")
def _short(full, a, e):
    """Whether entries a..e-1 of `full` form a short group: non-decreasing (one partition's
    offsets are; a group across a partition boundary is not) and spanning at most SPAN, which
    then only needs its first and last entry."""
    x0 = np.int64(full[a])
    short = np.int64(full[e - 1]) - x0 <= SPAN
    if short:
        for i in range(a + 1, e):
            if full[i] < full[i - 1]:
                short = False
                break
    return short


@njit(cache=True, nogil=True)
def _exceptions(full):
    """How many groups of `full` are not short (_short)."""
    n = full.shape[0]
    ne = 0
    for a in range(0, n, GROUP):
        if not _short(full, a, min(a + GROUP, n)):
            ne += 1
    return ne


@njit(cache=True, nogil=True)
def _fill(full, lo, base, exc):
    n = full.shape[0]
    k = 0
    for g in range(base.shape[0]):
        a = g << SHIFT
        e = min(a + GROUP, n)
        if _short(full, a, e):
            x0 = np.int64(full[a])
            base[g] = x0
            for i in range(a, e):
                lo[i] = np.uint16(np.int64(full[i]) - x0)
        else:
            base[g] = -(k + 1)
            for i in range(a, e):
                exc[(k << SHIFT) + i - a] = np.int64(full[i])
                lo[i] = 0
            k += 1


@njit(cache=True, nogil=True)
def _decode(O, b0, out):
    lo, base, exc = O
    for i in range(out.shape[0]):
        out[i] = off3(lo, base, exc, b0 + i)


def compact(full) -> tuple:
    """Compact offsets of a 1-D integer array (any signed or unsigned dtype whose values fit
    int64; uint64 is read through an int64 view)."""
    a = np.ascontiguousarray(full)
    if a.dtype == np.uint64:
        a = a.view(np.int64)
    elif a.dtype.kind not in "iu" or a.dtype.itemsize > 8:
        a = a.astype(np.int64)
    n = a.shape[0]
    G = (n + GROUP - 1) >> SHIFT
    ne = int(_exceptions(a)) if n else 0
    lo = np.empty(n, dtype=np.uint16)
    base = np.empty(G, dtype=np.int64)
    exc = np.empty(ne << SHIFT, dtype=np.int64)
    if n:
        _fill(a, lo, base, exc)
    return (lo, base, exc)


def decode(O, b0: int = 0, b1: int = None, dtype=np.int64) -> np.ndarray:
    """Entries b0..b1 of compact offsets O, as `dtype` (int32 where they fit; uint64: int64)."""
    if b1 is None:
        b1 = O[0].shape[0]
    dtype = np.int64 if np.dtype(dtype) == np.uint64 else dtype
    out = np.empty(max(0, int(b1) - int(b0)), dtype=dtype)
    if len(out):
        _decode(O, np.int64(b0), out)
    return out


def bound_bytes(parts) -> int:
    """At most the bytes compact() holds these partitions' offsets in (parts: names.Partition
    or anything with row_lo, row_hi, num_edges): 2 bytes per entry and 8 per group, plus a
    group held whole (8 bytes per entry) per 65536 edges and per partition boundary: a group
    is whole only when its values span more than 65535, and the spans of a partition's groups
    do not overlap."""
    return bound_bytes_of(sum(int(p.row_hi) - int(p.row_lo) + 1 for p in parts),
                          sum(int(p.num_edges) for p in parts), len(parts))


def bound_bytes_of(entries: int, edges: int, nparts: int) -> int:
    """bound_bytes for `entries` offsets of `nparts` partitions holding `edges` edges."""
    groups = -(-entries // GROUP) + 1
    return 2 * entries + 8 * groups + 8 * GROUP * (edges // (SPAN + 1) + nparts)


def nbytes(O) -> int:
    return int(O[0].nbytes + O[1].nbytes + O[2].nbytes)


def arrays(O):
    """O's arrays (for memory accounting)."""
    return O[0], O[1], O[2]


def grid(part_base, part_row_lo, part_row_hi, n):
    """The descriptor deg_at takes for partitions part_base/part_row_lo/part_row_hi (in any
    order) over vertices 0..n, or None when their rows do not form a grid of R row ranges that
    tile 0..n with C partitions each."""
    P = len(part_row_lo)
    rows = {}
    for p in range(P):
        rows.setdefault((int(part_row_lo[p]), int(part_row_hi[p])), []).append(p)
    keys = sorted(rows)
    if not keys:
        return None
    C = len(rows[keys[0]])
    if any(len(rows[k]) != C for k in keys) or keys[0][0] != 0 or keys[-1][1] != n or \
            any(keys[i][1] != keys[i + 1][0] for i in range(len(keys) - 1)):
        return None
    R = len(keys)
    dd = [R, C] + [k[0] for k in keys] + [n]
    for k in keys:
        for p in rows[k]:
            dd.append(int(part_base[p]) - k[0])
    return np.array(dd, dtype=np.int64)


def of_degrees(deg):
    """(O, dd) for a degree array (a cluster's, a stand-in's): compact offsets of its prefix
    sums, one partition."""
    n = len(deg)
    full = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(deg, out=full[1:])
    return compact(full), np.array([1, 1, 0, n, 0], dtype=np.int64)
