"""BufferPool: kinds, alignment, the hugetlb fallback path, argument checks."""
import mmap

import numpy as np
import pytest

from graphene_py.io import buffers
from graphene_py.io.buffers import HUGE, BufferPool


@pytest.mark.parametrize("mode", ["auto", "hugetlb", "thp", "normal", True, False])
def test_pool_shape_alignment_and_writable(mode):
    with BufferPool(16384, 37, hugepages=mode) as p:
        assert p.kind in ("hugetlb", "thp", "normal") and p.note
        assert p.slot_bytes == 16384 and p.nslots == 37 and p.nbytes == 16384 * 37
        v = p.view
        assert v.dtype == np.uint8 and v.shape == (p.nbytes,) and v.flags.writeable
        assert p.address % 4096 == 0
        if p.kind in ("hugetlb", "thp"):
            assert p.address % HUGE == 0       # slots share 2 MB pages from a page boundary
        # slots are consecutive, disjoint and writable
        for s in (0, 17, 36):
            p.slot(s)[:] = s + 1
        assert v[0] == 1 and v[17 * 16384] == 18 and v[-1] == 37
        mv = p.memoryview(16384, 2 * 16384)
        assert len(mv) == 16384 and mv[0] == 0
        mv.release()
        if mode in (False, "normal"):
            assert p.kind == "normal"
        if mode == "thp":
            assert p.kind in ("thp", "normal")


def test_hugetlb_without_reserved_pages_falls_back_with_note(monkeypatch):
    monkeypatch.setattr(buffers, "hugepages_free", lambda: (0, HUGE))
    p = BufferPool(4096, 10, hugepages="hugetlb")
    assert p.kind in ("thp", "normal")
    assert "reserved hugepages free" in p.note and "nr_hugepages" in p.note
    p.close()


def test_hugetlb_mmap_failure_falls_back(monkeypatch):
    """meminfo claims free pages but MAP_HUGETLB fails (e.g. taken meanwhile): no crash, a note."""
    monkeypatch.setattr(buffers, "hugepages_free", lambda: (1000, HUGE))
    real = mmap.mmap

    def fake_mmap(*a, **kw):
        if kw.get("flags", 0) & buffers._MAP_HUGETLB:
            raise OSError(12, "Cannot allocate memory")
        return real(*a, **kw)

    monkeypatch.setattr(buffers.mmap, "mmap", fake_mmap)
    p = BufferPool(8192, 300, hugepages="auto")
    assert p.kind in ("thp", "normal")
    assert "MAP_HUGETLB failed" in p.note
    p.view[:] = 7
    assert int(p.view.sum()) == 7 * p.nbytes
    p.close()


def test_real_hugetlb_when_reserved():
    free, size = buffers.hugepages_free()
    p = BufferPool(16384, 8)
    if free >= 1:
        # (another test's reservation may end meanwhile: its pages are then gone from the note)
        assert p.kind == "hugetlb" or "MAP_HUGETLB failed" in p.note or \
            "0 reserved hugepages free" in p.note
    else:
        assert p.kind != "hugetlb"
    p.close()


def test_thp_disabled(monkeypatch):
    monkeypatch.setattr(buffers, "hugepages_free", lambda: (0, HUGE))
    monkeypatch.setattr(buffers, "_thp_mode", lambda: "never")
    with BufferPool(4096, 4) as p:
        assert p.kind == "normal" and "never" in p.note


@pytest.mark.parametrize("slot,n,h", [(1000, 4, "auto"), (0, 4, "auto"), (4096, 0, "auto"),
                                      (4096, 4, "bogus")])
def test_bad_arguments(slot, n, h):
    with pytest.raises(ValueError):
        BufferPool(slot, n, hugepages=h)


def test_close_twice_and_repr():
    p = BufferPool(4096, 3)
    r = repr(p)
    assert "3 x 4096" in r and p.kind in r
    p.close()
    p.close()


def test_thp_pool_is_really_backed_by_huge_pages():
    """The "thp" pool must be a private mapping: MADV_HUGEPAGE on a shared (shmem) mapping is ignored
    unless shmem THP is enabled, so the pool would report hugepages it does not have. Where THP is
    available, the kernel's own accounting (AnonHugePages in /proc/self/smaps) must show them, and
    the note must say how much."""
    from graphene_py.io.buffers import _thp_mode
    if _thp_mode() not in ("always", "madvise"):
        pytest.skip(f"transparent hugepages are {_thp_mode()} on this machine")
    pool = BufferPool(1 << 20, 8, hugepages="thp")
    try:
        assert pool.kind == "thp"
        huge = pool.huge_bytes()
        assert huge is not None and huge > 0, pool.note
        assert f"{huge >> 20} of 8 MiB on huge pages" in pool.note
    finally:
        pool.close()


def _cg(tmp_path, proc, files):
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "proc").write_text(proc)
    for rel, text in files.items():
        p = tmp_path / "root" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(tmp_path / "proc"), str(tmp_path / "root")


def test_hugetlb_cgroup_room_v1_and_v2_least_over_the_chain(tmp_path):
    """A hugetlb cgroup limit is charged at a page's first write (SIGBUS past it), so the pages
    a pool or the cache may take are capped by the least room along the process's cgroup chain."""
    mb2 = 2 << 20
    proc, root = _cg(tmp_path / "v1", "4:memory:/x\n3:hugetlb:/a/b\n0::/\n", {
        "hugetlb/a/b/hugetlb.2MB.limit_in_bytes": str(100 * mb2),
        "hugetlb/a/b/hugetlb.2MB.usage_in_bytes": str(90 * mb2),
        "hugetlb/a/hugetlb.2MB.limit_in_bytes": str(1000 * mb2),
        "hugetlb/a/hugetlb.2MB.usage_in_bytes": str(995 * mb2),      # the parent is tighter
        "hugetlb/hugetlb.2MB.limit_in_bytes": str(9223372036854771712),   # v1's "no limit"
    })
    assert buffers.hugetlb_cgroup_room(mb2, proc, root) == 5 * mb2
    proc, root = _cg(tmp_path / "v2", "0::/svc/job\n", {
        "svc/job/hugetlb.2MB.max": str(64 * mb2),
        "svc/job/hugetlb.2MB.current": str(60 * mb2),
        "svc/hugetlb.2MB.max": "max",
    })
    assert buffers.hugetlb_cgroup_room(mb2, proc, root) == 4 * mb2
    proc, root = _cg(tmp_path / "none", "0::/\n", {})
    assert buffers.hugetlb_cgroup_room(mb2, proc, root) is None
    assert buffers.hugetlb_cgroup_room(mb2, str(tmp_path / "missing"), root) is None


def test_free_pages_less_reserved_and_capped_by_the_cgroup(tmp_path, monkeypatch):
    mi = tmp_path / "meminfo"
    mi.write_text("HugePages_Total:     200\nHugePages_Free:      100\n"
                  "HugePages_Rsvd:       10\nHugepagesize:       2048 kB\n")
    monkeypatch.setattr(buffers, "hugetlb_cgroup_room", lambda size: None)
    assert buffers.hugepages_free(str(mi)) == (90, 2 << 20)      # (10 promised to a mapping)
    monkeypatch.setattr(buffers, "hugetlb_cgroup_room", lambda size: 3 * size)
    assert buffers.hugepages_free(str(mi)) == (3, 2 << 20)
