"""vhmine.mine.join.prune in the Ray engine: each tile's blocks ordered by the centres the driver chose on a
sample, pieces bounded below the threshold skipped, and the pairs those of a float64 brute force, for the
triangle, the band of new rows and the rectangle of two collections; the driver's choice measured on a
sample (families of near copies, their topics in row order, are pruned; CLIP-shaped rows are not). The
workers' pieces are their own (GROUP 256 rows, pieces of 1024): tiles of 512 rows hold 2 x 2 groups."""

import numpy as np
import pytest
from helpers import unit_rows
from mine_sets import clip_shaped

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")

from vhmine.mine.join.simsearch import assert_same_pairs, brute_force_across, brute_force_pairs, find_pairs  # noqa: E402
from vhmine.mine.ray.arrays import find_pairs_across_ray, find_pairs_ray  # noqa: E402

# every test here starts (or shares) the session's Ray cluster: the slow tier, so the inner loop starts none
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("ray_cluster")]


def topics_in_order(n, d, e, seed, topics=6):
    """Families of about 4 near copies in a few topics, the topics one after another in row order (a crawl
    topic by topic): a block of rows holds one or two topics."""
    rng = np.random.default_rng(seed)
    topic = np.sort(rng.integers(0, topics, n))
    fam = topic * n + rng.integers(0, max(1, n // (4 * topics)), n)
    _, fam = np.unique(fam, return_inverse=True)
    clip = (
        rng.standard_normal((topics, d))[topic]
        + 0.3 * rng.standard_normal((fam.max() + 1, d))[fam]
        + 0.05 * rng.standard_normal((n, d))
    )
    return unit_rows(clip), unit_rows(rng.standard_normal((n, e)))


def test_pruned_tiles_skip_products_and_keep_every_pair():
    clip, dino = topics_in_order(3000, 48, 8, 0)
    want = brute_force_pairs(clip, dino, 0.95, 0.5)
    st_on, st_off = {}, {}
    got = find_pairs_ray(clip, dino, 0.95, 0.5, tile=512, prune=True, stats=st_on)
    plain = find_pairs_ray(clip, dino, 0.95, 0.5, tile=512, prune=False, stats=st_off)
    assert_same_pairs(got, want, atol=0.0)
    assert_same_pairs(plain, want, atol=0.0)
    assert st_on["candidates"] == st_off["candidates"]
    assert st_on["prune"]["chosen"] and st_on["prune"]["skipped"] > 0.15, st_on["prune"]
    assert st_off["prune"]["chosen"] is False and st_off["prune"]["skipped"] is None


@pytest.mark.parametrize("clip_min", [0.9, 0.97])
def test_pruned_band_and_rectangle_tiles_keep_every_pair(clip_min):
    clip, dino = topics_in_order(2000, 32, 8, 1)
    new = np.arange(3, 2000, 11)
    want = brute_force_pairs(clip, dino, clip_min)
    touch = np.isin(want.i, new) | np.isin(want.j, new)
    band = find_pairs_ray(clip, dino, clip_min, new_rows=new, tile=512, prune=True)
    assert len(band) == int(touch.sum()) and set(zip(band.i.tolist(), band.j.tolist())) == set(
        zip(want.i[touch].tolist(), want.j[touch].tolist())
    )
    st_ = {}
    across = find_pairs_across_ray(
        clip[:900], dino[:900], clip[900:], dino[900:], clip_min, tile=512, prune=True, stats=st_
    )
    assert_same_pairs(
        across, brute_force_across(clip[:900], dino[:900], clip[900:], dino[900:], clip_min), atol=0.0, across=True
    )
    assert st_["prune"]["chosen"]


@pytest.mark.slow
def test_the_driver_measures_the_choice_on_a_sample():
    """Tiles of 15,000 rows in topic order: a sample says pruning pays, and it skips products; at 2,048 rows
    a tile's products are too few to pay for ordering its blocks; CLIP-shaped rows: nothing to skip."""
    fam, fam_dino = topics_in_order(30000, 48, 8, 2)
    small, small_dino = topics_in_order(6000, 48, 8, 2)
    shaped, shaped_dino = clip_shaped(6000, 48, 8, 2)
    st_fam, st_small, st_shaped = {}, {}, {}
    got = find_pairs_ray(fam, fam_dino, 0.95, tile=15000, stats=st_fam)
    find_pairs_ray(small, small_dino, 0.95, tile=2048, stats=st_small)
    find_pairs_ray(shaped, shaped_dino, 0.95, tile=2048, stats=st_shaped)
    assert st_fam["prune"]["chosen"] and st_fam["prune"]["skipped"] > 0.2, st_fam["prune"]
    assert not st_small["prune"]["chosen"] and st_small["prune"]["sample_share"] > 0.05, st_small["prune"]
    assert not st_shaped["prune"]["chosen"] and st_shaped["prune"]["skipped"] is None, st_shaped["prune"]
    assert_same_pairs(got, find_pairs(fam, fam_dino, 0.95, prune=False), atol=0.0)
