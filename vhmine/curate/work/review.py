"""Blind review of ready instances: the next one a worker reviews, and saving their answer.

Reads ready instances that someone else wrote (shown without answers or author) and writes the
reviewer's answer with its normalized label (`review_label`: how it compares with the author's,
`author_label`), plus a `review` action. Agreement between the author and the reviewers is
curate.people.agreement.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, checked_worker, collapse_whitespace, log_action, retried
from vhmine.errors import AuthError, FormError, InputError, LeaseError
from vhmine.store import (
    Instance,
    Review,
    Store,
    utcnow,
)

UNANSWERABLE = "unanswerable"


@dataclass(frozen=True)
class ReviewItem:
    instance_id: str
    mode: str
    kind: str
    question: str
    image_id: str  # blind: no reference answer, no author


def next_review(store: Store, worker: str | WorkerInfo, mode: str) -> ReviewItem | None:
    """A ready instance of `mode` that someone else wrote and `worker` has not answered, fewest reviews first."""
    mode = R.get_mode(mode).name
    with store.session(write=False) as s:
        worker = checked_worker(s, worker).name
        mine = select(Review.instance_id).where(Review.worker == worker)
        n = select(Review.instance_id, func.count().label("n")).group_by(Review.instance_id).subquery()
        inst = s.scalar(
            select(Instance)
            .outerjoin(n, n.c.instance_id == Instance.id)
            .where(
                Instance.mode == mode,
                Instance.status == "ready",
                Instance.created_by != worker,
                Instance.id.not_in(mine),
            )
            .order_by(func.coalesce(n.c.n, 0), Instance.task_id, Instance.id)
            .limit(1)
        )
        if inst is None:
            return None
        return ReviewItem(inst.id, inst.mode, inst.kind, inst.question, inst.image_id)


def reviews_left(store: Store, worker: str | WorkerInfo, mode: str) -> int:
    """How many ready instances of `mode` that someone else wrote `worker` has yet to answer (next_review's queue)."""
    mode = R.get_mode(mode).name
    with store.session(write=False) as s:
        worker = checked_worker(s, worker).name
        mine = select(Review.instance_id).where(Review.worker == worker)
        return (
            s.scalar(
                select(func.count())
                .select_from(Instance)
                .where(
                    Instance.mode == mode,
                    Instance.status == "ready",
                    Instance.created_by != worker,
                    Instance.id.not_in(mine),
                )
            )
            or 0
        )


def author_label(inst: Instance) -> str:
    if inst.kind == R.YNQ:
        return "yes" if inst.truth else "no"
    return R.normalize_answer(inst.answers[0])


def review_label(inst: Instance, answer: str) -> str:
    if inst.kind == R.YNQ:
        yn = R.yes_no_of(answer)
        return UNANSWERABLE if yn is None else ("yes" if yn else "no")
    norm = R.normalize_answer(answer)
    if norm in {R.normalize_answer(a) for a in inst.answers}:
        return author_label(inst)  # any acceptable answer agrees with the author
    return norm


@retried
def save_review(store: Store, worker: str | WorkerInfo, instance_id: str, answer: str) -> None:
    """Save a blind answer. YNQ: yes, no or "can't tell"; OEQ: free text or "can't tell"."""
    answer = collapse_whitespace(answer)
    if not answer:
        raise FormError("answer", 'the answer is empty: answer the question, or choose "can\'t tell"')
    with store.session() as s:
        worker = checked_worker(s, worker).name
        inst = s.get(Instance, instance_id, with_for_update=True)  # an undo discarding it waits, or we see it discarded
        if inst is None or inst.status != "ready":
            raise InputError(f"no ready instance {instance_id!r} to review")
        if inst.created_by == worker:
            raise AuthError(f"you wrote instance {instance_id}: reviews must come from another worker")
        if inst.kind == R.YNQ and R.yes_no_of(answer) is None and answer.lower() != "can't tell":
            raise FormError("answer", f"answer {answer!r} is not yes, no or can't tell")
        if s.get(Review, (instance_id, worker)) is not None:
            raise LeaseError(f"you already reviewed instance {instance_id}: undo it first to change it")
        label = UNANSWERABLE if answer.lower() == "can't tell" else review_label(inst, answer)
        act = log_action(s, worker, "review", inst.task_id, {"instance_id": instance_id, "answer": answer})
        s.add(
            Review(
                instance_id=instance_id,
                worker=worker,
                answer=answer,
                label=label,
                action_id=act.id,
                created_at=utcnow(),
            )
        )
        try:
            s.flush()
        except IntegrityError:
            raise LeaseError(f"you already reviewed instance {instance_id}: undo it first to change it") from None
