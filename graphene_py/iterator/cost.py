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

`deg` is a degree per vertex, or (diff=True) the offsets of a direction held as one partition
(a 1x1 grid): deg_at(deg, diff, v) is then offs[v+1] - offs[v], and no degree array is needed.
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


@njit(inline="always")
def deg_at(deg, diff, v):
    """v's degree from a degree array, or (diff) from one partition's offsets."""
    if diff:
        return np.int64(deg[v + 1]) - np.int64(deg[v])
    return np.int64(deg[v])


@njit(cache=True)
def cost_of(deg, q, w, cols, block, diff=False):
    c = 0
    for k in range(q.shape[0]):
        d = deg_at(deg, diff, q[k])
        if d > 0:
            c += list_cost(d, w, cols, block)
    return c


@njit(cache=True)
def cost_all(deg, w, cols, block, diff=False):
    c = 0
    for v in range(deg.shape[0] - (1 if diff else 0)):
        d = deg_at(deg, diff, v)
        if d > 0:
            c += list_cost(d, w, cols, block)
    return c


@njit(cache=True)
def cost_where(mask, deg, w, cols, block, diff=False):
    """cost_all over the vertices with mask[v] true."""
    c = 0
    for v in range(mask.shape[0]):
        if not mask[v]:
            continue
        d = deg_at(deg, diff, v)
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

    def lists(self, deg, queue, capped: bool = True, diff: bool = False) -> int:
        c = int(cost_of(deg, queue, self.w, self.cols, self.block, diff))
        return min(c, self.cap) if capped else c

    def all(self, deg, diff: bool = False) -> int:
        return int(cost_all(deg, self.w, self.cols, self.block, diff))

    def where(self, mask, deg, diff: bool = False) -> int:
        return int(cost_where(mask, deg, self.w, self.cols, self.block, diff))
