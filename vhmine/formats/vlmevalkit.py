"""VLMEvalKit's TSV layout, usable as a custom local dataset.

Writes (and reads back) `<name>_<kind>.tsv` per instance kind, columns `index` (a row number, as
VLMEvalKit wants an integer; the stable id is in `vhmine_id`), `image` (base64 of the file),
`question`, `answer` ("Yes"/"No" for YNQ, the reference answers joined by " or " for OEQ) and
`category` (the mode), plus `vhmine_item` (JSON) for a lossless round trip. Images come back as
bytes carried by the items (`BenchItem.image_data`); the reader opens no image path a file names.
"""

from __future__ import annotations

import base64
import binascii
import csv
import json
import sys
from pathlib import Path

from ..bench import OEQ, YNQ, BenchItem, Benchmark, question_key
from ..errors import FormatError
from . import item_extras, item_from_extras

COLUMNS = ("index", "image", "question", "answer", "category")


def _name(bench: Benchmark) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in bench.name) or "vhmine"


def write(bench: Benchmark, folder: Path) -> None:
    for kind in bench.kinds():
        items = [it for it in bench if it.kind == kind]
        with open(folder / f"{_name(bench)}_{kind}.tsv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            w.writerow(COLUMNS + ("vhmine_id", "vhmine_item"))
            for k, it in enumerate(items):
                img = base64.b64encode(bench.image_bytes(it)).decode("ascii") if (it.image or it.image_data) else ""
                answer = ("Yes" if it.truth else "No") if kind == YNQ else " or ".join(it.answers)
                w.writerow([k, img, it.question, answer, it.mode, it.id,
                            json.dumps(item_extras(it), ensure_ascii=False, sort_keys=True)])


def read(path: Path) -> Benchmark:
    path = Path(path)
    files = sorted(path.glob("*.tsv")) if path.is_dir() else [path]
    if not files:
        raise FormatError(f"{path}: no .tsv file")
    csv.field_size_limit(sys.maxsize)  # base64 images are far longer than csv's default limit
    items: list[BenchItem] = []
    for tsv in files:
        with open(tsv, newline="", encoding="utf-8") as f:
            rd = csv.DictReader(f, delimiter="\t")
            missing = [c for c in ("index", "question", "answer") if c not in (rd.fieldnames or [])]
            if missing:
                raise FormatError(f"{tsv}: no column {missing[0]!r} (VLMEvalKit needs {', '.join(COLUMNS)})")
            for n, row in enumerate(rd, start=2):
                where = f"{tsv}, row {n}"
                data = None
                if row.get("image"):
                    try:
                        data = base64.b64decode(row["image"], validate=True)
                    except (binascii.Error, ValueError):
                        raise FormatError(f"{where}, field image: not base64 (VLMEvalKit's row references to other "
                                          "rows' images are not supported)") from None
                if row.get("vhmine_item"):
                    try:
                        e = json.loads(row["vhmine_item"])
                    except ValueError as err:
                        raise FormatError(f"{where}, field vhmine_item: not a vhmine item ({err})") from None
                    items.append(item_from_extras(e, row["question"], None, f"{where}, field vhmine_item", data))
                    continue
                ans = (row.get("answer") or "").strip()
                yn = ans.lower() in ("yes", "no")
                kind = YNQ if yn else OEQ
                if not row.get("question"):
                    raise FormatError(f"{where}, field question: empty question")
                items.append(BenchItem(f"{tsv.stem}:{row['index']}", row.get("category") or tsv.stem, kind, row["question"],
                                       (ans,), (ans.lower() == "yes") if yn else None, None,
                                       question_key(row["image"]) if row.get("image") else None, None,
                                       {"source": "vlmevalkit", "file": tsv.name, "index": row["index"]}, data))
    return Benchmark(path.stem, items, path if path.is_dir() else path.parent, str(path))
