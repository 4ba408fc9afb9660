"""The per-chunk transfer plan of gpu/chunks.py (HyTGraph's choice between zero-copy reads and
chunk copies), on the CPU: no CuPy needed."""
import numpy as np
import pytest

from graphene_py.gpu import chunks as C

MB = 1 << 20


def test_a_densely_read_chunk_is_copied_a_sparse_one_read_over_the_bus():
    size = 16 * MB
    # chunk 0: every byte read by 1000 lists; chunk 1: 1% read by 1000 lists; chunk 2: untouched
    keep, copy = C.plan([size, size // 100, 0], [1000, 1000, 0], [size] * 3, [], slots=8)
    assert (keep, copy) == ([], [0])
    # the rule is the cost model's: copy exactly where zero-copy would take longer
    zc = C.zero_copy_seconds([size, size // 100], [1000, 1000])
    cs = C.copy_seconds([size, size])
    assert zc[0] > cs[0] and zc[1] < cs[1]


def test_break_even_follows_the_rates():
    size = 16 * MB
    share = np.linspace(0, 1, 101)
    edge_bytes = (share * size).astype(np.int64)
    _keep, copy = C.plan(edge_bytes, np.full(101, 10), np.full(101, size), [], slots=101)
    # copied: every chunk read more densely than the rates' ratio (~ZC_BPS / COPY_BPS), none below
    assert copy and copy == list(range(copy[0], 101))
    cut = share[copy[0]]
    assert abs(cut - C.ZC_BPS / C.COPY_BPS) < 0.05
    # many short lists make zero-copy dearer (a partly used transfer each): the cut moves down
    _keep, copy2 = C.plan(edge_bytes, np.full(101, 50_000), np.full(101, size), [], slots=101)
    assert copy2[0] < copy[0]


def test_staged_chunks_are_kept_while_read_and_dropped_when_not():
    size = 16 * MB
    # chunk 3 is in GPU memory: kept while this superstep reads it at all (it costs nothing now)
    keep, copy = C.plan([0, 0, 0, 100], [0, 0, 0, 1], [size] * 4, staged=[3], slots=1)
    assert (keep, copy) == ([3], [])
    # not read: dropped (in neither list), so its slot goes to a dense newcomer
    keep, copy = C.plan([size, 0, 0, 0], [10, 0, 0, 0], [size] * 4, staged=[3], slots=1)
    assert (keep, copy) == ([], [0])


def test_slots_go_to_the_chunks_that_save_most():
    size = 16 * MB
    eb = [size // 2, size, int(size * 0.9), size]
    keep, copy = C.plan(eb, [1] * 4, [size] * 4, staged=[], slots=2)
    assert keep == [] and copy == [1, 3]
    # a staged chunk read lightly is worth its zero-copy cost: a denser newcomer takes its slot
    keep, copy = C.plan([1000, size], [1, 1], [size, size], staged=[0], slots=1)
    assert (keep, copy) == ([], [1])
    # ... and a staged chunk read densely stays against an equal newcomer (no copy needed)
    keep, copy = C.plan([size, size], [1, 1], [size, size], staged=[0], slots=1)
    assert (keep, copy) == ([0], [])


def test_modes():
    size = 16 * MB
    eb, ln, cb = [size, 10, 0], [1, 1, 0], [size] * 3
    assert C.plan(eb, ln, cb, [], 8, mode="zero-copy") == ([], [])
    assert C.plan(eb, ln, cb, [], 8, mode="copy") == ([], [0, 1])     # every chunk read
    assert C.plan(eb, ln, cb, [], 1, mode="copy") == ([], [0])        # while slots last
    assert C.plan(eb, ln, cb, [], 0) == ([], [])
    with pytest.raises(ValueError):
        C.plan(eb, ln, cb, [], 8, mode="always")


def test_chunk_sizes_and_counts():
    assert C.num_chunks(0) == 0
    assert C.num_chunks(1, shift=4) == 1
    assert C.num_chunks(33, shift=4) == 3
    np.testing.assert_array_equal(C.chunk_entries(33, shift=4), [16, 16, 1])
    np.testing.assert_array_equal(C.chunk_entries(32, shift=4), [16, 16])


def test_a_stager_over_resident_arrays_stages_nothing_and_needs_no_gpu():
    launched = []
    st = C.Stager([], 1 << 30)
    with st:
        assert st.round("q", 10, lambda q, n: launched.append((q, n)))["copied"] == 0
    assert st.summary() == {}
    g = C.Group(ptr=None, arrays=[np.zeros(100, np.int32)], num_entries=100)
    st = C.Stager([g], 1 << 30, mode="zero-copy")
    with st:
        assert st.round("q", 10, lambda q, n: launched.append((q, n)))["copied"] == 0
    assert st.summary()["chunk_slots"] == 0
    assert launched == [("q", 10), ("q", 10)]          # one launch over the whole queue


def test_a_superstep_too_small_for_any_copy_is_not_planned():
    """k-core's peel rounds are many and mostly small: one whose entries, read over the bus,
    cost less than one chunk's copy skips the histogram and its wait (no GPU touched here)."""
    g = C.Group(ptr=None, arrays=[np.zeros(1, np.int32)], num_entries=4 << C.SHIFT)
    st = C.Stager([g], 1 << 40)
    assert st.slots == 4                            # (never more slots than chunks)
    launched = []
    assert st.round("q", 10, lambda q, n: launched.append((q, n)), entries=100)["copied"] == 0
    assert launched == [("q", 10)]
    assert st.summary()["chunk_rounds_skipped"] == 1
    assert st._too_small(10, 100)
    assert not st._too_small(10, 1 << C.SHIFT)      # a whole chunk's entries: plan it
    assert not st._too_small(1 << 20, 1 << 20)      # many short lists: zero-copy's dear part


def test_auto_needs_a_few_slots_forced_copies_do_not():
    g = C.Group(ptr=None, arrays=[np.zeros(1, np.int32)], num_entries=64 << C.SHIFT)
    two = 2 * (4 << C.SHIFT)
    assert C.Stager([g], two).slots == 0                   # planning every round would not pay
    assert C.Stager([g], two, mode="copy").slots == 2
    assert C.Stager([g], 2 * two).slots == 4
    small = C.Group(ptr=None, arrays=[np.zeros(1, np.int32)], num_entries=2 << C.SHIFT)
    assert C.Stager([small], two).slots == 2               # (every chunk of it has a slot)


def test_staged_chunks_not_read_stay_while_slots_are_free():
    size = 16 * MB
    # chunk 2 staged, not read now: kept (a free slot is left), so a later read copies nothing
    keep, copy = C.plan([size, 0, 0], [10, 0, 0], [size] * 3, staged=[2], slots=2)
    assert (keep, copy) == ([2], [0])
    # no slot left: the chunk read now takes it
    keep, copy = C.plan([size, 0, 0], [10, 0, 0], [size] * 3, staged=[2], slots=1)
    assert (keep, copy) == ([], [0])


def test_a_failed_start_gives_the_lock_back(monkeypatch):
    """The slots' allocation fails (out of GPU memory): the error goes up, and the next stager
    of the process is not told another one is active."""
    g = C.Group(ptr=None, arrays=[np.zeros(1, np.int32)], num_entries=8 << C.SHIFT)
    st = C.Stager([g], 1 << 40, mode="copy")
    assert st.slots == 8

    def boom():
        raise MemoryError("out of memory allocating the slots")

    monkeypatch.setattr(st, "_start", boom)
    monkeypatch.setattr(C.Stager, "_set", staticmethod(lambda name, host: None))
    with pytest.raises(MemoryError):
        with st:
            pass
    assert C._active.acquire(blocking=False)
    C._active.release()
