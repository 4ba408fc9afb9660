"""`graphene partition / info / list` through click's CliRunner."""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
from click.testing import CliRunner

from graphene_py.cli import main
from graphene_py.graph import Graph
from tests import graphs


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture
def disks(tmp_path):
    ds = []
    for i in range(3):
        p = tmp_path / f"ssd{i}"
        p.mkdir()
        ds.append(str(p))
    return ds


@pytest.fixture
def edge_file(tmp_path):
    g = graphs.duplicates()
    p = tmp_path / "dups.el"
    with open(p, "w") as f:
        f.write("# a comment\n")
        for a, b in zip(g.src, g.dst):
            f.write(f"{a} {b}\n")
    return str(p), g


def test_partition_space_separated_disks(disks, edge_file):
    path, g = edge_file
    code, out, err = run("partition", path, "--disks", *disks, "--rows", 2, "--cols", 2, "-s")
    assert code == 0, err
    G = Graph.open("dups")                    # default name: the file stem
    assert G.disks == disks and not G.directed
    # summary on stderr with the numbers users expect
    assert "self-loops dropped 6" in err
    assert f"{G.num_edges:,} edges kept" in err
    assert "imbalance" in err and "bytes per disk" in err
    # progress (click's bars): not a terminal here, so each phase's name once, with its size
    assert "read (" in err and "MB)" in err and "write out (" in err
    # edges: symmetrized, loops and duplicates gone
    s, d = G.edges()
    want = sorted({(a, b) for a, b in zip(g.src.tolist(), g.dst.tolist()) if a != b} |
                  {(b, a) for a, b in zip(g.src.tolist(), g.dst.tolist()) if a != b})
    assert list(zip(s.tolist(), d.tolist())) == want


def test_partition_repeated_disks_and_options(disks, edge_file):
    path, g = edge_file
    args = ["partition", path, "--name", "g2", "--keep-self-loops", "--keep-duplicates", "-q",
            "--id-width", "8", "--in-edges"]
    for d in disks[:2]:
        args += ["--disks", d]
    code, out, err = run(*args)
    assert code == 0, err
    assert err == ""                           # --quiet
    G = Graph.open("g2")
    assert G.disks == disks[:2] and G.id_width == 8 and G.num_edges == g.m
    assert G.in_partitions is not None
    assert (G.num_rows, G.num_cols) == (2, 2)  # default grid for 2 disks


def test_partition_then_info_and_list(disks, edge_file, tmp_path):
    path, g = edge_file
    assert run("partition", path, "--disks", disks[0], "-q")[0] == 0
    g2 = graphs.uniform()
    p2 = tmp_path / "u.el"
    p2.write_text("".join(f"{a},{b}\n" for a, b in zip(g2.src, g2.dst)))
    assert run("partition", str(p2), "--disks", *disks, "-q")[0] == 0
    code, out, err = run("info")               # the last one partitioned
    assert code == 0 and "name        u" in out
    code, out, err = run("info", "dups", "--json")
    info = json.loads(out)
    assert json.loads(run("info", "-g", "dups", "--json")[1]) == info     # as `run -g` names it
    code, out, err = run("info", "u", "-g", "dups")
    assert code == 2 and "two datasets" in err
    G = Graph.open("dups")
    assert info["num_edges"] == G.num_edges and info["num_vertices"] == 5
    assert info["stats"]["duplicates_dropped"] == G.stats["duplicates_dropped"] > 0
    code, out, err = run("info", G.dirs[0], "--verify")
    assert code == 0 and "Verify: OK" in err
    code, out, err = run("list")
    lines = out.strip().splitlines()
    assert len(lines) == 3 and lines[0].split()[:3] == ["NAME", "VERTICES", "EDGES"]
    assert lines[2].startswith("* u") and lines[1].startswith("  dups")
    assert G.path in lines[1]
    code, out, err = run("list", "--json")
    assert {r["name"] for r in json.loads(out)} == {"dups", "u"}
    shutil.rmtree(Graph.open("u").path)         # a registered dataset gone
    code, out, err = run("list", "--json")
    st = {r["name"]: r["status"] for r in json.loads(out)}
    assert st["dups"] == "ok" and st["u"].startswith("missing or broken: no dataset")
    assert "graphene list" not in st["u"]      # (not sent back to the command just run)


def test_info_verify_detects_corruption(disks, edge_file):
    path, g = edge_file
    assert run("partition", path, "--disks", *disks, "-q", "--rows", 1, "--cols", 1)[0] == 0
    G = Graph.open("dups")
    p = G.partitions[0]
    with open(p.adj_path, "r+b") as f:
        b = f.read(1)
        f.seek(0)
        f.write(bytes([b[0] ^ 0xFF]))
    code, out, err = run("info", "dups", "--verify")
    assert code == 1 and "checksum" in err and "Verify: FAIL" in err
    code, out, err = run("info", "dups", "--verify", "--json")
    assert code == 1 and json.loads(out)["verify"]["ok"] is False
    os.truncate(p.off_path, 8)
    code, out, err = run("info", "dups", "--verify")
    assert code == 1 and "bytes" in err
    code, out, err = run("info", "dups")       # plain info refuses a truncated dataset
    assert code == 1 and err.startswith("Error: ")


@pytest.mark.parametrize("text,line,what", [
    ("0 1\n1 two\n", 2, "two"),
    ("0 1\n\n# ok\n-3 1\n", 4, "-3"),
    ("0 1 2.5\n1 2\n", 2, ""),
    ("0 1\n5 99999999999999999999999\n", 2, ""),
])
def test_bad_input_error_file_line_nothing_written(disks, tmp_path, text, line, what):
    p = tmp_path / "bad.el"
    p.write_text(text)
    code, out, err = run("partition", str(p), "--disks", *disks)
    assert code == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"Error: {p}:{line}: "), err
    assert what in last
    for d in disks:
        assert os.listdir(d) == []
    assert run("list")[1] == ""


def test_errors_before_work(disks, edge_file, tmp_path):
    path, g = edge_file
    code, out, err = run("partition", path, "--disks", disks[0], str(tmp_path / "missing"))
    assert code == 1 and "does not exist" in err
    assert os.listdir(disks[0]) == []
    code, out, err = run("partition", str(tmp_path / "nofile.el"), "--disks", disks[0])
    assert code == 1 and "no such file" in err
    assert run("partition", path, "--disks", disks[0], "-q")[0] == 0
    code, out, err = run("partition", path, "--disks", disks[0], "-q")
    assert code == 1 and "already exists" in err and "--force" in err
    assert run("partition", path, "--disks", disks[0], "-q", "--force")[0] == 0
    code, out, err = run("partition", path, "--disks", disks[0], "--memory-limit", "lots")
    assert code == 2 and "'lots' is not a size" in err and "--memory-limit" in err   # as run's
    code, out, err = run("partition", path, "--disks", disks[0], "--rows", 0, "--cols", 2)
    assert code == 2 and "--rows" in err
    code, out, err = run("info", "nope")
    assert code == 1 and "no dataset" in err


def test_id_width_4_overflow_names_line(disks, tmp_path):
    p = tmp_path / "wide.el"
    p.write_text("0 1\n4294967296 3\n")
    code, out, err = run("partition", str(p), "--disks", disks[0], "--id-width", "4")
    assert code == 1 and err.strip().splitlines()[-1].startswith(f"Error: {p}:2: ")
    assert os.listdir(disks[0]) == []


def test_memory_limit_spills_and_matches(disks, tmp_path):
    g = graphs.powerlaw(scale=13, edge_factor=8)
    p = tmp_path / "pl.el"
    p.write_text("".join(f"{a} {b}\n" for a, b in zip(g.src, g.dst)))
    assert run("partition", str(p), "--disks", disks[0], "--name", "a", "-q")[0] == 0
    code, out, err = run("partition", str(p), "--disks", disks[1], "--name", "b",
                         "--work-memory", "1M")
    assert code == 0, err
    assert "bucket files" in err and "input edges/s" in err
    a, b = Graph.open("a"), Graph.open("b")
    assert b.manifest["options"]["spilled_runs"] > 1
    for x, y in zip(a.edges(), b.edges()):
        np.testing.assert_array_equal(x, y)


def test_input_after_disks(disks, edge_file):
    path, g = edge_file
    code, out, err = run("partition", "--disks", *disks[:2], path, "-q", "--name", "late")
    assert code == 0, err
    assert Graph.open("late").disks == disks[:2]


def test_num_vertices_keeps_isolated_vertices_at_the_top(tmp_path, disks):
    """A generator's 2^k vertices where the top IDs have no edges: --num-vertices keeps them (BFS
    arrays have that length, the top vertex unreached); an ID at or above N is an error naming
    it, with nothing written; --labels/--relabel with it is a usage error."""
    p = tmp_path / "top.el"
    p.write_text("0 1\n1 2\n2 5\n")
    home = str(tmp_path / "home")
    os.environ["GRAPHENE_HOME"] = home
    try:
        code, out, err = run("partition", p, "--disks", disks[0], "--name", "top", "-s",
                             "--num-vertices", 8, "-q")
        assert code == 0, err
        g = Graph.open(os.path.join(disks[0], "top"))
        assert g.num_vertices == 8 and g.num_edges == 6
        import graphene_py as gp
        r = gp.bfs(g, src=0)
        assert len(r.depth) == 8 and list(r.depth[5:]) == [3, -1, -1]
        code, out, err = run("partition", p, "--disks", disks[1], "--name", "low",
                             "--num-vertices", 5, "-q")
        assert code == 1 and "--num-vertices 5" in err and "vertex ID 5" in err
        assert not os.path.exists(os.path.join(disks[1], "low"))
        for flag in ("--labels", "--relabel"):
            code, out, err = run("partition", p, "--disks", disks[2], "--name", "x", flag,
                                 "--num-vertices", 8)
            assert code == 2 and "--num-vertices" in err
    finally:
        os.environ.pop("GRAPHENE_HOME", None)


def test_no_default_after_the_latest_dataset_is_removed(disks, edge_file):
    """Removing the most recently partitioned dataset leaves no default: a run without --graph
    says so and points at --graph and `graphene list`, not "none partitioned yet"."""
    path, g = edge_file
    code, out, err = run("run", "bfs")
    assert code == 1 and "none partitioned yet" in err
    assert run("partition", path, "--disks", disks[0], "--name", "first", "-q")[0] == 0
    assert run("partition", path, "--disks", disks[1], "--name", "second", "-q")[0] == 0
    assert run("rm", "-y", "second")[0] == 0
    code, out, err = run("run", "bfs")
    assert code == 1 and "removed" in err and "--graph" in err and "graphene list" in err
    assert "none partitioned yet" not in err
    assert run("run", "bfs", "--graph", "first")[0] == 0


@pytest.mark.parametrize("force", [False, True])
def test_partition_refuses_a_folder_of_the_users_that_bears_the_name(disks, edge_file, force):
    """A folder named like the dataset that holds files no dataset wrote (the user's own) is
    refused, with --force too (that replaces datasets only): nothing is written into it, not
    even a lock, and the other disk gets nothing either."""
    path, g = edge_file
    mine = os.path.join(disks[1], "mine")
    os.makedirs(os.path.join(mine, "sub"))
    with open(os.path.join(mine, "notes.txt"), "w") as f:
        f.write("precious\n")
    code, out, err = run("partition", path, "--disks", disks[0], disks[1], "--name", "mine",
                         "-q", *(["--force"] if force else []))
    assert code == 1 and "Error:" in err and "Traceback" not in err
    assert mine in err and "notes.txt" in err and "not a graphene dataset" in err
    assert sorted(os.listdir(mine)) == ["notes.txt", "sub"]
    assert open(os.path.join(mine, "notes.txt")).read() == "precious\n"
    assert not os.path.exists(os.path.join(disks[0], "mine"))
    # an empty folder of that name is fine
    os.mkdir(os.path.join(disks[0], "empty"))
    assert run("partition", path, "--disks", disks[0], "--name", "empty", "-q")[0] == 0
    assert Graph.open("empty").num_edges > 0


def test_rm_leaves_files_that_the_dataset_did_not_write(disks, edge_file):
    """Files put into a dataset's folders by hand after it was made survive `graphene rm`, which
    deletes the dataset's own (its versions, pointer, lock, log); a folder left empty goes."""
    path, g = edge_file
    assert run("partition", path, "--disks", disks[0], disks[1], "--name", "kept", "-q")[0] == 0
    added = os.path.join(disks[1], "kept", "notes.txt")
    with open(added, "w") as f:
        f.write("precious\n")
    code, out, err = run("rm", "-y", "kept")
    assert code == 0, err
    assert os.listdir(os.path.join(disks[1], "kept")) == ["notes.txt"]
    assert open(added).read() == "precious\n"
    assert not os.path.exists(os.path.join(disks[0], "kept"))
    code, out, err = run("run", "bfs", "--graph", "kept")
    assert code == 1 and "Error:" in err


@pytest.mark.parametrize("text, says", [
    ("{broken", "not valid JSON"),
    ("[]", "not a dataset registry (a JSON list"),
    ('{"datasets": 5}', '"datasets" is not an object'),
    ('{"datasets": {"x": 3}}', "the entry of 'x'"),
])
def test_a_damaged_registry_is_an_error_and_is_never_overwritten(disks, edge_file, text, says):
    """A registry.json that is not valid JSON, or not a registry, is refused by name (exit 1,
    no traceback) by every command that reads it, and a partition (even --force) leaves it
    as it was, writing no dataset; a dataset opened by its path still runs."""
    path, g = edge_file
    assert run("partition", path, "--disks", disks[0], "--name", "before", "-q")[0] == 0
    reg = os.path.join(os.environ["GRAPHENE_HOME"], "registry.json")
    with open(reg, "w") as f:
        f.write(text)
    for args in (("list",), ("run", "bfs", "--graph", "before"),
                 ("partition", path, "--disks", disks[1], "--name", "after", "-q"),
                 ("partition", path, "--disks", disks[1], "--name", "after", "-q", "--force")):
        code, out, err = run(*args)
        assert code == 1 and says in err and reg in err and "Traceback" not in err, (args, err)
    assert open(reg).read() == text
    assert not os.path.exists(os.path.join(disks[1], "after"))
    code, out, err = run("run", "bfs", "--graph", os.path.join(disks[0], "before"), "--src", 1)
    assert code == 0, err


def test_info_calls_a_replaced_version_cleaned_up_not_recovered(disks, edge_file):
    """After `partition --force` replaced a dataset, `graphene info` lists the old version's
    removal as routine cleanup, not as a recovery from damage."""
    path, g = edge_file
    assert run("partition", path, "--disks", disks[0], "--name", "twice", "-q")[0] == 0
    assert run("partition", path, "--disks", disks[0], "--name", "twice", "-q", "--force")[0] == 0
    code, out, err = run("info", "-g", "twice")
    assert code == 0, err
    lines = [ln for ln in out.splitlines() if "replaced previous version" in ln]
    assert lines and all(ln.startswith("cleaned up ") for ln in lines), out


def test_info_verify_names_a_missing_file(disks, edge_file):
    """`graphene info --verify` on a dataset with a data file deleted: a problem line naming
    the missing file and its disk, exit 1, no raw OS error."""
    path, g = edge_file
    assert run("partition", path, "--disks", disks[0], "--name", "gone", "-q")[0] == 0
    G = Graph.open("gone")
    victim = next(p for _, kind, p in G.all_files() if p.endswith(".adj"))
    G.close()
    os.unlink(victim)
    code, out, err = run("info", "-g", "gone", "--verify")
    assert code == 1 and f"missing file {victim}" in err and "Errno" not in err, err


def test_an_input_lines_control_bytes_are_shown_escaped(tmp_path, disks):
    """A line of control bytes (a binary file read as text) is quoted with its bytes escaped:
    nothing unprintable reaches the terminal."""
    p = tmp_path / "garb.el"
    p.write_bytes(b"0 1\n\x01\x13\x1b[31m 2\n")
    code, out, err = run("partition", str(p), "--disks", disks[0], "--name", "garb", "-q")
    assert code == 1 and f"{p}:2:" in err
    assert all(c.isprintable() or c == "\n" for c in err), repr(err)
    assert "\\x01\\x13\\x1b[31m 2" in err
