"""IoIterator: the Graphene IO-request-centric iterator (§4.3). See core.py.

Compiled path (what the built-in algorithms use; user functions are numba @njit):

    from graphene_py.iterator import IoIterator, Frontier

    @njit
    def is_active(v, state):                 # v: int64 global vertex ID
        return True

    @njit
    def compute(v, nbrs, wts, tid, state):   # nbrs: (a chunk of) v's neighbours; tid: thread index
        deg = state[0]
        deg[tid, v] += nbrs.shape[0]         # per-thread rows: no atomics, no lost updates

    with IoIterator(graph, "out", threads=2) as it:
        deg = np.zeros((it.threads, graph.num_vertices), np.int64)
        stats = it.run(is_active, compute, (deg,), Frontier.all(graph.num_vertices))
        out_degree = deg.sum(0)

Table 4.1 Python API (plain Python, slow; same semantics):

    it.start(Frontier.from_queue(ids, n))
    while it.has_more():
        block = it.next()                    # one extent, in memory
        while (v := it.current()) >= 0:      # or: for v in block:
            nbrs = it.get_neighbors(v)       # int64, clipped to the block

atomics (atomic_cas / atomic_add / atomic_min / atomic_or / atomic_fadd / atomic_add_acq_rel) are
LLVM atomics for @njit code; prefetch(arr, i) asks for arr[i] ahead of its read (a kernel that
reads state[nbrs[i]] overlaps those random reads by asking a few dozen entries ahead; a kernel
marked kernels.looks_ahead is given the IDs 32 entries on, in place of the weights, to do so as
it goes).
"""
from .atomics import (atomic_add, atomic_add_acq_rel, atomic_cas, atomic_fadd,  # noqa: F401
                      atomic_min, atomic_or, prefetch)
from .core import STAT_KEYS, Block, IoIterator, drop_memory_cache  # noqa: F401
from .frontier import Frontier  # noqa: F401
