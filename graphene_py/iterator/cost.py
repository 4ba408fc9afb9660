"""The one IO cost model of a superstep, which every algorithm uses to choose its direction
(Beamer's direction optimization with bytes instead of edges): reading a vertex's list costs its
bytes, d * id_width, plus one block (the dataset's block size, 512 B by default) per piece the
list is split into (a list spans up to `cols` column partitions; a piece is at least one block
read). A direction's cost is the sum over the lists it reads, capped by the whole direction's
adjacency bytes (a dense superstep streams each file once).

    model = Model(graph, "out")         # w, cols, block and the cap of one edge direction
    model.lists(deg, queue)             # bytes for the lists of the queued vertices (capped)
    model.all(deg)                      # bytes for every list
    list_cost(d, w, cols, block)        # one list, inside other numba kernels

`deg` is a degree per vertex (with `lay` empty: NO_LAY), or the offsets an iterator holds with
`lay` = row_layout(it), which says where each row's partitions start in them: deg_at(deg, lay, v)
is then the sum of v's list lengths over its row's column partitions, and no O(|V|) degree array
is needed on any grid.
    pull_direction(graph)               # the edge direction a pull (bottom-up) step scans, or None
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from .. import config


@njit(inline="always")
def list_cost(d, w, cols, block):
    """Estimated bytes to read one list of d neighbours of w bytes, split over at most `cols`
    pieces of at least one block each."""
    return d * w + block * min(d, cols)


#: `lay` of a plain degree array
NO_LAY = np.zeros(0, dtype=np.int64)


def row_layout(it):
    """The `lay` of an iterator's offsets (int64): [R, the R rows' first vertices, their ends,
    R + 1 starts into the list below, then each row's partitions' first entries in it.offs];
    None where the iterator holds no offsets (a cluster)."""
    if getattr(it, "offs", None) is None or getattr(it, "part_base", None) is None or \
            getattr(it, "parts", None) is None:
        return None
    from .offsetdeg import RowGroups
    g = RowGroups(it)
    R = len(g.glo)
    return np.concatenate([[R], g.glo, g.ghi, g.gstart,
                           np.asarray(it.part_base, np.int64)[g.pidx]]).astype(np.int64)


@njit(inline="always")
def lay_degree(offs, lay, v):
    """v's degree from offsets laid out as `lay` says (row_layout): 0 outside every row."""
    R = lay[0]
    lo = np.int64(0)
    hi = R
    while hi - lo > 1:              # the last row starting at or before v
        mid = (lo + hi) >> 1
        if lay[1 + mid] <= v:
            lo = mid
        else:
            hi = mid
    if R == 0 or v < lay[1 + lo] or v >= lay[1 + R + lo]:
        return np.int64(0)
    i = v - lay[1 + lo]
    d = np.int64(0)
    first = 2 + 3 * R
    for j in range(lay[1 + 2 * R + lo], lay[2 + 2 * R + lo]):
        b = lay[first + j] + i
        d += np.int64(offs[b + 1]) - np.int64(offs[b])
    return d


@njit(inline="always")
def deg_at(deg, lay, v):
    """v's degree from a degree array (lay empty), or from the offsets laid out as lay says."""
    if lay.shape[0] == 0:
        return np.int64(deg[v])
    return lay_degree(deg, lay, v)


@njit(cache=True)
def cost_of(deg, q, w, cols, block, lay):
    c = 0
    for k in range(q.shape[0]):
        d = deg_at(deg, lay, q[k])
        if d > 0:
            c += list_cost(d, w, cols, block)
    return c


@njit(cache=True)
def cost_all(deg, n, w, cols, block, lay):
    c = 0
    for v in range(n):
        d = deg_at(deg, lay, v)
        if d > 0:
            c += list_cost(d, w, cols, block)
    return c


@njit(cache=True)
def cost_where(mask, deg, w, cols, block, lay):
    """cost_all over the vertices with mask[v] true."""
    c = 0
    for v in range(mask.shape[0]):
        if not mask[v]:
            continue
        d = deg_at(deg, lay, v)
        if d > 0:
            c += list_cost(d, w, cols, block)
    return c


def pull_direction(graph, bottom_up=True):
    """The edge direction a pull (bottom-up) step scans: 'out' on an undirected dataset (in-lists
    are out-lists), 'in' on a directed one with in-edge partitions, None when pulling is off or
    impossible."""
    if not bottom_up:
        return None
    if not graph.directed:
        return "out"
    return "in" if graph.in_partitions is not None else None


class Model:
    """The cost model of one edge direction of a dataset."""

    def __init__(self, graph, direction: str = "out"):
        parts = graph.parts(direction)
        self.w = int(graph.id_width)
        self.block = int(getattr(graph, "block_size", None) or config.BLOCK_SIZE)
        self.cap = sum(p.adj_bytes for p in parts)           # every list read once
        self.cols = max(1, len(parts) // max(1, graph.num_rows))

    def lists(self, deg, queue, capped: bool = True, lay=None) -> int:
        c = int(cost_of(deg, queue, self.w, self.cols, self.block, _lay(lay)))
        return min(c, self.cap) if capped else c

    def all(self, deg, lay=None, n=None) -> int:
        """Every list's cost: of len(deg) vertices (a degree array), else of n."""
        n = len(deg) if lay is None or not len(lay) else n
        return int(cost_all(deg, n, self.w, self.cols, self.block, _lay(lay)))

    def where(self, mask, deg, lay=None) -> int:
        return int(cost_where(mask, deg, self.w, self.cols, self.block, _lay(lay)))


def _lay(lay):
    return NO_LAY if lay is None else lay
