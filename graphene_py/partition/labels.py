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

A chunk of the file is cut into pieces of SUB_BYTES and each piece into runs of whole lines, one
per numba thread, parsed and looked up in parallel against the table as it stands (read only); the
names it lacks are listed (12 bytes each) and then added by one serial pass in file order, so the
IDs do not depend on the runs. Once most names are known, nearly all of the work is the parallel
part (kron22 with names: 2.9 M edges/s partitioned, against 1.9 M serially; BENCHMARKS.md).

The text rules are the reader's (graphene_py/partition/readers.py): `#`/`%` comment lines, blank
lines, spaces/tabs or a comma between columns, an optional third column of float weights decided by
the first data line, and every error names the file and line. Only text edge lists (el, wel) have
names; Matrix Market and binary files have integer IDs by definition.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from ..namehash import _mix
from .readers import (_E_COLS, _E_EMPTY, PARALLEL_MIN_BYTES, EdgeReader, _is_term,
                      _segment_starts, _skip_nondata, _skip_sep, _store_res, _weight_col)

#: empty slot of the name table (so at most 2^32 - 1 names)
_EMPTY = np.uint32(0xFFFFFFFF)
MAX_LABELS = (1 << 32) - 1
#: the table grows (doubles) when this share of its slots is taken
_LOAD = 0.7
#: a chunk is parsed in pieces of this many bytes: at most 2 missed names per 4 bytes, 12 bytes
#: each, i.e. 24 MiB of miss list at worst (a piece of 4-byte lines, all of them new names)
SUB_BYTES = 4 << 20


@nb.njit(nogil=True, cache=True, inline="always")
def _keys(buf, a, b):
    """The two keys of the name buf[a:b]: FNV-1a 64, and FNV-1a 32 (own prime) with the length."""
    h = np.uint64(0xCBF29CE484222325)
    g = np.uint64(0x811C9DC5)
    m32 = np.uint64(0xFFFFFFFF)
    for i in range(a, b):
        c = np.uint64(buf[i])
        h = (h ^ c) * np.uint64(0x100000001B3)
        g = ((g ^ c) * np.uint64(0x01000193)) & m32
    return h, g ^ (np.uint64(b - a) & m32)


@nb.njit(nogil=True, cache=True, inline="always")
def _probe(h, g, k1, k2, vals):
    """(slot, ID) of the name with keys (h, g); ID -1 and the empty slot where it would go."""
    mask = np.uint64(vals.shape[0] - 1)
    i = _mix(h) & mask
    while True:
        v = vals[i]
        if v == _EMPTY:
            return i, np.int64(-1)
        if k1[i] == h and np.uint64(k2[i]) == g:
            return i, np.int64(v)
        i = (i + np.uint64(1)) & mask


@nb.njit(nogil=True, cache=True)
def _rehash(k1, k2, vals, n1, n2, nvals):
    for s in range(vals.shape[0]):
        if vals[s] != _EMPTY:
            i, _ = _probe(k1[s], k2[s], n1, n2, nvals)
            nvals[i] = vals[s]
            n1[i] = k1[s]
            n2[i] = k2[s]


@nb.njit(nogil=True, cache=True, inline="always")
def _name_id(buf, a, b, base, k1, k2, vals, ids, k, side, miss, mcount):
    """ids[k] <- the ID of the name buf[a:b] when the table has it; else -1 and the name joins the
    misses (position in the chunk, length, 2k + side: int32, 12 bytes) for the serial pass."""
    h, g = _keys(buf, a, b)
    _, v = _probe(h, g, k1, k2, vals)
    ids[k] = v
    if v < 0:
        m = mcount[0]
        miss[m, 0] = base + a
        miss[m, 1] = b - a
        miss[m, 2] = 2 * k + side
        mcount[0] = m + 1


@nb.njit(nogil=True, cache=True)
def _parse_labeled(buf, end, base, ncols, k1, k2, vals, src, dst, w, miss, res):
    """The complete lines of buf[:end] -> src/dst IDs (and weights), like readers._parse_text
    with names instead of integers. The table is only read: names it lacks get ID -1 and are
    listed in `miss` (res[9] of them) for _add_names. res as _parse_text's, plus res[9]."""
    pos = 0
    k = 0
    nl = 0
    err = 0
    err_pos = 0
    err_col = 0
    found = 0
    line_start = 0
    mcount = res[9:10]
    mcount[0] = 0
    while pos < end:
        line_start = pos
        pos, dn, data = _skip_nondata(buf, pos, end)
        nl += dn
        if not data:
            continue
        if buf[pos] == 44:
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
        _name_id(buf, t0, e0, base, k1, k2, vals, src, k, 0, miss, mcount)
        _name_id(buf, t1, e1, base, k1, k2, vals, dst, k, 1, miss, mcount)
        if found == 3:
            w[k] = wv
        k += 1
        if pos < end:  # at '\n'
            nl += 1
            pos += 1
    _store_res(res, k, nl, ncols, err, err_pos, line_start, err_col, found, pos)


@nb.njit(nogil=True, cache=True, parallel=True)
def _parse_labeled_par(buf, starts, offs, ncols, k1, k2, vals, src, dst, w, miss, resm):
    """_parse_labeled on len(starts)-1 runs of whole lines at once (the table only read); run j's
    edges go to offs[j]:, its misses to miss[2 offs[j]:]."""
    for j in nb.prange(starts.shape[0] - 1):
        a = starts[j]
        o = offs[j]
        e = offs[j + 1]
        ww = w[o:e] if w.shape[0] > 0 else w
        _parse_labeled(buf[a:starts[j + 1]], starts[j + 1] - a, a, ncols, k1, k2, vals, src[o:e],
                       dst[o:e], ww, miss[2 * o:2 * e], resm[j])


@nb.njit(nogil=True, cache=True)
def _add_names(buf, offs, resm, miss, src, dst, k1, k2, vals, state, names, grow_at, cur):
    """The serial pass, in file order: each missed name is looked up again (an earlier miss may
    have added it) or gets the next ID, its bytes and a newline appended to `names`. Returns
    False, with cur = [run, miss] where it stopped, when a new name would pass grow_at entries
    (grow the table and call again); True when done."""
    for j in range(cur[0], resm.shape[0]):
        o = offs[j]
        for m in range(max(2 * o, cur[1]), 2 * o + resm[j, 9]):
            a = np.int64(miss[m, 0])
            b = a + miss[m, 1]
            h, g = _keys(buf, a, b)
            i, v = _probe(h, g, k1, k2, vals)
            if v < 0:
                if state[0] + 1 > grow_at:
                    cur[0] = j
                    cur[1] = m
                    return False
                v = state[0]
                vals[i] = np.uint32(v)
                k1[i] = h
                k2[i] = g
                state[0] = v + 1
                p = state[1]
                for q in range(a, b):
                    names[p] = buf[q]
                    p += 1
                names[p] = 10
                state[1] = p + 1
            e = o + (miss[m, 2] >> 1)
            if miss[m, 2] & 1:
                dst[e] = v
            else:
                src[e] = v
    return True


class LabeledReader(EdgeReader):
    """An EdgeReader of text edge lists whose vertices are names: yields EdgeChunks of the IDs the
    names get (first appearance order) and writes the label table to `sink` as it goes."""

    def __init__(self, path, sink, fmt=None, weighted=None, chunk_bytes=None, slots=1 << 16,
                 threads=None):
        kw = {} if chunk_bytes is None else {"chunk_bytes": chunk_bytes}
        super().__init__(path, fmt=fmt, weighted=weighted, threads=threads, **kw)
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
        """Pieces of at most about SUB_BYTES (whole lines), each parsed in runs (_parse_piece):
        the list of names missed in a piece stays small even where every name is new (an empty
        table). The edge rows, the miss list and the names buffer are made once per chunk (the
        pieces take their turns in them: no allocator churn), and each piece's runs are packed
        together after it, so the rows touched are the rows used (a run's unused reservation
        would otherwise hold a 2 MiB huge page each: +420 MiB on kron22's names)."""
        cuts = _segment_starts(buf, limit, max(1, -(-limit // SUB_BYTES)))
        lens = np.diff(cuts)
        T = self._threads
        cap = limit // 4 + len(lens) * (T + 1)      # >= every run's rows: its bytes // 4 + 1
        src = np.empty(cap, np.int64)
        dst = np.empty(cap, np.int64)
        w = np.empty(cap if self._ncols != 2 else 0, np.float32)
        longest = int(lens.max())
        miss = np.empty((2 * (longest // 4 + T + 1), 3), np.int32)  # touched: the misses only
        names = np.empty(longest + 1, np.uint8)     # each name is followed by >= 1 byte in buf
        nl, o = 0, 0
        for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
            if b > a:
                runs, dn = self._parse_piece(buf[a:b], b - a, nl, src[o:], dst[o:],
                                             w[o:] if len(w) else w, miss, names)
                nl += dn
                for j, k in runs:              # packed: this piece's edges follow the last one's
                    if j:
                        src[o:o + k] = src[o + j:o + j + k]
                        dst[o:o + k] = dst[o + j:o + j + k]
                        if len(w):
                            w[o:o + k] = w[o + j:o + j + k]
                    o += k
        return [(src[:o], dst[:o], w[:o] if len(w) else w)], nl

    def _parse_piece(self, buf, limit, nl_before, src, dst, w, miss, names):
        """Runs of whole lines parsed in parallel against the name table as it was (read only),
        then the names it lacked added in file order (_add_names), so IDs stay in first-appearance
        order whatever the runs. -> ([(first row, edges) per run, relative to the first row after
        the previous run's edges], newlines)."""
        # in parallel once the column count is known (the first data line decides it)
        nseg = self._threads if limit >= PARALLEL_MIN_BYTES and self._ncols else 1
        starts = _segment_starts(buf, limit, nseg)
        offs = np.zeros(nseg + 1, np.int64)
        np.cumsum(np.diff(starts) // 4 + 1, out=offs[1:])  # a data line takes >= 4 bytes
        resm = np.zeros((nseg, 10), np.int64)
        _parse_labeled_par(buf, starts, offs, self._ncols, self._k1, self._k2, self._vals, src,
                           dst, w, miss, resm)
        nl = nl_before
        for j in range(nseg):
            if resm[j, 3]:
                a = int(starts[j])
                self._raise_text(buf[a:], int(starts[j + 1]) - a, resm[j],
                                 self.lines_read + nl + int(resm[j, 1]) + 1)
            nl += int(resm[j, 1])
            if resm[j, 2]:
                self._ncols = int(resm[j, 2])
        self._state[1] = 0
        cur = np.zeros(2, np.int64)
        while not _add_names(buf, offs, resm, miss, src, dst, self._k1, self._k2, self._vals,
                             self._state, names, self._grow_at, cur):
            self._grow()
        self.sink.write(names[:self._state[1]])
        runs, done = [], 0
        for j in range(nseg):
            k = int(resm[j, 0])
            runs.append((int(offs[j]) - done, k))
            done += k
        return runs, nl - nl_before


def open_labeled(path, sink, fmt=None, weighted=None, chunk_bytes=None,
                 threads=None) -> LabeledReader:
    """Open a text edge list of vertex names; see the module docstring. threads: runs of lines
    a chunk of at least PARALLEL_MIN_BYTES is cut into (default numba's thread count)."""
    return LabeledReader(path, sink, fmt=fmt, weighted=weighted, chunk_bytes=chunk_bytes,
                         threads=threads)
