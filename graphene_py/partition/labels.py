"""`--labels`: edge lists whose vertices are names (`alice bob`, URLs, usernames), read in one pass.

    with open_labeled(path, sink) as r:          # sink: a binary file taking the label table
        for ch in r:                             # EdgeChunk of vertex IDs, like open_edges
            ...
    r.num_labels                                 # distinct names seen = the vertex count

Each name gets the next vertex ID the first time it appears (file order: a crawl's locality is kept),
and is appended to `sink` as one line: line i of the label table is the name of vertex i (UTF-8 bytes
as they are in the input; names cannot hold blanks, commas or line breaks, which separate columns).
Names are matched through an open-addressing table keyed by two independent hashes of the bytes
(64 + 32 bits), holding the ID and nothing else: 16 bytes per slot at most 70% full, i.e. 23–46
bytes per distinct name, never the names themselves (those go to `sink` as they are met). Two
different names would have to agree on all 96 bits to be confused: about n²/2^97, 1e-11 for a
billion names.

The text rules are the reader's (graphene_py/partition/readers.py): `#`/`%` comment lines, blank
lines, spaces/tabs or a comma between columns, an optional third column of float weights decided by
the first data line, and every error names the file and line. Only text edge lists (el, wel) have
names; Matrix Market and binary files have integer IDs by definition.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .readers import (_E_COLS, _E_EMPTY, EdgeReader, _is_term, _parse_float, _skip_sep)

#: empty slot of the name table (so at most 2^32 - 1 names)
_EMPTY = np.uint32(0xFFFFFFFF)
MAX_LABELS = (1 << 32) - 1
#: the table grows (doubles) when this share of its slots is taken
_LOAD = 0.7
_NEED_ROOM = 11      # the kernel's "grow the table, then call me again from res[8]" code


@nb.njit(nogil=True, cache=True, inline="always")
def _mix(h):
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@nb.njit(nogil=True, cache=True)
def hash_name(buf):
    """The 64-bit hash _lookup keys a name by (FNV-1a 64, mixed)."""
    h = np.uint64(0xCBF29CE484222325)
    for i in range(buf.shape[0]):
        h = (h ^ np.uint64(buf[i])) * np.uint64(0x100000001B3)
    return _mix(h)


@nb.njit(nogil=True, cache=True)
def hash_lines(buf, off):
    """hash_name of every line buf[off[i]:off[i+1]-1] of a label table."""
    n = off.shape[0] - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        out[i] = hash_name(buf[off[i]:off[i + 1] - 1])
    return out


@nb.njit(nogil=True, cache=True)
def _lookup(buf, a, b, k1, k2, vals, state, names):
    """The ID of the name buf[a:b]; a new name gets ID state[0] and is appended to `names` at
    state[1] followed by a newline."""
    h = np.uint64(0xCBF29CE484222325)           # FNV-1a 64
    g = np.uint64(0x811C9DC5)                   # FNV-1a 32: the second key
    m32 = np.uint64(0xFFFFFFFF)
    for i in range(a, b):
        c = np.uint64(buf[i])
        h = (h ^ c) * np.uint64(0x100000001B3)
        g = ((g ^ c) * np.uint64(0x01000193)) & m32
    g ^= np.uint64(b - a) & m32
    mask = np.uint64(vals.shape[0] - 1)
    i = _mix(h) & mask
    while True:
        v = vals[i]
        if v == _EMPTY:
            nid = state[0]
            vals[i] = np.uint32(nid)
            k1[i] = h
            k2[i] = g
            state[0] = nid + 1
            o = state[1]
            for j in range(a, b):
                names[o] = buf[j]
                o += 1
            names[o] = 10
            state[1] = o + 1
            return nid
        if k1[i] == h and np.uint64(k2[i]) == g:
            return np.int64(v)
        i = (i + np.uint64(1)) & mask


@nb.njit(nogil=True, cache=True)
def _rehash(k1, k2, vals, n1, n2, nvals):
    mask = np.uint64(nvals.shape[0] - 1)
    for s in range(vals.shape[0]):
        v = vals[s]
        if v == _EMPTY:
            continue
        i = _mix(k1[s]) & mask
        while nvals[i] != _EMPTY:
            i = (i + np.uint64(1)) & mask
        nvals[i] = v
        n1[i] = k1[s]
        n2[i] = k2[s]


@nb.njit(nogil=True, cache=True)
def _parse_labeled(buf, end, ncols, k1, k2, vals, state, grow_at, src, dst, w, names, res):
    """The complete lines of buf[:end] -> src/dst IDs (and weights), like readers._parse_text with
    names instead of integers. Stops before a line when the table may pass grow_at entries
    (res[3] = _NEED_ROOM, res[8] = that line's position). res as _parse_text's."""
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
        c = buf[pos]
        while c == 32 or c == 9 or c == 13:
            pos += 1
            if pos == end:
                break
            c = buf[pos]
        if pos == end:
            break
        if c == 10:
            nl += 1
            pos += 1
            continue
        if c == 35 or c == 37:  # '#' or '%' comment
            while pos < end and buf[pos] != 10:
                pos += 1
            if pos < end:
                nl += 1
                pos += 1
            continue
        if state[0] + 2 > grow_at:
            err = _NEED_ROOM
            pos = line_start
            break
        if c == 44:
            err, err_pos = _E_EMPTY, pos
            break
        t0 = pos
        while pos < end and not _is_term(buf[pos]):
            pos += 1
        e0 = pos
        pos, commas = _skip_sep(buf, pos, end)
        if commas > 1:
            err, err_pos = _E_EMPTY, t0
            break
        found = 1
        t1 = e1 = pos
        wv = np.float32(0)
        if pos < end and buf[pos] != 10:
            while pos < end and not _is_term(buf[pos]):
                pos += 1
            e1 = pos
            found = 2
            pos, commas = _skip_sep(buf, pos, end)
            if commas > 1:
                err, err_pos = _E_EMPTY, t1
                break
            if pos < end and buf[pos] != 10 and ncols == 2:
                found = 3                      # a third column where the first line had two
                while pos < end and not _is_term(buf[pos]):
                    pos += 1
                pos, commas = _skip_sep(buf, pos, end)
                if pos < end and buf[pos] != 10:
                    found = 4
            elif pos < end and buf[pos] != 10:
                t2 = pos
                pos, wv, e = _parse_float(buf, pos, end)
                if e != 0:
                    err, err_pos, err_col = e, t2, 2
                    break
                found = 3
                pos, commas = _skip_sep(buf, pos, end)
                if commas > 1:
                    err, err_pos = _E_EMPTY, t2
                    break
                if pos < end and buf[pos] != 10:
                    found = 4
        if ncols == 0 and (found == 2 or found == 3):
            ncols = found
        if found != ncols:
            err, err_pos = _E_COLS, t0
            break
        src[k] = _lookup(buf, t0, e0, k1, k2, vals, state, names)
        dst[k] = _lookup(buf, t1, e1, k1, k2, vals, state, names)
        if found == 3:
            w[k] = wv
        k += 1
        if pos < end:  # at '\n'
            nl += 1
            pos += 1
    res[0] = k
    res[1] = nl
    res[2] = ncols
    res[3] = err
    res[4] = err_pos
    res[5] = line_start
    res[6] = err_col
    res[7] = found
    res[8] = pos


class LabeledReader(EdgeReader):
    """An EdgeReader of text edge lists whose vertices are names: yields EdgeChunks of the IDs the
    names get (first appearance order) and writes the label table to `sink` as it goes."""

    def __init__(self, path, sink, fmt=None, weighted=None, chunk_bytes=None, slots=1 << 16):
        kw = {} if chunk_bytes is None else {"chunk_bytes": chunk_bytes}
        super().__init__(path, fmt=fmt, weighted=weighted, threads=1, **kw)
        if self.kind != "text":
            self.close()
            raise ValueError(f"--labels reads text edge lists (el, wel); {self.fmt} files number "
                             f"their vertices")
        self.sink = sink
        self._state = np.zeros(2, np.int64)       # [names so far, bytes in the names buffer]
        self._alloc(slots)

    @property
    def num_labels(self) -> int:
        return int(self._state[0])

    def table_bytes(self) -> int:
        return self._vals.nbytes + self._k1.nbytes + self._k2.nbytes

    def _alloc(self, slots):
        self._k1 = np.empty(slots, np.uint64)
        self._k2 = np.empty(slots, np.uint32)
        self._vals = np.full(slots, _EMPTY, np.uint32)
        self._grow_at = min(int(slots * _LOAD), MAX_LABELS)

    def _grow(self):
        if self._grow_at >= MAX_LABELS:
            raise ValueError(f"more than {MAX_LABELS:,} distinct vertex names")
        k1, k2, vals = self._k1, self._k2, self._vals
        self._alloc(2 * len(vals))
        _rehash(k1, k2, vals, self._k1, self._k2, self._vals)

    def release(self):
        """Drop the name table (the IDs are assigned; the names are in the sink)."""
        self._k1 = self._k2 = self._vals = None

    def _parse_block(self, buf, limit, res, mtx, base, max_src, max_dst):
        ecap = limit // 4 + 1             # a data line takes >= 4 bytes ("a b\n")
        src = np.empty(ecap, np.int64)
        dst = np.empty(ecap, np.int64)
        w = np.empty(ecap if self._ncols != 2 else 0, np.float32)
        names = np.empty(limit + 1, np.uint8)  # each name met is followed by >= 1 byte in buf
        a = k = nl = 0
        while True:
            self._state[1] = 0
            _parse_labeled(buf[a:limit], limit - a, self._ncols, self._k1, self._k2, self._vals,
                           self._state, self._grow_at, src[k:], dst[k:], w[k:] if len(w) else w,
                           names, res)
            self.sink.write(names[:self._state[1]])
            k += int(res[0])
            nl += int(res[1])
            self._ncols = int(res[2])
            if int(res[3]) != _NEED_ROOM:
                break
            self._grow()
            a += int(res[8])
        if res[3]:
            self._raise_text(buf[a:], limit - a, res, self.lines_read + nl + 1)
        return [(src[:k], dst[:k], w[:k] if len(w) else w)], nl


def open_labeled(path, sink, fmt=None, weighted=None, chunk_bytes=None) -> LabeledReader:
    """Open a text edge list of vertex names; see the module docstring."""
    return LabeledReader(path, sink, fmt=fmt, weighted=weighted, chunk_bytes=chunk_bytes)
