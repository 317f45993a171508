"""Issue 43, item 2: a share of units (pair and image accuracy, G-Acc, qAcc, fAcc, as a share of items is) gets
Wilson's interval over its units, where a percentile bootstrap gave 0 of 18 images right [0.0, 0.0]; the figures
that are not shares keep the bootstrap and say so; the benchmark's own truth yes ratio has no interval
(vhmine.eval.units.interval, figure_intervals)."""

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from vhmine.bench import BenchItem
from vhmine.eval import intervals as I
from vhmine.eval import metrics as MT
from vhmine.eval import units as U

# what the issue names a share (one 0/1 value per unit, their mean) and what it names not one
SHARES = {"accuracy", "yes_ratio", "pair_accuracy", "image_accuracy", "g_acc", "aAcc", "qAcc", "fAcc"}
NOT_SHARES = {"f1", "q_acc", "i_acc", "yes_pct_diff"}
ITEM_RATES = {"precision", "recall", "fp_ratio"}  # Wilson over the items said yes / truly yes / answered wrong
OWN = {"truth_yes_ratio"}


def test_none_of_eighteen_images_right_is_wilsons_interval_not_an_empty_one():
    rows = [MT.Scored(f"i{k}", "m", "OEQ", False, None, None, f"p{k // 2}", f"img{k}") for k in range(18)]
    rec = U.figure_intervals(U.figure_units(rows))["image_accuracy"]
    want = I.wilson(0, 18)
    assert rec["n"] == 18 and rec["ci95"] == [want.lo, want.hi]
    assert rec["ci95"][1] - rec["ci95"][0] > 0.17  # [0.0, 0.176], where the bootstrap gave [0.0, 0.0]
    assert rec["ci_method"] == "wilson over images"


def test_the_truth_yes_ratio_is_the_benchmarks_own_and_has_no_interval():
    rows = [MT.Scored(f"i{k}", "m", "YNQ", k % 3 == 0, True, k % 3 == 0, None, f"img{k}") for k in range(12)]
    got = U.figure_intervals(U.figure_units(rows))
    assert got["truth_yes_ratio"] == {"n": 12, "ci95": None, "ci_method": "none (the benchmark's own)"}
    assert got["yes_ratio"] == I.wilson(12, 12).record()  # the model's own yes ratio keeps its interval


# a benchmark of items on 4 images, in pairs and pair groups; random right/wrong answers, some not scored
ITEM = hs.tuples(
    hs.sampled_from(["YNQ", "OEQ"]),
    hs.booleans(),
    hs.integers(0, 3),
    hs.sampled_from([None, "p1", "p2", "p3"]),
    hs.sampled_from([None, "g1", "g2"]),
    hs.booleans(),
    hs.booleans(),
    hs.integers(0, 5),
)
HB = hs.tuples(hs.sampled_from(["VD", "VS"]), hs.integers(0, 1), hs.integers(0, 2), hs.integers(0, 1), hs.booleans())


def _rows(spec):
    expected, rows = [], []
    for k, (kind, truth, img, pair, group, right, said_yes, scored) in enumerate(spec):
        t = truth if kind == "YNQ" else None
        said = None  # an open answer, or a wrong yes/no answer that reads neither yes nor no
        if kind == "YNQ" and (right or said_yes):
            said = t if right else not t
        expected.append(BenchItem(f"i{k}", "m", kind, "q", (), t, None, f"img{img}", pair, {}, None, group))
        if scored != 0:  # one item in six not scored: its pair, image and group are left out
            rows.append(MT.Scored(f"i{k}", "m", kind, right, said, t, pair, f"img{img}", {}, group))
    return expected, rows


def _hb_rows(spec):
    rows = []
    for k, (cat, set_id, fig, qid, right) in enumerate(spec):
        meta = {"category": cat, "subcategory": "s", "set_id": set_id, "figure_id": fig, "question_id": qid}
        truth = k % 2 == 0
        rows.append(MT.Scored(f"h{k}", "m", "YNQ", right, truth if right else not truth, truth, None, None, meta))
    return rows


def _check(units, records):
    for key, rec in records.items():
        if key == "unreadable":
            continue
        u = units[key]
        if key in OWN:
            assert rec == {"n": u.n, "ci95": None, "ci_method": "none (the benchmark's own)"}, key
        elif key in SHARES:
            assert u.statistic == "mean" and all(v in ((0.0,), (1.0,)) for v in u.values.values()), key
            want = I.wilson(int(sum(v[0] for v in u.values.values())), len(u.values))
            assert rec["n"] == want.n == u.n, key
            assert rec["ci_method"].startswith("wilson"), (key, rec)
            if want.lo is None:
                assert rec["ci95"] is None, key
            else:
                assert rec["ci95"] == pytest.approx([want.lo, want.hi], abs=1e-12), (key, rec, want)
        elif key in ITEM_RATES:
            assert rec["ci_method"] == "wilson", key
        else:
            assert key in NOT_SHARES, key
            assert rec["ci_method"].startswith("bootstrap-percentile over "), (key, rec)


@given(hs.lists(ITEM, min_size=1, max_size=16), hs.lists(HB, min_size=1, max_size=10))
def test_every_share_gets_wilsons_interval_over_its_units_and_the_rest_the_bootstrap(spec, hb_spec):
    expected, rows = _rows(spec)
    for exp in (expected, None):
        units = U.figure_units(rows, exp)
        _check(units, U.figure_intervals(units, resamples=50))
    hb_rows = _hb_rows(hb_spec)
    units = U.hallusionbench_units(hb_rows)
    _check(units, U.figure_intervals(units, counts=(), resamples=50))


def test_a_figure_without_an_interval_prints_its_value_alone_and_says_why_in_html():
    from vhmine.eval import interval_text as T

    own = {"n": 12, "ci95": None, "ci_method": "none (the benchmark's own)"}
    assert T.with_ci("truth_yes_ratio", 0.5, own) == "50.0"
    assert T.ci_bar(0.5, own) == ""
    assert T.ci_title("truth_yes_ratio", own) == "no interval: the benchmark's own"
    assert T.ci_title("unreadable", {"n": 12, "ci95": None, "ci_method": "count"}) == ""
