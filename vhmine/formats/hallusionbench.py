"""HallusionBench's JSON: a list of yes/no questions with its own grouping keys.

Reads `HallusionBench.json` (fields `category` VD/VS, `subcategory`, `visual_input` "0" no image /
"1" original / "2" edited, `set_id`, `figure_id`, `question_id`, `question`, `gt_answer` "1" yes /
"0" no, `gt_answer_details`, `filename`) and result files that carry a prediction per row
(`HallusionBench_result_sample.json`: `model_prediction`, no `gt_answer`): `read_predictions`.
Writes the same fields (and `images/`) for a benchmark, plus `vhmine_id` / `vhmine_mode` and a `vhmine`
object (the item's other fields) on rows made from vhmine items, so they read back without loss. Other ids are
HallusionBench's own per-question
key `category_subcategory_setid_figureid_questionid`; question pairs (qAcc) group by
category/subcategory/set_id/question_id and figures (fAcc) by category/subcategory/set_id/figure_id,
as HallusionBench's utils.py does. A `filename` must stay inside the JSON's folder or `images=`
(formats.confined_image).
"""

from __future__ import annotations

import json
from pathlib import Path

from vhmine.bench import YNQ, BenchItem, Benchmark
from vhmine.errors import FormatError
from vhmine.formats import confined_image, copy_images, item_extras, item_from_extras

KEYS = ("category", "subcategory", "set_id", "figure_id", "question_id")
FIELDS = KEYS + ("visual_input", "question")


def row_id(r: dict) -> str:
    return "_".join(str(r[k]) for k in KEYS)


def _rows(path: Path) -> list:
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # a BOM (Windows editors) is read
    except ValueError as err:
        raise FormatError(f"{path}: not JSON ({err})") from None
    except OSError as err:
        raise FormatError(f"{path}: cannot be read ({err.strerror})") from None
    if not isinstance(rows, list):
        raise FormatError(f"{path}: not a JSON list of questions (HallusionBench's layout)")
    for n, r in enumerate(rows):
        if not isinstance(r, dict):
            raise FormatError(f"{path}, row {n}: not a JSON object")
        for f in FIELDS:
            if f not in r or r[f] is None:
                raise FormatError(f"{path}, row {n}, field {f}: missing")
    return rows


def read(path: Path, images: Path | None = None) -> Benchmark:
    path = Path(path)
    if path.is_dir():
        path = path / "HallusionBench.json"
    root = Path(images) if images else path.parent
    items = []
    for n, r in enumerate(_rows(path)):
        where = f"{path}, row {n}"
        gt = r.get("gt_answer")
        if gt is None:
            raise FormatError(
                f"{where}, field gt_answer: missing: a result file without answers is scored against "
                "HallusionBench.json (vhmine eval --bench HallusionBench.json --predictions THIS_FILE)"
            )
        if str(gt) not in ("0", "1"):
            raise FormatError(f'{where}, field gt_answer: {gt!r} is not "1" (yes) or "0" (no)')
        if str(r["visual_input"]) not in ("0", "1", "2"):
            raise FormatError(f"{where}, field visual_input: {r['visual_input']!r} is not 0, 1 or 2")
        truth = str(gt) == "1"
        visual = str(r["visual_input"]) != "0"
        fname = r.get("filename")
        image = confined_image(
            fname[2:] if isinstance(fname, str) and fname.startswith("./") else fname, root, where, "filename"
        )
        fig = "_".join(str(r[k]) for k in ("category", "subcategory", "set_id", "figure_id"))
        pair = "_".join(str(r[k]) for k in ("category", "subcategory", "set_id", "question_id"))
        meta = {k: v for k, v in r.items() if k not in ("question",)}
        meta["source"] = "hallusionbench"
        e = r.get("vhmine")
        if isinstance(e, dict):  # a vhmine item we wrote: read back whole, as every other format does
            items.append(item_from_extras(e, r["question"], image, f"{where}, field vhmine"))
            continue
        # rows we wrote carry our stable id and mode; HallusionBench's own rows get its per-question key
        iid = str(r.get("vhmine_id") or row_id(r))
        mode = str(r.get("vhmine_mode") or f"{r['category']}/{r['subcategory']}")
        items.append(
            BenchItem(
                iid,
                mode,
                YNQ,
                r["question"],
                ("Yes" if truth else "No",),
                truth,
                image if visual else None,
                fig if visual else None,
                pair,
                meta,
            )
        )
    return Benchmark(path.stem, items, root, str(path))


def read_predictions(path: Path, field: str = "model_prediction") -> dict[str, str]:
    """Item id -> the model's answer, from a result file: HallusionBench's per-question key, or the `vhmine_id` of a row
    vhmine's export wrote (the id `read` gives that item)."""
    out = {}
    for n, r in enumerate(_rows(path)):
        if field not in r:
            raise FormatError(f"{path}, row {n}, field {field}: missing (the model's answer)")
        rid = str(r.get("vhmine_id") or row_id(r))  # a row of vhmine's own export names its item, as `read` does
        if rid in out:
            raise FormatError(f"{path}, row {n}: question {rid} appears twice")
        out[rid] = "" if r[field] is None else str(r[field])
    return out


def write(bench: Benchmark, folder: Path) -> None:
    bad = [it for it in bench if it.kind != YNQ or it.truth is None]
    if bad:
        raise FormatError(
            f"item {bad[0].id} is not a yes/no question with a truth: the hallusionbench format holds YNQ only"
        )
    paths = copy_images(bench, folder, "images")
    sets: dict[str, dict] = {}
    rows = []
    for it in bench:
        m = it.meta
        if m.get("source") == "hallusionbench":
            r = {k: v for k, v in m.items() if k != "source"}
            r["question"] = it.question
            if it.id in paths:
                r["filename"] = "./" + paths[it.id]
        else:
            # a vhmine item: a set is a mined pair (or a single image), figures its images, questions its questions
            s = sets.setdefault(m.get("pair_id") or it.image_id or it.id, {"id": len(sets), "fig": {}, "q": {}})
            fig = s["fig"].setdefault(it.image_id, len(s["fig"]))
            q = s["q"].setdefault(it.pair_id or it.id, len(s["q"]))
            r = {
                "category": "VD",
                "subcategory": it.mode,
                "visual_input": "1",
                "set_id": str(s["id"]),
                "figure_id": str(fig),
                "sample_note": it.id,
                "question_id": str(q),
                "question": it.question,
                # HallusionBench's scripts ignore extra fields; ours read the stable id and mode back
                "vhmine_id": it.id,
                "vhmine_mode": it.mode,
                "vhmine": item_extras(it),
                "gt_answer_details": it.answers[0] if it.answers else "",
                "gt_answer": "1" if it.truth else "0",
                "filename": "./" + paths[it.id] if it.id in paths else None,
            }
        rows.append(r)
    (folder / "HallusionBench.json").write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
