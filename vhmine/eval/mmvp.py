"""eval's `--rule mmvp`: MMVP's grader (vhmine.rules.mmvp) asked of a judge, its grades turned into scored rows.

Reads a Benchmark and one model's answers, or the lines of MMVP's answers file (vhmine.eval.predictions.mmvp);
writes nothing. `cases` gives what the judge is asked about each item: for a line of MMVP's answers file, the
line's own `prompt`, `answer` and `response` (the values MMVP's grader formats into its prompt); else the item's
question and correct answer (rules.mmvp.grading_fields) and the model's answer. `grade` sends them through a
vhmine.llm.LLM (any OpenAI-compatible endpoint) and yields each grade: right when the reply reads "yes" by MMVP's
parse; a request that failed has none (its item is listed, never scored). `scored_rows` gives the
vhmine.eval.metrics rows, whose pair accuracy over the benchmark's pairs (`pair_id`) is MMVP's figure;
`line_pairs` is MMVP's own count over the file's consecutive lines, the same number whenever those lines are the
benchmark's pairs in order (predictions.mmvp.order_breaks finds where they are not). For eval's run: `check_run`
refuses what MMVP's grader would count otherwise before the judge is asked, `scored` gives the rows and detail
records, `record` report.json's `mmvp` of a model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from vhmine.bench import Benchmark
from vhmine.eval.metrics import Scored


@dataclass(frozen=True)
class Case:
    item_id: str
    question: object  # what the model was shown (MMVP: Question + " " + Options)
    correct: object  # the correct answer as MMVP states it: "(a)"
    response: object  # the model's answer
    line: int | None = None  # its line in MMVP's answers file; None: an answer from elsewhere


def cases(bench: Benchmark, answers: dict[str, str], lines: Sequence | None = None) -> list[Case]:
    """One Case per answered item, in benchmark order; `lines` (predictions.mmvp.read_lines): in the file's order,
    with its raw values."""
    if lines is not None:
        return [Case(a.item_id, a.prompt, a.answer, a.response, a.line) for a in lines]
    from vhmine.rules import grading_fields

    out = []
    for it in bench:
        if it.id in answers:
            question, correct = grading_fields(it)
            out.append(Case(it.id, question, correct, answers[it.id]))
    return out


def grade(
    llm, model: str, todo: Sequence[Case], desc: str | None = None
) -> Iterator[tuple[int, object, bool | None, str | None]]:
    """Ask `model` through `llm` (a vhmine.llm.LLM) to grade each case with MMVP's prompt. Yields (case index, the
    request's Outcome, right, MMVP's reading of the reply) as answers arrive; right and reading are None when the
    request failed."""
    from vhmine.rules import grading_request, read_grade

    reqs = [grading_request(model, c.question, c.correct, c.response) for c in todo]
    for out in llm.chat_iter(reqs, desc=desc or f"mmvp grader {model}"):
        if not out.ok:
            yield out.index, out, None, None
            continue
        said = read_grade(out.answer.text)
        yield out.index, out, said == "yes", said


def verdict(reply: str, said: str) -> dict:
    """The detail record's `verdict` of one graded answer: who decided (rule:mmvp and the judge) and why."""
    return {
        "by": "rule:mmvp",
        "reason": f"the judge replied {reply[:60]!r}, which MMVP's grader reads as {said!r}"
        + ("" if said == "yes" else " (not right)"),
    }


def scored_rows(bench: Benchmark, right: dict[str, bool]) -> list[Scored]:
    """The graded items as metrics rows (benchmark order): `said` stays None, as MMVP reads no yes or no from the
    model's answer, so eval leaves the yes/no measures out under this rule."""
    return [
        Scored(it.id, it.mode, it.kind, right[it.id], None, it.truth, it.pair_id, it.image_id, it.meta, it.group_id)
        for it in bench
        if it.id in right
    ]


def line_pairs(todo: Sequence[Case], right: dict[str, bool]) -> tuple[int, int]:
    """(pairs right, pairs) as gpt_grader.py counts them over the cases in order (rules.mmvp.pair_accuracy); a case
    without a grade (its request failed) counts as not right, as it cannot count as MMVP's "yes"."""
    from vhmine.rules import pair_accuracy

    return pair_accuracy([right.get(c.item_id, False) for c in todo])


def check_run(bench: Benchmark, ans, partial: bool) -> list[tuple[int, int]]:
    """Before the judge is asked: EvalError for items with no answer (unless `partial`, as eval.score), and for an
    MMVP answers file whose consecutive lines are not the benchmark's pairs (MMVP's grader would count other pairs
    than vhmine) unless `partial`, where both counts are reported. Returns those breaks ((line, line) pairs)."""
    from vhmine.errors import EvalError
    from vhmine.eval.predictions import order_breaks

    missing = [it.id for it in bench if it.id not in ans.answers and it.id not in ans.failures]
    if missing and not partial:
        raise EvalError(
            f"{len(missing)} of {len(bench)} items have no answer from {ans.model} in {ans.source} "
            f"(first: {missing[0]}): pass --partial to score only the answered ones"
        )
    breaks = order_breaks(ans.lines, bench) if ans.lines is not None else []
    if breaks and not partial:
        (x, y), n = breaks[0], len(breaks)
        raise EvalError(
            f"{ans.model}: lines {x} and {y} of {ans.source.removeprefix('predictions:')} are not one of the "
            f"benchmark's pairs ({n} such line pair(s)): MMVP's gpt_grader.py pairs consecutive lines, so it would "
            "count other pairs than the benchmark's. Put the file in Questions.csv's row order (sort its lines by "
            "question_id, as evaluate_mllm.py writes them), or pass --partial to score the benchmark's pairs and "
            "report MMVP's count over the lines beside"
        )
    return breaks


def scored(bench: Benchmark, ans, grades: dict[str, tuple]) -> tuple[list[Scored], list[dict]]:
    """The metrics rows and the detail records (eval's answers-<model>.jsonl) of the graded items, benchmark order;
    an item whose answer or grade failed is listed, never scored. `grades`: item id -> (right, reply, reading)."""
    details = []
    for it in bench:
        base = {"id": it.id, "mode": it.mode, "kind": it.kind, "question": it.question, "reference": it.reference()}
        if it.id in ans.failures:
            why = ans.failures[it.id]
            details.append(
                {
                    **base,
                    "answer": ans.answers.get(it.id),
                    "read_as": "failed",
                    "correct": None,
                    "failure": why,
                    "verdict": {"by": "none", "reason": f"not scored: {why}"},
                }
            )
        elif it.id in grades:
            right, reply, said = grades[it.id]
            details.append(
                {
                    **base,
                    "answer": ans.answers[it.id],
                    "read_as": "right" if right else "wrong",
                    "correct": right,
                    "verdict": verdict(reply, said),
                }
            )
    return scored_rows(bench, {i: g[0] for i, g in grades.items()}), details


def record(todo: Sequence[Case], grades: dict[str, tuple], pair_summary: dict, breaks: list) -> dict:
    """report.json's `mmvp` of one model: its pair accuracy over the benchmark's pairs (what MMVP reports, from
    metrics), and for an MMVP answers file MMVP's own count over the file's consecutive lines and where those are
    not the benchmark's pairs."""
    out = {
        "pairs_right": pair_summary["correct"],
        "pairs": pair_summary["groups"],
        "pair_accuracy": pair_summary["accuracy"],
    }
    if todo and any(c.line is not None for c in todo):
        right, pairs = line_pairs(todo, {i: g[0] for i, g in grades.items()})
        out.update({"line_pairs": [right, pairs], "order_breaks": [list(b) for b in breaks]})
    return out
