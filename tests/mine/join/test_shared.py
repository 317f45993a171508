"""mine.join.shared: the pairs of a rectangle whose two collections share images, as a set of unordered
pairs of two different images, each once, whatever the pairs' order."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from vhmine.mine.join.shared import keep_across, shared_ids

IDS = [f"img{k}" for k in range(6)]


@given(
    pairs=st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(IDS), st.booleans()), unique_by=lambda p: p[:2]),
    seed=st.integers(0, 2**16),
)
def test_property_each_unordered_pair_of_two_images_once_and_the_preferred_side(pairs, seed):
    id_a = np.array([p[0] for p in pairs], dtype=object)
    id_b = np.array([p[1] for p in pairs], dtype=object)
    prefer = np.array([p[2] for p in pairs], bool)
    kept = keep_across(id_a, id_b, prefer=prefer)
    got = [(a, b, p) for a, b, p, k in zip(id_a, id_b, prefer, kept) if k]
    assert all(a != b for a, b, _ in got)  # no image with itself
    key = [frozenset((a, b)) for a, b, _ in got]
    assert len(set(key)) == len(key)  # each unordered pair once
    assert set(key) == {frozenset((a, b)) for a, b, _ in pairs if a != b}  # and every one of them
    for a, b, p in got:  # of (x, y) and (y, x): the preferred one, then the one whose side a is lower
        other = [q for x, y, q in pairs if (x, y) == (b, a)]
        if other:
            assert (p, a < b) >= (other[0], b < a)
    order = np.random.default_rng(seed).permutation(len(pairs))  # the same pairs in another order
    again = keep_across(id_a[order], id_b[order], prefer=prefer[order])
    assert sorted(zip(id_a[order][again], id_b[order][again])) == sorted((a, b) for a, b, _ in got)


def test_shared_ids_and_no_pairs():
    assert list(shared_ids(["b", "a", "c"], ["c", "d", "a"])) == ["a", "c"]
    assert keep_across(np.array([], dtype=object), np.array([], dtype=object)).tolist() == []
    assert keep_across(np.array(["x", "y"], dtype=object), np.array(["y", "x"], dtype=object)).tolist() == [True, False]
