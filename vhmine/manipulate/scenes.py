"""Scenes and their objects: from COCO instance annotations, or from an open-vocabulary detector.

Reads an embedded collection's `images.parquet` (vhmine.index), a COCO instances JSON (the one the
collection was embedded with, or `--coco-annotations`), or runs Owl-ViT / OWLv2 (transformers, by hub
id or local folder) over the images; writes nothing. Every object keeps only its highest-confidence
box per name (COCO has no scores: the largest instance stands for its category), as AutoHallusion's
spatial ground truth does. COCO masks come from the polygons (or uncompressed RLE); a detector gives
boxes only, so its mask is the box.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine.errors import InputError
from vhmine.images import open_scene_image

log = logging.getLogger(__name__)


@dataclass
class SceneObject:
    name: str
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels
    score: float = 1.0
    polygons: list = field(default_factory=list)  # COCO polygons [[x, y, x, y, ...], ...]
    rle: dict | None = None  # uncompressed COCO RLE {"size": [h, w], "counts": [...]}

    @property
    def area(self) -> float:
        return max(0.0, self.box[2] - self.box[0]) * max(0.0, self.box[3] - self.box[1])

    def mask(self, size: tuple[int, int]):
        """A PIL "L" mask (255 = object) of the image size (w, h): polygons, RLE, else the box."""
        import numpy as np
        from PIL import Image, ImageDraw

        m = Image.new("L", size, 0)
        if self.rle is not None:
            arr = _decode_rle(self.rle)
            if arr.shape == (size[1], size[0]):
                return Image.fromarray(arr * np.uint8(255))
        if self.polygons:
            draw = ImageDraw.Draw(m)
            for poly in self.polygons:
                if len(poly) >= 6:
                    draw.polygon([(poly[i], poly[i + 1]) for i in range(0, len(poly) - 1, 2)], fill=255)
            return m
        ImageDraw.Draw(m).rectangle([round(v) for v in self.box], fill=255)
        return m


@dataclass
class Scene:
    image_id: str
    path: Path
    sha256: str
    width: int
    height: int
    objects: list[SceneObject] = field(default_factory=list)

    def names(self) -> list[str]:
        return [o.name for o in self.objects]

    def get(self, name: str) -> SceneObject | None:
        return next((o for o in self.objects if o.name == name), None)


def _decode_rle(rle: dict):
    """Uncompressed COCO RLE (column-major run lengths, starting with zeros) -> (h, w) uint8 array."""
    import numpy as np

    h, w = rle["size"]
    flat = np.zeros(h * w, dtype=np.uint8)
    pos, val = 0, 0
    for n in rle["counts"]:
        flat[pos : pos + n] = val
        pos, val = pos + n, 1 - val
    return flat.reshape((w, h)).T


def best_per_name(objects: Sequence[SceneObject]) -> list[SceneObject]:
    """One object per name: the highest score, then the largest box (the paper keeps the top box)."""
    best: dict[str, SceneObject] = {}
    for o in objects:
        cur = best.get(o.name)
        if cur is None or (o.score, o.area) > (cur.score, cur.area):
            best[o.name] = o
    return sorted(best.values(), key=lambda o: (-o.score, -o.area, o.name))


def read_coco_objects(path: Path) -> dict[str, list[SceneObject]]:
    """file name -> its objects (best per category) from a COCO instances JSON."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        names = {c["id"]: c["name"] for c in data.get("categories", [])}
        files = {img["id"]: img["file_name"] for img in data["images"]}
        per: dict[str, list[SceneObject]] = {f: [] for f in files.values()}
        for ann in data.get("annotations", []):
            x, y, w, h = (float(v) for v in ann["bbox"])
            seg = ann.get("segmentation")
            polys = seg if isinstance(seg, list) else []
            rle = seg if isinstance(seg, dict) and isinstance(seg.get("counts"), list) else None
            per[files[ann["image_id"]]].append(
                SceneObject(
                    names.get(ann["category_id"], str(ann["category_id"])), (x, y, x + w, y + h), 1.0, polys, rle
                )
            )
    except FileNotFoundError:
        raise InputError(f"COCO annotations {path}: file not found") from None
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(
            f"COCO annotations {path}: not a COCO instances JSON ({type(err).__name__}: {err}); "
            "give an instances_*.json file"
        ) from None
    return {f: best_per_name(objs) for f, objs in per.items()}


def collection_scenes(
    index: str | None, indexes: Path | None = None, coco_annotations: Path | None = None
) -> tuple[list[Scene], Path | None]:
    """The images of an embedded collection as scenes (objects filled from COCO when there are annotations);
    returns (scenes, the COCO file used or None)."""
    from vhmine.config import indexes_root
    from vhmine.index import default_index_name, open_index

    root = indexes_root(indexes)
    ix = open_index(root, default_index_name(root, index), load_vectors=False)
    coco = coco_annotations or (ix.manifest.get("source") or {}).get("coco_annotations")
    objects = read_coco_objects(Path(coco)) if coco else {}
    scenes = []
    for row, full in zip(ix.images.to_dict("records"), ix.abs_paths()):
        rel = str(row["path"])
        objs = objects.get(rel) or objects.get(rel.rsplit("/", 1)[-1]) or []
        scenes.append(
            Scene(
                str(row["image_id"]), Path(full), str(row["sha256"]), int(row["width"]), int(row["height"]), list(objs)
            )
        )
    return scenes, Path(coco) if coco else None


class Detector:
    """Owl-ViT or OWLv2 through transformers' zero-shot object detection, loaded once."""

    def __init__(self, source: str, device: str | None = None):
        try:
            import torch
            from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor
        except ModuleNotFoundError as err:
            raise InputError(f"the detector needs {err.name}: pip install 'vhmine[generate]'") from None
        try:
            self.processor = AutoProcessor.from_pretrained(source)
            self.model = AutoModelForZeroShotObjectDetection.from_pretrained(source).eval()
        except Exception as err:
            raise InputError(
                f"cannot load detector {source!r} ({type(err).__name__}: {str(err)[:300]}): give an Owl-ViT "
                "or OWLv2 hub id that is downloaded (e.g. google/owlvit-base-patch32; HF_HUB_OFFLINE "
                "blocks downloads) or a folder saved with save_pretrained"
            ) from None
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.source = source

    def detect(self, image, vocabulary: Sequence[str], threshold: float) -> list[SceneObject]:
        """Boxes of the vocabulary's objects in a PIL image, best per name, scores >= threshold."""
        torch = self.torch
        inputs = self.processor(text=[list(vocabulary)], images=image, return_tensors="pt").to(self.device)
        with torch.no_grad():
            out = self.model(**inputs)
        sizes = torch.tensor([[image.height, image.width]], device=self.device)
        post = (
            getattr(self.processor, "post_process_grounded_object_detection", None)
            or self.processor.post_process_object_detection
        )
        res = post(outputs=out, threshold=threshold, target_sizes=sizes)[0]
        objs = []
        for box, score, label in zip(res["boxes"].tolist(), res["scores"].tolist(), res["labels"].tolist()):
            x0, y0, x1, y1 = (min(max(v, 0.0), lim) for v, lim in zip(box, (image.width, image.height) * 2))
            if x1 > x0 and y1 > y0:
                objs.append(SceneObject(vocabulary[int(label)], (x0, y0, x1, y1), float(score)))
        return best_per_name(objs)


def detect_scenes(
    scenes: list[Scene], detector: str, vocabulary: Sequence[str], threshold: float = 0.1, device: str | None = None
) -> list[Scene]:
    """Fill the objects of scenes that have none with the detector's boxes."""

    if not vocabulary:
        raise InputError(
            "the detector needs a vocabulary: pass --vocabulary 'cup,dog,...' (or a collection with COCO "
            "annotations, whose category names are used)"
        )
    todo = [s for s in scenes if not s.objects]
    if not todo:
        return scenes
    det = Detector(detector, device)
    for s in todo:
        with open_scene_image(s.path) as im:
            s.objects = det.detect(im.convert("RGB"), list(vocabulary), threshold)
    return scenes
