"""vhmine.mine.join.blocks: row blocks quantised with parameters from one streaming pass, and tiles mined from
two blocks each, give fast_pass's quantisation and the float64 brute force's pairs."""

import math

import numpy as np
import pytest
from helpers import unit_rows

from vhmine.mine.join.blocks import (
    BlockStats,
    Quantiser,
    choose_turn,
    exact_pairs,
    quantise_block,
    sample_rows,
    scan_block,
    threshold,
    tile_candidates,
)
from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_pairs, fast_pass, find_pairs, merge


def data(n, d, e, seed, spiky=False):
    rng = np.random.default_rng(seed)
    clip, dino = rng.standard_normal((n, d)), rng.standard_normal((n, e))
    for s in range(n // 3, n, 12):  # clusters of 12
        clip[s : s + 12] = rng.standard_normal(d) + rng.uniform(0.1, 0.6) * rng.standard_normal(
            (len(clip[s : s + 12]), d)
        )
    if spiky:  # a few dimensions far larger than the rest, as in CLIP
        for k, f in zip((1, 7, 20), (10, 15, 25)):
            clip[:, k] = f * (1 + 0.3 * clip[:, k])
    return unit_rows(clip), unit_rows(dino)


def scanned(clip, chunk):
    dims = choose_turn(clip[sample_rows(len(clip))])
    amax = max(scan_block(clip[s : s + chunk], dims) for s in range(0, len(clip), chunk))
    return Quantiser.from_scan(clip.shape[1], amax, dims)


@pytest.mark.parametrize("spiky", [False, True])
def test_a_chunked_scan_fixes_fast_pass_quantisation(spiky):
    clip, _ = data(3000, 48, 8, 0, spiky)
    fp = fast_pass(clip, 0.9)
    qz = scanned(clip, 700)
    assert qz.rotated == fp.rotated == spiky
    stats, q = BlockStats(0.0, 0.0, 0.0), []
    for s in range(0, len(clip), 700):
        qb, st = quantise_block(clip[s : s + 700], qz)
        assert qb.shape == (-(-len(clip[s : s + 700]) // 64) * 64, 48) and not qb[len(clip[s : s + 700]) :].any()
        q.append(qb[: len(clip[s : s + 700])])
        stats = stats | st
    thresh, err = threshold(qz, stats, 0.9)
    # the same scale, and (quantise's functions on the same chunks) the same bound and threshold; turned
    # rows are float32 products, whose rounding may depend on the chunk they are computed in: there the
    # residuals (and so the bound) may move in the 8th digit, the integer threshold not at all
    assert qz.scale == fp.scale
    assert thresh == fp.thresh and err == pytest.approx(fp.margin, rel=1e-6 if spiky else 1e-15)
    if not spiky:  # no turn: no float32 product whose rounding could depend on the chunk
        assert np.array_equal(np.concatenate(q), fp.q[: len(clip)])


@pytest.mark.parametrize("spiky, side, clip_min, dino_max", [(False, 64, 0.8, 0.3), (True, 128, 0.95, math.inf)])
def test_tiles_from_two_blocks_give_the_brute_force_pairs(spiky, side, clip_min, dino_max):
    clip, dino = data(700, 32, 16, 1, spiky)
    want = brute_force_pairs(clip, dino, clip_min, dino_max)
    assert len(want) > 100
    edge = float(np.sort(want.clip_sim)[len(want) // 2])  # a threshold exactly on a pair's sim finds it
    qz = scanned(clip, side)
    for cmin, ref in ((clip_min, want), (edge, brute_force_pairs(clip, dino, edge, dino_max))):
        parts = []
        for r in range(0, len(clip), side):
            qa, sa = quantise_block(clip[r : r + side], qz)
            for c in range(r, len(clip), side):
                qb, sb = (qa, sa) if c == r else quantise_block(clip[c : c + side], qz)
                thresh, _ = threshold(qz, sa | sb, cmin)  # this tile's own bound
                i, j = tile_candidates(qa, qb, r, c, thresh, len(clip), device="cpu", block=side)
                parts.append(exact_pairs(lambda u: clip[u], lambda u: dino[u], i, j, cmin, dino_max))
        got = merge(parts)
        assert_same_pairs(got, ref, atol=0.0)
        local = find_pairs(clip, dino, cmin, dino_max, device="cpu")
        assert np.array_equal(got.clip_sim, local.clip_sim) and np.array_equal(got.dino_sim, local.dino_sim)


def test_a_recorded_quantiser_round_trips_and_an_older_one_asks_for_a_new_scan():
    clip, _ = data(600, 48, 8, 3, spiky=True)
    qz = scanned(clip, 200)
    assert qz.rotated and qz.dims  # the spikes are spread
    import json

    again = Quantiser.from_dict(json.loads(json.dumps(qz.as_dict())))  # as job.json holds it
    assert again == qz and hash(again) == hash(qz)  # (tiletask caches blocks by it)
    # an older vhmine recorded whether rows were rotated by a dense rotation, not which dimensions
    assert Quantiser.from_dict({"dim": 48, "scale": qz.scale, "qmax": qz.qmax, "rotated": True}) is None


@pytest.mark.parametrize("spiky", [False, True])
def test_rows_beyond_the_recorded_scale_are_clipped_and_the_bound_still_holds(spiky):
    """A block whose rows reach past the scan's largest component (rows the scan did not see, or a turn
    rounded differently) saturates at +-qmax; the measured residual keeps the bound true."""
    clip, _ = data(400, 32, 8, 4, spiky)
    qz = scanned(clip[:100], 100)  # the scale of the first 100 rows only
    coarse = Quantiser(qz.dim, qz.scale / 1.7, qz.qmax, qz.dims)  # and finer: most rows overflow it
    q, stats = quantise_block(clip, coarse)
    assert np.abs(q).max() == qz.qmax  # saturated, not wrapped around in int8
    _, err = threshold(coarse, stats, 0.9)
    qi = q[: len(clip)].astype(np.int64)
    approx = coarse.scale**2 * (qi @ qi.T)
    exact = clip.astype(np.float64) @ clip.astype(np.float64).T
    assert np.abs(exact - approx).max() <= err
    assert err > np.abs(exact - approx).max() / 50  # (a bound, not a blanket)
