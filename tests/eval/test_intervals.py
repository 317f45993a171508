"""vhmine.eval.intervals: Wilson and McNemar against their closed forms on hand-computed cases (and scipy's own
implementations), the bootstrap against scipy.stats.bootstrap drawing the same resamples from the same seed;
properties over counts and units (hypothesis, bounded in CI)."""

import numpy as np
import pytest
import scipy.stats as st
from hypothesis import given
from hypothesis import strategies as hs

from vhmine.eval import intervals as I

Z = 1.959963984540054  # the normal quantile at 0.975


# --- Wilson ----------------------------------------------------------------------------------------------


def test_wilson_at_zero_and_all_right_has_closed_form_bounds():
    # at 0 right the interval is [0, z^2 / (n + z^2)]; at n right [n / (n + z^2), 1]
    iv = I.wilson(0, 10)
    assert (iv.estimate, iv.lo, iv.n, iv.method) == (0.0, 0.0, 10, "wilson")
    assert iv.hi == pytest.approx(Z * Z / (10 + Z * Z), abs=1e-12)  # 0.27753...
    assert iv.hi == pytest.approx(0.2775328, abs=1e-7)
    iv = I.wilson(10, 10)
    assert iv.lo == pytest.approx(10 / (10 + Z * Z), abs=1e-12) and iv.hi == 1.0


def test_wilson_bounds_are_the_roots_of_its_quadratic():
    # the Wilson bounds solve (phat - p)^2 = z^2 p (1 - p) / n, i.e. (1 + z^2/n) p^2 - (2 phat + z^2/n) p + phat^2 = 0
    for right, n in ((90, 150), (1, 3), (7, 40), (299, 300)):
        phat = right / n
        roots = sorted(np.roots([1 + Z * Z / n, -(2 * phat + Z * Z / n), phat * phat]).real)
        iv = I.wilson(right, n)
        assert (iv.lo, iv.hi) == (pytest.approx(roots[0], abs=1e-12), pytest.approx(roots[1], abs=1e-12))


def test_wilson_of_sixty_percent_of_150_is_about_eight_points_each_way():
    # the arithmetic: 90 of 150 right -> [52.0, 67.5] (by hand: centre 0.5975, half-width 0.0775)
    iv = I.wilson(90, 150)
    assert (round(100 * iv.lo, 1), round(100 * iv.hi, 1)) == (52.0, 67.5)
    assert iv.record() == {"n": 150, "ci95": [iv.lo, iv.hi], "ci_method": "wilson"}


def test_wilson_agrees_with_scipy():
    for right, n in ((0, 1), (3, 7), (60, 150), (500, 1000), (149, 150)):
        ci = st.binomtest(right, n).proportion_ci(0.95, method="wilson")
        iv = I.wilson(right, n)
        assert (iv.lo, iv.hi) == (pytest.approx(ci.low, abs=1e-12), pytest.approx(ci.high, abs=1e-12))


def test_wilson_of_nothing_is_no_interval_and_bad_counts_are_refused():
    assert I.wilson(0, 0).record() == {"n": 0, "ci95": None, "ci_method": "wilson"}
    for right, n in ((4, 3), (-1, 3), (0, -1)):
        with pytest.raises(ValueError, match="is not a count"):
            I.wilson(right, n)


@given(hs.integers(1, 5000).flatmap(lambda n: hs.tuples(hs.integers(0, n), hs.just(n))))
def test_wilson_contains_the_estimate_inside_zero_one(case):
    right, n = case
    iv = I.wilson(right, n)
    assert 0.0 <= iv.lo <= iv.estimate <= iv.hi <= 1.0 and iv.lo < iv.hi


@given(hs.integers(1, 500).flatmap(lambda n: hs.tuples(hs.integers(0, n), hs.just(n))), hs.integers(2, 20))
def test_wilson_narrows_as_items_grow_at_the_same_rate(case, k):
    right, n = case
    small, big = I.wilson(right, n), I.wilson(k * right, k * n)
    assert big.hi - big.lo < small.hi - small.lo


# --- McNemar --------------------------------------------------------------------------------------------


def test_mcnemar_exact_hand_computed():
    assert I.mcnemar_exact(0, 5) == 2 / 32  # 2 * P(X <= 0), X ~ Bin(5, 1/2)
    assert I.mcnemar_exact(1, 9) == 22 / 1024  # 2 * (1 + 10) / 2^10
    assert I.mcnemar_exact(3, 1) == 10 / 16  # 2 * (1 + 4) / 2^4
    assert I.mcnemar_exact(5, 5) == 1.0 and I.mcnemar_exact(0, 0) == 1.0
    with pytest.raises(ValueError):
        I.mcnemar_exact(-1, 2)


def test_mcnemar_exact_is_scipys_two_sided_binomial_test():
    for b in range(0, 25, 3):
        for c in range(0, 25, 4):
            if b + c:
                assert I.mcnemar_exact(b, c) == pytest.approx(st.binomtest(b, b + c, 0.5).pvalue, rel=1e-12)
    assert I.mcnemar_exact(480, 560) == pytest.approx(st.binomtest(480, 1040, 0.5).pvalue, rel=1e-9)


LARGE = [
    *[(20_000, 20_000), (20_000, 19_999), (19_900, 20_000), (16_000, 0), (0, 16_000), (1, 39_999), (100, 40_000)],
    *[(7_000, 9_000), (30_000, 29_500), (35_289, 35_396), (5, 100_000), (600, 420), (500, 501), (1_001, 0)],
]


@pytest.mark.timeout(20)
def test_mcnemar_exact_is_scipys_binomtest_to_1e_12_small_large_and_lopsided():
    rng = np.random.default_rng(43)
    pairs = [(b, c) for b in range(0, 70) for c in range(0, 70) if b + c] + LARGE
    pairs += [tuple(int(x) for x in rng.integers(0, 50_000, 2)) for _ in range(200)]
    pairs += [(int(x), int(x) + int(d)) for x, d in zip(rng.integers(900, 30_000, 100), rng.integers(0, 400, 100))]
    for b, c in pairs:
        assert abs(I.mcnemar_exact(b, c) - st.binomtest(b, b + c, 0.5).pvalue) <= 1e-12, (b, c)


@pytest.mark.timeout(5)
def test_mcnemar_exact_at_twenty_thousand_each_way_takes_well_under_a_second():
    import time

    start = time.perf_counter()
    ps = [I.mcnemar_exact(b, c) for b, c in LARGE]
    assert time.perf_counter() - start < 0.25
    assert ps[0] == 1.0 and ps[3] == 0.0 and 0.9 < ps[1] <= 1.0


@given(hs.integers(0, 300), hs.integers(0, 300))
def test_mcnemar_is_symmetric_and_falls_as_the_discordance_grows(b, c):
    p = I.mcnemar_exact(b, c)
    assert p == I.mcnemar_exact(c, b) and 0 < p <= 1
    lo, hi = min(b, c), max(b, c)
    assert I.mcnemar_exact(lo, hi + 1) <= I.mcnemar_exact(lo, hi)


def test_compare_gives_mcnemar_for_item_accuracy_only():
    a = [1] * 10 + [0] * 2 + [1] * 8  # a right, b wrong on 10 items; b right, a wrong on 2
    b = [0] * 10 + [1] * 2 + [1] * 8
    c = I.compare("A", "B", "accuracy", a, b, binary=True, resamples=2000)
    assert c.p_value == I.mcnemar_exact(10, 2) and c.diff == pytest.approx(0.4)
    assert c.method == "paired-bootstrap-percentile; mcnemar-exact"
    rec = c.record()
    assert set(rec) >= {"a", "b", "figure", "diff", "ci95", "p_value", "method"} and rec["distinguishable"] is True
    assert I.compare("A", "B", "pair_accuracy", a, b, resamples=2000).p_value is None


# --- the bootstrap, against scipy.stats.bootstrap on the same resamples ---------------------------------------


def _scipy(data, statistic, seed, paired=False):
    return st.bootstrap(
        data,
        statistic,
        n_resamples=10_000,
        method="percentile",
        rng=np.random.default_rng(seed),
        vectorized=True,
        paired=paired,
    ).confidence_interval


def test_bootstrap_is_scipys_percentile_interval_with_the_same_seed():
    rng = np.random.default_rng(11)
    pairs = (rng.random(700) < 0.45).astype(float)  # 700 units: drawn in several batches here, in one by scipy
    iv = I.bootstrap(pairs, seed=34)
    ci = _scipy((pairs,), lambda x, axis=-1: np.mean(x, axis=axis), 34)
    assert (iv.lo, iv.hi) == (ci.low, ci.high)
    assert iv.estimate == pairs.mean() and (iv.n, iv.method, iv.undefined) == (700, "bootstrap-percentile", 0)


def test_the_batches_do_not_change_the_draws(monkeypatch):
    rng = np.random.default_rng(3)
    units = (rng.random(301) < 0.7).astype(float)
    whole = I.bootstrap(units, seed=5)
    monkeypatch.setattr(I, "MAX_CELLS", 7 * 301)  # 7 resamples per batch, the last one short
    assert I.bootstrap(units, seed=5) == whole


def test_a_ratio_bootstrap_is_scipys_paired_two_sample_one():
    # precision over items: right yes / said yes; both columns of one item drawn together
    rng = np.random.default_rng(2)
    said_yes = (rng.random(400) < 0.5).astype(float)
    right_yes = said_yes * (rng.random(400) < 0.8)
    iv = I.bootstrap((right_yes, said_yes), I.ratio, seed=9)
    ci = _scipy((right_yes, said_yes), lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis), 9, paired=True)
    assert (iv.lo, iv.hi) == (pytest.approx(ci.low, abs=1e-15), pytest.approx(ci.high, abs=1e-15))
    assert iv.estimate == pytest.approx(right_yes.sum() / said_yes.sum())


def test_paired_bootstrap_is_scipys_paired_difference():
    rng = np.random.default_rng(4)
    a = (rng.random(250) < 0.62).astype(float)
    b = np.where(rng.random(250) < 0.8, a, 1 - a)  # correlated with a, as two models on one benchmark are
    iv = I.paired_bootstrap(a, b, seed=1)
    ci = _scipy((a, b), lambda x, y, axis=-1: np.mean(x, axis=axis) - np.mean(y, axis=axis), 1, paired=True)
    assert (iv.lo, iv.hi) == (pytest.approx(ci.low, abs=1e-15), pytest.approx(ci.high, abs=1e-15))
    assert iv.method == "paired-bootstrap-percentile"


def test_a_ratio_over_nothing_is_left_out_and_counted():
    num, den = np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0])  # one unit of three has a denominator
    iv = I.bootstrap((num, den), I.ratio, resamples=1000, seed=0)
    assert (iv.lo, iv.hi, iv.estimate) == (1.0, 1.0, 1.0)
    assert 0 < iv.undefined < 1000  # draws without that unit: (2/3)^3 of them, about 296
    assert I.bootstrap((den * 0, den * 0), I.ratio, resamples=10).record()["ci95"] is None


def test_bootstrap_refuses_values_that_are_not_one_per_unit():
    with pytest.raises(ValueError, match="one value per unit"):
        I.bootstrap(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="same units"):
        I.paired_bootstrap([1, 0, 1], [1, 0])
    assert I.bootstrap([]).record() == {"n": 0, "ci95": None, "ci_method": "bootstrap-percentile"}


@given(hs.lists(hs.booleans(), min_size=1, max_size=120), hs.integers(0, 2**32 - 1))
def test_bootstrap_interval_holds_the_estimate_inside_zero_one(values, seed):
    iv = I.bootstrap(I.item_values(values), resamples=2000, seed=seed)
    assert 0.0 <= iv.lo <= iv.estimate <= iv.hi <= 1.0


@given(hs.lists(hs.tuples(hs.booleans(), hs.booleans()), min_size=1, max_size=80), hs.integers(0, 1000))
def test_paired_difference_turns_over_when_the_models_swap(units, seed):
    a, b = [int(x) for x, _ in units], [int(y) for _, y in units]
    ab, ba = I.paired_bootstrap(a, b, resamples=500, seed=seed), I.paired_bootstrap(b, a, resamples=500, seed=seed)
    assert ab.estimate == pytest.approx(-ba.estimate, abs=1e-12)
    assert (ab.lo, ab.hi) == (pytest.approx(-ba.hi, abs=1e-12), pytest.approx(-ba.lo, abs=1e-12))
    same = I.compare("A", "A", "accuracy", a, a, binary=True, resamples=200, seed=seed)
    assert (same.diff, same.lo, same.hi, same.p_value, same.distinguishable) == (0.0, 0.0, 0.0, 1.0, False)
