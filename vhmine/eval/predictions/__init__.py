"""Reading a model's answers back: one reader per file layout, chosen by the file's content.

Reads a predictions file and the benchmark it answers (vhmine.bench.Benchmark); writes nothing.
Returns item id -> answer text, and the items whose answer the harness itself recorded as failed.
Layouts (`detect`): vhmine's own (`own`: JSON lines / JSON / CSV / TSV with `id` and `answer`, or a
HallusionBench result file), VLMEvalKit's result file (`vlmevalkit`: `<model>_<dataset>.xlsx`, or
.csv / .tsv / .json, with `index` and `prediction`) and lmms-eval's `--log_samples` file
(`lmms_eval`: `<date>_samples_<task>.jsonl`, one line per doc with `doc_id` and `filtered_resps`) and MMVP's
answers file (`mmvp`: `answer.jsonl`, `question_id`, `prompt`, `answer`, `response`).
The harness readers match rows to items by the ids vhmine's exports wrote (ids.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from vhmine.bench import Benchmark
from vhmine.errors import EvalError
from vhmine.eval.predictions.ids import check_ids
from vhmine.eval.predictions.mmvp import order_breaks


@dataclass
class Predictions:
    answers: dict[str, str]  # item id -> answer text
    harness: str  # which layout the file had: "vhmine", "vlmevalkit", "lmms-eval" or "mmvp"
    failures: dict[str, str] = field(default_factory=dict)  # item id -> "<status>: <why>": the harness got no answer
    lines: list | None = None  # MMVP's answers file: its lines in file order (mmvp.AnswerLine), which its grader pairs


def _head_row(path: Path) -> tuple[bytes, dict]:
    """The file's first bytes, and its first JSON object (a JSON line, or a JSON list's first element) if any."""
    with open(path, "rb") as f:
        head = f.read(65536)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")  # a BOM (Windows editors) is no content
    first: dict = {}
    try:
        if text.startswith("{"):
            first = json.loads(text.splitlines()[0])
        elif text.startswith("[") and path.stat().st_size <= 65536:
            data = json.loads(text)
            first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
        elif text.startswith("["):  # a large JSON list: its first record is enough to tell
            first = json.JSONDecoder().raw_decode(text[1:].lstrip())[0]
    except (ValueError, IndexError):
        first = {}
    return head, first if isinstance(first, dict) else {}


def detect(path: Path) -> str:
    """Which harness wrote `path`, from its content (the name's suffix only says how to parse it)."""
    path = Path(path)
    head, first = _head_row(path)
    if head.startswith(b"PK\x03\x04"):  # a zip: an .xlsx workbook, and only VLMEvalKit writes those here
        return "vlmevalkit"
    if path.suffix.lower() in (".csv", ".tsv"):
        from vhmine.eval.predictions.vlmevalkit import csv_columns

        cols = csv_columns(path)
        return "vlmevalkit" if {"index", "prediction"} <= set(cols) and "id" not in cols else "vhmine"
    if "doc_id" in first and ("filtered_resps" in first or "resps" in first):
        return "lmms-eval"
    if "index" in first and "prediction" in first and "id" not in first:
        return "vlmevalkit"  # VLMEvalKit with PRED_FORMAT=json: the same records as its sheet
    if all(k in first for k in ("question_id", "prompt", "answer", "response")):
        return "mmvp"  # MMVP's answer.jsonl: its `answer` is the CORRECT answer, the model's is `response`
    return "vhmine"


def read_predictions(path: Path, bench: Benchmark) -> Predictions:
    """The answers in `path` (any layout `detect` knows), checked against `bench`'s item ids."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"predictions file {path} does not exist")
    try:
        harness = detect(path)
        if harness == "mmvp":  # the lines themselves too: MMVP's grader formats their values and pairs them in order
            from vhmine.eval.predictions.mmvp import answers_of, read_lines

            lines = read_lines(path, bench)
            return Predictions(answers_of(lines), harness, {}, lines)
        if harness == "vlmevalkit":
            from vhmine.eval.predictions.vlmevalkit import read
        elif harness == "lmms-eval":
            from vhmine.eval.predictions.lmms_eval import read
        else:
            from vhmine.eval.predictions.own import read
        answers, failures = read(path, bench)
    except UnicodeDecodeError as err:  # .jsonl, .csv, .tsv alike (an .xlsx is a zip, never decoded)
        from vhmine.eval.predictions.text import not_utf8

        raise not_utf8(path, err) from None
    answers = check_ids(answers, bench, path)  # vhmine's own files may name POPE items by their bare question_id
    check_ids(failures, bench, path)
    return Predictions(answers, harness, failures)


def load_predictions(path: Path, bench: Benchmark) -> dict[str, str]:
    """item id -> answer text; FormatError naming the file, row and field for anything unreadable."""
    return read_predictions(path, bench).answers


__all__ = ["Predictions", "detect", "read_predictions", "load_predictions", "order_breaks"]
