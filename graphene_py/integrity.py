"""Integrity of everything read from a dataset: damaged data is an error naming the file and byte
offset, never a segfault and never a silently wrong answer.

What is checked, and when:

| data | check | when |
|---|---|---|
| manifest | CRC32 seal, copies agree (store.py) | open |
| every data file | size; first page against its page checksum (catches swapped/replaced files) | open |
| offsets (`.off`) | whole-file CRC32; starts at 0, never decreases, ends at the edge count | load |
| adjacency pages | CRC32C of every 4 KB page the read covers (`PageChecker`; `check_pages`) | each read, when page checks are on |
| neighbour IDs | inside the partition's column range, before any kernel sees them (`bad_ids`) | each read, always |
| weights | finite (a NaN or inf is damage: the partitioner refuses them on input) | each read, always |
| in-memory / GPU loads | whole-file CRC32 + the ID range / finite checks | load |

Page checks read whole 4 KB pages (extents are widened to page bounds), so their cost is the CRC
itself plus the wider reads; config.CHECK_PAGES has the default and the measured cost.
"""
from __future__ import annotations

import os
import zlib

import numpy as np
from .jit import njit

from .errors import DatasetError

PAGE = 4096
PAGE_SHIFT = 12


class DamagedDataError(DatasetError):
    """Data on disk does not match what the partitioner wrote."""


def _damaged(path, what):
    return DamagedDataError(f"damaged data: {path}: {what} (the file changed after it was written: "
                            f"restore it or partition the input again)")


# -- offsets ---------------------------------------------------------------------------------------
#: offsets are compared CHECK_BLOCK at a time (_first_decrease_of)
CHECK_BLOCK = 1 << 22


#: arrays up to this many entries are checked with numpy while numba is not imported (a small
#: graph's whole-graph path never imports it: algos/small.py); larger ones by the kernels
NUMPY_CHECK_MAX = 1 << 22


def _numpy_checks(a) -> bool:
    from . import jit
    return not jit.materialized() and len(a) <= NUMPY_CHECK_MAX


def _first_decrease_of(off) -> int:
    """The first i with off[i] < off[i - 1], or -1: numpy over blocks of CHECK_BLOCK entries (no
    temporary of |V| entries; about as fast as a kernel, and no numba, whose import a GPU run
    that needs no other CPU kernel would pay for it)."""
    n = len(off)
    for a in range(1, n, CHECK_BLOCK):
        b = min(a + CHECK_BLOCK, n)
        bad = np.flatnonzero(off[a:b] < off[a - 1:b - 1])
        if bad.size:
            return a + int(bad[0])
    return -1


def check_offsets(p, off: np.ndarray, crc=None) -> None:
    """The offsets of partition p as loaded: CRC32 as recorded (of `off`'s bytes, which must then
    be the file's uint64s; or `crc`, computed while reading them), then structure."""
    want_n = p.row_hi - p.row_lo + 1
    if len(off) != want_n:
        raise _damaged(p.off_path, f"{len(off)} offsets, the manifest says {want_n}")
    want = p.checksums.get("off")
    if want is not None:
        if crc is None:
            crc = zlib.crc32(memoryview(np.ascontiguousarray(off)).cast('B'))
        got = f"{crc:08x}"
        if got != want:
            raise _damaged(p.off_path, f"CRC32 {got}, the manifest recorded {want}")
    if len(off) == 0:
        return
    if int(off[0]) != 0:
        raise _damaged(p.off_path, f"first offset is {int(off[0])}, not 0 (byte offset 0)")
    i = _first_decrease_of(off)
    if i >= 0:
        raise _damaged(p.off_path, f"offset {i} ({int(off[i])}) is below offset {i - 1} "
                                   f"({int(off[i - 1])}) (byte offset {8 * i})")
    if int(off[-1]) != p.num_edges:
        raise _damaged(p.off_path, f"last offset is {int(off[-1])}, the partition has "
                                   f"{p.num_edges} edges (byte offset {8 * (len(off) - 1)})")
    if p.num_edges * p.id_width > p.adj_bytes:
        raise _damaged(p.adj_path, f"{p.adj_bytes} bytes cannot hold {p.num_edges} edges")


# -- page tables -------------------------------------------------------------------------------------
def table_path(p, kind: str) -> str:
    return os.path.join(os.path.dirname(p.adj_path), p.pages[kind]["file"])


def load_page_table(p, kind: str, ent: dict) -> np.ndarray:
    path = table_path(p, kind)
    try:
        raw = np.fromfile(path, dtype="<u4")
    except OSError as e:
        raise DatasetError(f"{path}: cannot read page checksums ({e.strerror})") from None
    if len(raw) != int(ent["count"]):
        raise _damaged(path, f"{len(raw)} page checksums, the manifest says {ent['count']}")
    got = f"{zlib.crc32(raw.tobytes()):08x}"
    if got != ent["crc"]:
        raise _damaged(path, f"CRC32 {got}, the manifest recorded {ent['crc']}")
    return raw.astype(np.uint32, copy=False)


def data_path(p, kind: str) -> str:
    return p.adj_path if kind == "adj" else p.wgt_path


def data_size(p, kind: str) -> int:
    return int(p.adj_bytes) if kind == "adj" else (p.num_edges * 4 + 511) // 512 * 512


def check_heads(g) -> None:
    """First page of every data file against the first entry of its page table: a swapped,
    replaced or shifted file is caught at open for two small reads per file."""
    from . import _uring
    for p, kind, path in g.all_files():
        if kind not in p.pages or not p.num_edges:
            continue
        tpath = table_path(p, kind)
        with open(tpath, "rb") as f:
            head = f.read(4)
        n = min(PAGE, data_size(p, kind))
        with open(path, "rb") as f:
            page = f.read(n)
        if len(head) < 4 or len(page) < n:
            raise _damaged(path if len(page) < n else tpath, "file too short")
        want = int.from_bytes(head, "little")
        got = _uring.crc32c(page)
        if got != want:
            raise _damaged(path, f"the page at byte offset 0 has CRC32C {got:08x}, the dataset "
                                 f"recorded {want:08x} (a swapped or replaced file?)")


def verify_pages(p, kind: str) -> list:
    """Recompute every page checksum of one data file (graphene info --verify)."""
    from . import _uring
    path = data_path(p, kind)
    try:
        table = load_page_table(p, kind, p.pages[kind])
    except DatasetError as e:
        return [str(e)]
    problems = []
    step = 1 << 24
    with open(path, "rb") as f:
        k = 0
        while True:
            b = f.read(step)
            if not b:
                break
            got = np.frombuffer(_uring.page_crcs(b, PAGE), "<u4")
            want = table[k:k + len(got)]
            bad = np.flatnonzero(got[:len(want)] != want)
            for i in bad[:3]:
                problems.append(f"{path}: page at byte offset {(k + int(i)) * PAGE} has CRC32C "
                                f"{int(got[i]):08x}, the dataset recorded {int(want[i]):08x}")
            k += len(got)
    if k != len(table):
        problems.append(f"{path}: {k} pages, the page table has {len(table)}")
    return problems


# -- IDs and weights ------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _range_of(a, lo, hi):
    """min and max of a[lo:hi] (hi > lo), as int64. A slice walked from 0 in its own type
    vectorizes: indexing a[i] from lo keeps numba's negative-index check in the loop, which
    LLVM does not vectorize (6x slower here, in cache)."""
    b = a[lo:hi]
    mn = b[0]
    mx = b[0]
    for i in range(b.shape[0]):
        x = b[i]
        mn = x if x < mn else mn
        mx = x if x > mx else mx
    return np.int64(mn), np.int64(mx)


@njit(cache=True, nogil=True)
def _first_outside(a, lo, hi, vlo, vhi):
    for i in range(lo, hi):
        x = np.int64(a[i])
        if x < vlo or x >= vhi:
            return i
    return -1


@njit(cache=True, nogil=True, inline="always")
def _edges_of(rows, k, req_file, req_off, req_len, file_part, part_nedges, id_shift):
    """(partition, first edge, end edge) of the valid edges completed row k's extent holds."""
    r = rows[k, 0]
    p = file_part[req_file[r]]
    e_lo = req_off[r] >> id_shift
    e_hi = (req_off[r] + req_len[r]) >> id_shift
    if e_hi > part_nedges[p]:
        e_hi = part_nedges[p]
    return p, e_lo, e_hi


@njit(cache=True, nogil=True)
def bad_ids(buf, rows, n, req_file, req_off, req_len, file_part, part_nedges, col_lo, col_hi,
            id_shift):
    """Check the neighbour IDs of n completed extents (rows as process_batch gets them). Returns
    (-1, 0, 0) or (row k, edge index in the partition's file, the ID)."""
    for k in range(n):
        p, e_lo, e_hi = _edges_of(rows, k, req_file, req_off, req_len, file_part, part_nedges,
                                  id_shift)
        if e_hi <= e_lo:
            continue
        base = (rows[k, 1] >> id_shift) - e_lo
        mn, mx = _range_of(buf, base + e_lo, base + e_hi)
        if mn < col_lo[p] or mx >= col_hi[p]:
            i = _first_outside(buf, base + e_lo, base + e_hi, col_lo[p], col_hi[p])
            return k, i - base, np.int64(buf[i])
    return -1, 0, 0


@njit(cache=True, nogil=True)
def _nonfinite(w, lo, hi):
    """The first index in lo..hi of a NaN or infinite weight (float32), or -1. A float32 is one
    of those when its exponent bits are all set: that exponent plus one more carries into the
    sign bit, and an OR over the words vectorizes (a float sum that turned NaN, as before, added
    one element at a time: numba's floats may not be reordered; 2.6% of a cold SSSP's samples)."""
    b = w[lo:hi].view(np.uint32)           # from 0: vectorizes (see _range_of)
    acc = np.uint32(0)
    for i in range(b.shape[0]):
        acc |= (b[i] & np.uint32(0x7F800000)) + np.uint32(0x00800000)
    if not acc & np.uint32(0x80000000):
        return -1
    for i in range(lo, hi):
        if not np.isfinite(w[i]):
            return i
    return -1


@njit(cache=True, nogil=True)
def bad_weights(wbuf, rows, n, req_file, req_off, req_len, req_woff, file_part, part_nedges,
                id_shift):
    """Check the weights of n completed weighted extents (rows: request, adj pos, weight pos).
    Returns (-1, 0) or (row k, edge index)."""
    for k in range(n):
        p, e_lo, e_hi = _edges_of(rows, k, req_file, req_off, req_len, file_part, part_nedges,
                                  id_shift)
        if e_hi <= e_lo:
            continue
        wbase = (rows[k, 2] - req_woff[rows[k, 0]]) >> 2
        i = _nonfinite(wbuf, wbase + e_lo, wbase + e_hi)
        if i >= 0:
            return k, i - wbase
    return -1, 0


def check_array(p, kind: str, arr: np.ndarray) -> None:
    """A whole file's valid part in memory: neighbour IDs in range, or weights finite."""
    m = p.num_edges
    if not m:
        return
    if kind == "adj" and _numpy_checks(arr):
        bad = np.flatnonzero((arr[:m] < p.col_lo) | (arr[:m] >= p.col_hi))
        if bad.size:
            i = int(bad[0])
            raise _damaged(p.adj_path, f"neighbour ID {int(arr[i])} at byte offset {i * p.id_width} "
                                       f"is outside this partition's range [{p.col_lo}, {p.col_hi})")
    elif kind == "adj":
        mn, mx = _range_of(arr, 0, m)
        if mn < p.col_lo or mx >= p.col_hi:
            i = _first_outside(arr, 0, m, p.col_lo, p.col_hi)
            raise _damaged(p.adj_path, f"neighbour ID {int(arr[i])} at byte offset {i * p.id_width} "
                                       f"is outside this partition's range [{p.col_lo}, {p.col_hi})")
    else:
        if _numpy_checks(arr):
            bad = np.flatnonzero(~np.isfinite(arr[:m]))
            i = int(bad[0]) if bad.size else -1
        else:
            i = _nonfinite(arr, 0, m)
        if i >= 0:
            raise _damaged(p.wgt_path, f"weight {arr[i]} at byte offset {4 * i} is not a finite "
                                       f"number")


def check_crc(p, kind: str, raw) -> None:
    want = p.checksums.get(kind)
    if want is None:
        return
    got = f"{zlib.crc32(memoryview(raw).cast('B')):08x}"
    if got != want:
        raise _damaged(data_path(p, kind), f"CRC32 {got}, the manifest recorded {want}")


def read_checked(p, kind: str) -> np.ndarray:
    """A data file's valid entries, read whole and checked (CRC32, then IDs/weights)."""
    path = data_path(p, kind)
    raw = np.fromfile(path, dtype=np.uint8)
    check_crc(p, kind, raw)
    if kind == "adj":
        arr = raw[:p.num_edges * p.id_width].view("<u4" if p.id_width == 4 else "<u8")
    else:
        arr = raw[:p.num_edges * 4].view("<f4")
    if len(arr) < p.num_edges:
        raise _damaged(path, f"{len(raw)} bytes cannot hold {p.num_edges} entries")
    check_array(p, kind, arr)
    return arr


# -- the SSD path's checker -----------------------------------------------------------------------------
class PageChecker:
    """Page checksums of an IoIterator's files, checked as extents arrive (C, GIL released).

    files: the partitions in engine file order; weights: whether weight files are read too."""

    def __init__(self, parts, weights: bool):
        self.parts = parts
        self.enabled = all("adj" in p.pages for p in parts) and (
            not weights or all("wgt" in p.pages for p in parts))
        self.kinds = ("adj", "wgt") if weights else ("adj",)
        self.tables = {}
        if not self.enabled:
            return
        for kind in self.kinds:
            tabs = [load_page_table(p, kind, p.pages[kind]) for p in parts]
            base = np.zeros(len(parts) + 1, dtype=np.int64)
            np.cumsum([len(t) for t in tabs], out=base[1:])
            table = np.concatenate(tabs) if tabs else np.zeros(0, np.uint32)
            sizes = np.array([data_size(p, kind) for p in parts], dtype=np.int64)
            self.tables[kind] = (np.ascontiguousarray(table, dtype=np.uint32), base, sizes)

    def check(self, buf, rows, n, req_file, req_off, req_len, kind="adj", col=1):
        from . import _uring
        table, base, sizes = self.tables[kind]
        bad = _uring.check_pages(buf, rows, n, col, req_file, req_off, req_len, table, base, sizes,
                                 PAGE_SHIFT)
        if bad is not None:
            k, off, want, got = bad
            p = self.parts[int(req_file[rows[k, 0]])]
            raise _damaged(data_path(p, kind), f"the page at byte offset {off} has CRC32C "
                                               f"{got:08x}, the dataset recorded {want:08x}")


def id_error(p, edge: int, value: int) -> DamagedDataError:
    return _damaged(p.adj_path, f"neighbour ID {value} at byte offset {edge * p.id_width} is "
                                f"outside this partition's range [{p.col_lo}, {p.col_hi})")


def weight_error(p, edge: int) -> DamagedDataError:
    return _damaged(p.wgt_path, f"the weight at byte offset {edge * 4} is not a finite number")
