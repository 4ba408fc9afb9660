"""graphene_py: graph analytics on SSDs with fine-grained, merged io_uring IO (Graphene, FAST'17).

    import graphene_py as gp
    g = gp.partition("web.el", ["/mnt/ssd0", "/mnt/ssd1"], symmetrize=True)   # -> Graph
    g = gp.Graph.open("web")                     # a registered name or a dataset folder
    r = gp.bfs(g, src=0)                         # BFSResult: parent, depth, n_reached, supersteps
    r = gp.pagerank(g)                           # delta PageRank; gp.pagerank(g, variant="pull")
    gp.wcc(g); gp.kcore(g, k=17); gp.apsp(g, num_sources=32); gp.spmv(g); gp.sssp(g, src=5)
    it = gp.IoIterator(g)                        # custom algorithms (see graphene_py.iterator)
    gp.bfs("web", src=0, cluster="auto")         # on a Ray cluster (graphene cluster distribute)

Every algorithm function takes the runtime options of `graphene run` as keywords (threads, engine,
queue_depth, max_gap, max_io, buffer_mb, in_memory, device, progress) and returns a Result whose
numpy arrays follow the encodings in the README's "Results" section. Heavy modules (numba kernels)
load on first use, so `import graphene_py` stays cheap.
"""
__version__ = "0.1.0"

from .errors import DatasetError, GrapheneError, InputFormatError  # noqa: E402,F401

# Graph (graphene_py.graph) loads on first use, like the rest: importing this package imports no
# numpy, so the `graphene` command (cli.py) can still set numpy's BLAS threads before numpy loads.

#: graphene_py.<name>(graph, **options): every algorithm of algos/registry.py, "-" spelled "_"
#: (graphene_py.pagerank_pull); these are the built-in ones
_API_NAMES = ("bfs", "pagerank", "pagerank_pull", "wcc", "kcore", "msbfs", "apsp", "spmv", "sssp",
              "bc")


def _algorithm(api_name):
    name = api_name.replace("_", "-")

    def run(graph, cluster=None, **options):
        from .algos import registry
        if cluster is not None:         # the dataset of that name on a Ray cluster
            from .cluster import on_cluster
            graph = on_cluster(graph, cluster)
        return registry.dispatch(name, graph, **options)

    run.__name__ = api_name
    run.__qualname__ = api_name
    run.__doc__ = f"Run {name} on graph (graphene_py.algos.registry.dispatch; options as keywords)."
    return run


def __getattr__(name):
    from .algos import registry
    if name in _API_NAMES or name.replace("_", "-") in registry.ENTRIES:
        fn = _algorithm(name)
        globals()[name] = fn
        return fn
    if name == "Graph":
        from .graph import Graph
        globals()["Graph"] = Graph
        return Graph
    if name == "Cluster":
        from .cluster import Cluster
        return Cluster
    if name in ("IoIterator", "Frontier"):
        from . import iterator
        return getattr(iterator, name)
    if name in ("partition", "partition_arrays"):
        import importlib
        pkg = importlib.import_module("graphene_py.partition")
        return pkg if name == "partition" else pkg.partition_arrays
    raise AttributeError(f"module 'graphene_py' has no attribute {name!r}")


__all__ = ["Graph", "GrapheneError", "InputFormatError", "DatasetError", "IoIterator", "Frontier",
           "Cluster",
           "partition", "partition_arrays", *_API_NAMES]
