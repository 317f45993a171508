"""Yes/no questions drafted again from the open question they came from: what re-derivation makes of them.

Reads and writes, for curate.decisions.derived (an erratum accepted or undone) and curate.decisions.undo (a
confirmation undone), the yes/no questions drafted from an open question and from the pair's other open question on
the same question: drafted again from the answers now (modes.draft_ynq, as annotating drafts them), as a function of
those answers and of what people decided. A question drafted again keeps its id (`curate.base.ids.derived_id`, or
its stored id) and takes the new truth; one no longer drafted is set aside (discarded with the reason,
`retired_from` its status) and comes back as it was when drafted again; a new one waits in the author's drafts.
Facts stand: a question a person rejected or removed stays so and is not drafted anew; a truth a person decided
(`truth_fact`) is never overwritten, and where the answers now imply another, the question waits in the person-queue
(`contradiction`, curate.decisions.person_queue) with its ready state as it was. The rows it changes are locked
first (PostgreSQL).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from vhmine import rules as R
from vhmine.curate.base import derived_id
from vhmine.errors import FormError, InputError
from vhmine.store import Instance


def _show(values) -> str:
    if isinstance(values, bool):
        return "yes" if values else "no"
    if isinstance(values, list):
        return " / ".join(map(str, values)) or "(none)"
    return str(values)


def _template(o: Instance) -> R.Template | None:
    """The OEQ template to draft from; None for the worker's own question (or one that has no YNQ form)."""
    if not o.slots:
        return None
    try:
        tpl = R.get_template(o.template_id)
    except (FormError, InputError):
        return None
    return tpl if tpl.kind == R.OEQ and tpl.ynq else None


def _same(d: Instance, n: R.YnqDraft) -> bool:
    """A stored YNQ is this new draft: the same question, or the same tested value (a reworded one)."""
    if " ".join(d.question.lower().split()).rstrip("?. ") == " ".join(n.question.lower().split()).rstrip("?. "):
        return True
    return (
        d.draft_value is not None
        and n.value is not None
        and R.normalize_answer(d.draft_value) == R.normalize_answer(n.value)
    )


def _answers_key(answers) -> list[str]:
    return sorted({R.normalize_answer(a) for a in answers or ()})


def contradicts(fact: dict, derived: bool | None, answers) -> bool:
    """Whether the open answers `answers` (implying the truth `derived`; None: the rules cannot read the question)
    contradict a person's truth `fact`: only where the answers changed since the person decided and now say
    otherwise, and not where an admin already kept the truth against that very implication (`seen`, set by
    curate.decisions.person_queue). An unreadable question decided "yes" survives an alias (every answer it was decided
    against holds)."""
    now, then = _answers_key(answers), _answers_key(fact.get("source"))
    if now == then:
        return False
    if derived is not None:
        return derived != fact["truth"] and derived != fact.get("seen")
    return not (fact["truth"] and set(then) <= set(now))


def _own(d: Instance) -> bool:
    """A question in the worker's own words: the rules cannot read its truth from the open answers."""
    return d.template_id.endswith(".own")


def _implied(d: Instance, o: Instance) -> bool | None:
    """The truth the open question's answers imply for the drafted YNQ `d`; None where the rules cannot read it."""
    if _own(d) or d.draft_value is None:
        return None
    return R.normalize_answer(d.draft_value) in set(_answers_key(o.answers))


def _set_aside_by_person(d: Instance) -> bool:
    """Discarded by a person (a rejected draft, a removal, an undo): a fact derivation leaves alone."""
    return d.status == "discarded" and d.retired_from is None


def _queue(d: Instance, fact: dict, derived: bool | None, o: Instance, log, cause: str, what: str) -> None:
    """Put `d` in the person-queue where the open answers now contradict its truth `fact`, or take it out where they
    no longer do; its ready state stands either way (a person decides: curate.decisions.person_queue)."""
    if contradicts(fact, derived, o.answers):
        new = {
            "fact": fact["truth"],
            "by": fact.get("by"),
            "derived": derived,
            "decided_against": fact.get("source"),
            "source": list(o.answers),
        }
        if d.contradiction is None or {k: d.contradiction.get(k) for k in new} != new:
            log.track(
                "instances",
                d,
                f"{cause}: the fixed answers ({what}) may contradict the truth "
                f"{_show(fact['truth'])} that {fact.get('by')} decided: waiting for an admin",
                "contradiction",
            )
            d.contradiction = dict(new, since=cause)
    elif d.contradiction is not None:
        log.track(
            "instances", d, f"{cause}: the fixed answers ({what}) agree with the decided truth again", "contradiction"
        )
        d.contradiction = None


def _redraft(
    s: Session,
    inst: Instance,
    log,
    cause: str,
    what: str,
    by: str,
    now: dt.datetime,
    old_answers: list | None = None,
) -> tuple[set[str], set[str]]:
    """Derive the YNQs of `inst` and of the pair's other OEQs on its question again, from their answers and the
    facts people decided (see the module docstring); returns (ids whose truth changed while ready, ids that left
    or rejoined the ready set)."""
    from vhmine.bench import question_key

    key = question_key(inst.question)
    # locked (PostgreSQL), in id order, and read as committed: a worker confirming a draft, an admin fixing the
    # pair's other question or a yes/no question's truth meanwhile waits, or is waited for, never overwritten
    others = [
        o
        for o in s.scalars(
            select(Instance)
            .where(
                Instance.task_id == inst.task_id,
                Instance.kind == R.OEQ,
                Instance.mode == inst.mode,
                Instance.status == "ready",
                Instance.id != inst.id,
            )
            .order_by(Instance.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        if question_key(o.question) == key
    ]
    s.scalars(
        select(Instance)
        .where(Instance.derived_from.in_([inst.id] + [o.id for o in others]))
        .order_by(Instance.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    ).all()
    asked = ([inst] if inst.status == "ready" else []) + others
    flipped, moved = set(), set()

    def leave(d: Instance, why: str) -> None:  # derivation sets it aside; it comes back when drafted again
        log.track("instances", d, why, "status", "discard_reason", "retired_from", "contradiction")
        if d.status == "ready":
            moved.add(d.id)
        d.retired_from, d.status, d.discard_reason, d.updated_by, d.updated_at = d.status, "discarded", why, by, now
        d.contradiction = None  # nothing left to decide while it is not asked (drafting it again asks again)

    def back(d: Instance, why: str) -> None:
        log.track("instances", d, why, "status", "discard_reason", "retired_from")
        if d.retired_from == "ready":
            moved.add(d.id)
        d.status, d.retired_from, d.updated_by, d.updated_at = d.retired_from, None, by, now
        d.discard_reason = why if d.status == "draft" else None

    for o in [inst] + others:
        rows = s.scalars(select(Instance).where(Instance.derived_from == o.id).order_by(Instance.id)).all()
        live = [d for d in rows if d.status in ("ready", "draft")]
        if not rows:
            continue
        source = "the open question it was drafted from" if o is inst else f"the pair's open question {inst.id}"
        if o.status != "ready":
            for d in live:
                leave(d, f"{cause}: {source} was removed")
            continue
        tpl = _template(o)
        if tpl is None:  # nothing to draft from: each ready one's truth is its author's, checked against the change
            if o is inst:
                for d in live:
                    if d.status == "ready":
                        fact = d.truth_fact or {"truth": bool(d.truth), "by": d.created_by, "source": old_answers}
                        _queue(d, fact, None, o, log, cause, what)
            continue
        wrong = [a for x in asked if x.id != o.id for a in x.answers]
        fresh = R.draft_ynq(R.get_mode(o.mode), tpl, o.slots, o.answers, wrong)
        by_id = {d.id: d for d in rows}
        match = {
            k: by_id[derived_id(o.id, n.question)] for k, n in enumerate(fresh) if derived_id(o.id, n.question) in by_id
        }
        used: set[str] = {d.id for d in match.values()}
        for k, n in enumerate(fresh):
            d = match.get(k)
            if d is None:  # stored before ids were derived, or reworded: the same question or tested value
                d = next((r for r in rows if r.id not in used and _same(r, n)), None)
            if d is None:
                why = f"{cause}: drafted from the fixed answers ({what}); waiting for its author to confirm"
                d = Instance(
                    id=derived_id(o.id, n.question),
                    task_id=o.task_id,
                    action_id=None,
                    mode=o.mode,
                    kind=R.YNQ,
                    image_id=o.image_id,
                    pair_id=o.pair_id,
                    template_id=n.template_id,
                    slots=dict(n.slots),
                    question=n.question,
                    answers=["Yes" if n.truth else "No"],
                    truth=n.truth,
                    derived_from=o.id,
                    draft_value=n.value,
                    status="draft",
                    discard_reason=why,
                    created_by=o.created_by,
                    created_at=now,
                )
                s.add(d)
                log.extra.append(
                    {
                        "table": "instances",
                        "id": d.id,
                        "why": why,
                        "created": {
                            "question": n.question,
                            "truth": n.truth,
                            "image_id": o.image_id,
                            "derived_from": o.id,
                        },
                    }
                )
                used.add(d.id)
                continue
            used.add(d.id)
            if _set_aside_by_person(d):
                continue  # a person's discard stands: it is not drafted again either
            if d.retired_from:
                back(d, f"{cause}: drafted again from the fixed answers ({what}), as it was")
            if d.truth_fact is not None:
                _queue(d, d.truth_fact, None if _own(d) else n.truth, o, log, cause, what)
            elif bool(d.truth) != n.truth:
                log.track(
                    "instances",
                    d,
                    f"{cause}: drafted again from the fixed answers ({what}): truth "
                    f"{_show(bool(d.truth))} → {_show(n.truth)}",
                    "truth",
                    "answers",
                )
                d.truth, d.answers, d.updated_by, d.updated_at = n.truth, ["Yes" if n.truth else "No"], by, now
                if d.status == "ready":
                    flipped.add(d.id)
        for d in live:
            if d.id in used:
                continue
            if d.truth_fact is not None:  # a person's truth (own wording, an erratum): checked, never retired here
                _queue(d, d.truth_fact, _implied(d, o), o, log, cause, what)
                continue
            if o is not inst and d.draft_value is None:
                continue  # a reworded variant about an image whose answer did not change: still true
            leave(
                d,
                f"{cause}: no longer among the yes/no questions drafted from the fixed answers ({what})"
                if o is inst
                else f"{cause}: its 'no' value came from {source}, whose answers changed ({what})",
            )
    return flipped, moved
