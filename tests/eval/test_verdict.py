"""One rule for "told apart" (vhmine.eval.intervals.told_apart, report.json's `verdict_rule`): McNemar's exact p
< 0.05 where a figure has one (accuracy, aAcc), else the paired interval leaves out 0; report.json, report.md,
report.html and `vhmine eval --compare` all say what that rule says (issue 43)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from vhmine.eval import intervals as I
from vhmine.eval.interval_text import compare_lines, comparison_lines, comparisons_html, distinguishable


def test_twelve_pope_questions_a_right_on_all_b_wrong_on_five_are_not_told_apart():
    # the case: McNemar's p is 2 / 2^5 = 0.0625 >= 0.05, though the bootstrap interval leaves out 0
    a, b = [1] * 12, [0] * 5 + [1] * 7
    c = I.compare("a", "b", "accuracy", a, b, item_level=True)
    assert c.p_value == 0.0625 and c.lo > 0  # the interval alone would have told them apart
    rec = c.record()
    assert rec["distinguishable"] is False and rec["verdict_rule"] == "mcnemar-exact p < 0.05"
    assert not distinguishable(rec)
    for x, y in (("a", "b"), ("b", "a")):
        (line,) = compare_lines([rec], x, y)
        assert line.endswith("McNemar p 0.062: not distinguishable"), line
    row = comparison_lines([{**rec, "mode": None}])[-1]
    assert row.endswith("| 0.062 | 12 | not distinguishable |"), row
    assert comparisons_html([rec]).count(' class="nd"') == 1
    # a figure without an exact test keeps the interval: pair accuracy over the same units is told apart
    pairs = I.compare("a", "b", "pair_accuracy", a, b).record()
    assert pairs["p_value"] is None and pairs["distinguishable"] is True
    assert pairs["verdict_rule"] == "paired-bootstrap-percentile 95% interval leaves out 0"


@settings(derandomize=True, max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(hs.booleans(), hs.booleans()), min_size=1, max_size=60), hs.integers(0, 1000))
def test_the_verdict_is_mcnemar_at_five_percent_wherever_there_is_a_p(units, seed):
    a, b = [int(x) for x, _ in units], [int(y) for _, y in units]
    c = I.compare("a", "b", "accuracy", a, b, item_level=True, resamples=300, seed=seed)
    rec = c.record()
    assert rec["p_value"] is not None
    assert rec["distinguishable"] == (rec["p_value"] < 0.05) == distinguishable(rec) == c.distinguishable
    told = "told apart" if rec["distinguishable"] else "not distinguishable"
    assert compare_lines([rec], "b", "a")[0].endswith(f": {told}")
    plain = I.compare("a", "b", "pair_accuracy", a, b, resamples=300, seed=seed).record()
    lo, hi = plain["ci95"]
    assert plain["distinguishable"] == (lo > 0 or hi < 0) == distinguishable(plain)


@pytest.mark.parametrize("p, ci, told", [(0.049, [-0.1, 0.2], True), (0.05, [0.1, 0.2], False), (None, [0.0, 0.2],
                                         False), (None, [-0.3, -0.1], True), (None, None, False)])  # fmt: skip
def test_told_apart_is_the_exact_test_first(p, ci, told):
    assert I.told_apart(p, ci) is told
