"""Intervals and paired comparisons through a real `vhmine eval` (predictions of three models on a benchmark with pairs,
images and pair groups): report.json gives every figure `n`, `ci95` and `ci_method` and compares every two models;
report.md prints `61.3 [53.4, 68.7]` and the comparisons; report.html draws the bars and greys what it cannot tell
apart; `--compare A B` prints the differences, either way round, and refuses a name the eval does not hold."""

import json
import re

import pytest
from helpers import write_group_bench

from vhmine.eval import intervals as I
from vhmine.eval import metrics as MT
from vhmine.eval.interval_text import compare_header, compare_lines, with_ci
from vhmine.eval.units import summary_figures

# item -> each model's answer (write_group_bench: o1/o2 open, y1-y4 yes/no; truths y1 yes, y2 no, y3 yes, y4 no)
ANSWERS = {
    "a": {"o1": "3", "o2": "4", "y1": "yes", "y2": "no", "y3": "yes", "y4": "no"},  # all right
    "b": {"o1": "2", "o2": "4", "y1": "yes", "y2": "yes", "y3": "yes", "y4": "no"},  # o1, y2 wrong
    "c": {"o1": "2", "o2": "9", "y1": "no", "y2": "yes", "y3": "maybe", "y4": "yes"},  # all wrong, y3 unreadable
}
KEYS = {"a", "b", "figure", "diff", "ci95", "p_value", "method"}


def _cli(*args):
    from typer.testing import CliRunner

    from vhmine.cli import app

    return CliRunner().invoke(app, ["eval", *args])


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wiring")
    bench = write_group_bench(tmp)
    preds = []
    for m, answers in ANSWERS.items():
        (tmp / f"{m}.jsonl").write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
        preds += ["--predictions", f"{m}={tmp / f'{m}.jsonl'}"]
    r = _cli("--bench", str(bench), "--out", str(tmp / "ev"), *preds, "--compare", "b", "a")
    assert r.exit_code == 0, r.output
    return tmp, bench, json.loads((tmp / "ev" / "report.json").read_text()), r.output


def test_every_figure_in_report_json_has_n_ci95_and_ci_method(evaluated):
    _, _, report, _ = evaluated
    assert report["intervals"] == {
        "level": 0.95,
        "bootstrap": {"resamples": 10_000, "seed": 0, "generator": "numpy PCG64", "percentiles": "linear"},
        "verdict_rule": "mcnemar-exact p < 0.05 where there is a p, else the paired 95% interval leaves out 0",
    }
    for m, entry in report["models"].items():
        met = entry["metrics"]
        summaries = [met["overall"], *met["modes"].values()]
        for s in summaries:
            figures = summary_figures(s)
            assert set(s["intervals"]) == figures, (m, set(s["intervals"]) ^ figures)
            for key, rec in s["intervals"].items():
                assert set(rec) == {"n", "ci95", "ci_method"}, (m, key)
                value = s["pair_groups"][key] if key in ("q_acc", "i_acc", "g_acc") else s[key]
                if key == "unreadable":
                    assert (rec["ci95"], rec["ci_method"], rec["n"]) == (None, "count", s["n"])
                elif key == "truth_yes_ratio":  # the benchmark's own: the same for every model, no interval
                    assert (rec["ci95"], rec["ci_method"]) == (None, "none (the benchmark's own)"), (m, rec)
                elif value is not None:
                    lo, hi = rec["ci95"]
                    assert 0 <= lo <= value <= hi <= 1, (m, key, rec, value)
                    assert rec["ci_method"].startswith("wilson") or rec["ci_method"].startswith(
                        "bootstrap-percentile over "
                    )
            # item accuracy: Wilson's interval on the summary's own counts
            assert s["intervals"]["accuracy"] == I.wilson(s["correct"], s["n"]).record()
        for kind in met["kinds"].values():
            assert kind["intervals"] == {"accuracy": I.wilson(kind["correct"], kind["n"]).record()}
        o = met["overall"]
        assert o["intervals"]["pair_accuracy"]["n"] == o["pairs"] == 2
        assert o["intervals"]["pair_accuracy"]["ci_method"] == "wilson over pairs"
        assert o["intervals"]["g_acc"]["ci_method"] == "wilson over pair groups"
        assert o["intervals"]["q_acc"]["ci_method"] == "bootstrap-percentile over pair groups"  # a ratio over groups


SHARES = {"yes_ratio", "pair_accuracy", "image_accuracy", "g_acc"}  # besides accuracy


def test_every_two_models_are_compared_overall_and_per_mode(evaluated):
    _, bench, report, _ = evaluated
    comps = report["comparisons"]
    assert all(KEYS <= set(c) for c in comps)
    assert {(c["a"], c["b"]) for c in comps} == {("a", "b"), ("a", "c"), ("b", "c")}
    assert {c["mode"] for c in comps} == {None, "counting", "color"}
    models = report["models"]
    for c in comps:
        a, b = models[c["a"]]["metrics"], models[c["b"]]["metrics"]
        sa, sb = (a["overall"], b["overall"]) if c["mode"] is None else (a["modes"][c["mode"]], b["modes"][c["mode"]])
        if c["figure"] == "accuracy":  # every item scored by both: the difference of the two accuracies, McNemar's p
            assert c["diff"] == pytest.approx(sa["accuracy"] - sb["accuracy"])
            items = [it for it in bench_items(bench) if c["mode"] is None or it[1] == c["mode"]]
            right = {m: {i: _right(m, i) for i, _ in items} for m in (c["a"], c["b"])}
            only_a = sum(right[c["a"]][i] and not right[c["b"]][i] for i, _ in items)
            only_b = sum(right[c["b"]][i] and not right[c["a"]][i] for i, _ in items)
            assert c["p_value"] == I.mcnemar_exact(only_a, only_b) and c["n"] == len(items)
        elif c["figure"] in SHARES:  # a share of units, each right (or yes) or not for both: McNemar's p too
            assert c["p_value"] is not None and 0 < c["p_value"] <= 1
        else:
            assert c["p_value"] is None
        lo, hi = c["ci95"]
        assert lo <= c["diff"] <= hi  # one rule: McNemar's p where there is one, else the interval leaves out 0
        told = c["p_value"] < 0.05 if c["p_value"] is not None else (lo > 0 or hi < 0)
        assert c["distinguishable"] == told and c["verdict_rule"] == (
            "mcnemar-exact p < 0.05"
            if c["p_value"] is not None
            else "paired-bootstrap-percentile 95% interval leaves out 0"
        )
    assert not any(c["figure"] == "truth_yes_ratio" for c in comps)  # the benchmark's own, the same for all
    # color has no pair: nothing to compare on pair accuracy there (no record over no unit)
    assert not any(c["mode"] == "color" and c["figure"] == "pair_accuracy" for c in comps)
    ab = next(c for c in comps if (c["a"], c["b"], c["mode"], c["figure"]) == ("a", "c", None, "accuracy"))
    assert ab["diff"] == 1.0 and ab["distinguishable"] and ab["p_value"] == I.mcnemar_exact(6, 0) == 0.03125


def bench_items(folder):
    from vhmine import formats as F

    return [(it.id, it.mode) for it in F.load(folder)]


def _right(model: str, item: str) -> bool:
    want = {"o1": "3", "o2": "4", "y1": "yes", "y2": "no", "y3": "yes", "y4": "no"}
    return ANSWERS[model][item] == want[item]


def test_report_md_prints_each_figure_with_its_interval_and_the_comparisons(evaluated):
    tmp, _, report, _ = evaluated
    md = (tmp / "ev" / "report.md").read_text()
    for m, entry in report["models"].items():
        o = entry["metrics"]["overall"]
        modes = [with_ci("accuracy", entry["metrics"]["modes"][md_]["accuracy"], entry["metrics"]["modes"][md_]
                         ["intervals"]["accuracy"]) for md_ in report["modes"]]  # fmt: skip
        row = (
            f"| {m} | "
            + " | ".join(modes)
            + " | "
            + " | ".join(with_ci(k, o[k], o["intervals"][k]) for k in ("accuracy", "pair_accuracy", "image_accuracy"))
        )
        assert row + " |" in md, row
        assert re.search(rf"\| {m} \| \d+\.\d \[\d+\.\d, \d+\.\d\] \|", md)  # 61.3 [53.4, 68.7]
    assert "## Paired comparisons (A - B)" in md
    rows = [line for line in md.splitlines() if line.startswith("| a | b |") or line.startswith("| a | c |")]
    shown = [c for c in report["comparisons"] if c["a"] == "a" and (c["mode"] is None or c["figure"] == "accuracy")]
    assert len(rows) == len(shown)
    for line, c in zip(rows, shown, strict=True):
        assert line.endswith("| not distinguishable |") == (not c["distinguishable"]), (line, c)
    assert "every figure of every mode is in report.json's `comparisons`" in md
    assert "| accuracy | `accuracy` | % | right items / scored items (VHTest's per-item accuracy) | wilson |" in md


def test_report_html_draws_each_interval_and_greys_what_it_cannot_tell_apart(evaluated):
    tmp, _, report, _ = evaluated
    page = (tmp / "ev" / "report.html").read_text()
    o = report["models"]["b"]["metrics"]["overall"]
    lo, hi = o["intervals"]["accuracy"]["ci95"]
    cell = re.search(r'<td class="num" title="([^"]*)" data-model="b" data-figure="accuracy">([^<]*)<svg', page)
    assert cell and cell.group(2) == f"{100 * o['accuracy']:.1f}%"
    assert cell.group(1) == f"95% interval {100 * lo:.1f} to {100 * hi:.1f} over {o['n']} (wilson)"
    # a bar under every share of every model, a whisker on every bar of the chart that has an interval
    assert page.count('<svg class="ci"') >= 3 * 5
    bars = sum(1 for e in report["models"].values() for s in [*e["metrics"]["modes"].values(), e["metrics"]["overall"]])
    assert page.count('class="whisker"') == bars
    table = page.split('id="comparisons"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr data-mode=") == len(report["comparisons"])
    assert table.count(' class="nd"') == sum(not c["distinguishable"] for c in report["comparisons"])
    assert '<select id="c-mode">' in page and 'id="c-told"' in page


def test_a_share_of_none_right_has_wilsons_interval_and_the_truth_yes_ratio_none_in_every_report(evaluated):
    tmp, _, report, output = evaluated
    o = report["models"]["c"]["metrics"]["overall"]  # c: every answer wrong, so no image and no pair right
    want = I.wilson(0, o["images"])
    assert o["intervals"]["image_accuracy"] == {**want.record(), "ci_method": "wilson over images"}
    assert f"image accuracy 0.0% [0.0, {100 * want.hi:.1f}] over {o['images']} image(s)" in output  # not [0.0, 0.0]
    md = (tmp / "ev" / "report.md").read_text()
    ynq = ("precision", "recall", "f1", "yes_ratio", "truth_yes_ratio", "unreadable")
    row = "| c | " + " | ".join(with_ci(k, o[k], o["intervals"][k]) for k in ynq) + " |"
    assert row in md and row.endswith(" | 50.0 | 1 |"), row  # the truth yes ratio's value alone, as the count's
    assert "| `truth_yes_ratio` | % | yes/no: truth-yes items / items | none (the benchmark's own) |" in md
    assert not re.search(r"\b(nan|None)\b", md)  # no [nan] and no None where a bound would be
    page = (tmp / "ev" / "report.html").read_text()
    cell = re.search(r'<td class="num" title="([^"]*)" data-model="c" data-figure="truth_yes_ratio">([^<]*)</td>', page)
    assert cell and cell.groups() == ("no interval: the benchmark&#x27;s own", "50.0%")  # no bar, no [nan]


def test_compare_prints_a_minus_b_either_way_round(evaluated):
    _, _, report, output = evaluated
    said = output.split(compare_header("b", "a") + "\n", 1)[1]
    want = compare_lines(report["comparisons"], "b", "a")  # the report holds a - b: turned round
    assert said.splitlines()[: len(want)] == want and len(want) == sum(
        (c["a"], c["b"]) == ("a", "b") for c in report["comparisons"]
    )
    acc = next(c for c in report["comparisons"] if (c["a"], c["b"], c["mode"], c["figure"]) == ("a", "b", None,
                                                                                               "accuracy"))  # fmt: skip
    lo, hi = acc["ci95"]  # turned round: -(a - b), [-hi, -lo]; a 0 prints +0.0 (-0.0 + 0 is 0.0)
    assert want[0] == (
        f"  accuracy {-100 * acc['diff'] + 0:+.1f} [{-100 * hi + 0:+.1f}, {-100 * lo + 0:+.1f}] over 6, McNemar p "
        f"{acc['p_value']:.3f}: not distinguishable"
    )


def test_compare_refuses_a_model_the_eval_does_not_hold_before_scoring(evaluated):
    tmp, bench, _, _ = evaluated
    r = _cli("--bench", str(bench), "--out", str(tmp / "ev-x"), "--predictions", f"a={tmp / 'a.jsonl'}",
             "--predictions", f"b={tmp / 'b.jsonl'}", "--compare", "a", "gpt")  # fmt: skip
    assert r.exit_code == 2 and "--compare gpt: no model of that name in this eval (a, b)" in r.output
    assert not (tmp / "ev-x").exists()
    r = _cli("--bench", str(bench), "--out", str(tmp / "ev-y"), "--predictions", f"a={tmp / 'a.jsonl'}",
             "--compare", "a", "a")  # fmt: skip
    assert r.exit_code == 2 and "name two different models" in r.output


def test_one_model_has_intervals_and_no_comparison(evaluated):
    tmp, bench, _, _ = evaluated
    r = _cli("--bench", str(bench), "--out", str(tmp / "ev1"), "--predictions", f"b={tmp / 'b.jsonl'}")
    assert r.exit_code == 0, r.output
    report = json.loads((tmp / "ev1" / "report.json").read_text())
    assert report["comparisons"] == [] and "intervals" in report["models"]["b"]["metrics"]["overall"]
    assert "Paired comparisons" not in (tmp / "ev1" / "report.md").read_text()
    o = report["models"]["b"]["metrics"]["overall"]
    lo, hi = o["intervals"]["accuracy"]["ci95"]
    assert f"b: accuracy {100 * o['accuracy']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] over 6 item(s)" in r.output
    assert MT.label("accuracy") == "accuracy"
