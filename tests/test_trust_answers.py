"""Issue 8, answers: `--rule vhtest` is VHTest's own classify_response and its accuracies are what VHTest's
script prints; the curation and eval read a yes/no answer alike; a benchmark folder as VHTest publishes it
imports; an edited question keeps no slot values its text no longer holds."""

from __future__ import annotations

import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import seed_store

from vhmine.eval import answers as A
from vhmine import curate as C
from vhmine import formats as F
from vhmine import modes as M
from vhmine.bench import Benchmark, BenchItem
from vhmine.errors import FormatError, FormError

# answers on which VHTest's character prefix and a first-word reader part ways, plus the plain ones
TRICKY = ["Yes", "yes.", "YES!", "Yes?", "Yesterday there was a cat.", "yes-no", " yes", "\nNo.", "No, two.",
          "Nope", "Not sure", "Nothing is there", "no", "N", "Ye", "Maybe", "I think yes", "- Yes", "", "Yes, but not red."]


# --- VHTest: Evaluation/LLaVA/llava_ynq_version.py, transcribed ------------------------------------------

vh_mode_list = ["counting", "shape", "color", "orientation", "size", "position", "OCR", "existence"]


def classify_response(outputs):
    lower_case_start = outputs[:3].lower()

    if lower_case_start == 'yes':
        return 'y'
    else:
        lower_case_start = outputs[:2].lower()
        if lower_case_start == 'no':
            return 'n'
        else:
            return 'wrong_format'


def vhtest_ynq_scores(test_xlsx_path, raw_answers):
    """VHTest's scoring loop over its sheets; `raw_answers[(sheet file, row index)]` stands in for the model's
    decoded output (the script strips it before classify_response). Returns its printed lines' figures."""
    import pandas as pd

    result_value_list, per_mode = [], {}
    for vh_mode in vh_mode_list:
        pattern = os.path.join(test_xlsx_path, f"{vh_mode}*.xlsx")
        for file_path in glob.glob(pattern):
            df = pd.read_excel(file_path)
            bug_success = []
            for index, row in df.iterrows():
                outputs = raw_answers[(os.path.basename(file_path), index)].strip()
                yn_output = classify_response(outputs)
                bug_success.append(0 if yn_output == row['yes_or_no_ground_truth'] else 1)
            yn_LLaVA_bug_success_avg = np.mean(bug_success)
            per_mode[vh_mode] = 1 - yn_LLaVA_bug_success_avg  # "vh_mode {m} ynq_acc_LLaVA {acc}"
            result_value_list.append(1 - yn_LLaVA_bug_success_avg)
    return per_mode, np.mean(result_value_list)  # ..., "mean_acc: {}"


def test_vhtest_rule_is_vhtests_classify_response():
    as_vhtest = {"y": True, "n": False, "wrong_format": None}
    for text in TRICKY:
        assert A.parse_yes_no(text, "vhtest") is as_vhtest[classify_response(text.strip())], text
    assert [A.parse_yes_no(t) for t in ("Yesterday there was a cat.", "Nope", "Not sure", "Maybe")] == [True, False, False, None]
    # the first-word reader stays, under its own name
    assert [A.parse_yes_no(t, "firstword") for t in ("Yesterday", "Nope", "Yes?", "No, two.")] == [None, None, True, False]
    assert A.rule_names() == ("vhtest", "firstword", "pope", "strict", "vlmevalkit")


def _png(path):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4), (200, 10, 10)).save(path)


def _sheet(path, header, rows):
    """An .xlsx written with openpyxl, as VHTest's published sheets are (one header row, then the rows)."""
    from openpyxl import Workbook

    path.parent.mkdir(parents=True, exist_ok=True)
    wb = Workbook()
    ws = wb.active
    ws.append(header)
    for r in rows:
        ws.append(r)
    wb.save(path)


def _vhtest_folder(root, modes=("counting", "OCR", "color")):
    """YNQ sheets with only the columns VHTest's YNQ script reads, plus one column of VHTest's own results."""
    answers = {}
    k = 0
    for mode in modes:
        rows = []
        for i in range(len(TRICKY)):
            _png(root / "Images" / mode / f"{mode}_{i}.png")
            gt = "y" if (i + len(mode)) % 2 else "n"
            rows.append([f"{mode}_{i}.png", f"Is the thing {i} in the {mode} picture red?", gt, i % 2])
            answers[(f"{mode}.xlsx", i)] = TRICKY[(i + k) % len(TRICKY)]
        k += 7  # each mode sees the answers in another order
        _sheet(root / "YNQ_Benchmark" / f"{mode}.xlsx",
               ["image_path", "yes_or_no_question", "yes_or_no_ground_truth", "LLaVA_bug_success"], rows)
    return answers


def test_vhtest_accuracies_equal_what_vhtests_script_prints(tmp_path):
    from vhmine.eval.job import EvalOptions, evaluate

    root = tmp_path / "Benchmark"
    raw = _vhtest_folder(root)
    bench = F.load(root)
    assert F.detect(root) == "vhtest" and len(bench) == 3 * len(TRICKY)
    ids = {(it.meta["sheet"], int(Path(it.image).stem.rsplit("_", 1)[1])): it.id for it in bench}  # row i shows <mode>_i.png
    preds = tmp_path / "answers.jsonl"
    preds.write_text("".join(json.dumps({"id": ids[k], "answer": a}) + "\n" for k, a in raw.items()))
    report = evaluate(EvalOptions(bench=root, out=tmp_path / "ev", predictions=[("m", preds)], rule="vhtest")).report
    ours = report["models"]["m"]["metrics"]["modes"]
    theirs, mean_acc = vhtest_ynq_scores(root / "YNQ_Benchmark", raw)
    assert set(theirs) == {"counting", "OCR", "color"}
    for vh_mode, acc in theirs.items():
        assert ours["ocr" if vh_mode == "OCR" else vh_mode]["accuracy"] == pytest.approx(acc), vh_mode
    assert np.mean([m["accuracy"] for m in ours.values()]) == pytest.approx(mean_acc)
    # an answer VHTest calls "wrong format" is counted unreadable and wrong, never "no"
    wrong_format = sum(classify_response(a.strip()) == "wrong_format" for a in raw.values())
    assert report["models"]["m"]["metrics"]["overall"]["unreadable"] == wrong_format > 0
    details = [json.loads(line) for line in (tmp_path / "ev" / "answers-m.jsonl").read_text().splitlines()]
    assert all(not d["correct"] for d in details if d["read_as"] == "unreadable")
    # the first-word reader scores the same answers differently: the label matters
    other = evaluate(EvalOptions(bench=root, out=tmp_path / "ev2", predictions=[("m", preds)], rule="firstword")).report
    assert other["models"]["m"]["metrics"]["overall"]["accuracy"] != report["models"]["m"]["metrics"]["overall"]["accuracy"]


def test_a_vhtest_folder_as_published_imports_with_its_extra_columns(tmp_path):
    root = tmp_path / "Benchmark"
    _png(root / "Images" / "color" / "color_0.png")
    _png(root / "Images" / "color" / "color_1.png")
    _sheet(root / "OEQ_Benchmark" / "color.xlsx", ["Image", "Question", "Note"],
           [["color_0.png", "What color is the cup?", "hard"], ["color_1.png", "What color is the car?", None]])
    _sheet(root / "YNQ_Benchmark" / "color.xlsx", ["image_path", "yes_or_no_question", "yes_or_no_ground_truth", "Note"],
           [["color_0.png", "Is the cup red?", "y", "from OEQ 0"], ["color_1.png", "Is the car red?", "n", None]])
    bench = F.load(root)
    got = {(it.kind, it.question): it for it in bench}
    assert len(bench) == 4 and {it.mode for it in bench} == {"color"}
    oeq = got[("OEQ", "What color is the cup?")]
    assert oeq.answers == () and oeq.image == "Images/color/color_0.png" and oeq.meta["extras"] == {"Note": "hard"}
    assert got[("OEQ", "What color is the car?")].meta["extras"] == {"Note": ""}
    yes, no = got[("YNQ", "Is the cup red?")], got[("YNQ", "Is the car red?")]
    assert (yes.truth, no.truth) == (True, False) and yes.image == "Images/color/color_0.png"
    assert yes.meta["extras"] == {"Note": "from OEQ 0"} and yes.meta["sheet"] == "color.xlsx"
    assert bench.image_bytes(no) == (root / "Images" / "color" / "color_1.png").read_bytes()
    # a sheet without a column VHTest's script reads is refused, naming it
    _sheet(root / "YNQ_Benchmark" / "color.xlsx", ["Image", "yes_or_no_question", "yes_or_no_ground_truth"],
           [["color_0.png", "Is the cup red?", "y"]])
    with pytest.raises(FormatError, match=r"color\.xlsx: no column 'image_path'"):
        F.load(root)


# --- one yes/no reader: curation and eval ---------------------------------------------------------------

def _eval_reading(text, truth):
    from vhmine.eval.job import ModelAnswers, score

    bench = Benchmark("one", [BenchItem("q", "color", "YNQ", "Is the cup red?", (), truth)])
    _, details = score(bench, ModelAnswers("m", {"q": text}, "file"), A.DEFAULT_RULE, {}, "match")
    return details[0]["read_as"]


def test_curation_and_eval_read_a_yes_no_answer_alike():
    for text in TRICKY:
        assert M.yes_no_of(text) is A.parse_yes_no(text, A.DEFAULT_RULE), text
        for truth in (True, False):
            try:  # what the curation does with a worker's reference answer to a yes/no question
                M.check_ynq(truth, [text], "image A")
                refused = False
            except FormError:
                refused = True
            # refused exactly when eval, asked the same question, would read the answer as the opposite
            assert refused == (_eval_reading(text, truth) == ("no" if truth else "yes")), (text, truth)


def test_a_reference_answer_eval_reads_as_the_opposite_is_refused(tmp_path):
    store, _ = seed_store(tmp_path / "c.db", tmp_path)
    try:
        item = C.next_item(store, "alice", "color")
        a, b = (v.id for v in item.images)
        ann = C.Annotation("color.is_color", {"object": "cup", "color": "red"}, answers={a: "Yes?", b: "no"},
                           truths={a: False, b: False})
        with pytest.raises(FormError, match=r"reference answer 'Yes\?' for image A \(\w+\) contradicts the yes/no truth \(no\)"):
            C.save_annotation(store, "alice", item.task_id, ann)
        # drafts: their answers read as their truth under every rule
        saved = C.save_annotation(store, "alice", item.task_id,
                                  C.Annotation("color.what_color", {"object": "cup"}, answers={a: "red", b: "blue"}))
        C.confirm_drafts(store, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
        drafts = [r for r in C.ready_instances(store, "color", "YNQ")]
        assert len(drafts) == 4
        for r in drafts:
            assert {A.parse_yes_no(r.answers[0], rule) for rule in A.rule_names()} == {r.truth}
    finally:
        store.close()


# --- an edited question keeps no slot values it no longer holds ----------------------------------------

@pytest.fixture
def color_item(tmp_path):
    store, _ = seed_store(tmp_path / "c.db", tmp_path)
    item = C.next_item(store, "alice", "color")
    yield store, item, [v.id for v in item.images]
    store.close()


def _saved(store, saved):
    ready = {r.id: r for r in C.ready_instances(store, "color")}
    return [ready[i] for i in saved.instance_ids], C.pending_drafts(store, "alice", "color")


def test_a_value_edited_in_the_question_replaces_the_slot_value(color_item):
    store, item, (a, b) = color_item
    saved = C.save_annotation(store, "alice", item.task_id, C.Annotation(
        "color.what_color", {"object": "Ann Smith's car"}, question="What color is the truck?", answers={a: "red", b: "blue"}))
    inst, drafts = _saved(store, saved)
    assert {(r.template_id, json.dumps(r.slots)) for r in inst} == {("color.what_color", '{"object": "truck"}')}
    assert {d.question for d in drafts} == {"Is the truck red?", "Is the truck blue?"}
    assert not any("Smith" in json.dumps(r.slots) for r in C.ready_instances(store))


def test_a_question_reworded_past_its_template_keeps_no_slots_and_drafts_nothing(color_item):
    store, item, (a, b) = color_item
    saved = C.save_annotation(store, "alice", item.task_id, C.Annotation(
        "color.what_color", {"object": "Ann Smith's car"}, question="Which paint was used on the vehicle?",
        answers={a: "red", b: "blue"}))
    inst, drafts = _saved(store, saved)
    assert {(r.template_id, json.dumps(r.slots)) for r in inst} == {("color.own", "{}")} and drafts == []
    assert saved.draft_ids == ()


def test_a_rewording_that_names_every_value_keeps_them(color_item):
    store, item, (a, b) = color_item
    saved = C.save_annotation(store, "alice", item.task_id, C.Annotation(
        "color.what_color", {"object": "car"}, question="What is the color of the car, seen from here?",
        answers={a: "red", b: "blue"}))
    inst, drafts = _saved(store, saved)
    assert {(r.template_id, json.dumps(r.slots)) for r in inst} == {("color.what_color", '{"object": "car"}')}
    assert len(drafts) == 4


def test_a_reworded_draft_tests_the_value_its_text_names(color_item):
    store, item, (a, b) = color_item
    saved = C.save_annotation(store, "alice", item.task_id, C.Annotation("color.what_color", {"object": "cup"},
                                                                         answers={a: "red", b: "blue"}))
    drafts = {(d.image_id, d.truth): d for d in C.pending_drafts(store, "alice", "color")}
    yes_a = drafts[(a, True)]
    assert yes_a.question == "Is the cup red?"
    # "blue" is not image A's answer: kept as "yes", the reworded draft contradicts it (before: checked against "red")
    with pytest.raises(FormError, match=r"yes/no truth yes for the yes/no question \w+ contradicts the open-ended answer \(red\): 'blue' is not one of them"):
        C.confirm_drafts(store, "alice", [C.DraftDecision(yes_a.instance_id, True, "Is the cup blue?")])
    decisions = [C.DraftDecision(yes_a.instance_id, True, "Is the mug red?"),
                 C.DraftDecision(drafts[(a, False)].instance_id, True, "Would you call the paint of it blue?"),
                 C.DraftDecision(drafts[(b, True)].instance_id, True, "Is the cup blue?")]
    C.confirm_drafts(store, "alice", decisions)
    got = {r.question: (r.template_id, r.slots) for r in C.ready_instances(store, "color", "YNQ")}
    assert got == {"Is the mug red?": ("color.is_color", {"object": "mug", "color": "red"}),
                   "Would you call the paint of it blue?": ("color.own", {}),
                   "Is the cup blue?": ("color.is_color", {"object": "cup", "color": "blue"})}
    assert C.undo_last(store, "alice").startswith("confirmation of 3")
    back = {d.instance_id: d.question for d in C.pending_drafts(store, "alice", "color")}
    assert back[yes_a.instance_id] == "Is the cup red?"
    from vhmine.store import Instance

    with store.session(write=False) as s:
        d = s.get(Instance, drafts[(a, False)].instance_id)
        assert (d.template_id, d.slots, d.draft_value) == ("color.is_color", {"object": "cup", "color": "blue"}, "blue")


@pytest.mark.parametrize("template, question, slots, expected", [
    ("color.what_color", "What color is the car?", {"object": "car"}, {"object": "car"}),
    ("color.what_color", "what color is the Truck?", {"object": "car"}, {"object": "Truck"}),
    ("color.what_color", "What color is Ann's car?", {"object": "Ann's truck"}, None),
    ("position.is_at", "Is the big dog to the right of the cat?", {"a": "big dog", "relation": "to the left of", "b": "cat"},
     {"a": "big dog", "relation": "to the right of", "b": "cat"}),
    ("size.which_larger", "Is the cat or the dog the larger one?", {"a": "dog", "b": "cat"}, {"a": "dog", "b": "cat"}),
    ("size.which_larger", "Is the cat or the mouse the larger one?", {"a": "dog", "b": "cat"}, None),
])
def test_slots_of(template, question, slots, expected):
    assert M.slots_of(M.get_template(template), question, slots) == expected


def test_a_reworded_choice_draft_is_checked_against_the_answer(tmp_path):
    store, _ = seed_store(tmp_path / "c.db", tmp_path)
    try:
        item = C.next_item(store, "alice", "size")
        a, b = (v.id for v in item.images)
        C.save_annotation(store, "alice", item.task_id, C.Annotation(
            "size.which_larger", {"a": "dog", "b": "cat"}, answers={a: "the dog", b: "cat"}))
        yes_a = next(d for d in C.pending_drafts(store, "alice", "size") if d.image_id == a and d.truth)
        assert yes_a.question == "Is the dog larger than the cat in the picture?"
        # the objects swapped in the text, the truth left at yes: it now contradicts image A's answer
        with pytest.raises(FormError, match=r"yes/no truth yes for the yes/no question \w+ contradicts the open-ended answer \(the dog\): 'cat' is not one of them"):
            C.confirm_drafts(store, "alice", [C.DraftDecision(yes_a.instance_id, True, "Is the cat larger than the dog in the picture?")])
        C.confirm_drafts(store, "alice", [C.DraftDecision(yes_a.instance_id, True, "Is the cat larger than the dog in the picture?", False)])
        [r] = [r for r in C.ready_instances(store, "size", "YNQ")]
        assert (r.truth, r.slots) == (False, {"a": "cat", "b": "dog"})
    finally:
        store.close()
