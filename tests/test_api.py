"""The public Python API of the package root: graphene_py.partition / partition_arrays, the algorithm
functions, IoIterator and Frontier, and the README's custom-algorithm example (run as written)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import graphene_py as gp
from graphene_py.algos import bfs as bfs_mod
from graphene_py.algos import msbfs as msbfs_mod
from tests import graphs

from . import naive

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _disks(tmp_path, k=2):
    out = []
    for i in range(k):
        d = tmp_path / f"disk{i}"
        d.mkdir(exist_ok=True)
        out.append(str(d))
    return out


def test_partition_is_callable_before_and_after_the_subpackage_import(tmp_path):
    el = tmp_path / "g.el"
    el.write_text("# a comment\n0 1\n1 2\n2 0\n2 3\n")
    g = gp.partition(str(el), _disks(tmp_path), name="api1", quiet=True, register=False)
    assert isinstance(g, gp.Graph) and g.num_vertices == 4 and g.num_edges == 4
    import graphene_py.partition  # noqa: F401  (rebinds the package attribute to the subpackage)
    g2 = gp.partition(str(el), _disks(tmp_path), name="api2", quiet=True, symmetrize=True,
                      register=False)
    assert g2.num_edges == 8 and not g2.directed
    s, d = g2.edges("out")
    assert sorted(zip(s.tolist(), d.tolist())) == sorted(
        [(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2), (2, 3), (3, 2)])


def test_algorithm_functions_forward_to_the_modules(tmp_path):
    rng = np.random.default_rng(3)
    n = 500
    src, dst = rng.integers(0, n, 3000), rng.integers(0, n, 3000)
    g = gp.partition_arrays(src, dst, num_vertices=n, disks=_disks(tmp_path), name="api3",
                            rows=2, cols=2, in_edges=True, register=False)
    s, d = g.edges("out")
    r = gp.bfs(g, src=int(s[0]), threads=2)
    ref = naive.bfs_depths(n, s, d, int(s[0]))
    assert isinstance(r, bfs_mod.BFSResult) and np.array_equal(r.depth, ref)
    a = gp.apsp(g, sources=[int(s[0]), int(s[1])])
    assert isinstance(a, msbfs_mod.MSBFSResult) and np.array_equal(a.depths[0], ref)
    pr = gp.pagerank(g, variant="pull", tolerance=1e-10, max_iter=200)
    ref_pr = naive.pagerank(n, s, d, 0.85)
    assert np.abs(pr.scores - ref_pr).sum() < 1e-8
    assert np.array_equal(gp.wcc(g).labels, naive.wcc_labels(n, s, d))
    with pytest.raises(AttributeError):
        gp.no_such_algorithm  # noqa: B018


def _readme_block(title):
    """The first ```python block after the README heading `title`."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    at = text.index(title)
    m = re.search(r"```python\n(.*?)```", text[at:], re.S)
    assert m, f"no python block after {title!r}"
    return m.group(1)


def test_readme_custom_algorithm_runs_as_written(tmp_path):
    """The README's custom-algorithm example, executed verbatim in a fresh interpreter; it asserts
    its own result against numpy, so a wrong IoIterator fails here."""
    code = _readme_block("## Write your own algorithm")
    script = tmp_path / "example.py"
    script.write_text(code)
    env = dict(os.environ, GRAPHENE_HOME=str(tmp_path / "home"))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "out-degrees match" in p.stdout


def test_readme_add_an_algorithm_is_one_file_and_one_registry_line(tmp_path, monkeypatch):
    """The README's "Add an algorithm" module, as written, plus one registry entry: it runs through
    the Python API and `graphene run ... -v` (its own verifier), from SSD and in memory."""
    import types

    from click.testing import CliRunner

    from graphene_py.algos import registry
    from graphene_py.cli import main
    code = _readme_block("### Add an algorithm")
    mod = types.ModuleType("graphene_py.algos.degree_sum")
    mod.__package__ = "graphene_py.algos"
    exec(compile(code, "degree_sum.py", "exec"), mod.__dict__)
    monkeypatch.setitem(sys.modules, "graphene_py.algos.degree_sum", mod)
    monkeypatch.setitem(registry.ENTRIES, "degree-sum",
                        registry.Entry("degree-sum", "degree_sum", "Sum of the neighbours' IDs."))
    g = graphs.powerlaw()
    d = tmp_path / "d0"
    d.mkdir()
    G = gp.partition_arrays(g.src, g.dst, disks=[str(d)], name="ex", rows=1, cols=1)
    s, t = G.edges("out")
    want = np.bincount(s, weights=t, minlength=G.num_vertices)
    for in_memory in (False, True):
        assert np.array_equal(gp.degree_sum(G, in_memory=in_memory).sums, want)
    r = CliRunner().invoke(main, ["run", "degree-sum", "--graph", "ex", "-v"])
    assert r.exit_code == 0, r.output
    assert "Verification: PASS" in r.output


def test_a_misspelt_keyword_is_a_type_error_at_the_call(tmp_path):
    """gp.<algorithm>(g, **options) checks the keywords before any work, on the small path as on
    the engine (one ran from a random source, the other failed deep in the IO engine)."""
    import numpy as np
    import graphene_py as gp
    from graphene_py.partition import partition_arrays
    d = tmp_path / "d"
    d.mkdir()
    g = partition_arrays(np.arange(9), np.arange(1, 10), disks=[str(d)], name="kw",
                         register=False, durable=False, symmetrize=True)
    for small in ("0", str(1 << 30)):
        os.environ["GRAPHENE_SMALL_EDGES"] = small
        try:
            with pytest.raises(TypeError, match="'srcc'.*src"):
                gp.bfs(g, srcc=5)
            with pytest.raises(TypeError, match="'tolerence'.*tolerance"):
                gp.pagerank(g, tolerence=1e-9)
            assert gp.bfs(g, src=5, threads=2).src == 5
        finally:
            os.environ["GRAPHENE_SMALL_EDGES"] = "0"


def test_a_graph_may_be_given_by_name_or_folder_and_one_disk_by_itself(tmp_path):
    """gp.bfs("name") and gp.bfs(folder) open the dataset, as --graph does; anything that is
    not a graph is a TypeError saying what is wanted; gp.partition(input, "folder") takes the
    folder as one disk (not a list of its letters)."""
    el = tmp_path / "g.el"
    el.write_text("0 1\n1 2\n2 3\n")
    disk = _disks(tmp_path, 1)[0]
    g = gp.partition(str(el), disk, name="byname", quiet=True)
    assert g.disks == [disk]
    want = gp.bfs(g, src=0).depth.tolist()
    assert gp.bfs("byname", src=0).depth.tolist() == want == [0, 1, 2, 3]
    assert gp.bfs(g.path, src=0).depth.tolist() == want
    for bad in (None, 3):
        with pytest.raises(TypeError, match="needs a graph"):
            gp.bfs(bad, src=0)
    with pytest.raises(gp.DatasetError, match="no dataset named or at 'nope'"):
        gp.bfs("nope", src=0)
