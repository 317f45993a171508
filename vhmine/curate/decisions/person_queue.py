"""The person-queue: drafted yes/no questions whose open answers now imply another truth than a person decided.

Re-drafting (curate.decisions.derived) never overwrites a person's truth (an accepted erratum on the question, a
worker's own wording they checked): where a later change of the open answers contradicts it, the question keeps its
ready state and truth and its `contradiction` holds both sides, until an admin decides here. Reads instances with a
contradiction (and the open question each was drafted from); writes the decided truth as the question's new fact
(`truth_fact`, against the answers now), carries a changed truth through to what was derived from it
(curate.decisions.derived.apply: verdicts, labels, blind answers), clears the contradiction, and logs a `resolve`
action {"instance_id", "reason", "changes", "fact", "contradiction", "derived"} that undo (curate.decisions.undo)
takes back.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from vhmine.curate.base import WorkerInfo, checked_worker, collapse_whitespace, log_action, retried
from vhmine.curate.decisions import derived as D
from vhmine.curate.decisions.derived import _plain
from vhmine.errors import FormError, LeaseError
from vhmine.store import (
    Action,
    Instance,
    Store,
    utcnow,
)


@dataclass(frozen=True)
class Contradiction:
    instance_id: str
    mode: str
    image_id: str
    question: str
    truth: bool  # the truth that stands (the person's), ready as it was
    decided_by: str  # who decided it ("erratum <flag>", "worker <name>")
    decided_against: tuple[str, ...]  # the open answers then
    source_answers: tuple[str, ...]  # the open answers now
    derived: bool | None  # the truth they imply; None: the rules cannot read the question (own wording)
    since: str  # the change that raised it


def contradictions(store: Store, by: str | WorkerInfo | None = None) -> list[Contradiction]:
    """The person-queue, oldest question first (admins only, when `by` is given)."""
    with store.session(write=False) as s:
        if by is not None:
            checked_worker(s, by, admin=True)
        rows = s.scalars(
            select(Instance).where(Instance.contradiction.is_not(None)).order_by(Instance.created_at, Instance.id)
        ).all()
        out = []
        for i in rows:
            c = i.contradiction
            out.append(
                Contradiction(
                    i.id,
                    i.mode,
                    i.image_id,
                    i.question,
                    bool(i.truth),
                    str(c.get("by")),
                    tuple(c.get("decided_against") or ()),
                    tuple(c.get("source") or ()),
                    c.get("derived"),
                    str(c.get("since")),
                )
            )
        return out


@retried
def resolve_contradiction(store: Store, by: str | WorkerInfo, instance_id: str, truth: bool, reason: str = "") -> dict:
    """An admin decides a question of the queue: `truth` stands from now on (the one decided before, or the one the
    answers imply); returns the changes {field: [old, new]} (empty when the truth stays)."""
    if truth not in (True, False):
        raise FormError("truth", "choose yes or no")
    with store.session() as s:
        admin = checked_worker(s, by, admin=True).name
        now = utcnow()
        inst = s.get(Instance, instance_id, with_for_update=True)
        if inst is None or not inst.contradiction:
            raise LeaseError(
                f"instance {instance_id} is not waiting for a decision (decided meanwhile?): reload the page"
            )
        src = s.get(Instance, inst.derived_from)
        why = collapse_whitespace(reason) or (
            f"{'kept' if truth == inst.truth else 'took'} truth "
            f"{'yes' if truth else 'no'} against the open answers "
            f"{' / '.join(src.answers)}"
        )
        old = inst.truth_fact, inst.contradiction
        changes = (
            {}
            if bool(inst.truth) == truth
            else {"truth": [inst.truth, truth], "answers": [inst.answers, ["Yes" if truth else "No"]]}
        )
        inst.truth_fact = {"truth": truth, "by": f"admin {admin}", "source": list(src.answers)}
        if old[1].get("derived") is not None and old[1]["derived"] != truth:  # kept against it: not asked again
            inst.truth_fact["seen"] = old[1]["derived"]
        inst.contradiction = None
        derived = D.apply(s, inst, changes, cause=f"decision on {instance_id}", by=admin, now=now) if changes else []
        log_action(
            s,
            admin,
            "resolve",
            inst.task_id,
            {
                "instance_id": inst.id,
                "reason": why,
                "changes": changes,
                "fact": [old[0], inst.truth_fact],
                "contradiction": [old[1], None],
                "derived": derived,
            },
        )
        return changes


def undo_resolve(s: Session, act: Action, worker: str, now: dt.datetime) -> str:
    """Undo a `resolve` action (called by curate.decisions.undo with the action claimed): the question is back in the
    queue with the truth it had."""
    p = act.payload or {}
    inst = s.get(Instance, p["instance_id"], with_for_update=True)
    if _plain(inst.truth_fact) != p["fact"][1]:
        raise LeaseError(f"cannot undo: the truth of instance {inst.id} was decided again since")
    for field, (old, _) in (p.get("changes") or {}).items():
        setattr(inst, field, old)
    inst.truth_fact, inst.contradiction = p["fact"][0], p["contradiction"][0]
    inst.updated_by, inst.updated_at = worker, now
    D.reverse(
        s, p.get("derived") or [], f"decision on {inst.id}", worker, now, also=(inst.id,) if p.get("changes") else ()
    )
    return f"decision on the queued question {inst.id}"
