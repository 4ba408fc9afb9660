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

`deg, diff` are a direction's degrees as EdgeMap.degree_view gives them: its compact offsets and
their grid (io/offsets.py deg_at): no degree array.
    pull_direction(graph)               # the edge direction a pull (bottom-up) step scans, or None
"""
from __future__ import annotations

import numpy as np

from ..io.offsets import DEG_BLOCK, deg_at, degrees_into, n_of
from ..jit import njit

from .. import config


@njit(inline="always")
def list_cost(d, w, cols, block):
    """Estimated bytes to read one list of d neighbours of w bytes, split over at most `cols`
    pieces of at least one block each."""
    return d * w + block * min(d, cols)


@njit(cache=True)
def cost_of(deg, q, w, cols, block, dd):
    c = 0
    for k in range(q.shape[0]):
        d = deg_at(deg, dd, q[k])
        if d > 0:
            c += list_cost(d, w, cols, block)
    return c


@njit(cache=True)
def cost_and_edges(deg, q, w, cols, block, dd):
    """(cost_of's bytes, the lists' edges) of the queued vertices, their degrees read once."""
    c = 0
    m = 0
    for k in range(q.shape[0]):
        d = deg_at(deg, dd, q[k])
        if d > 0:
            c += list_cost(d, w, cols, block)
            m += d
    return c, m


@njit(cache=True)
def cost_where(mask, deg, w, cols, block, dd):
    """The bytes of the lists of the vertices with mask[v] true; of every vertex when mask is
    empty."""
    c = 0
    n = n_of(dd)
    every = mask.shape[0] == 0
    dg = np.empty(DEG_BLOCK, dtype=np.int64)
    for v0 in range(0, n, DEG_BLOCK):
        v1 = min(v0 + DEG_BLOCK, n)
        degrees_into(deg, dd, v0, v1, dg)
        # branch-free (a list of degree 0 costs 0): a frontier's flags follow no pattern
        if every:
            for v in range(v0, v1):
                c += list_cost(dg[v - v0], w, cols, block)
        else:
            for v in range(v0, v1):
                c += list_cost(dg[v - v0], w, cols, block) * np.int64(mask[v] != 0)
    return c


#: cost_where's mask for every vertex
_EVERY = np.zeros(0, dtype=np.uint8)


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

    def lists(self, deg, queue, capped: bool = True, diff=None) -> int:
        c = int(cost_of(deg, queue, self.w, self.cols, self.block, diff))
        return min(c, self.cap) if capped else c

    def lists_and_edges(self, deg, queue, diff=None):
        """(lists(..., capped=False), the lists' edges), the degrees read once."""
        c, m = cost_and_edges(deg, queue, self.w, self.cols, self.block, diff)
        return int(c), int(m)

    def all(self, deg, diff=None) -> int:
        return int(cost_where(_EVERY, deg, self.w, self.cols, self.block, diff))

    def where(self, mask, deg, diff=None) -> int:
        return int(cost_where(mask, deg, self.w, self.cols, self.block, diff))
