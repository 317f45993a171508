"""One rule for "told apart" (vhmine.eval.intervals.told_apart, report.json's `verdict_rule`): McNemar's exact p
< 0.05 where a figure has one (every share of units: accuracy, aAcc, the yes ratio, pair and image accuracy, G-Acc,
qAcc, fAcc), else the paired interval leaves out 0; report.json, report.md,
report.html and `vhmine eval --compare` all say what that rule says (issue 43)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from vhmine.eval import intervals as I
from vhmine.eval.interval_text import compare_lines, comparison_lines, comparisons_html, distinguishable


def test_twelve_pope_questions_a_right_on_all_b_wrong_on_five_are_not_told_apart():
    # the case: McNemar's p is 2 / 2^5 = 0.0625 >= 0.05, though the bootstrap interval leaves out 0
    a, b = [1] * 12, [0] * 5 + [1] * 7
    c = I.compare("a", "b", "accuracy", a, b, binary=True)
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
    # a figure without an exact test keeps the interval (the call the report makes for F1, ratios...)
    plain = I.compare("a", "b", "f1", a, b).record()
    assert plain["p_value"] is None and plain["distinguishable"] is True
    assert plain["verdict_rule"] == "paired-bootstrap-percentile 95% interval leaves out 0"


def test_image_accuracy_over_images_of_one_question_gets_accuracys_verdict():
    """The twelve questions, each on an image of its own: image accuracy is accuracy, and was "told apart" by its
    bootstrap where accuracy was not by McNemar. Every share of units has McNemar's test: one verdict for both."""
    from vhmine.eval import metrics as MT
    from vhmine.eval import units as U

    def rows(right):
        return [MT.Scored(f"q{k}", "existence", "YNQ", r, r, True, None, f"img{k}") for k, r in enumerate(right)]

    per = {"a": U.figure_units(rows([True] * 12)), "b": U.figure_units(rows([False] * 5 + [True] * 7))}
    got = {c["figure"]: c for c in U.comparisons(per, resamples=2000)}
    acc, img = got["accuracy"], got["image_accuracy"]
    assert acc["p_value"] == img["p_value"] == 0.0625
    assert acc["distinguishable"] is img["distinguishable"] is False
    assert img["verdict_rule"] == "mcnemar-exact p < 0.05"


@settings(derandomize=True, max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(hs.booleans(), hs.booleans()), min_size=1, max_size=60), hs.integers(0, 1000))
def test_the_verdict_is_mcnemar_at_five_percent_wherever_there_is_a_p(units, seed):
    a, b = [int(x) for x, _ in units], [int(y) for _, y in units]
    c = I.compare("a", "b", "accuracy", a, b, binary=True, resamples=300, seed=seed)
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
