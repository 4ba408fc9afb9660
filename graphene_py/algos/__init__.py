"""Built-in algorithms (Graphene §4.7). One module per algorithm, each opening with a short block: what
it computes, what it returns, the algorithm and its paper (GAPBS style).

Every algorithm module `graphene_py/algos/<name>.py` provides:

    run(graph, *, device="cpu", in_memory=False, <algorithm options>, **runtime) -> Result
        runtime options go to IoIterator: engine, threads, queue_depth, max_gap, max_io, buffer_mb,
        block_size, direct, progress (callable taking one per-superstep stats dict, or None)
    verify(graph, result, **same_options) -> list[str]
        an independent serial check (GAPBS-style verifier); empty list = PASS
    CLI_OPTIONS: list of click.Option objects for `graphene run <name>` (e.g. --src, --k, --sources)

Result objects (graphene_py.algos.common.Result subclasses) hold numpy arrays named as in
shared/design/CONVENTIONS.md (BFS: parent int64 / depth int32 / n_reached; SSSP: dist float64 inf;
PageRank: scores float64 summing to 1, iterations, error; WCC: labels (min vertex ID), n_components;
k-core: core_number (+ in_k_core with k); APSP/MSBFS: depths per source or closeness; SpMV: y float64),
plus `supersteps` (list of per-superstep stats dicts) and `seconds`.
"""
import importlib

#: name -> module. `graphene run NAME` and graphene_py.<name>(...) dispatch through this table.
ALGORITHMS = {
    "bfs": "graphene_py.algos.bfs",
    "pagerank": "graphene_py.algos.pagerank",      # delta PageRank (push), Graphene/Blaze style
    "pagerank-pull": "graphene_py.algos.pagerank",  # classic pull PageRank (GAPBS stop rule)
    "wcc": "graphene_py.algos.wcc",
    "kcore": "graphene_py.algos.kcore",
    "apsp": "graphene_py.algos.msbfs",
    "msbfs": "graphene_py.algos.msbfs",
    "spmv": "graphene_py.algos.spmv",
    "sssp": "graphene_py.algos.sssp",
}


def load(name: str):
    """The module implementing algorithm `name` (ImportError if it has not been built)."""
    try:
        mod = ALGORITHMS[name]
    except KeyError:
        raise KeyError(f"unknown algorithm {name!r}; choose from {', '.join(sorted(ALGORITHMS))}")
    return importlib.import_module(mod)
