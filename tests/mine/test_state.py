"""mine.state: the row digests a run keeps, by which a later run proves that a row it reuses is the same."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from vhmine.mine.join import row_digests


def _rows(seed, n=50, d=(12, 9)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d[0])).astype(np.float32), rng.standard_normal((n, d[1])).astype(np.float32)


def test_digests_follow_each_row_not_its_place_or_the_chunking():
    clip, dino = _rows(0, n=20_000)
    got = row_digests(clip, dino, workers=2)
    order = np.random.default_rng(1).permutation(len(clip))
    assert (row_digests(clip[order], dino[order])[np.argsort(order)] == got).all()
    assert (row_digests(clip[7:8], dino[7:8]) == got[7]).all()
    assert len(np.unique(got)) == len(got)


@given(
    row=st.integers(0, 49),
    side=st.sampled_from(["clip", "dino"]),
    col=st.integers(0, 8),
    bits=st.integers(1, 2**32 - 1),
)
def test_property_a_change_of_one_value_changes_its_row_digest_only(row, side, col, bits):
    clip, dino = _rows(2)
    before = row_digests(clip, dino)
    x = clip if side == "clip" else dino
    x.view(np.uint32)[row, col] ^= np.uint32(bits)  # any other bits of one float32 (NaNs too)
    after = row_digests(clip, dino)
    assert np.flatnonzero(after != before).tolist() == [row]
