"""Who holds the items of a queue now: the tasks of a mode leased to other workers, and when they come back.

Reads `tasks` (and `drafts`, whose pending tasks belong to the verify queue); writes nothing. The annotate page
says so where its queue is empty for a worker while others still hold items of the mode: "Nothing left" was
misleading when two items were only leased to another worker.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import select  # noqa: E402

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, checked_worker
from vhmine.curate.work.lease import pending_draft_tasks
from vhmine.store import Store, Task, utcnow  # first: it says which extra to install when SQLAlchemy is missing


@dataclass(frozen=True)
class Leased:
    task_id: str
    worker: str
    until: dt.datetime  # when the lease runs out: the item comes back to the queue if not done by then


def leased_to_others(store: Store, worker: str | WorkerInfo, mode: str) -> list[Leased]:
    """The open tasks of `mode` (of the annotate queue) that other workers hold, the soonest back first."""
    mode = R.get_mode(mode).name
    with store.session(write=False) as s:
        me = checked_worker(s, worker).name
        rows = s.execute(
            select(Task.id, Task.lease_worker, Task.lease_until)
            .where(
                Task.mode == mode,
                Task.status == "open",
                Task.lease_worker.is_not(None),
                Task.lease_worker != me,
                Task.lease_until > utcnow(),
                Task.id.not_in(pending_draft_tasks()),
            )
            .order_by(Task.lease_until, Task.id)
        ).all()
    return [Leased(*r) for r in rows]
