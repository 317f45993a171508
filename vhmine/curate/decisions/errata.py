"""Errata: any worker flags a (released) instance as wrong with a reason; an admin accepts or rejects the flag.

Reads and writes `errata` and the instances they name, and logs every step in the action log so that
the next export's changelog (`vhmine export --since`) can say who changed what and why:
`errata_flag` {"instance_id", "reason", "flag_id"} by the flagger; `errata_accept` / `errata_reject`
{"instance_id", "reason", "changes": {field: [old, new]}, "flag_id", "derived"} by the admin. Accepting fixes
the instance in place, so it keeps the id exports give it: a new reference answer (OEQ) or truth (YNQ),
or the instance discarded; and carries the fix through to everything derived from it (curate.decisions.derived: the
yes/no questions drafted from it, model verdicts, workers' labels, blind answers and flags, reviews, pair
groups), the entries of which `derived` lists. Deciding needs an admin (`by`, checked in the store on every call); a
flag is decided once (compare-and-set on its status) and the instance is locked while it changes. Undo
(curate.decisions.undo) withdraws a flag still open, or takes a decision back while the instance still holds what it
set, with everything the decision derived (curate.decisions.derived.reverse).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, checked_worker, collapse_whitespace, log_action, new_id, retried
from vhmine.curate.decisions import derived as D
from vhmine.curate.decisions.derived import _plain
from vhmine.errors import FormError, InputError, LeaseError
from vhmine.store import (
    Action,
    Erratum,
    Instance,
    Store,
    utcnow,
)


@dataclass(frozen=True)
class ErratumView:
    id: str
    instance_id: str
    mode: str
    kind: str
    question: str
    answers: tuple[str, ...]
    truth: bool | None
    image_id: str
    instance_status: str
    flagged_by: str
    reason: str
    proposed: str | None
    status: str
    decided_by: str | None
    decision_reason: str | None
    changes: dict | None
    created_at: dt.datetime


@retried
def flag_instance(
    store: Store, worker: str | WorkerInfo, instance_id: str, reason: str, proposed: str | None = None
) -> str:
    """Flag a ready instance (its id as exports write it) as wrong; returns the flag's id."""
    instance_id, reason = collapse_whitespace(instance_id), collapse_whitespace(reason)
    if not reason:
        raise FormError("reason", "say what is wrong with the item, e.g. 'image B shows three cats, not two'")
    with store.session() as s:
        name = checked_worker(s, worker).name
        inst = s.get(Instance, instance_id)
        if inst is None or inst.status != "ready":
            raise InputError(
                f"no ready instance {instance_id!r} to flag: copy the id from the export "
                "(instances.jsonl, field id) or pick the item from the list"
            )
        e = Erratum(
            id=new_id(),
            instance_id=inst.id,
            flagged_by=name,
            reason=reason,
            proposed=collapse_whitespace(proposed) or None,
            status="open",
            created_at=utcnow(),
        )
        s.add(e)
        s.flush()
        log_action(s, name, "errata_flag", inst.task_id, {"instance_id": inst.id, "reason": reason, "flag_id": e.id})
        return e.id


def _view(e: Erratum, inst: Instance) -> ErratumView:
    return ErratumView(
        e.id,
        inst.id,
        inst.mode,
        inst.kind,
        inst.question,
        tuple(inst.answers),
        inst.truth,
        inst.image_id,
        inst.status,
        e.flagged_by,
        e.reason,
        e.proposed,
        e.status,
        e.decided_by,
        e.decision_reason,
        e.changes,
        e.created_at,
    )


def errata_list(
    store: Store, worker: str | WorkerInfo, *, status: str | None = "open", mode: str | None = None
) -> list[ErratumView]:
    """Flags, oldest first: every flag for an admin, a worker's own flags otherwise; `status` None: all."""
    with store.session(write=False) as s:
        w = checked_worker(s, worker)
        q = select(Erratum, Instance).join(Instance, Instance.id == Erratum.instance_id)
        if not w.is_admin:
            q = q.where(Erratum.flagged_by == w.name)
        if status:
            q = q.where(Erratum.status == status)
        if mode:
            q = q.where(Instance.mode == R.get_mode(mode).name)
        return [_view(e, i) for e, i in s.execute(q.order_by(Erratum.created_at, Erratum.id))]


def _decide(s: Session, flag_id: str, admin: str, now: dt.datetime, status: str, reason: str, changes: dict) -> Erratum:
    e = s.get(Erratum, flag_id)
    if e is None:
        raise InputError(f"no flag {flag_id!r} in the store")
    res = s.execute(
        update(Erratum)
        .where(Erratum.id == flag_id, Erratum.status == "open")
        .values(status=status, decided_by=admin, decided_at=now, decision_reason=reason, changes=changes)
        .execution_options(synchronize_session=False)
    )
    if res.rowcount != 1:  # another admin (or tab) decided it between our read and our write
        s.refresh(e)
        raise LeaseError(f"flag {flag_id} was already {e.status} by {e.decided_by or e.flagged_by}: nothing saved")
    return e


def _fix(mode: R.Mode, inst: Instance, answers: Sequence[str] | str | None, truth: bool | None) -> dict:
    """The changes {field: [old, new]} that put the admin's answer on the instance (checked as the annotate form
    checks)."""
    where = f"instance {inst.id}"
    if inst.kind == R.YNQ:
        if truth is None:
            raise FormError("truth", "a yes/no item is fixed by its truth: choose yes or no, or remove the item")
        R.check_ynq(truth, [], where)
        new = {"truth": truth, "answers": ["Yes" if truth else "No"]}
    else:
        clean = R.clean_answers(answers)
        try:
            tpl = mode.template(inst.template_id)
        except FormError:  # the worker's own question (`<mode>.own`): no template form to check
            tpl = None
        R.check_oeq_answers(mode, tpl if inst.slots else None, inst.slots or {}, clean, where)
        new = {"answers": clean}
    return {k: [getattr(inst, k), v] for k, v in new.items() if getattr(inst, k) != v}


def _truth_fact(s: Session, inst: Instance, changes: dict, by: str) -> dict:
    """A new truth for a drafted YNQ is a fact re-drafting never overwrites (curate.decisions.derived): it is recorded
    with the open answers it was decided against, and any contradiction it settles leaves the queue. Returns the
    payload's "fact" {"fact": [old, new], "contradiction": [old, None]} (a removal: its "contradiction" only), which
    undo puts back; {} when nothing changes."""
    if "status" in changes and inst.contradiction:  # removed: nothing left for the queue to decide
        old, inst.contradiction = inst.contradiction, None
        return {"contradiction": [old, None]}
    if "truth" not in changes or not inst.derived_from:
        return {}
    src = s.get(Instance, inst.derived_from)
    old = inst.truth_fact, inst.contradiction
    inst.truth_fact = {"truth": changes["truth"][1], "by": by, "source": list(src.answers) if src else None}
    inst.contradiction = None
    return {"fact": [old[0], inst.truth_fact], "contradiction": [old[1], None]}


@retried
def accept_erratum(
    store: Store,
    by: str | WorkerInfo,
    flag_id: str,
    *,
    answers: Sequence[str] | str | None = None,
    truth: bool | None = None,
    remove: bool = False,
    reason: str = "",
) -> dict:
    """An admin agrees the item is wrong: fix its answer (OEQ `answers`, YNQ `truth`) or `remove` it (discarded).
    Returns the changes {field: [old, new]}; the `errata_accept` action carries them with the reason (the
    admin's, else the flag's), and what the fix changed beyond the instance (curate.decisions.derived) under
    "derived"."""
    with store.session() as s:
        admin = checked_worker(s, by, admin=True).name
        now = utcnow()
        e = s.get(Erratum, flag_id)
        if e is None:
            raise InputError(f"no flag {flag_id!r} in the store")
        inst = s.get(Instance, e.instance_id, with_for_update=True)
        if inst.status != "ready":
            raise LeaseError(f"instance {inst.id} is {inst.status} now: reject the flag, or reinstate the item first")
        if remove:
            changes = {"status": ["ready", "discarded"]}
        else:
            changes = _fix(R.get_mode(inst.mode), inst, answers, truth)
            if not changes:
                raise FormError(
                    "answers", "that is the answer the item already has: give the right one, or remove the item"
                )
        why = collapse_whitespace(reason) or e.reason
        _decide(s, flag_id, admin, now, "accepted", why, changes)
        fact = _truth_fact(s, inst, changes, f"erratum {flag_id}")
        derived = D.apply(
            s,
            inst,
            changes,
            cause=f"erratum {flag_id}",
            by=admin,
            now=now,
            discard_reason=f"erratum {flag_id}: {why}" if remove else None,
        )
        act = log_action(
            s,
            admin,
            "errata_accept",
            inst.task_id,
            {
                "instance_id": inst.id,
                "reason": why,
                "changes": changes,
                "flag_id": flag_id,
                "flagged_by": e.flagged_by,
                "derived": derived,
                **fact,
            },
        )
        s.execute(
            update(Erratum)
            .where(Erratum.id == flag_id)
            .values(action_id=act.id)
            .execution_options(synchronize_session=False)
        )
        return changes


@retried
def reject_erratum(store: Store, by: str | WorkerInfo, flag_id: str, reason: str) -> None:
    """An admin finds the item right after all: the flag is closed with the reason; the item is unchanged."""
    why = collapse_whitespace(reason)
    if not why:
        raise FormError("reason", "say why the item is right after all, so the flagger can see it")
    with store.session() as s:
        admin = checked_worker(s, by, admin=True).name
        now = utcnow()
        e = _decide(s, flag_id, admin, now, "rejected", why, {})
        inst = s.get(Instance, e.instance_id)
        act = log_action(
            s,
            admin,
            "errata_reject",
            inst.task_id,
            {"instance_id": inst.id, "reason": why, "changes": {}, "flag_id": flag_id, "flagged_by": e.flagged_by},
        )
        s.execute(
            update(Erratum)
            .where(Erratum.id == flag_id)
            .values(action_id=act.id)
            .execution_options(synchronize_session=False)
        )


def undo_errata(s: Session, act: Action, worker: str, now: dt.datetime) -> str:
    """Undo an errata action (called by curate.decisions.undo with the action claimed)."""
    p = act.payload or {}
    e = s.get(Erratum, p["flag_id"])
    if act.kind == "errata_flag":
        if e.status != "open":
            raise LeaseError(f"cannot undo: flag {e.id} was already {e.status} by {e.decided_by}")
        e.status = "withdrawn"
        return f"flag of instance {e.instance_id}"
    inst = s.get(Instance, e.instance_id, with_for_update=True)
    for field, (_old, new) in (p.get("changes") or {}).items():
        if getattr(inst, field) != new:
            raise LeaseError(f"cannot undo: instance {inst.id} was changed again since ({field})")
    if "fact" in p and _plain(inst.truth_fact) != p["fact"][1]:
        raise LeaseError(f"cannot undo: the truth of instance {inst.id} was decided again since")
    for field, (old, _) in (p.get("changes") or {}).items():
        setattr(inst, field, old)
    if "status" in (p.get("changes") or {}):
        inst.discard_reason = None
    if "fact" in p:
        inst.truth_fact = p["fact"][0]
    if "contradiction" in p:
        inst.contradiction = p["contradiction"][0]
    inst.updated_by, inst.updated_at = worker, now
    # what the decision derived, back too; a LeaseError there (a worker built on it) rolls all of this back
    ref = (inst.id,) if {"truth", "answers"} & set(p.get("changes") or {}) else ()
    aside = D.reverse(s, p.get("derived") or [], f"erratum {e.id}", worker, now, also=ref)
    e.status, e.decided_by, e.decided_at, e.decision_reason, e.changes, e.action_id = (
        "open",
        None,
        None,
        None,
        None,
        None,
    )
    return f"{act.kind.removeprefix('errata_')} of flag {e.id} (instance {e.instance_id})" + _aside(act, aside)


def _aside(act: Action, aside: list[dict]) -> str:
    """Labels an undo set aside, kept on the undone action (the record) and said to the one who undid it."""
    if not aside:
        return ""
    act.payload = dict(act.payload, undo_set_aside=aside)
    return (
        f"; {len(aside)} label(s) given since against the truth it took back set aside, to label again: "
        + ", ".join(f"{e['id'][0]} by {e['id'][1]}" for e in aside)
    )
