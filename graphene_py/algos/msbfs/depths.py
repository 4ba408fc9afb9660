"""The depths of a multi-source BFS pass, written from a log of the words found per level.

Writing a level's bits straight into the k rows of depths[k, n] would pull every row's cache lines
in again per dense level (half the kernel time). Instead each level's non-zero words are logged as
(vertex, word) in vertex order (msbfs._advance), and _write_depths builds the depths of 1024
vertices x k sources in an L2-resident tile from all logged levels and stores it once (-1 for the
bits never set, so depths needs no -1 fill), on T threads. The same pass counts `reached` and sums
the depths per source.
"""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...io.bitmap import ctz64
from ...iterator.memory import track

_TILE = 1024


@njit(cache=True, nogil=True)
def _write_depths(drow, logv, logw, seg_lo, seg_level, lo, hi, init, cnt, sm):
    """Depths of the logged levels for the vertices [lo, hi): segment j = log entries
    seg_lo[j]..seg_lo[j+1] (sorted by vertex), found at depth seg_level[j]. Counts the bits per
    source (cnt) and sums their depths (sm). init: every drow[:, lo:hi] entry is written once, -1
    where no segment sets it, through an L2-resident tile of _TILE vertices (writing each level
    straight into the k rows would pull every row's lines in again per level); else only the
    logged entries are written. A zero-width drow (k x 0: a run that keeps no depths) takes no
    writes, only the counts (init False)."""
    k = drow.shape[0]
    nseg = seg_level.shape[0]
    cur = np.empty(nseg, np.int64)
    for j in range(nseg):
        a = seg_lo[j]
        cur[j] = a + np.searchsorted(logv[a:seg_lo[j + 1]], lo)
    one = np.uint64(1)
    if not init:
        write = drow.shape[1] > 0
        for j in range(nseg):
            lvl = seg_level[j]
            for p in range(cur[j], seg_lo[j + 1]):
                v = logv[p]
                if v >= hi:
                    break
                x = np.uint64(logw[p])
                while x != np.uint64(0):
                    b = ctz64(x)
                    if write:
                        drow[b, v] = lvl
                    cnt[b] += 1
                    sm[b] += lvl
                    x &= x - one
        return
    tb = np.empty((k, _TILE + 16), dtype=np.int32)    # padded rows: no cache-set aliasing
    for t0 in range(lo, hi, _TILE):
        m = min(_TILE, hi - t0)
        t1 = t0 + m
        for b in range(k):
            tb[b, :m] = -1
        for j in range(nseg):
            lvl = seg_level[j]
            e = seg_lo[j + 1]
            p = cur[j]
            while p < e:
                v = logv[p]
                if v >= t1:
                    break
                x = np.uint64(logw[p])
                while x != np.uint64(0):
                    b = ctz64(x)
                    tb[b, v - t0] = lvl
                    cnt[b] += 1
                    sm[b] += lvl
                    x &= x - one
                p += 1
            cur[j] = p
        for b in range(k):
            drow[b, t0:t1] = tb[b, :m]


#: vertices per span of an on-disk depths' first flush (x k rows x 4 bytes held dirty at once)
_SPAN = 64 * _TILE
_IN_FLIGHT = 3

#: a flush of the level log is forced after this many levels (bounds _write_depths' cursors)
_MAX_LOG_LEVELS = 256


class Log:
    """The words found per level, (vertex, word) in vertex order, until they are written into the
    pass's depths rows `drow` (_write_depths). The first flush writes every entry of the rows once
    (-1 included, so the rows need no prior fill), tile by tile on `threads` threads; later ones
    only the logged bits. A flush runs when the next level might not fit (2n entries, or
    _MAX_LOG_LEVELS levels) and at the end; `flush(background=True)` lets it run on while the next
    supersteps stream (the caller starts one once the levels shrink: the dense ones are logged by
    then). `writeback`: an on-disk depths goes back to its file span by span as the first flush
    writes it (iterator.memory.WriteBack). `entries`: the log's size (default 2n; at least n, what
    one level may log). A zero-width drow (k x 0): no depths are kept, a flush only counts."""

    def __init__(self, n, wdt, threads, drow, reached, sums, writeback=None, entries=None):
        cap = max(2 * n if entries is None else int(entries), n, 1024)
        self.v = np.empty(cap, dtype=np.int32 if n < (1 << 31) else np.int64)
        self.w = np.empty(cap, dtype=wdt)
        track("depth log", self.v, self.w)
        self.n = n
        self.threads = max(1, int(threads))
        self.drow, self.reached, self.sums = drow, reached, sums
        self.counting = drow.shape[1] == 0      # no depths kept: counts only
        self.writeback = writeback   # iterator.memory.WriteBack of an on-disk depths, or None
        self.pos = 0            # next free entry
        self.lo = 0             # first entry not handed to a flush
        self.seg_lo = [0]       # segments [seg_lo[j], seg_lo[j+1]) not handed to a flush yet
        self.levels = []
        self.init = not self.counting   # no flush yet: the next one writes every entry
        self.running = None     # (executor, futures, cnt, sm) of a flush in flight

    def room(self, entries=None):
        """Whether a level of up to `entries` (default n) words fits the log."""
        need = self.n if entries is None else int(entries)
        return self.pos + need <= len(self.v) and len(self.levels) < _MAX_LOG_LEVELS

    def add(self, count, level):
        self.pos += int(count)
        self.seg_lo.append(self.pos)
        self.levels.append(level)

    def flush(self, background=False):
        """Hand every logged segment to a flush; wait for it unless `background`."""
        self.wait()
        if self.levels:
            n = self.n
            k = self.drow.shape[0]
            seg_lo = np.array(self.seg_lo, dtype=np.int64)
            lv = np.array(self.levels, dtype=np.int32)
            wb = self.writeback
            T = self.threads if (self.init or wb is not None or self.counting) and \
                n >= 4 * _TILE else 1
            step = -(-n // T // _TILE) * _TILE if T > 1 else n
            cnt = np.zeros((T, k), dtype=np.int64)
            sm = np.zeros((T, k), dtype=np.int64)
            init = self.init

            def job(t):
                lo, hi = min(n, t * step), min(n, (t + 1) * step)
                if wb is None:
                    _write_depths(self.drow, self.v, self.w, seg_lo, lv, lo, hi, init, cnt[t],
                                  sm[t])
                    return
                # an on-disk depths: written in spans, each handed back to its file once the
                # disk has it (a few spans in flight, so the writes overlap the next spans); a
                # later flush first asks for the next span's pages back (read ahead, in large
                # requests: no read-around on the mapping)
                flight = []
                try:
                    for a in range(lo, hi, _SPAN):
                        b = min(hi, a + _SPAN)
                        if not init:
                            if a == lo:
                                for r in range(k):
                                    wb.prefetch(self.drow[r, a:b])
                            if b < hi:
                                for r in range(k):
                                    wb.prefetch(self.drow[r, b:min(hi, b + _SPAN)])
                        _write_depths(self.drow, self.v, self.w, seg_lo, lv, a, b, init,
                                      cnt[t], sm[t])
                        flight.append([wb.start(self.drow[r, a:b]) for r in range(k)])
                        while len(flight) > _IN_FLIGHT:
                            for tok in flight.pop(0):
                                wb.finish(tok)
                finally:
                    for toks in flight:
                        for tok in toks:
                            wb.finish(tok)

            from concurrent.futures import ThreadPoolExecutor
            ex = ThreadPoolExecutor(T)
            self.running = (ex, [ex.submit(job, t) for t in range(T)], cnt, sm)
            self.init = False
            self.lo = self.pos
            self.seg_lo = [self.pos]
            self.levels = []
        if not background:
            self.wait()

    def wait(self):
        if self.running is None:
            return
        ex, futs, cnt, sm = self.running
        self.running = None
        try:
            for f in futs:
                f.result()
        finally:
            ex.shutdown()
        self.reached += cnt.sum(axis=0)
        self.sums += sm.sum(axis=0)
        if not self.levels:        # everything written: the log starts over
            self.pos = self.lo = 0
            self.seg_lo = [0]

    def make_room(self, entries=None):
        if not self.room(entries):
            self.flush()
