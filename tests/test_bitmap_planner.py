"""Block bitmaps and the extent planner against slow, obviously-correct references."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphene_py.io import bitmap as B
from graphene_py.io import planner as P

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ----------------------------------------------------------------------------- naive references
def naive_blocks(ranges, bs):
    out = set()
    for s, e in ranges:
        if e > s:
            out.update(range(s // bs, (e - 1) // bs + 1))
    return out


def blocks_of(bits):
    idx = []
    for w, x in enumerate(bits.tolist()):
        for b in range(64):
            if (x >> b) & 1:
                idx.append(w * 64 + b)
    return set(idx)


def naive_plan(blocks, nbytes_file, bs, max_gap, max_io):
    end = (nbytes_file + 511) // 512 * 512
    nblocks = (end + bs - 1) // bs
    cap = max(1, max_io // bs)
    ext = []
    cs = last = None
    for b in sorted(x for x in blocks if x < nblocks):
        if cs is not None and b - last - 1 <= max_gap and b - cs + 1 <= cap:
            last = b
        else:
            if cs is not None:
                ext.append((cs, last))
            cs = last = b
    if cs is not None:
        ext.append((cs, last))
    offs = [a * bs for a, _ in ext]
    lens = [min((b + 1) * bs, end) - a * bs for a, b in ext]
    return offs, lens


def naive_lists(offsets, row_lo, verts, id_width):
    rowlen = len(offsets) - 1
    ranges, useful = [], 0
    for v in verts:
        i = int(v) - row_lo
        if 0 <= i < rowlen:
            s, e = int(offsets[i]) * id_width, int(offsets[i + 1]) * id_width
            ranges.append((s, e))
            useful += max(0, e - s)
    return ranges, useful


# ----------------------------------------------------------------------------- strategies
@st.composite
def ranges_case(draw):
    bs = draw(st.sampled_from([512, 4096]))
    nbytes = draw(st.integers(1, 300_000))
    n = draw(st.integers(0, 40))
    ranges = []
    for _ in range(n):
        kind = draw(st.sampled_from(["small", "small", "empty", "hub"]))
        s = draw(st.integers(0, nbytes - 1))
        if kind == "empty":
            e = s
        elif kind == "hub":
            e = draw(st.integers(s, nbytes))
        else:
            e = min(nbytes, s + draw(st.integers(1, 2000)))
        ranges.append((s, e))
    return bs, nbytes, ranges


@st.composite
def csr_case(draw):
    rowlen = draw(st.integers(0, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    deg = (rng.pareto(1.2, rowlen) * 3).astype(np.int64)
    deg[rng.random(rowlen) < 0.3] = 0          # many empty lists
    if rowlen and draw(st.booleans()):
        deg[rng.integers(rowlen)] = draw(st.integers(1000, 20000))   # a hub over many blocks
    offsets = np.zeros(rowlen + 1, dtype=np.uint64)
    np.cumsum(deg, out=offsets[1:])
    row_lo = draw(st.integers(0, 50))
    nverts = row_lo + rowlen + draw(st.integers(0, 50))
    width = draw(st.sampled_from([4, 8]))
    bs = draw(st.sampled_from([512, 4096]))
    k = draw(st.integers(0, 120))
    verts = rng.integers(-5, nverts + 5, k)
    if draw(st.booleans()):
        verts = np.sort(verts)
    return offsets, row_lo, nverts, width, bs, verts


# ----------------------------------------------------------------------------- marking
@SETTINGS
@given(ranges_case())
def test_mark_ranges_matches_naive(case):
    bs, nbytes, ranges = case
    bits = B.new_bitmap(nbytes, bs)
    assert bits.dtype == np.uint64 and bits.shape[0] * 64 >= -(-nbytes // bs)
    starts = np.array([r[0] for r in ranges], dtype=np.int64)
    ends = np.array([r[1] for r in ranges], dtype=np.int64)
    new, useful = B.mark_ranges(bits, starts, ends, bs)
    want = naive_blocks(ranges, bs)
    assert blocks_of(bits) == want
    assert new == len(want)
    assert useful == sum(max(0, e - s) for s, e in ranges)
    assert B.count_blocks(bits) == len(want)
    # marking again sets nothing new (dedup)
    new2, _ = B.mark_ranges(bits, starts, ends, bs)
    assert new2 == 0 and blocks_of(bits) == want


@SETTINGS
@given(csr_case())
def test_mark_queue_and_scan_match_naive(case):
    offsets, row_lo, nverts, width, bs, verts = case
    nbytes = max(1, int(offsets[-1]) * width)
    ranges, useful = naive_lists(offsets, row_lo, verts, width)
    want = naive_blocks(ranges, bs)

    bits = B.new_bitmap(nbytes, bs)
    new, u = B.mark_queue(bits, offsets, row_lo, verts, width, bs)
    assert blocks_of(bits) == want and new == len(want) and u == useful

    active = np.zeros(nverts, dtype=np.bool_)
    inr = verts[(verts >= 0) & (verts < nverts)]
    active[inr] = True
    uniq = np.flatnonzero(active)
    r2, useful2 = naive_lists(offsets, row_lo, uniq, width)
    want2 = naive_blocks(r2, bs)
    for dt in (np.bool_, np.uint8):
        bits2 = B.new_bitmap(nbytes, bs)
        new2, u2 = B.mark_scan(bits2, offsets, row_lo, active.astype(dt), width, bs)
        assert blocks_of(bits2) == want2 and new2 == len(want2) and u2 == useful2
    # the scan and the queue (deduplicated) agree
    bits3 = B.new_bitmap(nbytes, bs)
    B.mark_queue(bits3, offsets, row_lo, uniq, width, bs)
    assert blocks_of(bits3) == want2


def test_mark_hub_spanning_many_words():
    bits = B.new_bitmap(10_000_000, 512)
    new, useful = B.mark_ranges(bits, np.array([700]), np.array([9_000_001]), 512)
    assert new == (9_000_000 // 512) - 1 + 1 and useful == 9_000_001 - 700
    assert blocks_of(bits) == set(range(1, 9_000_000 // 512 + 1))


def test_mark_rejects_small_bitmap_and_bad_block_size():
    bits = B.new_bitmap(1024, 512)
    with pytest.raises(ValueError):
        B.mark_ranges(bits, np.array([0]), np.array([64 * 512 + 1]), 512)
    with pytest.raises(ValueError):
        B.new_bitmap(1000, 1000)
    offs = np.array([0, 10_000], dtype=np.uint64)
    with pytest.raises(ValueError):
        B.mark_queue(bits, offs, 0, np.array([0]), 4, 512)


def test_empty_queue_and_empty_row():
    bits = B.new_bitmap(4096, 512)
    offs = np.zeros(1, dtype=np.uint64)
    assert B.mark_queue(bits, offs, 0, np.zeros(0, np.int64), 4, 512) == (0, 0)
    assert B.mark_scan(bits, offs, 0, np.ones(5, bool), 4, 512) == (0, 0)
    assert bits.sum() == 0


# ----------------------------------------------------------------------------- planning
@st.composite
def plan_case(draw):
    bs = draw(st.sampled_from([512, 4096]))
    nbytes = draw(st.integers(1, 400_000))
    nb = -(-nbytes // bs)
    blocks = draw(st.sets(st.integers(0, nb - 1), max_size=200))
    if draw(st.booleans()) and nb > 2:        # a long run (hub) to exercise the cap
        a = draw(st.integers(0, nb - 1))
        blocks |= set(range(a, min(nb, a + draw(st.integers(1, 300)))))
    max_gap = draw(st.sampled_from([0, 1, 16, draw(st.integers(0, 70))]))
    max_io = draw(st.sampled_from([bs, 16384, 4 * bs + 512, 128 * 1024, draw(st.integers(1, 40)) * 512]))
    return bs, nbytes, sorted(blocks), max_gap, max_io


def bits_from(blocks, nbytes, bs, extra_tail=False):
    bits = B.new_bitmap(nbytes, bs)
    for b in blocks:
        bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    if extra_tail:   # stale bits past the file's last block must be ignored
        nb = -(-nbytes // bs)
        for b in range(nb, bits.shape[0] * 64):
            bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return bits


@SETTINGS
@given(plan_case(), st.booleans())
def test_plan_matches_naive_and_rules(case, tail):
    bs, nbytes, blocks, max_gap, max_io = case
    bits = bits_from(blocks, nbytes, bs, extra_tail=tail)
    offs, lens = P.plan(bits, nbytes, bs, max_gap, max_io)
    wo, wl = naive_plan(blocks, nbytes, bs, max_gap, max_io)
    assert offs.dtype == np.int64 and lens.dtype == np.int64
    assert offs.tolist() == wo and lens.tolist() == wl
    # rules, checked independently of the reference
    end = (nbytes + 511) // 512 * 512
    cap = max(bs, max_io // bs * bs)
    covered = set()
    for i, (o, l) in enumerate(zip(offs.tolist(), lens.tolist())):
        assert o % bs == 0 and l > 0 and l % 512 == 0 and l <= cap and o + l <= end
        first, lastb = o // bs, (o + l - 1) // bs
        assert first in blocks and lastb in blocks          # no extent starts/ends with a gap
        inside = [b for b in blocks if first <= b <= lastb]
        assert all(y - x - 1 <= max_gap for x, y in zip(inside, inside[1:]))
        covered.update(inside)
        if i:
            po, pl = offs[i - 1], lens[i - 1]
            assert po + pl <= o                              # sorted, disjoint
            gap = first - (po + pl) // bs
            if gap <= max_gap:                               # would have merged but for the cap
                assert first - po // bs + 1 > cap // bs
    assert covered == set(blocks)
    # bits unchanged without clear; cleared with clear=True and same answer
    assert blocks_of(bits) >= set(blocks)
    o2, l2 = P.plan(bits, nbytes, bs, max_gap, max_io, clear=True)
    assert o2.tolist() == wo and l2.tolist() == wl and not bits.any()


def test_plan_examples():
    bs = 512
    bits = bits_from([0, 2, 20, 21, 22, 23, 40], 64 * 512, bs)
    o, l = P.plan(bits, 64 * 512, bs, 0, 16384)
    assert o.tolist() == [0, 1024, 10240, 20480] and l.tolist() == [512, 512, 2048, 512]
    o, l = P.plan(bits, 64 * 512, bs, 1, 16384)
    assert o.tolist() == [0, 10240, 20480] and l.tolist() == [1536, 2048, 512]
    o, l = P.plan(bits, 64 * 512, bs, 16, 16384)
    assert o.tolist() == [0, 10240] and l.tolist() == [1536, 10752]
    # the cap splits a long run exactly
    bits = bits_from(list(range(100)), 100 * 512, bs)
    o, l = P.plan(bits, 100 * 512, bs, 16, 16384)
    assert l.tolist() == [16384, 16384, 16384, 100 * 512 - 3 * 16384]
    assert o.tolist() == [0, 16384, 32768, 49152]


def test_plan_clips_at_padded_end_with_4k_blocks():
    bits = B.new_bitmap(5000, 4096)
    B.mark_ranges(bits, np.array([4100]), np.array([4200]), 4096)
    o, l = P.plan(bits, 5000, 4096, 16, 16384)
    assert o.tolist() == [4096] and l.tolist() == [5120 - 4096]


def test_plan_empty():
    bits = B.new_bitmap(1 << 20, 512)
    o, l = P.plan(bits, 1 << 20, 512, 16, 16384)
    assert o.shape == (0,) and l.shape == (0,)


def test_superstep_planner_groups_by_worker_and_widens_pages():
    """SuperstepPlanner: a queue frontier's lists become each file's merged extents (the same as
    marking + plan by hand), grouped by IO worker, and with page_blocks=8 every extent covers
    whole 4 KB pages."""
    rng = np.random.default_rng(5)
    nparts, rows, id_width = 4, 500, 4
    offs, base, row_lo, nedges, sizes = [], [0], [], [], []
    for i in range(nparts):
        deg = rng.integers(0, 40, rows)
        off = np.zeros(rows + 1, dtype=np.uint64)
        np.cumsum(deg, out=off[1:])
        offs.append(off)
        base.append(base[-1] + rows + 1)
        row_lo.append(0)
        nedges.append(int(off[-1]))
        sizes.append((int(off[-1]) * id_width + 511) // 512 * 512)
    cat = np.concatenate(offs)
    worker = np.array([1, 0, 1, 0], dtype=np.int32)
    ids = np.sort(rng.choice(rows, 60, replace=False)).astype(np.int64)
    for page_blocks, kind, count in ((1, "queue", 5), (8, "queue", 5), (1, "mask", 60),
                                     (8, "mask", 60)):
        pl = P.SuperstepPlanner(cat, np.array(base, np.int64), np.array(row_lo, np.int64),
                                np.array(nedges, np.int64), list(range(nparts)),
                                np.array(sizes, np.int64), worker, 2, id_width, 512, 4, 8192, 8192,
                                page_blocks, 65536, 1)
        q = ids[:count]
        act = np.zeros(rows, np.uint8)
        act[q] = 1
        fids, o, ln, blocks, useful, mode = pl.plan(kind, rows, active=act, ids=q, count=count)
        assert mode == ("queue" if kind == "queue" else "scan") and blocks > 0 and useful > 0
        assert (np.diff(worker[fids]) >= 0).all()            # grouped by worker
        for f in range(nparts):
            bits = B.new_bitmap(sizes[f], 512)
            B.mark_queue(bits, offs[f], 0, q, id_width, 512)
            if page_blocks > 1:
                B.widen(bits, page_blocks)
            want_o, want_l = P.plan(bits, sizes[f], 512, 4, 8192)
            m = fids == f
            assert o[m].tolist() == want_o.tolist() and ln[m].tolist() == want_l.tolist()
        if page_blocks > 1:
            assert (o % 4096 == 0).all()
            ends = o + ln
            assert all(e % 4096 == 0 or e == sizes[f] for e, f in zip(ends, fids))
    fids, o, ln, blocks, useful, mode = pl.plan("all", rows)
    assert mode == "all" and int(ln.sum()) == sum(sizes)
