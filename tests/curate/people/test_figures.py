"""curate.people.figures (issue 42): the app's tables showed "18.9000", "0.0000" hours left and a saving of -99.092
where `vhmine draft --stats` printed -9909.2%; numbers now drop their trailing zeros, times read as hours and
minutes, and a share is written one way, the CLI's."""

from __future__ import annotations

import pytest

from vhmine import curate as C


@pytest.mark.parametrize(
    ("x", "places", "text"),
    [(18.9, 1, "18.9"), (18.9000, 4, "18.9"), (19.0, 1, "19"), (0.0, 2, "0"), (-0.04, 1, "0"), (0.812, 3, "0.812"),
     (1234.56, 1, "1234.6"), (7, 0, "7"), (None, 1, None)],
)  # fmt: skip
def test_numbers_without_trailing_zeros(x, places, text):
    assert C.people.number(x, places) == text


@pytest.mark.parametrize(
    ("hours", "text"),
    [(2.25, "2 h 15 min"), (0.75, "45 min"), (3.0, "3 h"), (0.0, "0 min"), (0.01, "under 1 min"),
     (1 / 60, "1 min"), (59.6 / 60, "1 h"), (130.5, "130 h 30 min"), (None, None)],
)  # fmt: skip
def test_hours_as_hours_and_minutes(hours, text):
    assert C.people.duration(hours) == text


@pytest.mark.parametrize(("x", "text"), [(-99.092, "-9909.2%"), (0.5, "50.0%"), (1.0, "100.0%"), (None, "-")])
def test_a_share_in_percent_as_the_cli_writes_it(x, text):
    assert C.people.percent(x) == text
