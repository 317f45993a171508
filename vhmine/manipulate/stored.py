"""Earlier manipulated cases in the curation store, so that reruns accumulate instead of duplicating.

Reads the store's `manipulate` generations (their provenance params and edited image path) and the
edited images and masks on disk; writes nothing. A case is the same case when its strategy, source
image, target and asked-about objects, prior, detector, edit backend and (removal) inpainting
settings other than the device match: a rerun reuses its stored image rather than editing again, so
a backend that draws differently each time (an image edit with no cache, a pipeline on another GPU)
still adds no second image, and the report covers every stored case made with the run's options.
A stored case is reused only while its image and mask on disk are the ones recorded (their sha256):
a truncated or replaced file makes the case again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from vhmine.images import sha256_file
from vhmine.manipulate.prior import Choice
from vhmine.manipulate.scenes import Scene, SceneObject
from vhmine.manipulate.strategies import Edit

log = logging.getLogger(__name__)


def edit_settings(inpaint_params: dict | None) -> dict | None:
    """The inpainting settings that decide an edit (the device does not name a different edit)."""
    return {k: v for k, v in inpaint_params.items() if k != "device"} if inpaint_params else None


def case_key(strategy: str, source_sha256: str, target: str, asked: str) -> tuple:
    return (strategy, source_sha256, target, asked)


def stored_cases(
    store, scenes: Sequence[Scene], strategies: Sequence[str], prior: str, detector: str | None, backends: dict
) -> dict[tuple, tuple[dict, Path]]:
    """case_key -> (provenance params, edited image path) of the store's cases made with these options.

    `backends`: strategy -> (edit backend, its edit_settings) that the run would use."""
    from sqlalchemy import select

    from vhmine.store import Generation, Image

    shas = {s.sha256 for s in scenes}
    out: dict[tuple, tuple[dict, Path]] = {}
    with store.session(write=False) as s:
        rows = s.execute(
            select(Generation.params, Image.path, Image.sha256)
            .join(Image, Image.id == Generation.image_id)
            .where(Generation.backend == "manipulate")
            .order_by(Generation.created_at, Generation.id)
        ).all()
    for p, path, sha in rows:
        p = p or {}
        st = p.get("strategy")
        if (
            st not in strategies
            or p.get("source_sha256") not in shas
            or p.get("prior") != prior
            or p.get("detector") != detector
        ):
            continue
        if (p.get("edit_backend"), edit_settings(p.get("inpaint"))) != backends[st]:
            continue
        target = p.get("removed_object") if st == "removal" else p.get("inserted_object")
        key = case_key(st, p["source_sha256"], target, p.get("asked_object"))
        if key in out:
            continue
        if _intact(Path(path), sha) and _intact(Path(path).parent / str(p.get("mask")), p.get("mask_sha256")):
            out[key] = (p, Path(path))  # the first one stands; a deleted or damaged image is made again
        else:
            log.info(
                "stored %s case on %s: its image or mask on disk is gone or changed; making it again",
                st,
                p.get("source_image_id"),
            )
    return out


def _intact(path: Path, sha256: str | None) -> bool:
    return bool(sha256) and path.is_file() and sha256_file(path) == sha256


def rebuild(p: dict, path: Path, scene: Scene) -> tuple[Edit, Choice, bytes] | None:
    """(edit, choice, PNG bytes) of a stored case, or None when its mask or objects are gone."""
    from PIL import Image as PILImage

    st = p["strategy"]
    target, asked = (p["removed_object"] if st == "removal" else p["inserted_object"]), p["asked_object"]
    mask_path = path.parent / p["mask"]
    if not mask_path.is_file():
        return None
    png = path.read_bytes()
    with PILImage.open(path) as im:
        image = im.convert("RGB")
    with PILImage.open(mask_path) as m:
        mask = m.convert("L")
    others = [o for o in scene.objects if o.name != target]
    if st == "removal":
        obj = scene.get(target)
        if obj is None:
            return None
        box, objects = tuple(obj.box), others
    else:
        box = tuple(float(v) for v in p["object_box"])
        objects = others + [SceneObject(target, box, 1.0)]
    edit = Edit(st, scene, image, mask, target, asked, box, objects, p.get("donor"), p.get("edit_backend"))
    choice = Choice(
        (target, asked) if st == "paired" else (target,), p["prior"], p.get("prior_score"), p.get("prior_answer")
    )
    return edit, choice, png
