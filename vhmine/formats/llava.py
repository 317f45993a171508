"""LLaVA fine-tuning conversations with a seeded 80/20 train/test split.

Writes (and reads back) `train.json` and `test.json` (LLaVA's list of `{"id", "image",
"conversations": [{"from": "human", "value": "<image>\\n..."}, {"from": "gpt", "value": ...}]}`) with
the images under `images/`. As in VHTest's training set, counting answers become sentences ("There
are 3 cats.") and position questions get "Answer the question using a single word or phrase.".
The split keeps image groups whole, so nothing seen in training is tested: items joined by an image (a
pair's two images), a question pair or a drafted-from link (a yes/no question and the open question
it was drafted from) form one group, and groups are drawn to train in the order of a hash of
(seed, group) until each mode holds ~80 %; it does not depend on row order (adding items can move a
group near the cut to the other side). Each record also holds a `vhmine` object for a lossless
round trip (its `group_id` is the pair group); LLaVA's trainer ignores it. Reading, `image` paths resolve in the JSON's
folder or `images=` and must stay inside it (formats.confined_image).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from vhmine.bench import OEQ, YNQ, BenchItem, Benchmark
from vhmine.errors import FormatError
from vhmine.formats import ENCODING, confined_image, copy_images, item_extras, item_from_extras

SHORT = "Answer the question using a single word or phrase."
FILES = ("train.json", "test.json")


def groups(bench: Benchmark) -> list[list[BenchItem]]:
    """Items that must stay on one side (union-find): those sharing an image (either image of a pair), a
    question pair, or a drafted-from link; each group's items in bench order."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for it in bench:
        links = [
            it.image_id and f"image:{it.image_id}",
            it.meta.get("other_image_id") and f"image:{it.meta['other_image_id']}",
            it.pair_id and f"pair:{it.pair_id}",
            it.meta.get("derived_from") and f"item:{it.meta['derived_from']}",
        ]
        for link in filter(None, links):
            parent[find(f"item:{it.id}")] = find(str(link))
        find(f"item:{it.id}")
    out: dict[str, list[BenchItem]] = {}
    for it in bench:
        out.setdefault(find(f"item:{it.id}"), []).append(it)
    return list(out.values())


def split(bench: Benchmark, seed: int = 0, train: float = 0.8) -> dict[str, str]:
    """item id -> "train" or "test", whole groups (see `groups`) at a time: in the order of a hash of (seed, the
    group's smallest item id), a group goes to train when that brings each mode's train count nearer 80 %."""
    target = {m: train * sum(it.mode == m for it in bench) for m in bench.modes()}
    have = dict.fromkeys(target, 0)
    out = {}
    order = sorted(groups(bench), key=lambda g: hashlib.sha256(f"{seed}:{min(it.id for it in g)}".encode()).hexdigest())
    for g in order:
        adds = {m: sum(it.mode == m for it in g) for m in target}
        to_train = sum((have[m] + adds[m] - target[m]) ** 2 for m in target) < sum(
            (have[m] - target[m]) ** 2 for m in target
        )
        if to_train:
            for m in target:
                have[m] += adds[m]
        out.update({it.id: "train" if to_train else "test" for it in g})
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
        rec = {
            "id": it.id,
            "conversations": [
                {"from": "human", "value": ("<image>\n" if it.id in paths else "") + prompt(it)},
                {"from": "gpt", "value": answer(it)},
            ],
            "vhmine": dict(item_extras(it), question=it.question),
        }
        if it.id in paths:
            rec = {"id": it.id, "image": paths[it.id], **{k: v for k, v in rec.items() if k != "id"}}
        out[sides[it.id]].append(rec)
    for side, recs in out.items():
        (folder / f"{side}.json").write_text(json.dumps(recs, ensure_ascii=False, indent=1), encoding="utf-8")


def read(path: Path, images: Path | None = None) -> Benchmark:
    """`images`: the folder LLaVA's `image` paths are relative to [default: the JSON's folder]."""
    path = Path(path)
    files = [path / f for f in FILES] if path.is_dir() else [path]
    root = Path(images) if images else (path if path.is_dir() else path.parent)
    items = []
    for f in files:
        if not f.is_file():
            raise FormatError(f"{f} does not exist: not a vhmine LLaVA export")
        try:
            recs = json.loads(f.read_text(encoding=ENCODING))
        except ValueError as err:
            raise FormatError(f"{f}: not JSON ({err})") from None
        for n, rec in enumerate(recs):
            where = f"{f}, record {n}"
            image = confined_image(rec.get("image"), root, where, "image") if isinstance(rec, dict) else None
            e = rec.get("vhmine") if isinstance(rec, dict) else None
            if isinstance(e, dict):
                if "question" not in e:
                    raise FormatError(f"{where}, field vhmine: not a vhmine item (no 'question' in its vhmine record)")
                items.append(item_from_extras(e, e["question"], image, f"{where}, field vhmine"))
                continue
            try:
                human, gpt = rec["conversations"][0]["value"], rec["conversations"][1]["value"]
            except (KeyError, IndexError, TypeError):
                raise FormatError(f"{where}, field conversations: needs a human turn then a gpt turn") from None
            q = human.replace("<image>", "").strip()
            yn = gpt.strip().lower().rstrip(".") in ("yes", "no")
            items.append(
                BenchItem(
                    str(rec.get("id", f"{f.stem}:{n}")),
                    "llava",
                    YNQ if yn else OEQ,
                    q,
                    (gpt,),
                    gpt.strip().lower().startswith("yes") if yn else None,
                    image,
                    image,
                    None,
                    {"source": "llava", "file": f.name},
                )
            )
    return Benchmark((path if path.is_dir() else path.parent).name, items, root, str(path))
