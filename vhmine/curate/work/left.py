"""How many items each work page has left for a worker, per mode: one COUNT per queue, no item loaded.

Reads `tasks` and `drafts` (the annotate and verify queues), ready `instances` and `reviews` (blind review), and
`responses` with `response_labels` (model answers to label); writes nothing. Each count is the queue its page's
`next_...` call leases or reads from, as that worker sees it now: the annotate queue leaves a pair with a pending
draft to the verify queue (curate.work.lease), and neither counts an item another worker holds under a running
lease (it comes back if not done) or one held while its image is missing or changed. An open task whose image
went missing since counts until a lease finds it and holds it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, or_, select

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, checked_worker
from vhmine.curate.work.lease import pending_draft_tasks
from vhmine.store import Instance, Response, ResponseLabel, Review, Store, Task, utcnow


@dataclass(frozen=True)
class WorkLeft:
    """A mode's items left for one worker, per page."""

    mode: str
    annotate: int  # open tasks to annotate (no pending draft), free or theirs
    verify: int  # open tasks whose model draft waits, free or theirs
    review: int  # ready instances someone else wrote that they have not answered
    label: int  # model answers to ready instances they have not labelled

    @property
    def items(self) -> int:
        return self.annotate + self.verify + self.review + self.label


def work_left(store: Store, worker: str | WorkerInfo, mode: str | None = None) -> dict[str, WorkLeft]:
    """mode -> what is left there for `worker`, for every mode in the modes' order (or `mode` alone): four grouped
    COUNT queries in one read."""
    modes = [R.get_mode(mode).name] if mode else list(R.mode_names())
    now = utcnow()
    with store.session(write=False) as s:
        me = checked_worker(s, worker).name
        theirs_or_free = or_(Task.lease_worker.is_(None), Task.lease_until <= now, Task.lease_worker == me)
        drafted = Task.id.in_(pending_draft_tasks())

        def tasks(which) -> dict[str, int]:
            q = select(Task.mode, func.count()).where(Task.mode.in_(modes), Task.status == "open", theirs_or_free)
            return dict(s.execute(q.where(which).group_by(Task.mode)).all())

        annotate, verify = tasks(~drafted), tasks(drafted)
        review = dict(
            s.execute(
                select(Instance.mode, func.count())
                .where(
                    Instance.mode.in_(modes),
                    Instance.status == "ready",
                    Instance.created_by != me,
                    Instance.id.not_in(select(Review.instance_id).where(Review.worker == me)),
                )
                .group_by(Instance.mode)
            ).all()
        )
        label = dict(
            s.execute(
                select(Instance.mode, func.count())
                .select_from(Response)
                .join(Instance, Instance.id == Response.instance_id)
                .where(
                    Instance.mode.in_(modes),
                    Instance.status == "ready",
                    Response.id.not_in(select(ResponseLabel.response_id).where(ResponseLabel.worker == me)),
                )
                .group_by(Instance.mode)
            ).all()
        )
    return {m: WorkLeft(m, annotate.get(m, 0), verify.get(m, 0), review.get(m, 0), label.get(m, 0)) for m in modes}
