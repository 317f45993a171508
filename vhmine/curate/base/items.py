"""The queue `Item` a task is shown as (leasing builds it, and so does saving), with an `ImageView` per image.

Reads the task's pair and images, or its image and the generation that made it, from the curation store;
writes nothing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from vhmine.store import (
    Generation,
    Image,
    Pair,
    Task,
)


@dataclass(frozen=True)
class ImageView:
    id: str
    role: str  # "A", "B" (sides of a pair) or "image"
    categories: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Item:
    task_id: str
    mode: str
    images: tuple[ImageView, ...]
    lease_until: dt.datetime
    pair_id: str | None = None
    prompt: str | None = None  # generated images: the prompt that made them
    scores: dict | None = None  # mined pairs: rank, clip_sim, dino_sim, gap

    def where(self, image_id: str) -> str:
        role = next(v.role for v in self.images if v.id == image_id)
        return f"image {role} ({image_id})" if role != "image" else f"image {image_id}"


def image_view(img: Image, role: str) -> ImageView:
    return ImageView(img.id, role, tuple(img.categories or ()), img.source)


def task_item(s: Session, t: Task) -> Item:
    """The task `t` as its queue item: a pair's two images with the pair's scores, or one generated image."""
    if t.pair_id:
        p = s.get(Pair, t.pair_id)
        views = (image_view(s.get(Image, p.image_a), "A"), image_view(s.get(Image, p.image_b), "B"))
        scores = {"rank": p.rank, "clip_sim": p.clip_sim, "dino_sim": p.dino_sim, "gap": p.gap}
        return Item(t.id, t.mode, views, t.lease_until, pair_id=p.id, scores=scores)
    gen = s.scalar(select(Generation).where(Generation.image_id == t.image_id))
    return Item(
        t.id,
        t.mode,
        (image_view(s.get(Image, t.image_id), "image"),),
        t.lease_until,
        prompt=gen.prompt if gen else None,
    )
