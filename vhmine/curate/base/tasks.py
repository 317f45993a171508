"""Changing a task safely, and logging it: the lease check, the compare-and-set on a task's `version`, closing.

Reads `tasks` (and `reviews` and `responses`, for what already built on an instance); writes a task only
through `compare_and_set`, which leasing, saving, discarding, skipping and undoing all use, and writes the
action-log rows (`actions`) that make "undo the last action" possible.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from vhmine.errors import InputError, LeaseError
from vhmine.store import (
    Action,
    Response,
    Review,
    Task,
    utcnow,
)


def log_action(s: Session, worker: str, kind: str, task_id: str | None, payload: dict) -> Action:
    a = Action(worker=worker, kind=kind, task_id=task_id, payload=payload, created_at=utcnow())
    s.add(a)
    s.flush()
    return a


def check_lease(s: Session, task_id: str, worker: str, now: dt.datetime) -> Task:
    """The task `task_id`, checked to be open and leased to `worker` or to nobody (else a LeaseError)."""
    t = s.get(Task, task_id)
    if t is None:
        raise InputError(f"no task {task_id!r} in the store")
    if t.status == "held":  # the system's, not a worker's: no one did it
        raise LeaseError(f"item {task_id} is held ({t.held_reason}): nothing saved; take the next item")
    if t.status != "open":
        raise LeaseError(
            f"item {task_id} was already {'annotated' if t.status == 'done' else t.status} by "
            f"{t.done_by} at {t.done_at:%Y-%m-%d %H:%M} UTC: nothing saved; take the next item"
        )
    if t.lease_worker not in (None, worker) and t.lease_until > now:
        raise LeaseError(
            f"item {task_id} is leased to {t.lease_worker} until {t.lease_until:%H:%M:%S} UTC: "
            "nothing saved; take the next item"
        )
    return t


def compare_and_set(s: Session, t: Task, *, expect_status: str | None = None, **values) -> bool:
    """Change task `t` only if nobody changed it since we read it (same `version`, and status
    `expect_status` when given), bumping the version; False when someone else won and nothing was
    written. On PostgreSQL a concurrent UPDATE waits for ours, then no longer matches."""
    cond = [Task.id == t.id, Task.version == t.version] + ([Task.status == expect_status] if expect_status else [])
    res = s.execute(
        update(Task).where(*cond).values(**values, version=t.version + 1).execution_options(synchronize_session=False)
    )
    return res.rowcount == 1


def close_task(s: Session, t: Task, worker: str, now: dt.datetime, status: str, reason: str | None = None) -> None:
    if not compare_and_set(
        s,
        t,
        expect_status="open",
        status=status,
        discard_reason=reason,
        done_by=worker,
        done_at=now,
        lease_worker=None,
        lease_until=None,
    ):
        # someone saved or took it between our read and our write
        raise LeaseError(
            f"item {t.id} was changed by another worker while you worked on it: nothing saved; take the next item"
        )


def built_on(s: Session, ids: list[str]) -> str:
    """What already built on these instances ("" when nothing): a review or a model's answer."""
    if s.scalar(select(func.count()).select_from(Review).where(Review.instance_id.in_(ids))):
        return "reviewed"
    if s.scalar(select(func.count()).select_from(Response).where(Response.instance_id.in_(ids))):
        return "answered by a model"
    return ""
