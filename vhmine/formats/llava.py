"""LLaVA fine-tuning conversations with a seeded 80/20 train/test split.

Writes (and reads back) `train.json` and `test.json` (LLaVA's list of `{"id", "image",
"conversations": [{"from": "human", "value": "<image>\\n..."}, {"from": "gpt", "value": ...}]}`) with
the images under `images/`. As in VHTest's training set, counting answers become sentences ("There
are 3 cats.") and position questions get "Answer the question using a single word or phrase.".
The split is drawn per mode from a hash of (seed, id), so it does not depend on row order (adding
items can move an item near the 80 % cut to the other side). Each record also holds a `vhmine` object for a lossless
round trip; LLaVA's trainer ignores it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..bench import OEQ, YNQ, BenchItem, Benchmark
from ..errors import FormatError
from . import copy_images, item_extras, item_from_extras

SHORT = "Answer the question using a single word or phrase."
FILES = ("train.json", "test.json")


def split(bench: Benchmark, seed: int = 0, train: float = 0.8) -> dict[str, str]:
    """item id -> "train" or "test": within each mode, the first round(80%) by hash of (seed, id)."""
    out = {}
    for mode in bench.modes():
        ids = sorted((it.id for it in bench if it.mode == mode),
                     key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).hexdigest())
        n = round(train * len(ids))
        out.update({i: ("train" if k < n else "test") for k, i in enumerate(ids)})
    return out


def prompt(it: BenchItem) -> str:
    return f"{it.question}\n{SHORT}" if it.mode == "position" else it.question


def answer(it: BenchItem) -> str:
    if it.kind == YNQ:
        return "Yes" if it.truth else "No"
    best = it.answers[0] if it.answers else ""
    if it.mode == "counting" and best.strip().isdigit():
        n = int(best)
        obj = str((it.meta.get("slots") or {}).get("object") or "").strip()
        if obj:
            return f"There {'is' if n == 1 else 'are'} {n} {obj}."
        return f"There {'is' if n == 1 else 'are'} {n}."
    return best


def write(bench: Benchmark, folder: Path, seed: int = 0) -> None:
    paths = copy_images(bench, folder, "images")
    sides = split(bench, seed)
    out: dict[str, list] = {"train": [], "test": []}
    for it in bench:
        rec = {"id": it.id, "conversations": [{"from": "human", "value": ("<image>\n" if it.id in paths else "") + prompt(it)},
                                              {"from": "gpt", "value": answer(it)}],
               "vhmine": dict(item_extras(it), question=it.question)}
        if it.id in paths:
            rec = {"id": it.id, "image": paths[it.id], **{k: v for k, v in rec.items() if k != "id"}}
        out[sides[it.id]].append(rec)
    for side, recs in out.items():
        (folder / f"{side}.json").write_text(json.dumps(recs, ensure_ascii=False, indent=1), encoding="utf-8")


def read(path: Path) -> Benchmark:
    path = Path(path)
    files = [path / f for f in FILES] if path.is_dir() else [path]
    items = []
    for f in files:
        if not f.is_file():
            raise FormatError(f"{f} does not exist: not a vhmine LLaVA export")
        try:
            recs = json.loads(f.read_text(encoding="utf-8"))
        except ValueError as err:
            raise FormatError(f"{f}: not JSON ({err})") from None
        for n, rec in enumerate(recs):
            where = f"{f}, record {n}"
            e = rec.get("vhmine") if isinstance(rec, dict) else None
            if isinstance(e, dict):
                if "question" not in e:
                    raise FormatError(f"{where}, field vhmine: not a vhmine item (no 'question' in its vhmine record)")
                items.append(item_from_extras(e, e["question"], rec.get("image"), f"{where}, field vhmine"))
                continue
            try:
                human, gpt = rec["conversations"][0]["value"], rec["conversations"][1]["value"]
            except (KeyError, IndexError, TypeError):
                raise FormatError(f"{where}, field conversations: needs a human turn then a gpt turn") from None
            q = human.replace("<image>", "").strip()
            yn = gpt.strip().lower().rstrip(".") in ("yes", "no")
            items.append(BenchItem(str(rec.get("id", f"{f.stem}:{n}")), "llava", YNQ if yn else OEQ, q, (gpt,),
                                   gpt.strip().lower().startswith("yes") if yn else None, rec.get("image"),
                                   rec.get("image"), None, {"source": "llava", "file": f.name}))
    root = path if path.is_dir() else path.parent
    return Benchmark(root.name, items, root, str(path))
