"""The embed job's reader side: where image records come from, and the dataset that DataLoader workers run.

A source lists a collection's records (relative path -> record) and reads one record's bytes:
`FolderSource` (a folder of image files, searched recursively) here, `TarSource` (WebDataset tar
shards as img2dataset writes them, local or any fsspec URL) in vhmine/tars.py; `open_source` picks one.
Also reads a COCO instances JSON (file name -> id and categories). `ShardReader` reads each record
once: its size and time, its bytes (hashed with sha256, decoded by images.py) and both encoders'
preprocessing. An unusable image becomes a row with its reason, never an exception. Writes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from vhmine.errors import InputError

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
        for n, ann in enumerate(data.get("annotations", [])):  # noqa: B007  (n names the bad entry below)
            per_image.setdefault(ann["image_id"], set()).add(names.get(ann["category_id"], str(ann["category_id"])))
        out = {}
        where = "images"
        for n, img in enumerate(data["images"]):  # noqa: B007  (n names the bad entry below)
            out[img["file_name"]] = {"coco_id": int(img["id"]), "categories": sorted(per_image.get(img["id"], ()))}
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(
            f"--coco-annotations {path}: entry {n} of '{where}' lacks or mangles field {err}; "
            "expected a COCO instances_*.json file"
        ) from None
    return out


# --- sources ------------------------------------------------------------------------------------


class FolderSource:
    """A folder of image files; a record is {"path": path relative to the folder}."""

    kind = "folder"
    extra_columns: tuple[str, ...] = ()

    def __init__(self, root: Path):
        self.root = Path(root)

    @property
    def location(self) -> str:
        return str(self.root)

    def check(self) -> None:
        """Raise if this machine cannot see the collection (a Ray node without the shared folder)."""
        if not self.root.is_dir():
            raise InputError(
                f"{self.root}: no such folder on this machine; the images must be on a filesystem "
                "every node mounts, at the same path"
            )

    def list(self) -> dict[str, dict]:
        from vhmine.images import list_images

        return {rel: {"path": rel} for rel in (p.relative_to(self.root).as_posix() for p in list_images(self.root))}

    def stat(self, rec: dict) -> tuple[int, int]:
        st = os.stat(self.root / rec["path"])
        return st.st_size, st.st_mtime_ns

    def read(self, rec: dict) -> bytes:
        return (self.root / rec["path"]).read_bytes()

    def extras(self, rec: dict) -> dict:
        return {}


def open_source(images) -> FolderSource:
    """The source for `vhmine embed IMAGES`: WebDataset tars for an fsspec URL, a .tar file, or a folder
    that holds .tar files and no images; otherwise a folder of image files."""
    from vhmine.tars import TarSource, is_tar_input

    text = str(images)
    if "://" in text or text.endswith(".tar"):
        return TarSource(text)
    root = Path(images).expanduser().resolve()
    if not root.is_dir():
        raise InputError(f"{images}: no such folder; give the folder that holds the images (or WebDataset .tar shards)")
    if is_tar_input(root):
        return TarSource(str(root))
    return FolderSource(root)


# --- reader: runs in DataLoader workers ----------------------------------------------------------


class ShardReader:
    """Map-style dataset: item k = one record, read once, hashed, decoded, preprocessed for both encoders."""

    def __init__(self, source, records: list[dict], clip_preprocess, dino_preprocess, max_pixels: int):
        self.source = source
        self.records = records
        self.clip_preprocess = clip_preprocess
        self.dino_preprocess = dino_preprocess
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, k: int) -> dict:
        from vhmine.images import BadImage, decode_rgb, sha256_bytes

        rec = self.records[k]
        item = {
            "path": rec["path"],
            "status": "skipped",
            "reason": "",
            "sha256": "",
            "width": 0,
            "height": 0,
            "size": -1,
            "mtime_ns": -1,
        }
        if rec.get("missing"):  # listed in the plan, gone since
            item["reason"] = "unreadable file (gone since the job was planned)"
            return item
        try:
            item.update(self.source.extras(rec))
            # size and time as of before the read: a change during or after it shows on the next run
            item["size"], item["mtime_ns"] = self.source.stat(rec)
            data = self.source.read(rec)
        except OSError as err:
            item["reason"] = f"unreadable file ({err.strerror or err})"
            return item
        except BadImage as err:  # e.g. a tar member cut short
            item["reason"] = err.reason
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
