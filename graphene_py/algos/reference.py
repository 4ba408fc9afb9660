"""Plain serial references the algorithms' verifiers (`graphene run -v`) compare against: simple
enough to be obviously right, independent of the engine, the partitions and the threads."""
from __future__ import annotations

import numpy as np
from ..jit import njit


@njit(cache=True)
def serial_bfs_depth(indptr, indices, src, n):
    """Depth of every vertex from src by a plain serial queue BFS over a CSR (-1: unreached): the
    independent reference the BFS and multi-source BFS verifiers compare against."""
    depth = np.full(n, -1, dtype=np.int32)
    q = np.empty(n, dtype=np.int64)
    depth[src] = 0
    q[0] = src
    head, tail = 0, 1
    while head < tail:
        v = q[head]
        head += 1
        for j in range(indptr[v], indptr[v + 1]):
            u = indices[j]
            if depth[u] < 0:
                depth[u] = depth[v] + 1
                q[tail] = u
                tail += 1
    return depth


@njit(cache=True)
def serial_brandes(indptr, indices, sources, n, endpoints):
    """Unnormalized betweenness (ordered pairs) from `sources` by Brandes' algorithm, one plain
    queue BFS and one stack pass per source."""
    bc = np.zeros(n)
    depth = np.full(n, -1, dtype=np.int64)
    sigma = np.zeros(n)
    delta = np.zeros(n)
    order = np.empty(n, dtype=np.int64)
    for s in sources:
        depth[:] = -1
        sigma[:] = 0.0
        delta[:] = 0.0
        depth[s] = 0
        sigma[s] = 1.0
        order[0] = s
        head, tail = 0, 1
        while head < tail:
            v = order[head]
            head += 1
            for j in range(indptr[v], indptr[v + 1]):
                u = indices[j]
                if depth[u] < 0:
                    depth[u] = depth[v] + 1
                    order[tail] = u
                    tail += 1
                if depth[u] == depth[v] + 1:
                    sigma[u] += sigma[v]
        for k in range(tail - 1, -1, -1):
            w = order[k]
            for j in range(indptr[w], indptr[w + 1]):
                u = indices[j]
                if depth[u] == depth[w] + 1:
                    delta[w] += sigma[w] / sigma[u] * (1.0 + delta[u])
            if w != s:
                bc[w] += delta[w] + (1.0 if endpoints else 0.0)
        if endpoints:
            bc[s] += tail - 1
    return bc
