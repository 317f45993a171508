"""MMVP's answers file (`answer.jsonl`, its scripts/evaluate_mllm.py): one JSON line per row of Questions.csv.

Reads the lines MMVP writes: `question_id` (the row's position + 1), `prompt` (the row's Question + " " + Options),
`answer` (its Correct Answer) and `response` (the model's answer); `answer_id` and `model_id` are not read. Writes
nothing. A line's item is the benchmark's `question_id`-th (an MMVP folder's rows in order, vhmine.formats.mmvp),
checked: the item's question must be in the line's `prompt` and its correct answer must be the line's `answer`
(vhmine.rules.mmvp.grading_fields), so a file of another benchmark, or of another version of it, is never scored
by position. `read_lines` keeps the lines in file order with their raw values: MMVP's grader formats those into
its prompt and pairs consecutive lines. `read` gives item id -> response for the predictions registry (a null
response is "", `answers_of`). `order_breaks` finds consecutive lines that are not one of the benchmark's pairs,
where MMVP's grader (pairs of lines) and vhmine (pairs of items) would count different pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vhmine.bench import Benchmark
from vhmine.errors import FormatError
from vhmine.eval.predictions.ids import check_question
from vhmine.eval.predictions.text import json_lines

FIELDS = ("question_id", "prompt", "answer", "response")


@dataclass(frozen=True)
class AnswerLine:
    line: int  # the file's line number
    item_id: str
    prompt: object  # the raw JSON values, as MMVP's grader formats them
    answer: object
    response: object


def is_mmvp(record: dict) -> bool:
    """A JSON record of MMVP's answers file: it has every field evaluate_mllm.py writes that the grader reads."""
    return all(f in record for f in FIELDS)


def _position(value, where: str, size: int) -> int:
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        raise FormatError(
            f"{where}, field question_id: {value!r} is not a row number (MMVP writes the row's position + 1)"
        )
    k = int(value)
    if not 1 <= k <= size:
        raise FormatError(
            f"{where}, field question_id: {k} is not a row of the benchmark's {size}: is it the right benchmark?"
        )
    return k


def read_lines(path: Path, bench: Benchmark) -> list[AnswerLine]:
    from vhmine.rules import grading_fields

    path = Path(path)
    out: list[AnswerLine] = []
    seen: dict[int, int] = {}
    for n, where, rec in json_lines(path, "MMVP's answers file"):
        if not isinstance(rec, dict) or not is_mmvp(rec):
            have = ", ".join(rec) if isinstance(rec, dict) else type(rec).__name__
            raise FormatError(
                f"{where}: not a line of MMVP's answers file (expected {', '.join(FIELDS)}; it has {have})"
            )
        k = _position(rec["question_id"], where, len(bench))
        if k in seen:
            raise FormatError(f"{where}, field question_id: row {k} is answered twice (first on line {seen[k]})")
        seen[k] = n
        item = bench.items[k - 1]
        check_question(item, str(rec["prompt"]), where)
        correct = grading_fields(item)[1]
        if str(rec["answer"]) != correct:
            raise FormatError(
                f"{where}, field answer: {rec['answer']!r} is not row {k}'s correct answer "
                f"{correct!r}: the file was made from another version of Questions.csv; pass the "
                "benchmark the model was run on"
            )
        out.append(AnswerLine(n, item.id, rec["prompt"], rec["answer"], rec["response"]))
    return out


def answers_of(lines: list[AnswerLine]) -> dict[str, str]:
    """item id -> the model's response (a null response is "")."""
    return {a.item_id: "" if a.response is None else str(a.response) for a in lines}


def read(path: Path, bench: Benchmark) -> tuple[dict[str, str], dict[str, str]]:
    """(item id -> response, no failures): MMVP's file records answers only."""
    return answers_of(read_lines(path, bench)), {}


def order_breaks(lines: list[AnswerLine], bench: Benchmark) -> list[tuple[int, int]]:
    """The (line, line) pairs MMVP's grader would form (lines 2k-1 and 2k of the file, an odd last one in none)
    whose items are not a pair of the benchmark (one `pair_id`): [] when both count the same pairs."""
    pair = {it.id: it.pair_id for it in bench}
    breaks = []
    for k in range(len(lines) // 2):
        x, y = lines[2 * k], lines[2 * k + 1]
        if pair.get(x.item_id) is None or pair.get(x.item_id) != pair.get(y.item_id):
            breaks.append((x.line, y.line))
    return breaks
