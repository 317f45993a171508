"""vhmine.eval.interval_text: figures printed with their intervals in each figure's unit, paired comparisons with
"not distinguishable" where the interval of a difference holds 0, `--compare A B` either way round, the HTML bar."""

from vhmine.eval import interval_text as T


def test_a_figure_with_its_interval_in_its_unit():
    assert T.with_ci("accuracy", 0.613, {"ci95": [0.534, 0.687]}) == "61.3 [53.4, 68.7]"
    assert T.with_ci("fp_ratio", 0.25, {"ci95": [0.12, 0.41]}) == "0.250 [0.120, 0.410]"
    assert T.with_ci("yes_pct_diff", 0.125, {"ci95": [-0.05, 0.3]}) == "+0.125 [-0.050, +0.300]"
    assert T.with_ci("accuracy", None, {"ci95": None}) == "-"
    assert T.with_ci("accuracy", 0.5, None) == "50.0"
    assert T.with_ci("unreadable", 3, {"ci95": None, "ci_method": "count"}) == "3"


COMPARISONS = [
    {
        "a": "m1",
        "b": "m2",
        "figure": "accuracy",
        "mode": None,
        "diff": 0.05,
        "ci95": [-0.03, 0.13],
        "p_value": 0.31,
        "n": 150,
        "method": "paired-bootstrap-percentile; mcnemar-exact",
    },
    {
        "a": "m1",
        "b": "m2",
        "figure": "pair_accuracy",
        "mode": "counting",
        "diff": 0.2,
        "ci95": [0.05, 0.35],
        "p_value": None,
        "n": 40,
        "method": "paired-bootstrap-percentile",
    },
]


def test_report_md_marks_differences_it_cannot_tell_apart():
    lines = T.comparison_lines(COMPARISONS)
    assert lines[1] == "## Paired comparisons (A - B)"
    assert lines[-2] == "| m1 | m2 | overall | accuracy | +5.0 | [-3.0, +13.0] | 0.310 | 150 | not distinguishable |"
    assert lines[-1] == "| m1 | m2 | counting | pair accuracy | +20.0 | [+5.0, +35.0] | - | 40 |  |"
    assert T.comparison_lines([]) == []


def test_compare_prints_a_minus_b_whichever_way_the_report_holds_them():
    ab = T.compare_lines(COMPARISONS, "m1", "m2")
    assert ab == [
        "  accuracy +5.0 [-3.0, +13.0] over 150, McNemar p 0.310: not distinguishable",
        "  counting: pair accuracy +20.0 [+5.0, +35.0] over 40: told apart",
    ]
    ba = T.compare_lines(COMPARISONS, "m2", "m1")
    assert ba[0] == "  accuracy -5.0 [-13.0, +3.0] over 150, McNemar p 0.310: not distinguishable"
    assert T.compare_lines(COMPARISONS, "m1", "m3") == []


def test_the_html_bar_places_the_interval_and_escapes_its_title():
    svg = T.ci_bar(0.5, {"ci95": [0.25, 0.75], "ci_method": "wilson <x>"}, width=100)
    assert '<rect x="25.0" y="1" width="50.0" height="6"' in svg and '<rect x="49.5" y="0"' in svg
    assert "wilson &lt;x&gt;" in svg and "<x>" not in svg
    assert T.ci_bar(0.5, {"ci95": None}) == "" and T.ci_bar(None, {"ci95": [0, 1]}) == ""


def test_a_difference_of_nothing_reads_plus_zero_either_way_round():
    c = {"a": "m1", "b": "m2", "figure": "accuracy", "mode": None, "diff": 0.0, "ci95": [-0.1, 0.0], "p_value": 1.0}
    c.update({"n": 10, "method": "paired-bootstrap-percentile; mcnemar-exact"})
    assert T.compare_lines([c], "m2", "m1") == [
        "  accuracy +0.0 [+0.0, +10.0] over 10, McNemar p 1.000: not distinguishable"
    ]
    assert (
        T.comparison_lines([c])[-1]
        == "| m1 | m2 | overall | accuracy | +0.0 | [-10.0, +0.0] | 1.000 | 10 | not distinguishable |"
    )
