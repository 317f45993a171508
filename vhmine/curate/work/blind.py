"""Blind-solver flags: what a text-only model answered without the image, and the flags workers overrule.

Reads and writes the `blind_answers` table (vhmine.store.BlindAnswer) with the instances it points at.
`record_blind_answer` writes one answer (vhmine.models.blind calls it) with the reference it was scored
against; `refresh_blind_flags` decides the flags of one (model, endpoint, prompt) from the answers stored: a
question group (`group_key`) is flagged when every ready instance of it has a scored answer and every answer
was right, so a failed request (or an answer waiting to be scored again, `correct` NULL) never makes a flag.
`score_stored` scores a stored answer against an instance's current reference, as `vhmine blind` and
curate.decisions.derived (an accepted erratum) re-score them; `stored_answers` and `rescore_blind_answer` are the
rerun's reads and writes. `flag_list` shows flags to a worker, a page at a time (`flag_count` counts them);
`overrule_blind_flag` records who overruled one and why (and `reinstate_blind_flag` takes that back); `blind_dropped`
and `blind_summary` are what export reads: blind accuracy counts each question once per solver (model and prompt),
whatever endpoints it was asked through.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, checked_worker, new_id
from vhmine.errors import FormError, InputError
from vhmine.store import (
    BlindAnswer,
    Instance,
    Store,
    utcnow,
)


def group_key(mode: str, kind: str, pair_id: str | None, question: str, instance_id: str) -> str:
    """The instances that ask one question: of a pair, the same question (bench.question_key) on its
    images; a question without a pair is its own group."""
    from vhmine.bench import question_key

    return f"{mode}:{pair_id}:{kind}:{question_key(question)}" if pair_id else f"{mode}:{instance_id}"


def blind_answered(store: Store, model: str, endpoint: str | None, prompt: str) -> set[str]:
    """Instance ids that already have an answer from this model, endpoint and prompt."""
    with store.session(write=False) as s:
        return set(
            s.scalars(
                select(BlindAnswer.instance_id).where(
                    BlindAnswer.model == model, BlindAnswer.prompt == prompt, BlindAnswer.endpoint == endpoint
                )
            )
        )  # endpoint None: IS NULL


def reference_of(inst) -> dict:
    """What a blind answer is scored against: the instance's reference answers and (yes/no) truth."""
    return {"answers": list(inst.answers), "truth": inst.truth}


def score_stored(kind: str, answer: str, reference: dict, scorer: str) -> bool | None:
    """Whether a stored blind answer is right against `reference` (reference_of) under its scorer: `rule:<rule>`
    (yes/no), `match` (open answers, eval's match_oeq); None for a judge's scorer (`llm:...`): only the judge
    can say, so the answer waits for `vhmine blind --judge` to judge it again."""
    from vhmine.rules import yes_no_verdict

    if scorer.startswith("rule:"):
        return yes_no_verdict(answer, reference.get("truth"), scorer[5:]) == "correct" if kind == R.YNQ else None
    if scorer == "match":
        from vhmine.rules import match_oeq

        return bool(match_oeq(answer, reference.get("answers") or ()))
    return None


def record_blind_answer(
    store: Store,
    instance_id: str,
    *,
    model: str,
    endpoint: str | None,
    prompt: str,
    answer: str,
    correct: bool,
    scorer: str,
    group: str,
) -> str:
    with store.session() as s:
        inst = s.get(Instance, instance_id)
        if inst is None:
            raise InputError(f"no instance {instance_id!r} in {store.display_url}")
        rid = new_id()
        s.add(
            BlindAnswer(
                id=rid,
                instance_id=instance_id,
                model=model,
                endpoint=endpoint,
                prompt=prompt,
                answer=answer,
                correct=bool(correct),
                scorer=scorer,
                group_key=group,
                created_at=utcnow(),
                reference=reference_of(inst),
            )
        )
    return rid


@dataclass(frozen=True)
class StoredAnswer:
    id: str
    instance_id: str
    answer: str
    correct: bool | None
    scorer: str
    reference: dict | None


def stored_answers(store: Store, model: str, endpoint: str | None, prompt: str) -> dict[str, StoredAnswer]:
    """instance id -> the stored answer of this model, endpoint and prompt (the latest, should there be two)."""
    with store.session(write=False) as s:
        rows = s.scalars(
            select(BlindAnswer)
            .where(
                BlindAnswer.model == model, BlindAnswer.prompt == prompt, BlindAnswer.endpoint == endpoint
            )  # None: IS NULL
            .order_by(BlindAnswer.created_at, BlindAnswer.id)
        ).all()
        return {
            r.instance_id: StoredAnswer(r.id, r.instance_id, r.answer, r.correct, r.scorer, r.reference) for r in rows
        }


def rescore_blind_answer(store: Store, answer_id: str, *, correct: bool | None, scorer: str, reference: dict) -> None:
    """A stored answer scored again (vhmine blind's rerun): right or not against `reference`, by `scorer`."""
    with store.session() as s:
        r = s.get(BlindAnswer, answer_id)
        r.correct, r.scorer, r.reference = correct, scorer, reference


def refresh_blind_flags(store: Store, model: str, endpoint: str | None, prompt: str) -> dict[str, str]:
    """Set the flags of this model's answers: group_key -> flag id for every group right on all its
    ready instances. A flag already there keeps its id and any overrule; a group no longer right
    everywhere (a new instance joined it and was answered wrong) loses its flag."""
    with store.session() as s:
        return refresh_flags(s, model, endpoint, prompt)


def solver_rows(s: Session, model: str, endpoint: str | None, prompt: str) -> list[BlindAnswer]:
    return s.scalars(
        select(BlindAnswer).where(
            BlindAnswer.model == model, BlindAnswer.prompt == prompt, BlindAnswer.endpoint == endpoint
        )
    ).all()  # endpoint None: IS NULL


def refresh_flags(s: Session, model: str, endpoint: str | None, prompt: str) -> dict[str, str]:
    """refresh_blind_flags inside a transaction the caller holds (curate.decisions.derived refreshes with an
    erratum)."""
    rows = solver_rows(s, model, endpoint, prompt)
    by_group: dict[str, list[BlindAnswer]] = defaultdict(list)
    for r in rows:
        by_group[r.group_key].append(r)
    ready = s.execute(
        select(Instance.id, Instance.mode, Instance.kind, Instance.pair_id, Instance.question).where(
            Instance.status == "ready"
        )
    ).all()
    members: dict[str, set[str]] = defaultdict(set)
    for iid, mode, kind, pair_id, question in ready:
        members[group_key(mode, kind, pair_id, question, iid)].add(iid)
    flags = {}
    for key, group in by_group.items():
        # an answer waiting to be scored again (correct None) is no answer yet
        answered = {r.instance_id for r in group if r.instance_id in members[key] and r.correct is not None}
        right = (
            bool(members[key])
            and answered == members[key]
            and all(r.correct for r in group if r.instance_id in members[key] and r.correct is not None)
        )
        if not right:
            for r in group:
                r.flag_id = None
            continue
        fid = next((r.flag_id for r in group if r.flag_id), None) or new_id()
        for r in group:
            r.flag_id = fid if r.instance_id in members[key] else None
        flags[key] = fid
    return flags


@dataclass(frozen=True)
class FlaggedItem:
    instance_id: str
    image_id: str
    references: tuple[str, ...]  # the reference answers (YNQ: "Yes" / "No")
    blind_answer: str


@dataclass(frozen=True)
class BlindFlag:
    """One flag: a question a text-only model answered right on every image it is asked of."""

    flag_id: str
    mode: str
    kind: str
    question: str
    model: str
    prompt: str
    endpoint: str | None
    scorer: str
    items: tuple[FlaggedItem, ...]
    created_at: dt.datetime
    overruled_by: str | None = None
    overruled_at: dt.datetime | None = None
    overrule_reason: str | None = None

    @property
    def overruled(self) -> bool:
        return self.overruled_by is not None


def _flagged(mode: str | None, include_overruled: bool):
    """The conditions on (BlindAnswer, Instance) rows of the flags a worker looks through."""
    where = [BlindAnswer.flag_id.is_not(None), Instance.status == "ready"]
    if mode:
        where.append(Instance.mode == R.get_mode(mode).name)
    if not include_overruled:
        where.append(BlindAnswer.overruled_by.is_(None))
    return where


def flag_count(store: Store, worker: str | WorkerInfo, *, mode: str | None = None) -> tuple[int, int]:
    """(flags, of which overruled) of `mode` (or all): what flag_list pages through, counted in one query."""
    with store.session(write=False) as s:
        checked_worker(s, worker)
        flags, overruled = s.execute(
            select(
                func.count(BlindAnswer.flag_id.distinct()),
                func.count(case((BlindAnswer.overruled_by.is_not(None), BlindAnswer.flag_id)).distinct()),
            )
            .join(Instance, Instance.id == BlindAnswer.instance_id)
            .where(*_flagged(mode, True))
        ).one()
    return flags, overruled


def flag_list(
    store: Store,
    worker: str | WorkerInfo,
    *,
    mode: str | None = None,
    include_overruled: bool = True,
    offset: int = 0,
    limit: int | None = None,
) -> list[BlindFlag]:
    """Every blind flag (of `mode`), newest model run last, for a worker to look through; `offset` and `limit`: one
    page of them (only that page's answers are read)."""
    with store.session(write=False) as s:
        checked_worker(s, worker)
        where = _flagged(mode, include_overruled)
        q = select(BlindAnswer, Instance).join(Instance, Instance.id == BlindAnswer.instance_id).where(*where)
        if offset or limit is not None:  # the page's flags, in the order the whole list has them
            first = func.min(BlindAnswer.created_at)
            page = (
                select(BlindAnswer.flag_id)
                .join(Instance, Instance.id == BlindAnswer.instance_id)
                .where(*where)
                .group_by(BlindAnswer.flag_id)
                .order_by(first, BlindAnswer.flag_id)
                .offset(offset)
                .limit(limit)
            )
            q = q.where(BlindAnswer.flag_id.in_(page.scalar_subquery()))
        rows = s.execute(q.order_by(BlindAnswer.created_at, BlindAnswer.flag_id, Instance.id)).all()
    grouped: dict[str, list] = defaultdict(list)
    for r, inst in rows:
        grouped[r.flag_id].append((r, inst))
    out = []
    for fid, rs in grouped.items():
        r0, i0 = rs[0]  # the rows of a flag share its overrule
        items = tuple(FlaggedItem(inst.id, inst.image_id, tuple(inst.answers), r.answer) for r, inst in rs)
        out.append(
            BlindFlag(
                fid,
                i0.mode,
                i0.kind,
                i0.question,
                r0.model,
                r0.prompt,
                r0.endpoint,
                r0.scorer,
                items,
                r0.created_at,
                r0.overruled_by,
                r0.overruled_at,
                r0.overrule_reason,
            )
        )
    return out


def _flag_rows(s, flag_id: str) -> list[BlindAnswer]:
    rows = s.scalars(select(BlindAnswer).where(BlindAnswer.flag_id == flag_id)).all()
    if not rows:
        raise InputError(f"no blind flag {flag_id!r} in the store (it may have been lifted by a later `vhmine blind`)")
    return rows


def overrule_blind_flag(store: Store, worker: str | WorkerInfo, flag_id: str, reason: str) -> None:
    """A worker's judgement that the question needs its image after all: the flag stays on record with
    who overruled it, when and why, and export keeps its instances."""
    reason = (reason or "").strip()
    if not reason:
        raise FormError(
            "reason",
            "say why the question needs its image (e.g. 'the model guessed the usual answer; "
            "this picture is the exception')",
        )
    with store.session() as s:
        name = checked_worker(s, worker).name
        now = utcnow()
        for r in _flag_rows(s, flag_id):
            r.overruled_by, r.overruled_at, r.overrule_reason = name, now, reason


def reinstate_blind_flag(store: Store, worker: str | WorkerInfo, flag_id: str) -> None:
    """Take an overrule back: the flag counts again."""
    with store.session() as s:
        checked_worker(s, worker)
        for r in _flag_rows(s, flag_id):
            r.overruled_by, r.overruled_at, r.overrule_reason = None, None, None


def blind_dropped(store: Store) -> set[str]:
    """Instance ids flagged by any blind model and not overruled: what `export --drop-blind` leaves out."""
    with store.session(write=False) as s:
        return set(
            s.scalars(
                select(BlindAnswer.instance_id).where(
                    BlindAnswer.flag_id.is_not(None), BlindAnswer.overruled_by.is_(None)
                )
            )
        )


def blind_summary(store: Store, items: Iterable, *, dropped: Iterable = (), with_endpoint: bool = False) -> list[dict]:
    """Blind accuracy per mode over `items` (exported BenchItems: id, mode), one entry per solver (model, prompt;
    with_endpoint: per endpoint too); `dropped` are the items --drop-blind left out, counted per mode beside it.

    A question counts once per solver however many endpoints answered it (127.0.0.1 and localhost are one
    solver): its latest scored answer. An answer waiting to be scored again is counted as `unscored`, not asked."""
    modes = {it.id: it.mode for it in items}
    left_out = {it.id: it.mode for it in dropped}
    ids = list(modes) + list(left_out)
    rows: list = []
    with store.session(write=False) as s:
        for k in range(0, len(ids), 500):  # in chunks: SQLite caps the parameters of one statement
            rows += s.scalars(select(BlindAnswer).where(BlindAnswer.instance_id.in_(ids[k : k + 500]))).all()
    per_question: dict[tuple, list] = defaultdict(list)  # (solver key, instance id) -> its rows, oldest first
    runs: dict[tuple, dict] = {}
    for r in sorted(rows, key=lambda r: (r.model, r.prompt, r.endpoint or "", r.created_at, r.id)):
        key = (r.model, r.prompt, r.endpoint if with_endpoint else None)
        run = runs.setdefault(key, {"model": r.model, "prompt": r.prompt, "scorers": set(), "per_mode": {}})
        if with_endpoint:
            run["endpoint"] = r.endpoint
        run["scorers"].add(r.scorer)
        per_question[(key, r.instance_id)].append(r)

    def counts(run: dict, mode: str) -> dict:
        return run["per_mode"].setdefault(
            mode, {"asked": 0, "right": 0, "flagged_kept": 0, "overruled": 0, "left_out": 0, "unscored": 0}
        )

    for (key, iid), rs in sorted(
        per_question.items(), key=lambda x: (x[0][0][0], x[0][0][1], x[0][0][2] or "", x[0][1])
    ):
        run = runs[key]
        scored = sorted((r for r in rs if r.correct is not None), key=lambda r: (r.created_at, r.id))
        flagged = [r for r in rs if r.flag_id]
        kept = any(not r.overruled_by for r in flagged)
        if iid in modes:
            c = counts(run, modes[iid])
            if scored:
                c["asked"] += 1
                c["right"] += bool(scored[-1].correct)
            else:
                c["unscored"] += 1
            c["flagged_kept"] += kept
            c["overruled"] += bool(flagged) and not kept
        elif kept:
            counts(run, left_out[iid])["left_out"] += 1
    out = []
    for run in runs.values():
        for c in run["per_mode"].values():
            c["accuracy"] = round(c["right"] / c["asked"], 4) if c["asked"] else None
        run["scorers"] = sorted(run["scorers"])
        out.append(run)
    return out
