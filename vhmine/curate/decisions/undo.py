"""Undo: reverting a worker's last action, read from the action log.

Reopens an annotated or discarded task for the worker (its instances become discarded, "undone by
<worker>", never deleted), takes a skipped task back, restores confirmed drafts, or deletes a review
or a response label; then the action stays marked undone. Refuses when someone else built on it since. A task's
hold or release (curate.work.holds) is the system's, not the worker's: undo passes it over.

Concurrency, as every other transition: the action is claimed first (set `undone_at` only where it is
still unset), so of two undos racing for one action exactly one applies; the task changes only through
the compare-and-set on its `version` (`curate.base.tasks.compare_and_set`), so an undo and a concurrent take never
both win; instances are locked (FOR UPDATE on PostgreSQL) before checking for reviews, which `save_review` locks too.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from vhmine.curate.base import WorkerInfo, built_on, checked_worker, compare_and_set, retried
from vhmine.curate.decisions.derived import rederive
from vhmine.curate.work import HOLD_KINDS, LEASE_S
from vhmine.errors import InputError, LeaseError, StoreError
from vhmine.store import (
    Action,
    Instance,
    ResponseLabel,
    Review,
    Store,
    Task,
    utcnow,
)


def _claim(s: Session, act: Action, now: dt.datetime) -> None:
    res = s.execute(
        update(Action)
        .where(Action.id == act.id, Action.undone_at.is_(None))
        .values(undone_at=now)
        .execution_options(synchronize_session=False)
    )
    if res.rowcount != 1:  # another undo (a second tab, a double click) took it between our read and our write
        raise LeaseError(
            "cannot undo: your last action was undone elsewhere meanwhile (another tab?): nothing changed; "
            "reload the page"
        )


@retried
def undo_last(store: Store, worker: str | WorkerInfo, *, lease_s: float = LEASE_S) -> str:
    """Revert the worker's last action and say what was undone; InputError when there is none,
    LeaseError (nothing changed) when someone built on it or changed it meanwhile."""
    with store.session() as s:
        worker = checked_worker(s, worker).name
        now = utcnow()
        act = s.scalar(
            select(Action)
            .where(Action.worker == worker, Action.undone_at.is_(None), Action.kind.not_in(HOLD_KINDS))
            .order_by(Action.id.desc())
            .limit(1)
        )
        if act is None:
            raise InputError(f"nothing to undo for {worker}")
        _claim(s, act, now)
        p = act.payload or {}
        lease = dict(lease_worker=worker, lease_until=now + dt.timedelta(seconds=lease_s))
        if act.kind in ("annotate", "discard"):
            t = s.get(Task, act.task_id)
            if t.status == "open" or t.done_by != worker:
                raise LeaseError(f"cannot undo: item {t.id} was changed since by someone else")
            if act.kind == "annotate":
                ids = p.get("instances", [])
                insts = s.scalars(select(Instance).where(Instance.id.in_(ids)).with_for_update()).all()
                if built_on(s, ids):
                    raise LeaseError(
                        f"cannot undo: item {t.id}'s questions were already reviewed or answered by a model"
                    )
                for inst in insts:
                    inst.status, inst.discard_reason = "discarded", f"undone by {worker}"
                    inst.updated_by, inst.updated_at = worker, now
            if not compare_and_set(
                s, t, expect_status=t.status, status="open", discard_reason=None, done_by=None, done_at=None, **lease
            ):
                raise LeaseError(f"cannot undo: item {t.id} was changed by someone else meanwhile: nothing changed")
            what = f"{'annotation' if act.kind == 'annotate' else 'discard'} of item {t.id}"
        elif act.kind == "skip":
            t = s.get(Task, act.task_id)
            free = t.status == "open" and (t.lease_worker in (None, worker) or t.lease_until <= now)
            # the skip is undone either way; the item comes back only if nobody took it first
            back = free and compare_and_set(s, t, expect_status="open", **lease)
            if not back:
                s.refresh(t)
            what = f"skip of item {t.id}" + ("" if back else f" (the item is {_held(t, now)}, so it stays there)")
        elif act.kind == "confirm":
            sources = []
            for old in p.get("drafts", []):
                d = s.get(Instance, old["id"], with_for_update=True)
                if used := built_on(s, [d.id]):
                    raise LeaseError(f"cannot undo: the yes/no question {d.id} was already {used}")
                if (
                    d.status == "discarded"
                    and not d.retired_from
                    and not (d.discard_reason or "").startswith("draft rejected by")
                ):
                    raise LeaseError(f"cannot undo: the yes/no question {d.id} was removed since ({d.discard_reason})")
                d.question, d.truth, d.answers = old["question"], old["truth"], old["answers"]
                d.template_id, d.slots = old.get("template_id", d.template_id), old.get("slots", d.slots)
                d.draft_value, d.truth_fact = old.get("draft_value", d.draft_value), old.get("truth_fact")
                d.contradiction = d.contradiction if d.truth_fact else None
                d.status, d.discard_reason, d.retired_from = "draft", old.get("discard_reason"), None
                d.updated_by, d.updated_at = worker, now
                sources.append(d.derived_from)
            for src in dict.fromkeys(sources):  # a draft again: what its open answers derive now (it may be set aside)
                rederive(s, s.get(Instance, src), cause=f"confirmation undone by {worker}", by=worker, now=now)
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
        elif act.kind == "verify":  # a model draft accepted, edited or rejected (curate.work.verify)
            from vhmine.curate.work import undo_verify

            what = undo_verify(s, act, worker, now, lease)
        elif act.kind == "resolve":  # an admin's decision on the person-queue (curate.decisions.person_queue)
            from vhmine.curate.decisions.person_queue import undo_resolve

            what = undo_resolve(s, act, worker, now)
        elif act.kind.startswith("errata_"):  # a flag, or an admin's decision on one (curate.decisions.errata)
            from vhmine.curate.decisions.errata import undo_errata

            what = undo_errata(s, act, worker, now)
        else:  # pragma: no cover - every kind written above is handled
            raise StoreError(f"action {act.id} has unknown kind {act.kind!r}")
    return what


def _held(t: Task, now: dt.datetime) -> str:
    if t.status == "held":
        return f"held ({t.held_reason})"
    if t.status != "open":
        return f"{'annotated' if t.status == 'done' else t.status} by {t.done_by}"
    return f"leased to {t.lease_worker}" if t.lease_worker and t.lease_until > now else "open"
