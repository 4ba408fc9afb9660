"""What both PageRank variants share: the power iteration's superstep kernels (pull: sum the
contributions over in-lists; push: scatter shares along out-lists) and small helpers."""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...iterator.atomics import atomic_fadd as _fadd
from ...iterator.kernels import gather_sum, looks_ahead
from ...iterator.edgemap import Update
from ...iterator.memory import track


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _pushing(v, state):
    """Delta PageRank's pushes: the vertices with a share to pass on (state[0][v] != 0)."""
    return state[0][v] != 0.0


@njit(cache=True)
def _push(v, nbrs, wts, tid, state):
    """acc[tid, u] += val[v] / outdeg[v] for every out-neighbour u (alpha applied afterwards)."""
    val, outdeg, acc = state
    x = val[v] / outdeg[v]
    row = acc[tid]
    for i in range(len(nbrs)):
        row[np.int64(nbrs[i])] += x


@njit(inline="always")
def _sum_block(a, m):
    """a[0] + ... + a[m - 1] in four running sums: a pass over the vertices adds each vertex's
    share into a block's row and sums the row after its loop. A float sum inside the loop keeps
    the compiler from vectorizing it (it may not reorder the adds), and one running sum waits
    on each add's latency in turn."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    i = 0
    while i + 4 <= m:
        s0 += a[i]
        s1 += a[i + 1]
        s2 += a[i + 2]
        s3 += a[i + 3]
        i += 4
    while i < m:
        s0 += a[i]
        i += 1
    return (s0 + s1) + (s2 + s3)


@looks_ahead
@njit(cache=True)
def _pull(v, nbrs, wts, tid, state):
    """acc[0, v] += sum of contrib[u] over this chunk of v's in-neighbours: one atomic add per
    chunk (a list may span partitions and threads), so pulling needs one row of sums, not one per
    thread. wts: the IDs AHEAD entries on (looks_ahead; PageRank's supersteps are unweighted),
    whose contributions are asked for as the sum goes."""
    contrib, acc = state
    _fadd(acc[0], v, gather_sum(contrib, nbrs, wts))


#: a power iteration's superstep: pull (acc[0, v] += contributions of v's in-neighbours) or push
#: (acc[tid, u] += share of v); the sums of several pieces add up
PULL = Update(_always, _pull, combine="sum", writes=(1,), reads=0)
PUSH = Update(_always, _push, combine="sum", writes=(2,))


def _note(steps, progress, st, it, err, active):
    st = dict(st)
    st.update(iteration=it, error=float(err), active=int(active))
    steps.append(st)
    if progress is not None:
        progress(st)


def _moves(handoff, st, it, err, tol, max_iter) -> bool:
    """Whether a run under `--device auto` moves to the GPU after iteration `it` (gpu/handoff.py),
    asked only when the CPU would go on (err >= tol, it < max_iter); marks the iteration's stats
    st, before they are reported, with where it ran and why."""
    if handoff is None:
        return False
    handoff.mark(st)
    return err >= tol and it < max_iter and handoff.after(st, it, err)


def _out_degrees(graph):
    outdeg = track("out-degrees (float64)", graph.degrees("out").astype(np.float64))
    return outdeg, track("dangling flags", outdeg == 0)


def _normalized(p):
    """p / sum(p), in place (numpy's pairwise sum: exact to rounding; no second n-array)."""
    p /= p.sum()
    return p


def _ranges(n, threads):
    """Vertex range bounds of a pass split over the compute threads: multiples of 16 (a float32
    row's 64-byte line), so no two threads write one cache line."""
    b = (np.arange(threads + 1, dtype=np.int64) * n // threads) & ~np.int64(15)
    b[-1] = n
    return b


def _on_ranges(em, n, kernel, *args):
    """kernel(*args, lo, hi, out) over the compute threads' vertex ranges (_ranges) on em's
    threads; returns the rows `out` of the threads (float64, 3 each) summed."""
    b = _ranges(n, max(1, em.threads))
    parts = np.zeros((len(b) - 1, 3))
    em.on_threads(lambda t: kernel(*args, b[t], b[t + 1], parts[t]))
    return parts.sum(axis=0)
