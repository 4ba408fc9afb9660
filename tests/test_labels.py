"""Vertex names (issue 16 item 2): `graphene partition --labels` on edge lists of names, the label
table on disk, names in --src/--sources and the API, saved tables with name columns (.csv, .npz,
.parquet), --relabel results mapped back to the original IDs, damage to the table detected."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphene_py as gp
from graphene_py.cli import main
from graphene_py.errors import DatasetError, GrapheneError, InputFormatError
from graphene_py.graph import Graph
from graphene_py.partition import partition_arrays
from graphene_py.partition.labels import open_labeled
from graphene_py.partition.partitioner import partition
from tests import graphs as tg
from tests import naive
from tests.test_partition import make_disks


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def first_appearance(pairs):
    """Reference numbering: each name its rank of first appearance, file order."""
    ids = {}
    for a, b in pairs:
        for x in (a, b):
            if x not in ids:
                ids[x] = len(ids)
    return ids


def write_names(path, pairs, sep=" ", header="# people\n", eol="\n", weights=None):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(header)
        for i, (a, b) in enumerate(pairs):
            w = f"{sep}{weights[i]}" if weights is not None else ""
            f.write(f"{a}{sep}{b}{w}{eol}")
    return str(path)


def read_all(path, slots=2, chunk_bytes=None, **kw):
    sink = io.BytesIO()
    r = open_labeled(path, sink, chunk_bytes=chunk_bytes, **kw)
    r._alloc(slots)                    # a tiny table: it grows (rehashes) many times
    chunks = list(r)
    s = np.concatenate([c.src for c in chunks]) if chunks else np.zeros(0, np.int64)
    d = np.concatenate([c.dst for c in chunks]) if chunks else np.zeros(0, np.int64)
    w = np.concatenate([c.weight for c in chunks]) if chunks and r.weighted else None
    names = sink.getvalue().decode("utf-8").split("\n")[:-1]
    return s, d, w, names, r


def _pairs(n_names=300, m=2000, seed=0):
    rng = np.random.default_rng(seed)
    names = [f"user{i}" + "é" * (i % 3) + "_" * (i % 5) for i in range(n_names)]
    e = rng.integers(0, n_names, (m, 2))
    return [(names[a], names[b]) for a, b in e]


# ---------------------------------------------------------------------------------------------
# the reader
@pytest.mark.parametrize("chunk_bytes", [7, 64, 1 << 20])
@pytest.mark.parametrize("sep,eol", [(" ", "\n"), ("\t", "\r\n"), (", ", "\n")])
def test_reader_numbers_names_by_first_appearance(tmp_path, chunk_bytes, sep, eol):
    pairs = _pairs()
    path = write_names(tmp_path / "p.el", pairs, sep=sep, eol=eol)
    s, d, w, names, r = read_all(path, chunk_bytes=chunk_bytes)
    ref = first_appearance(pairs)
    assert names == list(ref)                         # line i of the table names vertex i
    assert r.num_labels == len(ref)
    np.testing.assert_array_equal(s, [ref[a] for a, _ in pairs])
    np.testing.assert_array_equal(d, [ref[b] for _, b in pairs])
    assert w is None
    assert r.lines_read == len(pairs) + 1


@pytest.mark.parametrize("threads", [2, 5])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("piece", [4 << 20, 200])
def test_reader_runs_in_parallel_keep_file_order(tmp_path, monkeypatch, threads, weighted, piece):
    """Chunks cut into pieces and runs of lines probed in parallel: the IDs are still
    first-appearance order (names new to a piece met in several runs are added serially, in file
    order)."""
    from graphene_py.partition import labels
    monkeypatch.setattr(labels, "PARALLEL_MIN_BYTES", 64)
    monkeypatch.setattr(labels, "SUB_BYTES", piece)
    pairs = _pairs(n_names=900, m=4000, seed=threads)
    wts = [i % 7 + 0.5 for i in range(len(pairs))] if weighted else None
    path = write_names(tmp_path / "p.el", pairs, weights=wts)
    ref = first_appearance(pairs)
    for chunk in (300, 5000, 1 << 20):
        sink = io.BytesIO()
        r = open_labeled(path, sink, chunk_bytes=chunk, threads=threads)
        r._alloc(2)
        chunks = list(r)
        assert len(chunks) > (1 if chunk < 1 << 20 else 0) + len(pairs) * 25 // chunk // 2
        assert sink.getvalue().decode().split("\n")[:-1] == list(ref)
        assert np.concatenate([c.src for c in chunks]).tolist() == [ref[a] for a, _ in pairs]
        assert np.concatenate([c.dst for c in chunks]).tolist() == [ref[b] for _, b in pairs]
        if weighted:
            np.testing.assert_array_equal(np.concatenate([c.weight for c in chunks]),
                                          np.float32(wts))


def test_reader_weights_comments_and_blank_lines(tmp_path):
    p = tmp_path / "w.el"
    p.write_text("% hdr\nalice bob 0.5\n\n  # note\nbob carol 2\ncarol alice 1e-3\n")
    s, d, w, names, _ = read_all(str(p))
    assert names == ["alice", "bob", "carol"]
    assert s.tolist() == [0, 1, 2] and d.tolist() == [1, 2, 0]
    np.testing.assert_array_equal(w, np.float32([0.5, 2, 1e-3]))


@pytest.mark.parametrize("text,line,what", [
    ("a b\nc d e f\n", 2, "expected 2 columns like the first data line, found more than 3"),
    ("a b\nc\n", 2, "expected 2 columns like the first data line, found 1"),
    ("a b 1\nc d\n", 2, "expected 3 columns"),
    ("a b 1\nc d x\n", 2, "weight 'x' is not a number"),
    ("a,,b\n", 1, "empty field"),
    (",b\n", 1, "empty field"),
])
def test_reader_errors_name_the_line(tmp_path, text, line, what):
    p = tmp_path / "bad.el"
    p.write_text(text)
    with pytest.raises(InputFormatError) as ei:
        read_all(str(p))
    assert f"bad.el:{line}:" in str(ei.value) and what in str(ei.value)


@pytest.mark.parametrize("piece,par", [(4 << 20, 1 << 20), (50, 64)])
def test_reader_error_line_in_a_later_piece(tmp_path, monkeypatch, piece, par):
    from graphene_py.partition import labels
    monkeypatch.setattr(labels, "SUB_BYTES", piece)
    monkeypatch.setattr(labels, "PARALLEL_MIN_BYTES", par)
    p = tmp_path / "late.el"
    p.write_text("# head\n" + "".join(f"a{i} b{i}\n" for i in range(300)) + "x y z w\n")
    with pytest.raises(InputFormatError, match=r"late.el:302: expected 2 columns"):
        read_all(str(p), chunk_bytes=1000, threads=3)


def test_reader_refuses_numbered_formats(tmp_path):
    p = tmp_path / "g.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    with pytest.raises(ValueError, match="--labels reads text edge lists"):
        open_labeled(str(p), io.BytesIO())


def test_integer_parse_error_suggests_labels(tmp_path):
    p = tmp_path / "n.el"
    p.write_text("1 2\nalice bob\n")
    d = make_disks(tmp_path, 1)
    r = cli("partition", p, "--disks", *d, "-q")
    assert r.exit_code == 1
    assert "n.el:2: vertex ID 'alice' is not a non-negative integer" in r.stderr
    assert "--labels" in r.stderr


# ---------------------------------------------------------------------------------------------
# partition --labels: the same dataset as the integer edge list of the first-appearance IDs
@pytest.mark.parametrize("grid", [(1, 1), (2, 2), (3, 2)])
def test_partition_labels_equals_numbered_input(tmp_path, grid):
    g = tg.star(hub_degree=3000, hub=5)
    # names for IDs, plus a vertex only in a self-loop (dropped: still a vertex, isolated)
    pairs = [(f"v{a}", f"v{b}") for a, b in zip(g.src.tolist(), g.dst.tolist())]
    pairs.append(("loner", "loner"))
    path = write_names(tmp_path / "star.el", pairs)
    R, C = grid
    G = partition(path, make_disks(tmp_path, R * C), name="named", labels=True, quiet=True,
                  rows=R, cols=C, symmetrize=True)
    ref = first_appearance(pairs)
    src = np.array([ref[a] for a, _ in pairs])
    dst = np.array([ref[b] for _, b in pairs])
    H = partition_arrays(src, dst, num_vertices=len(ref), disks=make_disks(tmp_path, 1, "h"),
                         name="numbered", symmetrize=True, register=False)
    assert G.num_vertices == len(ref) == H.num_vertices
    for a, b in zip(G.edges(), H.edges()):
        np.testing.assert_array_equal(a, b)
    assert G.verify() == []
    names = G.vertex_names()
    assert names.kind == "label"
    assert names.take(np.arange(len(ref))) == list(ref)
    assert names.id_of("loner") == len(ref) - 1 and names.id_of("v5") == ref["v5"]
    with pytest.raises(GrapheneError, match="no vertex named 'v999999'"):
        names.id_of("v999999")
    # many lookups go through the hash index (built after the first few scans): same answers
    for x in list(ref)[::97] + ["v5", "loner"]:
        assert names.id_of(x) == ref[x]
    assert names._index is not None


@pytest.mark.parametrize("block", [7, 64 << 20])
def test_name_of_without_offsets(tmp_path, monkeypatch, block):
    """The first names asked for one at a time come from a scan (no offsets in memory), also
    across scan blocks; later ones through the offsets; both equal the table's lines."""
    from graphene_py import names as names_mod
    monkeypatch.setattr(names_mod, "SCAN_BLOCK", block)
    pairs = _pairs(n_names=60, m=200, seed=3)
    G = partition(write_names(tmp_path / "n.el", pairs), make_disks(tmp_path, 1), name="n",
                  labels=True, quiet=True, register=False)
    ref = list(first_appearance(pairs))
    nm = G.vertex_names()
    for v in (0, len(ref) - 1, 1, 37):
        assert nm.name_of(v) == ref[v]
    assert nm._off is None                            # scans only, so far
    assert [nm.name_of(v) for v in range(len(ref))] == ref
    assert nm._off is not None and nm.name_of(-1) is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=120),
       st.sampled_from(["n{}", "ü{}x", "\"q{}\"", "http://a.b/{}?x=1", "{}"]))
def test_partition_labels_any_names(tmp_path_factory, edges, form):
    tmp = tmp_path_factory.mktemp("h")
    pairs = [(form.format(a), form.format(b)) for a, b in edges]
    path = write_names(tmp / "h.el", pairs)
    G = partition(path, [str(tmp)], name="h", labels=True, quiet=True, register=False)
    ref = first_appearance(pairs)
    src = np.array([ref[a] for a, _ in pairs])
    dst = np.array([ref[b] for _, b in pairs])
    keep = src != dst
    e = sorted(set(zip(src[keep].tolist(), dst[keep].tolist())))
    s, d = G.edges()
    assert list(zip(s.tolist(), d.tolist())) == e
    assert G.vertex_names().take(np.arange(G.num_vertices)) == list(ref)
    assert list(G.vertex_names()) == list(ref) and len(G.vertex_names()) == G.num_vertices


def test_partition_labels_cli_and_usage_errors(tmp_path):
    path = write_names(tmp_path / "p.el", [("alice", "bob"), ("bob", "carol")])
    d = make_disks(tmp_path, 1)
    r = cli("partition", path, "--disks", *d, "--labels", "--relabel")
    assert r.exit_code == 2 and "not both" in r.stderr
    r = cli("partition", path, "--disks", *d, "--labels")
    assert r.exit_code == 0, r.output
    assert "vertex names kept in labels.txt" in r.stderr
    m = json.load(open(os.path.join(Graph.open("p").dirs[0], "manifest.json")))
    assert m["labels"] == "labels.txt" and m["options"]["labels"] is True
    r = cli("info", "p")
    assert r.exit_code == 0 and "names       vertex names in labels.txt (16 B)" in r.stdout
    assert json.loads(cli("info", "p", "--json").stdout)["names"] == {
        "kind": "label", "file": "labels.txt", "bytes": 16}


# ---------------------------------------------------------------------------------------------
# runs: names in, names out
@pytest.fixture
def people(tmp_path):
    g = tg.powerlaw(scale=9, edge_factor=4)
    pairs = [(f"p{a}@x", f"p{b}@x") for a, b in zip(g.src.tolist(), g.dst.tolist())]
    path = write_names(tmp_path / "people.el", pairs)
    G = partition(path, make_disks(tmp_path, 4), name="people", labels=True, quiet=True,
                  rows=2, cols=2, symmetrize=True)
    return G, first_appearance(pairs), pairs


def test_bfs_by_name_equals_bfs_by_id(people, tmp_path):
    G, ref, pairs = people
    src_name = pairs[0][0]
    src = ref[src_name]
    r = cli("run", "bfs", "-g", "people", "--src", src_name, "-q", "-o", tmp_path / "b.csv",
            "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["result"]["src"] == src and out["result"]["src_name"] == src_name
    res = gp.bfs(G, src=src)
    by_name = gp.bfs(G, src=src_name)                 # the API takes the name too
    np.testing.assert_array_equal(res.depth, by_name.depth)
    n = G.num_vertices
    s, d = G.edges()
    np.testing.assert_array_equal(res.depth, naive.bfs_depths(n, s, d, src))
    # the table: vertex, label, parent, parent_label, depth; names where IDs were
    import csv
    rows = list(csv.DictReader(open(tmp_path / "b.csv")))
    names = list(ref)
    assert list(rows[0]) == ["vertex", "label", "parent", "parent_label", "depth"]
    assert len(rows) == n
    for row in rows:
        v = int(row["vertex"])
        assert row["label"] == names[v]
        assert int(row["depth"]) == res.depth[v]
        p = int(row["parent"])
        assert row["parent_label"] == ("" if p < 0 else names[p])
    # named(): a mapping keyed by name
    m = res.named("depth")
    assert m[src_name] == 0 and len(m) == n
    assert dict(m) == {names[v]: int(res.depth[v]) for v in range(n)}
    with pytest.raises(KeyError):
        m["nobody"]


def test_saved_npz_and_parquet_carry_the_names(people, tmp_path):
    pa = pytest.importorskip("pyarrow.parquet")
    G, ref, _ = people
    r = cli("run", "wcc", "-g", "people", "-q", "-o", tmp_path / "w.parquet")
    assert r.exit_code == 0, r.output
    t = pa.read_table(tmp_path / "w.parquet")
    assert t.column_names == ["vertex", "label", "labels", "component_label"]
    names = list(ref)
    assert t.column("label").to_pylist() == names
    comp = np.asarray(t.column("labels"))
    assert t.column("component_label").to_pylist() == [names[c] for c in comp]
    s, d = G.edges()
    np.testing.assert_array_equal(comp, naive.wcc_labels(G.num_vertices, s, d))
    r = cli("run", "pagerank", "-g", "people", "-q", "-o", tmp_path / "p.npz")
    assert r.exit_code == 0, r.output
    z = np.load(tmp_path / "p.npz")
    assert z["label"].tolist() == names


def test_msbfs_sources_by_name(people):
    G, ref, pairs = people
    a, b = pairs[0][0], pairs[5][1]
    r = cli("run", "apsp", "-g", "people", "--sources", f"{a},{b}", "--json", "-q")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["result"]
    assert out["source_names"] == [a, b]
    r = cli("run", "apsp", "-g", "people", "--sources", f"{a},nobody", "-q")
    assert r.exit_code == 1
    assert r.stderr == "Error: --sources nobody: no vertex named 'nobody' in dataset people\n"


def test_nx_backend_keys_by_the_names(people):
    nx = pytest.importorskip("networkx")
    from graphene_py import nx_backend
    G, ref, pairs = people
    ng = nx_backend.NxGraph(G)
    src = pairs[0][0]
    layers = list(nx.bfs_layers(ng, src))
    H = nx.Graph()
    H.add_edges_from((a, b) for a, b in pairs if a != b)
    assert [set(x) for x in layers] == [set(x) for x in nx.bfs_layers(H, src)]
    comps = sorted(map(sorted, nx.connected_components(ng)))
    assert comps == sorted(map(sorted, nx.connected_components(H)))
    pr = nx.pagerank(G)                    # the on-disk dataset itself dispatches to graphene
    ref = nx.pagerank(H, backend="networkx")
    assert set(pr) == set(ref) and max(abs(pr[x] - ref[x]) for x in ref) < 1e-6


# ---------------------------------------------------------------------------------------------
# --relabel datasets: names are the original IDs, the same way
def test_relabel_results_map_back(tmp_path):
    p = tmp_path / "sparse.el"
    p.write_text("1000 5\n5 70000000000\n70000000000 1000\n42 43\n")
    G = partition(str(p), make_disks(tmp_path, 1), name="sp", relabel=True, quiet=True)
    r = cli("run", "bfs", "-g", "sp", "--src", "70000000000", "-q", "-o", tmp_path / "b.csv",
            "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)["result"]
    assert out["src"] == 4 and out["src_name"] == 70000000000    # sorted: 5 42 43 1000 7e10
    lines = open(tmp_path / "b.csv").read().splitlines()
    assert lines[0] == "vertex,original_id,parent,parent_original_id,depth"
    assert lines[1:] == ["0,5,3,1000,2", "1,42,-1,,-1", "2,43,-1,,-1", "3,1000,4,70000000000,1",
                         "4,70000000000,4,70000000000,0"]
    r = cli("run", "bfs", "-g", "sp", "--src", "6", "-q")
    assert r.exit_code == 1
    assert "--src 6: no vertex with original ID 6 in dataset sp" in r.stderr
    assert gp.bfs(G, src="1000").src == 3 and gp.bfs(G, src=3).src == 3


# ---------------------------------------------------------------------------------------------
# damage: a changed or cut label table is an error, never a wrong name
def test_damaged_label_table_is_detected(people):
    G, ref, pairs = people
    path = os.path.join(G.dirs[0], "labels.txt")
    data = bytearray(open(path, "rb").read())
    data[10] ^= 0x01                                  # same size, one name changed
    open(path, "wb").write(bytes(data))
    g2 = Graph.open("people")
    with pytest.raises(DatasetError, match="vertex names .* are damaged"):
        g2.vertex_names().id_of(pairs[0][0])
    r = cli("run", "bfs", "-g", "people", "--src", pairs[0][0], "-q")
    assert r.exit_code == 1 and "damaged" in r.stderr
    assert any("labels.txt: checksum" in p for p in g2.verify())
    open(path, "wb").write(bytes(data[:-3]))         # cut short
    with pytest.raises(DatasetError, match="labels.txt has .* bytes, manifest says"):
        Graph.open("people")
