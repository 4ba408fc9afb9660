"""Plain serial references the algorithms' verifiers (`graphene run -v`) compare against: simple
enough to be obviously right, independent of the engine, the partitions and the threads."""
from __future__ import annotations

import numpy as np
from numba import njit


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
