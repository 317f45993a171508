"""vhmine.mine.join.prune: the pieces it skips hold no product at or above the integer threshold, at any
threshold (those at a group pair's largest product and at its bound's edge included), so a pruned search
finds the candidates of an unpruned one, one for one, and find_pairs(prune=True) the float64 brute force's
pairs; the choice by measurement prunes rows in families and leaves CLIP-shaped rows alone. Groups and
pieces are made small here (GROUP 64, pieces of 128 rows) so that a few hundred rows have many of each."""

import math

import numpy as np
import pytest
from helpers import unit_rows
from hypothesis import event, given
from hypothesis import strategies as st
from mine_sets import clip_shaped

from vhmine.mine.join import products, prune
from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, find_pairs


@pytest.fixture(autouse=True)
def small_pieces(monkeypatch):
    monkeypatch.setattr(prune, "GROUP", 64)
    monkeypatch.setattr(products, "_ROWS", 128)
    monkeypatch.setattr(products, "_COLS", 128)


def families(n, d, e, seed, topics=6, spread=0.35, tight=0.05):
    """Rows in families of about 4 near copies, the families in a few topics: pairs within a family, none
    across topics; DINOv2 random."""
    rng = np.random.default_rng(seed)
    fam = rng.integers(0, max(1, n // 4), n)
    topic = rng.standard_normal((topics, d))[fam % topics]
    clip = topic + spread * rng.standard_normal((max(1, n // 4), d))[fam] + tight * rng.standard_normal((n, d))
    return unit_rows(clip), unit_rows(rng.standard_normal((n, e)))


def ordered(q, n, seed=0):
    """q's rows in prune's order, and its Groups."""
    import torch

    from vhmine.mine.join.kernels import build

    kernel = build("int-mm", "cpu")
    centres = prune.kmeans(q[:n], max(1, n // 64), seed=seed)
    label = prune.assign(q[:n], prune.int_centres(centres), kernel, torch.device("cpu"))
    sq = np.zeros_like(q)
    sq[:n] = q[np.argsort(label, kind="stable")]
    return sq, prune.group_stats(sq, n), kernel


def test_bounds_hold_every_product_of_their_groups():
    import torch

    from vhmine.mine.join.quantise import fast_pass

    clip, _ = families(700, 48, 8, 0)
    sq, groups, kernel = ordered(fast_pass(clip, 0.9).q, 700)
    b = prune.bounds(groups, groups, torch.from_numpy(sq), kernel, torch.device("cpu"))
    full = sq[:700].astype(np.int64) @ sq[:700].astype(np.int64).T
    g = 64
    most = np.array([[full[a * g : (a + 1) * g, c * g : (c + 1) * g].max() for c in range(11)] for a in range(11)])
    assert (b >= most).all()
    assert (b - most).min() < 0.5 * np.abs(most).max()  # and not vacuous
    ab = prune.bounds(groups, groups, torch.from_numpy(sq), kernel, torch.device("cpu"))
    assert np.array_equal(ab, b)


def search(q, thresh, n, skip=None):
    import torch

    m = products.BlockMiner(None, None, 0.0, 0.0, thresh, n, device=torch.device("cpu"), block=len(q), width=q.shape[1])
    t = torch.from_numpy(q)
    i, j, p = m.search(t, t, 0, 0, skip=skip)
    order = np.lexsort((j, i))
    return i[order], j[order], p[order]


def same_candidates(sq, groups, kernel, n, thresh):
    """A pruned search of the ordered rows finds the unpruned search's candidates; returns the Skip."""
    import torch

    b = prune.bounds(groups, groups, torch.from_numpy(sq), kernel, torch.device("cpu"))
    skip = prune.Skip(np.minimum(b, b.T) < thresh, groups.size)
    got, want = search(sq, thresh, n, skip), search(sq, thresh, n)
    for a, w in zip(got, want, strict=True):
        assert np.array_equal(a, w)
    return skip


@given(st.integers(0, 2**32 - 1), st.integers(130, 700), st.sampled_from(["max", "max+1", "bound", "bound+1"]))
def test_property_pruned_search_finds_every_candidate_at_a_group_bound_edge(seed, n, edge):
    """The threshold set at a group pair's largest product (that pair is then a candidate), one above it,
    or at the floor of the pair's bound or one above: no skipped piece ever holds a product that reaches it."""
    import torch

    from vhmine.mine.join.quantise import fast_pass

    clip, _ = families(n, 32, 8, seed)
    sq, groups, kernel = ordered(fast_pass(clip, 0.9).q, n, seed)
    b = prune.bounds(groups, groups, torch.from_numpy(sq), kernel, torch.device("cpu"))
    rng = np.random.default_rng(seed)
    a, c = sorted(rng.integers(0, len(groups.radius), 2))
    g = groups.size
    block = sq[a * g : min((a + 1) * g, n)].astype(np.int64) @ sq[c * g : min((c + 1) * g, n)].astype(np.int64).T
    if a == c:
        block = block[np.triu_indices(len(block), 1)] if len(block) > 1 else np.array([0])
    top = int(block.max())
    thresh = {"max": top, "max+1": top + 1, "bound": math.floor(b[a, c]), "bound+1": math.floor(b[a, c]) + 1}[edge]
    skip = same_candidates(sq, groups, kernel, n, thresh)
    event(f"skipped some: {skip.skipped > 0}")


def test_a_threshold_on_a_group_pairs_largest_product_keeps_that_pair():
    from vhmine.mine.join.quantise import fast_pass

    clip, _ = families(600, 32, 8, 3)
    sq, groups, kernel = ordered(fast_pass(clip, 0.9).q, 600)
    prod = sq[:64].astype(np.int64) @ sq[128:192].astype(np.int64).T
    top = int(prod.max())
    skip = same_candidates(sq, groups, kernel, 600, top)
    i, j, _ = search(sq, top, 600, skip)
    a, c = np.unravel_index(np.argmax(prod), prod.shape)
    assert ((i == a) & (j == 128 + c)).any()


@st.composite
def row_sets(draw):
    n = draw(st.integers(2, 900))
    d, e = draw(st.integers(8, 48)), draw(st.integers(4, 16))
    seed = draw(st.integers(0, 2**32 - 1))
    kind = draw(st.sampled_from(["families", "families", "clip", "random"]))
    if kind == "families":  # (enough rows for pieces of rows of one topic against columns of another)
        n = max(n, draw(st.integers(300, 900)))
        clip, dino = families(n, d, e, seed, topics=draw(st.integers(2, 8)), spread=draw(st.sampled_from([0.2, 0.4])))
    elif kind == "clip":
        clip, dino = clip_shaped(n, d, e, seed)
    else:
        rng = np.random.default_rng(seed)
        clip, dino = unit_rows(rng.standard_normal((n, d))), unit_rows(rng.standard_normal((n, e)))
    rng = np.random.default_rng(seed)
    if draw(st.booleans()) and n > 1:  # a threshold on a pair's own similarity (a tie)
        i, j = rng.choice(n, 2, replace=False)
        clip_min = float(clip[i].astype(np.float64) @ clip[j].astype(np.float64))
    else:
        clip_min = draw(st.sampled_from([0.8, 0.9, 0.95, 0.99]))
    return clip, dino, clip_min, draw(st.sampled_from([math.inf, 0.3])), kind


@pytest.mark.slow
@given(row_sets(), st.sampled_from([1, 2]))
def test_property_pruned_find_pairs_is_brute_force(data, workers):
    clip, dino, clip_min, dino_max, kind = data
    st_on, st_off = {}, {}
    got = find_pairs(clip, dino, clip_min, dino_max, prune=True, block_size=256, workers=workers, stats=st_on)
    plain = find_pairs(clip, dino, clip_min, dino_max, prune=False, block_size=256, workers=workers, stats=st_off)
    assert_same_pairs(got, brute_force_pairs(clip, dino, clip_min, dino_max), atol=0.0)
    assert_same_pairs(got, plain, atol=0.0)
    if len(clip) >= 2:
        assert st_on["candidates"] == st_off["candidates"]  # pruning never changes the candidates
        assert st_on["prune"]["chosen"] and st_off["prune"]["chosen"] is False
        event(f"{kind}: skipped {'some' if st_on['prune']['skipped'] else 'none'}")


def test_families_are_pruned_and_clip_shaped_rows_are_not():
    """Forced on, families of near copies skip most products (exactly), CLIP-shaped rows none: every row's
    distance from its group's centre is as long as the centre, so no bound falls below the threshold."""
    fam, fam_dino = families(2000, 64, 8, 1, topics=8, spread=0.3)
    shaped, shaped_dino = clip_shaped(2000, 64, 8, 1)
    for clip, dino, least, most in ((fam, fam_dino, 0.4, 1.0), (shaped, shaped_dino, 0.0, 0.0)):
        st_ = {}
        got = find_pairs(clip, dino, 0.95, prune=True, block_size=512, stats=st_)
        assert least <= st_["prune"]["skipped"] <= most, st_["prune"]
        assert_same_pairs(got, brute_force_pairs(clip, dino, 0.95), atol=0.0)


@pytest.mark.slow
def test_the_choice_is_measured_on_a_sample(monkeypatch):
    """40,000 rows in families: a sample says many products can be skipped, enough to pay for ordering the
    rows; CLIP-shaped rows: a sample says none (6,000 rows); at 3,000 rows the families' saving would not pay.
    The products kernel's rate is pinned (450 GMAC/s, an AVX512-VNNI core's): one measured on a busy machine
    came out low and made the 3,000 rows' pruning look worth it (1 run in 2 at load 7)."""
    from vhmine.mine.join import calibrate

    measured = calibrate.choose

    def pinned(*args, **kwargs):
        choice = measured(*args, **kwargs)
        return calibrate.Choice(choice.kernel, {choice.name: 450.0}, choice.source)

    monkeypatch.setattr(calibrate, "choose", pinned)
    fam, fam_dino = families(40000, 64, 8, 2, topics=8, spread=0.3)
    shaped, shaped_dino = clip_shaped(6000, 64, 8, 2)
    st_fam, st_shaped = {}, {}
    find_pairs(fam, fam_dino, 0.95, block_size=1024, stats=st_fam)
    find_pairs(shaped, shaped_dino, 0.95, block_size=1024, stats=st_shaped)
    assert st_fam["prune"]["chosen"] and st_fam["prune"]["sample_share"] > prune.MIN_SHARE, st_fam["prune"]
    assert st_fam["prune"]["skipped"] > 0.3
    assert not st_shaped["prune"]["chosen"] and st_shaped["prune"]["sample_share"] < prune.MIN_SHARE
    assert st_shaped["prune"]["skipped"] is None
    assert st_shaped["prune_line"].startswith("pruning: off (a sample says ")
    st_off, st_small = {}, {}
    find_pairs(fam, fam_dino, 0.95, block_size=1024, prune=False, stats=st_off)
    assert st_off["prune"] == {"chosen": False, "sample_share": None, "skipped": None}
    find_pairs(fam[:3000], fam_dino[:3000], 0.95, block_size=1024, stats=st_small)
    assert not st_small["prune"]["chosen"] and st_small["prune"]["sample_share"] > prune.MIN_SHARE
    assert st_small["prune_line"].endswith("too few to pay for the order here)")


def test_only_a_full_mines_triangle_is_pruned_locally():
    clip, dino = families(500, 32, 8, 4)
    st_ = {}
    got = find_pairs(clip, dino, 0.95, new_rows=np.arange(0, 500, 7), prune=True, stats=st_)
    assert not st_["prune"]["chosen"] and "only a full mine" in st_["prune_line"]
    want = brute_force_pairs(clip, dino, 0.95)
    keep = np.isin(want.i, np.arange(0, 500, 7)) | np.isin(want.j, np.arange(0, 500, 7))
    assert len(got) == int(keep.sum())
