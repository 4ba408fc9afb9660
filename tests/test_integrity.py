"""Damaged data on disk: a clear error naming the file, or the correct answer. Never a segfault,
never a silently wrong answer.

Every file kind of a dataset (adjacency, offsets, weights, page tables, manifest, pointer, relabel
map) is damaged in place — byte flips at several positions, truncation, two files of equal size
swapped, a NaN weight — and the algorithms run on it through the SSD path (page checks on), the
in-memory path and the CLI.
"""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import graphene_py as gp
from graphene_py.errors import GrapheneError
from graphene_py.graph import Graph
from graphene_py.partition import partition_arrays
from tests import graphs


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    """A weighted 2x2 dataset with in-edges on 2 disks and the reference results."""
    root = tmp_path_factory.mktemp("integrity")
    disks = []
    for i in range(2):
        (root / f"d{i}").mkdir()
        disks.append(str(root / f"d{i}"))
    g = graphs.powerlaw(scale=11, edge_factor=8)
    w = np.random.default_rng(3).integers(1, 20, len(g.src)).astype(np.float32)
    G = partition_arrays(g.src, g.dst, weights=w, disks=disks, name="dmg", rows=2, cols=2,
                         in_edges=True, register=False)
    path = G.path
    ref = {
        "bfs": gp.bfs(G, src=0).depth,
        "pagerank": gp.pagerank(G, variant="pull").scores,
        "wcc": gp.wcc(G).labels,
        "sssp": gp.sssp(G, src=0).dist,
        "spmv": gp.spmv(G).y,
    }
    G.close()
    return path, ref


def run_algo(name, G, **kw):
    if name == "bfs":
        return gp.bfs(G, src=0, **kw).depth
    if name == "pagerank":
        return gp.pagerank(G, variant="pull", **kw).scores
    if name == "wcc":
        return gp.wcc(G, **kw).labels
    if name == "sssp":
        return gp.sssp(G, src=0, **kw).dist
    return gp.spmv(G, **kw).y


def same(name, a, b):
    if name in ("pagerank", "spmv"):
        return np.allclose(a, b, rtol=1e-6, atol=1e-12)
    return np.array_equal(a, b)


class Damage:
    """Damage files in place; undo() restores their bytes."""

    def __init__(self):
        self.saved = {}

    def _save(self, path):
        if path not in self.saved:
            with open(path, "rb") as f:
                self.saved[path] = f.read()

    def flip(self, path, pos, bit=0x04):
        self._save(path)
        with open(path, "r+b") as f:
            f.seek(pos)
            b = f.read(1)
            f.seek(pos)
            f.write(bytes([b[0] ^ bit]))

    def write(self, path, pos, data):
        self._save(path)
        with open(path, "r+b") as f:
            f.seek(pos)
            f.write(data)

    def truncate(self, path, size):
        self._save(path)
        os.truncate(path, size)

    def swap(self, a, b):
        self._save(a)
        self._save(b)
        tmp = a + ".swap"
        os.rename(a, tmp)
        os.rename(b, a)
        os.rename(tmp, b)

    def undo(self):
        for path, data in self.saved.items():
            with open(path, "wb") as f:
                f.write(data)
        self.saved = {}


def outcome(path, name, **kw):
    """'error: ...' for a GrapheneError naming a file, or 'ok'/'WRONG' against the reference."""
    try:
        G = Graph.open(path)
        try:
            got = run_algo(name, G, **kw)
        finally:
            G.close()
    except GrapheneError as e:
        return f"error: {e}"
    return got


def cases(path):
    """(label, function damaging the dataset) for every file kind."""
    G = Graph.open(path)
    p0, p3 = G.partitions[0], G.partitions[-1]
    q = G.in_partitions[1]
    out = []

    def at(p, kind, frac):
        size = os.path.getsize(p.adj_path if kind == "adj" else p.wgt_path)
        valid = p.num_edges * (p.id_width if kind == "adj" else 4)
        return min(size - 1, max(0, int(valid * frac)))

    for p, tag in ((p0, "out0"), (p3, "out3"), (q, "in1")):
        for frac in (0.0, 0.37, 0.99):
            out.append((f"{tag}.adj flip@{frac}",
                        lambda d, p=p, f=frac: d.flip(p.adj_path, at(p, "adj", f), 0x01)))
            out.append((f"{tag}.adj high flip@{frac}",
                        lambda d, p=p, f=frac: d.flip(p.adj_path, at(p, "adj", f) | 3, 0x80)))
        out.append((f"{tag}.off flip", lambda d, p=p: d.flip(p.off_path, 8 * ((p.row_hi - p.row_lo) // 2))))
        out.append((f"{tag}.off high flip", lambda d, p=p: d.flip(p.off_path, 8 * ((p.row_hi - p.row_lo) // 3) + 6, 0x40)))
        out.append((f"{tag}.adj truncated", lambda d, p=p: d.truncate(p.adj_path, max(0, p.adj_bytes - 512))))
        out.append((f"{tag}.off truncated", lambda d, p=p: d.truncate(p.off_path, 8)))
        if p.wgt_path:
            out.append((f"{tag}.wgt flip", lambda d, p=p: d.flip(p.wgt_path, at(p, "wgt", 0.5), 0x10)))
            out.append((f"{tag}.wgt NaN", lambda d, p=p: d.write(p.wgt_path, at(p, "wgt", 0.5) & ~3,
                                                                   struct.pack("<f", float("nan")))))
            out.append((f"{tag}.wgt.pcrc flip", lambda d, p=p: d.flip(
                os.path.join(os.path.dirname(p.adj_path), p.pages["wgt"]["file"]), 0)))
        out.append((f"{tag}.adj.pcrc flip", lambda d, p=p: d.flip(
            os.path.join(os.path.dirname(p.adj_path), p.pages["adj"]["file"]), 0)))
    # two files of equal size swapped (adjacency of two partitions, offsets of two columns)
    by_size = {}
    for p in G.partitions + G.in_partitions:
        by_size.setdefault((os.path.dirname(p.adj_path), p.adj_bytes), []).append(p)
    pairs = [v for v in by_size.values() if len(v) >= 2]
    if pairs:
        a, b = pairs[0][:2]
        out.append(("adj files swapped", lambda d, a=a, b=b: d.swap(a.adj_path, b.adj_path)))
    offs = {}
    for p in G.partitions:
        offs.setdefault((os.path.dirname(p.off_path), p.row_lo, p.row_hi), []).append(p)
    pairs = [v for v in offs.values() if len(v) >= 2]
    if pairs:
        a, b = pairs[0][:2]
        out.append(("off files swapped", lambda d, a=a, b=b: d.swap(a.off_path, b.off_path)))
    man = os.path.join(G.dirs[1], "manifest.json")
    out.append(("manifest flip", lambda d: d.flip(man, os.path.getsize(man) // 2, 0x01)))
    out.append(("manifest truncated", lambda d: d.truncate(man, os.path.getsize(man) // 2)))
    cur = os.path.join(G.path, "CURRENT")
    out.append(("pointer damaged", lambda d: d.flip(cur, 15, 0x01)))
    G.close()
    return out


ALGOS = ["bfs", "pagerank", "wcc", "sssp", "spmv"]


@pytest.mark.parametrize("mode", ["ssd", "memory"])
def test_every_damage_is_an_error_or_correct(ds, mode):
    path, ref = ds
    kw = {"check": True} if mode == "ssd" else {"in_memory": True}
    from graphene_py.iterator.core import drop_memory_cache
    bad = []
    errors = 0
    for label, damage in cases(path):
        d = Damage()
        damage(d)
        try:
            for name in ALGOS:
                drop_memory_cache()
                got = outcome(path, name, **kw)
                if isinstance(got, str):
                    errors += 1
                    msg = got
                    # a clear error names the damaged file (or the dataset/pointer)
                    if not any(s in msg for s in ("damaged", "checksum", "manifest", "bytes",
                                                  "offsets", "pointer", "version")):
                        bad.append((label, name, msg))
                elif not same(name, got, ref[name]):
                    bad.append((label, name, "WRONG ANSWER"))
        finally:
            d.undo()
            drop_memory_cache()
    assert not bad, bad
    assert errors > 0


def test_checks_off_never_crash(ds):
    """With page checks off an in-range flip may go unnoticed, but out-of-range IDs, bad offsets
    and NaN weights are still errors, and nothing crashes the process."""
    path, ref = ds
    for label, damage in cases(path):
        d = Damage()
        damage(d)
        try:
            for name in ("bfs", "spmv"):
                got = outcome(path, name, check=False)
                if "high flip" in label and ".adj" in label and isinstance(got, np.ndarray):
                    assert same(name, got, ref[name]), (label, name)
                if "NaN" in label and label.startswith("out") and name == "spmv":
                    assert isinstance(got, str) and "not a finite number" in got, (label, got)
        finally:
            d.undo()


def test_cli_damage_exit_1_no_traceback(ds, tmp_path):
    path, _ = ds
    G = Graph.open(path)
    p = G.partitions[0]
    G.close()
    d = Damage()
    d.flip(p.adj_path, 4, 0x80)
    try:
        exe = os.path.join(os.path.dirname(sys.executable), "graphene")
        for extra in ([], ["--in-memory"], ["--no-check"]):
            r = subprocess.run([exe, "run", "pagerank", "--graph", path, "-q", *extra],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 1, (extra, r.returncode, r.stderr)
            assert r.stderr.startswith("Error: damaged data: ") and p.adj_path in r.stderr
            assert "Traceback" not in r.stderr
    finally:
        d.undo()


def test_verify_reports_page_damage(ds):
    path, _ = ds
    G = Graph.open(path)
    p = G.partitions[1]
    d = Damage()
    d.flip(p.adj_path, p.adj_bytes - 600)   # a page in the middle/end, not the head
    try:
        probs = G.verify(deep=True)
        assert any("page at byte offset" in x and p.adj_path in x for x in probs)
    finally:
        d.undo()
        G.close()


def test_crc32c_reference_values_and_both_paths():
    """CRC32C: the standard check value, hardware (3 streams joined) and software paths equal on
    every length and alignment around the stream size, and incremental use."""
    from graphene_py import _uring
    assert _uring.crc32c(b"123456789") == 0xE3069283
    rng = np.random.default_rng(4)
    for n in (0, 1, 7, 8, 9, 4079, 4080, 4081, 4095, 4096, 8192, 3 * 1360 * 3 + 5, 1 << 16):
        b = rng.integers(0, 256, n + 3, dtype=np.uint8).tobytes()
        for off in (0, 1, 3):
            x = b[off:off + n]
            assert _uring.crc32c(x) == _uring.crc32c(x, 0, True), (n, off)
            assert _uring.crc32c(x[n // 3:], _uring.crc32c(x[:n // 3])) == _uring.crc32c(x)
    pages = np.frombuffer(_uring.page_crcs(b, 4096), "<u4")
    assert [int(x) for x in pages] == [_uring.crc32c(b[i:i + 4096]) for i in range(0, len(b), 4096)]


@pytest.mark.parametrize("block", [1, 3, 4, 1 << 22])
def test_offsets_order_check_finds_the_first_decrease_across_blocks(monkeypatch, block):
    """The offsets' order check compares CHECK_BLOCK entries at a time: the first decrease is
    found wherever it falls (inside a block, on a block's first entry against the one before,
    at the very end), equal neighbours are no decrease, and short arrays have none."""
    from graphene_py import integrity
    monkeypatch.setattr(integrity, "CHECK_BLOCK", block)
    off = np.arange(10, 50, 2, dtype="<u8")         # 20 entries, rising
    assert integrity._first_decrease_of(off) == -1
    for i in (1, 4, 5, 8, 9, 13, 19):
        bad = off.copy()
        bad[i] = bad[i - 1] - 1
        bad[i + 1:] = np.maximum(bad[i + 1:], bad[i])      # the only decrease is at i
        assert integrity._first_decrease_of(bad) == i
        bad[min(i + 2, 19)] = 0                              # a later one does not hide it
        assert integrity._first_decrease_of(bad) == i
    flat = np.full(9, 7, dtype="<u8")
    assert integrity._first_decrease_of(flat) == -1
    assert integrity._first_decrease_of(off[:1]) == -1 and integrity._first_decrease_of(off[:0]) == -1


def test_nonfinite_weights_found_at_their_index():
    """The weights' check (integrity._nonfinite): the first NaN or infinity in lo..hi, none for
    the largest finite floats, zeros of either sign and denormals."""
    from graphene_py.integrity import _nonfinite
    w = np.arange(1, 5001, dtype=np.float32)
    w[10:15] = [np.finfo(np.float32).max, -np.finfo(np.float32).max, 0.0, -0.0, 1e-45]
    assert _nonfinite(w, 0, len(w)) == -1
    for bad in (np.nan, np.inf, -np.inf):
        for at in (0, 63, 4999):
            x = w.copy()
            x[at] = bad
            assert _nonfinite(x, 0, len(x)) == at
            assert _nonfinite(x, at + 1, len(x)) == -1
            assert _nonfinite(x, 0, at) == -1
