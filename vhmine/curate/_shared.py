"""What more than one curation module needs: ids, the action log, worker lookup, lease checks.

Reads workers and tasks (with the pair, images and generation a task shows) from the curation store
(vhmine.store); writes action-log rows and closes tasks with a compare-and-set on the task's
`version`. Also the queue `Item` a task is shown as: leasing builds it, and so does saving.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Optional

from ..errors import AuthError, InputError, LeaseError
from ..store import (  # first: it says which extra to install when SQLAlchemy is missing
    Action, Generation, Image, Pair, Task, Worker, utcnow,
)

from sqlalchemy import select, update  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402


def _new_id() -> str:
    return uuid.uuid4().hex[:16]


def _worker(s: Session, name: str, *, admin: bool = False) -> Worker:
    w = s.get(Worker, name)
    if w is None or not w.active:
        raise AuthError(f"worker {name!r} is unknown or inactive: sign in again")
    if admin and not w.is_admin:
        raise AuthError(f"worker {name!r} is not an admin: ask an admin (`vhmine workers add NAME --admin`)")
    return w


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
    pair_id: Optional[str] = None
    prompt: Optional[str] = None  # generated images: the prompt that made them
    scores: Optional[dict] = None  # mined pairs: rank, clip_sim, dino_sim, gap

    def where(self, image_id: str) -> str:
        role = next(v.role for v in self.images if v.id == image_id)
        return f"image {role} ({image_id})" if role != "image" else f"image {image_id}"


def _view(img: Image, role: str) -> ImageView:
    return ImageView(img.id, role, tuple(img.categories or ()), img.source)


def _item(s: Session, t: Task) -> Item:
    if t.pair_id:
        p = s.get(Pair, t.pair_id)
        views = (_view(s.get(Image, p.image_a), "A"), _view(s.get(Image, p.image_b), "B"))
        scores = {"rank": p.rank, "clip_sim": p.clip_sim, "dino_sim": p.dino_sim, "gap": p.gap}
        return Item(t.id, t.mode, views, t.lease_until, pair_id=p.id, scores=scores)
    gen = s.scalar(select(Generation).where(Generation.image_id == t.image_id))
    return Item(t.id, t.mode, (_view(s.get(Image, t.image_id), "image"),), t.lease_until,
                prompt=gen.prompt if gen else None)


def _log(s: Session, worker: str, kind: str, task_id: Optional[str], payload: dict) -> Action:
    a = Action(worker=worker, kind=kind, task_id=task_id, payload=payload, created_at=utcnow())
    s.add(a)
    s.flush()
    return a


def _lease_check(s: Session, task_id: str, worker: str, now: dt.datetime) -> Task:
    t = s.get(Task, task_id)
    if t is None:
        raise InputError(f"no task {task_id!r} in the store")
    if t.status != "open":
        raise LeaseError(f"item {task_id} was already {'annotated' if t.status == 'done' else t.status} by "
                         f"{t.done_by} at {t.done_at:%Y-%m-%d %H:%M} UTC: nothing saved; take the next item")
    if t.lease_worker not in (None, worker) and t.lease_until > now:
        raise LeaseError(f"item {task_id} is leased to {t.lease_worker} until {t.lease_until:%H:%M:%S} UTC: "
                         "nothing saved; take the next item")
    return t


def _close(s: Session, t: Task, worker: str, now: dt.datetime, status: str, reason: Optional[str] = None) -> None:
    res = s.execute(
        update(Task).where(Task.id == t.id, Task.version == t.version, Task.status == "open")
        .values(status=status, discard_reason=reason, done_by=worker, done_at=now, lease_worker=None,
                lease_until=None, version=t.version + 1)
        .execution_options(synchronize_session=False)
    )
    if res.rowcount != 1:  # someone saved or took it between our read and our write
        raise LeaseError(f"item {t.id} was changed by another worker while you worked on it: nothing saved; take the next item")
