"""Derived state follows its source: one fix to a ready instance, and everything the store derived from it.

Reads and writes, inside the transaction that changes the instance (curate.decisions.errata accepts an erratum with
`apply`; curate.decisions.undo takes it back with `reverse`), what the store's recorded links tie to it:
- `derived_from` and the pair task: the yes/no questions drafted from an open question are drafted again from
  the fixed answers, together with the pair's other open question on the same question (its "no" variant takes
  this image's answer as the wrong value), as a function of the answers and of people's decisions
  (curate.decisions.redraft: the same answers give the same questions and ids, a person's truth is never overwritten, a
  contradiction waits in the person-queue). A removed open question takes its YNQs along.
- `responses` and `response_labels` of every instance whose reference changed: a rule's verdict (judge
  `rule:<rule>`) is read again against the new truth; a judge's verdict on an open answer is cleared, for
  `vhmine probe --judge` to judge again; workers' labels, which judged the old reference, are set aside (the
  answer goes back to the labelling queue).
- `blind_answers`: scored again (curate.work.blind.score_stored); one only a judge can score waits, unscored, for
  `vhmine blind` to judge it again; the flags of every solver that answered there are recomputed.
- `reviews`: an open answer's review label is read again against the new answers.
- pair groups (vhmine.bench.assign_groups, rebuilt by every export): the pair's groups before and after are
  compared so that the changelog can say why an item's group changed.

`reverse` sets aside what workers decided since against the reference it takes away (labels), and scores again
what was stored since (verdicts, blind answers), never mixing two truths. `apply` returns the entries the
errata_accept action keeps: {"table", "id", "why"} with "changes" {field: [old,
new]}, "created" (a new draft) or "deleted" (a label set aside). `reverse` takes exactly these back; the export
changelog lists them (vhmine.export.changelog).
"""

from __future__ import annotations

import datetime as dt
import json

from sqlalchemy import select
from sqlalchemy.orm import Session

from vhmine import rules as R
from vhmine.curate.decisions.redraft import _redraft, _show, _template
from vhmine.errors import InputError, LeaseError
from vhmine.store import (
    Action,
    BlindAnswer,
    Instance,
    Response,
    ResponseLabel,
    Review,
)

TABLES = {
    "instances": Instance,
    "responses": Response,
    "response_labels": ResponseLabel,
    "blind_answers": BlindAnswer,
    "reviews": Review,
}
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


def describe(changes: dict) -> str:
    """An erratum's changes in words: "answers blue → red", "truth yes → no", "removed"."""
    if "status" in changes:
        return "removed"
    return "; ".join(
        f"{f} {_show(a)} → {_show(b)}" for f, (a, b) in changes.items() if f != "answers" or "truth" not in changes
    )


# --- pair groups ------------------------------------------------------------------------------------


def _groups(s: Session, inst: Instance) -> dict[str, str | None]:
    """instance id -> its pair group (as an export of every ready instance of the pair and mode builds them)."""
    from vhmine.bench import BenchItem, Benchmark, assign_groups, question_key

    if not inst.pair_id:
        return {}
    rows = s.scalars(
        select(Instance).where(Instance.pair_id == inst.pair_id, Instance.mode == inst.mode, Instance.status == "ready")
    ).all()
    items = [
        BenchItem(
            r.id,
            r.mode,
            r.kind,
            r.question,
            tuple(r.answers),
            r.truth,
            None,
            r.image_id,
            f"{r.pair_id}:{r.kind}:{question_key(r.question)}",
            {"pair_id": r.pair_id},
        )
        for r in rows
    ]
    return {it.id: it.group_id for it in assign_groups(Benchmark("pair", items))}


def rederive(s: Session, inst: Instance, *, cause: str, by: str, now: dt.datetime) -> None:
    """Derive the YNQs drafted from the OEQ `inst` (and the pair's on its question) again from what the store holds
    now: idempotent, so only what an undo just put back (curate.decisions.undo) can change."""
    if inst.status == "ready" and _template(inst) is None:
        return  # nothing drafted from it to derive again
    s.flush()
    _redraft(s, inst, _Log(), cause, "as the answers are now", by, now)


# --- what scored the old reference, scored again -------------------------------------------------------------


def _rescore(s: Session, inst: Instance, log: _Log, cause: str, what: str) -> None:
    from vhmine.curate.work import UNANSWERABLE, review_label, score_stored
    from vhmine.curate.work import blind_reference as reference_of
    from vhmine.rules import get_rule, yes_no_verdict

    for r in s.scalars(select(Response).where(Response.instance_id == inst.id).order_by(Response.id)):
        judge = r.judge or ""
        rule = judge[5:] if judge.startswith("rule:") else None
        try:
            rule = get_rule(rule).name if rule and inst.kind == R.YNQ else None
        except InputError:
            rule = None
        if rule:
            log.track(
                "responses", r, f"{cause}: verdict read again by {judge} against the new truth ({what})", "verdict"
            )
            r.verdict = yes_no_verdict(r.answer, inst.truth, rule)
        elif r.verdict is not None or judge:
            log.track(
                "responses",
                r,
                f"{cause}: the judge saw the old reference ({what}); cleared for "
                "`vhmine probe --judge` to judge it again",
                "verdict",
                "judge",
            )
            r.verdict, r.judge = None, None
        for lab in s.scalars(select(ResponseLabel).where(ResponseLabel.response_id == r.id)).all():
            log.extra.append(
                {
                    "table": "response_labels",
                    "id": [lab.response_id, lab.worker],
                    "why": f"{cause}: the label judged the old reference ({what}); set aside to label again",
                    "deleted": {
                        "verdict": lab.verdict,
                        "action_id": lab.action_id,
                        "created_at": lab.created_at.isoformat(),
                    },
                }
            )
            s.delete(lab)
    ref = reference_of(inst)
    for b in s.scalars(select(BlindAnswer).where(BlindAnswer.instance_id == inst.id).order_by(BlindAnswer.id)):
        right = score_stored(inst.kind, b.answer, ref, b.scorer)
        log.track(
            "blind_answers",
            b,
            f"{cause}: scored again against the new reference ({what})"
            if right is not None
            else f"{cause}: the judge saw the old reference ({what}); unscored until `vhmine blind` judges it again",
            "correct",
            "reference",
        )
        b.correct, b.reference = right, ref if right is not None else b.reference
    if inst.kind == R.OEQ:
        for rv in s.scalars(select(Review).where(Review.instance_id == inst.id)):
            if rv.label != UNANSWERABLE:
                log.track("reviews", rv, f"{cause}: the review read again against the new answers ({what})", "label")
                rv.label = review_label(inst, rv.answer)


def _solvers(s: Session, ids: set[str]) -> list[tuple]:
    if not ids:
        return []
    return sorted(
        set(
            s.execute(
                select(BlindAnswer.model, BlindAnswer.endpoint, BlindAnswer.prompt).where(
                    BlindAnswer.instance_id.in_(sorted(ids))
                )
            ).all()
        ),
        key=lambda t: (t[0], t[1] or "", t[2]),
    )


def _refresh(s: Session, solvers: list[tuple], log: _Log | None, why: str) -> None:
    from vhmine.curate.work import blind_solver_rows as solver_rows
    from vhmine.curate.work import refresh_blind_flags_in as refresh_flags

    s.flush()
    for model, endpoint, prompt in solvers:
        if log is not None:
            for b in solver_rows(s, model, endpoint, prompt):
                log.track("blind_answers", b, why, "flag_id")
        refresh_flags(s, model, endpoint, prompt)


# --- the mechanism ------------------------------------------------------------------------------------------


def apply(
    s: Session,
    inst: Instance,
    changes: dict,
    *,
    cause: str,
    by: str,
    now: dt.datetime,
    discard_reason: str | None = None,
) -> list[dict]:
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
    if inst.kind == R.OEQ:
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
            log.extra.append(
                {
                    "table": "groups",
                    "id": iid,
                    "changes": {"group_id": [old, new]},
                    "why": f"{cause}: pair group {old or '(none)'} → {new or '(none)'}, rebuilt from the "
                    f"fixed answers ({what})",
                }
            )
    return log.entries()


def _labels_since(s: Session, iids: list[str], cause: str) -> list[dict]:
    """Workers' labels of the responses to `iids` (each judged the reference that the undo of `cause` takes away),
    set aside: returns entries saying whose and what, for the record."""
    out = []
    for r in s.scalars(select(Response).where(Response.instance_id.in_(iids)).order_by(Response.id)) if iids else []:
        for lab in s.scalars(select(ResponseLabel).where(ResponseLabel.response_id == r.id)).all():
            out.append(
                {
                    "table": "response_labels",
                    "id": [lab.response_id, lab.worker],
                    "why": f"{cause} undone: the label judged the reference the undo took away; set aside to "
                    "label again",
                    "deleted": {
                        "verdict": lab.verdict,
                        "action_id": lab.action_id,
                        "created_at": lab.created_at.isoformat(),
                    },
                }
            )
            s.delete(lab)
    s.flush()
    return out


def _scores_since(s: Session, iids: list[str], entries: list[dict]) -> set[tuple]:
    """Responses and blind answers to `iids` stored since the erratum (not in its entries): a rule's verdict read
    again against the restored truth, a judge's cleared for `vhmine probe --judge`; a blind answer scored again
    (or left for `vhmine blind` to judge). Returns the solvers whose flags to recompute."""
    from vhmine.curate.work import blind_reference as reference_of
    from vhmine.curate.work import score_stored
    from vhmine.rules import get_rule, yes_no_verdict

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
                rule = get_rule(judge[5:]).name if judge.startswith("rule:") and inst.kind == R.YNQ else None
            except InputError:
                rule = None
            if rule:
                r.verdict = yes_no_verdict(r.answer, inst.truth, rule)
            elif r.verdict is not None or judge:
                r.verdict, r.judge = None, None
    return solvers


def reverse(
    s: Session, entries: list[dict], cause: str, by: str, now: dt.datetime, also: tuple[str, ...] = ()
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
                    raise LeaseError(
                        f"cannot undo: {table[:-1].replace('_', ' ')} {e['id']} was changed again since "
                        f"{cause} ({field})"
                    )
        if table == "blind_answers":
            solvers.add((obj.model, obj.endpoint, obj.prompt))
    changed = list(also) + [
        e["id"] for e in entries if e["table"] == "instances" and {"truth", "answers"} & set(e.get("changes") or {})
    ]
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
            done = s.get(Action, d["action_id"]) if d.get("action_id") else None
            if done is not None and done.undone_at is not None:
                continue  # the worker took that label back meanwhile: it stays taken back
            s.add(
                ResponseLabel(
                    response_id=e["id"][0],
                    worker=e["id"][1],
                    verdict=d["verdict"],
                    action_id=d["action_id"],
                    created_at=dt.datetime.fromisoformat(d["created_at"]),
                )
            )
        else:
            for field, (old, _) in e["changes"].items():
                setattr(obj, field, old)
            if table == "instances":
                obj.updated_by, obj.updated_at = by, now
    s.flush()
    solvers |= _scores_since(s, changed, entries)
    _refresh(s, sorted(solvers, key=lambda t: (t[0], t[1] or "", t[2] or "")), None, "")
    return aside
