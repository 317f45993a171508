"""POPE's JSON lines: one yes/no question a line, `question_id`, `image`, `text`, `label` (yes / no).

Reads POPE's own files (`coco_pope_{random,popular,adversarial}.json`: JSON lines under a .json
name; their images are COCO's and live elsewhere: `images=` names that folder) and writes
`questions.jsonl` with the images under `images/`, each line also holding `group_id` (its pair group, or
null) and a `vhmine` object (the
item's other fields) for a lossless round trip; POPE's scripts ignore it. Ids of POPE's own files
are `<file stem>:<question_id>`. An image path must stay inside its images folder (formats.confined_image).
"""

from __future__ import annotations

import json
from pathlib import Path

from vhmine.bench import YNQ, BenchItem, Benchmark
from vhmine.errors import FormatError
from vhmine.formats import ENCODING, confined_image, copy_images, item_extras, item_from_extras

FILE = "questions.jsonl"


def write(bench: Benchmark, folder: Path) -> None:
    bad = [it for it in bench if it.kind != YNQ or it.truth is None]
    if bad:
        raise FormatError(
            f"item {bad[0].id} is not a yes/no question with a truth: the pope format holds YNQ only (--kind ynq)"
        )
    paths = copy_images(bench, folder, "images")
    with open(folder / FILE, "w", encoding="utf-8") as f:
        for it in bench:
            rec = {
                "question_id": it.id,
                "image": Path(paths[it.id]).name if it.id in paths else None,
                "text": it.question,
                "label": "yes" if it.truth else "no",
                "category": it.mode,
                "group_id": it.group_id,
                "vhmine": item_extras(it),
            }
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def read(path: Path, images: Path | None = None) -> Benchmark:
    path = Path(path)
    if path.is_dir():
        root = images or path / "images"
        files = [path / FILE]
    else:
        root = images or path.parent
        files = [path]
    items = []
    for f in files:
        if not f.is_file():
            raise FormatError(f"{f} does not exist: not a POPE benchmark")
        with open(f, encoding=ENCODING) as fh:
            for n, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                where = f"{f}, line {n}"
                try:
                    rec = json.loads(line)
                except ValueError as err:
                    raise FormatError(f"{where}: not JSON ({err.args[0]})") from None
                if not isinstance(rec, dict):
                    raise FormatError(f"{where}: not a JSON object")
                for field in ("question_id", "text", "label"):
                    if field not in rec:
                        raise FormatError(
                            f"{where}, field {field}: missing (POPE lines have question_id, image, text, label)"
                        )
                label = str(rec["label"]).strip().lower()
                if label not in ("yes", "no"):
                    raise FormatError(f"{where}, field label: {rec['label']!r} is not yes or no")
                image = confined_image(rec.get("image"), root, where, "image")
                e = rec.get("vhmine")
                if isinstance(e, dict):
                    items.append(item_from_extras(e, rec["text"], image, f"{where}, field vhmine"))
                    continue
                truth = label == "yes"
                items.append(
                    BenchItem(
                        f"{f.stem}:{rec['question_id']}",
                        rec.get("category") or "existence",
                        YNQ,
                        rec["text"],
                        ("Yes" if truth else "No",),
                        truth,
                        image,
                        Path(image).stem if image else None,
                        None,
                        {"source": "pope", "file": f.name, "question_id": rec["question_id"]},
                    )
                )
    return Benchmark(path.stem, items, Path(root), str(path))
