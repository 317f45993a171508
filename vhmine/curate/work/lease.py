"""Leases: how every queue (annotate, verify) hands a worker its next task, and what the verify queue holds.

Reads and leases `tasks` (a lease is a compare-and-set on the task's `version`); reads `drafts` for the
tasks whose model draft waits for a worker, which the annotate queue leaves to the verify queue. A task whose
image is missing or changed is never handed out: it is held instead (curate.work.holds), and the mode's held
tasks whose images are back are put back first. Below queue, verify and undo, which all use it.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from vhmine.curate.base import compare_and_set
from vhmine.curate.work.holds import hold_if_unavailable, release_back
from vhmine.store import Action, Draft, Task

LEASE_S = 15 * 60


def _free(now: dt.datetime):
    return or_(Task.lease_worker.is_(None), Task.lease_until <= now)


def _take(s: Session, t: Task, worker: str, now: dt.datetime, lease_s: float) -> bool:
    """Compare-and-set the lease: succeeds only if nobody changed the task since we read it."""
    return compare_and_set(s, t, lease_worker=worker, lease_until=now + dt.timedelta(seconds=lease_s))


def lease_next(
    s: Session, worker: str, mode: str, which, now: dt.datetime, lease_s: float, *, skipped_last: bool = True
) -> Task | None:
    """Lease to `worker` the next open task of `mode` that `which` (a condition on Task) admits: their own
    running lease first, then the first free task nobody else is changing (skipped ones last, the one skipped
    longest ago first); None if none. A task whose image is missing or changed is held, not handed out, and the
    mode's held tasks whose images are back join the queue again first (curate.work.holds).
    The one way every queue hands out work, so that none of them can wait on another worker's row."""
    release_back(s, worker, mode)
    # our running leases (an undone skip may have given us a second): wait if someone is changing one (we hold no
    # lock yet, so no deadlock can form); one whose image is gone is held, and the next of ours comes
    held: list[str] = []  # tasks held on the way: never picked again
    while True:
        mine = s.scalar(
            select(Task)
            .where(Task.mode == mode, Task.status == "open", Task.lease_worker == worker, Task.lease_until > now, which)
            .where(Task.id.not_in(held))
            .order_by(Task.priority, Task.id)
            .limit(1)
            .with_for_update(key_share=True)
            .execution_options(populate_existing=True)
        )
        if mine is None or not _take(s, mine, worker, now, lease_s):
            break
        t = s.get(Task, mine.id, populate_existing=True)
        if not hold_if_unavailable(s, t, worker):
            return t
        held.append(t.id)
    base = select(Task).where(Task.mode == mode, Task.status == "open", _free(now), which)
    queries = [(base, (Task.priority, Task.id))]
    if skipped_last:
        mine_skips = (Action.worker == worker, Action.kind == "skip", Action.undone_at.is_(None))
        skipped = select(Action.task_id).where(*mine_skips, Action.task_id.is_not(None))
        # skipped ones by when this worker last skipped them, oldest first: Skip cycles through all of them (by
        # priority, the one just skipped came back at once once every item was skipped)
        last_skip = select(func.max(Action.id)).where(*mine_skips, Action.task_id == Task.id).scalar_subquery()
        queries = [
            (base.where(Task.id.not_in(skipped)), (Task.priority, Task.id)),
            (base.where(Task.id.in_(skipped)), (last_skip, Task.priority, Task.id)),
        ]
    tried: list[str] = []  # a task we locked but could not take stays locked by us: never pick it again
    for q, order in queries:
        while len(tried) < 8:
            # the first free task nobody else is changing, locked (and read at its latest version) by us
            t = s.scalar(
                q.where(Task.id.not_in(tried + held))
                .order_by(*order)
                .limit(1)
                .with_for_update(skip_locked=True, key_share=True)
                .execution_options(populate_existing=True)
            )
            if t is None:
                break
            if _take(s, t, worker, now, lease_s):
                t = s.get(Task, t.id, populate_existing=True)
                if not hold_if_unavailable(s, t, worker):
                    return t
                held.append(t.id)  # it left the queue: the next one
                continue
            tried.append(t.id)
    return None


def pending_draft_tasks():
    """A subquery of task ids with a draft waiting for a worker (the annotate queue leaves them out)."""
    return select(Draft.task_id).where(Draft.status == "pending")
