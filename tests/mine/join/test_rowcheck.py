"""vhmine.mine.join.rowcheck: find_pairs is float64 brute force's pair set at every scale it accepts, and refuses
the rest by row number and NaN thresholds by name (a property over generated sets, and the examples it and
the issue found)."""

import math

import numpy as np
import pytest
from helpers import unit_rows
from hypothesis import given
from hypothesis import strategies as st
from mine_sets import _scaled, check_exact_or_refused, vector_sets

from vhmine.errors import InputError
from vhmine.mine.join import assert_same_pairs, brute_force_pairs, find_pairs
from vhmine.mine.join.rowcheck import NORM_MAX, NORM_MIN


def test_rows_whose_norms_underflow_float32_are_refused_by_row_number():
    """The issue's case: rows of norm ~1e-23 gave an extra and a missing pair against float64 brute force
    (float32 products of 1e-46 underflow to 0, and the screening bound, relative to the norms, is ~1e-52)."""
    rng = np.random.default_rng(0)
    clip, dino = _scaled(rng.standard_normal((50, 8)), [1e-23] * 50), unit_rows(rng.standard_normal((50, 4)))
    assert len(brute_force_pairs(clip, dino, 0.0))  # the reference takes any scale (float64 only)
    with pytest.raises(InputError) as err:
        find_pairs(clip, dino, 0.0, device="cpu")
    assert str(err.value) == (
        "clip row 0 has norm 1e-23 (50 row(s) in all): the exact miner needs every row's norm to be 0 or within "
        "8.9e-16 to 1.1e+15, where its float32 arithmetic neither underflows nor overflows; L2-normalise the rows "
        "(as `vhmine embed` does) or scale them into that range"
    )


def test_rows_whose_squares_overflow_float32_are_refused_not_met_as_a_nan_threshold():
    rng = np.random.default_rng(1)
    clip, dino = unit_rows(rng.standard_normal((40, 8))), _scaled(rng.standard_normal((40, 4)), [1.0] * 39 + [1e19])
    with pytest.raises(InputError, match=r"^dino row 39 has norm 1e\+19 \(1 row\(s\) in all\): the exact miner needs"):
        find_pairs(clip, dino, 0.5, 0.2, device="cpu")
    clip = _scaled(rng.standard_normal((40, 8)), [3e19] * 40)  # was: ValueError: cannot convert float NaN to integer
    with pytest.raises(InputError, match=r"^clip row 0 has norm 3e\+19 \(40 row"):
        find_pairs(clip, unit_rows(rng.standard_normal((40, 4))), 0.5, device="cpu")


def test_a_nan_threshold_is_named():
    clip, dino = unit_rows(np.eye(4) + 0.1), unit_rows(np.eye(4)[::-1] + 0.1)
    with pytest.raises(InputError, match=r"^clip_min is NaN: give a number"):
        find_pairs(clip, dino, math.nan)  # was a bare ValueError (cannot convert float NaN to integer)
    with pytest.raises(InputError, match=r"^dino_max is NaN: give a number"):
        find_pairs(clip, dino, 0.5, float("nan"))
    with pytest.raises(InputError, match=r"^clip_min must be a number .*got 'high'"):
        find_pairs(clip, dino, "high")


def test_zero_rows_and_rows_at_the_edges_of_the_range_are_mined_exactly():
    rng = np.random.default_rng(2)
    scales = [0.0, 0.0, NORM_MIN * 1.01, NORM_MIN * 1.01, NORM_MAX / 1.01, NORM_MAX / 1.01, 1.0, 1.0] * 8
    clip, dino = _scaled(rng.standard_normal((64, 6)), scales), _scaled(rng.standard_normal((64, 3)), scales[::-1])
    for clip_min, dino_max in ((0.0, math.inf), (0.0, 0.0), (-1e-40, 1e-40), (0.3, 0.1)):
        assert_same_pairs(
            find_pairs(clip, dino, clip_min, dino_max, device="cpu", block_size=64),
            brute_force_pairs(clip, dino, clip_min, dino_max),
            atol=0.0,
        )


# the examples the property shrank to on the miner before rowcheck (each is refused now, by row):
def test_shrunk_a_huge_clip_row_made_the_fast_pass_threshold_nan():
    clip = np.array([[1.4099537e00], [-2.9408627e19]], np.float32)  # its square overflows float32
    dino = np.array([[1.3154374], [1.9026086]], np.float32)
    assert len(brute_force_pairs(clip, dino, -4.146480215851139e19, 2.5027626221569506)) == 1
    with pytest.raises(InputError, match=r"^clip row 1 has norm 2.94e\+19 \(1 row\(s\) in all\)"):
        find_pairs(clip, dino, -4.146480215851139e19, 2.5027626221569506, device="cpu", block_size=1)
        # (was: ValueError: cannot convert float NaN to integer)


def test_shrunk_huge_dino_rows_lost_a_pair_in_the_float32_screen():
    clip = np.array([[0.5424795], [-0.6864249], [1.5059366], [1.4707843], [-1.4230777]], np.float32)
    dino = np.array(
        [
            [5.3014564e18, 1.9118348e19],
            [2.9551220e19, -2.1958243e19],
            [-3.2620955e19, -1.6067222e19],
            [5.0102323e17, -2.8187944e19],
            [-4.7082886e18, -2.6811389e19],
        ],
        np.float32,
    )
    want = brute_force_pairs(clip, dino, -2.0930403518371037, 6.337635885443299e38)
    assert len(want) == 8 and (1, 2) in set(
        zip(want.i.tolist(), want.j.tolist())
    )  # dino sim -6.1e38: overflows float32
    with pytest.raises(InputError, match=r"^dino row 0 has norm 1.98e\+19 \(5 row\(s\) in all\)"):
        find_pairs(clip, dino, -2.0930403518371037, 6.337635885443299e38, device="cpu", block_size=1)
        # (was: 7 pairs, (1, 2) missing)


# --- the property -----------------------------------------------------------------------------------------


@given(vector_sets(), st.sampled_from([1, 64, 128, None]), st.sampled_from([1, 2]))
def test_property_find_pairs_is_brute_force_or_refuses_by_row(data, block, workers):
    clip, dino, clip_min, dino_max = data
    check_exact_or_refused(
        lambda *a: find_pairs(*a, device="cpu", block_size=block, workers=workers), clip, dino, clip_min, dino_max
    )
