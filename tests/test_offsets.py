"""Compact offsets (graphene_py/io/offsets.py): what an iterator holds instead of its partitions'
whole offsets arrays, and the degrees read from them."""
from __future__ import annotations

import numpy as np
import pytest

from graphene_py.io import offsets as co


def _partitions(rng, R, C, n):
    """Offsets of an R x C grid over n vertices, as an iterator concatenates them: list lengths
    of every size (runs of empty lists, groups that span more than 65535, a hub), the row
    bounds random. Returns (full offsets, part_base, row_lo, row_hi, degree per vertex)."""
    bounds = np.concatenate([[0], np.sort(rng.choice(np.arange(1, n), R - 1, replace=False)),
                             [n]]) if R > 1 else np.array([0, n])
    fulls, base, lo, hi = [], [0], [], []
    deg = np.zeros(n, dtype=np.int64)
    for r in range(R):
        for _ in range(C):
            L = int(bounds[r + 1] - bounds[r])
            d = rng.integers(0, int(rng.choice([2, 60, 700, 4000])), L)
            if L and rng.random() < 0.5:
                d[rng.integers(0, L)] = 100_000             # a hub: its group is held whole
            if L > 300 and rng.random() < 0.5:
                d[100:300] = 0                              # a run of empty lists
            fulls.append(np.concatenate([[0], np.cumsum(d)]))
            base.append(base[-1] + L + 1)
            lo.append(int(bounds[r]))
            hi.append(int(bounds[r + 1]))
            deg[bounds[r]:bounds[r + 1]] += d
    return np.concatenate(fulls), np.array(base), lo, hi, deg


@pytest.mark.parametrize("dtype", [np.int32, np.uint64, np.int64])
def test_compact_offsets_decode_to_the_same_values(dtype):
    rng = np.random.default_rng(7)
    for _ in range(20):
        R, C = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        full, _, _, _, deg = _partitions(rng, R, C, 2000)
        O = co.compact(full.astype(dtype))
        assert O[0].dtype == np.uint16
        assert np.array_equal(co.decode(O), full)
        b0 = int(rng.integers(0, len(full)))
        assert np.array_equal(co.decode(O, b0, len(full), dtype=np.int32), full[b0:])
        # mostly 2 bytes per entry: a group is whole only where its values span > 65535
        assert co.nbytes(O) <= co.bound_bytes_of(len(full), int(deg.sum()), R * C)


def test_compact_offsets_of_nothing_and_of_one_entry():
    for full in (np.zeros(0, np.int64), np.zeros(1, np.int64), np.array([0, 70_000])):
        O = co.compact(full)
        assert np.array_equal(co.decode(O), full)


def test_degrees_from_compact_offsets_on_grids():
    """deg_at (one vertex) and degrees_into (a block of vertices) sum a vertex's list lengths
    over its row's partitions, on grids of 1..3 rows and columns with uneven row bounds."""
    rng = np.random.default_rng(3)
    n = 3000
    for _ in range(30):
        R, C = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        full, base, lo, hi, deg = _partitions(rng, R, C, n)
        O = co.compact(full)
        dd = co.grid(base, lo, hi, n)
        assert co.n_of(dd) == n
        out = np.empty(n, dtype=np.int64)
        step = int(rng.choice([1, 7, 128, co.DEG_BLOCK]))
        for v0 in range(0, n, step):
            co.degrees_into(O, dd, v0, min(v0 + step, n), out[v0:])
        assert np.array_equal(out, deg)
        for v in rng.integers(0, n, 200):
            assert co.deg_at(O, dd, int(v)) == deg[v]


def test_grid_descriptor_refuses_rows_that_do_not_tile():
    base = np.array([0, 11, 22])
    assert co.grid(base, [0, 0], [10, 10], 10) is not None       # one row, two columns
    assert co.grid(base, [0, 5], [5, 10], 10) is not None        # two rows, one column
    assert co.grid(base, [0, 6], [5, 10], 10) is None            # a gap
    assert co.grid(base, [0, 0], [5, 10], 10) is None            # rows of other widths
    deg = np.array([3, 0, 70_000, 1])
    O, dd = co.of_degrees(deg)
    assert [co.deg_at(O, dd, v) for v in range(4)] == deg.tolist()
