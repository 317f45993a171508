"""vhmine.mine.join.prune.sample_share, the Ray driver's pruning choice on a 4,096-row sample: the same share as
the formula it replaced, bit for bit, in bounded memory whatever the collection's size (issue 33: the driver's
peak followed N through this sample's matrices, 308 MiB at 2,000,000 rows and 468 MiB at 400 M)."""

import tracemalloc

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from vhmine.mine.join import prune


def share_before(sample, n, centres, thresh, piece=1024, side=None):
    """sample_share as it was before issue 33 (its m x groups and pieces x pieces temporaries), verbatim."""
    m = len(sample)
    block = (np.arange(m) * (n / m) // side).astype(np.int64) if side else np.zeros(m, np.int64)
    s = sample.astype(np.float32)
    s = s[np.lexsort((np.argmax(s @ centres.T, axis=1), block))]
    g, per = max(1, round(prune.GROUP * m / n)), max(1, round(piece / prune.GROUP))
    first = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
    starts = np.unique(np.concatenate([np.arange(f, e, g) for f, e in zip(first, np.r_[first[1:], len(s)])]))
    size = np.diff(np.append(starts, len(s)))
    cen = np.add.reduceat(s, starts, axis=0) / size[:, None]
    own = np.repeat(np.arange(len(starts)), size)
    rad = np.sqrt(np.maximum.reduceat(((s - cen[own]) ** 2).sum(axis=1), starts))
    b = np.maximum.reduceat(s @ cen.T + np.linalg.norm(s, axis=1)[:, None] * rad[None, :], starts, axis=0)
    low = np.minimum(b, b.T) < thresh
    gblock = block[starts]
    gfirst = np.flatnonzero(np.r_[True, gblock[1:] != gblock[:-1]])
    pstart = np.unique(np.concatenate([np.arange(f, e, per) for f, e in zip(gfirst, np.r_[gfirst[1:], len(starts)])]))
    skipped = np.logical_and.reduceat(np.logical_and.reduceat(low, pstart, axis=0), pstart, axis=1)
    rows = np.add.reduceat(size, pstart).astype(np.float64)
    area = np.triu(np.outer(rows, rows), 1) + np.diag(rows * (rows - 1) / 2)
    return float((area * skipped).sum() / max(area.sum(), 1.0))


def _sample(seed, m, width, families):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((max(1, m // families), width))[rng.integers(0, max(1, m // families), m)]
    x = x + 0.2 * rng.standard_normal((m, width))
    return np.clip(np.round(x * 40), -127, 127).astype(np.int8)


@given(
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(1, 700),
    width=st.sampled_from([8, 16, 40]),
    families=st.sampled_from([1, 4, 50]),
    n_per_row=st.sampled_from([1, 3, 60, 600, 100_000]),
    side=st.sampled_from([None, 64, 4_096, 14_016]),
    piece=st.sampled_from([256, 1024]),
    k=st.integers(1, 12),
    level=st.floats(0.0, 1.0),
)
def test_property_the_share_is_the_formula_it_replaced_bit_for_bit(
    seed, m, width, families, n_per_row, side, piece, k, level
):
    q = _sample(seed, m, width, families)
    centres = q[np.random.default_rng(seed + 1).integers(0, m, min(k, m))].astype(np.float64)
    top = float((q.astype(np.float64) ** 2).sum(axis=1).max())  # the largest product: shares between 0 and 1
    thresh = int((1.5 * level - 0.25) * top)
    n = m * n_per_row
    got = prune.sample_share(q, n, centres, thresh, piece=piece, side=side)
    event("share 0" if got == 0 else "share 1" if got == 1 else "share between")
    assert got == share_before(q, n, centres, thresh, piece=piece, side=side)


@pytest.mark.parametrize("n", [2_000_000, 400_000_000])
def test_the_share_of_a_large_collection_is_measured_in_bounded_memory(n):
    """4,096 CLIP-sized rows, as the Ray driver samples; groups of one row each at these sizes (pieces of
    blocks of 14,016 rows at 400 M): before, 308 and 468 MiB."""
    q = _sample(0, 4_096, 768, 50)
    centres = q[:55].astype(np.float64)
    tracemalloc.start()
    try:
        got = prune.sample_share(q, n, centres, 10**6, side=14_016)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0.0 <= got <= 1.0 and peak < 200 * 2**20, peak / 2**20
