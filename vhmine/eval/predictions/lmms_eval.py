"""lmms-eval's `--log_samples` file: `<output>/<model>/<date>_samples_<task>.jsonl`, one line per doc.

Reads the lines lmms-eval (0.7.x, loggers/evaluation_tracker.py save_results_samples) writes: `doc_id`,
`target`, `input` (the prompt shown), `filtered_resps` (the answer after the task's filters; one
request per doc is flattened to its value), `resps` (dropped when equal), hashes, token counts and
each metric process_results returned; 0.7 drops `doc` and `arguments`. Writes nothing.
A line's item: `doc.id` where a logger kept the doc, else an `id` inside a metric's value (vhmine's
process_results puts it there, as lmms-eval's POPE task does with question_id), else the export's rule:
`doc_id` k is the k-th item of the task's kind (ids.py), its `input` checked to hold the item's question.
"""

from __future__ import annotations

from pathlib import Path

from vhmine.bench import Benchmark
from vhmine.errors import FormatError
from vhmine.eval.predictions.ids import check_question, items_of_kind, kind_in_name
from vhmine.eval.predictions.text import json_lines


def task_name(path: Path) -> str:
    """`vhmine_ynq` from `20250101_120000_samples_vhmine_ynq.jsonl` (or the stem, if not so named)."""
    stem = path.stem
    return stem.split("_samples_", 1)[1] if "_samples_" in stem else stem.removeprefix("samples_")


def _answer(value) -> str:
    """filtered_resps as text: a flattened single response, or the first of a list (nested per request)."""
    while isinstance(value, list):
        if not value:
            return ""
        value = value[0]
    return "" if value is None else str(value)


def _carried_id(rec: dict) -> str | None:
    doc = rec.get("doc")
    if isinstance(doc, dict) and doc.get("id") is not None:
        return str(doc["id"])
    for value in rec.values():  # the metrics process_results returned, each {"id": ..., ...}
        if isinstance(value, dict) and value.get("id") is not None:
            return str(value["id"])
    return None


def read(path: Path, bench: Benchmark) -> tuple[dict[str, str], dict[str, str]]:
    task = task_name(path)
    answers: dict[str, str] = {}
    by_position = None
    ids = bench.by_id()
    for _, where, rec in json_lines(path, "an lmms-eval --log_samples file"):
        if not isinstance(rec, dict) or "doc_id" not in rec or not ("filtered_resps" in rec or "resps" in rec):
            raise FormatError(
                f"{where}: not an lmms-eval sample (expected doc_id and filtered_resps, as "
                "lmms-eval --log_samples writes)"
            )
        iid = _carried_id(rec)
        if iid is None:
            if by_position is None:
                kind = kind_in_name(task, bench)
                if kind is None:
                    raise FormatError(
                        f"{path}: the samples carry no item id and the task name {task!r} does not "
                        "say its kind (ynq or oeq): run the task vhmine's lmms-eval export wrote"
                    )
                by_position = items_of_kind(bench, kind)
            doc_id = rec["doc_id"]
            if not isinstance(doc_id, int) or not 0 <= doc_id < len(by_position):
                raise FormatError(
                    f"{where}, field doc_id: {doc_id!r} is not a doc of the benchmark's "
                    f"{len(by_position)} items of task {task}: is it the right benchmark?"
                )
            item = by_position[doc_id]
            check_question(item, rec.get("input") if isinstance(rec.get("input"), str) else None, where)
            iid = item.id
        elif iid not in ids:
            raise FormatError(
                f"{where}: item id {iid!r} is not in the benchmark {bench.source or bench.name}: "
                "is it the right benchmark?"
            )
        if iid in answers:
            raise FormatError(f"{where}, field doc_id: item {iid!r} appears twice")
        answers[iid] = _answer(rec.get("filtered_resps", rec.get("resps")))
    return answers, {}
