"""Edge-list readers and writers: round trips, chunk boundaries, a naive reference parser, errors."""
import gzip
import os
import re

import numpy as np
import pytest

from graphene_py.errors import InputFormatError
from graphene_py.partition import readers
from graphene_py.partition.readers import FORMATS, detect_format, open_edges, read_edges
from graphene_py.partition.edgelists import EdgeWriter, format_float32, write_edges
from tests import graphs

CHUNKS = [1, 7, 64, 1 << 20]


@pytest.fixture(params=["serial", "parallel"])
def par(request, monkeypatch):
    """Run a test with the one-thread parser and with every chunk split over 3 parser threads."""
    if request.param == "parallel":
        monkeypatch.setattr(readers, "PARALLEL_MIN_BYTES", 1)
        return {"threads": 3}
    return {"threads": 1}
ALL_FMTS = [f + gz for f in FORMATS for gz in ("", ".gz")]


def _read(path, **kw):
    src, dst, w, r = read_edges(path, **kw)
    return src, dst, w, r


def _weighted_fmt(fmt):
    return FORMATS[fmt.replace(".gz", "")].weighted


# ------------------------------------------------------------------------------------------------
# naive reference parser (Python, line by line) for text edge lists

def naive_text(data: bytes):
    src, dst, w = [], [], []
    for ln in data.split(b"\n"):
        s = ln.strip(b" \t\r")
        if not s or s[:1] in (b"#", b"%"):
            continue
        toks = [t for t in re.split(rb"[ \t\r]*,[ \t\r]*|[ \t\r]+", s)]
        src.append(int(toks[0]))
        dst.append(int(toks[1]))
        if len(toks) == 3:
            w.append(np.float32(float(toks[2])))
    return (np.array(src, np.int64), np.array(dst, np.int64),
            np.array(w, np.float32) if w else None)


def _random_text(rng, m, weighted, huge=False):
    """Text with random separators, comments, blank lines, CRLF, leading/trailing blanks."""
    hi = (1 << 62) if huge else 1000
    s = rng.integers(0, hi, m)
    d = rng.integers(0, hi, m)
    w = (rng.standard_normal(m) * 10.0 ** rng.integers(-5, 6, m)).astype(np.float32)
    seps = [b" ", b"\t", b",", b", ", b" ,\t", b"  "]
    out = [b"# a comment line\n", b"% another\n"]
    for i in range(m):
        pre = [b"", b" ", b"\t"][rng.integers(0, 3)]
        line = pre + str(s[i]).encode() + seps[rng.integers(0, len(seps))] + str(d[i]).encode()
        if weighted:
            # the exact value of a float32 in 17 digits, or a short decimal (rounded once to float32)
            wt = repr(float(w[i])) if rng.random() < 0.5 else "%.6g" % w[i]
            line += seps[rng.integers(0, len(seps))] + wt.encode()
        line += [b"", b" ", b"\t", b"\r"][rng.integers(0, 4)]
        out.append(line + b"\n")
        r = rng.random()
        if r < 0.05:
            out.append(b"\n")
        elif r < 0.1:
            out.append(b"  # comment 1 2 3\n")
        elif r < 0.12:
            out.append(b"\r\n")
    data = b"".join(out)
    if rng.random() < 0.5:
        data = data.rstrip(b"\n")  # last line without newline
    return data


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_text_matches_naive_parser(tmp_path, weighted, seed, par):
    rng = np.random.default_rng(seed)
    data = _random_text(rng, 300, weighted, huge=seed == 2)
    p = tmp_path / "g.txt"
    p.write_bytes(data)
    es, ed, ew = naive_text(data)
    # (parallel: parse launches per tiny chunk are slow, so fewer tiny sizes there)
    for cb in ([1, 5, 7, 33, 1 << 20] if par["threads"] == 1 else [701, 1 << 20]):
        s, d, w, r = _read(p, chunk_bytes=cb, **par)
        np.testing.assert_array_equal(s, es)
        np.testing.assert_array_equal(d, ed)
        assert r.weighted == weighted
        if weighted:
            np.testing.assert_array_equal(w, ew)  # float32 from Python float: same rounding
        assert r.lines_read == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        assert r.bytes_read == r.total_bytes == len(data)
    # gzip of the same text, with the background inflater and without
    pg = tmp_path / "g.txt.gz"
    pg.write_bytes(gzip.compress(data))
    for pf in [None, False, True]:
        s, d, w, r = _read(pg, chunk_bytes=11 if par["threads"] == 1 else 701, prefetch=pf, **par)
        np.testing.assert_array_equal(s, es)
        np.testing.assert_array_equal(d, ed)
        assert r.bytes_read == r.total_bytes == os.path.getsize(pg)


# ------------------------------------------------------------------------------------------------
# round trips writer -> reader

def _graph_cases():
    rng = np.random.default_rng(7)
    n = 5000
    return {
        "empty": (np.empty(0, np.int64), np.empty(0, np.int64)),
        "one_edge": (np.array([0]), np.array([1])),
        "self_loop_zero": (np.array([0]), np.array([0])),
        "random": (rng.integers(0, n, 3000), rng.integers(0, n, 3000)),
        "huge_ids": (rng.integers(0, 1 << 62, 500) + (1 << 40), rng.integers(1 << 32, 1 << 33, 500)),
        "max_id": (np.array([(1 << 63) - 2, 5]), np.array([3, (1 << 63) - 2])),
        "star": (graphs.star(3000).src, graphs.star(3000).dst),
    }


@pytest.mark.parametrize("fmt", ALL_FMTS)
@pytest.mark.parametrize("case", list(_graph_cases()))
def test_round_trip(tmp_path, fmt, case):
    src, dst = _graph_cases()[case]
    rng = np.random.default_rng(len(src))
    wts = rng.integers(1, 256, len(src)).astype(np.float32)
    if case == "random":
        wts = (rng.standard_normal(len(src)) * 1e3).astype(np.float32)  # non-integral weights
    base = fmt.replace(".gz", "")
    p = tmp_path / f"g.{fmt}"
    wanted_w = _weighted_fmt(fmt)
    w_arg = wts if (wanted_w or (wanted_w is None and case in ("random", "star"))) else None
    if base in ("bin32", "wbin32") and len(src) and max(src.max(), dst.max()) > 0xFFFFFFFF:
        with pytest.raises(ValueError, match="does not fit"):
            write_edges(p, src, dst, w_arg)
        assert not p.exists() and not list(tmp_path.iterdir())  # nothing half-written
        return
    assert write_edges(p, src, dst, w_arg) == base
    for cb in [7, 1 << 20]:
        s, d, w, r = _read(p, chunk_bytes=cb)
        assert r.fmt == base and r.compressed == fmt.endswith(".gz")
        assert s.dtype == np.int64 and d.dtype == np.int64
        np.testing.assert_array_equal(s, src)
        np.testing.assert_array_equal(d, dst)
        if w_arg is None:
            assert w is None and not r.weighted
        else:
            assert r.weighted and w.dtype == np.float32
            np.testing.assert_array_equal(w.view(np.uint32), w_arg.view(np.uint32))  # bit-exact
        assert r.edges_read == len(src)
        assert r.bytes_read == r.total_bytes == os.path.getsize(p)
        if base == "mtx":
            n = int(max(src.max(), dst.max())) + 1 if len(src) else 0
            assert r.header_vertices == n and r.header_entries == len(src) and not r.symmetric


def test_float32_bit_exact_round_trip(tmp_path):
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 1 << 32, 50000, dtype=np.uint64).astype(np.uint32)
    w = bits.view(np.float32)
    w = np.concatenate([w[np.isfinite(w)], np.float32([0.0, -0.0, 1e-45, 3.4028235e38, 0.1, 1 / 3])])
    idx = np.arange(len(w))
    for ext in ("wel", "mtx", "el.gz"):
        p = tmp_path / f"f.{ext}"
        write_edges(p, idx, idx, w)
        _, _, back, _ = _read(p)
        np.testing.assert_array_equal(back.view(np.uint32), w.view(np.uint32))


def test_digit_boundaries_text(tmp_path):
    vals = sorted({max(0, 10 ** k + e) for k in range(19) for e in (-1, 0, 1)} | {(1 << 63) - 1})
    v = np.array(vals, np.int64)
    p = tmp_path / "d.el"
    write_edges(p, v, v[::-1])
    assert p.read_bytes().split(b"\n")[:3] == [f"{vals[0]} {vals[-1]}".encode(),
                                                f"{vals[1]} {vals[-2]}".encode(),
                                                f"{vals[2]} {vals[-3]}".encode()]
    s, d, _, _ = _read(p)
    np.testing.assert_array_equal(s, v)
    np.testing.assert_array_equal(d, v[::-1])


def test_weight_text_is_short():
    assert format_float32(0.1) == "0.1"
    assert format_float32(17.0) == "17"
    assert format_float32(-2.5) == "-2.5"
    assert format_float32(1e-30) == "1e-30"
    assert float(np.float32(format_float32(123456.78))) == float(np.float32(123456.78))


def test_streaming_writer_and_gzip_multi_member(tmp_path):
    p = tmp_path / "a.el.gz"
    with EdgeWriter(p) as w:
        w.write([1, 2], [3, 4])
        w.write([5], [6])
    q = tmp_path / "b.el.gz"
    write_edges(q, [7, 8], [9, 10])
    both = tmp_path / "both.el.gz"
    both.write_bytes(p.read_bytes() + q.read_bytes())  # `cat a.gz b.gz` is a valid gzip stream
    s, d, _, _ = _read(both, chunk_bytes=3)
    assert s.tolist() == [1, 2, 5, 7, 8] and d.tolist() == [3, 4, 6, 9, 10]


def test_tsv_csv_separators(tmp_path):
    for ext, sep in (("tsv", b"\t"), ("csv", b","), ("el", b" ")):
        p = tmp_path / f"g.{ext}"
        write_edges(p, [1, 2], [3, 4])
        assert p.read_bytes() == b"1" + sep + b"3\n2" + sep + b"4\n"


# ------------------------------------------------------------------------------------------------
# text details

def test_weighted_detection_and_override(tmp_path):
    p = tmp_path / "g.txt"
    p.write_bytes(b"# header\n\n%x\n0 1 2.5\n1 2 3\n")
    s, d, w, r = _read(p, chunk_bytes=2)
    assert r.weighted and w.tolist() == [2.5, 3.0]
    s, d, w, r = _read(p, weighted=False)
    assert not r.weighted and w is None and s.tolist() == [0, 1]
    p2 = tmp_path / "g2.txt"
    p2.write_bytes(b"0 1\n")
    with pytest.raises(InputFormatError) as e:
        _read(p2, weighted=True)
    assert e.value.line == 1 and "3 columns" in str(e.value)
    p3 = tmp_path / "g.wel"
    p3.write_bytes(b"0 1\n")
    with pytest.raises(InputFormatError, match=r"g\.wel:1: .*3 columns"):
        _read(p3)


def test_only_comments_is_empty_graph(tmp_path):
    for body in (b"", b"# nothing\n", b"\n\n  \r\n%c", b"#x"):
        p = tmp_path / "e.el"
        p.write_bytes(body)
        s, d, w, r = _read(p, chunk_bytes=3)
        assert len(s) == 0 and len(d) == 0 and not r.weighted
    p = tmp_path / "e.bin64"
    p.write_bytes(b"")
    assert len(_read(p)[0]) == 0


def test_utf8_bom_and_header_hint(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbf3,4\r\n5,6\r\n")
    for cb in (1, 2, 4, 1 << 20):
        s, d, _, r = _read(p, chunk_bytes=cb)
        assert s.tolist() == [3, 5] and d.tolist() == [4, 6]
    q = tmp_path / "bom.mtx"
    q.write_bytes(b"\xef\xbb\xbf%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    assert _read(q)[0].tolist() == [0]
    h = tmp_path / "h.csv"
    h.write_bytes(b"src,dst\n1,2\n")
    with pytest.raises(InputFormatError, match=r"h\.csv:1: vertex ID 'src' .*header line"):
        _read(h)


def test_long_line_across_many_chunks(tmp_path):
    p = tmp_path / "g.el"
    p.write_bytes(b"1" + b" " * 5000 + b"2\n" + b"0" * 3000 + b"7 8\n")
    s, d, _, r = _read(p, chunk_bytes=7)
    assert s.tolist() == [1, 7] and d.tolist() == [2, 8] and r.lines_read == 2


def test_detect_format():
    assert detect_format("a/b.EL") == ("el", False)
    assert detect_format("x.mtx.gz") == ("mtx", True)
    assert detect_format("x.bin") == ("bin32", False)
    assert detect_format("x.wbin64.gz") == ("wbin64", True)
    assert detect_format("out.konect") == ("el", False)
    assert detect_format("x.dat", "bin64") == ("bin64", False)
    assert detect_format("x.dat", "wel.gz") == ("wel", True)
    with pytest.raises(ValueError):
        detect_format("x", "parquet")


def test_gzip_detected_by_magic_and_fake_gz_rejected(tmp_path):
    p = tmp_path / "g.el"
    p.write_bytes(gzip.compress(b"3 4\n"))
    assert _read(p)[0].tolist() == [3]
    q = tmp_path / "g.el.gz"
    q.write_bytes(b"3 4\n")
    with pytest.raises(InputFormatError, match="not gzip"):
        _read(q)


def test_reader_single_pass_and_close(tmp_path):
    p = tmp_path / "g.el.gz"
    write_edges(p, np.arange(10000), np.arange(10000))
    r = open_edges(p, chunk_bytes=1000)
    it = iter(r)
    next(it)
    r.close()  # stops the inflater thread mid-file
    with pytest.raises(RuntimeError):
        iter(r)
    with open_edges(p) as r2:
        assert sum(len(c.src) for c in r2) == 10000
        with pytest.raises(RuntimeError):
            iter(r2)


# ------------------------------------------------------------------------------------------------
# errors: exact file:line and offending text, whatever the chunk size

TEXT_ERRORS = [
    # (content, kwargs, line, what-regex, offending line text)
    (b"0 1\n1 x\n", {}, 2, r"vertex ID 'x' is not a non-negative integer", "1 x"),
    (b"0 1\n12x 3\n", {}, 2, r"vertex ID '12x' is not", "12x 3"),
    (b"0 1\n1 2 3\n", {}, 2, r"expected 2 columns", "1 2 3"),
    (b"0 1 1\n1 2\n", {}, 2, r"expected 3 columns", "1 2"),
    (b"0 1 1\n1 2 3 4\n", {}, 2, r"found more than 3", "1 2 3 4"),
    (b"0 1\n1 1234567890123456789012\n", {}, 2, r"above 2\^63-1", "1 1234567890123456789012"),
    (b"0 1\n# c\n\n1 2.5\n", {}, 4, r"vertex ID '2\.5' is not", "1 2.5"),
    (b"0 1\r\n\r\n2 -3\r\n", {}, 3, r"negative vertex ID -3", "2 -3"),
    (b"0 1\n5 12\n", {"max_id": 11}, 2, r"vertex ID 12 above max_id 11", "5 12"),
    (b"0 1\n9223372036854775808 1\n", {}, 2, r"above 2\^63-1", "9223372036854775808 1"),
    (b"0 1 1\n1 2 abc\n", {}, 2, r"weight 'abc' is not a number", "1 2 abc"),
    (b"0 1 1\n1 2 nan\n", {}, 2, r"bad weight 'nan'", "1 2 nan"),
    (b"0 1 1\n1 2 -inf\n", {}, 2, r"bad weight '-inf'", "1 2 -inf"),
    (b"0 1 1\n1 2 1e39\n", {}, 2, r"bad weight '1e39'", "1 2 1e39"),
    (b"0 1\n1 2\n3 4 5\n", {}, 3, r"expected 2 columns .* found 3", "3 4 5"),
    (b"0 1 2\n1 2\n", {}, 2, r"expected 3 columns .* found 2", "1 2"),
    (b"%c\n0 1 2 3\n", {}, 2, r"expected 2 or 3 columns", "0 1 2 3"),
    (b"0 1\n7\n", {}, 2, r"found 1", "7"),
    (b"0 1\n1,,2\n", {}, 2, r"empty field", "1,,2"),
    (b"0 1\n1 2\n3 4", {"max_id": 3}, 3, r"vertex ID 4 above max_id 3", "3 4"),  # no final newline
    # hints: a trailing comment read as a weight column; 4-byte IDs asked for and a larger one
    (b"0 1 # c\n", {}, 1, r"weight '#' is not a number \(a comment after an edge", "0 1 # c"),
    (b"0 1\n5000000000 2\n", {"max_id": (1 << 32) - 1}, 2,
     r"above max_id 4294967295 \(--id-width 8 holds larger IDs\)", "5000000000 2"),
]


@pytest.mark.parametrize("content,kw,line,what,text", TEXT_ERRORS)
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("tail", [False, True])
def test_text_errors(tmp_path, content, kw, line, what, text, gz, par, tail):
    if tail:  # bytes after the bad line, so the fast path (64 bytes of look-ahead) meets it
        content = content + b"\n" + b"# padding comment line\n" * 8
    p = tmp_path / ("bad.el.gz" if gz else "bad.el")
    p.write_bytes(gzip.compress(content) if gz else content)
    for cb in CHUNKS:
        with pytest.raises(InputFormatError) as e:
            _read(p, chunk_bytes=cb, **kw, **par)
        err = e.value
        assert err.path == str(p) and err.line == line and err.text == text, (cb, str(err))
        assert re.search(what, err.what), err.what
        assert str(err).startswith(f"{p}:{line}: ")


MTX_ERRORS = [
    (b"", 1, r"empty file"),
    (b"hello\n1 1 1\n", 1, r"not a MatrixMarket file"),
    (b"%%MatrixMarket matrix array real general\n2 2\n", 1, r"not 'coordinate'"),
    (b"%%MatrixMarket matrix coordinate complex general\n", 1, r"unsupported MatrixMarket field"),
    (b"%%MatrixMarket matrix coordinate real hermitian\n", 1, r"unsupported MatrixMarket symmetry"),
    (b"%%MatrixMarket vector coordinate real general\n", 1, r"object 'vector'"),
    (b"%%MatrixMarket matrix coordinate real\n", 1, r"need 5 words"),
    (b"%%MatrixMarket matrix coordinate pattern general\n% c\n", 2, r"ends before the size line"),
    (b"%%MatrixMarket matrix coordinate pattern general\n%c\n3 3\n", 3, r"bad MatrixMarket size line"),
    (b"%%MatrixMarket matrix coordinate pattern general\n3 3 x\n", 2, r"bad MatrixMarket size line"),
    (b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2\n2 3\n", 4, r"more entries than the 1"),
    (b"%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 2\n\n2 3\n", 5, r"has 2 entries .* promises 3"),
    (b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n0 2\n", 3, r"row index 0 in a 1-based"),
    (b"%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 5\n", 3, r"column index 5 out of range 1\.\.4"),
    (b"%%MatrixMarket matrix coordinate pattern general\n3 4 1\n4 1\n", 3, r"row index 4 out of range 1\.\.3"),
    (b"%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2\n", 3, r"expected 3 columns"),
    (b"%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 2 5\n", 3, r"expected 2 columns"),
    (b"%%MatrixMarket matrix coordinate real general\n3 3 1\n1 2 x\n", 3, r"weight 'x' is not a number"),
]


@pytest.mark.parametrize("content,line,what", MTX_ERRORS)
def test_mtx_errors(tmp_path, content, line, what, par):
    p = tmp_path / "bad.mtx"
    p.write_bytes(content)
    for cb in CHUNKS:
        with pytest.raises(InputFormatError) as e:
            _read(p, chunk_bytes=cb, **par)
        assert e.value.line == line, (cb, str(e.value))
        assert re.search(what, e.value.what), e.value.what
        assert str(e.value).startswith(f"{p}:{line}: ")


def test_parallel_first_error_wins_and_large_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "PARALLEL_MIN_BYTES", 1)
    rng = np.random.default_rng(3)
    n = 20000
    src, dst = rng.integers(0, 1 << 40, n), rng.integers(0, 50, n)
    p = tmp_path / "big.el"
    write_edges(p, src, dst)
    for threads in (2, 3, 8):
        for cb in (1 << 15, 1 << 22):
            s, d, _, r = _read(p, chunk_bytes=cb, threads=threads)
            np.testing.assert_array_equal(s, src)
            np.testing.assert_array_equal(d, dst)
            assert r.lines_read == n
    wts = rng.integers(1, 256, n).astype(np.float32) / 4
    for ext in ("mtx", "wel"):
        q = tmp_path / f"big.{ext}"
        write_edges(q, src, dst, wts)
        for cb in (1 << 15, 1 << 22):
            s, d, w, r = _read(q, chunk_bytes=cb, threads=3)
            np.testing.assert_array_equal(s, src)
            np.testing.assert_array_equal(w, wts)
    lines = p.read_bytes().split(b"\n")
    lines[15000] = b"1 bad"  # two errors: the earlier one (line 12001) must be reported
    lines[12000] = b"1 -2"
    p.write_bytes(b"\n".join(lines))
    for threads in (1, 2, 3, 8):
        with pytest.raises(InputFormatError) as e:
            _read(p, chunk_bytes=1 << 22, threads=threads)
        assert e.value.line == 12001 and e.value.text == "1 -2"


@pytest.mark.parametrize("bad,what", [(b"0 5", r"row index 0 in a 1-based"),
                                       (b"7 0", r"column index 0 in a 1-based"),
                                       (b"301 5", r"row index 301 out of range 1\.\.300"),
                                       (b"5 401", r"column index 401 out of range 1\.\.400"),
                                       (b"5 -1", r"negative column index")])
def test_mtx_errors_deep_in_a_big_file(tmp_path, bad, what, par):
    body = [b"%%MatrixMarket matrix coordinate pattern general", b"% c", b"300 400 1201"]
    body += [b"%d %d" % (1 + i % 300, 1 + i % 400) for i in range(1000)]
    body += [bad] + [b"1 1"] * 200
    p = tmp_path / "deep.mtx"
    p.write_bytes(b"\n".join(body) + b"\n")
    for cb in (97, 1 << 20):
        with pytest.raises(InputFormatError) as e:
            _read(p, chunk_bytes=cb, **par)
        assert e.value.line == 1004 and e.value.text == bad.decode(), str(e.value)
        assert re.search(what, e.value.what), e.value.what
    # the same file with the bad line fixed reads, 0-based, and one entry too many is caught
    body[1003] = b"300 400"
    p.write_bytes(b"\n".join(body) + b"\n")
    s, d, _, r = _read(p, **par)
    assert len(s) == 1201 and s.max() == 299 and d.max() == 399 and s.min() == 0
    p.write_bytes(b"\n".join(body + [b"2 2"]) + b"\n")
    with pytest.raises(InputFormatError, match="more entries than the 1201") as e:
        _read(p, chunk_bytes=1 << 20, **par)
    assert e.value.line == 1205


def test_mtx_symmetric_integer_and_comments(tmp_path):
    p = tmp_path / "s.mtx"
    p.write_bytes(b"%%MatrixMarket MATRIX Coordinate integer Symmetric\n% comment\n%\n"
                  b"  4 5 3\n2 1 7\n% mid comment\n4 4 -2\n\r\n5 5 1\n".replace(b"5 5 1", b"3 5 1"))
    for cb in CHUNKS:
        s, d, w, r = _read(p, chunk_bytes=cb)
        assert r.symmetric and r.header_rows == 4 and r.header_cols == 5 and r.header_vertices == 5
        assert s.tolist() == [1, 3, 2] and d.tolist() == [0, 3, 4] and w.tolist() == [7, -2, 1]
    with pytest.raises(InputFormatError, match="above max_id 2"):
        _read(p, max_id=2)
    pat = tmp_path / "p.mtx"
    pat.write_bytes(b"%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    with pytest.raises(InputFormatError, match="pattern"):
        _read(pat, weighted=True)
    s, d, w, r = _read(pat)
    assert w is None and s.tolist() == [0] and d.tolist() == [1]


def test_binary_truncated_names_offset(tmp_path):
    p = tmp_path / "t.bin32"
    p.write_bytes(np.arange(4, dtype="<u4").tobytes() + b"\x01\x02\x03\x04\x05")
    with pytest.raises(InputFormatError) as e:
        open_edges(p)
    assert e.value.line is None and "byte offset 16" in e.value.what and "5 trailing" in e.value.what
    q = tmp_path / "t.wbin64.gz"
    q.write_bytes(gzip.compress(b"\x00" * 20 * 3 + b"\x00" * 7))
    for cb in (1, 13, 1 << 20):
        with pytest.raises(InputFormatError, match="byte offset 60"):
            _read(q, chunk_bytes=cb)


def test_binary_bad_values(tmp_path):
    rec = np.zeros(3, np.dtype([("s", "<u8"), ("d", "<u8")]))
    rec["s"] = [1, 2, 1 << 63]
    p = tmp_path / "b.bin64"
    p.write_bytes(rec.tobytes())
    with pytest.raises(InputFormatError, match=r"above 2\^63-1 in record 2 at byte offset 32"):
        _read(p, chunk_bytes=16)
    p2 = tmp_path / "b.bin32"
    write_edges(p2, [1, 2, 30], [4, 5, 6])
    with pytest.raises(InputFormatError, match=r"source vertex ID 30 above max_id 10 in record 2 "
                       r"at byte offset 16"):
        _read(p2, max_id=10)
    wr = np.zeros(2, np.dtype([("s", "<u4"), ("d", "<u4"), ("w", "<f4")]))
    wr["w"] = [1.0, np.nan]
    p3 = tmp_path / "b.wbin32"
    p3.write_bytes(wr.tobytes())
    with pytest.raises(InputFormatError, match=r"bad weight nan .* record 1 at byte offset 12"):
        _read(p3)
    with pytest.raises(InputFormatError, match="bad weight"):
        _read(p3, weighted=False)  # dropped weights are still validated
    wr["w"][1] = 2.0
    p3.write_bytes(wr.tobytes())
    assert _read(p3, weighted=False)[2] is None
    with pytest.raises(ValueError):
        open_edges(p2, weighted=True)


def test_truncated_and_corrupt_gzip(tmp_path):
    data = gzip.compress(b"".join(b"%d %d\n" % (i, i + 1) for i in range(20000)))
    p = tmp_path / "t.el.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFormatError, match="truncated gzip"):
        _read(p)
    q = tmp_path / "c.el.gz"
    q.write_bytes(data[:100] + bytes(b ^ 0x55 for b in data[100:200]) + data[200:])
    with pytest.raises(InputFormatError, match="gzip"):
        _read(q)


def test_writer_validation(tmp_path):
    with pytest.raises(ValueError, match="negative"):
        write_edges(tmp_path / "a.el", [-1], [0])
    with pytest.raises(ValueError, match="finite"):
        write_edges(tmp_path / "a.wel", [1], [0], [np.nan])
    with pytest.raises(ValueError):
        write_edges(tmp_path / "a.wel", [1], [0])  # wel needs weights
    with pytest.raises(ValueError):
        write_edges(tmp_path / "a.bin32", [1], [0], [1.0])  # bin32 has no weights
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="promised 2"):
        with EdgeWriter(tmp_path / "m.mtx", num_vertices=3, num_edges=2) as w:
            w.write([0], [1])
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------------
# fuzz: mutated text against a naive validating parser (same grammar, written the obvious way)

_SEPCH = " \t\r,"
_FLOAT_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def naive_validate(data: bytes):
    """-> (error line or None, src, dst, weights-or-None) by the documented text grammar."""
    ncols = 0
    src, dst, w = [], [], []
    lines = data.split(b"\n")
    for no, raw in enumerate(lines, 1):
        s = raw.decode("latin-1")
        t = s.lstrip(" \t\r")
        if not t or t[0] in "#%":
            continue
        toks, i, bad = [], 0, False
        while i < len(t):
            j = i
            while j < len(t) and t[j] not in _SEPCH:
                j += 1
            toks.append(t[i:j])
            k = j
            while k < len(t) and t[k] in _SEPCH:
                k += 1
            if t[j:k].count(",") > 1:
                bad = True
            i = k
        if bad or len(toks) not in (2, 3) or (ncols and len(toks) != ncols):
            return no, None, None, None
        ncols = ncols or len(toks)
        ids = []
        for tok in toks[:2]:
            if not tok.isdigit() or not tok.isascii() or int(tok) > (1 << 63) - 1:
                return no, None, None, None
            ids.append(int(tok))
        if len(toks) == 3:
            if not _FLOAT_RE.fullmatch(toks[2]):
                return no, None, None, None
            with np.errstate(over="ignore"):
                wv = np.float32(float(toks[2]))
            if not np.isfinite(wv):
                return no, None, None, None
            w.append(wv)
        src.append(ids[0])
        dst.append(ids[1])
    return (None, np.array(src, np.int64), np.array(dst, np.int64),
            np.array(w, np.float32) if ncols == 3 else None)


def _mutate(rng, data: bytes) -> bytes:
    b = bytearray(data)
    alphabet = b"x-.+ \t\r,#%9e0\n"
    for _ in range(rng.integers(1, 4)):
        if not b:
            break
        i = int(rng.integers(0, len(b)))
        op = rng.integers(0, 3)
        c = alphabet[rng.integers(0, len(alphabet))]
        if op == 0:
            b[i] = c
        elif op == 1:
            b.insert(i, c)
        else:
            del b[i]
    return bytes(b)


def test_fuzz_mutated_text_against_naive(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "PARALLEL_MIN_BYTES", 1)
    rng = np.random.default_rng(2024)
    p = tmp_path / "f.txt"
    n_err = 0
    for case in range(150):
        weighted = bool(case % 2)
        lines = []
        for _ in range(int(rng.integers(1, 30))):
            ln = f"{rng.integers(0, 10 ** rng.integers(1, 6))} {rng.integers(0, 1000)}"
            if weighted:
                ln += " " + ("%.4g" % rng.standard_normal())
            lines.append(ln)
        data = _mutate(rng, ("\n".join(lines) + "\n").encode())
        p.write_bytes(data)
        line, es, ed, ew = naive_validate(data)
        for kw in ({"chunk_bytes": 3, "threads": 1}, {"chunk_bytes": 1 << 20, "threads": 3}):
            if line is not None:
                with pytest.raises(InputFormatError) as e:
                    _read(p, **kw)
                assert e.value.line == line, (data, kw, str(e.value))
            else:
                s, d, w, r = _read(p, **kw)
                np.testing.assert_array_equal(s, es, err_msg=repr(data))
                np.testing.assert_array_equal(d, ed, err_msg=repr(data))
                if ew is None:
                    assert w is None
                else:
                    np.testing.assert_array_equal(w, ew, err_msg=repr(data))
        n_err += line is not None
    assert 20 < n_err < 140  # the mutations hit both valid and invalid inputs


def test_fast_and_general_weight_paths_agree(tmp_path):
    # the fast path takes `digits[.digits]` weights; a leading '+' forces the general parser
    rng = np.random.default_rng(8)
    toks = [f"{x:.{int(p)}f}" for x, p in zip(rng.random(3000) * 10.0 ** rng.integers(-3, 9, 3000),
                                               rng.integers(0, 12, 3000))]
    toks += ["0", "0.0", "5.", ".5", "16777217", "123456789012345", "0.000000000000001"]
    fast = tmp_path / "fast.wel"
    slow = tmp_path / "slow.wel"
    fast.write_text("".join(f"1 2 {t}\n" for t in toks))
    slow.write_text("".join(f"1 2 +{t}\n" for t in toks))
    wf = _read(fast)[2]
    ws = _read(slow)[2]
    np.testing.assert_array_equal(wf.view(np.uint32), ws.view(np.uint32))
    ref = np.array([np.float32(float(t)) for t in toks], np.float32)
    assert np.mean(wf == ref) > 0.999  # decimal -> float64 -> float32 can differ by 1 ulp, rarely
    np.testing.assert_allclose(wf, ref, rtol=2 ** -23)


@pytest.mark.parametrize("fmt", ["bin32", "bin64"])
def test_binary_read_ahead_chunks(tmp_path, fmt):
    """Plain binary files are read ahead in whole pages (O_DIRECT where allowed) and converted in
    parallel parts: many chunks, a last partial page, and a bad ID found in a later chunk with
    its own record number."""
    rng = np.random.default_rng(5)
    m = 3001                                  # 24,008 / 48,016 bytes: not whole pages
    src = rng.integers(0, 1 << 20, m)
    dst = rng.integers(0, 1 << 20, m)
    p = tmp_path / f"g.{fmt}"
    write_edges(p, src, dst)
    for cb, threads in ((1, 1), (5000, 2), (1 << 20, 2)):
        s, d, w, r = _read(p, chunk_bytes=cb, threads=threads)
        np.testing.assert_array_equal(s, src)
        np.testing.assert_array_equal(d, dst)
        assert w is None and r.edges_read == m and r.bytes_read == os.path.getsize(p)
    dst[2500] = 1 << 21
    write_edges(p, src, dst)
    rs = 8 if fmt == "bin32" else 16
    with pytest.raises(InputFormatError, match=rf"destination vertex ID {1 << 21} above max_id "
                       rf"{(1 << 21) - 1} in record 2500 at byte offset {2500 * rs}"):
        _read(p, chunk_bytes=1, max_id=(1 << 21) - 1)


def test_text_read_ahead_blocks(tmp_path):
    """Text in blocks of AHEAD_MIN_CHUNK or more is read ahead by a thread (O_DIRECT where
    allowed): lines cut by every block boundary, a line longer than a block, comments, a
    Windows line end and a file that does not end in a newline all parse as with small blocks
    read in the parsing thread; a bad line in a later block is reported with its own number."""
    from graphene_py.partition.readers import AHEAD_MIN_CHUNK
    rng = np.random.default_rng(11)
    m = 40_000
    src = rng.integers(0, 1 << 40, m)
    dst = rng.integers(0, 1 << 40, m)
    lines = [f"{a}\t{b}" if i % 7 else f"{a} {b}" for i, (a, b) in enumerate(zip(src, dst))]
    lines[100] = "# a comment\n" + lines[100]
    lines[2000] = lines[2000] + " " * (3 * AHEAD_MIN_CHUNK)     # one line over three blocks
    lines[3000] = lines[3000] + "\r"
    body = "\n".join(lines)                                    # no newline at the end
    p = tmp_path / "g.el"
    p.write_text(body)
    assert os.path.getsize(p) > 8 * AHEAD_MIN_CHUNK
    for cb in (AHEAD_MIN_CHUNK, AHEAD_MIN_CHUNK + 4096 + 1):
        s, d, _, r = _read(p, chunk_bytes=cb)
        np.testing.assert_array_equal(s, src)
        np.testing.assert_array_equal(d, dst)
        assert r.lines_read == m + 1 and r.bytes_read == os.path.getsize(p)
    s2, d2, _, _ = _read(p, chunk_bytes=1000)                   # the parsing thread's reads
    np.testing.assert_array_equal(s2, src)
    lines[30000] = f"{src[30000]} x{dst[30000]}"
    p.write_text("\n".join(lines))
    with pytest.raises(InputFormatError, match=r"g\.el:30002: "):
        _read(p, chunk_bytes=AHEAD_MIN_CHUNK)


def test_read_ahead_names_a_file_that_shrank(tmp_path):
    """A file shorter than the size the reader planned for (it shrank while being read) is a
    clear OSError naming the file and the missing bytes, not short or stale data."""
    from graphene_py.partition.readers import _ReadAhead
    p = tmp_path / "s.bin32"
    p.write_bytes(bytes(range(256)) * 64)                   # 16 KiB
    ra = _ReadAhead(str(p), 0, 8192, 3 * 8192, {})          # planned for 24 KiB
    try:
        b, pos = ra.next()
        assert pos == 8192 and bytes(b) == (bytes(range(256)) * 32)
        b, pos = ra.next()
        assert pos == 16384
        with pytest.raises(OSError, match=r"s\.bin32: 8192 bytes missing at offset 16384"):
            ra.next()
    finally:
        ra.close()
