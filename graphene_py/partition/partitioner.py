"""Row-column balanced 2D partitioning (Graphene §4.5.1) and the two entry points:
`partition_arrays` (in-memory edge arrays) and `partition` (an edge-list file, streamed, with an
external sort when the edges exceed the memory limit).

Pipeline (both entry points):
 1. edges -> sorted, deduplicated CSR (`extsort`): self-loops dropped while scattering, reversed
    edges added for --symmetrize, duplicates removed keeping the smallest weight.
 2. row bounds: R ranges of consecutive vertices with (about) equal *edge* counts: bound j is the
    vertex v whose prefix edge count is nearest to j*|E|/R (so a row is within one adjacency list of
    the ideal). With no edges at all the vertices are split evenly.
 3. per row r, column bounds: the row's edges histogrammed by destination, split the same way into C
    ranges of equal edge counts (bounds differ per row).
 4. disks: partitions sorted by bytes (adj + off + wgt), largest first, each to the disk with the
    fewest bytes so far (ties: lowest disk index; out and in partitions share the loads).
 5. every partition written as CSR (`writer`), then the manifest, then the atomic rename.
--in-edges repeats 2-5 for the transposed graph (its own bounds) into manifest["in"].

Default grid (`default_grid`): one disk -> 1x1; k disks -> R = C = ceil(sqrt(k)), so there are at
least as many partitions as disks (Graphene runs one IO + one compute thread per partition/disk).
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Optional

import numpy as np
from ..jit import njit

from .. import config
from ..errors import GrapheneError, InputFormatError
from ..graph import LABELS_FILE, Graph, id_dtype
from . import extsort
from .extsort import MemoryCSR, scratch_array, sort_to_csr, vertex_blocks
from .short import ShortWriter
from .writer import DatasetWriter, check_disks, check_name

TOOL = "graphene_py 0.1.0"


# ----------------------------------------------------------------------------------------------
# bounds and placement
def balanced_bounds(cum: np.ndarray, k: int) -> list:
    """k+1 bounds over len(cum)-1 items with prefix sums `cum` (cum[0] = 0): bound j is the index
    whose prefix is nearest to j*total/k (ties: the later index), kept non-decreasing."""
    n = len(cum) - 1
    total = int(cum[-1])
    out = [0]
    for j in range(1, k):
        if total == 0:
            b = j * n // k
        else:
            num = j * total                       # target = num / k
            t = -(-num // k)                      # smallest integer >= target
            b = int(np.searchsorted(cum, t, side="left"))
            # t <= total, so b <= n; step back when the previous prefix is strictly nearer
            if b > 0 and (num - k * int(cum[b - 1])) < (k * int(cum[b]) - num):
                b -= 1
        out.append(max(b, out[-1]))
    out.append(n)
    return out


def default_grid(num_disks: int) -> tuple:
    if num_disks <= 1:
        return 1, 1
    r = math.ceil(math.sqrt(num_disks))
    return r, r


def _padded(nbytes: int) -> int:
    return (nbytes + 511) // 512 * 512


def assign_disks(sizes: dict, loads: list) -> dict:
    """{key: bytes} -> {key: disk}, greedy largest first onto the least-loaded disk (loads updated)."""
    out = {}
    for key in sorted(sizes, key=lambda k: (-sizes[k], k)):
        d = min(range(len(loads)), key=lambda i: (loads[i], i))
        out[key] = d
        loads[d] += sizes[key]
    return out


# ----------------------------------------------------------------------------------------------
# kernels: split a block of a row's adjacency lists by column bounds
@njit(cache=True, nogil=True)
def _col_lens(lptr, idx, colb, lens):
    nb = lptr.shape[0] - 1
    C = colb.shape[0] - 1
    for v in range(nb):
        p = lptr[v]
        b = lptr[v + 1]
        for c in range(C - 1):
            hi = colb[c + 1]
            lo_ = p
            hi_ = b
            while lo_ < hi_:          # first position in [p, b) with idx >= hi
                mid = (lo_ + hi_) >> 1
                if idx[mid] < hi:
                    lo_ = mid + 1
                else:
                    hi_ = mid
            lens[c, v] = lo_ - p
            p = lo_
        lens[C - 1, v] = b - p


@njit(cache=True, nogil=True)
def _gather(lptr, idx, w, has_w, lens, starts, out_idx, out_w):
    nb = lptr.shape[0] - 1
    C = lens.shape[0]
    pos = starts.copy()
    for v in range(nb):
        p = lptr[v]
        for c in range(C):
            ln = lens[c, v]
            q = pos[c]
            for j in range(ln):
                out_idx[q + j] = idx[p + j]
                if has_w:
                    out_w[q + j] = w[p + j]
            pos[c] = q + ln
            p += ln


# ----------------------------------------------------------------------------------------------
def _plan_direction(store, R, C, budget):
    """Row bounds, per-row column bounds and per-partition edge counts."""
    n = store.n
    rows = balanced_bounds(store.indptr, R)
    cols, counts = [], {}
    for r in range(R):
        lo, hi = rows[r], rows[r + 1]
        if C == 1:
            cb = [0, n]
            counts[(r, 0)] = int(store.indptr[hi] - store.indptr[lo])
        else:
            # two threads' int32 counts take the bytes of one int64 count per vertex (while no
            # count can pass 2^31: the row has fewer edges)
            parts = 2 if (int(store.indptr[hi] - store.indptr[lo]) < (1 << 31)
                          and extsort.numba.get_num_threads() > 1) else 1
            hists = np.zeros((parts, n), dtype=np.int32 if parts > 1 else np.int64)
            scratch = {}
            for v0, v1 in vertex_blocks(store.indptr, lo, hi, budget):
                idx, _ = store.get(v0, v1, scratch)
                if len(idx):
                    extsort.count_ids(hists, idx)   # no n-sized bincount per block
            cum = np.empty(n + 1, dtype=np.int64)
            extsort.prefix_of_counts(hists, cum)
            del hists
            cb = balanced_bounds(cum, C)
            for c in range(C):
                counts[(r, c)] = int(cum[cb[c + 1]] - cum[cb[c]])
        cols.append([int(x) for x in cb])
    return [int(x) for x in rows], cols, counts


def _blocks(store, lo, hi, budget, scratch):
    """(v0, v1, local indptr, indices, weights) of the vertex blocks of [lo, hi) in `store`."""
    if getattr(store, "streamed", False):
        yield from store.blocks()
        return
    for v0, v1 in vertex_blocks(store.indptr, lo, hi, budget):
        idx, w = store.get(v0, v1, scratch)
        lptr = scratch_array(scratch, "lptr", v1 - v0 + 1, np.int64)
        np.subtract(store.indptr[v0:v1 + 1], store.indptr[v0], out=lptr)
        yield v0, v1, lptr, idx, w


def _whole(w, chunk=1 << 20) -> bool:
    """Whether every weight is a whole number (SSSP's distances can then be integers:
    algos/sssp.py int_distances); a slice at a time, within the partitioner's memory."""
    for a in range(0, len(w), chunk):
        p = w[a:a + chunk]
        if not np.array_equal(p, np.floor(p)):
            return False
    return True


def _write_direction(writer, store, direction, R, C, id_width, weighted, budget, loads,
                     progress=None, wstats=None, short=None):
    """One direction's partitions; wstats (a dict) gets the weights' min, max and sum; short (a
    short.ShortWriter) gets every block's whole lists. A streamed store (extsort.BucketStore or
    MergingCSR: 1x1 only) is sorted as it is written."""
    streamed = getattr(store, "streamed", False)
    if streamed:
        assert R == 1 and C == 1, (R, C)
        rows, cols, counts = [0, store.n], [[0, store.n]], {(0, 0): store.m_upper}
    else:
        rows, cols, counts = _plan_direction(store, R, C, budget)
    sizes = {}
    for (r, c), m in counts.items():
        sizes[(r, c)] = (_padded(m * id_width) + (rows[r + 1] - rows[r] + 1) * 8 +
                         (_padded(m * 4) if weighted else 0))
    disk_of = assign_disks(sizes, loads)
    dt = id_dtype(id_width)
    parts = []
    scratch = {}        # the blocks' arrays: the same pages for every block (scratch_array)
    for r in range(R):
        lo, hi = rows[r], rows[r + 1]
        colb = np.asarray(cols[r], dtype=np.int64)
        files = []
        for c in range(C):
            d = disk_of[(r, c)]
            base = f"{direction}_r{r}_c{c}"
            fa = writer.open(d, base + ".adj", pages=True)
            fo = writer.open(d, base + ".off", pad=False)
            fw = writer.open(d, base + ".wgt", pages=True) if weighted else None
            fo.write(np.zeros(1, dtype="<u8"))
            files.append([fa, fo, fw, 0])
        done = 0
        for v0, v1, lptr, idx, w in _blocks(store, lo, hi, budget, scratch):
            if short is not None:
                short.add(v0, lptr, idx)
            lens = scratch_array(scratch, "lens", (C, v1 - v0), np.int64, zero=C > 1)
            if C == 1 and idx.dtype == dt and (not weighted or w.dtype == np.dtype("<f4")):
                # one column: the block's lists are the partition's, as they are
                np.subtract(lptr[1:], lptr[:-1], out=lens[0])
                starts = np.array([0, len(idx)], dtype=np.int64)
                out_idx, out_w = idx, (w if weighted else extsort._EMPTY_W)
            else:
                _col_lens(lptr, idx, colb, lens)
                tot = lens.sum(axis=1)
                starts = np.zeros(C + 1, dtype=np.int64)
                np.cumsum(tot, out=starts[1:])
                out_idx = scratch_array(scratch, "out_idx", int(starts[-1]), dt)
                out_w = (scratch_array(scratch, "out_w", int(starts[-1]), "<f4") if weighted
                         else extsort._EMPTY_W)
                _gather(lptr, idx, w if weighted else extsort._EMPTY_W, weighted, lens, starts,
                        out_idx, out_w)
            if wstats is not None and len(out_w):
                wstats["min"] = min(wstats.get("min", np.inf), float(out_w.min()))
                wstats["max"] = max(wstats.get("max", -np.inf), float(out_w.max()))
                wstats["sum"] = wstats.get("sum", 0.0) + float(out_w.sum(dtype=np.float64))
                if wstats.get("integral", True):
                    wstats["integral"] = _whole(out_w)
            for c in range(C):
                fa, fo, fw, base_e = files[c]
                a, b = int(starts[c]), int(starts[c + 1])
                fa.write(out_idx[a:b])
                if fw is not None:
                    fw.write(out_w[a:b])
                off = np.cumsum(lens[c]) + base_e
                fo.write(off.astype("<u8"))
                files[c][3] = base_e + (b - a)
            done += len(idx)
            if progress:
                progress(direction, done)
        if streamed:
            counts[(0, 0)] = store.m
        for c in range(C):
            fa, fo, fw, m = files[c]
            assert m == counts[(r, c)], (m, counts[(r, c)])
            entry = {"row": r, "col": c, "disk": disk_of[(r, c)],
                     "adj": os.path.basename(fa.path), "off": os.path.basename(fo.path),
                     "wgt": os.path.basename(fw.path) if fw is not None else None,
                     "num_edges": m}
            ck = {"adj": fa.close(), "off": fo.close()}
            pages = {"adj": fa.page_entry()}
            if fw is not None:
                ck["wgt"] = fw.close()
                pages["wgt"] = fw.page_entry()
            entry["adj_bytes"] = fa.size
            entry["checksum"] = ck
            entry["pages"] = pages
            parts.append(entry)
    parts.sort(key=lambda p: (p["row"], p["col"]))
    return {"rows": rows, "cols": cols, "partitions": parts}


def _mirror_direction(writer, sec, direction):
    """An undirected dataset's `direction` partitions (its in-edges): the out-partitions' own
    files under that direction's names. Every edge goes both ways, so v's in-list is its
    out-list, and the rows, columns, offsets and checksums are the same. Hard links where the
    disk allows (writer.mirror): no second sort and no second copy of the bytes."""
    parts = []
    for p in sec["partitions"]:
        q = dict(p)
        base = f"{direction}_r{p['row']}_c{p['col']}"
        for key in ("adj", "off", "wgt"):
            if p.get(key):
                q[key] = base + "." + key
                writer.mirror(p["disk"], p[key], q[key])
        q["pages"] = {}
        for key, pe in p["pages"].items():
            q["pages"][key] = dict(pe, file=q[key] + ".pcrc")
            writer.mirror(p["disk"], pe["file"], q["pages"][key]["file"])
        parts.append(q)
    return {"rows": sec["rows"], "cols": sec["cols"], "partitions": parts}


def _transpose_store(store, budget):
    """In-memory transposed CSR of a (deduplicated) store."""
    n = store.n
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(store.indptr))
    idx, w = store.get(0, n)
    ptr, tidx, tw, _ = sort_to_csr(idx, src, w, n, symmetrize=False, drop_self_loops=False,
                                   dedupe=False)
    return MemoryCSR(ptr, tidx, tw)


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique of an integer array by sort + adjacent compare: numpy 2.4's np.unique takes ~1 us
    per element on int64 (3 s for 3 M), a sort ~0.1 us (kron20's 33 M keys: 54 s -> 3 s)."""
    a = np.sort(a, kind="stable" if a.dtype.kind == "f" else None)
    if len(a) < 2:
        return a
    keep = np.empty(len(a), dtype=np.bool_)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def auto_id_width(num_vertices: int) -> int:
    return 4 if num_vertices <= (1 << 32) else 8


def _check_grid(rows, cols, num_disks):
    R, C = default_grid(num_disks)
    if rows is None and cols is None:
        return R, C
    if rows is None or cols is None:
        raise GrapheneError("give both --rows and --cols (or neither)")
    if int(rows) < 1 or int(cols) < 1:
        raise GrapheneError(f"--rows and --cols must be >= 1 (got {rows}x{cols})")
    return int(rows), int(cols)


def write_dataset(writer, out_store, *, num_vertices, id_width, weighted, directed, R, C, in_edges,
                  budget, stats, options, input_info, relabel=None, in_store_fn=None, progress=None,
                  t0=None, names=None):
    """Write both directions from CSR stores and commit. Returns the dataset folder on disk 0."""
    loads = [0] * len(writer.disks)
    wstats = {} if weighted else None
    short = {}
    sw = ShortWriter(writer, "out", id_dtype(id_width))
    try:
        out_sec = _write_direction(writer, out_store, "out", R, C, id_width, weighted, budget,
                                   loads, progress, wstats, short=sw)
        short["out"] = sw.finish(int(out_store.m), loads)
    finally:
        sw.abort()
    if callable(stats):         # made of the edge count, known once a streamed store is written
        stats = stats(int(out_store.m))
    if wstats:      # what SSSP's default bucket width is made from (algos/sssp.py default_delta)
        stats = dict(stats, weight_min=wstats["min"], weight_max=wstats["max"],
                     weight_mean=wstats["sum"] / max(1, int(out_store.m)),
                     weight_integral=wstats["integral"])
    in_sec = None
    if in_edges and not directed:     # undirected: the in-lists are the out-lists
        in_sec = _mirror_direction(writer, out_sec, "in")
        short["in"] = short["out"]
    elif in_edges:
        in_store = in_store_fn() if in_store_fn else _transpose_store(out_store, budget)
        sw = ShortWriter(writer, "in", id_dtype(id_width))
        try:
            in_sec = _write_direction(writer, in_store, "in", R, C, id_width, weighted, budget,
                                      loads, progress, short=sw)
            short["in"] = sw.finish(int(in_store.m), loads)
        finally:
            sw.abort()
        in_store.close()
    rel = rel_crc = None
    if relabel is not None:
        rel_crc = writer.save_npy(0, "relabel.npy", np.asarray(relabel, dtype=np.int64))
        rel = "relabel.npy"
    if t0 is not None:
        options["seconds"] = round(time.time() - t0, 3)
    manifest = {
        "num_vertices": int(num_vertices), "num_edges": int(out_store.m), "id_width": int(id_width),
        "directed": bool(directed), "weighted": bool(weighted), "block_size": config.BLOCK_SIZE,
        "out": out_sec, "in": in_sec, "stats": stats, "options": options, "input": input_info,
        "relabel": rel, "relabel_crc": rel_crc, "tool": TOOL, **(names or {}),
    }
    # (a direction without one: None; a dataset without the key was made before these files)
    manifest["short"] = short
    return writer.commit(manifest)


# ----------------------------------------------------------------------------------------------
def partition_arrays(src, dst, *, weights=None, num_vertices=None, disks, name, rows=None, cols=None,
                     symmetrize=False, drop_self_loops=True, drop_duplicates=True, in_edges=False,
                     id_width=None, force=False, register=True, durable=True) -> Graph:
    """In-memory edge arrays -> a complete dataset (graph.py format); returns Graph.open of it.
    `num_vertices` defaults to max ID + 1 (0 without edges); duplicates keep the smallest weight.
    durable=False skips the fsyncs (scratch datasets: NetworkX conversions, tests)."""
    t0 = time.time()
    disks = check_disks(disks)
    check_name(name)
    R, C = _check_grid(rows, cols, len(disks))
    src = np.asarray(src)
    dst = np.asarray(dst)
    if src.shape != dst.shape or src.ndim != 1:
        raise GrapheneError(f"src and dst must be 1-D arrays of equal length "
                            f"(got {src.shape} and {dst.shape})")
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float32)
        if weights.shape != src.shape:
            raise GrapheneError(f"weights must match src/dst (got {weights.shape}, {src.shape})")
        if not np.all(np.isfinite(weights)):
            raise GrapheneError("weights must be finite numbers")
    if len(src) and (src.dtype.kind not in "iu" or dst.dtype.kind not in "iu"):
        raise GrapheneError("vertex IDs must be integers")
    src = src.astype(np.int64, copy=False)
    dst = dst.astype(np.int64, copy=False)
    mx = int(max(src.max(), dst.max())) if len(src) else -1
    mn = int(min(src.min(), dst.min())) if len(src) else 0
    if mn < 0:
        raise GrapheneError(f"negative vertex ID {mn}")
    n = mx + 1 if num_vertices is None else int(num_vertices)
    if n < mx + 1:
        raise GrapheneError(f"num_vertices={n} but the edges use vertex ID {mx}")
    width = auto_id_width(n) if id_width is None else int(id_width)
    if width not in (4, 8):
        raise GrapheneError(f"id width must be 4 or 8 (got {width})")
    if width == 4 and n > (1 << 32):
        raise GrapheneError(f"id width 4 cannot hold vertex ID {n - 1} (use 8)")
    with DatasetWriter(disks, name, force=force, register=register, durable=durable) as writer:
        indptr, idx, w, loops = sort_to_csr(src, dst, weights, n, symmetrize=symmetrize,
                                            drop_self_loops=drop_self_loops, dedupe=drop_duplicates)
        store = MemoryCSR(indptr, idx, w)
        kept_before_dedupe = _expected_before_dedupe(len(src), loops, symmetrize, drop_self_loops)
        stats = {"input_edges": int(len(src)),
                 "self_loops_dropped": int(loops) if drop_self_loops else 0,
                 "duplicates_dropped": int(kept_before_dedupe - store.m),
                 "edges": int(store.m)}
        options = {"symmetrize": bool(symmetrize), "drop_self_loops": bool(drop_self_loops),
                   "drop_duplicates": bool(drop_duplicates), "in_edges": bool(in_edges),
                   "relabel": False, "rows": R, "cols": C, "seconds": None}
        path = write_dataset(writer, store, num_vertices=n, id_width=width,
                             weighted=weights is not None, directed=not symmetrize, R=R, C=C,
                             in_edges=in_edges, budget=None, stats=stats, options=options,
                             input_info={"path": None, "format": "arrays"}, t0=t0)
    return Graph.open(path)


def _expected_before_dedupe(m_in, loops, symmetrize, drop_self_loops):
    non_loops = m_in - loops
    kept = non_loops * (2 if symmetrize else 1)
    if not drop_self_loops:
        kept += loops
    return kept


# ----------------------------------------------------------------------------------------------
# streaming entry point
from ..config import parse_size  # noqa: E402,F401 - (it lives where no numba is imported)


#: Memory the partitioner's process adds while it runs, beyond what it holds when partition() is
#: called: numba kernels loaded from the cache and the parse threads' stacks (measured: RSS 96 MiB
#: after import, 155 MiB after a tiny partition run, 2 threads).
KERNEL_MARGIN = 64 << 20


def rss_bytes() -> int:
    """Resident set size of this process (VmRSS), 0 when unknown."""
    return config.vm_bytes("VmRSS")


def return_freed_memory() -> bool:
    """Make glibc hand freed blocks back to the kernel: allocations >= 4 MiB get their own mapping
    (unmapped on free) and the heap is trimmed above 32 MiB free. By default glibc raises its mmap
    threshold to 32 MiB after the first large free, so the partitioner's batch-sized temporaries
    stayed in malloc's arenas: peak RSS with --memory-limit 512M was 498 and 530 MiB in two kron22
    runs of tools/bench_partition.py, 366 MiB with this (same speed). False where unavailable.
    """
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, 4 << 20)) and bool(mallopt(M_TRIM_THRESHOLD, 32 << 20))


def working_memory(memory_limit=None, work_memory=None) -> int:
    """Bytes the partitioner may use for its arrays: `work_memory` as given, else `memory_limit`
    (default: a fraction of RAM) minus this process's current RSS and KERNEL_MARGIN."""
    if work_memory is not None:
        return parse_size(work_memory)
    limit = parse_size(memory_limit) if memory_limit is not None else default_memory_limit()
    floor = rss_bytes() + KERNEL_MARGIN
    work = limit - floor
    if work < (16 << 20):
        mib = (lambda b: f"{b / 2**20:,.0f} MiB")         # (sizes in MiB, as --memory's)
        what = (f"--memory-limit {memory_limit}" if memory_limit is not None
                else "the default memory limit")
        raise GrapheneError(
            f"{what} ({mib(limit)}) is too small: this process itself "
            f"needs about {mib(floor)} (Python, numpy, numba kernels); give at least "
            f"{mib(floor + (16 << 20))}")
    return work


def _grown(limit, need, ceiling):
    """The default limit grown for per-vertex arrays of `need` bytes: those arrays and a quarter
    more for the edge batches, at most `ceiling`; None when even that cannot hold them."""
    if ceiling is None or need + (16 << 20) > ceiling:
        return None
    return max(limit, min(ceiling, need * 5 // 4 + (16 << 20)))


def default_memory_limit() -> int:
    try:
        import psutil
        total = psutil.virtual_memory().total
    except Exception:  # pragma: no cover
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return int(total * config.MEMORY_LIMIT_FRACTION)


#: Bytes per vertex of the O(|V|) arrays alive at once, taken off the memory limit before edge
#: buffers. The most of them: an in-memory batch's int32 count rows (one per parallel part, at
#: most extsort.MAX_SCATTER_PARTS = 4: 16 B; batches stay under 2^31 slots) + indptr, new degrees
#: and new indptr (24); a spilled batch's count rows + indptr + run degrees + their diff (40); the
#: merge's cumulative and final degrees + a block's indptr and positions (32); the writer's
#: indptr, histogram, prefix sums and bincount's result (32); the transposed batch (40) beside
#: the stored indptr (8).
BYTES_PER_VERTEX = 48


def StderrProgress():
    """The partitioner's progress on stderr (graphene_py/progress.py: click's bars, per phase)."""
    from ..progress import Progress
    return Progress(units={"read": "bytes", "relabel scan": "bytes", "write out": "edges",
                           "write in": "edges", "merge": "edges"})


def _mb(b):
    return f"{b / 1e6:.1f} MB" if b < 1e9 else f"{b / 1e9:.2f} GB"


def _collect_ids(input, fmt, weighted, chunk_bytes, limit, progress):
    """--relabel pass 1: the sorted distinct IDs of the input, and a dense new-ID table (original
    ID -> new ID, int64) when the ID range is small enough for the memory limit (mark array: one
    byte per ID), else None (then IDs are mapped by binary search in the sorted distinct IDs)."""
    from .readers import open_edges
    try:
        reader = open_edges(input, fmt=fmt, weighted=weighted, chunk_bytes=chunk_bytes)
    except ValueError as e:
        raise GrapheneError(f"{input}: {e}") from None
    dense_max = limit // 16                      # mark (1 B) + table (8 B) per ID in range
    present = np.zeros(0, dtype=bool)
    uniq = None                                  # sparse mode once the range is too large
    pending, npend = [], 0
    for ch in reader:
        if uniq is None:
            mx = max(int(ch.src.max()), int(ch.dst.max())) if len(ch.src) else -1
            if mx < dense_max:
                if mx >= len(present):
                    grown = np.zeros(max(mx + 1, 2 * len(present)), dtype=bool)
                    grown[:len(present)] = present
                    present = grown
                present[ch.src] = True
                present[ch.dst] = True
            else:
                uniq = np.flatnonzero(present).astype(np.int64)
                present = None
        if uniq is not None:
            u = sorted_unique(np.concatenate([ch.src, ch.dst]))
            pending.append(u)
            npend += len(u)
            if npend > 2 * len(uniq) + (1 << 20):   # merge in batches: O(U log U) a few times
                uniq = sorted_unique(np.concatenate([uniq] + pending))
                pending, npend = [], 0
        if progress:
            progress("relabel scan", reader.bytes_read, reader.total_bytes)
    _close(reader)
    if uniq is None:
        uniq = np.flatnonzero(present).astype(np.int64)
        table = np.cumsum(present, dtype=np.int64) - 1
        return uniq, table
    if pending:
        uniq = sorted_unique(np.concatenate([uniq] + pending))
    return uniq, None


def _close(reader):
    c = getattr(reader, "close", None)
    if c:
        c()


def partition(input, disks, name=None, fmt=None, symmetrize=False, weighted=None, id_width=None,
              relabel=False, rows=None, cols=None, in_edges=False, memory_limit=None, force=False,
              quiet=False, progress=None, drop_self_loops=True, drop_duplicates=True,
              register=True, work_memory=None, labels=False, num_vertices=None) -> Graph:
    """Edge-list file -> dataset on `disks` (one or more folders). Returns Graph.open of it.

    name: default the input file's stem (`twitter.el.gz` -> `twitter`). id_width: 4 or 8, default 4
    when every ID fits in uint32. relabel: IDs replaced by their rank among the distinct IDs used
    (sorted order; isolated IDs that no edge uses, e.g. an MTX header's, are dropped), original IDs
    kept in relabel.npy on disk 0. labels: the vertices are names (any token without blanks or
    commas, text edge lists only; graphene_py/partition/labels.py): vertex i is the i-th distinct
    name in file order, and labels.txt on disk 0 holds the names, one per line. memory_limit: bytes or '4G', the whole process's memory (peak
    RSS); default config.PARTITION_MEMORY (1 GiB), grown when the per-vertex arrays need more,
    up to config.MEMORY_LIMIT_FRACTION of RAM (a larger limit only made it slower). What the process already holds (interpreter,
    numpy, numba; measured at the call) plus KERNEL_MARGIN for kernels loaded during the run is
    taken off it; the rest is the working memory for per-vertex arrays and edge buffers, and edges
    beyond it go to bucket files by source range on the target disks, each bucket then sorted in
    memory (extsort.BucketSorter). A limit that cannot hold
    the per-vertex arrays (BYTES_PER_VERTEX per vertex) fails with the size it needs.
    work_memory: set the working memory directly instead (tests use a tiny one to force spills).
    num_vertices: the vertex count when it is more than the largest ID used + 1 (isolated
    vertices at the top of the range, e.g. a generator's 2^scale); an ID at or above it is an
    error. Not with relabel or labels (their IDs are ranks of what is used).
    progress: callable(phase, done, total) or None (stderr unless quiet)."""
    t0 = time.time()
    if num_vertices is not None:
        num_vertices = int(num_vertices)
        if num_vertices < 1:
            raise GrapheneError(f"--num-vertices {num_vertices}: must be at least 1")
        if relabel or labels:
            raise GrapheneError("--num-vertices does not go with --relabel or --labels (their "
                                "vertices are the IDs or names the edges use)")
    disks = check_disks(disks)
    if name is None:
        base = os.path.basename(str(input))
        for ext in (".gz", ".bz2", ".xz", ".zst"):
            if base.endswith(ext):
                base = base[: -len(ext)]
        name = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
    check_name(name)
    R, C = _check_grid(rows, cols, len(disks))
    if labels and relabel:
        raise GrapheneError("--labels already numbers the names 0..n-1 in file order; "
                            "--relabel is for integer IDs (give one of them)")
    if id_width is not None and int(id_width) not in (4, 8):
        raise GrapheneError(f"--id-width must be 4 or 8 (got {id_width})")
    if not os.path.exists(input):
        raise GrapheneError(f"{input}: no such file")
    if os.path.isdir(input):
        raise GrapheneError(f"{input}: is a folder, not an edge-list file")
    return_freed_memory()
    limit = working_memory(memory_limit, work_memory)
    ceiling = None
    if memory_limit is None and work_memory is None:
        # the default: 1 GiB (config.PARTITION_MEMORY), more only for the per-vertex arrays
        ceiling = limit
        try:
            limit = min(limit, working_memory(config.PARTITION_MEMORY))
        except GrapheneError:            # this process alone is near 1 GiB: the fraction of RAM
            pass
    # --memory-limit is a promise about peak memory: IDs whose per-vertex arrays do not fit fail;
    # an explicit work_memory (tests, experts) only sizes the batches, and a budget below the
    # arrays' 48 B per vertex is exceeded rather than crawled through (16 B per vertex still fail)
    vertex_bytes = BYTES_PER_VERTEX if work_memory is None else 16
    own_progress = None
    if progress is None and not quiet:
        progress = own_progress = StderrProgress()
    chunk_bytes = int(min(config.READ_CHUNK_BYTES, max(1 << 16, limit // 32)))
    try:
        path = _partition_file(input, disks, name, fmt, symmetrize, weighted, id_width, relabel, R, C,
                               in_edges, limit, force, progress, drop_self_loops, drop_duplicates,
                               chunk_bytes, t0, vertex_bytes, register, labels, num_vertices,
                               ceiling)
    finally:
        if own_progress:
            own_progress.done()
    return Graph.open(path)


def _partition_file(input, disks, name, fmt, symmetrize, weighted, id_width, relabel, R, C,
                    in_edges, limit, force, progress, drop_self_loops, drop_duplicates, chunk_bytes,
                    t0, vertex_bytes=BYTES_PER_VERTEX, register=True, labels=False,
                    num_vertices=None, ceiling=None):
    from .readers import open_edges
    with DatasetWriter(disks, name, force=force, register=register) as writer:
        names = writer.open(0, LABELS_FILE, pad=False) if labels else None
        uniq = table = None
        if relabel:
            uniq, table = _collect_ids(input, fmt, weighted, chunk_bytes, limit, progress)
        max_id = None
        if id_width is not None and int(id_width) == 4 and not relabel:
            max_id = (1 << 32) - 1
        try:
            if labels:
                from .labels import open_labeled
                reader = open_labeled(input, names, fmt=fmt, weighted=weighted,
                                      chunk_bytes=chunk_bytes)
            else:
                reader = open_edges(input, fmt=fmt, weighted=weighted, chunk_bytes=chunk_bytes,
                                    max_id=max_id, reuse=True)     # the batch copies its edges
        except ValueError as e:
            raise GrapheneError(f"{input}: {e}") from None
        w_on = bool(reader.weighted)
        sym = bool(symmetrize or getattr(reader, "symmetric", False))
        n_known = len(uniq) if uniq is not None else max(
            getattr(reader, "header_vertices", None) or 0, num_vertices or 0)
        if n_known * vertex_bytes > limit:       # a header's count: the default grows now
            limit = _grown(limit, n_known * vertex_bytes, ceiling) or limit
        free = limit - BYTES_PER_VERTEX * n_known - 4 * chunk_bytes
        if relabel:
            free -= (table.nbytes if table is not None else 0) + uniq.nbytes
        per_edge = extsort.BYTES_PER_EDGE_SORT + (16 if sym else 0)
        budget = max(1 << 14, free // per_edge)
        spill = lambda: [writer.spill_dir(i) for i in range(len(writer.disks))]  # noqa: E731
        batch = extsort.Batcher(budget, w_on, spill, symmetrize=sym, drop_self_loops=drop_self_loops,
                                dedupe=drop_duplicates, merge_budget=max(1 << 14, free // 64),
                                progress=progress, sort_bytes=limit - 4 * chunk_bytes)
        for ch in reader:
            s, d = ch.src, ch.dst
            if table is not None:
                s = table[s]
                d = table[d]
            elif uniq is not None:
                s = np.searchsorted(uniq, s)
                d = np.searchsorted(uniq, d)
            mx = max(int(s.max()), int(d.max())) if len(s) else -1
            grown = None
            if (mx + 1) * vertex_bytes > limit:
                grown = _grown(limit, (mx + 1) * vertex_bytes, ceiling)
            if grown is not None:           # the default limit, grown for the IDs seen
                free += grown - limit
                batch.sort_bytes += grown - limit
                limit = grown
            elif (mx + 1) * vertex_bytes > limit:
                raise GrapheneError(
                    f"{input}: vertex ID {mx} needs {_mb(vertex_bytes * (mx + 1))} of "
                    f"per-vertex arrays while sorting ({vertex_bytes} B per vertex), more than "
                    f"the {_mb(limit)} of working memory the memory limit leaves; raise "
                    f"--memory-limit by {_mb(vertex_bytes * (mx + 1) - limit + (16 << 20))}, "
                    f"or use --relabel if the IDs are sparse")
            # the O(|V|) arrays grow with the IDs seen: shrink the edge batch to stay in the limit
            # (runs of fewer than |V|/2 edges would cost more in O(|V|) work per run than they
            # save: a limit below ~48 B per vertex is exceeded rather than crawled through)
            nv = max(n_known, batch.maxid + 1, mx + 1)
            held = reader.table_bytes() if labels else 0      # the name table, while it reads
            batch.cap = max(1 << 14, nv // 2,
                            (free - held - BYTES_PER_VERTEX * (nv - n_known)) // per_edge)
            total, got = getattr(reader, "total_bytes", 0), getattr(reader, "bytes_read", 0)
            if total and got:       # what the buckets are planned for, should a batch fill
                batch.expected_input = int((batch.input_edges + len(s)) * total / got)
            batch.add(s, d, ch.weight if w_on else None, maxid=mx)
            if progress:
                progress("read", reader.bytes_read, reader.total_bytes)
        _close(reader)
        names_entry = None
        if labels:
            reader.release()
            if reader.num_labels > batch.maxid + 1:
                batch.maxid = reader.num_labels - 1
            names_entry = {"labels": LABELS_FILE, "labels_crc": names.close(),
                           "labels_bytes": int(names.size)}
        if batch.input_edges == 0 and not getattr(reader, "header_vertices", None) and \
                not num_vertices:
            # checked before the dataset is written (the writer's temporary folders are dropped),
            # so --force never replaces a good dataset with an empty one
            raise GrapheneError(f"{input}: no edges (empty or only comments)")
        if uniq is not None:
            n = len(uniq)
        else:
            n = max(batch.maxid + 1, int(getattr(reader, "header_vertices", None) or 0))
            if num_vertices is not None:
                if batch.maxid + 1 > num_vertices:
                    raise GrapheneError(f"{input}: --num-vertices {num_vertices:,} but the edges use "
                                        f"vertex ID {batch.maxid:,} (IDs are 0..{num_vertices - 1:,})")
                n = max(n, int(num_vertices))
        width = auto_id_width(n) if id_width is None else int(id_width)
        if width == 4 and n > (1 << 32):  # only reachable with --relabel off via header_vertices
            raise GrapheneError(f"{input}: {n} vertices do not fit --id-width 4 (use 8)")
        # the merge holds O(|V|) arrays (cumulative and final degrees) beside its edge blocks
        # one partition (and no transposition): merged as it is written, no merged file between
        stream = R == 1 and C == 1 and (not in_edges or sym)
        store = batch.finish(n, merge_budget=max(1 << 14, (free - BYTES_PER_VERTEX * n) // 64),
                             stream=stream)
        kept = _expected_before_dedupe(batch.input_edges, batch.loops, sym, drop_self_loops)

        def stats(m):
            return {"input_edges": int(batch.input_edges),
                    "self_loops_dropped": int(batch.loops) if drop_self_loops else 0,
                    "duplicates_dropped": int(kept - m) if drop_duplicates else 0,
                    "edges": int(m)}
        wbudget = max(1 << 14, (limit - BYTES_PER_VERTEX * n) // 48) \
            if isinstance(store, extsort.SpilledCSR) else None

        def in_store():
            # transposed graph through the same batcher (spills when it does not fit beside `store`)
            held = store.m * (12 if isinstance(store, MemoryCSR) else 0)
            tb = extsort.Batcher(max(1 << 14, (free - held) // extsort.BYTES_PER_EDGE_SORT), w_on,
                                 spill, symmetrize=False, drop_self_loops=False, dedupe=False,
                                 merge_budget=max(1 << 14, (free - held) // 64),
                                 sort_bytes=limit - held - 8 * n)
            tb.expected_input = store.m
            step = wbudget or max(1 << 14, (free - held) // 40)
            for v0, v1 in vertex_blocks(store.indptr, 0, n, step):
                idx, w = store.get(v0, v1)
                srcs = np.repeat(np.arange(v0, v1, dtype=np.int64),
                                 np.diff(store.indptr[v0:v1 + 1]))
                tb.add(idx, srcs, w)
            tb.maxid = n - 1
            return tb.finish(n, merge_budget=max(1 << 14, (free - held - BYTES_PER_VERTEX * n) // 64),
                             stream=R == 1 and C == 1)

        options = {"symmetrize": bool(symmetrize), "drop_self_loops": bool(drop_self_loops),
                   "drop_duplicates": bool(drop_duplicates), "in_edges": bool(in_edges),
                   "relabel": bool(relabel), "labels": bool(labels), "rows": R, "cols": C,
                   "memory_limit": int(limit),
                   "spilled_runs": batch.spilled_runs, "seconds": None}
        input_info = {"path": os.path.abspath(input), "format": getattr(reader, "fmt", fmt),
                      "bytes": int(getattr(reader, "total_bytes", 0) or 0),
                      "symmetric_header": bool(getattr(reader, "symmetric", False))}

        def prog(direction, done):
            if progress:
                total = store.m if store.m is not None else store.m_upper
                progress(f"write {direction}", done, total)
        path = write_dataset(writer, store, num_vertices=n, id_width=width, weighted=w_on,
                             directed=not sym, R=R, C=C, in_edges=in_edges, budget=wbudget,
                             stats=stats, options=options, input_info=input_info,
                             relabel=uniq, in_store_fn=in_store if in_edges else None,
                             progress=prog, t0=t0, names=names_entry)
        store.close()
    return path
