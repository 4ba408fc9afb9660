"""Streaming edge-list readers: text, Matrix Market and binary edge lists, each optionally gzipped.

    with open_edges("twitter.el.gz") as r:
        for ch in r:                     # EdgeChunk(src int64[], dst int64[], weight float32[] | None)
            ...                          # r.bytes_read / r.total_bytes is the progress

The file is read in chunks of `chunk_bytes` and each chunk's complete lines are parsed by a numba
kernel (nogil), so the whole file is never in memory; a line split across two chunks is carried over
and parsed whole. Plain files are read straight into the parse buffer; gzip input is inflated by a
background thread (zlib releases the GIL) while the previous chunk is parsed. A chunk of at least
PARALLEL_MIN_BYTES is cut at newlines into one run per numba thread, parsed in parallel, and yielded
as one EdgeChunk per run (chunk boundaries carry no meaning). Plain `int int [int]` lines take a fast
path; anything else goes through the general parser, which also reports every error.

Formats (chosen by suffix after stripping `.gz`; `fmt=` overrides; gzip is detected by its magic bytes):

| fmt    | suffixes                               | layout                                              |
|--------|----------------------------------------|-----------------------------------------------------|
| el     | .el .txt .edges .tsv .csv .snap, other | text `src dst [weight]` per line                     |
| wel    | .wel                                   | text `src dst weight` per line                       |
| mtx    | .mtx                                   | Matrix Market coordinate, 1-based                    |
| bin32  | .bin32 .bin                            | little-endian records (uint32 src, uint32 dst)       |
| bin64  | .bin64                                 | little-endian records (uint64 src, uint64 dst)       |
| wbin32 | .wbin32                                | records (uint32 src, uint32 dst, float32 weight)     |
| wbin64 | .wbin64                                | records (uint64 src, uint64 dst, float32 weight)     |

Text (el/wel): 0-based non-negative integer IDs; columns separated by spaces/tabs, or a comma with
optional spaces around it; lines starting with `#` or `%` (after leading blanks) and blank lines are
skipped; LF or CRLF line ends. An optional third column is a float weight. With `weighted=None` the
first data line decides (2 columns: unweighted, 3: weighted); every later line must have the same
count. `weighted=False` on a 3-column file validates and then drops the weights; `weighted=True`
requires 3 columns.

Matrix Market: first line `%%MatrixMarket matrix coordinate <pattern|integer|real> <general|symmetric>`,
then `%` comment lines, then the size line `rows cols entries`, then exactly `entries` lines `i j`
(pattern) or `i j value`. Indices are 1-based and checked against rows/cols; they are returned 0-based.
`symmetric=True` on the reader means only one triangle is stored: the caller must symmetrize.

Binary: a plain array of fixed-size little-endian records with no header (8, 16, 12 or 20 bytes per
record for bin32, bin64, wbin32, wbin64); the weight is an IEEE float32 right after each ID pair
(packed, no padding). A file whose size is not a multiple of the record size is rejected naming the
byte offset of the incomplete record.

Every problem raises `InputFormatError(path, line, what, text)` -> `FILE:LINE: what (line text)`, with
the exact 1-based line number (binary: the byte offset in `what`, line None): non-numeric or negative
IDs, IDs above `max_id` (default 2^63-1), non-numeric / NaN / infinite weights, a column count change,
bad Matrix Market header or size line, an entry count that differs from the size line, truncated
binary or gzip data. A file with no edges at all is a valid empty graph.
"""
from __future__ import annotations

import errno
import math
import os
import queue
import threading
import zlib
from dataclasses import dataclass
from typing import NamedTuple, Optional

import numba as nb
import numpy as np

from .. import config
from ..errors import InputFormatError
from .scratch import scratch_array

MAX_ID = (1 << 63) - 1
#: Chunks at least this large are parsed by all numba threads at once (runs of whole lines).
PARALLEL_MIN_BYTES = 1 << 20
#: text read in blocks of at least this many bytes (a plain file) is read ahead by a thread
#: (_ReadAhead); smaller blocks (tests of lines across blocks) are read in the parsing thread
AHEAD_MIN_CHUNK = 64 << 10


@dataclass(frozen=True)
class FormatSpec:
    name: str
    kind: str              # "text", "mtx" or "bin"
    id_width: int          # bytes per ID in binary formats (0 for text)
    weighted: Optional[bool]  # None: either (text el, mtx)


FORMATS = {
    "el": FormatSpec("el", "text", 0, None),
    "wel": FormatSpec("wel", "text", 0, True),
    "mtx": FormatSpec("mtx", "mtx", 0, None),
    "bin32": FormatSpec("bin32", "bin", 4, False),
    "bin64": FormatSpec("bin64", "bin", 8, False),
    "wbin32": FormatSpec("wbin32", "bin", 4, True),
    "wbin64": FormatSpec("wbin64", "bin", 8, True),
}

SUFFIXES = {
    ".el": "el", ".txt": "el", ".edges": "el", ".tsv": "el", ".csv": "el", ".snap": "el",
    ".wel": "wel", ".mtx": "mtx", ".bin": "bin32", ".bin32": "bin32", ".bin64": "bin64",
    ".wbin32": "wbin32", ".wbin64": "wbin64",
}


def detect_format(path, fmt=None):
    """Return `(fmt, gz)` for `path`: the format name (from `fmt` or the suffix; unknown suffixes are
    text edge lists) and whether the name ends in `.gz`."""
    p = os.fspath(path)
    gz = p.lower().endswith(".gz")
    base = p[:-3] if gz else p
    if fmt is not None:
        f = fmt.lower().lstrip(".")
        if f.endswith(".gz"):
            f, gz = f[:-3], True
        f = SUFFIXES.get("." + f, f)
        if f not in FORMATS:
            raise ValueError(f"unknown edge-list format {fmt!r}; known: {', '.join(FORMATS)}")
        return f, gz
    return SUFFIXES.get(os.path.splitext(base)[1].lower(), "el"), gz


class EdgeChunk(NamedTuple):
    src: np.ndarray                 # int64, 0-based
    dst: np.ndarray                 # int64, 0-based
    weight: Optional[np.ndarray]    # float32, or None when unweighted


# ---------------------------------------------------------------------------------------------
# numba text kernel

_E_NONNUM, _E_NEG, _E_RANGE, _E_HUGE, _E_WNONNUM, _E_WBAD, _E_COLS, _E_MANY, _E_ZERO, _E_EMPTY = \
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10


@nb.njit(nogil=True, cache=True, inline="always")
def _is_term(c):
    return c == 32 or c == 9 or c == 44 or c == 13 or c == 10


@nb.njit(nogil=True, cache=True, inline="always")
def _parse_id(buf, pos, end):
    """-> (pos after token, value, error code)."""
    maxi = np.int64(9223372036854775807)
    c = buf[pos]
    if c == 45:  # '-'
        if pos + 1 < end and 48 <= buf[pos + 1] <= 57:
            return pos, np.int64(0), _E_NEG
        return pos, np.int64(0), _E_NONNUM
    v = np.int64(0)
    nd = 0
    over = False
    while pos < end:
        d = np.int64(buf[pos]) - 48
        if d < 0 or d > 9:
            break
        if nd < 18:  # 18 digits always fit; check overflow (a division) only beyond
            v = v * 10 + d
        elif v > (maxi - d) // 10:
            over = True
        else:
            v = v * 10 + d
        nd += 1
        pos += 1
    if nd == 0 or (pos < end and not _is_term(buf[pos])):
        return pos, np.int64(0), _E_NONNUM
    if over:
        return pos, np.int64(0), _E_HUGE
    return pos, v, 0


@nb.njit(nogil=True, cache=True)
def _parse_float(buf, pos, end):
    """-> (pos after token, float32 value, error code). Decimal with optional sign/fraction/exponent."""
    start = pos
    neg = False
    c = buf[pos]
    if c == 45 or c == 43:
        neg = c == 45
        pos += 1
    mant = np.int64(0)
    nd = 0
    ex = 0
    anyd = False
    while pos < end and 48 <= buf[pos] <= 57:
        anyd = True
        if nd < 18:
            mant = mant * 10 + (np.int64(buf[pos]) - 48)
            if mant > 0:
                nd += 1
        else:
            ex += 1
        pos += 1
    if pos < end and buf[pos] == 46:  # '.'
        pos += 1
        while pos < end and 48 <= buf[pos] <= 57:
            anyd = True
            if nd < 18:
                mant = mant * 10 + (np.int64(buf[pos]) - 48)
                if mant > 0:
                    nd += 1
                ex -= 1
            pos += 1
    if not anyd:
        # 'nan', 'inf', 'Infinity' are numbers, but not weights we accept
        c = buf[start + 1] if (buf[start] == 45 or buf[start] == 43) and start + 1 < end else buf[start]
        if c == 110 or c == 78 or c == 105 or c == 73:
            while pos < end and not _is_term(buf[pos]):
                pos += 1
            return pos, np.float32(0), _E_WBAD
        return pos, np.float32(0), _E_WNONNUM
    if pos < end and (buf[pos] == 101 or buf[pos] == 69):  # exponent
        pos += 1
        eneg = False
        if pos < end and (buf[pos] == 45 or buf[pos] == 43):
            eneg = buf[pos] == 45
            pos += 1
        e = 0
        ed = 0
        while pos < end and 48 <= buf[pos] <= 57:
            if e < 100000:
                e = e * 10 + (np.int64(buf[pos]) - 48)
            ed += 1
            pos += 1
        if ed == 0:
            return pos, np.float32(0), _E_WNONNUM
        ex += -e if eneg else e
    if pos < end and not _is_term(buf[pos]):
        return pos, np.float32(0), _E_WNONNUM
    v = np.float64(mant)
    if mant != 0:
        if ex > 0:
            v = v * 10.0 ** min(ex, 400)
        elif ex < 0:
            if ex < -600:
                v = 0.0
            elif ex < -300:
                v = v / 1e300 / 10.0 ** (-ex - 300)
            else:
                v = v / 10.0 ** (-ex)
    f = np.float32(v)
    if not np.isfinite(f):
        return pos, np.float32(0), _E_WBAD
    if neg:
        f = -f
    return pos, f, 0


@nb.njit(nogil=True, cache=True, inline="always")
def _skip_sep(buf, pos, end):
    commas = 0
    while pos < end:
        c = buf[pos]
        if c == 32 or c == 9 or c == 13:
            pos += 1
        elif c == 44:
            commas += 1
            pos += 1
        else:
            break
    return pos, commas


@nb.njit(nogil=True, cache=True, inline="always")
def _skip_nondata(buf, pos, end):
    """Past the blanks at pos, then past a blank or comment line (`#`, `%`): -> (pos, newlines
    passed, True when pos is at the first character of a data line)."""
    c = buf[pos]
    while c == 32 or c == 9 or c == 13:
        pos += 1
        if pos == end:
            return pos, 0, False
        c = buf[pos]
    if c == 10:
        return pos + 1, 1, False
    if c == 35 or c == 37:
        while pos < end and buf[pos] != 10:
            pos += 1
        if pos < end:
            return pos + 1, 1, False
        return pos, 0, False
    return pos, 0, True


@nb.njit(nogil=True, cache=True, inline="always")
def _weight_col(buf, pos, end):
    """The third column at pos, a weight, and its separator: -> (pos, weight, columns found: 3, or
    4 when more follows, error code, error position)."""
    t2 = pos
    pos, wv, e = _parse_float(buf, pos, end)
    if e != 0:
        return pos, wv, 3, e, t2
    pos, commas = _skip_sep(buf, pos, end)
    if commas > 1:
        return pos, wv, 3, _E_EMPTY, t2
    return pos, wv, 4 if pos < end and buf[pos] != 10 else 3, 0, t2


@nb.njit(nogil=True, cache=True, inline="always")
def _store_res(res, k, nl, ncols, err, err_pos, line_start, err_col, found, pos):
    res[0] = k
    res[1] = nl
    res[2] = ncols
    res[3] = err
    res[4] = err_pos
    res[5] = line_start
    res[6] = err_col
    res[7] = found
    res[8] = pos


@nb.njit(nogil=True, cache=True)
def _parse_text(buf, end, ncols, base, max_src, max_dst, max_edges, src, dst, w, res):
    """Parse the complete lines in buf[:end] into src/dst/w.

    ncols: 0 = decide on the first data line, else 2 or 3. base: 1 for 1-based (MTX) IDs.
    res <- [edges, newlines consumed, ncols, err, err_pos, line_start, err_col, cols_found, pos].
    On an error, parsing stops at the offending line (newlines counts the lines before it)."""
    pos = 0
    k = 0
    nl = 0
    err = 0
    err_pos = 0
    err_col = 0
    found = 0
    line_start = 0
    while pos < end:
        line_start = pos
        if pos + 64 <= end and k != max_edges and ncols != 0:
            # fast path for the common line `digits SP|TAB digits [SP|TAB int-weight] LF`; any
            # other shape (or an out-of-range ID) falls through to the general parser below,
            # which reports errors. 64 bytes ahead are in the buffer: no end checks needed.
            p = pos
            v1 = np.int64(0)
            while True:
                d = np.int64(buf[p]) - 48
                if d < 0 or d > 9:
                    break
                v1 = v1 * 10 + d
                p += 1
            c = buf[p]
            if 0 < p - pos <= 18 and (c == 32 or c == 9):
                p += 1
                q = p
                v2 = np.int64(0)
                while True:
                    d = np.int64(buf[p]) - 48
                    if d < 0 or d > 9:
                        break
                    v2 = v2 * 10 + d
                    p += 1
                c = buf[p]
                ok = 0 < p - q <= 18
                if base != 0:  # 1-based (MTX): index 0 is an error the general path reports
                    ok = ok and v1 != 0 and v2 != 0
                    v1 -= base
                    v2 -= base
                ok = ok and v1 <= max_src and v2 <= max_dst
                if ok and ncols == 2 and c == 10:
                    src[k] = v1
                    dst[k] = v2
                    k += 1
                    nl += 1
                    pos = p + 1
                    continue
                if ok and ncols == 3 and (c == 32 or c == 9):
                    # weight `digits[.digits]`, at most 15 digits: the same arithmetic as
                    # _parse_float, so both paths give the identical float32
                    p += 1
                    q = p
                    wi = np.int64(0)
                    while True:
                        d = np.int64(buf[p]) - 48
                        if d < 0 or d > 9:
                            break
                        wi = wi * 10 + d
                        p += 1
                    nint = p - q
                    nfrac = 0
                    if buf[p] == 46 and nint <= 15:
                        p += 1
                        q = p
                        while True:
                            d = np.int64(buf[p]) - 48
                            if d < 0 or d > 9:
                                break
                            wi = wi * 10 + d
                            p += 1
                        nfrac = p - q
                    if 0 < nint + nfrac <= 15 and buf[p] == 10:
                        src[k] = v1
                        dst[k] = v2
                        wf = np.float64(wi)
                        if nfrac > 0 and wi != 0:
                            wf = wf / 10.0 ** nfrac
                        w[k] = np.float32(wf)
                        k += 1
                        nl += 1
                        pos = p + 1
                        continue
        pos, dn, data = _skip_nondata(buf, pos, end)
        nl += dn
        if not data:
            continue
        if k == max_edges:
            err = _E_MANY
            err_pos = pos
            break
        t0 = pos
        pos, v1, e = _parse_id(buf, pos, end)
        if e != 0:
            err, err_pos, err_col = e, t0, 0
            break
        pos, commas = _skip_sep(buf, pos, end)
        if commas > 1:
            err, err_pos = _E_EMPTY, t0
            break
        found = 1
        v2 = np.int64(0)
        wv = np.float32(0)
        t1 = pos
        t2 = pos
        if pos < end and buf[pos] != 10:
            pos, v2, e = _parse_id(buf, pos, end)
            if e != 0:
                err, err_pos, err_col = e, t1, 1
                break
            found = 2
            pos, commas = _skip_sep(buf, pos, end)
            if commas > 1:
                err, err_pos = _E_EMPTY, t1
                break
            if pos < end and buf[pos] != 10:
                pos, wv, f, e, t2 = _weight_col(buf, pos, end)
                if e != 0:
                    err, err_pos, err_col = e, t2, 2
                    break
                found = f
        if ncols == 0 and (found == 2 or found == 3):
            ncols = found
        if found != ncols:
            err, err_pos = _E_COLS, t0
            break
        if base != 0:
            if v1 == 0:
                err, err_pos, err_col = _E_ZERO, t0, 0
                break
            if v2 == 0:
                err, err_pos, err_col = _E_ZERO, t1, 1
                break
            v1 -= base
            v2 -= base
        if v1 > max_src:
            err, err_pos, err_col = _E_RANGE, t0, 0
            break
        if v2 > max_dst:
            err, err_pos, err_col = _E_RANGE, t1, 1
            break
        src[k] = v1
        dst[k] = v2
        if found == 3:
            w[k] = wv
        k += 1
        if pos < end:  # at '\n'
            nl += 1
            pos += 1
    _store_res(res, k, nl, ncols, err, err_pos, line_start, err_col, found, pos)


@nb.njit(nogil=True, cache=True, parallel=True)
def _parse_text_par(buf, starts, offs, ncols, base, max_src, max_dst, src, dst, w, resm):
    """_parse_text on len(starts)-1 runs of whole lines at once; run j's edges go to offs[j]:."""
    for j in nb.prange(starts.shape[0] - 1):
        a = starts[j]
        o = offs[j]
        ww = w[o:offs[j + 1]] if w.shape[0] > 0 else w
        _parse_text(buf[a:starts[j + 1]], starts[j + 1] - a, ncols, base, max_src, max_dst, -1,
                    src[o:offs[j + 1]], dst[o:offs[j + 1]], ww, resm[j])


@nb.njit(nogil=True, cache=True, parallel=True)
def _bin_ids(u32, words, id_width, src, dst, lim, check, threads):
    """Binary records (`words` 32-bit words each; IDs first, little-endian) -> int64 src, dst, in
    parallel parts. Returns the first record with an ID above lim (when check), else -1."""
    n = src.shape[0]
    T = max(1, min(threads, n >> 16))
    first = np.full(T, -1, np.int64)
    for t in nb.prange(T):
        a = n * t // T
        b = n * (t + 1) // T
        if id_width == 4 and words == 2:     # one 8-byte load per record
            u64 = u32.view(np.uint64)
            for i in range(a, b):
                x = u64[i]
                src[i] = np.int64(x & np.uint64(0xFFFFFFFF))
                dst[i] = np.int64(x >> np.uint64(32))
        elif id_width == 4:
            for i in range(a, b):
                src[i] = u32[i * words]
                dst[i] = u32[i * words + 1]
        else:
            for i in range(a, b):
                j = i * words
                s = np.uint64(u32[j]) | (np.uint64(u32[j + 1]) << np.uint64(32))
                d = np.uint64(u32[j + 2]) | (np.uint64(u32[j + 3]) << np.uint64(32))
                # (an ID above 2^63-1 turns negative here: the check below catches it)
                src[i] = np.int64(s)
                dst[i] = np.int64(d)
        if check:
            for i in range(a, b):
                if src[i] > lim or dst[i] > lim or src[i] < 0 or dst[i] < 0:
                    first[t] = i
                    break
    for t in range(T):
        if first[t] >= 0:
            return first[t]
    return -1


@nb.njit(nogil=True, cache=True)
def _segment_starts(buf, limit, nseg):
    """nseg+1 cut points in buf[:limit], each just after a newline (buf[limit-1] is a newline or
    the end of input); runs may be empty."""
    starts = np.empty(nseg + 1, np.int64)
    starts[0] = 0
    for j in range(1, nseg):
        p = max(starts[j - 1], limit * j // nseg)
        while p < limit and (p == 0 or buf[p - 1] != 10):
            p += 1
        starts[j] = p
    starts[nseg] = limit
    return starts


@nb.njit(nogil=True, cache=True)
def _last_newline(buf, n):
    for i in range(n - 1, -1, -1):
        if buf[i] == 10:
            return i
    return -1


# ---------------------------------------------------------------------------------------------
# byte sources


class _GzipStream:
    """Streaming inflate of a (possibly multi-member) gzip file; read(n) -> up to n bytes."""

    def __init__(self, raw, path):
        self.raw, self.path = raw, path
        self.d = zlib.decompressobj(31)
        self.inbuf = b""
        self.eof = False
        self.member_in = 0

    def tell(self):
        return self.raw.tell() - len(self.inbuf)

    def readinto(self, mv):
        b = self.read(len(mv))
        mv[:len(b)] = b
        return len(b)

    def read(self, n):
        parts = []
        got = 0
        while got < n and not self.eof:
            if not self.inbuf:
                self.inbuf = self.raw.read(1 << 20)
                if not self.inbuf:
                    if not self.d.eof and self.member_in > 0:
                        raise InputFormatError(self.path, None, "truncated gzip data (the file ends "
                                               f"inside a compressed stream at byte {self.raw.tell()})")
                    self.eof = True
                    break
            if self.d.eof:
                if not self.inbuf.strip(b"\x00"):
                    self.inbuf = b""  # trailing zero padding after the last member
                    continue
                self.d = zlib.decompressobj(31)
                self.member_in = 0
            self.member_in += 1
            try:
                out = self.d.decompress(self.inbuf, n - got)
            except zlib.error as e:
                raise InputFormatError(self.path, None, f"corrupt gzip data near compressed byte "
                                       f"{self.tell()}: {e}") from None
            self.inbuf = self.d.unused_data if self.d.eof else self.d.unconsumed_tail
            if out:
                parts.append(out)
                got += len(out)
        return b"".join(parts)


class _ReadAhead:
    """Blocks of a plain file from `start`, each read by a thread of its own while the caller
    works on the one before: O_DIRECT where the file system allows it and `start` is page-aligned
    (no page-cache pages to fault in and zero: partition/direct.py), into two reused aligned
    buffers of `chunk` bytes (a multiple of the page). next() -> (uint8 view, file position after
    it); the view holds until the next call; an empty one at the end."""

    def __init__(self, path, start, chunk, size, scratch):
        from concurrent.futures import ThreadPoolExecutor
        from .direct import ALIGN, aligned_array, open_direct
        self.path, self.size = path, int(size)
        self.chunk = max(ALIGN, int(chunk) // ALIGN * ALIGN)
        if start % ALIGN:
            self.fd, self.direct = os.open(path, os.O_RDONLY), False
        else:
            self.fd, self.direct = open_direct(path, os.O_RDONLY)
        self.bufs = [aligned_array(scratch, f"ahead{i}", self.chunk) for i in range(2)]
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="graphene-reader")
        self.k = 0
        self.off = int(start)
        self.fut = self._submit(self.off, 0)

    def _submit(self, off, i):
        n = max(0, min(self.chunk, self.size - off))
        return self.pool.submit(self._read, off, n, i) if n else None

    def _read(self, off, n, i):
        """n bytes at off into buffer i: whole pages with O_DIRECT (the last read may stop at
        the end of the file)."""
        mv = memoryview(self.bufs[i])
        want = -(-n // 4096) * 4096 if self.direct else n
        got = 0
        while got < n:
            k = os.preadv(self.fd, [mv[got:want]], off + got)
            if k <= 0:
                raise OSError(errno.EIO, f"{self.path}: {n - got} bytes missing at offset "
                                         f"{off + got} (the file shrank while it was read?)")
            got += k
        return n

    def next(self):
        if self.fut is None:
            return self.bufs[0][:0], self.off
        n = self.fut.result()
        i = self.k & 1
        self.off += n
        self.k += 1
        self.fut = self._submit(self.off, self.k & 1)
        return self.bufs[i][:n], self.off

    def close(self):
        if self.pool is None:
            return
        if self.fut is not None:
            try:
                self.fut.result()
            except OSError:
                pass
        self.pool.shutdown()
        self.pool = None
        os.close(self.fd)


class _Prefetcher:
    """Background thread reading blocks of `chunk` bytes: yields (bytes, source position)."""

    def __init__(self, stream, chunk, depth=2):
        self.stream, self.chunk = stream, chunk
        self.q = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True, name="graphene-reader")
        self.t.start()

    def _put(self, item):
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self):
        try:
            while not self.stop.is_set():
                b = self.stream.read(self.chunk)
                if not self._put((b, self.stream.tell())) or not b:
                    return
        except BaseException as e:  # handed to the consumer
            self._put(e)

    def get(self):
        item = self.q.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self):
        self.stop.set()
        while True:
            try:
                self.q.get_nowait()
            except queue.Empty:
                break
        self.t.join(timeout=5)


# ---------------------------------------------------------------------------------------------
# the reader


class EdgeReader:
    """Iterate `EdgeChunk`s of an edge-list file. Single pass; use `open_edges` to make one.

    Attributes: path, fmt, compressed, weighted, total_bytes (file size on disk), bytes_read (same
    scale), edges_read, lines_read, header_vertices (MTX max(rows, cols), else None), header_rows,
    header_cols, header_entries (MTX), symmetric (MTX 'symmetric': caller must symmetrize)."""

    def __init__(self, path, fmt=None, weighted=None, chunk_bytes=config.READ_CHUNK_BYTES,
                 max_id=None, prefetch=None, threads=None, reuse=False):
        self.path = os.fspath(path)
        self._scratch = {} if reuse else None   # open_edges(reuse=True): the parse arrays
        self.fmt, gz_name = detect_format(self.path, fmt)
        spec = FORMATS[self.fmt]
        self.kind = spec.kind
        self.id_width = spec.id_width
        if chunk_bytes < 1:
            raise ValueError("chunk_bytes must be >= 1")
        self._threads = max(1, nb.get_num_threads()) if threads is None else max(1, int(threads))
        self.max_id = MAX_ID if max_id is None else int(max_id)
        if not 0 <= self.max_id <= MAX_ID:
            raise ValueError(f"max_id must be in 0..2^63-1, got {max_id}")
        self.total_bytes = os.path.getsize(self.path)
        self.bytes_read = 0
        self.edges_read = 0
        self.lines_read = 0
        self.header_vertices = self.header_rows = self.header_cols = self.header_entries = None
        self.symmetric = False
        self._started = False
        self._closed = False
        self._pf = None
        self._ahead = None         # _ReadAhead of a plain file's blocks
        self._eof_seen = False
        self._stash = []  # blocks pulled ahead (header / column detection), consumed first
        self._raw = open(self.path, "rb")
        try:
            magic = self._raw.read(2)
            self._raw.seek(0)
            self.compressed = magic == b"\x1f\x8b"
            if gz_name and not self.compressed and self.total_bytes > 0:
                raise InputFormatError(self.path, None, "name ends in .gz but the file is not gzip data")
            self._stream = _GzipStream(self._raw, self.path) if self.compressed else self._raw
            if self.kind == "bin":
                rs = 2 * self.id_width + (4 if spec.weighted else 0)
                self.record_bytes = rs
                chunk_bytes = max(rs, chunk_bytes - chunk_bytes % rs)
                if not self.compressed and self.total_bytes % rs:
                    self._truncated(self.total_bytes)
            self.chunk_bytes = int(chunk_bytes)
            if prefetch is None:
                prefetch = self.compressed  # inflating is worth a thread; plain reads are not
            if prefetch:
                self._pf = _Prefetcher(self._stream, self.chunk_bytes)
            if self.kind == "bin":
                self.weighted = bool(spec.weighted)
                if weighted and not spec.weighted:
                    raise ValueError(f"format {self.fmt} has no weights (use w{self.fmt})")
                self._keep_w = self.weighted and weighted is not False
                self.weighted = self._keep_w
            elif self.kind == "mtx":
                self._read_mtx_header()
                if self._ncols == 2 and weighted:
                    raise InputFormatError(self.path, self._header_line_no,
                                           "weighted=True but this MatrixMarket file is 'pattern' "
                                           "(no values)", self._header_text)
                self.weighted = self._ncols == 3 and weighted is not False
                self._keep_w = self.weighted
            else:
                want = spec.weighted if weighted is None else weighted
                if want:
                    self._ncols = 3
                else:
                    self._ncols = 0
                    self._detect_columns()
                self.weighted = (self._ncols == 3) and weighted is not False
                self._keep_w = self.weighted
        except BaseException:
            self.close()
            raise

    # -- block supply ------------------------------------------------------------------------
    def _next_block(self):
        if self._stash:
            return self._stash.pop(0)
        if self._pf is not None:
            return self._pf.get()
        b = self._stream.read(self.chunk_bytes)
        return b, self._stream.tell()

    def _fill_into(self, buf, have):
        """Append the next block to buf[have:] (growing buf): -> (buf, bytes added, source pos)."""
        if not self._stash and self._pf is None and self._ahead is None and \
                self.chunk_bytes >= AHEAD_MIN_CHUNK and not self.compressed:
            self._ahead = _ReadAhead(self.path, self._raw.tell(), self.chunk_bytes,
                                     self.total_bytes, {})
        if self._ahead is not None:
            # read by a thread while the block before was parsed: copied in behind the carry
            b, pos = self._ahead.next()
            need = have + len(b)
            if len(buf) < need:
                buf = self._grow(buf, have, need)
            buf[have:need] = b
            return buf, len(b), pos
        if not self._stash and self._pf is None:
            # plain file, no thread: read straight into the parse buffer (no extra copy)
            if len(buf) < have + self.chunk_bytes:
                buf = self._grow(buf, have, have + self.chunk_bytes)
            n = self._stream.readinto(memoryview(buf)[have:have + self.chunk_bytes])
            return buf, n, self._stream.tell()
        b, pos = self._next_block()
        need = have + len(b)
        if len(buf) < need:
            buf = self._grow(buf, have, need)
        buf[have:need] = np.frombuffer(b, np.uint8)
        return buf, len(b), pos

    @staticmethod
    def _grow(buf, have, need):
        nb_ = np.empty(max(need, 2 * len(buf)), np.uint8)
        nb_[:have] = buf[:have]
        return nb_

    def _pull_ahead(self):
        """Fetch one more block into the stash; returns it (b'' at EOF)."""
        if self._pf is not None:
            item = self._pf.get()
        else:
            b = self._stream.read(self.chunk_bytes)
            item = (b, self._stream.tell())
        self._stash.append(item)
        return item[0]

    def _detect_columns(self):
        """weighted=None on text: the column count of the first data line (2 or 3) decides."""
        def cols(line):
            s = line.strip(b" \t\r")
            if not s or s[:1] in (b"#", b"%"):
                return None
            return len(s.replace(b",", b" ").split())

        tail = b""  # the incomplete last line seen so far
        while True:
            b = self._pull_ahead()
            if not b:
                n = cols(tail)
                self._ncols = 3 if n == 3 else 0
                return
            data = tail + b
            pos = 0
            while True:
                i = data.find(b"\n", pos)
                if i < 0:
                    tail = data[pos:]
                    break
                n = cols(data[pos:i])
                pos = i + 1
                if n is not None:
                    self._ncols = 3 if n == 3 else 0  # other counts: the kernel reports the error
                    return

    def _read_mtx_header(self):
        data = b""
        lines_used = 0

        def next_line():
            nonlocal data
            while True:
                i = data.find(b"\n")
                if i >= 0:
                    ln, data = data[:i + 1], data[i + 1:]
                    return ln
                b = self._next_block_raw()
                if not b:
                    ln, data = data, b""
                    return ln if ln else None
                data += b

        ln = next_line()
        if ln is None:
            raise InputFormatError(self.path, 1, "empty file: no MatrixMarket header "
                                   "('%%MatrixMarket matrix coordinate ...')")
        if ln.startswith(b"\xef\xbb\xbf"):
            ln = ln[3:]
        lines_used = 1
        text = ln.decode("utf-8", "replace").strip()
        tok = text.split()
        if not tok or tok[0].lower() != "%%matrixmarket":
            raise InputFormatError(self.path, 1, "not a MatrixMarket file: the first line must be "
                                   "'%%MatrixMarket matrix coordinate <field> <symmetry>'", text)
        tl = [t.lower() for t in tok]
        if len(tl) != 5:
            raise InputFormatError(self.path, 1, "bad MatrixMarket header: need 5 words "
                                   "('%%MatrixMarket matrix coordinate <field> <symmetry>')", text)
        if tl[1] != "matrix":
            raise InputFormatError(self.path, 1, f"bad MatrixMarket header: object {tok[1]!r} is "
                                   "not 'matrix'", text)
        if tl[2] != "coordinate":
            raise InputFormatError(self.path, 1, f"bad MatrixMarket header: format {tok[2]!r} is not "
                                   "'coordinate' (dense 'array' files are not graphs)", text)
        if tl[3] not in ("pattern", "integer", "real", "double"):
            raise InputFormatError(self.path, 1, f"unsupported MatrixMarket field {tok[3]!r} "
                                   "(need pattern, integer or real)", text)
        if tl[4] not in ("general", "symmetric"):
            raise InputFormatError(self.path, 1, f"unsupported MatrixMarket symmetry {tok[4]!r} "
                                   "(need general or symmetric)", text)
        self._ncols = 2 if tl[3] == "pattern" else 3
        self.symmetric = tl[4] == "symmetric"
        while True:
            ln = next_line()
            if ln is None:
                raise InputFormatError(self.path, lines_used, "MatrixMarket file ends before the size "
                                       "line ('rows cols entries')")
            lines_used += 1
            s = ln.strip()
            if not s or s[:1] == b"%":
                continue
            text = ln.decode("utf-8", "replace").strip()
            parts = text.split()
            if len(parts) != 3 or not all(p.isdigit() for p in parts):
                raise InputFormatError(self.path, lines_used, "bad MatrixMarket size line (need "
                                       "three non-negative integers 'rows cols entries')", text)
            rows, cols, nnz = (int(p) for p in parts)
            if max(rows, cols) - 1 > MAX_ID or nnz > MAX_ID:
                raise InputFormatError(self.path, lines_used, "MatrixMarket size above 2^63-1", text)
            break
        self.header_rows, self.header_cols, self.header_entries = rows, cols, nnz
        self.header_vertices = max(rows, cols)
        self._header_line_no, self._header_text = lines_used, text
        self.lines_read = lines_used
        if data:
            self._stash.append((data, self._stash_pos))
        if self._eof_seen:
            self._stash.append((b"", self._stash_pos))

    def _next_block_raw(self):
        # header reading pulls blocks itself; remember the source position for progress
        if self._pf is not None:
            b, pos = self._pf.get()
        else:
            b, pos = self._stream.read(self.chunk_bytes), self._stream.tell()
        self._stash_pos = pos
        self._eof_seen = not b
        self.bytes_read = pos if b else self.bytes_read
        return b

    # -- iteration ------------------------------------------------------------------------------
    def __iter__(self):
        if self._started:
            raise RuntimeError("an EdgeReader is single-pass; call open_edges() again")
        self._started = True
        if self._closed:
            raise RuntimeError("EdgeReader is closed")
        return self._iter_closing(self._iter_bin() if self.kind == "bin" else self._iter_text())

    def _iter_closing(self, gen):
        try:
            yield from gen
        finally:
            self.close()

    def _iter_text(self):
        cap = self.chunk_bytes + 4096
        buf = np.empty(cap, np.uint8)
        have = 0
        res = np.zeros(9, np.int64)
        mtx = self.kind == "mtx"
        if mtx:
            max_src = self.header_rows - 1
            max_dst = self.header_cols - 1
            if self.max_id < MAX_ID:
                max_src, max_dst = min(max_src, self.max_id), min(max_dst, self.max_id)
        else:
            max_src = max_dst = self.max_id
        base = 1 if mtx else 0
        eof = False
        bom_checked = mtx  # the MTX header reader strips a BOM itself
        while not eof:
            buf, n, pos = self._fill_into(buf, have)
            eof = n == 0
            have += n
            if not bom_checked and (have >= 3 or eof):
                bom_checked = True
                if have >= 3 and buf[0] == 0xEF and buf[1] == 0xBB and buf[2] == 0xBF:
                    buf[:have - 3] = buf[3:have]  # UTF-8 byte order mark (spreadsheet exports)
                    have -= 3
            elif not bom_checked:
                continue
            limit = have if eof else _last_newline(buf, have) + 1
            if limit <= 0:
                self.bytes_read = pos
                continue
            out, nl = self._parse_block(buf, limit, res, mtx, base, max_src, max_dst)
            self.lines_read += nl + (1 if eof and limit > 0 and buf[limit - 1] != 10 else 0)
            self.bytes_read = pos
            rest = have - limit
            if rest:
                buf[:rest] = buf[limit:have]
            have = rest
            for s_, d_, w_ in out:
                k = len(s_)
                if k:
                    self.edges_read += k
                    wt = w_ if (self._keep_w and self._ncols == 3) else None
                    yield EdgeChunk(s_, d_, wt)
        if mtx and self.edges_read != self.header_entries:
            raise InputFormatError(self.path, max(self.lines_read, 1),
                                   f"MatrixMarket file has {self.edges_read} entries but its size "
                                   f"line (line {self._header_line_no}) promises "
                                   f"{self.header_entries}", self._header_text)
        self.bytes_read = self.total_bytes
        self.close()

    def _parse_block(self, buf, limit, res, mtx, base, max_src, max_dst):
        """The complete lines in buf[:limit] -> ([(src, dst, weight) per run], newlines
        consumed); raises InputFormatError (the exact line) on the first bad line."""
        ecap = limit // 4 + 1  # a data line takes >= 4 bytes ("0 0\n")
        remaining = self.header_entries - self.edges_read if mtx else -1
        nseg = self._threads if limit >= PARALLEL_MIN_BYTES else 1
        out = []
        if nseg > 1 and self._ncols != 0 and (not mtx or ecap <= remaining):
            # several threads, each on a run of whole lines; the first error in file order wins
            starts = _segment_starts(buf, limit, nseg)
            caps = np.diff(starts) // 4 + 1
            offs = np.zeros(nseg + 1, np.int64)
            np.cumsum(caps, out=offs[1:])
            src = scratch_array(self._scratch, "src", offs[-1], np.int64)
            dst = scratch_array(self._scratch, "dst", offs[-1], np.int64)
            w = scratch_array(self._scratch, "w", offs[-1] if self._ncols == 3 else 0, np.float32)
            resm = np.zeros((nseg, 9), np.int64)
            _parse_text_par(buf, starts, offs, self._ncols, base, max_src, max_dst, src, dst, w,
                            resm)
            nl_before = 0
            for j in range(nseg):
                if resm[j, 3]:
                    a = int(starts[j])
                    self._raise_text(buf[a:], int(starts[j + 1]) - a, resm[j],
                                     self.lines_read + nl_before + int(resm[j, 1]) + 1)
                nl_before += int(resm[j, 1])
                k = int(resm[j, 0])
                o = int(offs[j])
                out.append((src[o:o + k], dst[o:o + k], w[o:o + k] if len(w) else w))
            nl = nl_before
        else:
            if mtx:
                ecap = min(ecap, remaining + 1)
            src = scratch_array(self._scratch, "src", ecap, np.int64)
            dst = scratch_array(self._scratch, "dst", ecap, np.int64)
            # virtual until touched
            w = scratch_array(self._scratch, "w", ecap if self._ncols != 2 else 0, np.float32)
            _parse_text(buf, limit, self._ncols, base, max_src, max_dst, remaining, src, dst, w,
                        res)
            k, nl, ncols, err = int(res[0]), int(res[1]), int(res[2]), int(res[3])
            if err:
                self._raise_text(buf, limit, res, self.lines_read + nl + 1)
            self._ncols = ncols
            out.append((src[:k], dst[:k], w[:k] if len(w) else w))
        return out, nl

    def _raise_text(self, buf, limit, res, line_no):
        err, err_pos, ls, col, found = (int(res[i]) for i in (3, 4, 5, 6, 7))
        le = ls
        while le < limit and buf[le] != 10:
            le += 1
        line = bytes(buf[ls:le]).decode("utf-8", "replace").strip()
        te = err_pos
        while te < le and buf[te] not in (32, 9, 44, 13, 10):
            te += 1
        tok = bytes(buf[err_pos:te]).decode("utf-8", "replace")
        mtx = self.kind == "mtx"
        what_id = ("row index", "column index")[min(col, 1)] if mtx else "vertex ID"
        if err == _E_NONNUM:
            what = f"{what_id} {tok!r} is not a non-negative integer"
            if self.edges_read == 0 and int(res[0]) == 0 and not mtx and tok[:1].isalpha():
                what += " (a header line? comment it out with '#'; vertex names: --labels)"
            elif not mtx:
                what += " (vertices with names: partition with --labels)"
        elif err == _E_NEG:
            what = f"negative {what_id} {tok}"
        elif err == _E_HUGE:
            what = f"{what_id} {tok} is above 2^63-1"
        elif err == _E_RANGE:
            if mtx:
                lim = self.header_rows if col == 0 else self.header_cols
                what = f"{what_id} {tok} out of range 1..{lim}"
                if self.max_id < MAX_ID and int(tok) - 1 > self.max_id:
                    what = f"{what_id} {tok} (0-based {int(tok) - 1}) above max_id {self.max_id}"
            else:
                what = f"vertex ID {tok} above max_id {self.max_id}" + _wider(self.max_id)
        elif err == _E_WNONNUM:
            what = f"weight {tok!r} is not a number"
            if tok[:1] in ("#", "%"):
                what += " (a comment after an edge? comments take lines of their own)"
        elif err == _E_WBAD:
            what = f"bad weight {tok!r} (NaN, infinite or beyond float32)"
        elif err == _E_COLS:
            exp = self._ncols if self._ncols else int(res[2])
            got = "more than 3" if found > 3 else str(found)
            if exp == 0:
                what = f"expected 2 or 3 columns (src dst [weight]), found {got}"
            elif mtx:
                what = f"expected {exp} columns for a {'pattern' if exp == 2 else 'valued'} " \
                       f"MatrixMarket entry, found {got}"
            else:
                what = f"expected {exp} columns like the first data line, found {got}"
                if self._ncols == 3 and found == 2 and self.edges_read == 0 and int(res[0]) == 0:
                    what = f"expected 3 columns (src dst weight) for a weighted read, found {got}"
        elif err == _E_MANY:
            what = f"more entries than the {self.header_entries} the size line " \
                   f"(line {self._header_line_no}) promises"
        elif err == _E_ZERO:
            what = f"{what_id} 0 in a 1-based MatrixMarket file"
        elif err == _E_EMPTY:
            what = "empty field (two commas in a row)"
        else:  # pragma: no cover
            what = f"parse error {err}"
        raise InputFormatError(self.path, line_no, what, line)

    def _truncated(self, size):
        rs = self.record_bytes
        off = size - size % rs
        raise InputFormatError(self.path, None, f"truncated binary edge list: {size} bytes is not a "
                               f"multiple of the {rs}-byte {self.fmt} record; the incomplete record "
                               f"starts at byte offset {off} ({size % rs} trailing bytes)")

    def _iter_bin(self):
        if not self.compressed and self._pf is None and not self._stash and self.total_bytes \
                and not FORMATS[self.fmt].weighted:
            yield from self._iter_bin_ahead()
            return
        rs = self.record_bytes
        idt = np.dtype("<u4") if self.id_width == 4 else np.dtype("<u8")
        wtd = FORMATS[self.fmt].weighted
        dt = np.dtype([("s", idt), ("d", idt), ("w", "<f4")]) if wtd else np.dtype([("s", idt), ("d", idt)])
        assert dt.itemsize == rs
        carry = b""
        rec0 = 0  # index of the first record in the current block
        while True:
            b, pos = self._next_block()
            if not b:
                if carry:
                    self._truncated(rec0 * rs + len(carry))
                break
            if carry:
                b = carry + b
            nrec = len(b) // rs
            carry = b[nrec * rs:]
            if nrec == 0:
                continue
            a = np.frombuffer(b, dt, count=nrec)
            s, d = a["s"], a["d"]
            lim = self.max_id
            bad = (s > lim) | (d > lim) if self.id_width == 8 or lim < 0xFFFFFFFF else None
            if bad is not None and bad.any():
                i = int(np.flatnonzero(bad)[0])
                self._bad_id(int(s[i]), int(d[i]), rec0 + i)
            wt = None
            if wtd:
                wa = a["w"]
                fin = np.isfinite(wa)
                if not fin.all():
                    i = int(np.flatnonzero(~fin)[0])
                    raise InputFormatError(self.path, None, f"bad weight {wa[i]} (NaN/inf) in record "
                                           f"{rec0 + i} at byte offset {(rec0 + i) * rs}",
                                           f"src={int(s[i])} dst={int(d[i])} weight={wa[i]}")
                if self._keep_w:
                    wt = wa.astype(np.float32)
            src, dst = self._id_arrays(nrec)
            np.copyto(src, s)
            np.copyto(dst, d)
            rec0 += nrec
            self.edges_read += nrec
            self.bytes_read = pos
            yield EdgeChunk(src, dst, wt)
        self.bytes_read = self.total_bytes
        self.close()

    def _id_arrays(self, nrec):
        """int64 src, dst arrays for a chunk of nrec records (reuse=True: the same pages for
        every chunk)."""
        if self._scratch is not None:
            return (scratch_array(self._scratch, "src", nrec, np.int64),
                    scratch_array(self._scratch, "dst", nrec, np.int64))
        return np.empty(nrec, np.int64), np.empty(nrec, np.int64)

    def _bad_id(self, s_, d_, rec):
        """Raise for record `rec` of a binary file, whose source s_ or destination d_ is above
        max_id."""
        lim = self.max_id
        which = "source" if s_ > lim else "destination"
        v = s_ if s_ > lim else d_
        what = (f"{which} vertex ID {v} above 2^63-1" if v > MAX_ID
                else f"{which} vertex ID {v} above max_id {lim}{_wider(lim)}")
        raise InputFormatError(self.path, None, f"{what} in record {rec} at byte offset "
                               f"{rec * self.record_bytes}", f"src={s_} dst={d_}")

    def _iter_bin_ahead(self):
        """_iter_bin for a plain unweighted file: each chunk is read ahead (_ReadAhead: O_DIRECT,
        two reused aligned buffers) while the one before is converted to int64 IDs and checked
        in parallel (_bin_ids)."""
        from .direct import ALIGN
        rs = self.record_bytes
        step = rs * ALIGN // math.gcd(rs, ALIGN)       # whole records and whole pages
        chunk = max(step, self.chunk_bytes // step * step)
        self._ahead = _ReadAhead(self.path, 0, chunk, self.total_bytes,
                                 self._scratch if self._scratch is not None else {})
        lim = self.max_id
        check = self.id_width == 8 or lim < 0xFFFFFFFF
        rec0 = 0
        while True:
            raw, pos = self._ahead.next()
            if not len(raw):
                break
            nrec = len(raw) // rs
            u32 = raw[:nrec * rs].view(np.uint32)
            src, dst = self._id_arrays(nrec)
            bad = _bin_ids(u32, rs // 4, self.id_width, src, dst, lim, check, self._threads)
            if bad >= 0:
                s_, d_ = int(src[bad]), int(dst[bad])
                if self.id_width == 8:        # (above 2^63-1 they turned negative in int64)
                    w = u32[bad * (rs // 4):bad * (rs // 4) + 4].astype(np.uint64)
                    s_, d_ = int(w[0] | (w[1] << 32)), int(w[2] | (w[3] << 32))
                self._bad_id(s_, d_, rec0 + bad)
            rec0 += nrec
            self.edges_read += nrec
            self.bytes_read = pos
            yield EdgeChunk(src, dst, None)
        self.bytes_read = self.total_bytes
        self.close()

    # -- lifetime --------------------------------------------------------------------------------
    def close(self):
        if self._closed:
            return
        self._closed = True
        if self._pf is not None:
            self._pf.close()
            self._pf = None
        if getattr(self, "_ahead", None) is not None:
            self._ahead.close()
            self._ahead = None
        raw = getattr(self, "_raw", None)
        if raw is not None:
            raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def open_edges(path, fmt=None, weighted=None, chunk_bytes=config.READ_CHUNK_BYTES, max_id=None,
               prefetch=None, threads=None, reuse=False) -> EdgeReader:
    """Open an edge-list file for streaming; see the module docstring for formats and errors.

    prefetch: read/inflate the next chunk in a background thread (default: only for gzip input).
    threads: numba threads parsing one text chunk (default numba.get_num_threads(); chunks of at
    least PARALLEL_MIN_BYTES are split into runs of whole lines). reuse: a text chunk's arrays
    are valid only until the next chunk is asked for (the parser writes every chunk into the same
    arrays: no fresh pages to fault in and zero); for a caller that copies what it keeps."""
    return EdgeReader(path, fmt=fmt, weighted=weighted, chunk_bytes=chunk_bytes, max_id=max_id,
                      prefetch=prefetch, threads=threads, reuse=reuse)


def read_edges(path, **kw):
    """Read a whole (small) edge list: `(src, dst, weight or None, reader)` (the closed reader holds
    the header attributes). Convenience for tests and small graphs; big inputs should stream."""
    with open_edges(path, **kw) as r:
        chunks = list(r)
    src = np.concatenate([c.src for c in chunks]) if chunks else np.empty(0, np.int64)
    dst = np.concatenate([c.dst for c in chunks]) if chunks else np.empty(0, np.int64)
    w = None
    if r.weighted:
        w = np.concatenate([c.weight for c in chunks]) if chunks else np.empty(0, np.float32)
    return src, dst, w, r


def _wider(max_id) -> str:
    """The hint for an ID above max_id where 4-byte IDs set the limit."""
    return " (--id-width 8 holds larger IDs)" if max_id == (1 << 32) - 1 else ""
