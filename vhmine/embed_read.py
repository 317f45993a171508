"""The embed job's reader side: COCO annotations, and the dataset that DataLoader workers run.

Reads a COCO instances JSON (file name -> id and categories) and each image file once: its size and
time, its bytes (hashed with sha256, decoded by images.py) and both encoders' preprocessing. An
unusable image becomes a row with its reason, never an exception. Writes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from .errors import InputError


# --- collection metadata -------------------------------------------------------------------------


def read_coco_annotations(path: Path) -> dict[str, dict]:
    """file_name -> {"coco_id": int, "categories": sorted category names} from a COCO instances JSON."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--coco-annotations {path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"--coco-annotations {path}: not valid JSON ({err})") from err
    if not isinstance(data, dict) or "images" not in data:
        raise InputError(f"--coco-annotations {path}: no 'images' list; expected a COCO instances_*.json file")
    where, n = "categories", 0
    try:
        names = {c["id"]: c["name"] for c in data.get("categories", [])}
        per_image: dict[int, set] = {}
        where = "annotations"
        for n, ann in enumerate(data.get("annotations", [])):
            per_image.setdefault(ann["image_id"], set()).add(names.get(ann["category_id"], str(ann["category_id"])))
        out = {}
        where = "images"
        for n, img in enumerate(data["images"]):
            out[img["file_name"]] = {"coco_id": int(img["id"]), "categories": sorted(per_image.get(img["id"], ()))}
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"--coco-annotations {path}: entry {n} of '{where}' lacks or mangles field {err}; "
                         "expected a COCO instances_*.json file") from None
    return out


# --- reader: runs in DataLoader workers ----------------------------------------------------------


class ImageReader:
    """Map-style dataset: item k = one file, read once, hashed, decoded, preprocessed for both encoders."""

    def __init__(self, root: Path, paths: list[str], clip_preprocess, dino_preprocess, max_pixels: int):
        self.root = Path(root)
        self.paths = paths
        self.clip_preprocess = clip_preprocess
        self.dino_preprocess = dino_preprocess
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, k: int) -> dict:
        from .images import BadImage, decode_rgb, sha256_bytes

        rel = self.paths[k]
        item = {"path": rel, "status": "skipped", "reason": "", "sha256": "", "width": 0, "height": 0,
                "size": -1, "mtime_ns": -1}
        try:
            # size and time as of before the read: a change during or after it shows on the next run
            st = os.stat(self.root / rel)
            item["size"], item["mtime_ns"] = st.st_size, st.st_mtime_ns
            data = (self.root / rel).read_bytes()
        except OSError as err:
            item["reason"] = f"unreadable file ({err.strerror or err})"
            return item
        item["sha256"] = sha256_bytes(data)
        try:
            img = decode_rgb(data, max_pixels=self.max_pixels)
        except BadImage as err:
            item["reason"] = err.reason
            return item
        try:
            with _one_torch_thread():
                item["clip"] = self.clip_preprocess(img)
                item["dino"] = self.dino_preprocess(img)
        except Exception as err:  # a preprocessing bug on one odd image must not stop the job
            item["reason"] = f"preprocessing failed ({type(err).__name__}: {err})"
            return item
        item.update(status="ok", width=img.width, height=img.height)
        return item


@contextlib.contextmanager
def _one_torch_thread():
    """Preprocessing's small tensor ops run far faster on one thread (loader workers already do)."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def collate(items: list[dict]) -> dict:
    """Keep every row's metadata; stack the tensors of the decodable ones."""
    import torch

    ok = [it for it in items if it["status"] == "ok"]
    meta = [{k: v for k, v in it.items() if k not in ("clip", "dino")} for it in items]
    out = {"items": meta, "clip": None, "dino": None}
    if ok:
        out["clip"] = torch.stack([it["clip"] for it in ok])
        out["dino"] = torch.stack([it["dino"] for it in ok])
    return out
