"""Built-in algorithms (Graphene §4.7). One module per algorithm, each opening with a short block: what
it computes, what it returns, the algorithm and its paper (GAPBS style).

An algorithm is one module plus one line in registry.ENTRIES; registry.py says what the module
provides (run, optional run_gpu, verify, CLI_OPTIONS) and `dispatch` is the one entry point of the
CLI and the Python API. Runtime options go to IoIterator: engine, threads, queue_depth, max_gap,
max_io, buffer_mb, block_size, direct, check, progress (a callable taking one per-superstep stats
dict).

Result objects (graphene_py.algos.common.Result subclasses) hold numpy arrays named as in
shared/design/CONVENTIONS.md (BFS: parent int64 / depth int32 / n_reached; SSSP: dist float64 inf;
PageRank: scores float64 summing to 1, iterations, error; WCC: labels (min vertex ID), n_components;
k-core: core_number (+ in_k_core with k); APSP/MSBFS: depths per source or closeness; SpMV: y float64),
plus `supersteps` (list of per-superstep stats dicts) and `seconds`.
"""
from .registry import ENTRIES, dispatch, module as load, names  # noqa: F401
