"""`vhmine export --format mmvp`: pairs only (the rest left out and said), MMVP's layout read back, and the
sample-size note and manifest record every export carries (vhmine.rules.sample_size)."""

import csv
import json

import pytest
from helpers import write_pairs, write_photos

from vhmine import curate as C
from vhmine import formats as F
from vhmine.errors import ExportError
from vhmine.export.job import ExportOptions, export_benchmark
from vhmine.rules.sample_size import instances_needed


def _annotate(store, mode, template, slots, answers_ab, keep_no=True):
    item = C.next_item(store, "alice", mode)
    ids = [v.id for v in item.images]
    C.save_annotation(store, "alice", item.task_id, C.Annotation(template, slots, answers=dict(zip(ids, answers_ab))))
    drafts = C.pending_drafts(store, "alice", mode)
    C.confirm_drafts(store, "alice", [C.DraftDecision(d.instance_id, keep_no or d.truth) for d in drafts])


@pytest.fixture
def store(tmp_path):
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    st = open_store(tmp_path / "s.db")
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse"))
    seed_pairs(st, write_pairs(tmp_path / "runs" / "t", photos), per_mode=2, modes=["counting", "color"])
    C.add_worker(st, "alice")
    # counting: 2 pairs, 4 yes/no question pairs (yes on one image, no on the other); color: the "no" drafts
    # rejected, so its 2 yes/no questions have no partner
    _annotate(st, "counting", "counting.how_many", {"object": "cats"}, ["3", "2"])
    _annotate(st, "counting", "counting.how_many", {"object": "dogs"}, ["1", "4"])
    _annotate(st, "color", "color.what_color", {"object": "car"}, ["red", "blue"], keep_no=False)
    yield st
    st.close()


def test_mmvp_export_writes_pairs_only_and_says_what_it_left_out(store, tmp_path):
    out = tmp_path / "mmvp"
    res = export_benchmark(store, ExportOptions(out=out, format="mmvp", near_dups=None))
    assert res.counts == {"counting": {"OEQ": 0, "YNQ": 8, "yes": 4, "no": 4}}  # color's unpaired two left out
    text = res.summary()
    assert "left out 2 instance(s) that are not one of a pair" in text
    assert "left out 6 open question(s)" in text  # the format holds yes/no questions only
    assert F.detect(out) == "mmvp"
    with open(out / "Questions.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["Index"] for r in rows] == [str(k) for k in range(1, 9)]
    assert all(r["Options"] == "(a) Yes (b) No" and r["Correct Answer"] in ("(a)", "(b)") for r in rows)
    back = F.load(out)
    for k in range(0, len(back), 2):  # rows 2k-1 and 2k: one question asked of the two images of a pair
        a, b = back.items[k], back.items[k + 1]
        assert a.pair_id == b.pair_id and a.question == b.question and a.image_id != b.image_id
        assert (out / "MMVP Images" / f"{k + 1}.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
    man = json.loads((out / "manifest.json").read_text())
    assert man["format"] == "mmvp" and len(man["instances"]) == 8


def test_an_mmvp_export_with_no_pair_at_all_is_refused_and_leaves_nothing(store, tmp_path):
    with pytest.raises(ExportError, match=r"none of the 2 instance\(s\) to export is one of a pair"):
        export_benchmark(store, ExportOptions(out=tmp_path / "m", format="mmvp", modes=["color"], near_dups=None))
    assert not (tmp_path / "m").exists() and not list(tmp_path.glob(".m.tmp-*"))


def test_every_export_names_the_modes_short_of_the_items_that_tell_two_models_apart(store, tmp_path):
    needed = instances_needed()
    res = export_benchmark(
        store, ExportOptions(out=tmp_path / "vh", format="vhtest", near_dups=None, allow_unbalanced=True)
    )
    counts = {m: c["OEQ"] + c["YNQ"] for m, c in res.counts.items()}
    assert counts == {"counting": 12, "color": 4}
    line = next(n for n in res.notes if "tell two models" in n)
    assert line.startswith(f"note: 2 of 2 mode(s) have fewer than the {needed} instances per mode")
    assert line.endswith(": color 4, counting 12")  # in the modes' order
    man = json.loads((tmp_path / "vh" / "manifest.json").read_text())
    assert man["sample_size"]["needed"] == needed == 783
    assert man["sample_size"]["short_modes"] == counts
    assert (man["sample_size"]["accuracy"], man["sample_size"]["difference"]) == (0.6, 0.05)


@pytest.mark.slow
def test_the_cli_exports_mmvp_and_scores_it_back_by_mmvps_rule(store, tmp_path, openai_server):
    """The round trip a user makes: `vhmine export --format mmvp`, MMVP's evaluate_mllm.py writes the answers file (its
    lines restated here), `vhmine eval --rule mmvp` grades it through a judge as gpt_grader.py does."""
    import pandas as pd
    from openai_server import chat_text
    from typer.testing import CliRunner

    from vhmine.cli import app

    url = store.url
    out = tmp_path / "cli-mmvp"
    r = CliRunner().invoke(app, ["export", "--db", url, "--out", str(out), "--format", "mmvp", "--no-near-dups"])
    assert r.exit_code == 0, r.output
    assert "left out 2 instance(s) that are not one of a pair" in r.output
    assert "counting: OEQ 0, YNQ 8 (yes 4 / no 4)" in r.output
    assert "have fewer than the 783 instances per mode" in r.output
    df = pd.read_csv(out / "Questions.csv")  # as evaluate_mllm.py reads it; the model answers "(a)" throughout
    lines = [
        {"question_id": k + 1, "prompt": row["Question"] + " " + row["Options"], "answer": row["Correct Answer"],
         "response": "(a)", "answer_id": str(k), "model_id": "m"}
        for k, row in df.iterrows()
    ]  # fmt: skip
    (tmp_path / "answer.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    openai_server.responder = lambda body: "Yes" if "the correct answer is (a)." in chat_text(body) else "No"
    args = ["--bench", str(out), "--out", str(tmp_path / "ev"), "--predictions", f"m={tmp_path / 'answer.jsonl'}"]
    r = CliRunner().invoke(app, ["eval", *args, "--rule", "mmvp", "--judge", "j", "--cache", str(tmp_path / "c.db")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "ev" / "report.json").read_text())["models"]["m"]
    # "(a)" is right on the yes half: each pair has one yes and one no question, so no pair is right
    assert (m["metrics"]["overall"]["correct"], m["mmvp"]["pairs_right"], m["mmvp"]["pairs"]) == (4, 0, 4)
    assert m["mmvp"]["line_pairs"] == [0, 4] and len(openai_server.chats()) == 8
