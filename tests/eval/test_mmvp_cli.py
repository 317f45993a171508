"""MMVP in and out through the command line: a benchmark in MMVP's layout (as `vhmine export --format mmvp` writes
it), two models' answers files as MMVP's evaluate_mllm.py writes them, `vhmine eval --rule mmvp` against a real
loopback judge: each model's pair accuracy is MMVP's gpt_grader.py's (its semantics restated here: right iff the
judge's reply lower-cased is exactly "yes", pairs of consecutive lines), with the intervals and the paired comparison
every eval gives; a file out of pair order is refused before the judge is asked; the judge is required."""

import json

import numpy as np
import pytest
from openai_server import chat_text
from PIL import Image

from vhmine.bench import BenchItem, Benchmark
from vhmine.eval.interval_text import compare_header
from vhmine.formats import mmvp as F
from vhmine.rules import mmvp as R

SYSTEM = (
    "You are a helpful and precise assistant for checking the quality of the answer. Please answer in only yes or no."
)
REPLIES = ["Yes", "yes", "YES", "Yes.", "Yes\n", " yes", "No", "no"]  # MMVP counts the first three right
TAGS = {  # the judge's reply to row k's answer: REPLIES[TAGS[model][k - 1]]
    "a": [0, 1, 2, 0, 1, 3, 4, 0, 0, 2, 6, 7],  # 8 rows right; pairs 1, 2, 5 (3, 4, 6 have a reply MMVP refuses)
    "b": [0, 6, 0, 1, 7, 7, 0, 0, 5, 0, 1, 7],  # 7 rows right; pairs 2, 4
}


@pytest.fixture
def folder(tmp_path):
    """Six mined pairs asked one yes/no question each, in MMVP's layout (no manifest: detected by its files)."""
    rng = np.random.default_rng(3)
    items = []
    for p in range(6):
        for side, truth in (("a", p % 2 == 0), ("b", p % 2 == 1)):
            path = tmp_path / f"{p}{side}.png"
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(path)
            items.append(
                BenchItem(
                    f"i{p}{side}",
                    "position" if p < 3 else "color",
                    "YNQ",
                    f"Is the mug in photo {p} on the left?",
                    ("Yes" if truth else "No",),
                    truth,
                    str(path),
                    f"img{p}{side}",
                    f"pair{p}",
                    {},
                )  # fmt: skip
            )
    out = tmp_path / "mmvp"
    out.mkdir()
    F.write(Benchmark("mugs", items), out)
    return out


def _answers_file(folder, path, model, order=None):
    """MMVP's answer.jsonl for `model` (its response on row k carries the tag that picks the judge's reply), written as
    evaluate_mllm.py writes it; `order`: the rows' order in the file."""
    import pandas as pd

    df = pd.read_csv(folder / "Questions.csv")
    lines = []
    for index, row in df.iterrows():
        record = {
            "question_id": index + 1,
            "prompt": row["Question"] + " " + row["Options"],
            "answer": row["Correct Answer"],
            "response": f"{row['Correct Answer']} [{TAGS[model][index]}]",
            "answer_id": f"id{index}",
            "model_id": model,
        }
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines[k] for k in (order or range(len(lines)))))
    return path


def _judge(body):
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}  # MMVP's system message, as it sends it
    return REPLIES[int(chat_text(body).rsplit("[", 1)[1].split("]", 1)[0])]


def _mmvp_reference(model: str) -> tuple[int, int]:
    """gpt_grader.py's count restated: a line is right iff the reply lower-cased is "yes"; lines 2k-1, 2k a pair."""
    right = [REPLIES[t].lower() == "yes" for t in TAGS[model]]
    return sum(right[k] and right[k + 1] for k in range(0, len(right) - 1, 2)), len(right) // 2


def _eval(tmp_path, *args):
    from typer.testing import CliRunner

    from vhmine.cli import app

    return CliRunner().invoke(app, ["eval", "--cache", str(tmp_path / "cache.db"), "--retry-wait", "0.01", *args])


def test_two_models_answers_files_scored_by_mmvps_rule_with_intervals_and_their_comparison(
    folder, tmp_path, openai_server
):
    srv = openai_server
    srv.responder = _judge
    a, b = (_answers_file(folder, tmp_path / f"{m}.jsonl", m) for m in ("a", "b"))
    r = _eval(
        tmp_path, "--bench", str(folder), "--out", str(tmp_path / "ev"), "--rule", "mmvp", "--judge", "gpt-4-0314",
        "--predictions", f"a={a}", "--predictions", f"b={b}", "--compare", "a", "b",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    report = json.loads((tmp_path / "ev" / "report.json").read_text())
    assert (report["rule"], report["oeq"]["scorer"], report["oeq"]["grader"]) == ("mmvp", "mmvp", R.grader_id())
    assert report["ynq_prompt_suffix"] is None
    for model in ("a", "b"):
        right, pairs = _mmvp_reference(model)
        m = report["models"][model]
        assert m["harness"] == "mmvp" and m["answered"] == 12
        rec = m["mmvp"]
        assert (rec["pairs_right"], rec["pairs"], rec["line_pairs"], rec["order_breaks"]) == (
            right, pairs, [right, pairs], []
        )  # fmt: skip
        assert rec["pair_accuracy"] == right / pairs
        o = m["metrics"]["overall"]
        assert o["pair_accuracy"] == right / pairs and "precision" not in o and "unreadable" not in o
        assert o["correct"] == sum(REPLIES[t].lower() == "yes" for t in TAGS[model])
        assert {"accuracy", "pair_accuracy", "image_accuracy"} <= set(o["intervals"])
        assert "precision" not in o["intervals"] and "unreadable" not in o["intervals"]
        assert (
            f"- {model}: MMVP: {right} of {pairs} pair(s) right, accuracy {right / pairs:.4g}"
            in (tmp_path / "ev" / "report.md").read_text()
        )
    # every distinct line graded once (two models' same answer to a row is one request, cached), with MMVP's request
    # (the judge checks its system message) at temperature 0.2
    distinct = {(k, t) for m in ("a", "b") for k, t in enumerate(TAGS[m])}
    assert len(srv.chats()) == len(distinct) == 21 and all(c["temperature"] == 0.2 for c in srv.chats())
    comps = [c for c in report["comparisons"] if (c["a"], c["b"], c["mode"]) == ("a", "b", None)]
    assert {c["figure"] for c in comps} == {"accuracy", "pair_accuracy", "image_accuracy"}
    acc = next(c for c in comps if c["figure"] == "accuracy")
    assert acc["diff"] == pytest.approx((8 - 7) / 12) and acc["p_value"] is not None
    assert compare_header("a", "b") in r.output
    assert "  pair accuracy +16.7 [" in r.output and "  position: accuracy " in r.output
    assert "MMVP: 3 of 6 pair(s) right, accuracy 0.5" in r.output


def test_an_answers_file_out_of_pair_order_is_refused_before_the_judge_is_asked(folder, tmp_path, openai_server):
    srv = openai_server
    srv.responder = _judge
    order = [0, 1, 3, 2, 4, 5, 6, 7, 8, 9, 10, 11]  # rows 3 and 4 swapped: lines 3 and 4 still a pair
    fine = _answers_file(folder, tmp_path / "fine.jsonl", "a", order)
    # each of a's wrong rows (6, 7, 11, 12) put beside a right one of another pair: MMVP's grader counts 2 pairs, not 3
    shuffled = _answers_file(folder, tmp_path / "s.jsonl", "a", [0, 5, 1, 6, 2, 10, 3, 11, 4, 7, 8, 9])
    args = ["--bench", str(folder), "--rule", "mmvp", "--judge", "gpt-4-0314"]
    r = _eval(tmp_path, *args, "--out", str(tmp_path / "ev"), "--predictions", f"a={shuffled}")
    assert r.exit_code == 2
    assert "a: lines 1 and 2 of s.jsonl are not one of the benchmark's pairs (5 such line pair(s))" in r.output
    assert "sort its lines by question_id" in r.output and "or pass --partial" in r.output
    assert srv.chats() == [] and not (tmp_path / "ev").exists()
    # a pair's two lines swapped within it: the same pairs, so the same count as MMVP's
    r = _eval(tmp_path, *args, "--out", str(tmp_path / "ev1"), "--predictions", f"a={fine}")
    assert r.exit_code == 0, r.output
    rec = json.loads((tmp_path / "ev1" / "report.json").read_text())["models"]["a"]["mmvp"]
    assert rec["order_breaks"] == [] and rec["line_pairs"] == [rec["pairs_right"], rec["pairs"]]
    # --partial: vhmine's pairs are the benchmark's; MMVP's own count over the file's lines is reported beside
    r = _eval(tmp_path, *args, "--out", str(tmp_path / "ev2"), "--predictions", f"a={shuffled}", "--partial")
    assert r.exit_code == 0, r.output
    rec = json.loads((tmp_path / "ev2" / "report.json").read_text())["models"]["a"]["mmvp"]
    assert (rec["pairs_right"], rec["pairs"]) == _mmvp_reference("a") == (3, 6)
    assert rec["order_breaks"] == [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]] and rec["line_pairs"] == [2, 6]
    assert "over the answers file's consecutive lines, as gpt_grader.py pairs them: 2 of 6" in r.output


def test_rule_mmvp_needs_a_judge_and_no_other_scorer(folder, tmp_path):
    a = _answers_file(folder, tmp_path / "a.jsonl", "a")
    base = ["--bench", str(folder), "--out", str(tmp_path / "ev"), "--predictions", f"a={a}", "--rule", "mmvp"]
    r = _eval(tmp_path, *base)
    assert r.exit_code == 2 and "--rule mmvp grades every answer with a judge" in r.output and "--judge" in r.output
    r = _eval(tmp_path, *base, "--judge", "j", "--oeq", "match")
    assert r.exit_code == 2 and "drop --oeq match" in r.output
    r = _eval(tmp_path, *base[:-2], "--judge", "j", "--compare", "a", "z")
    assert r.exit_code == 2 and "--compare z: no model of that name in this eval (a)" in r.output


def test_a_model_asked_under_mmvp_is_shown_mmvps_prompt(folder, tmp_path, openai_server):
    """--model under --rule mmvp: the model sees Question + " " + Options (what evaluate_mllm.py shows), and the
    judge is told that same question and the correct option's letter."""
    srv = openai_server
    seen = []

    def respond(body):
        if body["messages"][0].get("content") == SYSTEM:
            return "Yes" if "the correct answer is (a)." in chat_text(body) else "No"  # the grader: "(a)" is right
        seen.append(chat_text(body))
        return "(a)"  # the model always picks the first option

    srv.responder = respond
    r = _eval(tmp_path, "--bench", str(folder), "--out", str(tmp_path / "ev"), "--rule", "mmvp", "--judge", "j",
              "--model", "vlm")  # fmt: skip
    assert r.exit_code == 0, r.output
    bench = F.read(folder)
    assert sorted(seen) == sorted(f"{it.question} (a) Yes (b) No" for it in bench)
    graded = [chat_text(c) for c in srv.chats() if c["messages"][0].get("content") == SYSTEM]
    assert sorted(graded) == sorted(R.grading_prompt(*R.grading_fields(it), "(a)") for it in bench)
    m = json.loads((tmp_path / "ev" / "report.json").read_text())["models"]["vlm"]
    # the grader says yes where the correct answer is (a): one item of each pair, so no pair is right
    assert (m["metrics"]["overall"]["correct"], m["mmvp"]["pairs_right"], m["mmvp"]["pairs"]) == (6, 0, 6)
    assert "line_pairs" not in m["mmvp"]  # no answers file: MMVP's line count does not apply
