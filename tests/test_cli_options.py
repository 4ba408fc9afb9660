"""`graphene` option checking (issue 10): every bad option is a clear error before any work, output
files, apsp --closeness, PageRank convergence, pipes and Ctrl-C, help texts, empty inputs."""
from __future__ import annotations

import os

import numpy as np
import pytest
from click.testing import CliRunner

from graphene_py.cli import main
from graphene_py.graph import Graph
from tests import graphs as tg


def cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r


def _write_el(path, src, dst, header="# comment\n"):
    with open(path, "w") as f:
        f.write(header)
        for a, b in zip(src, dst):
            f.write(f"{a} {b}\n")
    return str(path)


# --------------------------------------------------------------------------------------------
# item 7: an empty or comment-only input is an error, and --force never replaces a good dataset
@pytest.mark.parametrize("content", ["", "# only a comment\n% and another\n\n"])
def test_partition_empty_input_keeps_old_dataset(tmp_path, content):
    d0 = tmp_path / "d0"
    d0.mkdir()
    g = tg.disconnected()
    good = _write_el(tmp_path / "good.el", g.src, g.dst)
    r = cli("partition", good, "--disks", d0, "--name", "keep", "-q")
    assert r.exit_code == 0, r.output
    r = cli("run", "bfs", "--graph", "keep", "--src", "0", "-o", tmp_path / "before.npy", "-q")
    assert r.exit_code == 0, r.output
    before = np.load(tmp_path / "before.npy")

    empty = tmp_path / "empty.el"
    empty.write_text(content)
    r = cli("partition", empty, "--disks", d0, "--name", "keep", "--force", "-q")
    assert r.exit_code == 1
    assert f"Error: {empty}: no edges (empty or only comments)" in r.stderr
    assert "Traceback" not in r.output
    assert sorted(os.listdir(d0)) == ["keep"]          # no temporary folder left behind
    G = Graph.open("keep")
    assert G.num_vertices == g.n - 1 and G.num_edges == len(g.src)  # 12 IDs, the last isolated
    r = cli("run", "bfs", "--graph", "keep", "--src", "0", "-o", tmp_path / "after.npy", "-q")
    assert r.exit_code == 0, r.output
    assert np.array_equal(np.load(tmp_path / "after.npy"), before)
