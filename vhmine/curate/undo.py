"""Undo: reverting a worker's last action, read from the action log.

Reopens an annotated or discarded task for the worker (its instances become discarded, "undone by
<worker>", never deleted), takes a skipped task back, restores confirmed drafts, or deletes a review
or a response label; then marks the action undone. Refuses when someone else built on it since.
"""

from __future__ import annotations

import datetime as dt

from ..errors import InputError, LeaseError, StoreError
from ..store import (  # first: it says which extra to install when SQLAlchemy is missing
    Action, Instance, Response, ResponseLabel, Review, Store, Task, utcnow,
)

from sqlalchemy import func, select  # noqa: E402

from ._shared import _worker
from .queue import LEASE_S


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
                if s.scalar(select(func.count()).select_from(Response).where(Response.instance_id == d.id)):
                    raise LeaseError(f"cannot undo: the yes/no question {d.id} was already answered by a model")
                d.question, d.truth, d.answers = old["question"], old["truth"], old["answers"]
                d.template_id, d.slots = old.get("template_id", d.template_id), old.get("slots", d.slots)
                d.draft_value = old.get("draft_value", d.draft_value)
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
