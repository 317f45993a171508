"""Row sets the miner's tests share (tests/mine/*/): generated vector sets and the exact-or-refused check
(from test_rowcheck), CLIP-shaped rows (test_prune), clustered rows (test_mine_ray), a tile's plain rows
(test_tilejob). Imported by name (`from mine_sets import ...`): tests/mine/conftest.py puts this folder on the path."""

import math

import numpy as np
import pytest
from helpers import row_directions, unit_rows
from hypothesis import event
from hypothesis import strategies as st

from vhmine.errors import InputError
from vhmine.mine.join import assert_same_pairs, brute_force_pairs, pair_sims
from vhmine.mine.join.rowcheck import NORM_MAX, NORM_MIN
from vhmine.mine.ray.tilejob import PLAIN


def _scaled(rows, scales):
    return (unit_rows(rows).astype(np.float64) * np.asarray(scales, np.float64)[:, None]).astype(np.float32)


@st.composite
def vector_sets(draw, max_rows=160):
    """(clip, dino, clip_min, dino_max): rows of random directions, or clusters of near copies, or exact
    duplicates, or zero rows; each row scaled by 2**k (k drawn per set or per row, from in the accepted range
    or out of it), and thresholds on a pair's own similarity (a tie), around the set's scale, 0 or +-inf."""
    n = draw(st.integers(0, max_rows))
    d, e = draw(st.integers(1, 24)), draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    clip, dino = row_directions(draw, rng, n, d, e)
    inside, outside = st.integers(-48, 48), st.one_of(st.integers(-130, -52), st.integers(52, 120))
    out = draw(st.sampled_from(["none", "none", "none", "clip", "dino"]))  # mostly sets it must mine
    if draw(st.booleans()):  # one scale for the set
        k_clip, k_dino = (np.full(n, draw(outside if out == side else inside)) for side in ("clip", "dino"))
    else:  # a scale per row (a few outside, where one side has some)
        k_clip, k_dino = (
            np.array(
                draw(
                    st.lists(
                        st.one_of(inside, inside, inside, outside) if out == side else inside, min_size=n, max_size=n
                    )
                ),
                np.float64,
            )
            for side in ("clip", "dino")
        )
    zero = rng.random(n) < draw(st.sampled_from([0.0, 0.1]))
    clip = _scaled(clip, np.where(zero, 0.0, 2.0**k_clip * rng.uniform(0.5, 2, n)))
    dino = _scaled(dino, np.where(zero, 0.0, 2.0**k_dino * rng.uniform(0.5, 2, n)))

    def limit(x, k):
        how = draw(st.sampled_from(["tie", "tie", "scaled", "zero", "inf"]))
        if how == "tie" and n > 1:
            i, j = rng.integers(0, n, 2)
            return float(pair_sims(x, np.array([i]), np.array([j]))[0])
        if how == "scaled":
            return float(rng.uniform(-1, 1) * 4.0 ** np.median(k)) if n else 0.5
        return draw(st.sampled_from([0.0, -math.inf, math.inf])) if how == "inf" else 0.0

    return clip, dino, limit(clip, k_clip), limit(dino, k_dino)


def refused(x: np.ndarray) -> bool:
    """Whether rowcheck must refuse x: a row that is not all zeros with a norm outside [NORM_MIN, NORM_MAX]
    (float64, on the stored float32 values; the sets keep clear of the edges)."""
    norms = np.sqrt(np.sum(np.square(x.astype(np.float64)), axis=1))
    return bool(np.any((x != 0).any(axis=1) & ~((norms >= NORM_MIN) & (norms <= NORM_MAX))))


def check_exact_or_refused(mine, clip, dino, clip_min, dino_max):
    event("refused" if refused(clip) or refused(dino) else "mined")
    if refused(clip) or refused(dino):
        with pytest.raises(InputError, match=r"(clip|dino) row \d+ has norm .* L2-normalise the rows"):
            mine(clip, dino, clip_min, dino_max)
        return
    assert_same_pairs(mine(clip, dino, clip_min, dino_max), brute_force_pairs(clip, dino, clip_min, dino_max), atol=0.0)


def clip_shaped(n, d, e, seed):
    """A few dimensions far larger than the rest, of one sign in every row (as CLIP's), plus small clusters."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    for s in range(0, n, 20):
        x[s : s + 5] = x[s] + 0.2 * rng.standard_normal((len(x[s : s + 5]), d))
    for k, f in zip((1, 3, 5, 7), (10, 10, 12, 25), strict=True):
        x[:, k] = f * (1 + 0.3 * x[:, k])
    return unit_rows(x), unit_rows(rng.standard_normal((n, e)))


def clustered(n, d, e, seed, spiky=False):
    """A third random rows, the rest in clusters of 2-40 rows in row order (so 64-row tiles cut through
    them), CLIP cosines from about 0.6 to 0.99; DINOv2 agrees in half the clusters. spiky: three
    dimensions 10-25x the rest and of one sign in every row, as in real CLIP embeddings."""
    rng = np.random.default_rng(seed)
    clip, dino = rng.standard_normal((n, d)), rng.standard_normal((n, e))
    start = n // 3
    while start < n:
        rows = slice(start, start + int(rng.integers(2, 41)))
        size = len(clip[rows])
        clip[rows] = rng.standard_normal(d) + rng.uniform(0.1, 0.7) * rng.standard_normal((size, d))
        if rng.random() < 0.5:
            dino[rows] = rng.standard_normal(e) + 0.5 * rng.standard_normal((size, e))
        start += size
    if spiky:
        for k, f in zip((1, 7, 20), (10, 15, 25)):
            clip[:, k] = f * (1 + 0.3 * clip[:, k])
    return unit_rows(clip), unit_rows(dino)


def rows(k):
    out = np.zeros(k + 1, PLAIN)
    out["i"], out["j"], out["clip"] = np.arange(k + 1), np.arange(k + 1) + 1, 0.5 + k
    return out
