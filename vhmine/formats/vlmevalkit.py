"""VLMEvalKit's TSV layout, with a file that registers it as a VLMEvalKit dataset.

Writes (and reads back) `<name>_<kind>.tsv` per instance kind, columns `index` (a row number, as
VLMEvalKit wants an integer; the stable id is in `vhmine_id`), `image` (base64 of the file, each image
once: a later row with the same image holds the first row's `index`, VLMEvalKit's own rule for an image
value of 64 characters or fewer), `question`, `answer` (exactly "Yes"/"No" for YNQ, which VLMEvalKit's
yes/no scoring compares with; the reference answers joined by " or " for OEQ) and `category` (the
mode), plus `group_id` (the pair group: scored whole by `vhmine eval`; empty outside one) and `vhmine_item`
(JSON) for a lossless round trip. Beside them: `vhmine_vlmevalkit.py`
(vlmevalkit_register: the datasets as VLMEvalKit classes, local path and md5) and `README.md` (how to
run it). Images come back as bytes carried by the items (`BenchItem.image_data`); the reader resolves
index references as VLMEvalKit does and opens no image path a file names.
"""

from __future__ import annotations

import base64
import binascii
import csv
import json
import sys
from pathlib import Path

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark, question_key
from vhmine.errors import FormatError
from vhmine.formats import ENCODING, item_extras, item_from_extras

COLUMNS = ("index", "image", "question", "answer", "category")


def _name(bench: Benchmark) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in bench.name) or "vhmine"


INDEX_REF_MAX = 64  # VLMEvalKit (ImageBaseDataset.__init__): an image value this short names another row's index


def write(bench: Benchmark, folder: Path, rule: str = "vhtest") -> None:
    """The TSVs, the registration file and the README; `rule`: how the registered yes/no dataset reads answers
    (vhtest, as `vhmine eval` does by default, or vlmevalkit)."""
    from vhmine.formats.vlmevalkit_register import _check_rule, write_readme, write_registration

    _check_rule(rule)

    tsvs = {}
    for kind in bench.kinds():
        items = [it for it in bench if it.kind == kind]
        tsv = folder / f"{_name(bench)}_{kind}.tsv"
        first: dict[str, int] = {}  # base64 of an image -> the index of the first row that holds it
        with open(tsv, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n")
            w.writerow(COLUMNS + ("vhmine_id", "group_id", "vhmine_item"))
            for k, it in enumerate(items):
                img = base64.b64encode(bench.image_bytes(it)).decode("ascii") if (it.image or it.image_data) else ""
                if img and len(img) <= INDEX_REF_MAX:
                    raise FormatError(
                        f"image of item {it.id} is {len(img)} base64 characters: VLMEvalKit reads a value "
                        f"of {INDEX_REF_MAX} or fewer as a row index; use a larger image file"
                    )
                if img in first:
                    img = str(first[img])
                elif img:
                    first[img] = k
                answer = ("Yes" if it.truth else "No") if kind == YNQ else " or ".join(it.answers)
                w.writerow(
                    [
                        k,
                        img,
                        it.question,
                        answer,
                        it.mode,
                        it.id,
                        it.group_id or "",
                        json.dumps(item_extras(it), ensure_ascii=False, sort_keys=True),
                    ]
                )
        tsvs[kind] = tsv
    write_registration(folder, tsvs, rule)
    write_readme(folder, bench, tsvs, rule)


def next_steps(out: str, bench: Benchmark) -> list[str]:
    """How to run the folder in VLMEvalKit and score its result files with vhmine (the export's closing lines)."""
    from vhmine.formats.vlmevalkit_register import FILE

    names = [f"{_name(bench)}_{kind}" for kind in bench.kinds()]
    preds = " ".join(f"--predictions MODEL={out}/outputs/MODEL/MODEL_{n}.xlsx" for n in names)
    return [
        f"run it in VLMEvalKit (git clone https://github.com/open-compass/VLMEvalKit && pip install -e VLMEvalKit): "
        f"(cd {out} && python {FILE} --data {' '.join(names)} --model MODEL)",
        f"then score its answers with vhmine's rules: vhmine eval --bench {out} {preds}",
    ]


def resolve_images(rows: list[dict], where: str) -> list[str]:
    """Each row's image base64, VLMEvalKit's way: a value of 1 to 64 characters is the index of a row whose
    image (over 64 characters) it shares; FormatError naming the row when that row is missing or is a reference."""
    by_index = {str(r.get("index")): (r.get("image") or "") for r in rows}
    out = []
    for n, r in enumerate(rows, start=2):
        img = r.get("image") or ""
        if 0 < len(img) <= INDEX_REF_MAX:
            if img not in by_index or len(by_index[img]) <= INDEX_REF_MAX:
                raise FormatError(
                    f"{where}, row {n}, field image: {img!r} is a reference to the image of row index {img}, "
                    "and no row with that index holds an image"
                )
            img = by_index[img]
        out.append(img)
    return out


def read(path: Path) -> Benchmark:
    path = Path(path)
    files = sorted(path.glob("*.tsv")) if path.is_dir() else [path]
    if not files:
        raise FormatError(f"{path}: no .tsv file")
    csv.field_size_limit(sys.maxsize)  # base64 images are far longer than csv's default limit
    items: list[BenchItem] = []
    for tsv in files:
        with open(tsv, newline="", encoding=ENCODING) as f:
            rd = csv.DictReader(f, delimiter="\t")
            missing = [c for c in ("index", "question", "answer") if c not in (rd.fieldnames or [])]
            if missing:
                raise FormatError(f"{tsv}: no column {missing[0]!r} (VLMEvalKit needs {', '.join(COLUMNS)})")
            rows = list(rd)
            images = resolve_images(rows, str(tsv))
            for n, (row, image) in enumerate(zip(rows, images), start=2):
                where = f"{tsv}, row {n}"
                data = None
                if image:
                    try:
                        data = base64.b64decode(image, validate=True)
                    except (binascii.Error, ValueError):
                        raise FormatError(f"{where}, field image: not base64") from None
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
                items.append(
                    BenchItem(
                        f"{tsv.stem}:{row['index']}",
                        row.get("category") or tsv.stem,
                        kind,
                        row["question"],
                        (ans,),
                        (ans.lower() == "yes") if yn else None,
                        None,
                        question_key(image) if image else None,
                        None,
                        {"source": "vlmevalkit", "file": tsv.name, "index": row["index"]},
                        data,
                    )
                )
    return Benchmark(path.stem, items, path if path.is_dir() else path.parent, str(path))
