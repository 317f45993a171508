"""Drafted yes/no questions: a worker's pending drafts, and confirming or rejecting them.

Reads draft instances with the OEQ each was derived from (and the pair's other OEQ); writes their status
(ready or discarded), question, truth and answers (a reworded question keeps only the slot values its text
still holds, vhmine.rules.modes.slots_of), and logs a `confirm` action holding the old values so undo can restore
them. A kept question never contradicts what the open answers imply, however it is worded
(vhmine.rules.variant); one the check cannot read is made ready only when the worker marks it checked.
A draft an accepted erratum made or sent back (curate.decisions.derived) carries the reason (`DraftView.note`).
A truth the rules could not check (the worker's own wording, marked checked) is the worker's fact (`truth_fact`,
with the open answers it was checked against): re-drafting never overwrites it (curate.decisions.derived).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select

from vhmine import rules as R
from vhmine.curate.base import checked_worker, derived_id, log_action, retried
from vhmine.errors import FormError, LeaseError
from vhmine.rules import check_variant, undecided_message
from vhmine.store import (
    Instance,
    Pair,
    Store,
    utcnow,
)


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
    note: str = ""  # why the draft is (back) here: an erratum changed the answers it was drafted from


def pending_drafts(store: Store, worker: str, mode: str | None = None) -> list[DraftView]:
    """The worker's drafted YNQs still waiting for confirmation: oldest item first, image A before B, yes first."""
    with store.session(write=False) as s:
        worker = checked_worker(s, worker).name  # a signed-in WorkerInfo must still be current
        q = select(Instance).where(Instance.status == "draft", Instance.created_by == worker)
        if mode:
            q = q.where(Instance.mode == R.get_mode(mode).name)
        out = []
        for d in s.scalars(q):
            src = s.get(Instance, d.derived_from)
            if (
                src is None or src.status != "ready"
            ):  # its open question was undone or removed since: nothing to confirm
                continue
            pair = s.get(Pair, d.pair_id) if d.pair_id else None
            role = "image" if pair is None else ("A" if pair.image_a == d.image_id else "B")
            view = DraftView(
                d.id,
                d.task_id,
                d.image_id,
                role,
                d.question,
                bool(d.truth),
                src.question,
                tuple(src.answers),
                d.discard_reason or "",
            )
            out.append(((d.created_at, d.task_id, role, not d.truth, d.id), view))
        return [v for _, v in sorted(out, key=lambda x: x[0])]


def _match_edit(d: Instance, question: str, src: Instance) -> None:
    """A reworded draft keeps only the slot values its text still holds, and tests the value it now names."""
    slots = R.slots_of(R.get_template(d.template_id), question, d.slots)
    if slots is None:  # the worker's own question: no template values, no value to check the truth against
        # but a draft made before ids were derived (schema 0011) keeps the value it was drafted to test: its id does
        # not name the question it was drafted as, so re-derivation (curate.decisions.redraft._same) finds it by
        # that value, as it finds a newer one by its id (the truth stays the worker's: an own question is never read)
        kept = d.draft_value if d.id != derived_id(src.id, d.question) else None
        d.template_id, d.slots, d.draft_value = R.own_template_id(R.get_mode(d.mode)), {}, kept
        return
    oeq = R.get_template(src.template_id)
    # the value the truth is checked against: the slot the OEQ answer filled, or for a choice the one
    # the question says is so (the first of `choices`), so that swapping the objects is caught too
    d.draft_value = slots[oeq.choices[0] if oeq.derive == "pick" else oeq.answer_slot]
    d.slots = slots


def _agrees(s, d: Instance, src: Instance, question: str, truth: bool, where: str) -> bool:
    """FormError when the question's truth contradicts what the open answers imply (this image's, and the pair's
    other image's as the wrong values), however it is worded; False when the check cannot decide."""
    if src.template_id.endswith(".own"):
        return False
    other = s.scalars(
        select(Instance).where(
            Instance.action_id == src.action_id,
            Instance.kind == R.OEQ,
            Instance.id != src.id,
            Instance.status == "ready",
        )
    ).all()
    return check_variant(
        R.get_mode(d.mode),
        R.get_template(src.template_id),
        src.slots,
        question,
        truth,
        src.answers,
        [a for o in other for a in o.answers],
        where,
    )


@dataclass
class DraftDecision:
    instance_id: str
    keep: bool
    question: str | None = None  # reworded question; None keeps the draft's
    truth: bool | None = None  # None keeps the draft's
    checked: bool = False  # the worker checked the truth on the image: needed where the rules cannot read the question


@retried
def confirm_drafts(store: Store, worker: str, decisions: Iterable[DraftDecision]) -> list[str]:
    """Make kept drafts ready and reject the others; FormError (nothing saved) on a contradiction."""
    decisions = list(decisions)
    with store.session() as s:
        worker = checked_worker(s, worker).name  # a signed-in WorkerInfo must still be current
        now = utcnow()
        before, kept = [], []
        for dec in decisions:
            d = s.get(
                Instance, dec.instance_id, with_for_update=True
            )  # an erratum re-drafting it waits, or is waited for
            if d is None or d.status != "draft" or d.created_by != worker:
                raise LeaseError(f"{dec.instance_id} is not a draft of yours waiting for confirmation: reload the page")
            before.append(
                {
                    "id": d.id,
                    "question": d.question,
                    "truth": d.truth,
                    "answers": d.answers,
                    "template_id": d.template_id,
                    "slots": d.slots,
                    "draft_value": d.draft_value,
                    "discard_reason": d.discard_reason,
                    "truth_fact": d.truth_fact,
                }
            )
            if dec.keep:
                truth = d.truth if dec.truth is None else dec.truth
                where = f"the yes/no question {d.id}"
                question = R.check_question(d.question if dec.question is None else dec.question)
                src = s.get(Instance, d.derived_from)
                if question != d.question:
                    _match_edit(d, question, src)
                agreed = _agrees(s, d, src, question, truth, where)
                if not agreed and not dec.checked:
                    raise FormError("yes_no", undecided_message(question, f"{where}, on image {d.image_id}"))
                if not agreed or d.template_id.endswith(".own"):  # the worker's truth: re-drafting never overwrites it
                    d.truth_fact = {"truth": truth, "by": f"worker {worker}", "source": list(src.answers)}
                d.question, d.truth, d.status, d.discard_reason = question, truth, "ready", None
                d.answers = ["Yes" if truth else "No"]
                kept.append(d.id)
            else:
                d.status, d.discard_reason = "discarded", f"draft rejected by {worker}"
            d.updated_by, d.updated_at = worker, now
        if decisions:
            log_action(s, worker, "confirm", None, {"drafts": before})
    return kept
