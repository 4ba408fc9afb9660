"""Edge-list writers for every input format the readers accept (see `readers` for the layouts).

`write_edges(path, src, dst, weight=None, fmt=None)` writes whole arrays; `EdgeWriter` streams chunks
(the generator uses it). Text is formatted by a numba kernel, chunk by chunk; `.gz` paths are gzip
compressed (level 1: fast, still ~3x smaller). A file is written to `PATH.tmp-PID` and renamed into
place on success, so a failed write never leaves a half-written file under the final name.

Round trips are exact: IDs are integers; float32 weights are written with 9 significant digits (or as
plain integers when integral), which the reader parses back to the identical float32.
"""
from __future__ import annotations

import gzip
import math
import os

import numba as nb
import numpy as np

from .readers import detect_format, FORMATS

#: Edges formatted per step (text needs at most ~80 bytes an edge: 20 MB of buffer).
WRITE_CHUNK_EDGES = 1 << 18
_LINE_MAX = 80


_DIGIT_PAIRS = np.frombuffer("".join(f"{i:02d}" for i in range(100)).encode(), np.uint8).copy()


@nb.njit(nogil=True, cache=True, inline="always")
def _put_uint(out, pos, v):
    # v >= 0 (int64); write decimal digits, two at a time from a 00..99 table
    nd = 1
    t = v
    while t >= 100:
        t //= 100
        nd += 2
    if t >= 10:
        nd += 1
    p = pos + nd
    while v >= 100:
        r = (v % 100) * 2
        v //= 100
        p -= 2
        out[p] = _DIGIT_PAIRS[r]
        out[p + 1] = _DIGIT_PAIRS[r + 1]
    if v >= 10:
        p -= 2
        out[p] = _DIGIT_PAIRS[v * 2]
        out[p + 1] = _DIGIT_PAIRS[v * 2 + 1]
    else:
        out[p - 1] = 48 + v
    return pos + nd


@nb.njit(nogil=True, cache=True)
def _put_f32(out, pos, x):
    """Shortest-ish decimal of a finite float32 that parses back to the same float32 (<= 9 digits)."""
    v = np.float64(x)
    if v == 0.0:
        if math.copysign(1.0, v) < 0:
            out[pos] = 45
            pos += 1
        out[pos] = 48
        return pos + 1
    if v < 0:
        out[pos] = 45
        pos += 1
        v = -v
    if v < 1e15 and v == math.floor(v):
        return _put_uint(out, pos, np.int64(v))
    e10 = np.int64(math.floor(math.log10(v)))
    target = np.float32(v)
    # fewest significant digits (1..9) whose decimal parses back (as the reader does) to x
    for p in range(1, 10):
        sh = p - 1 - e10
        mant = np.int64(round(v * 10.0 ** sh if sh <= 300 else v * 1e300 * 10.0 ** (sh - 300)))
        if sh >= 0:
            back = np.float32(np.float64(mant) / 10.0 ** sh) if sh <= 300 else \
                np.float32(np.float64(mant) / 1e300 / 10.0 ** (sh - 300))
        else:
            back = np.float32(np.float64(mant) * 10.0 ** (-sh))
        if back == target:
            break
    ex = -sh  # value = mant * 10**ex
    while mant % 10 == 0:
        mant //= 10
        ex += 1
    nd = 1
    t = mant
    while t >= 10:
        t //= 10
        nd += 1
    if ex >= 0:
        pos = _put_uint(out, pos, mant)
        out[pos] = 101  # 'e'
        return _put_uint(out, pos + 1, ex)
    fd = -ex  # digits after the decimal point
    if fd < nd:
        # ddd.ddd : write all digits, then shift the fraction right by one for the '.'
        end = _put_uint(out, pos, mant)
        ip = end - fd
        for k in range(end, ip, -1):
            out[k] = out[k - 1]
        out[ip] = 46
        return end + 1
    if fd - nd <= 4:
        out[pos] = 48
        out[pos + 1] = 46
        pos += 2
        for _ in range(fd - nd):
            out[pos] = 48
            pos += 1
        return _put_uint(out, pos, mant)
    pos = _put_uint(out, pos, mant)
    out[pos] = 101
    out[pos + 1] = 45
    return _put_uint(out, pos + 2, fd)


@nb.njit(nogil=True, cache=True)
def _format_text(src, dst, w, has_w, sep, base, out):
    pos = 0
    for i in range(src.shape[0]):
        pos = _put_uint(out, pos, src[i] + base)
        out[pos] = sep
        pos = _put_uint(out, pos + 1, dst[i] + base)
        if has_w:
            out[pos] = sep
            pos = _put_f32(out, pos + 1, w[i])
        out[pos] = 10
        pos += 1
    return pos


@nb.njit(nogil=True, cache=True, parallel=True)
def _format_text_par(src, dst, w, has_w, sep, base, out, lens):
    """Format len(lens) equal slices of the edges in parallel; slice j goes to out[j*cap:] where
    cap = out.size // len(lens); its byte count to lens[j]."""
    nseg = lens.shape[0]
    k = src.shape[0]
    cap = out.shape[0] // nseg
    per = (k + nseg - 1) // nseg
    for j in nb.prange(nseg):
        a = min(k, j * per)
        b = min(k, a + per)
        seg = out[j * cap:(j + 1) * cap]
        if has_w:
            lens[j] = _format_text(src[a:b], dst[a:b], w[a:b], True, sep, base, seg)
        else:
            lens[j] = _format_text(src[a:b], dst[a:b], w, False, sep, base, seg)


def format_float32(x) -> str:
    """The text the writers use for one float32 weight (for tests and messages)."""
    out = np.empty(64, np.uint8)
    n = _put_f32(out, 0, np.float32(x))
    return out[:n].tobytes().decode()


class EdgeWriter:
    """Stream edges into `path`: `with EdgeWriter(p, fmt, weighted, ...) as w: w.write(src, dst[, wt])`.

    MatrixMarket needs `num_vertices` and `num_edges` up front (its size line comes first); the count
    is checked at close. `num_vertices` for other formats is ignored.
    """

    def __init__(self, path, fmt=None, weighted=None, num_vertices=None, num_edges=None,
                 compresslevel=1):
        self.path = os.fspath(path)
        self.fmt, self.compressed = detect_format(self.path, fmt)
        spec = FORMATS[self.fmt]
        if weighted is None:
            weighted = spec.weighted is True
        if spec.weighted is not None and bool(weighted) != spec.weighted:
            raise ValueError(f"format {self.fmt!r} is {'weighted' if spec.weighted else 'unweighted'}"
                             f" but weighted={bool(weighted)} was asked for")
        self.weighted = bool(weighted)
        self.kind = spec.kind
        self.id_width = spec.id_width
        self.num_edges = num_edges
        self.edges_written = 0
        self._tmp = f"{self.path}.tmp-{os.getpid()}"
        raw = open(self._tmp, "wb")
        self._raw = raw
        self._f = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=compresslevel,
                                filename="", mtime=0) if self.compressed else raw
        nseg = max(1, nb.get_num_threads())
        self._lens = np.zeros(nseg, np.int64)
        # each of nseg slices needs room for ceil(WRITE_CHUNK_EDGES / nseg) lines
        self._buf = np.empty(nseg * (WRITE_CHUNK_EDGES // nseg + 1) * _LINE_MAX, np.uint8)
        ext = (self.path[:-3] if self.compressed else self.path).lower()
        self._sep = ord("\t") if ext.endswith(".tsv") else ord(",") if ext.endswith(".csv") else ord(" ")
        self._closed = False
        if self.kind == "mtx":
            if num_vertices is None or num_edges is None:
                self._abort()
                raise ValueError("MatrixMarket output needs num_vertices and num_edges up front")
            field = "real" if self.weighted else "pattern"
            head = (f"%%MatrixMarket matrix coordinate {field} general\n"
                    f"% written by graphene_py\n{int(num_vertices)} {int(num_vertices)} {int(num_edges)}\n")
            self._f.write(head.encode())
            self._num_vertices = int(num_vertices)

    def write(self, src, dst, weight=None):
        src = np.ascontiguousarray(src, dtype=np.int64)
        dst = np.ascontiguousarray(dst, dtype=np.int64)
        if src.shape != dst.shape or src.ndim != 1:
            raise ValueError("src and dst must be 1-D arrays of equal length")
        if self.weighted:
            if weight is None:
                raise ValueError(f"{self.path}: weighted output needs weights")
            weight = np.ascontiguousarray(weight, dtype=np.float32)
            if weight.shape != src.shape:
                raise ValueError("weight must have the same length as src")
            if len(weight) and not np.isfinite(weight).all():
                raise ValueError("weights must be finite (no NaN/inf)")
        else:
            weight = None  # unweighted output: weights, if any, are dropped
        k = len(src)
        if k == 0:
            return
        lo = min(src.min(), dst.min())
        hi = max(src.max(), dst.max())
        if lo < 0:
            raise ValueError(f"negative vertex ID {lo}")
        if self.kind == "bin" and self.id_width == 4 and hi > 0xFFFFFFFF:
            raise ValueError(f"vertex ID {hi} does not fit {self.fmt} (uint32); use {self.fmt[:-2]}64")
        if self.kind == "mtx" and hi >= (1 << 63) - 1:
            raise ValueError(f"vertex ID {hi} is not representable 1-based in MatrixMarket")
        if self.kind == "mtx" and hi >= self._num_vertices:
            raise ValueError(f"vertex ID {hi} >= num_vertices {self._num_vertices}")
        if self.num_edges is not None and self.edges_written + k > self.num_edges and self.kind == "mtx":
            raise ValueError(f"more than num_edges={self.num_edges} edges written")
        if self.kind == "bin":
            idt = np.dtype("<u4") if self.id_width == 4 else np.dtype("<u8")
            if self.weighted:
                rec = np.empty(k, np.dtype([("s", idt), ("d", idt), ("w", "<f4")]))
                rec["s"], rec["d"], rec["w"] = src, dst, weight
            else:
                rec = np.empty((k, 2), idt)
                rec[:, 0], rec[:, 1] = src, dst
            self._f.write(memoryview(rec).cast("B"))
        else:
            base = 1 if self.kind == "mtx" else 0
            has_w = weight is not None
            wa = weight if has_w else np.empty(0, np.float32)
            nseg = self._lens.shape[0]
            cap = self._buf.shape[0] // nseg
            for a in range(0, k, WRITE_CHUNK_EDGES):
                b = min(k, a + WRITE_CHUNK_EDGES)
                if b - a < 4096:
                    n = _format_text(src[a:b], dst[a:b], wa[a:b] if has_w else wa, has_w,
                                     self._sep, base, self._buf)
                    self._f.write(memoryview(self._buf[:n]))
                    continue
                _format_text_par(src[a:b], dst[a:b], wa[a:b] if has_w else wa, has_w, self._sep,
                                 base, self._buf, self._lens)
                for j in range(nseg):
                    self._f.write(memoryview(self._buf[j * cap:j * cap + self._lens[j]]))
        self.edges_written += k

    def _abort(self):
        self._closed = True
        try:
            if self._f is not self._raw:
                self._f.close()
            self._raw.close()
        finally:
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)

    def close(self):
        if self._closed:
            return
        if self.kind == "mtx" and self.edges_written != self.num_edges:
            self._abort()
            raise ValueError(f"MatrixMarket size line promised {self.num_edges} edges, "
                             f"{self.edges_written} written")
        self._closed = True
        if self._f is not self._raw:
            self._f.close()
        self._raw.close()
        os.replace(self._tmp, self.path)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is None:
            self.close()
        else:
            self._abort()
        return False


def write_edges(path, src, dst, weight=None, fmt=None, num_vertices=None, compresslevel=1):
    """Write edges (0-based int IDs, optional float32 weights) to `path` in `fmt` (default: by suffix).

    Weighted iff `weight` is given. For MatrixMarket, `num_vertices` defaults to max ID + 1.
    Returns the format name used."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    weighted = weight is not None
    if num_vertices is None:
        num_vertices = int(max(src.max(), dst.max())) + 1 if len(src) else 0
    with EdgeWriter(path, fmt=fmt, weighted=weighted, num_vertices=num_vertices,
                    num_edges=len(src), compresslevel=compresslevel) as w:
        w.write(src, dst, weight)
        return w.fmt
