"""Kept lists (EdgeMap.keep_lists, iterator/shortlists.py), an engine feature any algorithm can use:
a masked superstep copies the short lists it reads into RAM, and later ones serve them from there
(on a helper thread with thread id em.threads) instead of reading their blocks — with exactly the
answers of supersteps that read everything."""

import numpy as np
import pytest
from numba import njit

from graphene_py.iterator.edgemap import EdgeMap, Update
from graphene_py.partition import partition_arrays
from tests import graphs
from tests.test_cache import _disks

SSD = {"engine": "uring", "buffer_mb": 2, "threads": 3}


@njit(cache=True)
def _always(v, state):
    return True


@njit(cache=True)
def _sum(v, nbrs, wts, tid, state):
    """Per vertex: sum and count of its neighbours' IDs, in per-thread rows."""
    acc, cnt = state
    for i in range(nbrs.shape[0]):
        acc[tid, v] += np.int64(nbrs[i])
    cnt[tid, v] += nbrs.shape[0]


SUM = Update(_always, _sum, combine="sum", writes=(0, 1))


@pytest.fixture(scope="module", params=[(1, 1), (3, 2)], ids=["1x1", "3x2"])
def ds(request, tmp_path_factory):
    """A power-law graph with in-edges: many short lists, hubs spanning blocks; on a 3x2 grid a
    list comes in chunks from several column partitions (which claim kept slots concurrently)."""
    g = graphs.powerlaw(scale=12, edge_factor=8, seed=5)
    rows, cols = request.param
    d = partition_arrays(g.src, g.dst, num_vertices=g.n, name="kept", rows=rows, cols=cols,
                         disks=_disks(tmp_path_factory.mktemp("kept"), 2), in_edges=True,
                         register=False, durable=False)
    return d, g


def _expected(d, direction, mask):
    """From the stored lists (the dataset merges duplicate edges)."""
    indptr, indices, _ = d.to_csr(direction)
    c = np.diff(indptr)
    src = np.repeat(np.arange(len(c)), c)
    s = np.bincount(src, weights=indices.astype(np.float64), minlength=len(c)).astype(np.int64)
    on = mask != 0
    return np.where(on, s, 0), np.where(on, c, 0)


@pytest.mark.parametrize("direction", ["out", "in"])
def test_kept_lists_served_from_ram_with_the_same_answers(ds, direction):
    d, g = ds
    n = g.n
    rng = np.random.default_rng(1)
    with EdgeMap(d, pull=True, **SSD) as em:
        kept = em.keep_lists(direction)
        assert kept is not None and kept.degree_max >= 1
        deg = em.degree(direction)
        short = (deg > 0) & (deg <= kept.degree_max)
        T = em.threads
        served = []
        for step in range(4):
            mask = (rng.random(n) < 0.6).astype(np.uint8)
            before = mask.copy()
            done_before = kept.kdone.copy()
            acc = np.zeros((T + 1, n), np.int64)
            cnt = np.zeros((T + 1, n), np.int64)
            st = em.masked((acc, cnt), SUM, mask, direction)
            assert np.array_equal(mask, before)          # the caller's mask is left as it was
            s, c = _expected(d, direction, mask)
            assert np.array_equal(acc.sum(axis=0), s), step
            assert np.array_equal(cnt.sum(axis=0), c), step
            assert st["active_edges"] == int(c.sum())
            served.append(st["kept_lists"])
            # exactly the masked vertices whose lists were complete in RAM were served from it
            assert served[-1] == int(np.count_nonzero(before & done_before))
            if step == 0:
                # the lists the first superstep read are kept, and only those: every short one of
                # the mask, complete
                done = kept.kdone != 0
                assert np.array_equal(done, short & (before != 0))
                assert served[0] == 0
        # later supersteps serve the kept lists (row T: the helper thread) and read less
        assert all(k > 0 for k in served[1:])
        assert cnt[T].any()
        # nothing but short lists is ever kept
        assert not (kept.kdone != 0)[~short].any()


def test_budget_zero_keeps_nothing(ds):
    d, g = ds
    with EdgeMap(d, **SSD) as em:
        kept = em.keep_lists("out", budget=0)
        assert kept.degree_max == 0 and kept.entries == 0
        mask = np.ones(g.n, np.uint8)
        acc = np.zeros((em.threads + 1, g.n), np.int64)
        cnt = np.zeros_like(acc)
        for _ in range(2):
            st = em.masked((acc, cnt), SUM, mask, "out")
            assert st["kept_lists"] == 0
        assert np.array_equal(cnt.sum(axis=0), 2 * np.diff(d.to_csr("out")[0]))


def test_kernel_bind_reuses_its_callable_for_the_same_types(tmp_path, monkeypatch):
    """A superstep's kernel is bound once per set of argument types: later supersteps with
    arguments of the same types (aot.key_of_value) take the bound callable without asking numba
    to type them; other types (float state) bind again, and the answers stay right."""
    from graphene_py.iterator import specialize
    g = graphs.powerlaw(scale=9, edge_factor=4, seed=1)
    d = partition_arrays(g.src, g.dst, num_vertices=g.n, name="bind", disks=[str(tmp_path)],
                         register=False, durable=False)
    calls = []
    real = specialize.Kernel._bind
    monkeypatch.setattr(specialize, "_KERNELS", {})      # fresh Kernels, as a new process has
    monkeypatch.setattr(specialize.Kernel, "_bind",
                        lambda self, args: calls.append(1) or real(self, args))
    mask = np.ones(g.n, np.uint8)
    want = _expected(d, "out", mask)
    seen = []
    with EdgeMap(d, **SSD) as em:
        T = em.threads + 1
        for dt in (np.int64, np.int64, np.int64, np.float64):
            acc, cnt = np.zeros((T, g.n), dt), np.zeros((T, g.n), np.int64)
            em.masked((acc, cnt), SUM, mask, "out")
            assert np.array_equal(acc.sum(0), want[0]) and np.array_equal(cnt.sum(0), want[1])
            seen.append(len(calls))
    assert seen[0] >= 1 and seen[0] == seen[1] == seen[2]     # int64: bound in the first alone
    assert seen[3] > seen[2]                                   # float64 rows: bound again
