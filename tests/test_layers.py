"""The package's layers import downward only, and no modules import each other in a circle.

Layers (ARCHITECTURE.md), lowest first; a module may import its own layer and the ones below:

    base       errors, config, jit, store, registry, integrity, graph, _uring (the dataset and basics)
    partition  partition/, generate
    io         io/
    gpu        gpu/ (a device library: never algos/)
    iterator   iterator/
    cluster    cluster/ (a backend of the engine contract: never algos/)
    algos      algos/
    front      cli*, nx_backend, the package's __init__ (the Python API facade)

Every import counts, also the ones inside functions (they still make one module depend on another).
"""
from __future__ import annotations

import ast
import os

import pytest

PKG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "graphene_py")
ORDER = ["base", "partition", "io", "gpu", "iterator", "cluster", "algos", "front"]


def layer(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return "front"                                  # graphene_py/__init__.py
    top = parts[1]
    if top in ("partition", "generate"):
        return "partition"
    if top in ("io", "gpu", "iterator", "cluster", "algos"):
        return top
    if top.startswith("cli") or top == "nx_backend":
        return "front"
    return "base"


def modules():
    out = {"graphene_py._uring": None}   # the C extension (csrc/), built or not
    for root, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".so"):             # compiled extensions (graphene_py._uring)
                rel = os.path.relpath(os.path.join(root, f.split(".")[0]), os.path.dirname(PKG))
                out[rel.replace(os.sep, ".")] = None
            if f.endswith(".py"):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, os.path.dirname(PKG))[:-3].replace(os.sep, ".")
                if rel.endswith(".__init__"):
                    rel = rel[: -len(".__init__")]
                out[rel] = path
    return out


def imports_of(mod: str, path: str, known) -> set:
    """graphene_py modules `mod` imports (anywhere in the file)."""
    pkg = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
    found = set()
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from X import y`: the module X.y when y is one, else X itself
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target
                     for a in node.names]
        for n in names:
            while n and n not in known:
                n = n.rsplit(".", 1)[0] if "." in n else ""
            if n and n != mod and n.startswith("graphene_py"):
                found.add(n)
    return found


def graph_of_imports():
    mods = modules()
    return {m: imports_of(m, p, mods) for m, p in mods.items() if p is not None}


def upward(g) -> list:
    bad = []
    for m, deps in g.items():
        for d in deps:
            if d == "graphene_py":         # the facade itself: only front ends may use it
                if layer(m) != "front":
                    bad.append(f"{m} -> {d}")
            elif ORDER.index(layer(d)) > ORDER.index(layer(m)):
                bad.append(f"{m} ({layer(m)}) -> {d} ({layer(d)})")
    return sorted(bad)


def cycles(g) -> list:
    # a package __init__ re-exporting its children is no dependency back: drop parent -> child
    edges = {m: {d for d in deps if not d.startswith(m + ".")} for m, deps in g.items()}
    color, stack, found = {}, [], []

    def visit(m):
        color[m] = 1
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if color.get(d) == 1:
                found.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in color:
                visit(d)
        stack.pop()
        color[m] = 2

    for m in sorted(edges):
        if m not in color:
            visit(m)
    return found


def test_layers_only_import_downward():
    bad = upward(graph_of_imports())
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_no_import_cycles():
    found = cycles(graph_of_imports())
    assert not found, "import cycles:\n" + "\n".join(found)


def test_the_checks_can_fail():
    g = graph_of_imports()
    assert "graphene_py.io.bitmap" in g and "graphene_py.store" in g
    up = dict(g, **{"graphene_py.io.bitmap": g["graphene_py.io.bitmap"] | {"graphene_py.algos.bfs"}})
    assert upward(up) == ["graphene_py.io.bitmap (io) -> graphene_py.algos.bfs (algos)"]
    loop = dict(g, **{"graphene_py.store": g["graphene_py.store"] | {"graphene_py.graph"}})
    assert any("graphene_py.graph -> graphene_py.store -> graphene_py.graph" in c or
               "graphene_py.store -> graphene_py.graph -> graphene_py.store" in c
               for c in cycles(loop))


def test_every_gpu_entry_imports_resolve_without_a_gpu(tmp_path):
    # each algorithm's run_gpu imports the device library lazily: without CuPy the first import
    # that fails must be CuPy's own, not one of ours (a relative import broken by a move into a
    # package shows up only on a GPU machine otherwise)
    import importlib.util

    import numpy as np
    import pytest

    from graphene_py.algos import registry
    from graphene_py.partition import partition_arrays
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: tests/test_gpu.py runs the GPU entries")
    g = partition_arrays(np.array([0, 1]), np.array([1, 2]), num_vertices=3, disks=[str(tmp_path)],
                         name="t", register=False, durable=False)
    entries = [n for n in registry.names() if hasattr(registry.module(n), "run_gpu")]
    assert len(entries) >= 6
    for name in entries:
        with pytest.raises(ModuleNotFoundError) as e:
            registry.module(name).run_gpu(g, **registry.entry(name).fixed)
        assert e.value.name.split(".")[0] == "cupy", (name, e.value.name)
