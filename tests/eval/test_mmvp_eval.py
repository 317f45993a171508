"""eval.mmvp and eval.predictions.mmvp: a benchmark exported in MMVP's layout, answered in MMVP's answers file (as its
evaluate_mllm.py writes it), read back and scored by MMVP's rule through a real loopback judge; the pair accuracy
is the one MMVP's gpt_grader.py gives on the same file and judge (its semantics restated below as the reference:
its request, "right iff the reply lower-cased is exactly yes", pairs of consecutive lines)."""

import json

import numpy as np
import pytest
from openai_server import chat_text
from PIL import Image

from vhmine.bench import BenchItem, Benchmark
from vhmine.errors import FormatError
from vhmine.eval import metrics as MT
from vhmine.eval import mmvp as E
from vhmine.eval.predictions import mmvp as P
from vhmine.eval.predictions import read_predictions
from vhmine.formats import mmvp as F
from vhmine.rules import mmvp as R

# what MMVP's grader sends (gpt_grader.py, written out: CI has no copy of MMVP)
SYSTEM = (
    "You are a helpful and precise assistant for checking the quality of the answer. Please answer in only yes or no."
)
# the judge's replies the fake model's answers ask for: MMVP counts only the first three right
REPLIES = ["Yes", "yes", "YES", "Yes.", "Yes\n", " yes", "No", "Yes, it does.", "no"]


@pytest.fixture
def exported(tmp_path):
    """Six mined pairs asked one yes/no question each, exported in MMVP's layout and read back."""
    rng = np.random.default_rng(0)
    items = []
    for p in range(6):
        q = f"Is the mug in picture {p} on the left?"
        for side, truth in (("a", p % 2 == 0), ("b", p % 2 == 1)):
            path = tmp_path / f"{p}{side}.jpg"
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(path)
            items.append(
                BenchItem(
                    f"i{p}{side}",
                    "position",
                    "YNQ",
                    q,
                    ("Yes" if truth else "No",),
                    truth,
                    str(path),
                    f"img{p}{side}",
                    f"pair{p}",
                    {},
                )
            )
    out = tmp_path / "mmvp"
    out.mkdir()
    F.write(Benchmark("mugs", items), out)
    return out, F.read(out)


def _answers_file(folder, path, response):
    """MMVP's answer.jsonl for a model answering `response(k)` on row k, written as evaluate_mllm.py writes it."""
    import pandas as pd

    df = pd.read_csv(folder / "Questions.csv")
    with open(path, "w") as f:
        for index, row in df.iterrows():
            f.write(
                json.dumps(
                    {
                        "question_id": index + 1,
                        "prompt": row["Question"] + " " + row["Options"],
                        "answer": row["Correct Answer"],
                        "response": response(index + 1),
                        "answer_id": f"id{index}",
                        "model_id": "fake-vlm",
                    }
                )
                + "\n"
            )
    return path


def _judge(body):
    """The loopback judge: replies REPLIES[k] to an answer that carries the tag [k]."""
    text = chat_text(body)
    tag = text.rsplit("[", 1)[1].split("]", 1)[0]
    return REPLIES[int(tag)]


def _mmvp_reference(lines, srv):
    """gpt_grader.py's score, restated: each line's prompt sent with MMVP's system message at temperature 0.2 through
    the openai client; a line is right iff the reply lower-cased is exactly "yes" (its regex-then-lower amounts to
    that); pairs are consecutive lines, both right; accuracy = right pairs / pairs."""
    from openai import OpenAI

    client = OpenAI(base_url=srv.base_url, api_key=srv.api_key)
    right = []
    for raw in lines:
        data = json.loads(raw)
        question = (
            f"Given the following question {data['prompt']}, the correct answer is {data['answer']}. Does the "
            f"following answer correctly answers the question, answer:{data['response']}?"
        )
        reply = (
            client.chat.completions.create(
                model="gpt-4-0314",
                temperature=0.2,
                messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
            )
            .choices[0]
            .message.content
        )
        right.append(reply.lower() == "yes")
    pairs = list(zip(right[0::2], right[1::2], strict=False))  # an odd last line: in none
    return sum(a and b for a, b in pairs) / len(pairs)


def _vhmine_score(bench, path, srv, tmp_path):
    from vhmine.llm import LLM, LLMOptions

    lines = P.read_lines(path, bench)
    todo = E.cases(bench, {}, lines)
    with LLM(LLMOptions(model="gpt-4-0314", base_url=srv.base_url, cache=tmp_path / "cache.db", progress=False)) as llm:
        graded = {todo[k].item_id: right for k, _, right, _ in E.grade(llm, "gpt-4-0314", todo)}
    rows = E.scored_rows(bench, graded)
    pairs = MT.group_accuracy(rows, "pair_id", MT.sizes_of(bench.items, "pair_id"))
    return pairs, E.line_pairs(todo, graded), rows


def test_export_answer_and_score_as_mmvps_grader_does(exported, tmp_path, openai_server):
    srv = openai_server
    srv.responder = _judge
    folder, bench = exported
    # rows 1..12: the tags pick the judge's reply; pairs (1,2) yes+yes, (3,4) yes+"Yes.", (5,6) "Yes\n"+YES, ...
    tags = [0, 1, 2, 3, 4, 2, 5, 0, 6, 1, 7, 8]
    path = _answers_file(folder, tmp_path / "answer.jsonl", lambda k: f"(a) Yes [{tags[k - 1]}]")
    reference = _mmvp_reference(path.read_text().splitlines(), srv)
    sent_by_reference = [(c["messages"], c["temperature"], c["model"]) for c in srv.chats()]
    srv.reset()
    srv.responder = _judge
    pairs, (line_right, line_pairs), rows = _vhmine_score(bench, path, srv, tmp_path)
    assert reference == 1 / 6  # only the first pair has two replies MMVP reads as "yes"
    assert (pairs["correct"], pairs["groups"], pairs["accuracy"]) == (1, 6, reference)
    assert (line_right, line_pairs) == (1, 6)
    assert [r.correct for r in rows] == [REPLIES[t] in ("Yes", "yes", "YES") for t in tags]
    # the judge was asked exactly what MMVP's grader asks: its system message, prompt and temperature
    sent = [(c["messages"], c["temperature"], c["model"]) for c in srv.chats()]

    def flat(msgs):  # a message's text, sent as a string (MMVP) or as one text part (vhmine)
        return [
            (m["role"], m["content"] if isinstance(m["content"], str) else "".join(p["text"] for p in m["content"]))
            for m in msgs
        ]

    assert sorted((flat(m), t, mo) for m, t, mo in sent) == sorted((flat(m), t, mo) for m, t, mo in sent_by_reference)
    assert all(t == 0.2 and flat(m)[0] == ("system", SYSTEM) for m, t, _ in sent)


def test_the_answers_file_is_read_as_predictions_of_responses_not_of_the_correct_answers(exported, tmp_path):
    folder, bench = exported
    path = _answers_file(folder, tmp_path / "answer.jsonl", lambda k: f"answer {k}")
    got = read_predictions(path, bench)
    assert got.harness == "mmvp"
    assert got.answers == {it.id: f"answer {k}" for k, it in enumerate(bench, start=1)}
    lines = P.read_lines(path, bench)
    assert [(a.line, a.answer) for a in lines[:2]] == [(1, "(a)"), (2, "(b)")]
    assert lines[0].prompt == "Is the mug in picture 0 on the left? (a) Yes (b) No"
    assert P.order_breaks(lines, bench) == []
    assert [(c.question, c.correct) for c in E.cases(bench, got.answers)][:1] == [(lines[0].prompt, "(a)")]


def test_lines_out_of_order_are_found(exported, tmp_path):
    folder, bench = exported
    path = _answers_file(folder, tmp_path / "a.jsonl", lambda k: "x")
    rows = path.read_text().splitlines()
    path.write_text("\n".join([rows[1], rows[2], rows[0]] + rows[3:]) + "\n")  # MMVP would pair rows 2+3, 1+4
    lines = P.read_lines(path, bench)
    assert P.order_breaks(lines, bench) == [(1, 2), (3, 4)]


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda r: {**r, "answer": "(b)" if r["answer"] == "(a)" else "(a)"},
            r"line 1, field answer: '\(b\)' is not row 1's correct answer '\(a\)'",
        ),
        (lambda r: {**r, "prompt": "Is the sky blue? (a) Yes (b) No"}, "is not item i0a's"),
        (lambda r: {**r, "question_id": 13}, "13 is not a row of the benchmark's 12"),
        (lambda r: {**r, "question_id": "one"}, "'one' is not a row number"),
        (lambda r: {k: v for k, v in r.items() if k != "response"}, "not a line of MMVP's answers file"),
    ],
)
def test_a_file_of_another_benchmark_is_refused_by_line_and_field(exported, tmp_path, edit, message):
    folder, bench = exported
    path = _answers_file(folder, tmp_path / "a.jsonl", lambda k: "x")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[0] = edit(rows[0])
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(FormatError, match=message):
        P.read_lines(path, bench)


def test_a_row_answered_twice_is_refused(exported, tmp_path):
    folder, bench = exported
    path = _answers_file(folder, tmp_path / "a.jsonl", lambda k: "x")
    first = path.read_text().splitlines()[0]
    path.write_text(path.read_text() + first + "\n")
    with pytest.raises(FormatError, match=r"line 13, field question_id: row 1 is answered twice \(first on line 1\)"):
        P.read_lines(path, bench)


def test_a_failed_grade_is_no_grade(exported, tmp_path, openai_server):
    srv = openai_server
    srv.responder = lambda body: "yes"
    srv.refuse = lambda body: "[refuse]" in chat_text(body)
    folder, bench = exported
    path = _answers_file(folder, tmp_path / "a.jsonl", lambda k: "[refuse]" if k == 3 else "(a)")
    from vhmine.llm import LLM, LLMOptions

    todo = E.cases(bench, {}, P.read_lines(path, bench))
    with LLM(LLMOptions(model="j", base_url=srv.base_url, cache=tmp_path / "c.db", progress=False)) as llm:
        got = sorted(E.grade(llm, "j", todo), key=lambda g: g[0])
    assert [(k, right, said) for k, _, right, said in got][1:4] == [(1, True, "yes"), (2, None, None), (3, True, "yes")]
    assert got[2][1].status == "refused"
    assert E.verdict("Yes.", R.read_grade("Yes.")) == {
        "by": "rule:mmvp",
        "reason": "the judge replied 'Yes.', which MMVP's grader reads as 'Could not determine yes or no.' (not right)",
    }
