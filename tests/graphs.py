"""Test graphs every suite shares: random shapes and the nasty ones (DEVELOPERS.md's list).

Each entry is a function returning `TestGraph(name, n, src, dst, weights)` with int64 src/dst and
float32 weights (positive integers 1..255 as floats, like GAPBS). `n` may exceed max ID + 1 (isolated
vertices at the ID range's end). Use `NASTY` and `RANDOM` in parametrized tests; `by_name(name)`.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass
class TestGraph:
    __test__ = False  # not a pytest class
    name: str
    n: int
    src: np.ndarray
    dst: np.ndarray
    weights: np.ndarray

    @property
    def m(self) -> int:
        return len(self.src)


def _mk(name, n, src, dst, seed=0):
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    rng = np.random.default_rng(seed + 7)
    w = rng.integers(1, 256, size=len(src)).astype(np.float32)
    return TestGraph(name, int(n), src, dst, w)


def empty():
    return _mk("empty", 0, [], [])


def one_vertex():
    return _mk("one_vertex", 1, [], [])


def one_edge():
    return _mk("one_edge", 2, [0], [1])


def only_self_loops():
    return _mk("only_self_loops", 4, [0, 1, 2, 3], [0, 1, 2, 3])


def duplicates():
    # every edge three times, plus self-loops mixed in
    s = np.array([0, 1, 2, 3, 4, 0, 2], dtype=np.int64)
    d = np.array([1, 2, 3, 4, 0, 0, 2], dtype=np.int64)
    return _mk("duplicates", 6, np.tile(s, 3), np.tile(d, 3))


def disconnected():
    # three components of different sizes and one isolated vertex in the middle (ID 5)
    s = [0, 1, 2, 6, 7, 9]
    d = [1, 2, 0, 7, 8, 10]
    return _mk("disconnected", 12, s, d)


def star(hub_degree=70_000, hub=3):
    # hub with > 65,536 out-edges: its list spans many 512-byte blocks and every partition;
    # plus edges back into the hub and a few leaf-leaf edges
    n = hub_degree + 5
    leaves = np.array([v for v in range(n) if v != hub][:hub_degree], dtype=np.int64)
    s = np.concatenate([np.full(hub_degree, hub), leaves[:50], leaves[10:20]])
    d = np.concatenate([leaves, np.full(50, hub), leaves[20:30]])
    return _mk("star", n, s, d)


def chain(n=5000):
    # thousands of BFS levels
    v = np.arange(n - 1, dtype=np.int64)
    return _mk("chain", n, v, v + 1)


def isolated_ends(n=1000, seed=3):
    # vertices 0 and n-1 isolated (and a few more at both ends); edges only in the middle
    rng = np.random.default_rng(seed)
    s = rng.integers(5, n - 5, size=4 * n)
    d = rng.integers(5, n - 5, size=4 * n)
    return _mk("isolated_ends", n, s, d, seed)


def uniform(n=2000, m=16000, seed=1):
    rng = np.random.default_rng(seed)
    return _mk(f"uniform_{n}_{m}", n, rng.integers(0, n, m), rng.integers(0, n, m), seed)


def powerlaw(scale=12, edge_factor=8, seed=2):
    """Small R-MAT (a=.57, b=c=.19) so tests do not depend on the generator module."""
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for bit in range(scale):
        r = rng.random(m)
        down = r >= 0.57 + 0.19            # quadrants c, d -> src bit set
        right = ((r >= 0.57) & (r < 0.76)) | (r >= 0.95)  # quadrants b, d -> dst bit set
        src |= down.astype(np.int64) << bit
        dst |= right.astype(np.int64) << bit
    perm = rng.permutation(1 << scale)
    return _mk(f"powerlaw_{scale}", 1 << scale, perm[src], perm[dst], seed)


def grid(w=40, h=40):
    # a 2D grid: moderate diameter, many equal-length paths (SSSP ties)
    idx = np.arange(w * h).reshape(h, w)
    s = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    d = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return _mk("grid", w * h, s, d)


NASTY = [empty, one_vertex, one_edge, only_self_loops, duplicates, disconnected, star, chain,
         isolated_ends]
RANDOM = [uniform, powerlaw, grid]
ALL = NASTY + RANDOM


def by_name(name):
    for f in ALL:
        if f.__name__ == name:
            return f()
    raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# naive references shared by the suites (plain Python, independent of the engine)
def naive_adjacency(n, src, dst, symmetric=False):
    """Adjacency sets from raw edges, self-loops dropped, duplicates merged."""
    adj = [set() for _ in range(n)]
    for s, d in zip(np.asarray(src).tolist(), np.asarray(dst).tolist()):
        if s != d:
            adj[s].add(d)
            if symmetric:
                adj[d].add(s)
    return adj


def naive_bfs_depth(adj, src):
    """Depth of every vertex from src by a plain FIFO-queue BFS (-1 = unreached)."""
    depth = np.full(len(adj), -1, dtype=np.int64)
    depth[src] = 0
    q = deque([src])
    while q:
        v = q.popleft()
        for u in adj[v]:
            if depth[u] < 0:
                depth[u] = depth[v] + 1
                q.append(u)
    return depth


def partitioned(tmp_path, gname, layout, name="hyb"):
    """Graph `gname` partitioned 2x2 on two folders under tmp_path: "sym" (undirected),
    "directed_in" (directed, with in-edge partitions) or "directed" (out-lists only)."""
    from graphene_py.partition import partition_arrays
    tg = by_name(gname)
    disks = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in disks:
        (tmp_path / d).mkdir(exist_ok=True)
    return partition_arrays(tg.src, tg.dst, num_vertices=tg.n, disks=disks, name=name, rows=2,
                            cols=2, symmetrize=layout == "sym", in_edges=layout == "directed_in",
                            register=False)


def standin(m, name="g", page_tables=True):
    """A dataset's shape without its files (what --device auto's plan reads): m undirected
    edges, m / 32 vertices, 4-byte IDs, unweighted, no partition without its page tables
    (page_tables=False: one, as an older dataset's, whose lists the GPU's load cannot read
    straight: gpu/lists.py resident_loadable)."""
    from types import SimpleNamespace
    old = [] if page_tables else [SimpleNamespace(num_edges=1, pages={})]
    return SimpleNamespace(num_vertices=m // 32, num_edges=m, id_width=4, directed=False,
                           in_partitions=None, uuid=f"{name}{m}", weighted=False, name=name,
                           parts=lambda direction: old)
