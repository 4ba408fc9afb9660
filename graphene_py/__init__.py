"""graphene_py: graph analytics on SSDs with fine-grained, merged io_uring IO (Graphene, FAST'17).

    import graphene_py as gp
    g = gp.partition("web.el", ["/mnt/ssd0", "/mnt/ssd1"], symmetrize=True)   # -> Graph
    g = gp.Graph.open("web")                     # a registered name or a dataset folder
    r = gp.bfs(g, src=0)                         # BFSResult: parent, depth, n_reached, supersteps
    r = gp.pagerank(g)                           # delta PageRank; gp.pagerank(g, variant="pull")
    gp.wcc(g); gp.kcore(g, k=17); gp.apsp(g, num_sources=32); gp.spmv(g); gp.sssp(g, src=5)
    it = gp.IoIterator(g)                        # custom algorithms (see graphene_py.iterator)

Every algorithm function takes the runtime options of `graphene run` as keywords (threads, engine,
queue_depth, max_gap, max_io, buffer_mb, in_memory, device, progress) and returns a Result whose
numpy arrays follow the encodings in the README's "Results" section. Heavy modules (numba kernels)
load on first use, so `import graphene_py` stays cheap.
"""
__version__ = "0.1.0"

from .errors import DatasetError, GrapheneError, InputFormatError  # noqa: E402,F401
from .graph import Graph  # noqa: E402,F401

#: graphene_py.<name>(graph, **options) -> algos/<module>.run(graph, **options, **fixed)
_ALGORITHMS = {
    "bfs": ("bfs", {}),
    "pagerank": ("pagerank", {}),
    "wcc": ("wcc", {}),
    "kcore": ("kcore", {}),
    "msbfs": ("msbfs", {}),
    "apsp": ("msbfs", {}),
    "spmv": ("spmv", {}),
    "sssp": ("sssp", {}),
}


def _algorithm(name):
    import importlib
    from .algos import common
    modname, fixed = _ALGORITHMS[name]
    mod = importlib.import_module(f"graphene_py.algos.{modname}")

    def run(graph, **options):
        kw = dict(fixed)
        kw.update(options)
        device = kw.pop("device", "cpu")
        res = common.gpu_dispatch(name, graph, device, **kw)   # "gpu", or "auto" with a GPU
        if res is None:
            res = mod.run(graph, device=device, **kw)
        return res

    run.__name__ = name
    run.__qualname__ = name
    run.__doc__ = mod.__doc__
    return run


def __getattr__(name):
    if name in _ALGORITHMS:
        fn = _algorithm(name)
        globals()[name] = fn
        return fn
    if name in ("IoIterator", "Frontier"):
        from . import iterator
        return getattr(iterator, name)
    if name in ("partition", "partition_arrays"):
        import importlib
        pkg = importlib.import_module("graphene_py.partition")
        return pkg if name == "partition" else pkg.partition_arrays
    raise AttributeError(f"module 'graphene_py' has no attribute {name!r}")


__all__ = ["Graph", "GrapheneError", "InputFormatError", "DatasetError", "IoIterator", "Frontier",
           "partition", "partition_arrays", *_ALGORITHMS]
