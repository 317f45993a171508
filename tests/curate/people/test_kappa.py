"""vhmine.curate.kappa: Cohen's and Fleiss' kappa against hand-computed values."""

import math

import pytest

from vhmine.curate.people.kappa import cohen_kappa, fleiss_kappa


def test_cohen_two_categories():
    # 50 items: both yes 20, yes/no 5, no/yes 10, both no 15 -> p_o = 0.7, p_e = 0.5*0.6 + 0.5*0.4 = 0.5
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_three_categories():
    # p_o = 4/6; counts a: x2 y2 z2, b: x2 y3 z1 -> p_e = (4 + 6 + 2) / 36 = 1/3 -> kappa = (2/3 - 1/3) / (2/3)
    assert cohen_kappa(list("xxyyzz"), list("xyyyzx")) == pytest.approx(0.5)


def test_cohen_edge_cases():
    assert cohen_kappa(["a", "b"], ["a", "b"]) == 1.0
    assert cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(-1.0)
    assert math.isnan(cohen_kappa(["yes"] * 3, ["yes"] * 3))  # one category only: undefined
    with pytest.raises(ValueError, match="labelled 2 and 1 items"):
        cohen_kappa(["a", "b"], ["a"])


def test_fleiss_reference_table():
    # Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories -> P = 0.378, P_e = 0.213, kappa =
    # 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    items = [[cat for cat, n in enumerate(row) for _ in range(n)] for row in table]
    assert round(fleiss_kappa(items), 3) == 0.210


def test_fleiss_unequal_ratings_per_item():
    # P_1 = 1, P_2 = (0 + 2) / 6 = 1/3 -> P = 2/3; shares a 3/5, b 2/5 -> P_e = 13/25; kappa = (2/3 - 13/25) / (12/25) =
    # 11/36
    assert fleiss_kappa([["a", "a"], ["a", "b", "b"]]) == pytest.approx(11 / 36)


def test_fleiss_four_raters_perfect_and_undefined():
    assert fleiss_kappa([["y"] * 4, ["n"] * 4, ["y"] * 4]) == 1.0
    assert math.isnan(fleiss_kappa([["y"] * 4, ["y"] * 4]))
    with pytest.raises(ValueError, match="item 1 has fewer than two ratings"):
        fleiss_kappa([["y", "y"], ["n"]])
