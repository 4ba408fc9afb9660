"""Graph generators: determinism, exact sizes, Kronecker statistics, files through the readers."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from graphene_py import generate as gen
from graphene_py.partition.readers import read_edges

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _all(it):
    chunks = list(it)
    if not chunks:
        return np.empty(0, np.int64), np.empty(0, np.int64), None
    cols = list(zip(*chunks))
    out = [np.concatenate(c) for c in cols]
    return out[0], out[1], (out[2] if len(out) == 3 else None)


def test_kron_exact_size_range_and_dtypes():
    for scale, ef in [(0, 3), (1, 1), (5, 16), (10, 7)]:
        s, d, _ = _all(gen.kronecker(scale, ef, chunk=1000))
        assert len(s) == len(d) == ef << scale
        assert s.dtype == np.int64 and d.dtype == np.int64
        assert s.min() >= 0 and s.max() < 1 << scale and d.max() < 1 << scale
    assert len(_all(gen.kronecker(4, 0))[0]) == 0


def test_kron_deterministic_and_chunk_independent():
    a = _all(gen.kronecker(11, 8, seed=5, chunk=1 << 20))
    b = _all(gen.kronecker(11, 8, seed=5, chunk=777))
    c = _all(gen.kronecker(11, 8, seed=6))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert (a[0] != c[0]).mean() > 0.9  # a different seed gives a different graph
    for ch in gen.kronecker(11, 8, seed=5, chunk=777):
        assert len(ch[0]) <= 777


def test_kron_permutation_is_a_relabelling():
    raw = _all(gen.kronecker(10, 8, seed=9, permute=False))
    per = _all(gen.kronecker(10, 8, seed=9))
    perm = gen.kron_permutation(10, seed=9)
    assert sorted(perm.tolist()) == list(range(1 << 10))
    np.testing.assert_array_equal(perm[raw[0]], per[0])
    np.testing.assert_array_equal(perm[raw[1]], per[1])
    # unpermuted Kronecker puts the hubs at low IDs; the permutation spreads them out
    deg_raw = np.bincount(raw[0], minlength=1 << 10)
    assert np.argmax(deg_raw) == 0


def test_kron_quadrant_probabilities():
    # each level chooses quadrant a/b/c/d with probability .57/.19/.19/.05: check the top bit
    scale = 12
    s, d, _ = _all(gen.kronecker(scale, 16, seed=1, permute=False))
    m = len(s)
    for bit in (scale - 1, 0, scale // 2):
        sb = (s >> bit) & 1
        db = (d >> bit) & 1
        freq = np.array([np.mean((sb == i) & (db == j)) for i in (0, 1) for j in (0, 1)])
        se = np.sqrt(0.25 / m)
        np.testing.assert_allclose(freq, [0.57, 0.19, 0.19, 0.05], atol=6 * se)
    # other initiators are honoured too
    s2, d2, _ = _all(gen.kronecker(8, 64, a=0.25, b=0.25, c=0.25, seed=3, permute=False))
    assert abs(np.mean(s2 >> 7) - 0.5) < 0.01 and abs(np.mean(d2 >> 7) - 0.5) < 0.01


def test_kron_degree_skew_vs_uniform():
    s, d, _ = _all(gen.kronecker(14, 16))
    deg = np.bincount(np.concatenate([s, d]), minlength=1 << 14)
    assert deg.max() > 50 * deg.mean()
    assert (deg == 0).mean() > 0.1  # Kronecker graphs have many isolated vertices
    us, ud, _ = _all(gen.uniform(1 << 14, 16 << 14))
    udeg = np.bincount(np.concatenate([us, ud]), minlength=1 << 14)
    assert udeg.max() < 2 * udeg.mean()


def test_uniform_properties():
    n, m = 1000, 200_000
    s, d, w = _all(gen.uniform(n, m, seed=4, weights=True, chunk=9999))
    assert len(s) == m and s.min() >= 0 and s.max() == n - 1 and d.max() == n - 1
    counts = np.bincount(s, minlength=n)
    assert abs(counts.mean() - m / n) < 1e-9 and counts.std() < 2 * np.sqrt(m / n)
    assert w.dtype == np.float32 and w.min() == 1 and w.max() == 255
    assert np.all(w == np.round(w))
    s2, d2, w2 = _all(gen.uniform(n, m, seed=4, weights=True))
    np.testing.assert_array_equal(s, s2)
    np.testing.assert_array_equal(w, w2)
    assert len(_all(gen.uniform(5, 0))[0]) == 0
    with pytest.raises(ValueError):
        list(gen.uniform(0, 5))


def test_kron_weights_gapbs_range():
    s, d, w = _all(gen.kronecker(10, 16, weights=True))
    s0, d0, _ = _all(gen.kronecker(10, 16))
    np.testing.assert_array_equal(s, s0)  # weights do not change the edges
    assert w.min() == 1 and w.max() == 255 and np.all(w == np.round(w))
    hist = np.bincount(w.astype(np.int64), minlength=256)[1:]
    assert hist.min() > 0.5 * hist.mean()


def test_bad_arguments():
    with pytest.raises(ValueError):
        list(gen.kronecker(-1))
    with pytest.raises(ValueError):
        list(gen.kronecker(4, a=0.6, b=0.3, c=0.3))
    with pytest.raises(ValueError):
        gen.generate("smallworld", scale=3)


@pytest.mark.parametrize("fmt,weighted", [("el", False), ("wel", True), ("mtx", True),
                                          ("bin32.gz", False), ("wbin64", True), ("el.gz", True)])
def test_generate_to_file_round_trip(tmp_path, fmt, weighted):
    p = tmp_path / f"k.{fmt}"
    info = gen.generate_to_file(str(p), "kron", scale=9, edge_factor=5, seed=2, weighted=weighted,
                                chunk=1000)
    assert info["num_edges"] == 5 << 9 and info["num_vertices"] == 1 << 9
    assert info["bytes"] == os.path.getsize(p)
    s, d, w, r = read_edges(p, chunk_bytes=4096)
    es, ed, ew = _all(gen.kronecker(9, 5, seed=2, weights=weighted))
    np.testing.assert_array_equal(s, es)
    np.testing.assert_array_equal(d, ed)
    if weighted:
        np.testing.assert_array_equal(w, ew)
    else:
        assert w is None
    if fmt == "mtx":
        assert r.header_vertices == 1 << 9


def test_generate_uniform_to_file(tmp_path):
    p = tmp_path / "u.el"
    info = gen.generate_to_file(str(p), "uniform", n=300, m=1234, seed=1)
    s, d, _, _ = read_edges(p)
    assert len(s) == 1234 == info["num_edges"] and s.max() < 300


def test_tools_generate_cli(tmp_path):
    out = tmp_path / "k.wel"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "generate.py"), "kron",
                        "--scale", "6", "--edge-factor", "4", "--weighted", "--seed", "3",
                        "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["num_edges"] == 256 and info["fmt"] == "wel"
    s, d, w, _ = read_edges(out)
    es, ed, ew = _all(gen.kronecker(6, 4, seed=3, weights=True))
    np.testing.assert_array_equal(s, es)
    np.testing.assert_array_equal(w, ew)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "generate.py"), "kron",
                        "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--scale" in r.stderr
    el = tmp_path / "u.el"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "generate.py"), "uniform",
                        "-n", "100", "-m", "500", "-o", str(el), "--read-back",
                        "--compare-loadtxt"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["read_edges"] == 500 and info["loadtxt_agrees"] is True
