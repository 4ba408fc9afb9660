"""Timelines: `graphene run ... --timeline x.png` and `graphene plot run.jsonl -o x.png` (Graphene's
Figure 4.21: read MB/s per disk over time, superstep boundaries, frontier and IO utility)."""
from __future__ import annotations

import builtins
import json
import os

import pytest
from click.testing import CliRunner

from graphene_py import plot
from graphene_py.cli import main
from tests.test_cli_run import ds  # noqa: F401  (the two-folder 2x2 dataset "pl")

pytest.importorskip("matplotlib")    # a [test] extra: installed by make test

PNG = b"\x89PNG\r\n\x1a\n"


def _png(path):
    with open(path, "rb") as f:
        head = f.read(8)
    return head == PNG and os.path.getsize(path) > 10_000


def test_run_timeline_draws_the_last_trial(ds, tmp_path):
    out = tmp_path / "pics"
    out.mkdir()
    r = CliRunner().invoke(main, ["run", "pagerank-pull", "--graph", "pl", "-n", "2", "--max-iter",
                                  "4", "--tol", "0", "--timeline", str(out / "pr.png")])
    assert r.exit_code == 0, r.output
    assert _png(out / "pr.png")
    assert os.listdir(out) == ["pr.png"]      # written atomically: no temporary left


def test_plot_from_nl_output(ds, tmp_path):
    r = CliRunner().invoke(main, ["run", "bfs", "--graph", "pl", "--src", "0",
                                  "--nl", "-n", "2"])
    assert r.exit_code == 0
    jl = tmp_path / "bfs.jsonl"
    jl.write_text(r.stdout)
    steps = plot.read_jsonl(jl)
    want = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert steps == [d for d in want if d["trial"] == 1] and len(steps) >= 2
    # bytes per disk folder add up to the superstep's bytes
    assert all(sum(s["bytes_read_per_disk"]) == s["bytes_read"] for s in steps)
    p = CliRunner().invoke(main, ["plot", str(jl), "-o", str(tmp_path / "bfs.png")])
    assert p.exit_code == 0, p.output
    assert _png(tmp_path / "bfs.png")


def test_plot_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"superstep": 0, "seconds": 0.1}\n{not json\n')
    r = CliRunner().invoke(main, ["plot", str(bad), "-o", str(tmp_path / "x.png")])
    assert r.exit_code == 1 and f"{bad}, line 2: not JSON" in r.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("Trial 1: 0.1 s\n")
    r = CliRunner().invoke(main, ["plot", str(empty), "-o", str(tmp_path / "x.png")])
    assert r.exit_code == 1 and "no superstep records" in r.output
    r = CliRunner().invoke(main, ["plot", str(tmp_path / "nope.jsonl"), "-o", "x.png"])
    assert r.exit_code == 1 and "nope.jsonl" in r.output
    assert not (tmp_path / "x.png").exists()


def test_timeline_checked_before_the_run(ds, tmp_path, monkeypatch):
    """A missing folder, or matplotlib missing: `Error: ...` before any work, nothing written."""
    r = CliRunner().invoke(main, ["run", "bfs", "--graph", "pl", "--src", "0", "--timeline",
                                  str(tmp_path / "no" / "t.png")])
    assert r.exit_code == 1 and "does not exist" in r.output and "Trial" not in r.output
    real = builtins.__import__

    def no_mpl(name, *a, **k):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_mpl)
    r = CliRunner().invoke(main, ["run", "bfs", "--graph", "pl", "--src", "0", "--timeline",
                                  str(tmp_path / "t.png")])
    assert r.exit_code == 1 and "pip install 'graphene_py[plots]'" in r.output
    assert "Trial" not in r.output and not (tmp_path / "t.png").exists()
