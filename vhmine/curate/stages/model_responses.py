"""Model responses as the stages need them: probe's resume and judging, describe's examples, eval's labels.

Reads `responses` joined with their instances from the curation store; writes a response's endpoint
(claimed by the endpoint that gave the same answer again) and its automatic verdict (rule or judge).
Adding a response and the verdict that counts live in curate.work.responses; this module holds the queries
probe, describe (through probe.hallucinations) and eval ran themselves before.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from vhmine import rules as R
from vhmine.store import (
    Instance,
    Response,
    Store,
)


def stored_responses(
    store: Store, model: str, endpoint: str | None
) -> dict[tuple[str, str], tuple[str, str | None, str]]:
    """(instance id, prompt) -> (response id, automatic verdict, answer) of `model`'s responses from `endpoint`;
    endpoint None: those stored before vhmine recorded the endpoint (whose origin is unknown). Later ids win."""
    where = Response.endpoint == endpoint  # None: IS NULL
    with store.session(write=False) as s:
        rows = s.execute(
            select(Response.instance_id, Response.prompt, Response.id, Response.verdict, Response.answer)
            .where(Response.model == model, where)
            .order_by(Response.id)
        ).all()
    return {(iid, prompt): (rid, verdict, answer) for iid, prompt, rid, verdict, answer in rows}


def claim_endpoint(store: Store, response_id: str, endpoint: str) -> None:
    """Record the endpoint of a response stored before endpoints were (this endpoint gave the same answer)."""
    with store.session() as s:
        s.get(Response, response_id).endpoint = endpoint


def set_automatic_verdict(store: Store, response_id: str, verdict: str | None, judge: str) -> None:
    """The rule's or judge's verdict on a response, and who gave it (workers' labels still override it)."""
    with store.session() as s:
        r = s.get(Response, response_id)
        r.verdict, r.judge = verdict, judge


@dataclass(frozen=True)
class ModeResponse:
    """A response to a ready instance of one mode, with the instance fields describe's examples need."""

    response_id: str
    model: str
    answer: str
    verdict: str | None  # the automatic verdict (rule or judge), not the one that counts
    instance_id: str
    kind: str
    question: str
    answers: tuple[str, ...]
    truth: bool | None


def mode_responses(store: Store, mode: str, model: str | None = None) -> list[ModeResponse]:
    """Responses to the ready instances of `mode` (of `model` only, if given), by instance id then response id."""
    with store.session(write=False) as s:
        q = (
            select(Response, Instance)
            .join(Instance, Instance.id == Response.instance_id)
            .where(Instance.mode == R.get_mode(mode).name, Instance.status == "ready")
        )
        if model:
            q = q.where(Response.model == model)
        rows = s.execute(q).all()
    out = [
        ModeResponse(r.id, r.model, r.answer, r.verdict, i.id, i.kind, i.question, tuple(i.answers), i.truth)
        for r, i in rows
    ]
    return sorted(out, key=lambda x: (x.instance_id, x.response_id))


def responses_saying(store: Store, model: str, answers: dict[str, str]) -> list[tuple[str, str]]:
    """(response id, instance id) of `model`'s responses whose text is `answers[instance id]` (spaces aside):
    a verdict judges one answer text, so a response in other words does not speak for this answer."""
    with store.session(write=False) as s:
        return [
            (rid, iid)
            for rid, iid, text in s.execute(
                select(Response.id, Response.instance_id, Response.answer).where(Response.model == model)
            )
            if iid in answers and (text or "").strip() == (answers[iid] or "").strip()
        ]
