"""Agreement between workers: per mode, Cohen's or Fleiss' kappa, and the items on which they disagree.

Reads, per mode, the author's reference answer against the blind reviews (curate.work.review), or workers'
labels of model responses, from the curation store, and computes Cohen's or Fleiss' kappa with
curate.people.kappa; writes nothing. A signed-in worker asking for them (`by`) must be an admin, checked in
the store on every call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, check_admin
from vhmine.curate.people.kappa import cohen_kappa, fleiss_kappa
from vhmine.curate.work import author_label
from vhmine.store import (
    Instance,
    Response,
    ResponseLabel,
    Review,
    Store,
)


@dataclass(frozen=True)
class ModeAgreement:
    mode: str
    statistic: str | None  # "cohen", "fleiss", or None when fewer than two workers rated an item
    kappa: float | None  # None when undefined (no items, or every rating in one category)
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
        rows = s.execute(
            select(Instance, Review).join(Review, Review.instance_id == Instance.id).where(Instance.status == "ready")
        ).all()
        for inst, r in rows:
            d = out.setdefault(inst.mode, {}).setdefault(inst.id, {})
            d[inst.created_by] = (
                author_label(inst),
                "yes" if inst.kind == R.YNQ and inst.truth else "no" if inst.kind == R.YNQ else inst.answers[0],
            )
            d[r.worker] = (r.label, r.answer)
    else:
        rows = s.execute(
            select(Instance.mode, ResponseLabel)
            .join(Response, Response.id == ResponseLabel.response_id)
            .join(Instance, Instance.id == Response.instance_id)
        ).all()
        for mode, lab in rows:
            out.setdefault(mode, {}).setdefault(lab.response_id, {})[lab.worker] = (lab.verdict, lab.verdict)
    return {m: {i: r for i, r in items.items() if len(r) >= 2} for m, items in out.items()}


def _defined(k: float) -> float | None:
    return None if math.isnan(k) else k


def agreement(
    store: Store, what: str = "instances", *, by: str | WorkerInfo | None = None, instance_ids: set | None = None
) -> list[ModeAgreement]:
    """Per mode: Cohen's kappa when exactly two workers rated, Fleiss' kappa when more.

    `what="instances"`: the author's reference answer against blind reviews; `what="responses"`:
    workers' correct/hallucinated labels of model responses. `by`: the signed-in worker asking (the
    app passes it), who must be an admin; None only for the store's operator (CLI, scripts).
    `instance_ids`: only these instances (an export's; instances only), else every ready one.
    """
    with store.session(write=False) as s:
        check_admin(s, by)
        data = _ratings(s, what)
    if instance_ids is not None and what == "instances":
        data = {m: {i: r for i, r in items.items() if i in instance_ids} for m, items in data.items()}
    out = []
    for m in R.mode_names():
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


def disagreements(
    store: Store, mode: str | None = None, what: str = "instances", *, by: str | WorkerInfo | None = None
) -> list[Disagreement]:
    """Items on which the workers' normalized answers differ, by mode then id; `by` as for `agreement`."""
    with store.session(write=False) as s:
        check_admin(s, by)
        data = _ratings(s, what)
        questions: dict[str, str] = {}
        for items in data.values():
            ids = list(items)
            if what == "instances":
                questions.update(
                    dict(s.execute(select(Instance.id, Instance.question).where(Instance.id.in_(ids))).all())
                )
            else:
                questions.update(
                    dict(
                        s.execute(
                            select(Response.id, Instance.question)
                            .join(Instance, Instance.id == Response.instance_id)
                            .where(Response.id.in_(ids))
                        ).all()
                    )
                )
    out = []
    for m in R.mode_names():
        if mode and m != R.get_mode(mode).name:
            continue
        for iid in sorted(data.get(m, {})):
            r = data[m][iid]
            if len({lab for lab, _ in r.values()}) > 1:
                out.append(Disagreement(iid, m, questions[iid], {w: shown for w, (_, shown) in sorted(r.items())}))
    return out
