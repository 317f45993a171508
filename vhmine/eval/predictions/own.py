"""vhmine's own predictions files: one answer per item id.

Reads JSON lines, a JSON list of objects or an {id: answer} object, CSV or TSV, each with an id
(`id`, `question_id` or `index`) and an answer (`answer`, `prediction`, `model_prediction`,
`response` or `text`), or a HallusionBench result file (its records with `model_prediction`);
writes nothing. FormatError names the file, row and field of anything unreadable.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from vhmine.bench import Benchmark
from vhmine.errors import FormatError
from vhmine.eval.predictions.ids import aliases, canonical_id
from vhmine.eval.predictions.text import ENCODING, loads

ID_FIELDS = ("id", "question_id", "index")
ANSWER_FIELDS = ("answer", "prediction", "model_prediction", "response", "text")


def _pick(rec: dict, names: Sequence[str]):
    for n in names:
        if n in rec:
            return rec[n]
    return None


def read(path: Path, bench: Benchmark) -> tuple[dict[str, str], dict[str, str]]:
    """(item id -> answer, no failures): a vhmine file records answers only."""
    suffix = path.suffix.lower()
    rows: list[tuple[str, dict]] = []
    if suffix in (".csv", ".tsv"):
        with open(path, newline="", encoding=ENCODING) as f:
            rd = csv.DictReader(f, delimiter="\t" if suffix == ".tsv" else ",")
            rows = [(f"{path}, row {n}", r) for n, r in enumerate(rd, start=2)]
    else:
        text = path.read_text(encoding=ENCODING)
        head = text.lstrip()[:1]
        if head == "[" or (head == "{" and suffix == ".json" and "\n{" not in text.strip()):
            try:
                data = loads(text, str(path))  # an {id: answer} object holding an id twice is refused
            except FormatError:
                raise
            except ValueError as err:
                raise FormatError(f"{path}: not JSON ({err})") from None
            if (
                isinstance(data, list)
                and data
                and isinstance(data[0], dict)
                and "model_prediction" in data[0]
                and "category" in data[0]
            ):
                from vhmine.formats import load_module

                read_predictions = load_module("hallusionbench").read_predictions

                return read_predictions(path), {}
            if isinstance(data, dict):
                return {str(k): "" if v is None else str(v) for k, v in data.items()}, {}
            if not isinstance(data, list):
                raise FormatError(f"{path}: expected a list of {{id, answer}} objects or an {{id: answer}} object")
            rows = [(f"{path}, row {n}", r) for n, r in enumerate(data)]
        else:
            for n, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append((f"{path}, line {n}", loads(line, f"{path}, line {n}")))
                    except FormatError:
                        raise
                    except ValueError as err:
                        raise FormatError(f"{path}, line {n}: not JSON ({err.args[0]})") from None
    preds: dict[str, str] = {}
    ids, alias = bench.by_id(), aliases(bench)
    first: dict[str, str] = {}  # item id -> where its answer was read, and as which id
    for where, r in rows:
        if not isinstance(r, dict):
            raise FormatError(f"{where}: not an object with id and answer")
        rid, ans = _pick(r, ID_FIELDS), _pick(r, ANSWER_FIELDS)
        if rid is None:
            raise FormatError(f"{where}, field id: missing (one of {', '.join(ID_FIELDS)})")
        if ans is None and not any(a in r for a in ANSWER_FIELDS):
            raise FormatError(f"{where}, field answer: missing (one of {', '.join(ANSWER_FIELDS)})")
        rid = str(rid)
        iid = canonical_id(rid, ids, alias)  # `1` and `pope_test:1` are one item: two answers to it are refused
        if iid in preds:
            seen_at, seen_as = first[iid]
            said = f"{rid!r} appears twice" if seen_as == rid else f"{rid!r} is item {iid!r}, answered as {seen_as!r}"
            raise FormatError(f"{where}, field id: {said} (first at {seen_at}): give each item's answer once")
        preds[iid] = "" if ans is None else str(ans)
        first[iid] = (where, rid)
    return preds, {}
