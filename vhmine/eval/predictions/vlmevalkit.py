"""VLMEvalKit's result files: `<model>_<dataset>.xlsx` (its default), or .csv / .tsv / .json (PRED_FORMAT).

Reads the table VLMEvalKit's inference writes (vlmeval/inference.py: the dataset's TSV without its
image column, plus `prediction`), through pandas as VLMEvalKit's own `load` does; writes nothing.
A row's item: its `vhmine_id` column (vhmine's export keeps the item id there), else an `index` that
is an item id, else an imported VLMEvalKit benchmark's `<dataset>:<index>`, else the export's rule:
`index` k is the k-th item of the dataset's kind (ids.py), its `question` checked against the item's.
A prediction holding VLMEvalKit's FAIL_MSG ("Failed to obtain answer") is a failure, never scored.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from vhmine.bench import Benchmark
from vhmine.errors import FormatError
from vhmine.eval.predictions.ids import check_question, items_of_kind, kind_in_name
from vhmine.eval.predictions.text import ENCODING, loads

FAIL_MSG = "Failed to obtain answer"  # vlmeval/constant.py; API wrappers append " via API."
NEEDED = ("index", "prediction")


def csv_columns(path: Path) -> list[str]:
    with open(path, newline="", encoding=ENCODING) as f:
        return next(csv.reader(f, delimiter="\t" if path.suffix.lower() == ".tsv" else ","), [])


def _cell(v) -> str:
    """A cell as text: empty for a blank cell, `3` (not `3.0`) for a whole number a sheet stored as float."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _table(path: Path) -> list[dict]:
    import pandas as pd

    suffix = path.suffix.lower()
    try:
        if suffix in (".csv", ".tsv"):  # every cell as written: a model that answered "None" said None, not NaN
            df = pd.read_csv(
                path, sep="\t" if suffix == ".tsv" else ",", dtype=str, keep_default_na=False, encoding=ENCODING
            )
        elif suffix == ".json":
            data = loads(path.read_text(encoding=ENCODING), str(path))
            if not (isinstance(data, list) and all(isinstance(r, dict) for r in data)):
                raise FormatError(f"{path}: read as VLMEvalKit's result file, but it is not a list of records")
            return data
        else:  # as written here too: pandas' default NA spellings ("None", "N/A", "nan") are answers a model gave
            df = pd.read_excel(path, dtype=object, keep_default_na=False)
    except ImportError as err:
        raise FormatError(
            f"{path}: reading VLMEvalKit's .xlsx result files needs openpyxl ({err}): pip install openpyxl"
        ) from None
    except ValueError as err:
        raise FormatError(f"{path}: not a VLMEvalKit result file VLMEvalKit could have written ({err})") from None
    return df.to_dict("records")


def read(path: Path, bench: Benchmark) -> tuple[dict[str, str], dict[str, str]]:
    rows = _table(path)
    cols = set(rows[0]) if rows else set()
    missing = [c for c in NEEDED if c not in cols]
    if missing:
        raise FormatError(
            f"{path}: read as VLMEvalKit's result file (<model>_<dataset>.xlsx), but it has no column "
            f"{missing[0]!r} (it has: {', '.join(sorted(map(str, cols))) or 'no rows'}): pass the file "
            "VLMEvalKit's run.py wrote, with index and prediction"
        )
    ids = bench.by_id()
    imported = {}  # an imported VLMEvalKit benchmark: (its TSV's stem, index) -> item id
    for it in bench:
        if it.meta.get("source") == "vlmevalkit" and it.meta.get("file"):
            imported[(Path(it.meta["file"]).stem, str(it.meta.get("index")))] = it.id
    stems = {s for s, _ in imported if path.stem.endswith("_" + s) or path.stem == s}
    answers: dict[str, str] = {}
    failures: dict[str, str] = {}
    by_position = None
    for n, row in enumerate(rows, start=2):  # row 1 is the header, as a spreadsheet numbers them
        where = f"{path}, row {n}"
        index = _cell(row.get("index"))
        iid = _cell(row.get("vhmine_id"))
        if not iid and index in ids:
            iid = index
        if not iid and stems:
            iid = next((imported[(s, index)] for s in stems if (s, index) in imported), "")
        if not iid:
            if by_position is None:
                kind = kind_in_name(path.stem, bench)
                if kind is None:
                    raise FormatError(
                        f"{where}: no vhmine_id column, and the file name {path.name!r} does not say which "
                        "kind's TSV (_YNQ or _OEQ) the index counts: keep VLMEvalKit's name "
                        "<model>_<dataset>.xlsx, or the vhmine_id column"
                    )
                by_position = items_of_kind(bench, kind)
            if not index.isdigit() or int(index) >= len(by_position):
                raise FormatError(
                    f"{where}, field index: {index!r} is not a row of the benchmark's {len(by_position)} "
                    f"{by_position[0].kind if by_position else ''} items: is it the right benchmark?"
                )
            item = by_position[int(index)]
            check_question(item, _cell(row.get("question")), where)
            iid = item.id
        if iid in answers or iid in failures:
            raise FormatError(f"{where}, field index: item {iid!r} appears twice")
        pred = _cell(row.get("prediction"))
        if FAIL_MSG in pred:
            failures[iid] = f"failed: VLMEvalKit recorded no answer ({pred.strip()[:60]!r})"
        else:
            answers[iid] = pred
    return answers, failures
