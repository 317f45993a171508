"""One name per figure (issue 16): the console summary, report.md and report.json of one `vhmine eval` run give
every figure under one name with one value, and the lmms-eval export names its metrics by report.json's keys.
Before, the console printed NaturalBench's I-Acc as "image acc." while report.md gave per-image accuracy that
name (56.2 against 40.0 on one run)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from helpers import ANSWER_FATES, answer_text, bench_from_spec, make_ready_store
from hypothesis import given, settings
from hypothesis import strategies as st

from vhmine.eval import metrics as MT


def _vhmine(cwd, *args):
    r = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, f"vhmine {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def _tables(md: str) -> list[list[dict]]:
    """Each markdown table of report.md as a list of {header: cell} rows."""
    out, rows, head = [], [], None
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if head is None:
                head = cells
            elif not set("".join(cells)) <= {"-"}:
                rows.append(dict(zip(head, cells)))
        elif head is not None:
            out.append(rows)
            rows, head = [], None
    return out


@pytest.mark.slow
def test_console_report_md_and_report_json_name_each_figure_alike(tmp_path):
    make_ready_store(tmp_path).close()
    db = str(tmp_path / "store.db")
    _vhmine(tmp_path, "export", "--db", db, "--out", "b", "--format", "pope", "--kind", "ynq")
    lines = [json.loads(x) for x in (tmp_path / "b" / "questions.jsonl").read_text().splitlines()]
    # right everywhere but once: a counting "no" question answered "yes" (so Q-Acc, I-Acc, G-Acc, pair and image
    # accuracy all differ from one another)
    wrong = next(r["question_id"] for r in lines if r["category"] == "counting" and r["label"] == "no")
    answers = {r["question_id"]: "Yes." if r["label"] == "yes" or r["question_id"] == wrong else "No." for r in lines}
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    console = _vhmine(tmp_path, "eval", "--bench", "b", "--predictions", "m=p.jsonl", "--out", "ev").stdout
    report = json.loads((tmp_path / "ev" / "report.json").read_text())["models"]["m"]["metrics"]["overall"]
    md = (tmp_path / "ev" / "report.md").read_text()
    tables = _tables(md)

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}"

    figures = {k: report[k] for k in ("accuracy", "pair_accuracy", "image_accuracy")}
    figures.update({k: report["pair_groups"][k] for k in ("q_acc", "i_acc", "g_acc")})
    # the figures tell apart (image accuracy 66.7 and I-Acc 75.0 above all): a swap of names would show
    assert pct(figures["image_accuracy"]) != pct(figures["i_acc"]) and len({pct(v) for v in figures.values()}) >= 4
    for key, value in figures.items():
        name = MT.label(key)
        # the console: "<name> <value>%"
        said = re.findall(rf"(?:^|[:;,] ){re.escape(name)} (\S+)%", console, re.M)
        assert said == [pct(value)], (key, name, said, console)
        # report.md: every column so headed holds this value on the model's overall row
        cells = [
            row[name]
            for t in tables
            for row in t
            if name in row and row.get("model") == "m" and row.get("mode", "overall") == "overall"
        ]
        if key == "accuracy":  # the per-mode table heads its overall column "overall"
            cells += [row["overall"] for t in tables for row in t if "overall" in row and row.get("model") == "m"]
        assert cells and {c.split(" [")[0] for c in cells} == {pct(value)}, (key, name, cells)
        # ... and the legend ties the name to report.json's key
        assert f"| {name} | `{key}` |" in md
    # no name stands for two figures anywhere in report.md: the old "image acc." / "question acc." are gone
    assert "image acc." not in md and "image acc." not in console and "question acc." not in console
    labels = [name for name, _ in MT.FIGURES.values()]
    assert len(labels) == len(set(labels))


def test_lmms_eval_export_names_its_metrics_by_report_json_keys():
    from vhmine.formats import lmms_eval

    assert set(lmms_eval.YNQ_METRICS) | set(lmms_eval.OEQ_METRICS) <= set(MT.FIGURES)


def test_no_complete_pairs_is_said_in_words_not_as_a_dash_percent_over_0(tmp_path):
    """ "pair accuracy -% over 0 pair(s)": a benchmark with no pairs (or none complete) says there were none."""
    from vhmine.eval.report import figures_line

    o = {
        "n": 4,
        "accuracy": 0.5,
        "pair_accuracy": None,
        "pairs": 0,
        "image_accuracy": 0.25,
        "images": 4,
        "incomplete_pairs": 0,
        "incomplete_images": 0,
    }
    line = figures_line(o)
    assert (
        line
        == "accuracy 50.0% over 4 item(s); no complete pairs for pair accuracy; image accuracy 25.0% over 4 image(s)"
    )
    assert "-%" not in figures_line({**o, "image_accuracy": None, "images": 0, "incomplete_pairs": 2})
    assert "2 pair(s) and 0 image(s) with an unscored item left out" in figures_line({**o, "incomplete_pairs": 2})


# --- properties: one report whatever the file's order; one figure per name in every output ------------------

GEN_SPEC = [
    ("counting", "YNQ", True, True, False),
    ("counting", "OEQ", True, True, False),
    ("color", "YNQ", True, False, True),
    ("color", "YNQ", False, True, True),
    ("color", "OEQ", True, False, False),
]


@pytest.fixture(scope="module")
def gen_bench(tmp_path_factory):
    from vhmine.export.job import write_benchmark

    folder = tmp_path_factory.mktemp("gen") / "bench"
    bench = bench_from_spec(GEN_SPEC)
    write_benchmark(bench, folder, "hf")
    return folder, bench


def _write_predictions(path, rows, layout):
    import csv
    import io

    if layout == ".jsonl":
        path.write_text("".join(json.dumps({"id": i, "answer": a}, ensure_ascii=False) + "\n" for i, a in rows))
    else:
        buf = io.StringIO()
        csv.writer(buf).writerows([("id", "answer"), *rows])
        path.write_text(buf.getvalue())
    return path


def _evaluate(folder, out, rows, layout):
    from vhmine.eval.job import EvalOptions, evaluate

    out.mkdir(parents=True)
    p = _write_predictions(out.parent / f"{out.name}-preds{layout}", rows, layout)
    return evaluate(EvalOptions(bench=folder, out=out, predictions=[("m", p)], partial=True))


FATES = st.lists(st.sampled_from(ANSWER_FATES), min_size=9, max_size=9)


@pytest.mark.slow
@settings(max_examples=15)  # two evaluate runs an example
@given(fates=FATES, order=st.permutations(range(9)), layout=st.sampled_from([".jsonl", ".csv"]))
def test_property_any_permutation_of_a_predictions_file_gives_the_same_report(
    gen_bench, tmp_path_factory, fates, order, layout
):
    folder, bench = gen_bench
    rows = [(it.id, answer_text(it, f)) for it, f in zip(bench, fates) if f != "missing"]
    if not rows:
        return
    tmp = tmp_path_factory.mktemp("perm")
    _evaluate(folder, tmp / "a" / "ev", rows, layout)
    _evaluate(folder, tmp / "b" / "ev", [rows[k] for k in order if k < len(rows)], layout)
    for name in ("report.json", "report.md", "report.html", "answers-m.jsonl"):
        assert (tmp / "a" / "ev" / name).read_bytes() == (tmp / "b" / "ev" / name).read_bytes(), name


def _as_number(text: str):
    text = text.split(" [", 1)[0]  # a report.md cell: the figure, then its 95% interval
    text = text.strip().rstrip(",;").removesuffix("%")
    return None if text == "-" else float(text)


def shown_figures(console: str, md: str, page: str, model: str) -> dict:
    """key -> {output: the figure as that output prints it, a number (None: "-")} for console, report.md,
    report.html."""
    import html as H

    tables = _tables(md)
    out: dict = {}
    for key in MT.FIGURES:
        name = MT.label(key)
        got = {}
        said = re.findall(rf"(?:^|[:;,] ){re.escape(name)} (\S+)", console, re.M)
        if said:
            got["console"] = [_as_number(x) for x in said]
        elif re.search(rf"no complete \w+ for {re.escape(name)}", console):
            got["console"] = [None]
        col = "overall" if key == "accuracy" else name
        cells = [
            row[col]
            for t in tables
            for row in t
            if col in row and row.get("model") == model and row.get("mode", "overall") == "overall"
        ]
        if cells:
            got["report.md"] = [_as_number(c) for c in cells]
        cells = re.findall(rf'data-model="{re.escape(H.escape(model, quote=True))}" data-figure="{key}">([^<]*)<', page)
        if cells:
            got["report.html"] = [_as_number(c) for c in cells]
        if got:
            out[key] = got
    return out


@pytest.mark.slow
@settings(max_examples=15)
@given(fates=FATES)
def test_property_console_report_md_json_and_html_give_the_same_figure_for_every_name(
    gen_bench, tmp_path_factory, fates
):
    folder, bench = gen_bench
    rows = [(it.id, answer_text(it, f)) for it, f in zip(bench, fates) if f != "missing"]
    if not rows:
        return
    out = tmp_path_factory.mktemp("four") / "ev"
    res = _evaluate(folder, out, rows, ".jsonl")
    entry = json.loads((out / "report.json").read_text())["models"]["m"]
    o = entry["metrics"]["overall"]
    in_json = {k: v for k, v in o.items() if k in MT.FIGURES}
    in_json.update({k: o["pair_groups"][k] for k in ("q_acc", "i_acc", "g_acc")} if o.get("pair_groups") else {})
    shown = shown_figures(res.summary(), (out / "report.md").read_text(), (out / "report.html").read_text(), "m")
    assert set(shown) == set(in_json), set(shown) ^ set(in_json)
    for key, value in in_json.items():
        want = None if value is None else float(value) if MT.unit(key) == "count" else round(100 * value, 1)
        assert set(shown[key]) == {"console", "report.md", "report.html"}, (key, shown[key])
        for where, said in shown[key].items():
            assert said == [want], (key, where, said, want)


def test_hallusionbench_figures_are_the_same_in_console_report_md_json_and_html(tmp_path):
    """The real HallusionBench file: its aAcc, qAcc, fAcc, yes % diff and FP ratio (units %, %, %, signed share,
    share) read alike in every output."""
    from anchors import anchor

    from vhmine import formats as F
    from vhmine.eval.job import EvalOptions, evaluate

    src = anchor("hallusionbench/HallusionBench.json")
    p = tmp_path / "p.jsonl"
    p.write_text(
        "".join(
            json.dumps({"id": it.id, "answer": "yes" if k % 3 else "no"}) + "\n" for k, it in enumerate(F.load(src))
        )
    )
    res = evaluate(EvalOptions(bench=src, out=tmp_path / "ev", predictions=[("m", p)]))
    hb = res.report["models"]["m"]["hallusionbench"]
    shown = shown_figures(
        res.summary(), (tmp_path / "ev" / "report.md").read_text(), (tmp_path / "ev" / "report.html").read_text(), "m"
    )
    for key in ("aAcc", "qAcc", "fAcc", "yes_pct_diff", "fp_ratio"):
        want = round(100 * hb[key], 1) if MT.unit(key) == "%" else round(hb[key], 3)
        assert shown[key] == {"console": [want], "report.md": [want], "report.html": [want]}, (key, shown[key])
    assert MT.unit("yes_pct_diff") == "signed share" and "yes % diff +" in res.summary()
