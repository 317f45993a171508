"""Blind review of ready instances, and agreement between workers.

Reads ready instances that someone else wrote (shown without answers or author) and writes the
reviewer's answer with its normalized label, plus a `review` action. `agreement` and `disagreements`
read, per mode, the author's reference answer against the blind reviews, or workers' labels of model
responses, and compute Cohen's or Fleiss' kappa with vhmine.curate.kappa; a signed-in worker asking
for them (`by`) must be an admin, checked in the store on every call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from vhmine.rules import modes as M
from vhmine.errors import AuthError, FormError, InputError, LeaseError
from vhmine.store import (  # first: it says which extra to install when SQLAlchemy is missing
    Instance, Response, ResponseLabel, Review, Store, utcnow,
)

from sqlalchemy import func, select  # noqa: E402
from sqlalchemy.exc import IntegrityError  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from vhmine.curate.base.tasks import WorkerInfo, _admin, _log, _retried, _text, _worker

UNANSWERABLE = "unanswerable"


@dataclass(frozen=True)
class ReviewItem:
    instance_id: str
    mode: str
    kind: str
    question: str
    image_id: str  # blind: no reference answer, no author


def next_review(store: Store, worker: str | WorkerInfo, mode: str) -> Optional[ReviewItem]:
    """A ready instance of `mode` that someone else wrote and `worker` has not answered, fewest reviews first."""
    mode = M.get_mode(mode).name
    with store.session(write=False) as s:
        worker = _worker(s, worker).name
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


def reviews_left(store: Store, worker: str | WorkerInfo, mode: str) -> int:
    """How many ready instances of `mode` that someone else wrote `worker` has yet to answer (next_review's queue)."""
    mode = M.get_mode(mode).name
    with store.session(write=False) as s:
        worker = _worker(s, worker).name
        mine = select(Review.instance_id).where(Review.worker == worker)
        return s.scalar(select(func.count()).select_from(Instance).where(
            Instance.mode == mode, Instance.status == "ready", Instance.created_by != worker,
            Instance.id.not_in(mine))) or 0


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


@_retried
def save_review(store: Store, worker: str | WorkerInfo, instance_id: str, answer: str) -> None:
    """Save a blind answer. YNQ: yes, no or "can't tell"; OEQ: free text or "can't tell"."""
    answer = _text(answer)
    if not answer:
        raise FormError("answer", "the answer is empty: answer the question, or choose \"can't tell\"")
    with store.session() as s:
        worker = _worker(s, worker).name
        inst = s.get(Instance, instance_id, with_for_update=True)  # an undo discarding it waits, or we see it discarded
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


def agreement(store: Store, what: str = "instances", *, by: str | WorkerInfo | None = None,
              instance_ids: Optional[set] = None) -> list[ModeAgreement]:
    """Per mode: Cohen's kappa when exactly two workers rated, Fleiss' kappa when more.

    `what="instances"`: the author's reference answer against blind reviews; `what="responses"`:
    workers' correct/hallucinated labels of model responses. `by`: the signed-in worker asking (the
    app passes it), who must be an admin; None only for the store's operator (CLI, scripts).
    `instance_ids`: only these instances (an export's; instances only), else every ready one.
    """
    from vhmine.curate.people.kappa import cohen_kappa, fleiss_kappa

    with store.session(write=False) as s:
        _admin(s, by)
        data = _ratings(s, what)
    if instance_ids is not None and what == "instances":
        data = {m: {i: r for i, r in items.items() if i in instance_ids} for m, items in data.items()}
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


def disagreements(store: Store, mode: Optional[str] = None, what: str = "instances", *,
                  by: str | WorkerInfo | None = None) -> list[Disagreement]:
    """Items on which the workers' normalized answers differ, by mode then id; `by` as for `agreement`."""
    with store.session(write=False) as s:
        _admin(s, by)
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
