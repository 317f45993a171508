"""Saving a worker's question and reference answers for the queue item leased to them.

Reads the task and its images; closes the task, logs an `annotate` action and writes one ready
instance per target image. An OEQ also gets drafted yes/no variants (status draft), which the worker
confirms or rejects through vhmine.curate.decisions.drafts. A question the worker edited keeps only the slot
values its text still holds (vhmine.rules.modes.slots_of); one reworded past its template is saved as the
worker's own (template `<mode>.own`, no slots, no drafts).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from vhmine import rules as R
from vhmine.curate.base import (
    Item,
    check_lease,
    checked_worker,
    close_task,
    derived_id,
    log_action,
    new_id,
    retried,
    task_item,
)
from vhmine.errors import FormError
from vhmine.store import Instance, Store, utcnow


@dataclass
class Annotation:
    """What a worker submits for one item."""

    template_id: str
    slots: dict[str, str] = field(default_factory=dict)
    question: str | None = None  # the filled template, possibly reworded; None: the filled template
    answers: dict[str, Sequence[str] | str] = field(default_factory=dict)  # image id -> reference answers
    truths: dict[str, bool | None] = field(default_factory=dict)  # image id -> yes/no truth (YNQ)
    targets: list[str] | None = None  # image ids asked about; None: every image of the item


@dataclass(frozen=True)
class Saved:
    task_id: str
    instance_ids: tuple[str, ...]  # ready now
    draft_ids: tuple[str, ...]  # YNQ drafts waiting for the worker to confirm


def _validate(item: Item, ann: Annotation):
    mode = R.get_mode(item.mode)
    tpl = mode.template(ann.template_id)
    filled = R.fill(tpl, ann.slots)
    question = R.check_question(filled if ann.question is None else ann.question)
    slots = R.slots_of(tpl, question, ann.slots)  # None: reworded past the template, its values dropped
    ids = [v.id for v in item.images]
    targets = list(dict.fromkeys(ann.targets)) if ann.targets is not None else ids  # each image once
    if not targets:
        raise FormError("targets", "no image chosen: choose the image(s) the question is about")
    bad = [t for t in targets if t not in ids]
    if bad:
        raise FormError("targets", f"image {bad[0]} is not part of item {item.task_id}")
    answers = {t: R.clean_answers(ann.answers.get(t)) for t in targets}
    for t in targets:
        if tpl.kind == R.OEQ:
            R.check_oeq_answers(mode, tpl if slots is not None else None, slots or {}, answers[t], item.where(t))
        else:
            R.check_ynq(ann.truths.get(t), answers[t], item.where(t))
    return mode, tpl, question, slots, targets, answers


@retried
def save_annotation(store: Store, worker: str, task_id: str, ann: Annotation) -> Saved:
    """Save a worker's question and answers for an item; FormError (nothing saved) on bad input.

    An OEQ becomes one ready instance per target image plus drafted YNQ variants (status draft) that
    the worker confirms with `confirm_drafts`; a YNQ template becomes ready YNQ instances directly.
    """
    with store.session() as s:
        worker = checked_worker(s, worker).name  # a signed-in WorkerInfo must still be current
        now = utcnow()
        t = check_lease(s, task_id, worker, now)
        item = task_item(s, t)
        mode, tpl, question, slots, targets, answers = _validate(item, ann)
        tpl_id = tpl.id if slots is not None else R.own_template_id(mode)
        close_task(s, t, worker, now, "done")
        act = log_action(
            s,
            worker,
            "annotate",
            task_id,
            {
                "template_id": tpl_id,
                "slots": slots or {},
                "question": question,
                "targets": targets,
                "answers": answers,
                "truths": {k: ann.truths.get(k) for k in targets},
            },
        )
        ready, drafts = [], []
        for img in targets:
            common = dict(
                task_id=task_id,
                action_id=act.id,
                mode=mode.name,
                image_id=img,
                pair_id=item.pair_id,
                created_by=worker,
                created_at=now,
            )
            inst = Instance(
                id=new_id(),
                kind=tpl.kind,
                template_id=tpl_id,
                slots=slots or {},
                question=question,
                answers=answers[img],
                truth=ann.truths.get(img) if tpl.kind == R.YNQ else None,
                status="ready",
                **common,
            )
            s.add(inst)
            ready.append(inst.id)
            if tpl.kind != R.OEQ or slots is None:  # the worker's own question: no values to draft from
                continue
            others = [a for o in targets if o != img for a in answers[o]]
            for d in R.draft_ynq(mode, tpl, slots, answers[img], others):
                di = Instance(
                    id=derived_id(inst.id, d.question),
                    kind=R.YNQ,
                    template_id=d.template_id,
                    slots=d.slots,
                    question=d.question,
                    answers=["Yes" if d.truth else "No"],
                    truth=d.truth,
                    derived_from=inst.id,
                    draft_value=d.value,
                    status="draft",
                    **common,
                )
                s.add(di)
                drafts.append(di.id)
        act.payload = dict(act.payload, instances=ready + drafts)
    return Saved(task_id, tuple(ready), tuple(drafts))
