"""Model responses (written by the probe stage) and workers' labels of them.

`add_response` writes a model's answer to an instance, with an optional automatic verdict;
`next_response` reads one the worker has not labelled yet, without the model's name; `label_response`
writes the worker's correct / hallucinated verdict and a `label` action.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .. import modes as M
from ..errors import FormError, InputError, LeaseError
from ..store import (  # first: it says which extra to install when SQLAlchemy is missing
    VERDICTS, Instance, Response, ResponseLabel, Store, utcnow,
)

from sqlalchemy import func, select  # noqa: E402

from ._shared import WorkerInfo, _log, _new_id, _worker


def add_response(store: Store, instance_id: str, model: str, prompt: str, answer: str,
                 verdict: Optional[str] = None, judge: Optional[str] = None) -> str:
    if verdict is not None and verdict not in VERDICTS:
        raise InputError(f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}")
    with store.session() as s:
        if s.get(Instance, instance_id) is None:
            raise InputError(f"no instance {instance_id!r} in {store.display_url}")
        rid = _new_id()
        s.add(Response(id=rid, instance_id=instance_id, model=model, prompt=prompt, answer=answer, verdict=verdict,
                       judge=judge, created_at=utcnow()))
    return rid


@dataclass(frozen=True)
class ResponseItem:
    response_id: str
    mode: str
    kind: str
    question: str
    answers: tuple[str, ...]
    truth: Optional[bool]
    image_id: str
    model_answer: str  # the model's name is not shown: labels should not depend on it


def next_response(store: Store, worker: str | WorkerInfo, mode: Optional[str] = None) -> Optional[ResponseItem]:
    """A model response the worker has not labelled, fewest labels first."""
    with store.session(write=False) as s:
        worker = _worker(s, worker).name
        mine = select(ResponseLabel.response_id).where(ResponseLabel.worker == worker)
        n = select(ResponseLabel.response_id, func.count().label("n")).group_by(ResponseLabel.response_id).subquery()
        q = (select(Response, Instance).join(Instance, Instance.id == Response.instance_id)
             .outerjoin(n, n.c.response_id == Response.id)
             .where(Response.id.not_in(mine), Instance.status == "ready"))
        if mode:
            q = q.where(Instance.mode == M.get_mode(mode).name)
        row = s.execute(q.order_by(func.coalesce(n.c.n, 0), Response.id).limit(1)).first()
        if row is None:
            return None
        r, inst = row
        return ResponseItem(r.id, inst.mode, inst.kind, inst.question, tuple(inst.answers), inst.truth,
                            inst.image_id, r.answer)


def label_response(store: Store, worker: str | WorkerInfo, response_id: str, verdict: str) -> None:
    """Mark a model response correct or hallucinated."""
    if verdict not in VERDICTS:
        raise FormError("verdict", f"choose one of: {', '.join(VERDICTS)}")
    with store.session() as s:
        worker = _worker(s, worker).name
        if s.get(Response, response_id) is None:
            raise InputError(f"no response {response_id!r} in the store")
        if s.get(ResponseLabel, (response_id, worker)) is not None:
            raise LeaseError(f"you already labelled response {response_id}: undo it first to change it")
        act = _log(s, worker, "label", None, {"response_id": response_id, "verdict": verdict})
        s.add(ResponseLabel(response_id=response_id, worker=worker, verdict=verdict, action_id=act.id, created_at=utcnow()))
