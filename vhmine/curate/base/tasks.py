"""What more than one curation module needs: ids, the action log, worker checks, lease checks.

Reads workers and tasks (with the pair, images and generation a task shows) from the curation store
(vhmine.store); writes action-log rows and changes tasks only through one compare-and-set on the
task's `version` (`_cas`), which leasing, saving, discarding, skipping and undoing all use; every
transition runs through `_retried`, so a PostgreSQL deadlock or serialization failure, or a connection
lost before the commit (a server restart), is retried in a fresh transaction and never reaches the app
as a driver exception. Also the queue `Item` a task is shown as (leasing builds it, and so does saving),
and `WorkerInfo`, the signed-in worker the app passes to every call.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import random
import time
import uuid
from dataclasses import dataclass
from typing import Optional

from vhmine.errors import AuthError, InputError, LeaseError, StoreConnectionError
from vhmine.store import (  # first: it says which extra to install when SQLAlchemy is missing
    Action, Generation, Image, Pair, Response, Review, Task, Worker, utcnow,
)
from vhmine.store.db import is_disconnect

from sqlalchemy import func, select, update  # noqa: E402
from sqlalchemy.exc import DBAPIError  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402


TRIES = 4  # attempts of a transition that PostgreSQL aborted to break a deadlock, or whose connection broke
_ABORTED = {"40P01": "a deadlock", "40001": "a serialization conflict"}  # PostgreSQL SQLSTATEs worth a retry


def _retried(fn):
    """Run the curation transition `fn` (which opens its own transaction) again when PostgreSQL aborted
    it to break a deadlock or a serialization conflict with another worker, or when the connection broke
    before its commit (the server restarted): the rolled-back attempt changed nothing, and the next one
    waits for the server (Store.session). A connection that broke during the commit itself is not retried
    (StoreConnectionError: it may have been saved), so nothing is applied twice. After TRIES attempts, an
    error that says so, never the driver's exception."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        for attempt in range(TRIES):
            try:
                return fn(*args, **kwargs)
            except DBAPIError as err:
                orig = err.orig
                why = _ABORTED.get(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None))
                if why is None and is_disconnect(err):
                    why = "a lost connection"
                    continue  # the next attempt's session waits for the server to come back
                if why is None:
                    raise
            if attempt + 1 < TRIES:
                time.sleep(random.uniform(0, 0.02 * 2 ** attempt))  # let the other side finish first
        if why == "a lost connection":
            raise StoreConnectionError(f"{fn.__name__.replace('_', ' ')}: the connection to the store broke {TRIES} times "
                                       "before saving: nothing saved; try again")
        raise LeaseError(f"the store is busy: {fn.__name__.replace('_', ' ')} was aborted {TRIES} times by the database "
                         f"to resolve {why} with other workers: nothing saved; try again")
    return run


def _new_id() -> str:
    return uuid.uuid4().hex[:16]


def derived_id(source_id: str, question: str) -> str:
    """The id of the yes/no question drafted from the open question `source_id` as `question`: a function of the
    source and the draft alone, so the same answers draft the same ids whatever path led there (curate.derived)."""
    key = " ".join(question.lower().split()).rstrip("?. ")
    return hashlib.sha256(f"{source_id}\n{key}".encode()).hexdigest()[:16]


def _text(value: Optional[str]) -> str:
    """A worker's free text with its whitespace collapsed to single spaces (None: "")."""
    return " ".join((value or "").split())


@dataclass(frozen=True)
class WorkerInfo:
    """A worker as signed in: `generation` is the worker's token generation at sign-in."""

    name: str
    is_admin: bool
    active: bool
    generation: int = 0


def _worker(s: Session, who: "str | WorkerInfo", *, admin: bool = False) -> Worker:
    """The worker row of `who`, checked on every call: active, an admin when `admin`, and, for a
    signed-in WorkerInfo, still on the token it signed in with (a rotated token or a deactivation
    bumps the generation). A bare name is a caller that holds the store itself (CLI, scripts)."""
    name = who if isinstance(who, str) else who.name
    w = s.get(Worker, name)
    if w is None or not w.active:
        raise AuthError(f"worker {name!r} is unknown or inactive: sign in again")
    if isinstance(who, WorkerInfo) and who.generation != w.token_generation:
        raise AuthError(f"the sign-in of {name!r} is no longer valid (the token was replaced or the worker "
                        "deactivated): nothing saved; sign in again with the current token")
    if admin and not w.is_admin:
        raise AuthError(f"worker {name!r} is not an admin: ask an admin (`vhmine workers add NAME --admin`)")
    return w


def _admin(s: Session, by: "str | WorkerInfo | None") -> None:
    """Admin actions: `by` is the signed-in worker asking, who must be an admin; None is the store's
    operator (the CLI), who holds the database itself."""
    if by is not None:
        _worker(s, by, admin=True)


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


def _cas(s: Session, t: Task, *, expect_status: Optional[str] = None, **values) -> bool:
    """Change task `t` only if nobody changed it since we read it (same `version`, and status
    `expect_status` when given), bumping the version; False when someone else won and nothing was
    written. On PostgreSQL a concurrent UPDATE waits for ours, then no longer matches."""
    cond = [Task.id == t.id, Task.version == t.version] + ([Task.status == expect_status] if expect_status else [])
    res = s.execute(update(Task).where(*cond).values(**values, version=t.version + 1)
                    .execution_options(synchronize_session=False))
    return res.rowcount == 1


def _close(s: Session, t: Task, worker: str, now: dt.datetime, status: str, reason: Optional[str] = None) -> None:
    if not _cas(s, t, expect_status="open", status=status, discard_reason=reason, done_by=worker, done_at=now,
                lease_worker=None, lease_until=None):  # someone saved or took it between our read and our write
        raise LeaseError(f"item {t.id} was changed by another worker while you worked on it: nothing saved; take the next item")


def _used(s: Session, ids: list[str]) -> str:
    """What already built on these instances ("" when nothing): a review or a model's answer."""
    if s.scalar(select(func.count()).select_from(Review).where(Review.instance_id.in_(ids))):
        return "reviewed"
    if s.scalar(select(func.count()).select_from(Response).where(Response.instance_id.in_(ids))):
        return "answered by a model"
    return ""
