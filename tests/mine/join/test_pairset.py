"""mine.join.pairset.merge: parts of pairs in any order (each sorted or not, as many as there are) give one
PairSet in (i, j) order, each pair's similarities with it."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from vhmine.mine.join.pairset import merge


@given(
    n=st.integers(2, 40),
    cuts=st.lists(st.integers(0, 400), max_size=12),
    sort_parts=st.lists(st.booleans(), min_size=13, max_size=13),
    seed=st.integers(0, 2**16),
)
def test_property_merge_orders_distinct_pairs_from_parts_sorted_or_not(n, cuts, sort_parts, seed):
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(n, 1)
    take = rng.permutation(len(i))[: rng.integers(0, len(i) + 1)]
    i, j = i[take], j[take]
    clip, dino = (i * 1000 + j).astype(float), (j * 1000 + i).astype(float)  # each pair's own values
    bounds = sorted({0, len(i), *(c % (len(i) + 1) for c in cuts)})
    parts = []
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        order = np.lexsort((j[a:b], i[a:b])) if sort_parts[k] else np.arange(b - a)
        parts.append(tuple(x[a:b][order] for x in (i, j, clip, dino)))
    got = merge(parts)
    want = np.lexsort((j, i))
    assert np.array_equal(got.i, i[want]) and np.array_equal(got.j, j[want])
    assert np.array_equal(got.clip_sim, got.i * 1000.0 + got.j)
    assert np.array_equal(got.dino_sim, got.j * 1000.0 + got.i)


def test_two_sorted_parts_are_merged_in_order():
    """A grown index's earlier pairs and its band's pairs: two sorted runs, interleaved."""
    got = merge(
        [
            (np.array([0, 0, 2]), np.array([1, 5, 3]), np.zeros(3), np.zeros(3)),
            (np.array([0, 1]), np.array([3, 2]), np.ones(2), np.ones(2)),
        ]
    )
    assert list(zip(got.i.tolist(), got.j.tolist(), got.clip_sim.tolist())) == [
        (0, 1, 0.0),
        (0, 3, 1.0),
        (0, 5, 0.0),
        (1, 2, 1.0),
        (2, 3, 0.0),
    ]
