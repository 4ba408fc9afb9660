"""NetworkX backend "graphene": NetworkX code runs on graphene_py, out of core.

    import networkx as nx, graphene_py as gp
    G = gp.Graph.open("twitter")          # an on-disk dataset: nx.pagerank(G) dispatches here
    nx.pagerank(G)
    nx.pagerank(H, backend="graphene")    # H an ordinary nx.Graph: converted, then run

Registered through the `networkx.backends` and `networkx.backend_info` entry points (setup.py).
Functions: pagerank, bfs_layers, bfs_edges, single_source_shortest_path_length,
shortest_path_length (one source, unweighted), connected_components, number_connected_components,
weakly_connected_components, number_weakly_connected_components, core_number,
closeness_centrality, single_source_dijkstra_path_length, betweenness_centrality. Each keeps NetworkX's signature,
defaults, errors and return types; results are keyed by the original node labels (dicts for
graphs converted from NetworkX; for on-disk datasets, read-only mappings over the numpy result,
so 4 billion entries are never turned into Python objects). What a function cannot do like
NetworkX (personalization, callable weights, multigraphs...) `can_run` refuses with the reason,
and NetworkX runs it itself. `should_run` declines graphs so small that converting them costs
more than NetworkX itself.

Converting an nx graph writes a scratch dataset (one partition, in-edges for directed graphs,
weights when the function reads them) under a temporary folder removed when the process ends;
it runs in memory. An on-disk dataset runs from SSD. Converting a dataset back to NetworkX (for a
function graphene does not implement) is refused above NX_MAX_EDGES edges instead of silently
building a Python graph of that size.
"""
from __future__ import annotations

import atexit
import inspect
import os
import shutil
import tempfile
from collections.abc import Mapping

import numpy as np

from .errors import GrapheneError
from .graph import Graph

#: Graphs of fewer edges than this run faster in NetworkX itself than converted (should_run).
NX_MIN_EDGES = 20_000
#: Datasets above this many edges are not turned into NetworkX graphs (convert_to_nx refuses).
NX_MAX_EDGES = 5_000_000

FUNCTIONS = (
    "pagerank", "bfs_layers", "bfs_edges", "single_source_shortest_path_length",
    "shortest_path_length", "connected_components", "number_connected_components",
    "weakly_connected_components", "number_weakly_connected_components", "core_number",
    "closeness_centrality", "single_source_dijkstra_path_length", "betweenness_centrality",
)


# -- the backend's graph type ----------------------------------------------------------------------
class NxGraph:
    """A graph this backend works on: a graphene dataset plus the NetworkX node labels of its
    vertex IDs (None: the dataset's own names, graphene_py/names.py: its --labels names, its
    --relabel original IDs, or else the IDs themselves)."""

    __networkx_backend__ = "graphene"

    def __init__(self, graph: Graph, labels=None, directed=None, self_loops=0, weight_attr=None,
                 in_memory=False, scratch=None):
        self.graph = graph
        self.labels = labels
        self.directed = graph.directed if directed is None else directed
        self.self_loops = self_loops
        self.weight_attr = weight_attr
        self.in_memory = in_memory
        self.scratch = scratch
        self._index = None
        self._names = False
        self._reversed = None

    # the bits of nx.Graph's interface that dispatch and users look at
    def is_directed(self):
        return self.directed

    def is_multigraph(self):
        return False

    def number_of_nodes(self):
        return self.graph.num_vertices

    def __len__(self):
        return self.graph.num_vertices

    def number_of_edges(self):
        m = self.graph.num_edges
        return m if self.directed else m // 2

    def names(self):
        """The dataset's own vertex names (None: IDs), when no NetworkX labels were given."""
        if self._names is False:
            self._names = self.graph.vertex_names()
        return self._names

    def label(self, v: int):
        if self.labels is None:
            return int(v) if self.names() is None else self.names().name_of(int(v))
        return self.labels[v]

    def id_of(self, node) -> int:
        """The vertex ID of a NetworkX node (KeyError-like nx.NodeNotFound when absent)."""
        import networkx as nx
        if self.labels is not None:
            if self._index is None:
                self._index = {x: i for i, x in enumerate(self.labels)}
            if node in self._index:
                return self._index[node]
        elif self.names() is not None:
            if self.names().kind == "label" and isinstance(node, str) or \
                    self.names().kind != "label" and isinstance(node, (int, np.integer)):
                try:
                    return self.names().id_of(node)
                except GrapheneError:
                    pass
        elif isinstance(node, (int, np.integer)) and not isinstance(node, bool) and \
                0 <= int(node) < self.graph.num_vertices:
            return int(node)
        raise nx.NodeNotFound(f"Node {node} not in G")

    def keyed(self, values, keep=None, cast=float):
        """{label: value} of every vertex (or those with keep true)."""
        ids = np.arange(len(values)) if keep is None else np.flatnonzero(keep)
        if self.labels is not None:
            return {self.labels[i]: cast(values[i]) for i in ids}
        return LabelMap(self, values, ids, cast)

    def reversed_graph(self):
        """A scratch dataset of the reversed edges (closeness on directed graphs uses in-distances)."""
        if self._reversed is None:
            s, d = self.graph.edges("out")
            self._reversed = _scratch_dataset(d, s, None, self.graph.num_vertices, True)
        return self._reversed

    def __repr__(self):
        return f"graphene NxGraph({self.graph!r})"


class LabelMap(Mapping):
    """A read-only mapping {node label: value} over a numpy result (no Python object per vertex
    until one is asked for)."""

    def __init__(self, g: NxGraph, values, ids, cast):
        self._g, self._v, self._ids, self._cast = g, values, ids, cast

    def __getitem__(self, node):
        try:
            i = self._g.id_of(node)
        except Exception:
            raise KeyError(node) from None
        if len(self._ids) != len(self._v) and not np.isin(i, self._ids):
            raise KeyError(node)
        return self._cast(self._v[i])

    def __iter__(self):
        for i in self._ids:
            yield self._g.label(int(i))

    def __len__(self):
        return len(self._ids)

    def __repr__(self):
        return f"LabelMap({len(self)} vertices)"


# -- conversion ------------------------------------------------------------------------------------
_SCRATCH = []


def _cleanup():
    for d in _SCRATCH:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_cleanup)


def _scratch_dataset(src, dst, weights, n, directed):
    from .partition import partition_arrays
    root = tempfile.mkdtemp(prefix="graphene-nx-")
    _SCRATCH.append(root)
    disk = os.path.join(root, "d0")
    os.mkdir(disk)
    return partition_arrays(np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64),
                            weights=weights, num_vertices=n, disks=[disk], name="nx", rows=1,
                            cols=1, symmetrize=not directed, drop_self_loops=False,
                            in_edges=directed, register=False, durable=False)


def convert_from_nx(graph, *, edge_attrs=None, node_attrs=None, preserve_edge_attrs=False,
                    preserve_node_attrs=False, preserve_graph_attrs=False, name=None,
                    graph_name=None):
    """An nx.Graph/DiGraph -> NxGraph (a scratch dataset run in memory)."""
    if isinstance(graph, (NxGraph, Graph)):
        return _view(graph)
    if graph.is_multigraph():
        raise NotImplementedError("graphene: multigraphs are not supported")
    labels = list(graph)
    n = len(labels)
    index = {x: i for i, x in enumerate(labels)}
    m = graph.number_of_edges()
    src = np.empty(m, dtype=np.int64)
    dst = np.empty(m, dtype=np.int64)
    wattr, wdefault = None, 1
    if edge_attrs:
        wattr, wdefault = next(iter(edge_attrs.items()))
    w = np.empty(m, dtype=np.float32) if wattr is not None else None
    loops = 0
    for k, (u, v, data) in enumerate(graph.edges(data=True)):
        src[k] = index[u]
        dst[k] = index[v]
        loops += u == v
        if w is not None:
            x = data.get(wattr, wdefault)
            w[k] = 1.0 if x is None else x
    if w is not None and (not np.all(np.isfinite(w)) or (m and np.all(w == 1.0))):
        if not np.all(np.isfinite(w)):
            raise NotImplementedError(f"graphene: non-finite {wattr!r} edge attributes")
        w = None            # every weight 1: the unweighted dataset is the same graph
    g = _scratch_dataset(src, dst, w, n, graph.is_directed())
    return NxGraph(g, labels=labels, directed=graph.is_directed(), self_loops=int(loops),
                   weight_attr=wattr if w is not None else None, in_memory=True,
                   scratch=g.path)


def convert_to_nx(obj, *, name=None):
    """Results pass through; a dataset becomes an nx graph only up to NX_MAX_EDGES edges."""
    if isinstance(obj, (NxGraph, Graph)):
        g = _view(obj)
        if g.graph.num_edges > NX_MAX_EDGES:
            raise NotImplementedError(
                f"graphene: the dataset {g.graph.name!r} has {g.graph.num_edges:,} edges; it is "
                f"not turned into a NetworkX graph above {NX_MAX_EDGES:,} (run the function "
                f"with graphene, or raise graphene_py.nx_backend.NX_MAX_EDGES)")
        import networkx as nx
        s, d = g.graph.edges("out")
        H = nx.DiGraph() if g.directed else nx.Graph()
        H.add_nodes_from(g.label(v) for v in range(g.graph.num_vertices))
        H.add_edges_from((g.label(a), g.label(b)) for a, b in zip(s.tolist(), d.tolist()))
        return H
    if isinstance(obj, LabelMap):
        return dict(obj)
    return obj


def _view(G) -> NxGraph:
    if isinstance(G, NxGraph):
        return G
    if isinstance(G, Graph):
        return NxGraph(G)
    raise TypeError(f"graphene backend: not a graphene graph: {type(G).__name__}")


# -- can_run / should_run ------------------------------------------------------------------------------
def _bound(name, args, kwargs):
    import networkx as nx
    sig = inspect.signature(getattr(nx, name))
    b = sig.bind(*args, **kwargs)
    b.apply_defaults()
    return b.arguments


def _is_graph(G):
    return hasattr(G, "is_directed")


def can_run(name, args, kwargs):
    """True, or the reason graphene cannot run `name` with these arguments like NetworkX."""
    if name not in FUNCTIONS:
        return f"graphene does not implement {name}"
    try:
        a = _bound(name, args, kwargs)
    except TypeError as e:
        return str(e)
    G = a.get("G")
    if G is not None and _is_graph(G) and G.is_multigraph():
        return "multigraphs are not supported"
    if name == "pagerank":
        for k in ("personalization", "nstart", "dangling"):
            if a.get(k) is not None:
                return f"{k} is not supported"
        try:
            alpha = float(a.get("alpha", 0.85))
        except (TypeError, ValueError):
            return f"alpha {a.get('alpha')!r} is not a number"
        if not 0.0 < alpha < 1.0:       # NetworkX iterates with it all the same; graphene refuses
            return f"alpha {alpha:g} is outside (0, 1)"
        if callable(a.get("weight")):
            return "a callable weight is not supported"
        if isinstance(G, (NxGraph, Graph)):
            return True
        wt = a.get("weight")
        if wt is not None and any(d.get(wt, 1) != 1 for _, _, d in G.edges(data=True)):
            return "weighted PageRank (edge weights other than 1) is not supported"
        return True
    if name == "shortest_path_length":
        if a.get("source") is None or a.get("target") is not None or a.get("weight") is not None:
            return "only one source, no target and no weight (single-source BFS depths)"
        return True
    if name == "closeness_centrality":
        if a.get("distance") is not None:
            return "distance (weighted closeness) is not supported"
        return True
    if name == "single_source_dijkstra_path_length":
        wt = a.get("weight")
        if callable(wt):
            return "a callable weight is not supported"
        if not isinstance(G, (NxGraph, Graph)):
            if any(d.get(wt, 1) < 0 for _, _, d in G.edges(data=True)):
                return "negative weights"
        return True
    if name == "betweenness_centrality":
        if a.get("weight") is not None:
            return "weighted betweenness is not supported"
        return True
    if name == "bfs_edges":
        if a.get("sort_neighbors") is not None or a.get("reverse"):
            return "sort_neighbors and reverse are not supported"
    return True


def should_run(name, args, kwargs):
    """Decline graphs so small that converting them costs more than NetworkX itself."""
    try:
        G = _bound(name, args, kwargs).get("G")
    except TypeError:
        return True
    if isinstance(G, (NxGraph, Graph)):
        return True
    if G is not None and _is_graph(G) and G.number_of_edges() < NX_MIN_EDGES:
        return f"the graph has fewer than {NX_MIN_EDGES:,} edges: NetworkX is faster"
    return True


# -- the functions ------------------------------------------------------------------------------------
def _runtime(g: NxGraph) -> dict:
    return {"in_memory": True} if g.in_memory else {}


def _bfs_depth(g: NxGraph, src: int) -> np.ndarray:
    from .algos import registry
    return registry.dispatch("bfs", g.graph, src=int(src), **_runtime(g)).depth


def _multi_depth(g: NxGraph, ids) -> np.ndarray:
    """Distance from the nearest of several sources (-1: unreached)."""
    if len(ids) == 1:
        return _bfs_depth(g, ids[0])
    from .algos import registry
    d = np.asarray(registry.dispatch("msbfs", g.graph, sources=list(ids), **_runtime(g)).depths)
    d = np.where(d < 0, np.iinfo(np.int32).max, d).min(axis=0)
    return np.where(d == np.iinfo(np.int32).max, -1, d).astype(np.int32)


def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1e-06, nstart=None,
             weight="weight", dangling=None, *, backend=None, **backend_kwargs):
    import networkx as nx
    g = _view(G)
    n = g.graph.num_vertices
    if n == 0:
        return {}
    if int(max_iter) < 1:
        raise nx.PowerIterationFailedConvergence(max_iter)
    from .algos import registry
    # NetworkX stops when the L1 change is below n * tol; graphene's tolerance is on the L1 change
    r = registry.dispatch("pagerank-pull", g.graph, alpha=float(alpha), tolerance=n * float(tol),
                          max_iter=int(max_iter), **_runtime(g))
    if not r.converged:
        raise nx.PowerIterationFailedConvergence(max_iter)
    return g.keyed(np.asarray(r.scores))


def single_source_shortest_path_length(G, source, cutoff=None, *, backend=None, **kw):
    g = _view(G)
    d = _bfs_depth(g, g.id_of(source))
    keep = d >= 0 if cutoff is None else (d >= 0) & (d <= cutoff)
    return g.keyed(d, keep, int)


def shortest_path_length(G, source=None, target=None, weight=None, method="dijkstra", *,
                         backend=None, **kw):
    return single_source_shortest_path_length(G, source)


def _layers(g: NxGraph, ids):
    """BFS layers as lists of vertex IDs in NetworkX's order: a layer lists its vertices in the
    order they are first reached from the previous layer's (in its order), each vertex's
    neighbours in ID order, which is NetworkX's adjacency order for graphs whose edges were added
    in node order."""
    depth = _multi_depth(g, ids)
    indptr, indices, _ = g.graph.to_csr("out")
    rank = np.full(g.graph.num_vertices, -1, dtype=np.int64)
    layer = list(dict.fromkeys(int(i) for i in ids))
    out = []
    level = 0
    while layer:
        out.append(layer)
        rank[layer] = np.arange(len(layer))
        nxt = []
        seen = set()
        for v in layer:
            for u in indices[indptr[v]:indptr[v + 1]].tolist():
                if depth[u] == level + 1 and u not in seen:
                    seen.add(u)
                    nxt.append(u)
        layer = nxt
        level += 1
    return out


def bfs_layers(G, sources, *, backend=None, **kw):
    g = _view(G)
    import networkx as nx
    try:                                  # NetworkX: one node, or an iterable of nodes
        g.id_of(sources)
        sources = [sources]
    except Exception:  # noqa: BLE001
        pass
    ids = []
    for s in sources:
        try:
            ids.append(g.id_of(s))
        except nx.NodeNotFound:
            raise nx.NetworkXError(f"The node {s} is not in the graph.") from None
    for layer in _layers(g, ids):
        yield [g.label(v) for v in layer]


def bfs_edges(G, source, reverse=False, depth_limit=None, sort_neighbors=None, *, backend=None,
              **kw):
    g = _view(G)
    import networkx as nx
    try:
        s = g.id_of(source)
    except nx.NodeNotFound:               # NetworkX's bfs_edges says this
        raise nx.NetworkXError(f"The node {source} is not in the graph.") from None
    depth = _bfs_depth(g, s)
    indptr, indices, _ = g.graph.to_csr("out")
    limit = np.iinfo(np.int64).max if depth_limit is None else int(depth_limit)
    layer = [s]
    seen = {s}
    level = 0
    while layer and level < limit:
        nxt = []
        for v in layer:
            for u in indices[indptr[v]:indptr[v + 1]].tolist():
                if u not in seen and depth[u] == level + 1:
                    seen.add(u)
                    nxt.append(u)
                    yield g.label(v), g.label(u)
        layer = nxt
        level += 1


def _components(g: NxGraph):
    if g.graph.num_vertices == 0:
        return
    from .algos import registry
    labels = np.asarray(registry.dispatch("wcc", g.graph, **_runtime(g)).labels)
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    for part in np.split(order, cuts):
        if g.labels is not None:
            yield {g.labels[i] for i in part.tolist()}
        elif g.names() is not None:
            yield set(g.names().take(part))
        else:
            yield set(part.tolist())


def connected_components(G, *, backend=None, **kw):
    yield from _components(_view(G))


def weakly_connected_components(G, *, backend=None, **kw):
    yield from _components(_view(G))


def _count_components(g: NxGraph) -> int:
    from .algos import registry
    return int(registry.dispatch("wcc", g.graph, **_runtime(g)).n_components)


def number_connected_components(G, *, backend=None, **kw):
    return _count_components(_view(G))


def number_weakly_connected_components(G, *, backend=None, **kw):
    return _count_components(_view(G))


def core_number(G, *, backend=None, **kw):
    import networkx as nx
    g = _view(G)
    if g.self_loops:
        raise nx.NetworkXNotImplemented(
            "Input graph has self loops which is not permitted; "
            "Consider using G.remove_edges_from(nx.selfloop_edges(G)).")
    from .algos import registry
    core = np.asarray(registry.dispatch("kcore", g.graph, **_runtime(g)).core_number)
    return g.keyed(core, cast=int)


def closeness_centrality(G, u=None, distance=None, wf_improved=True, *, backend=None, **kw):
    from .algos import registry
    g = _view(G)
    n = g.graph.num_vertices
    # NetworkX: directed graphs use the distances *to* each vertex (the reversed graph)
    graph = g.reversed_graph() if g.directed else g.graph
    ids = [g.id_of(u)] if u is not None else list(range(n))
    clo = np.zeros(len(ids))
    for k in range(0, len(ids), 64):
        batch = ids[k:k + 64]
        r = registry.dispatch("msbfs", graph, sources=batch, **_runtime(g))
        d = np.asarray(r.depths)
        reached = (d >= 0).sum(axis=1)
        total = np.where(d > 0, d, 0).sum(axis=1).astype(np.float64)
        c = np.zeros(len(batch))
        ok = total > 0
        c[ok] = (reached[ok] - 1) / total[ok]
        if wf_improved and n > 1:
            c *= (reached - 1) / (n - 1)
        clo[k:k + 64] = c
    if u is not None:
        return float(clo[0])
    return g.keyed(clo)


def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight", *, backend=None,
                                       **kw):
    from .algos import registry
    g = _view(G)
    s = g.id_of(source)
    if g.graph.weighted:
        dist = np.asarray(registry.dispatch("sssp", g.graph, src=s, **_runtime(g)).dist)
    else:
        d = _bfs_depth(g, s).astype(np.float64)
        dist = np.where(d < 0, np.inf, d)
    keep = np.isfinite(dist) if cutoff is None else np.isfinite(dist) & (dist <= cutoff)
    integral = not g.graph.weighted
    return g.keyed(dist, keep, (lambda x: int(x)) if integral else float)


def betweenness_centrality(G, k=None, normalized=True, weight=None, endpoints=False, seed=None, *,
                           backend=None, **kw):
    from .algos import registry
    g = _view(G)
    n = g.graph.num_vertices
    if k is not None and (k > n or k < 0):
        raise ValueError("Sample larger than population or is negative")
    if k == 0:                      # NetworkX divides by the number of sources
        raise ZeroDivisionError("division by zero")
    if k is None or k == n:
        sources = list(range(n))
    else:       # NetworkX samples seed.sample(list(G), k); our vertex IDs follow that order
        sources = seed.sample(range(n), k) if hasattr(seed, "sample") else None
    r = registry.dispatch("bc", g.graph, sources=sources, k=k, seed=seed, normalized=normalized,
                          endpoints=endpoints, **_runtime(g))
    return g.keyed(np.asarray(r.bc))


# -- what NetworkX reads from the entry points ------------------------------------------------------------
class BackendInterface:
    """The `networkx.backends` entry point: the functions, conversion, can_run/should_run."""

    convert_from_nx = staticmethod(convert_from_nx)
    convert_to_nx = staticmethod(convert_to_nx)
    can_run = staticmethod(can_run)
    should_run = staticmethod(should_run)


for _name in FUNCTIONS:
    setattr(BackendInterface, _name, staticmethod(globals()[_name]))
backend = BackendInterface


def info() -> dict:
    """The `networkx.backend_info` entry point."""
    return {
        "backend_name": "graphene",
        "project": "graphene_py",
        "package": "graphene_py",
        "short_summary": "Out-of-core graph analytics from SSDs (Graphene, FAST'17).",
        "functions": {name: {"additional_docs": "Runs out of core on a graphene dataset; a "
                                                "NetworkX graph is converted first."}
                      for name in FUNCTIONS},
        "default_config": {},
    }

