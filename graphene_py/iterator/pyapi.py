"""Graphene's Table 4.1 IoIterator API in plain Python (`start`, `has_more`, `next`, `current`,
`get_neighbors`, `get_weights`): the same extents as a compiled superstep, walked one block at a
time. Slow, but handy for prototyping and teaching; `TableApi` is mixed into IoIterator.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import GrapheneError
from ..io import offsets as _co
from . import kernels as K
from .frontier import Frontier


class TableApi:
    def start(self, frontier):
        """Begin a superstep for the Python API: mark, plan and (SSD path) submit the extents."""
        if not isinstance(frontier, Frontier):
            raise TypeError("frontier must be a Frontier")
        if self._py is not None:
            self._py_end()
        t0 = time.perf_counter()
        if frontier.kind == "queue":
            K.set_mask(self.mask, frontier.ids, np.uint8(1))
        fids, offs, lens, blocks, useful, mode = self._plan(frontier)
        woff, wlen = self._weight_extents(fids, offs, lens) if self.weights and len(offs) else (offs, None)
        py = dict(frontier=frontier, fids=fids, offs=offs, lens=lens, woff=woff, wlen=wlen,
                  blocks=blocks, useful=useful, mode=mode, t0=t0, handed=0, ready=[], held=[],
                  block=None, edges=0)
        if not self.in_memory and len(offs):
            self._submit(fids, offs, lens, woff, wlen)
            py["verify"] = self._verifier(fids, offs, lens, woff)
        self._py = py

    def has_more(self) -> bool:
        """True while the superstep has blocks not yet returned by next()."""
        py = self._py
        if py is None:
            return False
        if py["ready"]:
            return True
        total = len(py["offs"])
        if self.in_memory:
            if py["handed"] < total:
                r = py["handed"]
                f = py["fids"][r]
                py["ready"].append((r, int(self.file_base[f] + py["offs"][r]),
                                    int(self.wfile_base[f] + py["woff"][r]) if self.weights else -1,
                                    ()))
                py["handed"] += 1
                return True
            self._py_end()
            return False
        if self.engine is None or py["handed"] >= total:
            self._py_end()
            return False
        rows = np.empty((2, 3), np.int64)
        done = np.empty(4, np.int64)
        while True:
            c = self.engine.get(0, 1)
            if c.shape[0] == 0:
                self._py_end()
                return False
            if self.weights:
                n, nd = K.pair_rows(c, self.pending, self.slot_bytes, rows, done)
                if n == 0:
                    continue
                held = tuple(int(x) for x in done[:nd])
            else:
                K.slots_to_rows(c, self.slot_bytes, rows)
                held = (int(c[0, 1]),)
            try:
                py["verify"](rows, 1)
            except BaseException:
                self.engine.release(np.array(held, dtype=np.int64))
                raise
            py["ready"].append((int(rows[0, 0]), int(rows[0, 1]), int(rows[0, 2]), held))
            py["handed"] += 1
            return True

    def next(self) -> "Block":
        """The next in-memory block (one extent); releases the previous one."""
        py = self._py
        if py is None or (not py["ready"] and not self.has_more()):
            raise StopIteration("no more blocks in this superstep (check has_more())")
        self._py_release()
        r, pos, wpos, held = py["ready"].pop(0)
        py["held"] = list(held)
        blk = Block(self, r, pos, wpos, py)
        py["block"] = blk
        return blk

    def current(self) -> int:
        """The next active vertex of the current block, or -1 when the block has no more."""
        py = self._py
        if py is None or py["block"] is None:
            return -1
        return py["block"].next_vertex()

    def get_neighbors(self, v) -> np.ndarray:
        """v's neighbours held by the current block (int64; clipped: a long list spans blocks)."""
        py = self._py
        if py is None or py["block"] is None:
            raise GrapheneError("get_neighbors() outside a block (call next() first)")
        return py["block"].neighbors(v)

    def get_weights(self, v) -> np.ndarray:
        """float32 weights parallel to get_neighbors(v) (weights=True)."""
        py = self._py
        if py is None or py["block"] is None:
            raise GrapheneError("get_weights() outside a block (call next() first)")
        return py["block"].weights(v)

    def _py_release(self):
        py = self._py
        if py and py["held"]:
            if self.engine is not None:
                self.engine.release(np.array(py["held"], dtype=np.int64))
            py["held"] = []
        if py:
            py["block"] = None

    def _py_end(self):
        py = self._py
        if py is None:
            return
        self._py_release()
        # drain anything unconsumed (an abandoned superstep) so the engine can take the next batch
        if not self.in_memory and self.engine is not None and len(py["offs"]):
            for _, _, _, held in py["ready"]:
                if held:
                    self.engine.release(np.array(held, dtype=np.int64))
            while True:
                c = self.engine.get(0, 64)
                if c.shape[0] == 0:
                    break
                self.engine.release(c[:, 1].copy())
            if self.weights and self.pending is not None:
                left = self.pending[self.pending >= 0]
                if len(left):
                    self.engine.release(left.copy())
                self.pending[:] = -1
        fr = py["frontier"]
        if fr.kind == "queue":
            K.set_mask(self.mask, fr.ids, np.uint8(0))
        read = int(py["lens"].sum()) + (int(py["wlen"].sum()) if py["wlen"] is not None else 0)
        useful = py["useful"] + (py["useful"] * 4 // self.id_width if self.weights else 0)
        st = {"frontier": len(fr), "active_edges": py["edges"], "blocks_marked": py["blocks"],
              "extents": len(py["offs"]), "bytes_useful": useful,
              "bytes_read": 0 if self.in_memory else read,
              "io_utility": useful / read if read else 1.0, "io_seconds": 0.0, "requests": 0,
              "compute_seconds": 0.0, "wait_seconds": 0.0, "plan_seconds": 0.0,
              "seconds": time.perf_counter() - py["t0"], "mode": py["mode"]}
        self._py = None
        self.last_python_stats = st
        self._account(st)



class Block:
    """One extent held in memory (Python API): iterate its active vertices, get their clipped lists."""

    def __init__(self, it, r, pos, wpos, py):
        self.it = it
        f = int(py["fids"][r])
        self.part = int(it.file_part[f])
        pi = self.part
        b0 = int(it.part_base[pi])
        self.rowlen = int(it.part_base[pi + 1]) - b0 - 1
        # the partition's offsets whole (the iterator holds them compact), once per start()
        full = py.setdefault("full_offs", {})
        if pi not in full:
            full[pi] = _co.decode(it.offs, b0, b0 + self.rowlen + 1)
        self.offs = full[pi]
        self.row_lo = int(it.part_row_lo[pi])
        ne = int(it.part_nedges[pi])
        self.e_lo = int(py["offs"][r]) >> it.id_shift
        self.e_hi = min(ne, (int(py["offs"][r]) + int(py["lens"][r])) >> it.id_shift)
        self.pos, self.wpos, self.woff = pos, wpos, int(py["woff"][r])
        self.frontier = py["frontier"]
        self.py = py
        if self.rowlen > 0 and self.e_hi > self.e_lo:
            self.i = max(0, int(np.searchsorted(self.offs, self.e_lo, side="right")) - 1)
        else:
            self.i = self.rowlen

    def _active(self, v):
        fr = self.frontier
        if fr.kind == "all":
            return True
        mask = fr.mask if fr.kind == "mask" else self.it.mask
        return bool(mask[v])

    def next_vertex(self) -> int:
        while self.i < self.rowlen:
            i = self.i
            s, e = int(self.offs[i]), int(self.offs[i + 1])
            if s >= self.e_hi:
                self.i = self.rowlen
                break
            self.i += 1
            if e > s and e > self.e_lo:
                v = self.row_lo + i
                if self._active(v):
                    return v
        return -1

    def __iter__(self):
        while True:
            v = self.next_vertex()
            if v < 0:
                return
            yield v

    def _range(self, v):
        i = int(v) - self.row_lo
        if i < 0 or i >= self.rowlen:
            return 0, 0
        s = max(int(self.offs[i]), self.e_lo)
        e = min(int(self.offs[i + 1]), self.e_hi)
        return s, max(s, e)

    def neighbors(self, v) -> np.ndarray:
        s, e = self._range(v)
        base = (self.pos >> self.it.id_shift) - self.e_lo
        out = np.asarray(self.it.buf[base + s:base + e], dtype=np.int64)
        self.py["edges"] += e - s
        return out

    def weights(self, v) -> np.ndarray:
        if not self.it.weights:
            return np.zeros(0, np.float32)
        s, e = self._range(v)
        wb = (self.wpos - self.woff) >> 2
        return np.array(self.it.wbuf[wb + s:wb + e], dtype=np.float32)

