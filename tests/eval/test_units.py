"""vhmine.eval.units: the statistic on every figure's units IS the figure metrics computes (over any rows, with
pairs, images, pair groups and HallusionBench keys scored in full or in part); intervals take Wilson's for item
rates and shares of units, none for the benchmark's own truth yes ratio and the bootstrap for the rest;
comparisons pair two models on the units both were scored on."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs

from vhmine.bench import BenchItem
from vhmine.eval import intervals as I
from vhmine.eval import metrics as MT
from vhmine.eval import units as U


def _value(units):
    """The statistic on all of the figure's units."""
    if not units.values:
        return None
    arrays = U.arrays_of(units, list(units.values))
    v = float(U.STATISTICS[units.statistic](*arrays, axis=-1))
    return None if math.isnan(v) else v


def _same(a, b):
    return (a is None and b is None) or (a is not None and b is not None and a == pytest.approx(b, abs=1e-12))


# a benchmark of items on 3 images, in pairs and pair groups; a model's rows score some of them
ITEM = hs.tuples(
    hs.sampled_from(["YNQ", "OEQ"]),
    hs.booleans(),
    hs.integers(0, 2),
    hs.sampled_from([None, "p1", "p2"]),
    hs.sampled_from([None, "g1", "g2"]),
    hs.sampled_from([True, False, None]),
    hs.booleans(),
    hs.booleans(),
)


@given(hs.lists(ITEM, min_size=1, max_size=14))
def test_every_figure_is_its_units_statistic(spec):
    expected, rows = [], []
    for k, (kind, truth, img, pair, group, said, correct, scored) in enumerate(spec):
        t = truth if kind == "YNQ" else None
        s = said if kind == "YNQ" else None
        right = (s is not None and s == t) if kind == "YNQ" else correct
        expected.append(BenchItem(f"i{k}", "m", kind, "q", (), t, None, f"img{img}", pair, {}, None, group))
        if scored:
            rows.append(MT.Scored(f"i{k}", "m", kind, right, s, t, pair, f"img{img}", {}, group))
    for exp in (expected, None):
        summary = MT.summary(rows, exp)
        units = U.figure_units(rows, exp)
        figures = {
            **{k: v for k, v in summary.items() if k in MT.FIGURES and k != "unreadable"},
            **{k: v for k, v in (summary.get("pair_groups") or {}).items() if k in ("q_acc", "i_acc", "g_acc")},
        }
        assert set(units) == set(figures)
        for key, value in figures.items():
            assert _same(_value(units[key]), value), (key, _value(units[key]), value)
        assert units["accuracy"].n == summary["n"] and units["pair_accuracy"].n == summary["pairs"]


HB = hs.tuples(
    hs.sampled_from(["VD", "VS"]),
    hs.integers(0, 1),
    hs.integers(0, 2),
    hs.integers(0, 1),
    hs.booleans(),
    hs.sampled_from([True, False, None]),
    hs.booleans(),
)


@given(hs.lists(HB, min_size=1, max_size=14))
def test_every_hallusionbench_figure_is_its_units_statistic(spec):
    expected, rows = [], []
    for k, (cat, set_id, fig, qid, truth, said, scored) in enumerate(spec):
        meta = {"category": cat, "subcategory": "s", "set_id": set_id, "figure_id": fig, "question_id": qid}
        expected.append(BenchItem(f"h{k}", "m", "YNQ", "q", (), truth, meta=meta))
        if scored:
            rows.append(MT.Scored(f"h{k}", "m", "YNQ", said == truth, said, truth, None, None, meta))
    if not rows:
        return
    for exp in (expected, None):
        hb = MT.hallusionbench(rows, exp)
        units = U.hallusionbench_units(rows, exp)
        for key in ("aAcc", "qAcc", "fAcc", "yes_pct_diff", "fp_ratio"):
            assert _same(_value(units[key]), hb[key]), (key, _value(units[key]), hb[key])
        assert (units["qAcc"].n, units["fAcc"].n) == (hb["question_pairs"], hb["figures"])


def _rows(correct, said=None, kind="YNQ", pairs=True):
    out = []
    for k, c in enumerate(correct):
        truth = k % 2 == 0
        s = (truth if c else not truth) if said is None else said[k]
        out.append(MT.Scored(f"i{k}", "m", kind, c, s, truth, f"p{k // 2}" if pairs else None, f"img{k}"))
    return out


def test_intervals_are_wilsons_for_item_rates_and_shares_of_units_and_the_bootstrap_for_the_rest():
    rows = _rows([True] * 14 + [False] * 6)
    units = U.figure_units(rows)
    got = U.figure_intervals(units, n_items=20, resamples=2000)
    assert got["accuracy"] == I.wilson(14, 20).record()
    # precision: right yes / said yes; said yes = the right yes-truths (7) and the wrong no-truths (3)
    assert got["precision"] == I.wilson(7, 10).record()
    assert got["recall"] == I.wilson(7, 10).record()
    # shares of units: Wilson's over them (7 of 10 pairs right, 14 of 20 images)
    assert got["pair_accuracy"] == {**I.wilson(7, 10).record(), "ci_method": "wilson over pairs"}
    assert got["image_accuracy"] == {**I.wilson(14, 20).record(), "ci_method": "wilson over images"}
    assert got["f1"]["ci_method"] == "bootstrap-percentile over items"
    assert got["unreadable"] == {"n": 20, "ci95": None, "ci_method": "count"}
    assert got["truth_yes_ratio"] == {"n": 20, "ci95": None, "ci_method": U.OWN}


def test_comparisons_pair_two_models_on_the_units_both_were_scored_on():
    a = _rows([True] * 16 + [False] * 4)
    b = _rows([False] * 10 + [True] * 10)
    b_scored = [r for r in b if r.id != "i19"]  # one of b's requests failed: not scored
    items = [BenchItem(r.id, "m", "YNQ", "q", (), r.truth, None, r.image_id, r.pair_id) for r in a]
    per = {"A": U.figure_units(a, items), "B": U.figure_units(b_scored, items)}
    got = {(c["figure"]): c for c in U.comparisons(per, mode="m", resamples=2000)}
    acc = got["accuracy"]
    assert set(acc) >= {"a", "b", "figure", "diff", "ci95", "p_value", "method", "mode", "n"}
    assert (acc["a"], acc["b"], acc["mode"], acc["n"]) == ("A", "B", "m", 19)
    # on the 19 common items: A right & B wrong on i0..i9 (10), B right & A wrong on i16..i18 (3)
    assert acc["p_value"] == I.mcnemar_exact(10, 3)
    assert acc["diff"] == pytest.approx((16 - 9) / 19)
    assert got["pair_accuracy"]["n"] == 9  # b's pair p9 is incomplete
    # a share of pairs: McNemar on them too; A alone has p0..p4 right, B alone p8 (p5..p7 both, none neither)
    assert got["pair_accuracy"]["p_value"] == I.mcnemar_exact(5, 1)
    assert got["precision"]["p_value"] is None and got["f1"]["p_value"] is None  # not shares: no exact test
    assert "unreadable" not in got
    assert np.isclose(got["precision"]["diff"], 8 / 9 - 5 / 10)  # A said yes on 9, 8 right; B on 10, 5 right


def _entry(rows, items, modes, hb=False):
    entry = {"metrics": MT.by_mode(rows, modes, items)}
    if hb:
        entry["hallusionbench"] = MT.hallusionbench(rows, items)
    return entry


def test_a_report_entry_gets_intervals_beside_every_summary_and_comparisons_per_scope():
    modes = ["color", "shape"]
    items = [
        BenchItem(f"i{k}", modes[k % 2], "YNQ", "q", (), k % 4 < 2, None, f"img{k}", f"p{k // 4}") for k in range(24)
    ]

    def rows(right):
        return [
            MT.Scored(
                it.id,
                it.mode,
                "YNQ",
                right(k),
                it.truth if right(k) else not it.truth,
                it.truth,
                it.pair_id,
                it.image_id,
            )
            for k, it in enumerate(items)
        ]

    a, b = rows(lambda k: k % 3 != 0), rows(lambda k: k % 5 != 0)
    ea, eb = _entry(a, items, modes), _entry(b, items, modes)
    scopes = {
        "A": U.attach_intervals(ea, a, modes, items, resamples=500),
        "B": U.attach_intervals(eb, b, modes, items, resamples=500),
    }
    o = ea["metrics"]["overall"]
    assert o["intervals"]["accuracy"] == I.wilson(o["correct"], o["n"]).record()
    assert (
        ea["metrics"]["modes"]["color"]["intervals"]["accuracy"]
        == I.wilson(ea["metrics"]["modes"]["color"]["correct"], 12).record()
    )
    assert ea["metrics"]["kinds"]["YNQ"]["intervals"]["accuracy"]["ci_method"] == "wilson"
    assert o["intervals"]["pair_accuracy"]["n"] == o["pairs"] == 6
    got = U.report_comparisons(scopes, modes, resamples=500)
    assert [c["mode"] for c in got if c["figure"] == "accuracy"] == [None, "color", "shape"]
    assert all((c["a"], c["b"]) == ("A", "B") for c in got)
    acc = next(c for c in got if c["figure"] == "accuracy" and c["mode"] is None)
    xa, xb = [r.correct for r in a], [r.correct for r in b]
    assert acc["p_value"] == I.mcnemar_exact(
        sum(x and not y for x, y in zip(xa, xb, strict=True)), sum(y and not x for x, y in zip(xa, xb, strict=True))
    )
    assert U.report_comparisons({"A": scopes["A"]}, modes) == []  # one model: nothing to compare


def test_hallusionbench_figures_get_their_intervals_too():
    items, rows = [], []
    for k in range(12):
        meta = {"category": "VD", "subcategory": "s", "set_id": k // 4, "figure_id": k // 2 % 2, "question_id": k % 2}
        items.append(BenchItem(f"h{k}", "VD/s", "YNQ", "q", (), k % 2 == 0, meta=meta))
        rows.append(
            MT.Scored(f"h{k}", "VD/s", "YNQ", k % 3 != 0, (k % 2 == 0) == (k % 3 != 0), k % 2 == 0, None, None, meta)
        )
    entry = _entry(rows, items, ["VD/s"], hb=True)
    U.attach_intervals(entry, rows, ["VD/s"], items, hallusionbench=True, resamples=500)
    got = entry["hallusionbench"]["intervals"]
    assert got["aAcc"] == I.wilson(8, 12).record()
    assert got["qAcc"]["ci_method"] == "wilson over question pairs" and got["qAcc"]["n"] == 6
    assert got["fp_ratio"] == I.wilson(2, 4).record()  # of the 4 wrong answers, 2 said yes: a share of them
    assert got["yes_pct_diff"]["ci_method"] == "bootstrap-percentile over items"
