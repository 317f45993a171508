"""Drafts that workers verify: storing a model's pair drafts, the verify queue, accept / edit / reject, undo.

Reads and writes `drafts` (vhmine draft stores them; a draft that broke a rule is stored as
`rule_rejected` with the reason and never queued), `tasks` (a draft is verified under its task's lease,
taken and closed through the same compare-and-set as annotating, so a verifier and an annotator never
both save one pair), `instances` and the action log. Accepting or editing makes the draft's instances
exactly as an annotation does: one ready OEQ per image and its yes/no variants (ready: the worker checked
them in the same form), created by the verifier under a `verify` action whose payload names the draft,
its model and prompt (the provenance), the decision and the instances. Rejecting needs a reason and
leaves the task open for annotating from scratch. Tasks with a pending draft stay out of the annotate
queue (curate.work.queue.next_item) until the draft is decided.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from vhmine import rules as R
from vhmine.curate.base import (
    ImageView,
    WorkerInfo,
    built_on,
    check_lease,
    checked_worker,
    close_task,
    collapse_whitespace,
    compare_and_set,
    derived_id,
    log_action,
    new_id,
    retried,
    task_item,
)
from vhmine.curate.work.lease import LEASE_S, lease_next, pending_draft_tasks
from vhmine.errors import FormError, InputError, LeaseError
from vhmine.rules import DraftContent, check_content, undecided_message
from vhmine.store import (
    Action,
    Draft,
    Instance,
    Store,
    Task,
    utcnow,
)

VERIFY = "verify"  # the action kind of every decision; payload["decision"]: accept, edit or reject


@dataclass(frozen=True)
class VerifyItem:
    draft_id: str
    task_id: str
    mode: str
    images: tuple[ImageView, ...]  # A, B
    template_id: str
    slots: dict
    question: str
    answers: dict  # image id -> tuple of reference answers
    yes_no: tuple  # ((question, {image id: truth}), ...)
    model: str
    prompt: str
    lease_until: dt.datetime
    unchecked: tuple[str, ...] = ()  # yes/no questions the rules could not check against the answers: check them


@dataclass(frozen=True)
class Verified:
    draft_id: str
    decision: str  # "accept", "edit" or "reject"
    instance_ids: tuple[str, ...]


def record_draft(
    store: Store,
    task_id: str,
    *,
    model: str,
    endpoint: str | None,
    prompt: str,
    raw: str,
    content: DraftContent | None = None,
    reason: str | None = None,
) -> str:
    """Store one model draft for a pair task: pending with its checked `content`, or `rule_rejected` with `reason`."""
    with store.session() as s:
        t = s.get(Task, task_id)
        if t is None or not t.pair_id:
            raise InputError(f"no pair task {task_id!r} in the store")
        d = Draft(
            id=new_id(),
            task_id=task_id,
            mode=t.mode,
            model=model,
            endpoint=endpoint,
            prompt=prompt,
            raw=raw,
            status="pending" if content is not None else "rule_rejected",
            reason=reason,
            created_at=utcnow(),
        )
        if content is not None:
            c = content.as_json()
            d.template_id, d.slots, d.question, d.answers, d.yes_no = (
                c["template_id"],
                c["slots"],
                c["question"],
                c["answers"],
                c["yes_no"],
            )
        s.add(d)
        return d.id


def drafted_tasks(store: Store, model: str, endpoint: str | None, prompt: str) -> set[str]:
    """Task ids that already have a draft (of any status) by this model, endpoint and prompt: a rerun skips them."""
    where = Draft.endpoint == endpoint  # None: IS NULL
    with store.session(write=False) as s:
        return set(s.scalars(select(Draft.task_id).where(Draft.model == model, Draft.prompt == prompt, where)))


def _view(s: Session, t: Task, d: Draft) -> VerifyItem:
    item = task_item(s, t)
    yn = tuple((y["question"], dict(y["truths"])) for y in d.yes_no or [])
    try:  # the rules are pure: which variants they cannot check, read again for the page
        unchecked = check_content(
            d.mode, [v.id for v in item.images], d.template_id, d.slots or {}, d.question, d.answers or {}, list(yn)
        ).unchecked
    except FormError:
        unchecked = tuple(q for q, _ in yn)
    return VerifyItem(
        d.id,
        t.id,
        t.mode,
        item.images,
        d.template_id,
        dict(d.slots or {}),
        d.question,
        {k: tuple(v) for k, v in (d.answers or {}).items()},
        yn,
        d.model,
        d.prompt,
        t.lease_until,
        unchecked,
    )


def _pending(s: Session, task_id: str) -> Draft | None:
    return s.scalar(
        select(Draft)
        .where(Draft.task_id == task_id, Draft.status == "pending")
        .order_by(Draft.created_at, Draft.id)
        .limit(1)
    )


@retried
def next_verify_item(
    store: Store, worker: str | WorkerInfo, mode: str, *, lease_s: float = LEASE_S
) -> VerifyItem | None:
    """Lease the next open task of `mode` with a pending draft to `worker` (their current lease first)."""
    mode = R.get_mode(mode).name
    with store.session() as s:
        worker = checked_worker(s, worker).name
        t = lease_next(s, worker, mode, Task.id.in_(pending_draft_tasks()), utcnow(), lease_s, skipped_last=False)
        return _view(s, t, _pending(s, t.id)) if t is not None else None


def _claim_draft(s: Session, d: Draft, worker: str, now: dt.datetime, status: str, reason: str | None) -> None:
    res = s.execute(
        update(Draft)
        .where(Draft.id == d.id, Draft.status == "pending")
        .values(status=status, reason=reason, decided_by=worker, decided_at=now)
        .execution_options(synchronize_session=False)
    )
    if res.rowcount != 1:  # another tab or worker decided it between our read and our write
        raise LeaseError(f"draft {d.id} was decided meanwhile: nothing saved; take the next item")


def _draft_and_task(s: Session, draft_id: str, worker: str, now: dt.datetime) -> tuple[Draft, Task]:
    d = s.get(Draft, draft_id)
    if d is None:
        raise InputError(f"no draft {draft_id!r} in the store")
    if d.status != "pending":
        raise LeaseError(
            f"draft {draft_id} was already decided ({d.status} by {d.decided_by}): nothing saved; take the next item"
        )
    return d, check_lease(s, d.task_id, worker, now)


@retried
def accept_draft(store: Store, worker: str | WorkerInfo, draft_id: str, *, checked: Sequence[str] = ()) -> Verified:
    """Accept a draft as the model wrote it: its instances become ready and its task is done. `checked`: the
    yes/no questions the rules could not check (VerifyItem.unchecked) that the worker checked on the images."""
    return _edit_draft(store, worker, draft_id, checked=checked)


@retried
def edit_draft(
    store: Store,
    worker: str | WorkerInfo,
    draft_id: str,
    *,
    question: str | None = None,
    answers: dict | None = None,
    yes_no: Sequence[tuple[str, dict]] | None = None,
    checked: Sequence[str] = (),
) -> Verified:
    """Save the worker's edit of a draft (None keeps the draft's part; an edit identical to the draft is an
    accept): FormError (nothing saved) when it breaks a draft rule (vhmine.rules.draft_check), or keeps a yes/no
    question the rules cannot check against the answers that is not in `checked` (the worker looked at it on the
    images). Closes the task; returns the ready instances made. `answers`: image id -> answers (a str: one per
    line); `yes_no`: (question, {image id: truth}) for every variant to keep."""
    return _edit_draft(store, worker, draft_id, question=question, answers=answers, yes_no=yes_no, checked=checked)


def _edit_draft(
    store: Store,
    worker: str | WorkerInfo,
    draft_id: str,
    *,
    question: str | None = None,
    answers: dict | None = None,
    yes_no: Sequence[tuple[str, dict]] | None = None,
    checked: Sequence[str] = (),
) -> Verified:
    """edit_draft's one attempt, without the retry (accept_draft and edit_draft each retry it once over)."""
    with store.session() as s:
        worker = checked_worker(s, worker).name
        now = utcnow()
        d, t = _draft_and_task(s, draft_id, worker, now)
        images = [v.id for v in task_item(s, t).images]
        draft_json = {"question": d.question, "answers": d.answers, "yes_no": d.yes_no}
        edited_q = d.question if question is None else question
        content = check_content(
            d.mode,
            images,
            d.template_id,
            d.slots or {},
            edited_q,
            d.answers if answers is None else answers,
            [(y["question"], y["truths"]) for y in d.yes_no or []] if yes_no is None else list(yes_no),
        )
        vouched = {" ".join(str(q).split()) for q in checked}
        for q in content.unchecked:  # the rules could not read it: made ready only once a worker checked it
            if q not in vouched:
                raise FormError("yes_no", undecided_message(q, "on the pair's images"))
        new_json = {
            "question": content.question,
            "answers": content.answers,
            "yes_no": [{"question": y.question, "truths": y.truths} for y in content.yes_no],
        }
        decision = "accept" if new_json == draft_json else "edit"
        _claim_draft(s, d, worker, now, "accepted" if decision == "accept" else "edited", None)
        close_task(s, t, worker, now, "done")
        for other in s.scalars(select(Draft).where(Draft.task_id == t.id, Draft.status == "pending", Draft.id != d.id)):
            other.status, other.reason = "superseded", f"draft {d.id} of this pair was verified"
        act = log_action(
            s,
            worker,
            VERIFY,
            t.id,
            {
                "draft_id": d.id,
                "mode": d.mode,
                "decision": decision,
                "model": d.model,
                "prompt": d.prompt,
                "draft": draft_json,
                **({"edited": new_json} if decision == "edit" else {}),
                **({"checked_by_worker": list(content.unchecked)} if content.unchecked else {}),
            },
        )
        ids = _instances(s, t, content, act, worker, now)
        d.action_id = act.id
        act.payload = dict(act.payload, instances=ids)
    return Verified(draft_id, decision, tuple(ids))


def _instances(s: Session, t: Task, c: DraftContent, act: Action, worker: str, now: dt.datetime) -> list[str]:
    mode = R.get_mode(t.mode)
    tpl = mode.template(c.template_id) if not c.template_id.endswith(".own") else None
    ynq = mode.template(tpl.ynq) if tpl is not None and tpl.ynq else None
    ids = []
    for img, answers in c.answers.items():
        common = dict(
            task_id=t.id,
            action_id=act.id,
            mode=mode.name,
            image_id=img,
            pair_id=t.pair_id,
            created_by=worker,
            created_at=now,
            status="ready",
        )
        oeq = Instance(
            id=new_id(),
            kind=R.OEQ,
            template_id=c.template_id,
            slots=c.slots,
            question=c.question,
            answers=list(answers),
            truth=None,
            **common,
        )
        s.add(oeq)
        ids.append(oeq.id)
        for y in c.yes_no:
            ys = R.slots_of(ynq, y.question, {}) if ynq is not None else None
            value = ys.get(tpl.answer_slot) if ys is not None and tpl.derive == "value" else None
            truth = y.truths[img]
            yid = derived_id(oeq.id, y.question)
            yi = Instance(
                id=yid if yid not in ids else new_id(),
                kind=R.YNQ,  # the same question twice: its own id
                template_id=ynq.id if ys is not None else R.own_template_id(mode),
                slots=ys or {},
                question=y.question,
                answers=["Yes" if truth else "No"],
                truth=truth,
                derived_from=oeq.id,
                draft_value=value,
                **common,
            )
            if ys is None:  # the verifier's own wording, checked on the image: a fact re-drafting never overwrites
                yi.truth_fact = {"truth": truth, "by": f"worker {worker}", "source": list(answers)}
            s.add(yi)
            ids.append(yi.id)
    return ids


@retried
def reject_draft(store: Store, worker: str | WorkerInfo, draft_id: str, reason: str) -> Verified:
    """Reject a draft with a reason; its task goes back to the queues (to annotate from scratch)."""
    reason = collapse_whitespace(reason)
    if not reason:
        raise FormError("reason", "say why the draft is wrong, e.g. 'answer for image B is wrong'")
    with store.session() as s:
        worker = checked_worker(s, worker).name
        now = utcnow()
        d, t = _draft_and_task(s, draft_id, worker, now)
        _claim_draft(s, d, worker, now, "rejected", reason)
        if t.lease_worker == worker and not compare_and_set(
            s, t, expect_status="open", lease_worker=None, lease_until=None
        ):
            raise LeaseError(f"item {t.id} was changed by another worker meanwhile: nothing saved; take the next item")
        act = log_action(
            s,
            worker,
            VERIFY,
            t.id,
            {
                "draft_id": d.id,
                "mode": d.mode,
                "decision": "reject",
                "reason": reason,
                "model": d.model,
                "prompt": d.prompt,
            },
        )
        d.action_id = act.id
    return Verified(draft_id, "reject", ())


def undo_verify(s: Session, act: Action, worker: str, now: dt.datetime, lease: dict) -> str:
    """Undo a `verify` action (called by curate.decisions.undo with the action claimed): the draft is pending again, its
    instances discarded ("undone by"), the task open and leased back to the worker."""
    p = act.payload or {}
    d = s.get(Draft, p["draft_id"])
    t = s.get(Task, act.task_id)
    if p["decision"] != "reject":
        ids = p.get("instances", [])
        insts = s.scalars(select(Instance).where(Instance.id.in_(ids)).with_for_update()).all()
        if used := built_on(s, ids):
            raise LeaseError(f"cannot undo: the questions of draft {d.id} were already {used}")
        if t.status != "done" or t.done_by != worker:
            raise LeaseError(f"cannot undo: item {t.id} was changed since by someone else")
        for inst in insts:
            inst.status, inst.discard_reason, inst.updated_by, inst.updated_at = (
                "discarded",
                f"undone by {worker}",
                worker,
                now,
            )
        for other in s.scalars(select(Draft).where(Draft.task_id == t.id, Draft.status == "superseded")):
            other.status, other.reason = "pending", None
    free = t.status != "open" or t.lease_worker in (None, worker) or t.lease_until <= now
    if not free or not compare_and_set(
        s, t, expect_status=t.status, status="open", done_by=None, done_at=None, **lease
    ):
        raise LeaseError(f"cannot undo: item {t.id} was taken by someone else meanwhile: nothing changed")
    d.status, d.reason, d.decided_by, d.decided_at, d.action_id = "pending", None, None, None, None
    return f"{p['decision']} of draft {d.id} (item {t.id})"
