"""Slow, obviously-correct reference implementations (stumpy's `naive.py` habit).

Every fast path in graphene_py.algos is compared against these. They work on plain edge lists with
Python loops, dicts and heaps; nothing here shares code with the engine. Conventions are the ones of
shared/design/CONVENTIONS.md:

- `clean_edges` reproduces what partitioning stores: self-loops dropped, duplicate (src, dst) pairs
  dropped keeping the smallest weight, and with `symmetrize` every edge also reversed.
- BFS depth int32, -1 unreached. SSSP dist float64, inf unreached.
- PageRank: alpha 0.85, dangling vertices (out-degree 0) spread their score uniformly over all
  vertices (NetworkX's default), scores sum to 1.
- WCC: every vertex labelled with the smallest vertex ID of its weakly connected component.
- k-core: core number with degree = in + out of the stored (cleaned) edges; on a symmetrized edge list
  pass `directed=False` and the degree is the number of distinct neighbours.
- SpMV: y[s] = sum over stored edges s->d of w(s,d) * x[d] (w = 1 without weights).
"""
from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np


def clean_edges(src, dst, weights=None, symmetrize=False):
    """Edges as partitioning stores them: sorted (src, dst), no self-loops, no duplicates (the
    smallest weight kept). Returns (src int64[], dst int64[], weights float32[] or None)."""
    best = {}
    pairs = list(zip((int(s) for s in src), (int(d) for d in dst)))
    ws = [None] * len(pairs) if weights is None else [float(w) for w in weights]
    for (s, d), w in zip(pairs, ws):
        todo = [(s, d), (d, s)] if symmetrize else [(s, d)]
        for a, b in todo:
            if a == b:
                continue
            if (a, b) not in best or (w is not None and w < best[(a, b)]):
                best[(a, b)] = w
    keys = sorted(best)
    s = np.array([k[0] for k in keys], dtype=np.int64)
    d = np.array([k[1] for k in keys], dtype=np.int64)
    w = None if weights is None else np.array([best[k] for k in keys], dtype=np.float32)
    return s, d, w


def _adj(n, src, dst, weights=None):
    adj = [[] for _ in range(n)]
    for i, (s, d) in enumerate(zip(src, dst)):
        adj[int(s)].append((int(d), 1.0 if weights is None else float(weights[i])))
    return adj


def bfs_depths(n, src, dst, source):
    """Depth of every vertex from `source` over directed edges; -1 unreached."""
    adj = _adj(n, src, dst)
    depth = [-1] * n
    depth[source] = 0
    q = deque([source])
    while q:
        v = q.popleft()
        for u, _ in adj[v]:
            if depth[u] < 0:
                depth[u] = depth[v] + 1
                q.append(u)
    return np.array(depth, dtype=np.int32)


def msbfs_depths(n, src, dst, sources):
    """int32[len(sources), n]: one BFS per source."""
    out = np.empty((len(sources), n), dtype=np.int32)
    for i, s in enumerate(sources):
        out[i] = bfs_depths(n, src, dst, int(s))
    return out


def closeness(depth_row):
    """Closeness of one source from its depth row (outgoing distances), Wasserman-Faust scaled like
    NetworkX: ((r-1)/(n-1)) * ((r-1)/sum d) with r = vertices reached (source included)."""
    n = len(depth_row)
    reached = [int(d) for d in depth_row if d >= 0]
    r = len(reached)
    total = sum(reached)
    if total == 0 or n <= 1:
        return 0.0
    return ((r - 1) / (n - 1)) * ((r - 1) / total)


def pagerank(n, src, dst, alpha=0.85, tol=1e-14, max_iter=400):
    """Power iteration to (numerically) the fixed point (error shrinks by >= alpha per iteration:
    400 iterations leave < 1e-28); dangling mass spread uniformly.
    p_new[d] = (1-alpha)/n + alpha*dangling/n + alpha * sum over edges s->d of p[s]/outdeg[s]."""
    if n == 0:
        return np.zeros(0)
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    p = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        dangling = p[outdeg == 0].sum()
        new = np.full(n, (1.0 - alpha) / n + alpha * dangling / n)
        new += np.bincount(dst, weights=alpha * p[src] / np.maximum(outdeg[src], 1), minlength=n)
        err = np.abs(new - p).sum()
        p = new
        if err < tol:
            break
    return p


def wcc_labels(n, src, dst):
    """Smallest vertex ID of each weakly connected component (BFS over edges both ways)."""
    und = [[] for _ in range(n)]
    for s, d in zip(src, dst):
        und[int(s)].append(int(d))
        und[int(d)].append(int(s))
    label = [-1] * n
    for v in range(n):             # increasing v: the first unlabelled vertex is its component's min
        if label[v] >= 0:
            continue
        label[v] = v
        q = deque([v])
        while q:
            x = q.popleft()
            for y in und[x]:
                if label[y] < 0:
                    label[y] = v
                    q.append(y)
    return np.array(label, dtype=np.int64)


def core_numbers(n, src, dst, directed=True):
    """Core number by repeated removal of a minimum-degree vertex (Batagelj-Zaversnik idea, written
    with a heap and lazy deletion). directed: degree = in + out of the stored edges; undirected
    (symmetric edge list): degree = number of stored out-edges."""
    nbrs = [[] for _ in range(n)]
    for s, d in zip(src, dst):
        s, d = int(s), int(d)
        nbrs[s].append(d)
        if directed:
            nbrs[d].append(s)
    deg = [len(x) for x in nbrs]
    heap = [(deg[v], v) for v in range(n)]
    heapq.heapify(heap)
    removed = [False] * n
    core = [0] * n
    k = 0
    while heap:
        dv, v = heapq.heappop(heap)
        if removed[v] or dv != deg[v]:
            continue
        k = max(k, dv)
        core[v] = k
        removed[v] = True
        for u in nbrs[v]:
            if not removed[u]:
                deg[u] -= 1
                heapq.heappush(heap, (deg[u], u))
    return np.array(core, dtype=np.int64)


def spmv(n, src, dst, weights, x):
    """y = A x, A[s, d] = weight (1 without weights)."""
    y = [0.0] * n
    for i, (s, d) in enumerate(zip(src, dst)):
        w = 1.0 if weights is None else float(weights[i])
        y[int(s)] += w * float(x[int(d)])
    return np.array(y, dtype=np.float64)


def dijkstra(n, src, dst, weights, source):
    """float64 distances from `source`, inf unreached (weights must be >= 0)."""
    adj = _adj(n, src, dst, weights)
    dist = [math.inf] * n
    dist[source] = 0.0
    heap = [(0.0, source)]
    done = [False] * n
    while heap:
        d, v = heapq.heappop(heap)
        if done[v]:
            continue
        done[v] = True
        for u, w in adj[v]:
            nd = d + w
            if nd < dist[u]:
                dist[u] = nd
                heapq.heappush(heap, (nd, u))
    return np.array(dist, dtype=np.float64)
