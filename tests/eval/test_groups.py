"""Pair groups (issue 10): questions whose answers differ between a pair's two images are exported as a
group in every format, and `vhmine eval` reports question, image and group accuracy per mode
(NaturalBench's Q-Acc, I-Acc, G-Acc) beside the per-item accuracy VHTest reports.

The group measures are checked by hand on a small table; the export and eval run through the real CLI
on a store made with the curation library (helpers.make_ready_store).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import make_ready_store, without_intervals

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark, assign_groups
from vhmine.eval.metrics import Scored, by_mode, pair_groups


def _row(id, mode, kind, correct, q, image, group, truth=None):
    return Scored(id, mode, kind, correct, None, truth, q, image, {}, group)


# G: counting yes/no, 2 questions x 2 images (NaturalBench's layout): "3 cats?" yes on A / no on B, "2 cats?" the
# other way; the model is wrong once, on "2 cats?" for image A. H: color yes/no, all right. K: counting open, one
# question on both images, both right. U: in no group.
TABLE = [
    _row("g1", "counting", YNQ, True, "q3", "A", "G", True),
    _row("g2", "counting", YNQ, True, "q3", "B", "G", False),
    _row("g3", "counting", YNQ, False, "q2", "A", "G", False),
    _row("g4", "counting", YNQ, True, "q2", "B", "G", True),
    _row("h1", "color", YNQ, True, "qr", "A", "H", True),
    _row("h2", "color", YNQ, True, "qr", "B", "H", False),
    _row("h3", "color", YNQ, True, "qb", "A", "H", False),
    _row("h4", "color", YNQ, True, "qb", "B", "H", True),
    _row("k1", "counting", OEQ, True, "qn", "A", "K"),
    _row("k2", "counting", OEQ, True, "qn", "B", "K"),
    _row("u1", "counting", YNQ, False, None, "C", None, True),
]


def test_group_accuracy_by_hand():
    g = pair_groups(TABLE)
    # questions: G.q3 right on both, G.q2 not, H.qr, H.qb, K.qn right -> 4 of 5
    # images: (G,A) has the wrong answer, (G,B), (H,A), (H,B), (K,A), (K,B) all right -> 5 of 6
    # groups: G has a wrong answer, H and K do not -> 2 of 3; items in groups: 9 of 10 right (u1 is in none)
    assert (g["groups"], g["questions"], g["images"], g["items"]) == (3, 5, 6, 10)
    assert (g["q_acc"], g["i_acc"], g["g_acc"], g["acc"]) == (
        pytest.approx(4 / 5),
        pytest.approx(5 / 6),
        pytest.approx(2 / 3),
        pytest.approx(9 / 10),
    )
    # G alone is NaturalBench's sample: q0_i0 right, q0_i1 right, q1_i0 wrong, q1_i1 right -> Q 1/2, I 1/2, G 0, Acc 3/4
    alone = pair_groups([r for r in TABLE if r.group_id == "G"])
    assert (alone["q_acc"], alone["i_acc"], alone["g_acc"], alone["acc"]) == (0.5, 0.5, 0.0, 0.75)
    per = by_mode(TABLE)["modes"]
    assert per["counting"]["accuracy"] == pytest.approx(
        5 / 7
    )  # VHTest's per-item accuracy over every item: u1 and g3 wrong
    assert (per["counting"]["pair_groups"]["groups"], per["counting"]["pair_groups"]["g_acc"]) == (2, 0.5)
    assert per["color"]["pair_groups"]["g_acc"] == 1.0
    # a group with an item that was not scored (a failed request) is left out, not judged on what is left
    part = pair_groups([r for r in TABLE if r.id != "g3"], sizes={"G": 4, "H": 4, "K": 2})
    assert (part["groups"], part["incomplete"], part["g_acc"]) == (2, 1, 1.0)


def _item(id, kind, q, truth, image, answers=()):
    return BenchItem(
        id,
        "counting",
        kind,
        q,
        answers or (("Yes",) if truth else ("No",)),
        truth,
        None,
        image,
        f"p1:{q}",
        {"pair_id": "p1"},
    )


def test_only_questions_whose_answers_differ_are_grouped():
    bench = Benchmark(
        "t",
        [
            _item("a", YNQ, "3 cats?", True, "A"),
            _item("b", YNQ, "3 cats?", False, "B"),  # differ: grouped
            _item("c", YNQ, "any cat?", True, "A"),
            _item("d", YNQ, "any cat?", True, "B"),  # agree: no group
            _item("e", YNQ, "2 cats?", False, "A"),  # other image cut away
            _item("f", OEQ, "how many?", None, "A", ("3",)),
            _item("g", OEQ, "how many?", None, "B", ("2", "two")),
            _item("h", OEQ, "what?", None, "A", ("Cat",)),
            _item("i", OEQ, "what?", None, "B", ("cat", "kitten")),
        ],
    )
    got = {it.id: it.group_id for it in assign_groups(bench)}
    assert got == {
        "a": "counting:YNQ:p1",
        "b": "counting:YNQ:p1",
        "c": None,
        "d": None,
        "e": None,
        "f": "counting:OEQ:p1",
        "g": "counting:OEQ:p1",
        "h": None,
        "i": None,
    }


def _vhmine(cwd, *args):
    r = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, f"vhmine {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def ready(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("groups")
    make_ready_store(tmp).close()
    return tmp


@pytest.mark.slow
def test_pope_export_and_eval_report_groups_through_the_cli(ready):
    db = str(ready / "store.db")
    _vhmine(ready, "export", "--db", db, "--out", "pope", "--format", "pope", "--kind", "ynq")
    lines = [json.loads(x) for x in (ready / "pope" / "questions.jsonl").read_text().splitlines()]
    groups: dict = {}
    for rec in lines:
        assert rec["group_id"] == rec["vhmine"]["group_id"]
        groups.setdefault(rec["group_id"], []).append(rec["label"])
    # make_ready_store: each mode's 4 drafted yes/no questions are 2 questions x 2 images with opposite truths
    assert len(groups) == 2 and None not in groups
    assert all(sorted(labels) == ["no", "no", "yes", "yes"] for labels in groups.values())  # balanced by construction
    man = json.loads((ready / "pope" / "manifest.json").read_text())
    assert man["pair_groups"] == {"counting": {"YNQ": 1}, "color": {"YNQ": 1}}
    assert {i["group_id"] for i in man["instances"].values()} == set(groups)

    # every answer right but one: a counting "no" question answered "yes"
    wrong = next(r["question_id"] for r in lines if r["category"] == "counting" and r["label"] == "no")
    answers = {r["question_id"]: ("Yes." if r["label"] == "yes" or r["question_id"] == wrong else "No.") for r in lines}
    (ready / "p.jsonl").write_text("".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items()))
    r = _vhmine(ready, "eval", "--bench", "pope", "--predictions", "m=p.jsonl", "--out", "ev")
    m = json.loads((ready / "ev" / "report.json").read_text())["models"]["m"]["metrics"]
    c, col, o = m["modes"]["counting"], m["modes"]["color"], m["overall"]
    assert c["accuracy"] == 0.75  # VHTest's per-item accuracy, reported beside
    assert (c["pair_groups"]["q_acc"], c["pair_groups"]["i_acc"], c["pair_groups"]["g_acc"]) == (0.5, 0.5, 0.0)
    assert (col["pair_groups"]["q_acc"], col["pair_groups"]["i_acc"], col["pair_groups"]["g_acc"]) == (1.0, 1.0, 1.0)
    assert (o["pair_groups"]["groups"], o["pair_groups"]["g_acc"], o["pair_groups"]["q_acc"]) == (2, 0.5, 0.75)
    md = without_intervals((ready / "ev" / "report.md").read_text())
    assert "## Pair groups (%): Q-Acc, I-Acc, G-Acc" in md
    assert "| m | counting | 75.0 | 1 | 50.0 | 50.0 | 0.0 |" in md
    assert "pair groups: Q-Acc 75.0%, I-Acc 75.0%, G-Acc 50.0% over 2 group(s)" in r.stdout

    # a failed or missing answer leaves its group out of the group measures (--partial), never scores it in part
    (ready / "q.jsonl").write_text(
        "".join(json.dumps({"id": k, "answer": v}) + "\n" for k, v in answers.items() if k != wrong)
    )
    _vhmine(ready, "eval", "--bench", "pope", "--predictions", "m=q.jsonl", "--out", "ev2", "--partial")
    o = json.loads((ready / "ev2" / "report.json").read_text())["models"]["m"]["metrics"]["overall"]["pair_groups"]
    assert (o["groups"], o["incomplete"], o["g_acc"]) == (1, 1, 1.0)


@pytest.mark.parametrize("fmt", ["vhtest", "vlmevalkit", "hf", "lmms-eval", "llava", "hallusionbench"])
def test_every_format_carries_the_group(ready, fmt):
    from vhmine import formats as F
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.store import open_store

    kind = "ynq" if fmt == "hallusionbench" else "both"
    with open_store(ready / "store.db") as store:
        export_benchmark(store, ExportOptions(out=ready / f"x-{fmt}", format=fmt, kind=kind))
    out = ready / f"x-{fmt}"
    back = F.load(out)
    groups = {it.id: it.group_id for it in back}
    assert sum(g is not None for g in groups.values()) == len(
        back
    )  # every question of make_ready_store differs by image
    assert len(set(groups.values())) == (4 if kind == "both" else 2)
    # the group also stands where each harness can read it without vhmine
    if fmt == "vhtest":
        import pandas as pd

        df = pd.read_excel(out / "YNQ_Benchmark" / "counting.xlsx")
        assert dict(zip(df["vhmine_id"], df["group_id"])) == {
            k: v for k, v in groups.items() if k in set(df["vhmine_id"])
        }
    elif fmt == "vlmevalkit":
        import csv

        with open(out / f"x-{fmt}_YNQ.tsv", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        assert {r["vhmine_id"]: r["group_id"] for r in rows} == {k: groups[k] for k in (r["vhmine_id"] for r in rows)}
    elif fmt in ("hf", "lmms-eval"):
        import pyarrow.parquet as pq

        path = out / ("data/ynq/test-00000-of-00001.parquet" if fmt == "hf" else "data/ynq.parquet")
        t = pq.read_table(path, columns=["id", "group_id"]).to_pylist()
        assert {r["id"]: r["group_id"] for r in t} == {r["id"]: groups[r["id"]] for r in t}
    elif fmt == "llava":
        recs = json.loads((out / "train.json").read_text()) + json.loads((out / "test.json").read_text())
        assert {r["id"]: r["vhmine"]["group_id"] for r in recs} == groups


def test_an_export_before_groups_reads_back_without_them(tmp_path, ready):
    """hf files written before the group column read back (no groups), so older exports still evaluate."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.formats import hf
    from vhmine.store import open_store

    with open_store(ready / "store.db") as store:
        export_benchmark(store, ExportOptions(out=tmp_path / "new", format="hf"))
    table = pa.concat_tables([pq.read_table(tmp_path / "new" / hf.DATA[k]) for k in ("OEQ", "YNQ")])
    assert {it.group_id for it in hf.read(tmp_path / "new")} != {None}
    old = tmp_path / "old" / hf.LEGACY_PARQUET  # the one file of every item that exports before per-kind files wrote
    old.parent.mkdir(parents=True)
    pq.write_table(table.drop(["group_id"]), old)
    assert {it.group_id for it in hf.read(tmp_path / "old")} == {None}
