"""eval's `--rule mmvp`: MMVP's grader (vhmine.rules.mmvp) asked of a judge, its grades turned into scored rows.

Reads a Benchmark and one model's answers, or the lines of MMVP's answers file (vhmine.eval.predictions.mmvp);
writes nothing. `cases` gives what the judge is asked about each item: for a line of MMVP's answers file, the
line's own `prompt`, `answer` and `response` (the values MMVP's grader formats into its prompt); else the item's
question and correct answer (rules.mmvp.grading_fields) and the model's answer. `grade` sends them through a
vhmine.llm.LLM (any OpenAI-compatible endpoint) and yields each grade: right when the reply reads "yes" by MMVP's
parse; a request that failed has none (its item is listed, never scored). `scored_rows` gives the
vhmine.eval.metrics rows, whose pair accuracy over the benchmark's pairs (`pair_id`) is MMVP's figure;
`line_pairs` is MMVP's own count over the file's consecutive lines, the same number whenever those lines are the
benchmark's pairs in order (predictions.mmvp.order_breaks finds where they are not).
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


def cases(bench: Benchmark, answers: dict[str, str], lines: Sequence | None = None) -> list[Case]:
    """One Case per answered item, in benchmark order; `lines` (predictions.mmvp.read_lines): in the file's order,
    with its raw values."""
    if lines is not None:
        return [Case(a.item_id, a.prompt, a.answer, a.response) for a in lines]
    from vhmine.rules.mmvp import grading_fields

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
    from vhmine.rules.mmvp import grading_request, read_grade

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
    from vhmine.rules.mmvp import pair_accuracy

    return pair_accuracy([right.get(c.item_id, False) for c in todo])
