"""Kept lists: short adjacency lists held in RAM once read, an engine feature any algorithm can use.

An algorithm whose supersteps read the same lists again and again (multi-source BFS's bottom-up
levels read the in-lists of every vertex still missing sources) asks its EdgeMap for them:

    kept = em.keep_lists("in", budget=n)       # None where lists do not pass through this process
    st = em.masked(state, PULL, mask, "in")    # a kept direction is used by every masked superstep

The lists of degree 1..D of that direction, D as large as fits `budget` stored entries (a count
plus the IDs per list: at scale 22, D = 5 for budget n), get a slot each. A superstep that reads
such a list copies it into its slot on the way (kernels.keep_chunk, inside the compiled superstep:
chunks of one list on several threads claim their places with an atomic add; the chunk that
completes it flags the vertex). From then on a masked superstep takes the flagged vertices out of
its mask and serves them from RAM (kernels.serve_kept, specialized per update like the superstep's
own kernel) on a helper thread, with thread id `em.threads`, while the disks serve the rest: state
an update indexes by thread id needs `em.threads + 1` rows. The vertices' compute sees exactly the
lists it would have read (unweighted: kept lists hold IDs only).

Costs: 4-8 bytes per vertex of slot starts, 1 of flags and 2 of a superstep's masks (served from
RAM, read), plus the budget's entries (4 bytes each for 32-bit IDs).
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from ..io.offsets import DEG_BLOCK, degrees_into
from .memory import Side, track


def id_dtype(id_width: int):
    """The dtype of kept IDs: that of the lists the superstep hands to compute."""
    return np.uint32 if id_width == 4 else np.int64


def start_dtype(n: int):
    return np.int32 if n < (1 << 30) else np.int64


@njit(cache=True)
def _layout(deg, diff, budget, kstart):
    """Slots for the lists of the vertices of degree 1..D (a count, then the IDs) in one array of
    at most `budget` entries, D as large as fits: kstart[v]..kstart[v+1] is v's slot (empty above
    D). deg, diff: the degrees as EdgeMap.degree_view gives them (io/offsets.py deg_at). Returns (D,
    entries)."""
    n = kstart.shape[0] - 1
    hist = np.zeros(257, dtype=np.int64)
    dg = np.empty(DEG_BLOCK, dtype=np.int64)
    for v0 in range(0, n, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, n)
        degrees_into(deg, diff, v0, v1, dg)
        for v in range(v0, v1):
            hist[min(dg[v - v0], 256)] += 1
    D = 0
    tot = 0
    for d in range(1, 256):
        if tot + hist[d] * (d + 1) > budget:
            break
        tot += hist[d] * (d + 1)
        D = d
    kstart[0] = 0
    c = 0
    uD = np.uint64(D)
    for v0 in range(0, n, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, n)
        degrees_into(deg, diff, v0, v1, dg)
        for v in range(v0, v1):
            d = dg[v - v0]
            # 0 < d <= D, branch-free: d - 1 < D unsigned
            c += (d + 1) * np.int64(np.uint64(d - 1) < uD)
            kstart[v + 1] = c
    return D, c


@njit(cache=True)
def _split(mask, kdone, served, rest):
    """served: the flagged vertices whose lists are kept; rest: the other flagged ones (what the
    disks serve). `mask` is not changed: an update may test it in is_active (WCC's propagation
    tests its frontier flags), for the served vertices too. Returns how many are served."""
    k = 0
    for v in range(mask.shape[0]):        # branch-free: a frontier's flags follow no pattern
        m = np.uint8(mask[v] != 0)
        kd = np.uint8(kdone[v] != 0)
        s = m & kd
        served[v] = s
        rest[v] = m & (kd ^ np.uint8(1))
        k += s
    return k


class ShortLists:
    """The kept lists of one direction (see the module's text)."""

    def __init__(self, deg, budget: int, id_width: int, direction: str = "out", diff=None,
                 n=None, cache=False):
        """deg, diff: the degrees as EdgeMap.degree_view gives them (n: the vertices).
        cache: the lists are part of the run's adjacency cache (`--memory` buys them; the
        memory block reports them apart from the O(|V|) state), not of its state."""
        n = int(diff[2 + diff[0]]) if n is None else int(n)
        self.direction = direction
        self.kstart = np.zeros(n + 1, dtype=start_dtype(n))
        self.degree_max, entries = _layout(deg, diff, int(budget), self.kstart)
        self.kcache = np.zeros(max(1, entries), dtype=id_dtype(id_width))
        self.kdone = np.zeros(n, dtype=np.uint8)
        self.served = np.zeros(n, dtype=np.uint8)
        self.rest = np.zeros(n, dtype=np.uint8)         # the disks' part of a masked superstep
        self.entries = int(entries)
        track(f"{'adjacency cache: ' if cache else ''}kept lists ({direction})", self.kstart,
              self.kcache, self.kdone, self.served, self.rest)

    @property
    def arrays(self):
        """(kcache, kstart, kdone): what the compiled superstep copies lists into."""
        return self.kcache, self.kstart, self.kdone

    def kept(self) -> int:
        """How many lists are complete in RAM."""
        return int(np.count_nonzero(self.kdone))

    def run_masked(self, it, is_active, compute, state, mask, frontier_class, tid: int,
                   again: bool = False) -> dict:
        """One masked superstep over iterator `it`: the kept lists of `mask`'s vertices from RAM
        (on a helper thread, thread id `tid`), the others through `it` (copied into their slots
        when they have one; again: Frontier.from_mask's). `mask` is left as it was."""
        from .specialize import kernel_for
        served = self.served
        k = _split(mask, self.kdone, served, self.rest) if self.entries else 0
        side = None
        out = np.zeros(1, dtype=np.int64)
        if k:
            kern = kernel_for(is_active, compute, "serve_kept")
            wb = np.zeros(0, dtype=np.float32)
            args = (state, tid, served, self.kcache, self.kstart, wb)

            def serve():
                out[0] = kern.call(*args)
            side = Side(serve)
        try:
            st = it.run(is_active, compute, state,
                        frontier_class.from_mask(self.rest if k else mask, again=again),
                        keep=self.arrays)
        finally:
            if side is not None:
                side.join()
        st["kept_lists"] = int(k)
        st["active_edges"] = st.get("active_edges", 0) + int(out[0])
        return st
