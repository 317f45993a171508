"""Curation: the library behind `apps/curate.py` and the `workers` / `seed` commands.

Reads and writes the curation store (vhmine.store): workers and their token hashes, the per-mode
queues of tasks with their leases, instances (OEQ questions with reference answers, YNQ variants
with their yes/no truth), blind reviews, worker labels of model responses, and an action log that
makes "undo the last action" possible. Image bytes are read only from paths recorded in the store.

Concurrency: a task is handed to one worker at a time through a lease (compare-and-set on the
task's `version`); saving requires the task to be open and leased to the saver (or to nobody), so a
second writer gets a LeaseError and nothing of the first is overwritten. Undo never deletes an
instance: it marks it discarded, "undone by <worker>".
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import logging
import math
import os
import re
import secrets
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from . import modes as M
from .errors import AuthError, FormError, InputError, LeaseError, StoreError
from .images import sha256_file
from .store import (  # first: it says which extra to install when SQLAlchemy is missing
    VERDICTS, Action, Generation, Image, Instance, Pair, Response, ResponseLabel, Review, Store, Task,
    Worker, open_store, resolve_url, display_url, utcnow,
)

from sqlalchemy import func, or_, select, update  # noqa: E402
from sqlalchemy.exc import IntegrityError  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

log = logging.getLogger(__name__)

LEASE_S = 15 * 60
UNANSWERABLE = "unanswerable"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_IMAGE_ID = re.compile(r"^[0-9a-f]{16}$")


def _new_id() -> str:
    return uuid.uuid4().hex[:16]


# --- workers -------------------------------------------------------------------------------------

def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    is_admin: bool
    active: bool


def add_worker(store: Store, name: str, *, admin: bool = False) -> str:
    """Register a worker and return their sign-in token; only its hash is kept, so show it once."""
    if not _NAME.match(name or ""):
        raise InputError(f"worker name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    token = "vhm_" + secrets.token_urlsafe(32)
    with store.session() as s:
        if s.get(Worker, name) is not None:
            raise InputError(f"worker {name!r} already exists in {store.display_url}: choose another name")
        s.add(Worker(name=name, token_hash=hash_token(token), is_admin=admin, active=True, created_at=utcnow()))
    return token


def list_workers(store: Store) -> list[WorkerInfo]:
    with store.session(write=False) as s:
        return [WorkerInfo(w.name, w.is_admin, w.active) for w in s.scalars(select(Worker).order_by(Worker.name))]


def sign_in(store: Store, token: str) -> WorkerInfo:
    """The worker whose token this is; AuthError (which never repeats the token) otherwise."""
    token = (token or "").strip()
    with store.session(write=False) as s:
        w = s.scalar(select(Worker).where(Worker.token_hash == hash_token(token))) if token else None
        if w is None or not w.active:
            raise AuthError("unknown or inactive token: ask an admin for one (`vhmine workers add NAME`)")
        return WorkerInfo(w.name, w.is_admin, w.active)


def _worker(s: Session, name: str, *, admin: bool = False) -> Worker:
    w = s.get(Worker, name)
    if w is None or not w.active:
        raise AuthError(f"worker {name!r} is unknown or inactive: sign in again")
    if admin and not w.is_admin:
        raise AuthError(f"worker {name!r} is not an admin: ask an admin (`vhmine workers add NAME --admin`)")
    return w


# --- images --------------------------------------------------------------------------------------

def image_file(store: Store, image_id: str) -> Path:
    """The recorded file of an image id. Nothing but a recorded id reaches the file system."""
    if not isinstance(image_id, str) or not _IMAGE_ID.match(image_id):
        raise InputError(f"{image_id!r} is not an image id (16 lower-case hex digits)")
    with store.session(write=False) as s:
        img = s.get(Image, image_id)
    if img is None:
        raise InputError(f"no image {image_id} in {store.display_url}")
    p = Path(img.path)
    if not p.is_file():
        raise StoreError(f"image {image_id} is recorded at {p}, which is missing: restore the file or re-seed")
    return p


def image_bytes(store: Store, image_id: str) -> bytes:
    """The bytes of a recorded image, checked against its recorded sha256."""
    p = image_file(store, image_id)
    data = p.read_bytes()
    with store.session(write=False) as s:
        want = s.get(Image, image_id).sha256
    if hashlib.sha256(data).hexdigest() != want:
        raise StoreError(f"image {image_id} at {p} no longer matches its recorded sha256: the file was changed; restore it")
    return data


# --- queue items ---------------------------------------------------------------------------------

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


def _free(now: dt.datetime):
    return or_(Task.lease_worker.is_(None), Task.lease_until <= now)


def _take(s: Session, t: Task, worker: str, now: dt.datetime, lease_s: float) -> bool:
    """Compare-and-set the lease: succeeds only if nobody changed the task since we read it."""
    res = s.execute(
        update(Task).where(Task.id == t.id, Task.version == t.version)
        .values(lease_worker=worker, lease_until=now + dt.timedelta(seconds=lease_s), version=t.version + 1)
        .execution_options(synchronize_session=False)
    )
    return res.rowcount == 1


def next_item(store: Store, worker: str, mode: str, *, lease_s: float = LEASE_S) -> Optional[Item]:
    """Lease the next open task of `mode` to `worker` (their current lease first; skipped ones last)."""
    mode = M.get_mode(mode).name
    with store.session() as s:
        _worker(s, worker)
        now = utcnow()
        mine = s.scalar(select(Task).where(Task.mode == mode, Task.status == "open", Task.lease_worker == worker,
                                           Task.lease_until > now).order_by(Task.priority, Task.id).limit(1))
        if mine is not None and _take(s, mine, worker, now, lease_s):
            return _item(s, s.get(Task, mine.id, populate_existing=True))
        skipped = select(Action.task_id).where(Action.worker == worker, Action.kind == "skip",
                                               Action.undone_at.is_(None), Action.task_id.is_not(None))
        base = select(Task).where(Task.mode == mode, Task.status == "open", _free(now))
        for q in (base.where(Task.id.not_in(skipped)), base.where(Task.id.in_(skipped))):
            for _ in range(5):  # others may win the race for the first few candidates
                cands = s.scalars(q.order_by(Task.priority, Task.id).limit(8)).all()
                if not cands:
                    break
                for t in cands:
                    if _take(s, t, worker, now, lease_s):
                        return _item(s, s.get(Task, t.id, populate_existing=True))
                s.expire_all()
    return None


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


# --- annotating ----------------------------------------------------------------------------------

@dataclass
class Annotation:
    """What a worker submits for one item."""

    template_id: str
    slots: dict[str, str] = field(default_factory=dict)
    question: Optional[str] = None  # the filled template, possibly reworded; None: the filled template
    answers: dict[str, Sequence[str] | str] = field(default_factory=dict)  # image id -> reference answers
    truths: dict[str, Optional[bool]] = field(default_factory=dict)  # image id -> yes/no truth (YNQ)
    targets: Optional[list[str]] = None  # image ids asked about; None: every image of the item


@dataclass(frozen=True)
class Saved:
    task_id: str
    instance_ids: tuple[str, ...]  # ready now
    draft_ids: tuple[str, ...]  # YNQ drafts waiting for the worker to confirm


def _validate(item: Item, ann: Annotation):
    mode = M.get_mode(item.mode)
    tpl = mode.template(ann.template_id)
    filled = M.fill(tpl, ann.slots)
    question = M.check_question(filled if ann.question is None else ann.question)
    ids = [v.id for v in item.images]
    targets = list(ann.targets) if ann.targets is not None else ids
    if not targets:
        raise FormError("targets", "no image chosen: choose the image(s) the question is about")
    bad = [t for t in targets if t not in ids]
    if bad:
        raise FormError("targets", f"image {bad[0]} is not part of item {item.task_id}")
    answers = {t: M.clean_answers(ann.answers.get(t)) for t in targets}
    for t in targets:
        if tpl.kind == M.OEQ:
            M.check_oeq_answers(mode, tpl, ann.slots, answers[t], item.where(t))
        else:
            M.check_ynq(ann.truths.get(t), answers[t], item.where(t))
    return mode, tpl, question, targets, answers


def save_annotation(store: Store, worker: str, task_id: str, ann: Annotation) -> Saved:
    """Save a worker's question and answers for an item; FormError (nothing saved) on bad input.

    An OEQ becomes one ready instance per target image plus drafted YNQ variants (status draft) that
    the worker confirms with `confirm_drafts`; a YNQ template becomes ready YNQ instances directly.
    """
    with store.session() as s:
        _worker(s, worker)
        now = utcnow()
        t = _lease_check(s, task_id, worker, now)
        item = _item(s, t)
        mode, tpl, question, targets, answers = _validate(item, ann)
        slots = {k: " ".join(str(ann.slots[k]).split()) for k in tpl.slots}
        _close(s, t, worker, now, "done")
        act = _log(s, worker, "annotate", task_id, {"template_id": tpl.id, "slots": slots, "question": question,
                                                     "targets": targets, "answers": answers,
                                                     "truths": {k: ann.truths.get(k) for k in targets}})
        ready, drafts = [], []
        for img in targets:
            common = dict(task_id=task_id, action_id=act.id, mode=mode.name, image_id=img, pair_id=item.pair_id,
                          created_by=worker, created_at=now)
            inst = Instance(id=_new_id(), kind=tpl.kind, template_id=tpl.id, slots=slots, question=question,
                            answers=answers[img], truth=ann.truths.get(img) if tpl.kind == M.YNQ else None,
                            status="ready", **common)
            s.add(inst)
            ready.append(inst.id)
            if tpl.kind != M.OEQ:
                continue
            others = [a for o in targets if o != img for a in answers[o]]
            for d in M.draft_ynq(mode, tpl, slots, answers[img], others):
                di = Instance(id=_new_id(), kind=M.YNQ, template_id=d.template_id, slots=d.slots, question=d.question,
                              answers=["Yes" if d.truth else "No"], truth=d.truth, derived_from=inst.id,
                              draft_value=d.value, status="draft", **common)
                s.add(di)
                drafts.append(di.id)
        act.payload = dict(act.payload, instances=ready + drafts)
    return Saved(task_id, tuple(ready), tuple(drafts))


@dataclass(frozen=True)
class DraftView:
    instance_id: str
    task_id: str
    image_id: str
    role: str  # "A" or "B" of a pair, "image" for a single image
    question: str
    truth: bool
    oeq_question: str
    oeq_answers: tuple[str, ...]


def pending_drafts(store: Store, worker: str, mode: Optional[str] = None) -> list[DraftView]:
    """The worker's drafted YNQs still waiting for confirmation: oldest item first, image A before B, yes first."""
    with store.session(write=False) as s:
        q = select(Instance).where(Instance.status == "draft", Instance.created_by == worker)
        if mode:
            q = q.where(Instance.mode == M.get_mode(mode).name)
        out = []
        for d in s.scalars(q):
            src = s.get(Instance, d.derived_from)
            pair = s.get(Pair, d.pair_id) if d.pair_id else None
            role = "image" if pair is None else ("A" if pair.image_a == d.image_id else "B")
            view = DraftView(d.id, d.task_id, d.image_id, role, d.question, bool(d.truth), src.question, tuple(src.answers))
            out.append(((d.created_at, d.task_id, role, not d.truth, d.id), view))
        return [v for _, v in sorted(out, key=lambda x: x[0])]


@dataclass
class DraftDecision:
    instance_id: str
    keep: bool
    question: Optional[str] = None  # reworded question; None keeps the draft's
    truth: Optional[bool] = None  # None keeps the draft's


def confirm_drafts(store: Store, worker: str, decisions: Iterable[DraftDecision]) -> list[str]:
    """Make kept drafts ready and reject the others; FormError (nothing saved) on a contradiction."""
    decisions = list(decisions)
    with store.session() as s:
        _worker(s, worker)
        now = utcnow()
        before, kept = [], []
        for dec in decisions:
            d = s.get(Instance, dec.instance_id)
            if d is None or d.status != "draft" or d.created_by != worker:
                raise LeaseError(f"{dec.instance_id} is not a draft of yours waiting for confirmation: reload the page")
            before.append({"id": d.id, "question": d.question, "truth": d.truth, "answers": d.answers})
            if dec.keep:
                truth = d.truth if dec.truth is None else dec.truth
                where = f"the yes/no question {d.id}"
                question = M.check_question(d.question if dec.question is None else dec.question)
                M.check_draft(truth, d.draft_value, s.get(Instance, d.derived_from).answers, where)
                d.question, d.truth, d.status = question, truth, "ready"
                d.answers = ["Yes" if truth else "No"]
                kept.append(d.id)
            else:
                d.status, d.discard_reason = "discarded", f"draft rejected by {worker}"
            d.updated_by, d.updated_at = worker, now
        if decisions:
            _log(s, worker, "confirm", None, {"drafts": before})
    return kept


def discard(store: Store, worker: str, task_id: str, reason: str) -> None:
    """Discard an item with a reason (no unambiguous question fits)."""
    reason = " ".join((reason or "").split())
    if not reason:
        raise FormError("reason", "give a reason for discarding, e.g. 'no unambiguous question fits'")
    with store.session() as s:
        _worker(s, worker)
        now = utcnow()
        t = _lease_check(s, task_id, worker, now)
        _close(s, t, worker, now, "discarded", reason)
        _log(s, worker, "discard", task_id, {"reason": reason})


def skip(store: Store, worker: str, task_id: str) -> None:
    """Give the item back to the queue; it comes back to this worker only after all others."""
    with store.session() as s:
        _worker(s, worker)
        t = _lease_check(s, task_id, worker, utcnow())
        s.execute(update(Task).where(Task.id == t.id, Task.version == t.version)
                  .values(lease_worker=None, lease_until=None, version=t.version + 1)
                  .execution_options(synchronize_session=False))
        _log(s, worker, "skip", task_id, {})


def undo_last(store: Store, worker: str, *, lease_s: float = LEASE_S) -> str:
    """Revert the worker's last action and say what was undone; InputError when there is none."""
    with store.session() as s:
        _worker(s, worker)
        now = utcnow()
        act = s.scalar(select(Action).where(Action.worker == worker, Action.undone_at.is_(None))
                       .order_by(Action.id.desc()).limit(1))
        if act is None:
            raise InputError(f"nothing to undo for {worker}")
        p = act.payload or {}
        if act.kind in ("annotate", "discard"):
            t = s.get(Task, act.task_id)
            if t.status == "open" or t.done_by != worker:
                raise LeaseError(f"cannot undo: item {t.id} was changed since by someone else")
            if act.kind == "annotate":
                ids = p.get("instances", [])
                used = s.scalar(select(func.count()).select_from(Review).where(Review.instance_id.in_(ids))) or 0
                used += s.scalar(select(func.count()).select_from(Response).where(Response.instance_id.in_(ids))) or 0
                if used:
                    raise LeaseError(f"cannot undo: item {t.id}'s questions were already reviewed or answered by a model")
                for inst in s.scalars(select(Instance).where(Instance.id.in_(ids))):
                    inst.status, inst.discard_reason = "discarded", f"undone by {worker}"
                    inst.updated_by, inst.updated_at = worker, now
            t.status, t.discard_reason, t.done_by, t.done_at = "open", None, None, None
            t.lease_worker, t.lease_until = worker, now + dt.timedelta(seconds=lease_s)
            t.version += 1
            what = f"{'annotation' if act.kind == 'annotate' else 'discard'} of item {t.id}"
        elif act.kind == "skip":
            t = s.get(Task, act.task_id)
            if t.status == "open" and (t.lease_worker is None or t.lease_until <= now):
                t.lease_worker, t.lease_until = worker, now + dt.timedelta(seconds=lease_s)
                t.version += 1
            what = f"skip of item {t.id}"
        elif act.kind == "confirm":
            for old in p.get("drafts", []):
                d = s.get(Instance, old["id"])
                if s.scalar(select(func.count()).select_from(Review).where(Review.instance_id == d.id)):
                    raise LeaseError(f"cannot undo: the yes/no question {d.id} was already reviewed")
                d.question, d.truth, d.answers = old["question"], old["truth"], old["answers"]
                d.status, d.discard_reason, d.updated_by, d.updated_at = "draft", None, worker, now
            what = f"confirmation of {len(p.get('drafts', []))} yes/no question(s)"
        elif act.kind == "review":
            r = s.get(Review, (p["instance_id"], worker))
            if r is not None:
                s.delete(r)
            what = f"review of {p['instance_id']}"
        elif act.kind == "label":
            r = s.get(ResponseLabel, (p["response_id"], worker))
            if r is not None:
                s.delete(r)
            what = f"label of response {p['response_id']}"
        else:  # pragma: no cover - every kind written above is handled
            raise StoreError(f"action {act.id} has unknown kind {act.kind!r}")
        act.undone_at = now
    return what


# --- progress ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Progress:
    mode: str
    total: int
    done: int
    discarded: int
    remaining: int
    ready_instances: int


def progress(store: Store) -> list[Progress]:
    """Per mode, in the modes' order: tasks done, discarded and remaining, and ready instances."""
    with store.session(write=False) as s:
        counts: dict[tuple[str, str], int] = {
            (m, st): n for m, st, n in s.execute(select(Task.mode, Task.status, func.count()).group_by(Task.mode, Task.status))
        }
        ready = dict(s.execute(select(Instance.mode, func.count()).where(Instance.status == "ready").group_by(Instance.mode)).all())
    out = []
    for m in M.mode_names():
        d, x, o = counts.get((m, "done"), 0), counts.get((m, "discarded"), 0), counts.get((m, "open"), 0)
        out.append(Progress(m, d + x + o, d, x, o, ready.get(m, 0)))
    return out


# --- review --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReviewItem:
    instance_id: str
    mode: str
    kind: str
    question: str
    image_id: str  # blind: no reference answer, no author


def next_review(store: Store, worker: str, mode: str) -> Optional[ReviewItem]:
    """A ready instance of `mode` that someone else wrote and `worker` has not answered, fewest reviews first."""
    mode = M.get_mode(mode).name
    with store.session(write=False) as s:
        _worker(s, worker)
        mine = select(Review.instance_id).where(Review.worker == worker)
        n = select(Review.instance_id, func.count().label("n")).group_by(Review.instance_id).subquery()
        inst = s.scalar(
            select(Instance).outerjoin(n, n.c.instance_id == Instance.id)
            .where(Instance.mode == mode, Instance.status == "ready", Instance.created_by != worker,
                   Instance.id.not_in(mine))
            .order_by(func.coalesce(n.c.n, 0), Instance.task_id, Instance.id).limit(1)
        )
        if inst is None:
            return None
        return ReviewItem(inst.id, inst.mode, inst.kind, inst.question, inst.image_id)


def _author_label(inst: Instance) -> str:
    if inst.kind == M.YNQ:
        return "yes" if inst.truth else "no"
    return M.normalize_answer(inst.answers[0])


def _review_label(inst: Instance, answer: str) -> str:
    if inst.kind == M.YNQ:
        yn = M.yes_no_of(answer)
        return UNANSWERABLE if yn is None else ("yes" if yn else "no")
    norm = M.normalize_answer(answer)
    if norm in {M.normalize_answer(a) for a in inst.answers}:
        return _author_label(inst)  # any acceptable answer agrees with the author
    return norm


def save_review(store: Store, worker: str, instance_id: str, answer: str) -> None:
    """Save a blind answer. YNQ: yes, no or "can't tell"; OEQ: free text or "can't tell"."""
    answer = " ".join((answer or "").split())
    if not answer:
        raise FormError("answer", "the answer is empty: answer the question, or choose \"can't tell\"")
    with store.session() as s:
        _worker(s, worker)
        inst = s.get(Instance, instance_id)
        if inst is None or inst.status != "ready":
            raise InputError(f"no ready instance {instance_id!r} to review")
        if inst.created_by == worker:
            raise AuthError(f"you wrote instance {instance_id}: reviews must come from another worker")
        if inst.kind == M.YNQ and M.yes_no_of(answer) is None and answer.lower() != "can't tell":
            raise FormError("answer", f"answer {answer!r} is not yes, no or can't tell")
        if s.get(Review, (instance_id, worker)) is not None:
            raise LeaseError(f"you already reviewed instance {instance_id}: undo it first to change it")
        label = UNANSWERABLE if answer.lower() == "can't tell" else _review_label(inst, answer)
        act = _log(s, worker, "review", inst.task_id, {"instance_id": instance_id, "answer": answer})
        s.add(Review(instance_id=instance_id, worker=worker, answer=answer, label=label, action_id=act.id,
                     created_at=utcnow()))
        try:
            s.flush()
        except IntegrityError:
            raise LeaseError(f"you already reviewed instance {instance_id}: undo it first to change it") from None


# --- agreement -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModeAgreement:
    mode: str
    statistic: Optional[str]  # "cohen", "fleiss", or None when fewer than two workers rated an item
    kappa: Optional[float]  # None when undefined (no items, or every rating in one category)
    items: int  # items with at least two ratings
    raters: int
    disagreements: int


@dataclass(frozen=True)
class Disagreement:
    item_id: str
    mode: str
    question: str
    ratings: dict  # worker -> their answer (as written) ; labels compared are normalized


def _ratings(s: Session, what: str) -> dict[str, dict[str, dict[str, tuple[str, str]]]]:
    """mode -> item id -> worker -> (label, shown answer), for items with two or more ratings."""
    out: dict[str, dict[str, dict[str, tuple[str, str]]]] = {}
    if what == "instances":
        rows = s.execute(select(Instance, Review).join(Review, Review.instance_id == Instance.id)
                         .where(Instance.status == "ready")).all()
        for inst, r in rows:
            d = out.setdefault(inst.mode, {}).setdefault(inst.id, {})
            d[inst.created_by] = (_author_label(inst), "yes" if inst.kind == M.YNQ and inst.truth else
                                  "no" if inst.kind == M.YNQ else inst.answers[0])
            d[r.worker] = (r.label, r.answer)
    else:
        rows = s.execute(select(Instance.mode, ResponseLabel)
                         .join(Response, Response.id == ResponseLabel.response_id)
                         .join(Instance, Instance.id == Response.instance_id)).all()
        for mode, lab in rows:
            out.setdefault(mode, {}).setdefault(lab.response_id, {})[lab.worker] = (lab.verdict, lab.verdict)
    return {m: {i: r for i, r in items.items() if len(r) >= 2} for m, items in out.items()}


def _defined(k: float) -> Optional[float]:
    return None if math.isnan(k) else k


def agreement(store: Store, what: str = "instances") -> list[ModeAgreement]:
    """Per mode: Cohen's kappa when exactly two workers rated, Fleiss' kappa when more.

    `what="instances"`: the author's reference answer against blind reviews; `what="responses"`:
    workers' correct/hallucinated labels of model responses.
    """
    from .agreement import cohen_kappa, fleiss_kappa

    with store.session(write=False) as s:
        data = _ratings(s, what)
    out = []
    for m in M.mode_names():
        items = data.get(m, {})
        raters = sorted({w for r in items.values() for w in r})
        dis = sum(1 for r in items.values() if len({lab for lab, _ in r.values()}) > 1)
        if not items:
            out.append(ModeAgreement(m, None, None, 0, len(raters), 0))
        elif len(raters) == 2:
            a = [r[raters[0]][0] for r in items.values()]
            b = [r[raters[1]][0] for r in items.values()]
            out.append(ModeAgreement(m, "cohen", _defined(cohen_kappa(a, b)), len(items), 2, dis))
        else:
            k = fleiss_kappa([[lab for lab, _ in r.values()] for r in items.values()])
            out.append(ModeAgreement(m, "fleiss", _defined(k), len(items), len(raters), dis))
    return out


def disagreements(store: Store, mode: Optional[str] = None, what: str = "instances") -> list[Disagreement]:
    """Items on which the workers' normalized answers differ, by mode then id."""
    with store.session(write=False) as s:
        data = _ratings(s, what)
        questions: dict[str, str] = {}
        for items in data.values():
            ids = list(items)
            if what == "instances":
                questions.update(dict(s.execute(select(Instance.id, Instance.question).where(Instance.id.in_(ids))).all()))
            else:
                questions.update(dict(s.execute(select(Response.id, Instance.question)
                                                 .join(Instance, Instance.id == Response.instance_id)
                                                 .where(Response.id.in_(ids))).all()))
    out = []
    for m in M.mode_names():
        if mode and m != M.get_mode(mode).name:
            continue
        for iid in sorted(data.get(m, {})):
            r = data[m][iid]
            if len({lab for lab, _ in r.values()}) > 1:
                out.append(Disagreement(iid, m, questions[iid], {w: shown for w, (_, shown) in sorted(r.items())}))
    return out


# --- model responses (written by the probe stage) and worker labels ------------------------------

def add_response(store: Store, instance_id: str, model: str, prompt: str, answer: str,
                 verdict: Optional[str] = None, judge: Optional[str] = None) -> str:
    if verdict is not None and verdict not in VERDICTS:
        raise InputError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    with store.session() as s:
        if s.get(Instance, instance_id) is None:
            raise InputError(f"no instance {instance_id!r} in {store.display_url}")
        rid = _new_id()
        s.add(Response(id=rid, instance_id=instance_id, model=model, prompt=prompt, answer=answer, verdict=verdict,
                       judge=judge, created_at=utcnow()))
    return rid


@dataclass(frozen=True)
class ResponseItem:
    response_id: str
    mode: str
    kind: str
    question: str
    answers: tuple[str, ...]
    truth: Optional[bool]
    image_id: str
    model_answer: str  # the model's name is not shown: labels should not depend on it


def next_response(store: Store, worker: str, mode: Optional[str] = None) -> Optional[ResponseItem]:
    """A model response the worker has not labelled, fewest labels first."""
    with store.session(write=False) as s:
        _worker(s, worker)
        mine = select(ResponseLabel.response_id).where(ResponseLabel.worker == worker)
        n = select(ResponseLabel.response_id, func.count().label("n")).group_by(ResponseLabel.response_id).subquery()
        q = (select(Response, Instance).join(Instance, Instance.id == Response.instance_id)
             .outerjoin(n, n.c.response_id == Response.id)
             .where(Response.id.not_in(mine), Instance.status == "ready"))
        if mode:
            q = q.where(Instance.mode == M.get_mode(mode).name)
        row = s.execute(q.order_by(func.coalesce(n.c.n, 0), Response.id).limit(1)).first()
        if row is None:
            return None
        r, inst = row
        return ResponseItem(r.id, inst.mode, inst.kind, inst.question, tuple(inst.answers), inst.truth,
                            inst.image_id, r.answer)


def label_response(store: Store, worker: str, response_id: str, verdict: str) -> None:
    """Mark a model response correct or hallucinated."""
    if verdict not in VERDICTS:
        raise FormError("verdict", f"choose one of: {', '.join(VERDICTS)}")
    with store.session() as s:
        _worker(s, worker)
        if s.get(Response, response_id) is None:
            raise InputError(f"no response {response_id!r} in the store")
        if s.get(ResponseLabel, (response_id, worker)) is not None:
            raise LeaseError(f"you already labelled response {response_id}: undo it first to change it")
        act = _log(s, worker, "label", None, {"response_id": response_id, "verdict": verdict})
        s.add(ResponseLabel(response_id=response_id, worker=worker, verdict=verdict, action_id=act.id, created_at=utcnow()))


# --- generated images (written by the generate stage) --------------------------------------------

def add_generation(store: Store, path: str | Path, mode: str, prompt: str, *, backend: str, model: str,
                   seed: Optional[int] = None, description_id: Optional[str] = None,
                   params: Optional[Mapping] = None, priority: float = 0.0) -> str:
    """Record a generated image with its provenance and queue it in `mode`; returns the task id."""
    mode = M.get_mode(mode).name
    p = Path(path).resolve()
    if not p.is_file():
        raise InputError(f"generated image {p} does not exist")
    sha = sha256_file(p)
    now = utcnow()
    with store.session() as s:
        img = s.get(Image, sha[:16])
        if img is None:
            img = Image(id=sha[:16], sha256=sha, path=str(p), source="generated", categories=[], created_at=now)
            s.add(img)
        if s.scalar(select(Generation).where(Generation.image_id == img.id)) is None:
            s.add(Generation(id=_new_id(), image_id=img.id, mode=mode, prompt=prompt, description_id=description_id,
                             backend=backend, model=model, seed=seed, params=dict(params or {}), created_at=now))
        tid = f"{mode}:{img.id}"
        if s.get(Task, tid) is None:
            s.add(Task(id=tid, mode=mode, image_id=img.id, priority=priority, status="open", version=0, created_at=now))
    return tid


# --- reading ready instances (for export and eval) -----------------------------------------------

@dataclass(frozen=True)
class InstanceRecord:
    id: str
    mode: str
    kind: str
    question: str
    template_id: str
    slots: dict
    answers: tuple[str, ...]
    truth: Optional[bool]
    status: str
    image_id: str
    image_sha256: str
    image_path: str
    image_source: str
    pair_id: Optional[str]
    other_image_id: Optional[str]  # the pair's other image, when the item was a pair
    derived_from: Optional[str]
    task_id: str
    created_by: str
    created_at: dt.datetime


def _record(inst: Instance, img: Image, pair: Optional[Pair]) -> InstanceRecord:
    other = None if pair is None else (pair.image_b if pair.image_a == inst.image_id else pair.image_a)
    return InstanceRecord(inst.id, inst.mode, inst.kind, inst.question, inst.template_id, dict(inst.slots),
                          tuple(inst.answers), inst.truth, inst.status, img.id, img.sha256, img.path, img.source,
                          inst.pair_id, other, inst.derived_from, inst.task_id, inst.created_by, inst.created_at)


def ready_instances(store: Store, mode: Optional[str] = None, kind: Optional[str] = None) -> list[InstanceRecord]:
    """Every ready instance (optionally of one mode / kind), sorted by mode order, kind, then id."""
    if kind is not None and kind not in M.KINDS:
        raise InputError(f"kind {kind!r} is not one of {', '.join(M.KINDS)}")
    with store.session(write=False) as s:
        q = (select(Instance, Image, Pair).join(Image, Image.id == Instance.image_id)
             .outerjoin(Pair, Pair.id == Instance.pair_id).where(Instance.status == "ready"))
        if mode:
            q = q.where(Instance.mode == M.get_mode(mode).name)
        if kind:
            q = q.where(Instance.kind == kind)
        recs = [_record(i, img, p) for i, img, p in s.execute(q)]
    order = {m: k for k, m in enumerate(M.mode_names())}
    return sorted(recs, key=lambda r: (order[r.mode], r.kind, r.id))


def get_instance(store: Store, instance_id: str) -> InstanceRecord:
    with store.session(write=False) as s:
        row = s.execute(select(Instance, Image, Pair).join(Image, Image.id == Instance.image_id)
                        .outerjoin(Pair, Pair.id == Instance.pair_id).where(Instance.id == instance_id)).first()
    if row is None:
        raise InputError(f"no instance {instance_id!r} in {store.display_url}")
    return _record(*row)


# --- serving the app -----------------------------------------------------------------------------

def default_app_path() -> Path:
    return Path(__file__).resolve().parent.parent / "apps" / "curate.py"


def streamlit_command(app_path: Path, host: str, port: int) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(app_path), "--server.address", host,
            "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none", "--server.runOnSave", "false", "--client.toolbarMode", "minimal"]


def run_app(db: Optional[str] = None, host: str = "127.0.0.1", port: int = 8501, app_path: Optional[Path] = None) -> int:
    """Open (and migrate) the store, then serve the Streamlit app on it until interrupted."""
    if importlib.util.find_spec("streamlit") is None:
        raise StoreError("the curation app needs streamlit: pip install 'vhmine[app]'")
    app_path = Path(app_path) if app_path else default_app_path()
    if not app_path.is_file():
        raise InputError(f"the curation app {app_path} is missing: it ships with the source checkout "
                         "(apps/curate.py); run from a clone or pass --app PATH")
    url = resolve_url(db)
    open_store(url).close()  # errors (newer schema, bad URL) show here, not in the browser
    env = dict(os.environ, VHMINE_DB=url)
    log.info("curation app on http://%s:%d (store %s)", host, port, display_url(url))
    try:
        return subprocess.call(streamlit_command(app_path, host, port), env=env)
    except KeyboardInterrupt:
        return 0
