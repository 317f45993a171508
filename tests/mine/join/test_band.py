"""vhmine.mine.join.band through simsearch: find_pairs(new_rows=...) is exactly the pairs that touch a new row, so
an earlier mine of the old rows plus it is a full mine of all rows, bit for bit; find_pairs_across is exactly
the rectangle of two collections' pairs; both compute only their own blocks (properties over generated sets,
and examples)."""

import math

import numpy as np
import pytest
from helpers import row_directions, unit_rows
from hypothesis import event, given
from hypothesis import strategies as st

from vhmine.errors import InputError
from vhmine.mine.join.quantise import fast_pass
from vhmine.mine.join.simsearch import (
    PairSet,
    assert_same_pairs,
    brute_force_across,
    brute_force_pairs,
    find_pairs,
    find_pairs_across,
    merge,
    pair_sims,
)


def _subset(ps: PairSet, keep: np.ndarray) -> PairSet:
    return PairSet(ps.i[keep], ps.j[keep], ps.clip_sim[keep], ps.dino_sim[keep])


def touching(ps: PairSet, new_rows) -> PairSet:
    """The pairs of ps with a row among new_rows."""
    new_rows = np.asarray(new_rows, np.int64)
    return _subset(ps, np.isin(ps.i, new_rows) | np.isin(ps.j, new_rows))


def renumbered(ps: PairSet, rows: np.ndarray) -> PairSet:
    """ps, mined on x[rows] (rows ascending), in x's row numbers."""
    return PairSet(rows[ps.i], rows[ps.j], ps.clip_sim, ps.dino_sim)


def grown_mine_equals_full_mine(clip, dino, clip_min, dino_max, new_rows, **kw):
    """The point of new_rows: the old rows' own full mine plus the new rows' band is the full mine, exactly,
    and the band is brute force's pairs that touch a new row."""
    n = len(clip)
    old = np.setdiff1d(np.arange(n), np.asarray(new_rows, np.int64))
    band = find_pairs(clip, dino, clip_min, dino_max, new_rows=new_rows, **kw)
    event(f"rows {n // 100 * 100}+, band pairs found: {bool(len(band))}")
    want = brute_force_pairs(clip, dino, clip_min, dino_max)
    assert_same_pairs(band, touching(want, new_rows), atol=0.0)
    kept: dict = {}
    earlier = renumbered(find_pairs(clip[old], dino[old], clip_min, dino_max, stats=kept, **kw), old)
    if kept.get("quantised") is not None:  # the band again, quantising only the new rows (the others' kept)
        again = find_pairs(clip, dino, clip_min, dino_max, new_rows=new_rows, quantised=kept["quantised"], **kw)
        assert_same_pairs(again, band, atol=0.0)
    grown = merge([(p.i, p.j, p.clip_sim, p.dino_sim) for p in (earlier, band)])
    full = find_pairs(clip, dino, clip_min, dino_max, **kw)
    assert_same_pairs(grown, full, atol=0.0)
    assert_same_pairs(full, want, atol=0.0)
    assert np.array_equal(grown.i, full.i) and np.array_equal(grown.j, full.j)  # sorted alike
    assert np.array_equal(grown.clip_sim, full.clip_sim) and np.array_equal(grown.dino_sim, full.dino_sim)


def across_equals_the_stacked_rectangle(ca, da, cb, db, clip_min, dino_max, **kw):
    got = find_pairs_across(ca, da, cb, db, clip_min, dino_max, **kw)
    event(f"rows {(len(ca) + len(cb)) // 100 * 100}+, pairs found: {bool(len(got))}")
    assert np.all(np.diff(got.i * max(len(cb), 1) + got.j) > 0)  # sorted by (i, j), no repeats
    assert_same_pairs(got, brute_force_across(ca, da, cb, db, clip_min, dino_max), atol=0.0, across=True)
    stacked = brute_force_pairs(np.concatenate([ca, cb]), np.concatenate([da, db]), clip_min, dino_max)
    rect = _subset(stacked, (stacked.i < len(ca)) & (stacked.j >= len(ca)))
    assert_same_pairs(got, PairSet(rect.i, rect.j - len(ca), rect.clip_sim, rect.dino_sim), atol=0.0, across=True)


# --- generated sets -----------------------------------------------------------------------------------------


def _scaled(rows, scales):
    return (unit_rows(rows).astype(np.float64) * np.asarray(scales, np.float64)[:, None]).astype(np.float32)


@st.composite
def row_sets(draw, max_rows=300):
    """(clip, dino, clip_min, dino_max, rng): random directions, tight clusters or exact duplicates; some zero
    rows; unit rows, or rows scaled by 2**k for k in [-48, 48] (per set or per row: norms from near 2**-50 to
    near 2**50, all accepted); thresholds on a pair's own similarity (a tie), negative, 0 or +-inf."""
    n = draw(st.integers(0, 12) if draw(st.integers(0, 3)) == 0 else st.integers(60, max_rows))
    d, e = draw(st.integers(8, 40)), draw(st.integers(8, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    clip, dino = row_directions(draw, rng, n, d, e)
    scale = draw(st.sampled_from(["unit", "unit", "set", "row"]))
    k = {
        "unit": np.zeros(n),
        "set": np.full(n, draw(st.integers(-48, 48))),
        "row": rng.choice([-48, -20, 0, 20, 48], n),
    }[scale]
    zero = rng.random(n) < draw(st.sampled_from([0.0, 0.1]))
    factor = np.where(zero, 0.0, 2.0**k * (rng.uniform(0.5, 2, n) if scale != "unit" else 1.0))
    clip, dino = _scaled(clip, factor), _scaled(dino, factor[::-1])

    def limit(x, low):
        how = draw(st.sampled_from(["tie", "tie", "value", "zero", "inf"]))
        if how == "tie" and n > 1:
            i, j = rng.choice(n, 2, replace=False)
            return float(pair_sims(x, np.array([i]), np.array([j]))[0])
        if how == "value":
            return float(rng.uniform(-1, 1) * 4.0 ** np.median(k)) if n else -0.5
        return draw(st.sampled_from([0.0, low, -low])) if how == "inf" else 0.0

    return clip, dino, limit(clip, -math.inf), limit(dino, math.inf), rng


def new_row_choice(draw, rng, n: int) -> np.ndarray:
    how = draw(st.sampled_from(["none", "one", "all", "some", "some", "repeats"]))
    if how == "none" or not n:
        return np.empty(0, np.int64)
    if how == "one":
        return np.array([rng.integers(0, n)])
    if how == "all":
        return rng.permutation(n)
    rows = rng.choice(
        n,
        int(rng.integers(1, n + 1)) if how == "repeats" else max(1, n // 50 * int(rng.integers(1, 20))),
        replace=how == "repeats",
    )
    return rows.astype(np.int32)


@given(row_sets(), st.data(), st.sampled_from([1, 2]))
def test_property_new_rows_plus_the_earlier_mine_is_the_full_mine(data, pick, workers):
    clip, dino, clip_min, dino_max, rng = data
    new_rows = new_row_choice(pick.draw, rng, len(clip))
    grown_mine_equals_full_mine(clip, dino, clip_min, dino_max, new_rows, device="cpu", block_size=64, workers=workers)


@given(row_sets(), st.data(), st.sampled_from([1, 2]))
def test_property_across_is_brute_force_on_the_rectangle(data, pick, workers):
    clip, dino, clip_min, dino_max, rng = data
    na = pick.draw(st.integers(0, len(clip)))
    across_equals_the_stacked_rectangle(
        clip[:na], dino[:na], clip[na:], dino[na:], clip_min, dino_max, device="cpu", block_size=64, workers=workers
    )


# --- examples -----------------------------------------------------------------------------------------------


def _set(n, d=24, e=16, seed=0):
    rng = np.random.default_rng(seed)
    centre = rng.integers(0, max(1, n // 8), n)
    clip = unit_rows(rng.standard_normal((max(1, n // 8), d))[centre] + 0.3 * rng.standard_normal((n, d)))
    return clip, unit_rows(rng.standard_normal((n, e)))


@pytest.mark.parametrize("workers", [1, 2])
def test_new_rows_compute_only_the_band_of_their_row_group(monkeypatch, workers):
    """n = 1000, 64-row blocks, 10 new rows: the 16 blocks of the first row group's band, 10 x 9 / 2 +
    10 x 990 row pairs; a full mine: 16 x 17 / 2 blocks, 1000 x 999 / 2 pairs; and each block searched once."""
    import vhmine.mine.join.products as products  # (band.mine_parts makes the BlockMiners)

    searched = []

    class Counting(products.BlockMiner):
        def search(self, x, y, r, c, **kw):
            searched.append((r, c, len(x)))
            return super().search(x, y, r, c, **kw)

    monkeypatch.setattr(products, "BlockMiner", Counting)
    clip, dino = _set(1000)
    new = np.random.default_rng(1).choice(1000, 10, replace=False)
    st_band, st_full = {}, {}
    band = find_pairs(clip, dino, 0.7, new_rows=new, device="cpu", block_size=64, workers=workers, stats=st_band)
    assert (st_band["blocks"], st_band["pairs_examined"]) == (16, 45 + 10 * 990)
    assert {(r, c) for r, c, _ in searched} == {(0, c) for c in range(0, 1024, 64)}
    assert sum(rows for *_, rows in searched) == 16 * 64  # the first row group only
    searched.clear()
    full = find_pairs(clip, dino, 0.7, device="cpu", block_size=64, workers=workers, stats=st_full)
    assert (st_full["blocks"], st_full["pairs_examined"]) == (136, 499500)
    assert len(searched) == 136
    assert len(band) and st_band["candidates"] < st_full["candidates"]
    assert_same_pairs(band, touching(full, new), atol=0.0)


def test_across_computes_the_rectangle_only():
    clip, dino = _set(700)
    st_ = {}
    got = find_pairs_across(clip[:300], dino[:300], clip[300:], dino[300:], 0.6, device="cpu", block_size=64, stats=st_)
    # rows 0..319 (5 row blocks) against columns from 256 (the group holding B's first row) to 704: 7 blocks
    assert (st_["blocks"], st_["pairs_examined"]) == (35, 300 * 400)
    assert len(got) and got.j.max() < 400 and got.i.max() < 300
    assert_same_pairs(
        got, brute_force_across(clip[:300], dino[:300], clip[300:], dino[300:], 0.6), atol=0.0, across=True
    )


def test_across_drops_the_pairs_within_one_side_at_a_threshold_everything_meets():
    """clip_min -inf: every pair qualifies, so any pair of A's rows in B's first row group, or of the
    padding, would show; exactly nA x nB come back."""
    clip, dino = _set(150, d=8, e=8)
    for na in (1, 64, 70, 149):
        got = find_pairs_across(clip[:na], dino[:na], clip[na:], dino[na:], -math.inf, device="cpu", block_size=64)
        assert len(got) == na * (150 - na)
        assert np.array_equal(got.i, np.repeat(np.arange(na), 150 - na))


def test_a_band_from_kept_rows_quantises_only_the_new_ones(monkeypatch):
    """The earlier join's quantisation of the old rows, reused: only the new rows are quantised (with its
    quantiser), no row is laid out again, and the pairs are the band's, bit for bit."""
    import vhmine.mine.join.blocks as blocks  # (search's quantise_shape calls fast_pass there)

    clip, dino = _set(3000, d=48)
    new = np.sort(np.random.default_rng(3).choice(3000, 40, replace=False))
    old = np.setdiff1d(np.arange(3000), new)
    kept, st_ = {}, {}
    find_pairs(clip[old], dino[old], 0.7, 0.5, stats=kept)
    quantised = []
    monkeypatch.setattr(blocks, "fast_pass", lambda x, *a, **k: quantised.append(len(x)) or fast_pass(x, *a, **k))
    got = find_pairs(clip, dino, 0.7, 0.5, new_rows=new, quantised=kept["quantised"], stats=st_)
    assert quantised == [] and st_["quantised"] is None
    assert st_["pairs_examined"] == 40 * 39 // 2 + 40 * 2960
    assert_same_pairs(got, touching(brute_force_pairs(clip, dino, 0.7, 0.5), new), atol=0.0)
    find_pairs(clip, dino, 0.7, 0.5, new_rows=new)  # without: every row quantised again
    assert quantised == [3000]


def test_a_cpu_multiplies_no_padding_row(monkeypatch):
    """40 new rows (padded to 64 for the layout) against 2,960 kept rows (padded to 3,008) and against each
    other: every piece the kernel multiplies holds the 40 real rows only, so the band computes 40 x (3,008 + 64)
    products, not 64 x (3,008 + 64), and its pairs are still the band's."""
    import vhmine.mine.join.products as products

    pieces = []
    real_piece = products.BlockMiner._piece
    monkeypatch.setattr(
        products.BlockMiner,
        "_piece",
        lambda self, x, y, ny, r, c, parts: pieces.append((len(x), ny)) or real_piece(self, x, y, ny, r, c, parts),
    )
    clip, dino = _set(3000, d=48)
    new = np.sort(np.random.default_rng(4).choice(3000, 40, replace=False))
    old = np.setdiff1d(np.arange(3000), new)
    kept: dict = {}
    find_pairs(clip[old], dino[old], 0.7, 0.5, stats=kept)
    pieces.clear()
    got = find_pairs(clip, dino, 0.7, 0.5, new_rows=new, quantised=kept["quantised"], device="cpu")
    assert max(rows for rows, _ in pieces) == 40
    assert sum(rows * cols for rows, cols in pieces) == 40 * (3008 + 64)
    assert_same_pairs(got, touching(brute_force_pairs(clip, dino, 0.7, 0.5), new), atol=0.0)


def test_kept_rows_of_other_rows_or_too_many_levels_are_refused_or_quantised_again():
    clip, dino = _set(800, d=32)
    new = np.arange(0, 800, 20)
    old = np.setdiff1d(np.arange(800), new)
    kept = {}
    find_pairs(clip[old], dino[old], 0.7, stats=kept)
    with pytest.raises(InputError, match="quantised holds 760 rows of width 32, not the 780 rows"):
        find_pairs(clip, dino, 0.7, new_rows=new[:20], quantised=kept["quantised"])
    other, _ = _set(800, d=32, seed=9)
    with pytest.raises(InputError, match="quantised does not match these rows"):
        find_pairs(other, dino, 0.7, new_rows=new, quantised=kept["quantised"])
    with pytest.raises(TypeError, match="takes new_rows too"):
        find_pairs(clip, dino, 0.7, quantised=kept["quantised"])
    from vhmine.mine.join.kernels import Unavailable, build

    try:
        build("fbgemm", "cpu")
    except Unavailable:
        return
    st_ = {}  # fbgemm keeps 90 levels exact, the kept rows have 127: every row is quantised again, exactly
    got = find_pairs(clip, dino, 0.7, new_rows=new, quantised=kept["quantised"], kernel="fbgemm", stats=st_)
    assert st_["quantised"] is not None and st_["quantised"].qmax <= 90
    assert_same_pairs(got, touching(brute_force_pairs(clip, dino, 0.7), new), atol=0.0)


def test_empty_new_rows_or_an_empty_side_mine_nothing():
    clip, dino = _set(100)
    st_ = {}
    got = find_pairs(clip, dino, -math.inf, new_rows=[], stats=st_, device="cpu")
    assert len(got) == 0 and (st_["blocks"], st_["pairs_examined"]) == (0, 0)
    assert len(find_pairs_across(clip, dino, clip[:0], dino[:0], -math.inf, device="cpu")) == 0
    assert len(find_pairs_across(clip[:0], dino[:0], clip, dino, -math.inf, device="cpu")) == 0
    one = find_pairs(clip, dino, -math.inf, new_rows=[5, 5, 5], device="cpu")  # repeats: the same row
    assert len(one) == 99 and set(one.i.tolist()) | set(one.j.tolist()) == set(range(100))


def test_bad_new_rows_and_mismatched_collections_are_named():
    clip, dino = _set(100)
    with pytest.raises(InputError, match=r"^new_rows holds row 100, outside the 100 rows \[0, 100\)"):
        find_pairs(clip, dino, 0.5, new_rows=[3, 100])
    with pytest.raises(InputError, match=r"^new_rows holds row -1"):
        find_pairs(clip, dino, 0.5, new_rows=np.array([-1, 3]))
    with pytest.raises(InputError, match=r"^new_rows must be a 1-D array of row numbers, got float64"):
        find_pairs(clip, dino, 0.5, new_rows=np.array([1.0]))
    with pytest.raises(
        InputError, match=r"^new_rows must be a 1-D array of row numbers, got int64 with shape \(1, 2\)"
    ):
        find_pairs(clip, dino, 0.5, new_rows=np.array([[1, 2]]))
    other, _ = _set(50, d=32)
    with pytest.raises(
        InputError,
        match=r"^clip vectors of the two collections differ in dimension: \(100, 24\) "
        r"against \(50, 32\)",
    ):
        find_pairs_across(clip, dino, other, dino[:50], 0.5)
    bad = clip[:50].copy()
    bad[7, 0] = np.nan
    with pytest.raises(InputError, match=r"^collection B: clip row 7 has NaN"):
        find_pairs_across(clip, dino, bad, dino[:50], 0.5)
    with pytest.raises(InputError, match=r"^collection A: clip has 100 rows but dino has 50"):
        find_pairs_across(clip, dino[:50], clip, dino, 0.5)


@pytest.mark.parametrize("workers", [1, 2])
def test_too_many_candidates_in_a_band_or_across_is_named(workers):
    clip, dino = _set(300, d=8)
    with pytest.raises(InputError, match="more than the limit of 1,000 candidates"):
        find_pairs(clip, dino, 0.0, new_rows=np.arange(40), max_candidates=1000, block_size=64, workers=workers)
    with pytest.raises(InputError, match="more than the limit of 1,000 candidates"):
        find_pairs_across(
            clip[:100], dino[:100], clip[100:], dino[100:], 0.0, max_candidates=1000, block_size=64, workers=workers
        )
