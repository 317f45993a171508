"""Derived state follows its source: one fix to a ready instance, and everything the store derived from it.

Reads and writes, inside the transaction that changes the instance (curate.errata accepts an erratum with
`apply`; curate.undo takes it back with `reverse`), what the store's recorded links tie to it:
- `derived_from` and the pair task: the yes/no questions drafted from an open question are drafted again from
  the fixed answers (modes.draft_ynq, as annotating drafts them), together with the pair's other open question
  on the same question (its "no" variant takes this image's answer as the wrong value). A derived YNQ the new
  drafting makes again keeps its id and takes the new truth; one it no longer makes leaves the ready set
  (discarded, with the reason); a variant none asks yet becomes a draft waiting for the question's author
  (curate.drafts). Where nothing can be drafted (a question reworded past its template), the fixed question's
  YNQs go back to their author's drafts with the reason, to redo. A removed open question takes its YNQs along.
- `responses` and `response_labels` of every instance whose reference changed: a rule's verdict (judge
  `rule:<rule>`) is read again against the new truth; a judge's verdict on an open answer is cleared, for
  `vhmine probe --judge` to judge again; workers' labels, which judged the old reference, are set aside (the
  answer goes back to the labelling queue).
- `blind_answers`: scored again (curate.blind.score_stored); one only a judge can score waits, unscored, for
  `vhmine blind` to judge it again; the flags of every solver that answered there are recomputed.
- `reviews`: an open answer's review label is read again against the new answers.
- pair groups (vhmine.bench.assign_groups, rebuilt by every export): the pair's groups before and after are
  compared so that the changelog can say why an item's group changed.

`apply` returns the entries the errata_accept action keeps: {"table", "id", "why"} with "changes" {field: [old,
new]}, "created" (a new draft) or "deleted" (a label set aside). `reverse` takes exactly these back; the export
changelog lists them (vhmine.export.changelog).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Optional

from vhmine.rules import modes as M
from vhmine.errors import FormError, InputError, LeaseError
from vhmine.store import (  # first: it says which extra to install when SQLAlchemy is missing
    BlindAnswer, Instance, Response, ResponseLabel, Review,
)

from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from vhmine.curate._shared import _new_id

TABLES = {"instances": Instance, "responses": Response, "response_labels": ResponseLabel,
          "blind_answers": BlindAnswer, "reviews": Review}
HUMAN = ("instances", "response_labels")  # workers' work: undo refuses where it changed since
DERIVED = {"instances", "groups"}  # entries naming instances (the changelog shows them beside the items)


def _plain(value):
    """A column value as JSON keeps it (lists and dicts copied, so later changes do not reach the record)."""
    return json.loads(json.dumps(value))


def _pk(table: str, obj) -> object:
    if table == "response_labels":
        return [obj.response_id, obj.worker]
    if table == "reviews":
        return [obj.instance_id, obj.worker]
    return obj.id


def _row(s: Session, table: str, pk, lock: bool = False):
    """The row `pk` of `table`; `lock`: locked and read as committed (a worker confirming it meanwhile waits, or is
    waited for, on PostgreSQL)."""
    return s.get(TABLES[table], tuple(pk) if isinstance(pk, list) else pk, with_for_update=lock, populate_existing=lock)


class _Log:
    """What `apply` changed: the tracked rows' values before (diffed with their values at the end), and the
    rows it added or set aside."""

    def __init__(self) -> None:
        self._tracked: dict[tuple, list] = {}
        self.extra: list[dict] = []

    def track(self, table: str, obj, why: str, *fields: str) -> None:
        key = (table, json.dumps(_pk(table, obj)))
        old = self._tracked.setdefault(key, [obj, {}, why])
        for f in fields:
            old[1].setdefault(f, _plain(getattr(obj, f)))

    def entries(self) -> list[dict]:
        out = []
        for (table, _), (obj, before, why) in self._tracked.items():
            ch = {f: [v, _plain(getattr(obj, f))] for f, v in before.items() if v != _plain(getattr(obj, f))}
            if ch:
                out.append({"table": table, "id": _pk(table, obj), "changes": ch, "why": why})
        return out + self.extra


def _show(values) -> str:
    if isinstance(values, bool):
        return "yes" if values else "no"
    if isinstance(values, list):
        return " / ".join(map(str, values)) or "(none)"
    return str(values)


def describe(changes: dict) -> str:
    """An erratum's changes in words: "answers blue → red", "truth yes → no", "removed"."""
    if "status" in changes:
        return "removed"
    return "; ".join(f"{f} {_show(a)} → {_show(b)}" for f, (a, b) in changes.items() if f != "answers" or "truth" not in changes)


# --- pair groups ------------------------------------------------------------------------------------

def _groups(s: Session, inst: Instance) -> dict[str, Optional[str]]:
    """instance id -> its pair group (as an export of every ready instance of the pair and mode builds them)."""
    from vhmine.bench import BenchItem, Benchmark, assign_groups, question_key

    if not inst.pair_id:
        return {}
    rows = s.scalars(select(Instance).where(Instance.pair_id == inst.pair_id, Instance.mode == inst.mode,
                                            Instance.status == "ready")).all()
    items = [BenchItem(r.id, r.mode, r.kind, r.question, tuple(r.answers), r.truth, None, r.image_id,
                       f"{r.pair_id}:{r.kind}:{question_key(r.question)}", {"pair_id": r.pair_id}) for r in rows]
    return {it.id: it.group_id for it in assign_groups(Benchmark("pair", items))}


# --- yes/no questions drafted again ----------------------------------------------------------------------

def _template(o: Instance) -> Optional[M.Template]:
    """The OEQ template to draft from; None for the worker's own question (or one that has no YNQ form)."""
    if not o.slots:
        return None
    try:
        tpl = M.get_template(o.template_id)
    except (FormError, InputError):
        return None
    return tpl if tpl.kind == M.OEQ and tpl.ynq else None


def _same(d: Instance, n: M.YnqDraft) -> bool:
    """A stored YNQ is this new draft: the same question, or the same tested value (a reworded one)."""
    if " ".join(d.question.lower().split()).rstrip("?. ") == " ".join(n.question.lower().split()).rstrip("?. "):
        return True
    return d.draft_value is not None and n.value is not None and \
        M.normalize_answer(d.draft_value) == M.normalize_answer(n.value)


def _answers_key(answers) -> list[str]:
    return sorted({M.normalize_answer(a) for a in answers or ()})


def contradicts(fact: dict, derived: Optional[bool], answers) -> bool:
    """Whether the open answers `answers` (implying the truth `derived`; None: the rules cannot read the question)
    contradict a person's truth `fact`: only where the answers changed since the person decided and now say
    otherwise, and not where an admin already kept the truth against that very implication (`seen`, set by
    curate.person_queue). An unreadable question decided "yes" survives an alias (every answer it was decided
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


def _implied(d: Instance, o: Instance) -> Optional[bool]:
    """The truth the open question's answers imply for the drafted YNQ `d`; None where the rules cannot read it."""
    if _own(d) or d.draft_value is None:
        return None
    return M.normalize_answer(d.draft_value) in set(_answers_key(o.answers))


def _set_aside_by_person(d: Instance) -> bool:
    """Discarded by a person (a rejected draft, a removal, an undo): a fact derivation leaves alone."""
    return d.status == "discarded" and d.retired_from is None


def _queue(d: Instance, fact: dict, derived: Optional[bool], o: Instance, log: _Log, cause: str, what: str) -> None:
    """Put `d` in the person-queue where the open answers now contradict its truth `fact`, or take it out where they
    no longer do; its ready state stands either way (a person decides: curate.errata.resolve_contradiction)."""
    if contradicts(fact, derived, o.answers):
        new = {"fact": fact["truth"], "by": fact.get("by"), "derived": derived, "decided_against": fact.get("source"),
               "source": list(o.answers)}
        if d.contradiction is None or {k: d.contradiction.get(k) for k in new} != new:
            log.track("instances", d, f"{cause}: the fixed answers ({what}) may contradict the truth "
                                      f"{_show(fact['truth'])} that {fact.get('by')} decided: waiting for an admin",
                      "contradiction")
            d.contradiction = dict(new, since=cause)
    elif d.contradiction is not None:
        log.track("instances", d, f"{cause}: the fixed answers ({what}) agree with the decided truth again", "contradiction")
        d.contradiction = None


def _redraft(s: Session, inst: Instance, log: _Log, cause: str, what: str, by: str, now: dt.datetime,
             old_answers: Optional[list] = None) -> tuple[set[str], set[str]]:
    """Derive the YNQs of `inst` and of the pair's other OEQs on its question again, from their answers and the
    facts people decided (see the module docstring); returns (ids whose truth changed while ready, ids that left
    or rejoined the ready set)."""
    from vhmine.bench import question_key
    from vhmine.curate._shared import derived_id

    key = question_key(inst.question)
    # locked (PostgreSQL), in id order, and read as committed: a worker confirming a draft, an admin fixing the
    # pair's other question or a yes/no question's truth meanwhile waits, or is waited for, never overwritten
    others = [o for o in s.scalars(select(Instance).where(
        Instance.task_id == inst.task_id, Instance.kind == M.OEQ, Instance.mode == inst.mode,
        Instance.status == "ready", Instance.id != inst.id).order_by(Instance.id).with_for_update()
        .execution_options(populate_existing=True)) if question_key(o.question) == key]
    s.scalars(select(Instance).where(Instance.derived_from.in_([inst.id] + [o.id for o in others])).order_by(Instance.id)
              .with_for_update().execution_options(populate_existing=True)).all()
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
        fresh = M.draft_ynq(M.get_mode(o.mode), tpl, o.slots, o.answers, wrong)
        by_id = {d.id: d for d in rows}
        match = {k: by_id[derived_id(o.id, n.question)] for k, n in enumerate(fresh) if derived_id(o.id, n.question) in by_id}
        used: set[str] = {d.id for d in match.values()}
        for k, n in enumerate(fresh):
            d = match.get(k)
            if d is None:  # stored before ids were derived, or reworded: the same question or tested value
                d = next((r for r in rows if r.id not in used and _same(r, n)), None)
            if d is None:
                why = f"{cause}: drafted from the fixed answers ({what}); waiting for its author to confirm"
                d = Instance(id=derived_id(o.id, n.question), task_id=o.task_id, action_id=None, mode=o.mode, kind=M.YNQ,
                             image_id=o.image_id, pair_id=o.pair_id, template_id=n.template_id, slots=dict(n.slots),
                             question=n.question, answers=["Yes" if n.truth else "No"], truth=n.truth,
                             derived_from=o.id, draft_value=n.value, status="draft", discard_reason=why,
                             created_by=o.created_by, created_at=now)
                s.add(d)
                log.extra.append({"table": "instances", "id": d.id, "why": why,
                                  "created": {"question": n.question, "truth": n.truth, "image_id": o.image_id,
                                              "derived_from": o.id}})
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
                log.track("instances", d, f"{cause}: drafted again from the fixed answers ({what}): truth "
                                          f"{_show(bool(d.truth))} → {_show(n.truth)}", "truth", "answers")
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
            leave(d, f"{cause}: no longer among the yes/no questions drafted from the fixed answers ({what})"
                  if o is inst else f"{cause}: its 'no' value came from {source}, whose answers changed ({what})")
    return flipped, moved


def rederive(s: Session, inst: Instance, *, cause: str, by: str, now: dt.datetime) -> None:
    """Derive the YNQs drafted from the OEQ `inst` (and the pair's on its question) again from what the store holds
    now: idempotent, so only what an undo just put back (curate.undo) can change."""
    if inst.status == "ready" and _template(inst) is None:
        return  # nothing drafted from it to derive again
    s.flush()
    _redraft(s, inst, _Log(), cause, "as the answers are now", by, now)


# --- what scored the old reference, scored again -------------------------------------------------------------

def _rescore(s: Session, inst: Instance, log: _Log, cause: str, what: str) -> None:
    from vhmine.curate.blind import reference_of, score_stored
    from vhmine.curate.review import UNANSWERABLE, _review_label
    from vhmine.rules.answers import get_rule, yes_no_verdict

    for r in s.scalars(select(Response).where(Response.instance_id == inst.id).order_by(Response.id)):
        judge = r.judge or ""
        rule = judge[5:] if judge.startswith("rule:") else None
        try:
            rule = get_rule(rule).name if rule and inst.kind == M.YNQ else None
        except InputError:
            rule = None
        if rule:
            log.track("responses", r, f"{cause}: verdict read again by {judge} against the new truth ({what})", "verdict")
            r.verdict = yes_no_verdict(r.answer, inst.truth, rule)
        elif r.verdict is not None or judge:
            log.track("responses", r, f"{cause}: the judge saw the old reference ({what}); cleared for "
                                      "`vhmine probe --judge` to judge it again", "verdict", "judge")
            r.verdict, r.judge = None, None
        for lab in s.scalars(select(ResponseLabel).where(ResponseLabel.response_id == r.id)).all():
            log.extra.append({"table": "response_labels", "id": [lab.response_id, lab.worker],
                              "why": f"{cause}: the label judged the old reference ({what}); set aside to label again",
                              "deleted": {"verdict": lab.verdict, "action_id": lab.action_id,
                                          "created_at": lab.created_at.isoformat()}})
            s.delete(lab)
    ref = reference_of(inst)
    for b in s.scalars(select(BlindAnswer).where(BlindAnswer.instance_id == inst.id).order_by(BlindAnswer.id)):
        right = score_stored(inst.kind, b.answer, ref, b.scorer)
        log.track("blind_answers", b, f"{cause}: scored again against the new reference ({what})" if right is not None
                  else f"{cause}: the judge saw the old reference ({what}); unscored until `vhmine blind` judges it again",
                  "correct", "reference")
        b.correct, b.reference = right, ref if right is not None else b.reference
    if inst.kind == M.OEQ:
        for rv in s.scalars(select(Review).where(Review.instance_id == inst.id)):
            if rv.label != UNANSWERABLE:
                log.track("reviews", rv, f"{cause}: the review read again against the new answers ({what})", "label")
                rv.label = _review_label(inst, rv.answer)


def _solvers(s: Session, ids: set[str]) -> list[tuple]:
    if not ids:
        return []
    return sorted(set(s.execute(select(BlindAnswer.model, BlindAnswer.endpoint, BlindAnswer.prompt)
                                .where(BlindAnswer.instance_id.in_(sorted(ids)))).all()),
                  key=lambda t: (t[0], t[1] or "", t[2]))


def _refresh(s: Session, solvers: list[tuple], log: Optional[_Log], why: str) -> None:
    from vhmine.curate.blind import refresh_flags, solver_rows

    s.flush()
    for model, endpoint, prompt in solvers:
        if log is not None:
            for b in solver_rows(s, model, endpoint, prompt):
                log.track("blind_answers", b, why, "flag_id")
        refresh_flags(s, model, endpoint, prompt)


# --- the mechanism ------------------------------------------------------------------------------------------

def apply(s: Session, inst: Instance, changes: dict, *, cause: str, by: str, now: dt.datetime,
          discard_reason: Optional[str] = None) -> list[dict]:
    """Put `changes` ({field: [old, new]}: answers, truth, status) on the ready instance `inst` and carry them
    through to everything derived from it (see the module docstring); returns the derived entries."""
    before = _groups(s, inst)
    for field, (_, new) in changes.items():
        setattr(inst, field, new)
    if "status" in changes:
        inst.discard_reason = discard_reason
    inst.updated_by, inst.updated_at = by, now
    s.flush()
    what = describe(changes)
    log = _Log()
    changed = {inst.id} if {"answers", "truth"} & set(changes) else set()
    gone: set[str] = set()
    if inst.kind == M.OEQ:
        flipped, gone = _redraft(s, inst, log, cause, what, by, now, (changes.get("answers") or [None])[0])
        changed |= flipped
    s.flush()
    for iid in sorted(changed):
        _rescore(s, s.get(Instance, iid), log, cause, what)
    _refresh(s, _solvers(s, changed | gone | {inst.id}), log, f"{cause}: blind flags recomputed ({what})")
    after = _groups(s, inst)
    for iid in sorted(set(before) | set(after)):
        if before.get(iid) != after.get(iid):
            old, new = before.get(iid), after.get(iid)
            log.extra.append({"table": "groups", "id": iid, "changes": {"group_id": [old, new]},
                              "why": f"{cause}: pair group {old or '(none)'} → {new or '(none)'}, rebuilt from the "
                                     f"fixed answers ({what})"})
    return log.entries()


def _labels_since(s: Session, iids: list[str], cause: str) -> list[dict]:
    """Workers' labels of the responses to `iids` (each judged the reference that the undo of `cause` takes away),
    set aside: returns entries saying whose and what, for the record."""
    out = []
    for r in s.scalars(select(Response).where(Response.instance_id.in_(iids)).order_by(Response.id)) if iids else []:
        for lab in s.scalars(select(ResponseLabel).where(ResponseLabel.response_id == r.id)).all():
            out.append({"table": "response_labels", "id": [lab.response_id, lab.worker],
                        "why": f"{cause} undone: the label judged the reference the undo took away; set aside to "
                               "label again", "deleted": {"verdict": lab.verdict, "action_id": lab.action_id,
                                                          "created_at": lab.created_at.isoformat()}})
            s.delete(lab)
    s.flush()
    return out


def _scores_since(s: Session, iids: list[str], entries: list[dict]) -> set[tuple]:
    """Responses and blind answers to `iids` stored since the erratum (not in its entries): a rule's verdict read
    again against the restored truth, a judge's cleared for `vhmine probe --judge`; a blind answer scored again
    (or left for `vhmine blind` to judge). Returns the solvers whose flags to recompute."""
    from vhmine.curate.blind import reference_of, score_stored
    from vhmine.rules.answers import get_rule, yes_no_verdict

    tracked = {e["id"] for e in entries if e["table"] == "responses"}
    seen = {e["id"] for e in entries if e["table"] == "blind_answers"}
    solvers = set()
    for b in s.scalars(select(BlindAnswer).where(BlindAnswer.instance_id.in_(iids), BlindAnswer.id.not_in(seen))):
        inst = s.get(Instance, b.instance_id)
        right = score_stored(inst.kind, b.answer, reference_of(inst), b.scorer)
        b.correct, b.reference = right, reference_of(inst) if right is not None else b.reference
        solvers.add((b.model, b.endpoint, b.prompt))
    for iid in iids:
        inst = s.get(Instance, iid)
        for r in s.scalars(select(Response).where(Response.instance_id == iid, Response.id.not_in(tracked))):
            judge = r.judge or ""
            try:
                rule = get_rule(judge[5:]).name if judge.startswith("rule:") and inst.kind == M.YNQ else None
            except InputError:
                rule = None
            if rule:
                r.verdict = yes_no_verdict(r.answer, inst.truth, rule)
            elif r.verdict is not None or judge:
                r.verdict, r.judge = None, None
    return solvers


def reverse(s: Session, entries: list[dict], cause: str, by: str, now: dt.datetime, also: tuple[str, ...] = ()
            ) -> list[dict]:
    """Take `apply`'s entries back (undo of the erratum). LeaseError, and nothing changed, where a worker built on
    them since: a yes/no question changed again, a new draft confirmed. Scores (responses' verdicts, blind answers,
    reviews) go back to what they were against the old reference; what workers decided since against the reference
    the undo takes away (labels) is set aside with the reason, never mixed with what it restores (`also`:
    the erratum's own instance when its reference changed). Returns the labels set aside."""
    solvers = set()
    for e in entries:
        table = e["table"]
        if table == "groups" or "deleted" in e:
            continue
        obj = _row(s, table, e["id"], lock=table in HUMAN)
        if "created" in e:
            if obj.status == "ready":
                raise LeaseError(f"cannot undo: the yes/no question {obj.id} drafted with {cause} was confirmed since")
        elif table in HUMAN:
            for field, (_, new) in e["changes"].items():
                if _plain(getattr(obj, field)) != new:
                    raise LeaseError(f"cannot undo: {table[:-1].replace('_', ' ')} {e['id']} was changed again since "
                                     f"{cause} ({field})")
        if table == "blind_answers":
            solvers.add((obj.model, obj.endpoint, obj.prompt))
    changed = list(also) + [e["id"] for e in entries if e["table"] == "instances"
                            and {"truth", "answers"} & set(e.get("changes") or {})]
    changed = list(dict.fromkeys(changed))
    aside = _labels_since(s, changed, cause)
    for e in reversed(entries):
        table = e["table"]
        if table == "groups":
            continue
        obj = _row(s, table, e["id"])
        if "created" in e:  # set aside as derivation sets aside: drafting the same answers again brings it back
            if obj.status == "draft":
                obj.retired_from, obj.status, obj.discard_reason = "draft", "discarded", f"{cause} undone"
                obj.updated_by, obj.updated_at = by, now
        elif "deleted" in e:
            d = e["deleted"]
            s.add(ResponseLabel(response_id=e["id"][0], worker=e["id"][1], verdict=d["verdict"], action_id=d["action_id"],
                                created_at=dt.datetime.fromisoformat(d["created_at"])))
        else:
            for field, (old, _) in e["changes"].items():
                setattr(obj, field, old)
            if table == "instances":
                obj.updated_by, obj.updated_at = by, now
    s.flush()
    solvers |= _scores_since(s, changed, entries)
    _refresh(s, sorted(solvers, key=lambda t: (t[0], t[1] or "", t[2] or "")), None, "")
    return aside
