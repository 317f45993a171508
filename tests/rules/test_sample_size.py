"""rules.sample_size: Connor (1987)'s formula against its published example and a simulation of the test it is for
(paired studies drawn at the computed size, McNemar's test asymptotic and exact); impossible designs refused with their
bounds; more items for smaller differences and more power (hypothesis, bounded in CI)."""

import numpy as np
import pytest
import scipy.stats as st
from hypothesis import given
from hypothesis import strategies as hs

from vhmine.errors import InputError
from vhmine.rules import sample_size as S

Z = 1.959963984540054  # the normal quantile at 0.975


def test_connors_published_example():
    # Connor (1987), p. 209 (as powerandsamplesize.com's McNemar calculator reproduces it): p01 = 0.45, p10 = 0.05,
    # alpha 0.05 two-sided, power 0.8 -> 23 pairs. Here: a difference of 0.40 with 0.50 of the items discordant.
    assert S.instances_needed(accuracy=0.6, difference=0.40, discordant=0.50) == 23


def test_the_defaults_need_783_items_per_mode_and_150_give_little_power():
    n = S.instances_needed()  # 60%, 5 points, power 0.8, alpha 0.05, a quarter of the items discordant
    assert n == 783
    assert S.power_at(n) >= 0.8 > S.power_at(n - 1)
    assert S.power_at(150) == pytest.approx(0.23, abs=0.01)  # a VHTest-sized mode
    assert S.instances_needed(discordant=None) == 1509  # models whose answers are independent: psi 0.48
    assert S.short_modes({"counting": 150, "ocr": 800}, n) == {"counting": 150}


def test_discordant_share_from_a_correlation():
    assert S.discordant_share(0.625, 0.575, 0.0) == pytest.approx(0.625 * 0.425 + 0.575 * 0.375)
    assert S.discordant_share(0.625, 0.575, 0.5) == pytest.approx(0.2419, abs=1e-4)
    assert S.discordant_share(0.6, 0.6, 1.0) == pytest.approx(0.0, abs=1e-12)


def _simulated_power(n, discordant, difference=0.05, runs=20_000, seed=0):
    """The share of `runs` simulated paired studies of n items in which McNemar's test (asymptotic, no continuity
    correction; and the exact one) rejects at 0.05."""
    rng = np.random.default_rng(seed)
    p10, p01 = (discordant + difference) / 2, (discordant - difference) / 2
    counts = rng.multinomial(n, [p10, p01, 1 - discordant], size=runs)
    b, c = counts[:, 0], counts[:, 1]
    z = (b - c) / np.sqrt(np.maximum(b + c, 1))
    exact = np.minimum(1.0, 2 * st.binom.cdf(np.minimum(b, c), b + c, 0.5))
    return float((np.abs(z) > Z).mean()), float((exact < 0.05).mean())


@pytest.mark.parametrize("discordant", [0.25, 0.4813])
def test_the_sample_size_gives_its_power_in_a_simulation(discordant):
    n = S.instances_needed(discordant=discordant)
    asymptotic, exact = _simulated_power(n, discordant)
    assert asymptotic == pytest.approx(0.80, abs=0.015)  # 20,000 runs: a standard error of 0.003
    assert 0.75 < exact < asymptotic  # the exact test is a little conservative


def test_impossible_designs_are_refused_with_their_bounds():
    with pytest.raises(InputError, match="impossible for models at 0.625 and 0.575: it lies between 0.050 and 0.800"):
        S.instances_needed(discordant=0.9)
    with pytest.raises(InputError, match="impossible"):
        S.instances_needed(discordant=0.04)
    with pytest.raises(InputError, match="between 0 and 1"):
        S.instances_needed(difference=0)
    with pytest.raises(InputError, match="leaves"):
        S.instances_needed(accuracy=0.99, difference=0.05)


@given(hs.floats(0.3, 0.7), hs.floats(0.02, 0.2), hs.floats(0.6, 0.95))
def test_more_items_for_smaller_differences_and_more_power(accuracy, difference, power):
    psi = 0.3
    n = S.instances_needed(accuracy, difference, power, discordant=psi)
    assert S.instances_needed(accuracy, difference * 0.9, power, discordant=psi) >= n
    assert S.instances_needed(accuracy, difference, min(0.99, power + 0.02), discordant=psi) >= n
    assert S.power_at(n, accuracy, difference, discordant=psi) >= power - 1e-12  # n is the least that gives it
    assert S.power_at(n - 1, accuracy, difference, discordant=psi) < power


def test_settings_record_the_design_and_what_it_needs():
    assert S.settings() == {
        "accuracy": 0.6,
        "difference": 0.05,
        "power": 0.8,
        "alpha": 0.05,
        "discordant": 0.25,
        "method": "connor-1987",
        "needed": 783,
    }


def test_the_shortfall_names_the_modes_under_the_need_in_their_order_and_nothing_when_none_is():
    counts = {"color": 150, "counting": 783, "ocr": 782}
    assert S.shortfall(counts)["short_modes"] == {"color": 150, "ocr": 782}  # 783 is enough, 782 is not
    line = S.shortfall_line(counts, "ready instances")
    assert line.startswith("2 of 3 mode(s) have fewer than the 783 ready instances per mode that tell two models 5 ")
    assert "(power 0.8, alpha 0.05, 25% of items answered right by one model only" in line
    assert line.endswith(": color 150, ocr 782")
    assert S.shortfall_line({"counting": 800}) is None
