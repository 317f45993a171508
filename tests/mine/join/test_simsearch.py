"""vhmine.mine.join.simsearch (and quantise, products, recheck): find_pairs equals the float64 brute force
exactly, boundaries included."""

import math
import subprocess
import sys

import numpy as np
import pytest
from helpers import unit_rows

from vhmine.errors import InputError
from vhmine.mine.join.simsearch import PairSet, assert_same_pairs, brute_force_pairs, find_pairs, pair_sims


def clustered(n, d, e, seed):
    """Half random rows, half in clusters of 2-30 of mixed tightness (CLIP cosines from about 0.6 to
    0.99); DINOv2 agrees inside some clusters and is random inside the others."""
    rng = np.random.default_rng(seed)
    clip, dino = rng.standard_normal((n, d)), rng.standard_normal((n, e))
    start = n // 2
    while start < n:
        rows = slice(start, start + int(rng.integers(2, 31)))
        size = len(clip[rows])
        clip[rows] = rng.standard_normal(d) + rng.uniform(0.1, 0.8) * rng.standard_normal((size, d))
        if rng.random() < 0.5:
            dino[rows] = rng.standard_normal(e) + 0.5 * rng.standard_normal((size, e))
        start += size
    order = rng.permutation(n)
    return unit_rows(clip[order]), unit_rows(dino[order])


def random_set(n, d, e, seed):
    rng = np.random.default_rng(seed)
    return unit_rows(rng.standard_normal((n, d))), unit_rows(rng.standard_normal((n, e)))


def test_pair_sims_is_the_float64_inner_product_whatever_the_batch():
    x, _ = random_set(50, 768, 4, 0)
    i, j = np.triu_indices(50, k=1)
    sims = pair_sims(x, i, j)
    np.testing.assert_allclose(sims, (x.astype(np.float64) @ x.T.astype(np.float64))[i, j], rtol=0, atol=1e-13)
    one_by_one = np.array([pair_sims(x, i[k : k + 1], j[k : k + 1])[0] for k in range(0, len(i), 37)])
    assert np.array_equal(one_by_one, sims[::37])  # bit for bit: thresholds set from one call hold in another


@pytest.mark.parametrize("spike", [False, True])
def test_quantisation_error_bound_covers_every_product(spike):
    from vhmine.mine.join.quantise import _quantise

    x, _ = clustered(300, 768, 4, 0)
    if spike:  # one large component sets a coarse scale for every row
        x[7] = 0
        x[7, 5] = 1
    q, scale, err = _quantise(x, 127, 320)
    qi = q[:300, :768].astype(np.int64)
    gap = np.abs(x.astype(np.float64) @ x.T.astype(np.float64) - scale**2 * (qi @ qi.T))
    assert gap.max() <= err
    assert err < (0.2 if spike else 0.05)  # and still narrow enough to be worth having


@pytest.mark.parametrize("n, block, seed", [(301, 64, 0), (301, 64, 1), (777, 128, 2)])
def test_random_sets_match_brute_force(seed, n, block):
    clip, dino = random_set(n, 16, 8, seed)
    want = brute_force_pairs(clip, dino, 0.6, 0.2)
    assert len(want) > 100
    assert_same_pairs(find_pairs(clip, dino, 0.6, 0.2, block_size=block, device="cpu"), want)


@pytest.mark.parametrize(
    "n, d, block, seed",
    [
        (1001, 64, 64, 0),
        (1001, 64, 128, 1),
        (1999, 96, 320, 2),
        (1999, 96, 4096, 3),
        (333, 768, 64, 0),
        (333, 768, 64, 1),
    ],
)
def test_clustered_sets_match_brute_force(n, d, block, seed):
    clip, dino = clustered(n, d, 32, seed)
    want = brute_force_pairs(clip, dino, 0.9, 0.55)
    assert len(want) > 10  # pairs CLIP calls alike and DINOv2 different exist
    assert (want.clip_sim >= 0.9).all() and (want.dino_sim <= 0.55).all()
    got = find_pairs(clip, dino, 0.9, 0.55, block_size=block, device="cpu")
    assert_same_pairs(got, want)
    assert np.array_equal(got.clip_sim, want.clip_sim) and np.array_equal(got.dino_sim, want.dino_sim)


def test_result_is_sorted_upper_triangle_with_documented_dtypes():
    clip, dino = clustered(500, 32, 16, 7)
    got = find_pairs(clip, dino, 0.8, math.inf, block_size=64)
    assert len(got) > 100
    assert (got.i < got.j).all()
    assert np.array_equal(np.lexsort((got.j, got.i)), np.arange(len(got)))
    assert [a.dtype for a in (got.i, got.j, got.clip_sim, got.dino_sim)] == [np.int64, np.int64, np.float64, np.float64]


def test_pairs_exactly_at_both_thresholds_are_found():
    clip, dino = clustered(600, 48, 24, 3)
    loose = brute_force_pairs(clip, dino, 0.85, 0.6)
    for k in (0, len(loose) - 1):
        cmin, dmax = loose.clip_sim[k], loose.dino_sim[k]  # this pair sits on both thresholds at once
        got = find_pairs(clip, dino, cmin, dmax, block_size=128)
        assert ((got.i == loose.i[k]) & (got.j == loose.j[k])).sum() == 1
        assert_same_pairs(got, brute_force_pairs(clip, dino, cmin, dmax))
        # one ulp stricter on either side drops it
        for stricter in ((np.nextafter(cmin, 2), dmax), (cmin, np.nextafter(dmax, -2))):
            got = find_pairs(clip, dino, *stricter, block_size=128)
            assert not ((got.i == loose.i[k]) & (got.j == loose.j[k])).any()


def test_infinite_dino_max_keeps_every_clip_pair():
    clip, dino = clustered(600, 32, 16, 5)
    got = find_pairs(clip, dino, 0.9, math.inf, block_size=128)
    i, j = np.triu_indices(600, k=1)
    assert len(got) == (pair_sims(clip, i, j) >= 0.9).sum() > 0
    assert_same_pairs(got, brute_force_pairs(clip, dino, 0.9))


def test_empty_result_and_tiny_collections():
    clip, dino = random_set(200, 64, 8, 0)
    for got in (
        find_pairs(clip, dino, 0.99),
        find_pairs(clip[:0], dino[:0], 0.5),
        find_pairs(clip[:1], dino[:1], -1.0),
    ):
        assert len(got) == 0 and got.i.dtype == np.int64 and got.clip_sim.dtype == np.float64
    assert len(brute_force_pairs(clip[:1], dino[:1], -1.0)) == 0
    assert len(find_pairs(clip[:2], dino[:2], -1.0)) == 1
    assert len(find_pairs(clip[:50], dino[:50], -math.inf)) == 50 * 49 // 2
    assert len(find_pairs(clip[:50], dino[:50], math.inf)) == 0


def test_duplicate_vectors_with_similarity_exactly_one():
    rng = np.random.default_rng(0)
    # rows of four +-0.5 entries: unit norm exactly, so a duplicate pair has sim exactly 1.0
    base = np.zeros((40, 64), np.float32)
    for row in base:
        row[rng.choice(64, 4, replace=False)] = rng.choice([-0.5, 0.5], 4)
    clip = base[rng.integers(0, 40, 300)]
    dino, _ = random_set(300, 8, 1, 1)
    got = find_pairs(clip, dino, 1.0, block_size=64)
    assert len(got) > 0 and (got.clip_sim == 1.0).all()
    assert np.array_equal(clip[got.i], clip[got.j])
    assert_same_pairs(got, brute_force_pairs(clip, dino, 1.0))


def test_too_many_candidates_says_how_many_and_what_to_do():
    clip, dino = random_set(300, 8, 4, 0)
    msg = (
        r"^[\d,]+ pairs already have CLIP cosine near or above 0\.1 .* more than the limit of 1,000 candidates; raise"
        r" --clip"
    )
    with pytest.raises(InputError, match=msg):
        find_pairs(clip, dino, 0.1, max_candidates=1000, block_size=64)


def test_float32_fallback_matches_brute_force(monkeypatch):
    import torch

    def broken(*args, **kwargs):
        raise RuntimeError("no int8 matmul here")

    monkeypatch.setattr(torch, "_int_mm", broken)
    clip, dino = clustered(700, 48, 16, 9)
    assert_same_pairs(find_pairs(clip, dino, 0.9, 0.55, block_size=128), brute_force_pairs(clip, dino, 0.9, 0.55))


def test_progress_bar_goes_to_stderr(capsys):
    clip, dino = random_set(300, 16, 4, 0)
    find_pairs(clip, dino, 0.9, progress=True, block_size=64)
    assert "mining pairs" in capsys.readouterr().err


def test_bad_inputs_are_named():
    clip, dino = random_set(10, 8, 4, 0)
    with pytest.raises(InputError, match="row-aligned"):
        find_pairs(clip, dino[:9], 0.9)
    clip[3, 2] = np.nan
    with pytest.raises(InputError, match="clip row 3 has NaN"):
        find_pairs(clip, dino, 0.9)
    with pytest.raises(InputError, match="float32"):
        find_pairs(clip.astype(np.float64), dino, 0.9)


def test_bad_or_absent_device_is_named():
    import torch

    from vhmine.errors import VhmineError

    clip, dino = random_set(10, 8, 4, 0)
    with pytest.raises(VhmineError, match="--device gpu: not a device name; use cpu, cuda or cuda:N"):
        find_pairs(clip, dino, 0.9, device="gpu")
    if not torch.cuda.is_available():
        with pytest.raises(VhmineError, match="no CUDA device is available here; use --device cpu"):
            find_pairs(clip, dino, 0.9, device="cuda")


def test_module_imports_without_torch():
    code = "import sys; sys.modules['torch'] = None; import vhmine.mine.join.simsearch"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_comparator_is_order_insensitive_and_names_missing_and_extra_pairs():
    clip, dino = clustered(400, 32, 16, 2)
    want = brute_force_pairs(clip, dino, 0.85)
    perm = np.random.default_rng(0).permutation(len(want))
    assert_same_pairs(PairSet(want.i[perm], want.j[perm], want.clip_sim[perm], want.dino_sim[perm]), want)

    k = 5
    drop = np.arange(len(want)) != k
    missing = PairSet(want.i[drop], want.j[drop], want.clip_sim[drop], want.dino_sim[drop])
    with pytest.raises(
        AssertionError, match=rf"1 pairs missing, 0 extra .*first missing: \({want.i[k]}, {want.j[k]}\)"
    ):
        assert_same_pairs(missing, want)
    with pytest.raises(AssertionError, match=rf"0 pairs missing, 1 extra .*first extra: \({want.i[k]}, {want.j[k]}\)"):
        assert_same_pairs(want, missing)
    off = want.clip_sim.copy()
    off[k] += 1e-6
    with pytest.raises(AssertionError, match=rf"clip_sim of pair \({want.i[k]}, {want.j[k]}\) differs"):
        assert_same_pairs(PairSet(want.i, want.j, off, want.dino_sim), want)


def spiky(n, d, e, seed):
    """clustered() rows shaped like real CLIP embeddings: three dimensions 10-25x the rest and of one
    sign in every row (unrelated rows then sit near cosine 0.5), then normalised."""
    clip, dino = clustered(n, d, e, seed)
    x = clip.astype(np.float64) * math.sqrt(d)
    for k, f in zip((3, 11, 40), (10, 15, 25)):
        x[:, k] = f * (1 + 0.3 * x[:, k])
    return unit_rows(x), dino


@pytest.mark.parametrize("rotate", [True, False, None])
@pytest.mark.parametrize("seed", [0, 1])
def test_spiky_sets_match_brute_force_rotated_or_not(rotate, seed):
    clip, dino = spiky(900, 96, 32, seed)
    want = brute_force_pairs(clip, dino, 0.95, 0.6)
    assert len(want) > 10
    stats = {}
    got = find_pairs(clip, dino, 0.95, 0.6, block_size=128, device="cpu", rotate=rotate, stats=stats)
    assert_same_pairs(got, want)
    assert np.array_equal(got.clip_sim, want.clip_sim) and np.array_equal(got.dino_sim, want.dino_sim)
    assert stats["rotated"] == (rotate is not False)  # the default rotates spiky rows


def test_rotation_narrows_the_margin_on_spiky_rows_and_is_skipped_on_even_ones():
    from vhmine.mine.join.quantise import fast_pass

    clip, _ = spiky(2000, 768, 4, 3)
    plain, turned = fast_pass(clip, 0.9, rotate=False), fast_pass(clip, 0.9, rotate=True)
    assert turned.margin < plain.margin / 3
    assert fast_pass(clip, 0.9).rotated
    even, _ = clustered(2000, 768, 4, 3)
    assert not fast_pass(even, 0.9).rotated


@pytest.mark.parametrize("data", ["spiky", "even"])
def test_rotated_quantisation_bound_covers_every_product(data):
    from vhmine.mine.join.quantise import _quantise, rotation

    x, _ = (spiky if data == "spiky" else clustered)(300, 768, 4, 4)
    x[5] = 0  # a row whose rotation is exactly zero, and one unit spike
    x[6] = 0
    x[6, 3] = 1
    q, scale, err = _quantise(x, 127, 320, rotation(768))
    qi = q[:300, :768].astype(np.int64)
    gap = np.abs(x.astype(np.float64) @ x.T.astype(np.float64) - scale**2 * (qi @ qi.T))
    assert gap.max() <= err < 0.05


def test_rotation_is_seeded_and_orthogonal():
    from vhmine.mine.join.quantise import rotation

    m = rotation(96)
    assert m.dtype == np.float32 and np.array_equal(m, rotation(96))
    assert np.abs(m.astype(np.float64) @ m.T.astype(np.float64) - np.eye(96)).max() < 1e-6


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_threaded_and_sequential_cpu_mining_match_brute_force(workers):
    clip, dino = clustered(1500, 64, 32, 11)
    want = brute_force_pairs(clip, dino, 0.9, 0.55)
    assert len(want) > 10
    for block in (64, 320, 4096):
        got = find_pairs(clip, dino, 0.9, 0.55, block_size=block, device="cpu", workers=workers)
        assert_same_pairs(got, want)
        assert np.array_equal(got.clip_sim, want.clip_sim) and np.array_equal(got.dino_sim, want.dino_sim)


def test_threaded_mining_restores_torch_threads_and_names_too_many_candidates():
    import torch

    before = torch.get_num_threads()
    clip, dino = random_set(300, 8, 4, 0)
    with pytest.raises(InputError, match="more than the limit of 1,000 candidates"):
        find_pairs(clip, dino, 0.1, max_candidates=1000, block_size=64, workers=2)
    assert torch.get_num_threads() == before


def test_fast_pass_thresholds_bracket_every_pair():
    """Every pair at or above clip_min reaches thresh; every pair at or above sure is at or above clip_min."""
    from vhmine.mine.join.quantise import fast_pass

    for clip in (clustered(400, 96, 4, 5)[0], spiky(400, 96, 4, 5)[0]):
        i, j = np.triu_indices(len(clip), k=1)
        sims = pair_sims(clip, i, j)
        for clip_min in (0.5, 0.9, float(np.sort(sims)[-20])):
            fp = fast_pass(clip, clip_min)
            qi = fp.q[: len(clip)].astype(np.int64)
            prod = (qi @ qi.T)[i, j]
            assert (prod[sims >= clip_min] >= fp.thresh).all()
            assert (sims[prod >= fp.sure] >= clip_min).all()
            assert fp.thresh <= fp.sure
            assert np.abs(sims - fp.scale**2 * prod).max() <= fp.margin


@pytest.mark.parametrize("seed", [0, 1])
def test_spread_is_orthogonal_spreads_dominant_dimensions_and_its_bound_holds(seed):
    from vhmine.mine.join.quantise import _dominant_dims, _quantise, spread

    x, _ = spiky(300, 768, 4, seed)
    dims = _dominant_dims(x, force=False)
    assert set(dims) == {3, 11, 40}  # spiky()'s three dimensions, and only those
    sp = spread(768, dims)
    m = np.eye(768) - sp.p.astype(np.float64) @ sp.q.T.astype(np.float64)
    assert np.abs(m.T @ m - np.eye(768)).max() < 1e-6 and sp.orth < 1e-5
    z = np.empty_like(x)
    sp(x, z)
    assert np.abs(z - x.astype(np.float64) @ m.T).max() <= sp.gamma  # each row has norm 1
    assert np.abs(z).max() < np.abs(x).max() / 3
    x[5] = 0  # a zero row and a unit spike
    x[6] = 0
    x[6, 3] = 1
    q, scale, err = _quantise(x, 127, 320, sp)
    qi = q[:300, :768].astype(np.int64)
    gap = np.abs(x.astype(np.float64) @ x.T.astype(np.float64) - scale**2 * (qi @ qi.T))
    assert gap.max() <= err < 0.05
    assert _dominant_dims(clustered(300, 768, 4, seed)[0], force=False) == ()
    assert len(_dominant_dims(clustered(300, 768, 4, seed)[0], force=True)) == 1


def test_recheck_with_or_without_products_gives_the_same_pairs():
    import torch

    from vhmine.mine.join.products import BlockMiner
    from vhmine.mine.join.quantise import fast_pass

    clip, dino = clustered(700, 48, 16, 4)
    fp = fast_pass(clip, 0.9)
    q = torch.from_numpy(fp.q)
    m = BlockMiner(
        clip,
        dino,
        0.9,
        0.55,
        fp.thresh,
        len(clip),
        device=torch.device("cpu"),
        block=len(q),
        width=q.shape[1],
        sure=fp.sure,
    )
    i, j, p = m.search(q, q, 0, 0)
    assert (p >= fp.sure).any() and (p < fp.sure).any()  # both paths taken
    a, b = m.recheck(i, j, p), m.recheck(i, j)
    want = brute_force_pairs(clip, dino, 0.9, 0.55)
    for got in (a, b):
        assert_same_pairs(PairSet(*got), want)


def test_huge_finite_values_are_not_taken_for_nan():
    from vhmine.mine.join.simsearch import check_rows

    clip, dino = random_set(10, 8, 4, 0)
    clip[2] = 3e19  # squares overflow float32, values do not
    check_rows(clip, dino, screened=False)  # (brute force's check: float64 takes it)
    with pytest.raises(InputError, match="clip row 2 has norm 8.49e\\+19 \\(1 row\\(s\\) in all\\)"):
        check_rows(clip, dino)  # find_pairs' refuses it as too large, not as NaN (tests/mine/test_rowcheck.py)
    clip[4, 1] = np.inf
    with pytest.raises(InputError, match="clip row 4 has NaN or infinite values \\(1 rows in all\\)"):
        check_rows(clip, dino)


@pytest.mark.parametrize("chunk, cols", [(64, 64), (128, 192), (192, 320), (None, None)])
def test_block_search_finds_every_product_at_or_above_thresh_however_the_block_is_cut(chunk, cols):
    import torch

    from vhmine.mine.join.products import BlockMiner
    from vhmine.mine.join.quantise import fast_pass

    clip, dino = clustered(900, 48, 16, 6)
    fp = fast_pass(clip, 0.8)
    q = torch.from_numpy(fp.q)
    qi = fp.q.astype(np.int64)
    full = qi @ qi.T
    m = BlockMiner(
        clip,
        dino,
        0.8,
        0.55,
        fp.thresh,
        len(clip),
        device=torch.device("cpu"),
        block=448,
        width=q.shape[1],
        sure=fp.sure,
        span=448,
        chunk=chunk,
        cols=cols,
    )
    # a diagonal block, one off it, the padded last one, and rows from within a diagonal block (as a
    # thread takes them), whose columns left of their first row hold only pairs with j < i
    for r, c, rows in ((0, 0, 448), (0, 448, 448), (448, 448, 448), (192, 0, 256), (320, 0, 128)):
        x, y = q[r : r + rows], q[c : c + 448]
        i, j, p = m.search(x, y, r, c)
        a, b = np.nonzero(full[r : r + len(x), c : c + len(y)] >= fp.thresh)
        a, b = a + r, b + c
        keep = (a < b) & (b < len(clip))
        assert sorted(zip(i.tolist(), j.tolist())) == sorted(zip(a[keep].tolist(), b[keep].tolist()))
        assert np.array_equal(p, full[i, j])
        assert len(i) > 0


@pytest.mark.parametrize("width", [1, 2, 3])
def test_turned_rows_of_width_one_to_three_give_the_brute_force_pairs(width):
    """rotate=True on rows so narrow that a reflection of the spread already lies on its share (width 1: every one)
    had fewer reflections than dimensions and crashed (issue 43); now the turn keeps the reflections it has."""
    rng = np.random.default_rng(width)
    clip, dino = (rng.standard_normal((600, width)).astype(np.float32) for _ in range(2))
    got = find_pairs(clip, dino, 0.9, 0.55, rotate=True)
    want = brute_force_pairs(clip, dino, 0.9, 0.55)
    assert sorted(zip(got.i.tolist(), got.j.tolist())) == sorted(zip(want.i.tolist(), want.j.tolist()))
    assert len(want) > 0
