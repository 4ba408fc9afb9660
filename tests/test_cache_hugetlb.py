"""The read-through cache in reserved huge pages (iterator/memory.py cache_array): used when
vm.nr_hugepages leaves enough free, 4 KB pages otherwise or when the mapping cannot be made, and
every algorithm's answer the same either way."""
import mmap
import os

import numpy as np
import pytest

import graphene_py as gp
from graphene_py.io import buffers
from graphene_py.iterator import memory
from graphene_py.iterator.memory import CacheBudget, cache_array, is_hugetlb
from tests.test_cache import ALGOS, SSD, directed, _partial_files_from_one_page  # noqa: F401

MB = 1 << 20


def test_no_reserved_pages_gives_zeroed_small_pages(monkeypatch):
    monkeypatch.setattr(buffers, "hugepages_free", lambda: (0, 2 * MB))
    a = cache_array(64 * MB)
    assert a.nbytes == 64 * MB and not is_hugetlb(a)
    assert a[:: 1 << 16].sum() == 0
    a[-1] = 7
    assert a[-1] == 7


def test_a_failed_mapping_falls_back(monkeypatch):
    """meminfo says enough pages are free but MAP_HUGETLB fails (taken meanwhile)."""
    monkeypatch.setattr(buffers, "hugepages_free", lambda: (10 ** 6, 2 * MB))
    real = mmap.mmap

    def fake(*a, **kw):
        if kw.get("flags", 0) & buffers._MAP_HUGETLB:
            raise OSError(12, "Cannot allocate memory")
        return real(*a, **kw)

    monkeypatch.setattr(mmap, "mmap", fake)
    a = cache_array(64 * MB)
    assert a.nbytes == 64 * MB and not is_hugetlb(a)
    a[:] = 1
    assert int(a[:: 1 << 20].sum()) == 64


def test_the_ledger_counts_no_huge_pages_for_small_ones(monkeypatch):
    monkeypatch.setattr(buffers, "hugepages_free", lambda: (0, 2 * MB))
    with memory.ledger() as led:
        memory.track("adjacency cache (out)", cache_array(64 * MB))
    assert led.huge == {} and led.arrays == {"adjacency cache (out)": 64 * MB}


def test_small_caches_and_off_use_small_pages(monkeypatch):
    monkeypatch.setattr(buffers, "hugepages_free", lambda: (10 ** 6, 2 * MB))
    calls = []
    real = mmap.mmap
    monkeypatch.setattr(mmap, "mmap", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    assert not is_hugetlb(cache_array(memory.CACHE_HUGETLB_MIN - 4096))
    monkeypatch.setenv("GRAPHENE_CACHE_HUGETLB", "off")
    assert not is_hugetlb(cache_array(memory.CACHE_HUGETLB_MIN))
    assert calls == []                          # never asked for huge pages


@pytest.fixture
def reserved():
    """64 reserved 2 MB pages for the test (root, where none are reserved); skips otherwise."""
    path = "/proc/sys/vm/nr_hugepages"
    try:
        with open(path) as f:
            before = int(f.read())
    except OSError:
        pytest.skip("no /proc/sys/vm/nr_hugepages")
    if before == 0:
        try:
            with open(path, "w") as f:
                f.write("64")
        except OSError:
            pytest.skip("cannot reserve huge pages (not root)")
    if buffers.hugepages_free()[0] < 32:
        if before == 0:
            with open(path, "w") as f:
                f.write("0")
        pytest.skip("fewer than 32 huge pages free")
    yield
    if before == 0:
        with open(path, "w") as f:
            f.write("0")


def test_real_huge_pages_hold_the_cache_and_answers_do_not_change(reserved, directed,  # noqa: F811
                                                                 monkeypatch):
    a = cache_array(memory.CACHE_HUGETLB_MIN)
    assert is_hugetlb(a)
    assert a[:: 1 << 16].sum() == 0
    a[::4096] = 3                                   # written through: every page faults in
    assert int(a[::4096].sum()) == 3 * (a.nbytes // 4096)
    with memory.ledger() as led:                    # --json's memory block says where it is
        memory.track("adjacency cache (out)", a)
        memory.track("state", np.zeros(1000))
    assert led.huge == {"adjacency cache (out)": a.nbytes}
    del a
    monkeypatch.setattr(memory, "CACHE_HUGETLB_MIN", 0)     # the test graph's KB-sized files too
    from graphene_py.iterator import session
    for algo in ("pagerank", "sssp", "bfs"):
        fn, key = ALGOS[algo]
        session._MEM_CACHE.clear()
        ref = getattr(fn(directed, **SSD), key)
        got = getattr(fn(directed, cache=CacheBudget(1 << 30), **SSD), key)
        held = [h[0] for h in session._MEM_CACHE.values()]
        assert held and all(is_hugetlb(m) for m in held if m.nbytes), algo
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12, err_msg=algo)
    session._MEM_CACHE.clear()
    assert os.path.exists("/proc/self/smaps")
