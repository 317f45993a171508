"""Croissant record sets for each benchmark format: how the items of an export's files are read.

Reads the export folder's file names (and, for JSON, one row to see which fields every row has); writes
nothing. `describe(fmt, folder, bench)` returns the FileSets the record sets read beside the FileObjects
(vhmine.export.croissant lists every file with its sha256), the record sets, and a note on what Croissant
cannot describe. What works with mlcroissant 1.1.1 (each checked by tests/export/test_croissant.py):

- parquet with embedded images (hf, lmms-eval): the image field reads the struct's `bytes` (`transform:
  jsonPath bytes`), one record set per file (Croissant 1.0 selects files, not rows);
- JSON lines / JSON with an `images/` folder (pope, llava, hallusionbench): a `<file>_rows` record set reads
  the rows as they are, `<file>` takes its fields from them and joins each row's image path with the
  `images` record set (the image files' paths and content). The indirection is needed: mlcroissant reads a
  FileSet with every field that depends on it, and a JSON file's jsonPath fields cannot be read that way;
- VLMEvalKit's TSV: text fields only. Its `image` is base64, or the index of the row holding the same image,
  and Croissant has no base64 transform: the image stays text;
- VHTest's .xlsx sheets: Croissant has no spreadsheet reader; the images are described, the sheets listed;
- MMVP's Questions.csv: its columns as they are, and the images apart (row k's image is `MMVP Images/<k>.jpg`, a
  path no Croissant 1.0 transform builds from the row).
"""

from __future__ import annotations

import json
from pathlib import Path

from vhmine.bench import OEQ, YNQ, Benchmark

IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".webp": "image/webp"}

# the item fields every described record set offers: name -> (Croissant type, description)
ITEM_FIELDS = {
    "id": ("sc:Text", "Stable item id (the curation store's instance id)."),
    "question": ("sc:Text", "The question asked about the image."),
    "answers": ("sc:Text", "Acceptable reference answers, best first (repeated; open questions)."),
    "truth": ("sc:Boolean", "The correct answer of a yes/no question (null for open questions)."),
    "mode": ("sc:Text", "The hallucination mode (VHTest's category)."),
    "kind": ("sc:Text", "OEQ (open-ended) or YNQ (yes/no)."),
    "group_id": (
        "sc:Text",
        (
            "Pair group: the questions asked of both images of a pair whose answers differ by image "
            "(null outside one); score a group whole."
        ),
    ),
    "image_id": ("sc:Text", "Items on the same picture share it."),
    "pair_id": ("sc:Text", "Items asking the same question of a mined pair's two images share it."),
}


def _field(
    rs: str, name: str, dtype: str, desc: str, source: dict, *, repeated: bool = False, refs: str | None = None
) -> dict:
    f = {
        "@type": "cr:Field",
        "@id": f"{rs}/{name}",
        "name": name,
        "description": desc,
        "dataType": dtype,
        "source": source,
    }
    if repeated:
        f["repeated"] = True  # Croissant 1.0's list-valued field
    if refs:
        f["references"] = {"field": {"@id": refs}}
    return f


def _from_file(file_id: str, extract: dict, transform: dict | None = None) -> dict:
    src = {"fileObject": {"@id": file_id}, "extract": extract}
    if transform:
        src["transform"] = transform
    return src


def _record_set(rs: str, desc: str, fields: list, key: str | None = "id") -> dict:
    out = {"@type": "cr:RecordSet", "@id": rs, "name": rs, "description": desc, "field": fields}
    if key:
        out["key"] = {"@id": f"{rs}/{key}"}
    return out


# --- parquet with embedded images (hf, lmms-eval) -----------------------------------------------------


def _parquet(rel: str, rs: str) -> dict:
    col = lambda n, rel=rel: _from_file(rel, {"column": n})  # noqa: E731
    fields = [_field(rs, n, t, d, col(n), repeated=n == "answers") for n, (t, d) in ITEM_FIELDS.items()]
    fields.append(
        _field(
            rs,
            "image",
            "sc:ImageObject",
            "The image (its file's bytes, PNG, JPEG or WebP).",
            _from_file(rel, {"column": "image"}, {"jsonPath": "bytes"}),
        )
    )
    fields.append(_field(rs, "meta", "sc:Text", "Provenance and source fields, as JSON text.", col("meta")))
    return _record_set(rs, f"The items of {rel}, images embedded.", fields)


# --- JSON lines / JSON rows with images/ (pope, llava, hallusionbench) ---------------------------------


def _image_files(folder: Path, sub: str = "images", pattern: str = "*") -> tuple[dict | None, dict | None]:
    """The FileSet of `sub`'s images and the `images` record set over it (path, file name, content)."""
    exts = sorted(
        {p.suffix.lower() for p in (folder / sub).glob(pattern) if p.suffix.lower() in IMAGE_TYPES},
        key=list(IMAGE_TYPES).index,
    )
    if not exts:
        return None, None
    # mlcroissant reads every file of a FileSet with its first type: PNG and JPEG both open with PIL
    fs = {
        "@type": "cr:FileSet",
        "@id": "image-files",
        "name": "image-files",
        "description": f"The image files under {sub}/ (their sha256 are the FileObjects').",
        "encodingFormat": [IMAGE_TYPES[e] for e in exts],
        "includes": [f"{sub}/{pattern}{e}" for e in exts],
    }
    src = lambda prop: {"fileSet": {"@id": "image-files"}, "extract": {"fileProperty": prop}}  # noqa: E731
    rs = _record_set(
        "images",
        "One record per image file.",
        [
            _field("images", "path", "sc:Text", "The file's path in the folder (the join key).", src("fullpath")),
            _field("images", "file_name", "sc:Text", "The file's name.", src("filename")),
            _field("images", "content", "sc:ImageObject", "The image.", src("content")),
        ],
        key="path",
    )
    return fs, rs


def _joined(rel: str, rs: str, raw: dict, image_key: str, desc: str) -> list[dict]:
    """`<rs>_rows` (each row's fields as the file holds them: name -> (type, description, extract, transform,
    repeated)) and `<rs>`: the same fields, plus `image`, the image whose path (`image_key` of `images`) is
    the row's `file_name`."""
    rows = f"{rs}_rows"
    row_fields = [
        _field(rows, n, t, d, _from_file(rel, ex, tr), repeated=rep) for n, (t, d, ex, tr, rep) in raw.items()
    ]
    fields = [
        _field(
            rs,
            n,
            t,
            d,
            {"field": {"@id": f"{rows}/{n}"}},
            repeated=rep,
            refs=f"images/{image_key}" if n == "file_name" else None,
        )
        for n, (t, d, _, _, rep) in raw.items()
    ]
    if "file_name" in raw:
        fields.append(
            _field(
                rs,
                "image",
                "sc:ImageObject",
                "The image the row names (joined from `images`).",
                {"field": {"@id": "images/content"}},
            )
        )
    return [
        _record_set(rows, f"The rows of {rel} as they are (read by `{rs}`).", row_fields, key=None),
        _record_set(rs, desc, fields, key="id" if "id" in raw else None),
    ]


def _vhmine_fields(path: str, row_path, skip=()) -> dict:
    """The item fields of a row's `vhmine` record (the formats' lossless round-trip object)."""
    out = {}
    for n, (t, d) in ITEM_FIELDS.items():
        if n not in skip:
            out[n] = (t, d, *row_path(f"{path}.{n}"), n == "answers")
    return out


def _pope(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    fs, images = _image_files(folder)
    rel = "questions.jsonl"
    via = lambda p: ({"column": "vhmine"}, {"jsonPath": p.split(".", 1)[1]})  # noqa: E731  (a JSON object column)
    raw = _vhmine_fields("vhmine", via, skip=("question",))
    raw["question"] = ("sc:Text", "The question (POPE's `text`).", {"column": "text"}, None, False)
    raw["label"] = ("sc:Text", "yes or no (POPE's `label`).", {"column": "label"}, None, False)
    if fs:
        raw["file_name"] = (
            "sc:Text",
            "The image's file name in images/ (POPE's `image`).",
            {"column": "image"},
            None,
            False,
        )
    sets = _joined(rel, "questions", raw, "file_name", "The yes/no questions, each with its image.")
    return [fs] if fs else [], ([images] if images else []) + sets, ""


def _llava(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    fs, images = _image_files(folder)
    sets = [images] if images else []
    for side in ("train", "test"):
        rel = f"{side}.json"
        recs = json.loads((folder / rel).read_text(encoding="utf-8"))
        if not recs:  # mlcroissant cannot read fields of an empty list; nothing to describe
            continue
        via = lambda p: ({"jsonPath": f"$[*].{p}"}, None)  # noqa: E731
        raw = _vhmine_fields("vhmine", via)
        raw["id"] = ("sc:Text", ITEM_FIELDS["id"][1], {"jsonPath": "$[*].id"}, None, False)
        raw["prompt"] = (
            "sc:Text",
            "The human turn LLaVA trains on.",
            {"jsonPath": "$[*].conversations[0].value"},
            None,
            False,
        )
        raw["target"] = (
            "sc:Text",
            "The gpt turn (the answer LLaVA trains towards).",
            {"jsonPath": "$[*].conversations[1].value"},
            None,
            False,
        )
        if fs and all("image" in r for r in recs):  # a jsonPath over rows that lack the key would shift the columns
            raw["file_name"] = ("sc:Text", "The image's path in the folder.", {"jsonPath": "$[*].image"}, None, False)
        sets += _joined(rel, side, raw, "path", f"The {side} split (LLaVA conversations), each with its image.")
    return [fs] if fs else [], sets, ""


def _hallusionbench(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    fs, images = _image_files(folder)
    rel = "HallusionBench.json"
    via = lambda p: ({"jsonPath": f"$[*].{p}"}, None)  # noqa: E731
    raw = {}
    if all(it.meta.get("source") != "hallusionbench" for it in bench):  # every row carries its vhmine record
        raw = _vhmine_fields("vhmine", via, skip=("question",))
    for n, d in (
        ("question", ITEM_FIELDS["question"][1]),
        ("category", "HallusionBench's VD or VS."),
        ("subcategory", "HallusionBench's subcategory (the vhmine mode)."),
        ("set_id", "HallusionBench's set."),
        ("figure_id", "HallusionBench's figure within its set."),
        ("question_id", "HallusionBench's question."),
        ("gt_answer", '"1" yes, "0" no (HallusionBench\'s field).'),
    ):
        raw[n] = ("sc:Text", d, {"jsonPath": f"$[*].{n}"}, None, False)
    if fs and all(it.image or it.image_data for it in bench):  # rows without an image hold a null filename
        raw["file_name"] = (
            "sc:Text",
            "The image's path (HallusionBench's `filename` without its leading ./).",
            {"jsonPath": "$[*].filename"},
            {"regex": "^(?:\\./)?(.*)$"},
            False,
        )
    sets = _joined(rel, "questions", raw, "path", "HallusionBench's yes/no questions, each with its image.")
    return [fs] if fs else [], ([images] if images else []) + sets, ""


# --- VLMEvalKit's TSV, VHTest's sheets ------------------------------------------------------------------


def _vlmevalkit(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    sets = []
    for tsv in sorted(folder.glob("*.tsv")):
        rs, rel = tsv.stem, tsv.name
        col = lambda n, rel=rel: _from_file(rel, {"column": n})  # noqa: E731
        sets.append(
            _record_set(
                rs,
                f"VLMEvalKit's rows of {rel}.",
                [
                    _field(rs, "index", "sc:Integer", "VLMEvalKit's row number.", col("index")),
                    _field(rs, "id", "sc:Text", ITEM_FIELDS["id"][1], col("vhmine_id")),
                    _field(rs, "question", "sc:Text", ITEM_FIELDS["question"][1], col("question")),
                    _field(
                        rs,
                        "answer",
                        "sc:Text",
                        'Yes or No (yes/no questions); the reference answers joined by " or ".',
                        col("answer"),
                    ),
                    _field(
                        rs, "mode", "sc:Text", ITEM_FIELDS["mode"][1] + " (VLMEvalKit's `category`).", col("category")
                    ),
                    _field(rs, "group_id", "sc:Text", ITEM_FIELDS["group_id"][1], col("group_id")),
                    _field(
                        rs,
                        "image",
                        "sc:Text",
                        "The image as base64, or (VLMEvalKit's rule for a value of 64 characters or "
                        "fewer) the index of the row that holds the same image.",
                        col("image"),
                    ),
                    _field(rs, "vhmine_item", "sc:Text", "The item's other fields, as JSON text.", col("vhmine_item")),
                ],
            )
        )
    return (
        [],
        sets,
        (
            "The TSV files' images are base64 text (or a reference to another row), which Croissant 1.0 "
            "cannot decode: read them with VLMEvalKit or `vhmine eval`."
        ),
    )


def _vhtest(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    fs, images = _image_files(folder, "Images", "*/*")
    if images:  # the mode is the image's folder
        images["field"].append(
            _field(
                "images",
                "mode",
                "sc:Text",
                "The mode (the image's folder).",
                {
                    "fileSet": {"@id": "image-files"},
                    "extract": {"fileProperty": "fullpath"},
                    "transform": {"regex": "^Images/([^/]+)/"},
                },
            )
        )
    return (
        [fs] if fs else [],
        [images] if images else [],
        (
            "The questions are in VHTest's .xlsx sheets (OEQ_Benchmark/, YNQ_Benchmark/), which Croissant 1.0 has no"
            " reader for; they are listed with their checksums, and the images are described."
        ),
    )


def _mmvp(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    from vhmine.formats import load_module

    mmvp = load_module("mmvp")
    EXTRA, FILE, IMAGE_FOLDER = mmvp.EXTRA, mmvp.FILE, mmvp.IMAGE_FOLDER

    fs, images = _image_files(folder, IMAGE_FOLDER)
    col = lambda n: _from_file(FILE, {"column": n})  # noqa: E731
    rs = "questions"
    fields = [
        _field(rs, "index", "sc:Integer", f"MMVP's Index: row k's image is {IMAGE_FOLDER}/<k>.jpg.", col("Index")),
        _field(rs, "question", "sc:Text", ITEM_FIELDS["question"][1], col("Question")),
        _field(rs, "options", "sc:Text", "The two options as MMVP writes them: (a) Yes (b) No.", col("Options")),
        _field(rs, "correct_answer", "sc:Text", "The correct option's letter, (a) or (b).", col("Correct Answer")),
        _field(rs, "vhmine_item", "sc:Text", "The item's other fields, as JSON text.", col(EXTRA)),
    ]
    desc = f"MMVP's rows of {FILE}: rows 2k-1 and 2k are a pair (one question asked of both images of a mined pair)."
    return (
        [fs] if fs else [],
        ([images] if images else []) + [_record_set(rs, desc, fields, key="index")],
        (
            f"Row k's image is {IMAGE_FOLDER}/<k>.jpg, a path Croissant 1.0 cannot build from the Index: the rows "
            "and the images are described apart."
        ),
    )


def _lmms_eval(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    from vhmine.formats import load_module

    DATA = load_module("lmms-eval").DATA

    return [], [_parquet(DATA[k], k.lower()) for k in (YNQ, OEQ) if (folder / DATA[k]).is_file()], ""


def _hf(folder: Path, bench: Benchmark) -> tuple[list, list, str]:
    from vhmine.formats import load_module

    DATA = load_module("hf").DATA

    return [], [_parquet(DATA[k], k.lower()) for k in (OEQ, YNQ) if (folder / DATA[k]).is_file()], ""


LAYOUTS = {
    "hf": _hf,
    "lmms-eval": _lmms_eval,
    "pope": _pope,
    "llava": _llava,
    "hallusionbench": _hallusionbench,
    "vlmevalkit": _vlmevalkit,
    "vhtest": _vhtest,
    "mmvp": _mmvp,
}


def describe(fmt: str, folder: Path, bench: Benchmark) -> tuple[list[dict], list[dict], str]:
    """(FileSets, record sets, what Croissant cannot describe) of export folder `folder` in format `fmt`."""
    return LAYOUTS[fmt](Path(folder), bench)
