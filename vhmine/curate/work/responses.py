"""Model responses (written by the probe stage) and workers' labels of them.

`add_response` writes a model's answer to an instance (with the endpoint that gave it), with an
optional automatic verdict; `next_response` reads one the worker has not labelled yet, without the
model's name; `label_response` writes the worker's verdict (correct, hallucinated, or "no answer" for an answer
that does not answer: "I cannot tell from this image.") and a `label` action.
`response_verdicts` reads the verdict that counts for each response, decided by `decide_verdict` alone:
where workers labelled a response, their majority overrides the automatic verdict (rule or judge), and a
tie between them gives no verdict. probe's hallucinations, describe's examples and eval's `labels`
scorer all read verdicts through it: "no answer" is not correct (eval scores it wrong, as VHTest counts a refusal
as a miss) and no hallucination either (probe counts it apart, describe never takes it for an example).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import func, select

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, checked_worker, log_action, new_id, retried
from vhmine.errors import FormError, InputError, LeaseError
from vhmine.store import (
    VERDICTS,
    Instance,
    Response,
    ResponseLabel,
    Store,
    utcnow,
)


def add_response(
    store: Store,
    instance_id: str,
    model: str,
    prompt: str,
    answer: str,
    verdict: str | None = None,
    judge: str | None = None,
    endpoint: str | None = None,
) -> str:
    """A new response row; `endpoint` is where the answer came from, without credentials (llm.safe_endpoint)."""
    if verdict is not None and verdict not in VERDICTS:
        raise InputError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    with store.session() as s:
        if s.get(Instance, instance_id) is None:
            raise InputError(f"no instance {instance_id!r} in {store.display_url}")
        rid = new_id()
        s.add(
            Response(
                id=rid,
                instance_id=instance_id,
                model=model,
                prompt=prompt,
                answer=answer,
                verdict=verdict,
                judge=judge,
                endpoint=endpoint,
                created_at=utcnow(),
            )
        )
    return rid


@dataclass(frozen=True)
class ResponseVerdict:
    """The verdict that counts for one response, and who gave it."""

    verdict: str | None  # "correct", "hallucinated", "no answer", or None: not judged, or the workers tied
    source: str  # "workers", "workers tied", or the automatic judge ("rule:vhtest", "llm:<model> ..."); "none"
    labels: int = 0  # how many workers labelled the response

    @property
    def by_workers(self) -> bool:
        return self.labels > 0


def majority_verdict(labels: Sequence[str]) -> str | None:
    """The verdict most workers gave; no labels, or a tie for the most, gives no verdict (None)."""
    top = Counter(labels).most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


def decide_verdict(automatic: str | None, judge: str | None, labels: Sequence[str]) -> ResponseVerdict:
    """Workers' labels, where there are any, override the automatic verdict; tied labels leave no verdict."""
    if labels:
        v = majority_verdict(labels)
        return ResponseVerdict(v, "workers" if v else "workers tied", len(labels))
    return ResponseVerdict(automatic, judge or "none")


def response_verdicts(store: Store, response_ids: Iterable[str] | None = None) -> dict[str, ResponseVerdict]:
    """response id -> the verdict that counts (decide_verdict), for the given responses or all of them."""
    ids = None if response_ids is None else sorted(set(response_ids))
    rows: list = []
    labels: dict[str, list[str]] = {}
    with store.session(write=False) as s:
        for chunk in [None] if ids is None else [ids[i : i + 500] for i in range(0, len(ids), 500)]:
            q = select(Response.id, Response.verdict, Response.judge)
            lq = select(ResponseLabel.response_id, ResponseLabel.verdict)
            if chunk is not None:  # in chunks: SQLite caps the parameters of one statement
                q, lq = q.where(Response.id.in_(chunk)), lq.where(ResponseLabel.response_id.in_(chunk))
            rows += s.execute(q).all()
            for rid, verdict in s.execute(lq):
                labels.setdefault(rid, []).append(verdict)
    return {rid: decide_verdict(verdict, judge, labels.get(rid, ())) for rid, verdict, judge in rows}


@dataclass(frozen=True)
class ResponseItem:
    response_id: str
    mode: str
    kind: str
    question: str
    answers: tuple[str, ...]
    truth: bool | None
    image_id: str
    model_answer: str  # the model's name is not shown: labels should not depend on it


def next_response(store: Store, worker: str | WorkerInfo, mode: str | None = None) -> ResponseItem | None:
    """A model response the worker has not labelled, fewest labels first."""
    with store.session(write=False) as s:
        worker = checked_worker(s, worker).name
        mine = select(ResponseLabel.response_id).where(ResponseLabel.worker == worker)
        n = select(ResponseLabel.response_id, func.count().label("n")).group_by(ResponseLabel.response_id).subquery()
        q = (
            select(Response, Instance)
            .join(Instance, Instance.id == Response.instance_id)
            .outerjoin(n, n.c.response_id == Response.id)
            .where(Response.id.not_in(mine), Instance.status == "ready")
        )
        if mode:
            q = q.where(Instance.mode == R.get_mode(mode).name)
        row = s.execute(q.order_by(func.coalesce(n.c.n, 0), Response.id).limit(1)).first()
        if row is None:
            return None
        r, inst = row
        return ResponseItem(
            r.id, inst.mode, inst.kind, inst.question, tuple(inst.answers), inst.truth, inst.image_id, r.answer
        )


@retried
def label_response(store: Store, worker: str | WorkerInfo, response_id: str, verdict: str) -> None:
    """Mark a model response correct, hallucinated, or "no answer" (it does not answer the question)."""
    if verdict not in VERDICTS:
        raise FormError("verdict", f"choose one of: {', '.join(VERDICTS)}")
    with store.session() as s:
        worker = checked_worker(s, worker).name
        resp = s.get(Response, response_id)
        if resp is None:
            raise InputError(f"no response {response_id!r} in the store")
        # an erratum changing the instance's truth locks it too: it commits before this label (which then judges the
        # new truth) or sees it (and sets it aside), never neither
        s.get(Instance, resp.instance_id, with_for_update=True)
        if s.get(ResponseLabel, (response_id, worker)) is not None:
            raise LeaseError(f"you already labelled response {response_id}: undo it first to change it")
        act = log_action(s, worker, "label", None, {"response_id": response_id, "verdict": verdict})
        s.add(
            ResponseLabel(
                response_id=response_id, worker=worker, verdict=verdict, action_id=act.id, created_at=utcnow()
            )
        )
