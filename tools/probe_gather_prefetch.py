"""Pull PageRank's gather over kron22's lists in RAM, two threads, in tight numba loops: no
prefetch; the engine's way (each list's IDs asked for 32 entries ahead before the list is summed:
a second pass over the IDs); and asking for the entry 32 ahead inside the summing loop, one ID at
a time (what GAPBS's compiled loop gets from the hardware and its compiler). Steady state: 5 calls
each after one untimed, medians.

    .venv/bin/python tools/probe_gather_prefetch.py        # needs the kron22 dataset
"""
import time, numpy as np, numba as nb
from numba import njit, prange
from graphene_py.graph import Graph
from graphene_py.jit import prefetch
g = Graph.open("kron22")
ptr, idx, _ = g.to_csr("out", index_dtype=np.int32)
n = g.num_vertices
contrib = np.random.rand(n).astype(np.float32)
out = np.zeros(n)
nb.set_num_threads(2)

@njit(parallel=True, nogil=True)
def pull_plain(ptr, idx, contrib, out, nchunks):
    n = ptr.shape[0] - 1
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        a = c * step; b = min(n, a + step)
        for v in range(a, b):
            s = 0.0
            for j in range(ptr[v], ptr[v + 1]):
                s += contrib[idx[j]]
            out[v] = s

@njit(parallel=True, nogil=True)
def pull_pf(ptr, idx, contrib, out, nchunks, ahead):
    n = ptr.shape[0] - 1
    m = idx.shape[0]
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        a = c * step; b = min(n, a + step)
        for v in range(a, b):
            s = 0.0
            e = ptr[v + 1]
            q1 = min(e + ahead, m)
            for q in range(ptr[v] + ahead, q1):
                prefetch(contrib, idx[q])
            for j in range(ptr[v], e):
                s += contrib[idx[j]]
            out[v] = s

@njit(parallel=True, nogil=True, fastmath=True)
def pull_pf4(ptr, idx, contrib, out, nchunks, ahead):
    n = ptr.shape[0] - 1
    m = idx.shape[0]
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        a = c * step; b = min(n, a + step)
        for v in range(a, b):
            e = ptr[v + 1]
            j = ptr[v]
            q1 = min(e + ahead, m)
            for q in range(j + ahead, q1):
                prefetch(contrib, idx[q])
            s0 = np.float32(0); s1 = np.float32(0); s2 = np.float32(0); s3 = np.float32(0)
            while j + 4 <= e:
                s0 += contrib[idx[j]]; s1 += contrib[idx[j + 1]]
                s2 += contrib[idx[j + 2]]; s3 += contrib[idx[j + 3]]
                j += 4
            while j < e:
                s0 += contrib[idx[j]]
                j += 1
            out[v] = (s0 + s1) + (s2 + s3)

@njit(parallel=True, nogil=True)
def pull_pf_stream(ptr, idx, contrib, out, nchunks, ahead):
    # one prefetch per edge in the same loop (no second pass over the IDs)
    n = ptr.shape[0] - 1
    m = idx.shape[0]
    step = (n + nchunks - 1) // nchunks
    for c in prange(nchunks):
        a = c * step; b = min(n, a + step)
        j = ptr[a]
        for v in range(a, b):
            e = ptr[v + 1]
            s = 0.0
            while j < e:
                if j + ahead < m:
                    prefetch(contrib, idx[j + ahead])
                s += contrib[idx[j]]
                j += 1
            out[v] = s

VARIANTS = ((pull_plain, ()), (pull_pf, (32,)), (pull_pf, (16,)), (pull_pf, (64,)),
            (pull_pf4, (32,)), (pull_pf_stream, (32,)))
for f, args in VARIANTS:
    f(ptr, idx, contrib, out, 64, *args)           # (compiled, untimed)
    ts = []
    for r in range(5):
        t = time.perf_counter()
        f(ptr, idx, contrib, out, 64, *args)
        ts.append(time.perf_counter() - t)
    print(f.__name__, args, "median %.3f" % sorted(ts)[2], ["%.3f" % x for x in ts])
