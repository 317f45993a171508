"""Leases: how every queue (annotate, verify) hands a worker its next task, and what the verify queue holds.

Reads and leases `tasks` (a lease is a compare-and-set on the task's `version`); reads `drafts` for the
tasks whose model draft waits for a worker, which the annotate queue leaves to the verify queue. A task whose
image is missing or changed is never handed out: it is held instead (curate.work.holds), and the mode's held
tasks whose images are back are put back first. Below queue, verify and undo, which all use it.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from vhmine.curate.base import compare_and_set
from vhmine.curate.work.holds import HOLD_ROWS, SCREEN, hold_images, images_gone, release_back, task_problem
from vhmine.store import Action, Draft, Pair, Task

LEASE_S = 15 * 60
GONE_MAX = 1000  # images found gone that one lease checks at most (each is a stat, and a look in the indexes)


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
    longest ago first); None if none. A task whose image is missing or changed is never handed out: it is held with
    the mode's other tasks of that image, and the mode's held tasks whose images are back join the queue again
    first (curate.work.holds). The one way every queue hands out work, so that none of them can wait on another
    worker's row.

    Its work is bounded however many tasks show images that went (issue 42: 350 s for 8,385 tasks whose folder had
    moved, holding SQLite's write lock): it holds HOLD_ROWS tasks at most and passes over the others of the images
    it found gone (the next leases hold them); past GONE_MAX such images it gives up (None) until the next lease."""
    release_back(s, worker, mode)
    tried: list[str] = []  # a task we locked but could not take stays locked by us: never pick it again
    gone: dict[str, str] = {}  # images found missing or changed on the way: image id -> why
    budget = HOLD_ROWS
    while True:
        clear = and_(which, _shows_none(gone)) if gone else which
        t = _next_taken(s, worker, mode, clear, now, lease_s, skipped_last, tried)
        if t is None:
            return None
        bad = task_problem(s, t)
        if bad is None:
            return t
        gone[bad[1]] = bad[0]
        if len(gone) < GONE_MAX:
            # likely others of the tasks right behind it went too (a moved folder): check each of those images once
            ahead = (
                select(Task.image_id, Pair.image_a, Pair.image_b)
                .outerjoin(Pair, Task.pair_id == Pair.id)
                .where(Task.mode == mode, Task.status == "open", _free(now), and_(which, _shows_none(gone)))
                .order_by(Task.priority, Task.id)
                .limit(SCREEN)
            )
            gone = images_gone(s, ahead, gone)
        # this task, and up to the budget more of the mode's tasks that show one of them, leave the queue
        held = hold_images(s, worker, mode, gone, now, first=t.id, limit=max(1, budget))
        budget -= len(held)
        if t.id not in held:
            tried.append(t.id)  # not held (changed meanwhile): never picked again
        if len(gone) >= GONE_MAX:
            return None  # enough for one lease: the next goes on from here


def _shows_none(gone: dict[str, str]):
    """A condition on Task: it shows none of the images `gone` (as its one image, nor on a side of its pair)."""
    ids = list(gone)
    pairs = select(Pair.id).where(or_(Pair.image_a.in_(ids), Pair.image_b.in_(ids)))
    return and_(
        or_(Task.image_id.is_(None), Task.image_id.not_in(ids)), or_(Task.pair_id.is_(None), Task.pair_id.not_in(pairs))
    )


def _next_taken(
    s: Session, worker: str, mode: str, which, now: dt.datetime, lease_s: float, skipped_last: bool, tried: list[str]
) -> Task | None:
    """The task leased to `worker` now, its images not checked yet: their own running lease (an undone skip may
    have given them a second), else the first free one; None if none. We wait if someone is changing a lease of
    ours (we hold no lock yet, so no deadlock can form); a free task someone is changing is passed over."""
    mine = s.scalar(
        select(Task)
        .where(Task.mode == mode, Task.status == "open", Task.lease_worker == worker, Task.lease_until > now, which)
        .order_by(Task.priority, Task.id)
        .limit(1)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    if mine is not None and _take(s, mine, worker, now, lease_s):
        return s.get(Task, mine.id, populate_existing=True)
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
    for q, order in queries:
        while len(tried) < 8:
            # the first free task nobody else is changing, locked (and read at its latest version) by us
            t = s.scalar(
                q.where(Task.id.not_in(tried))
                .order_by(*order)
                .limit(1)
                .with_for_update(skip_locked=True, key_share=True)
                .execution_options(populate_existing=True)
            )
            if t is None:
                break
            if _take(s, t, worker, now, lease_s):
                return s.get(Task, t.id, populate_existing=True)
            tried.append(t.id)
    return None


def pending_draft_tasks():
    """A subquery of task ids with a draft waiting for a worker (the annotate queue leaves them out)."""
    return select(Draft.task_id).where(Draft.status == "pending")
