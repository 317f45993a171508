"""Tasks held while one of their images is missing or changed: they leave the queues by themselves, with the
reason, and come back when the image does.

Reads `tasks`, their `pairs` and `images`, and the image files (curate.base.located, which hashes a file again only
when its stamp changed); writes a task's status ("held" with `held_reason`, and back to "open") through the
compare-and-set on its version, and logs `hold` and `release` actions. Those are the system's, not the worker's:
they are logged under the worker whose lease found the image gone or back (the action log names a worker), and undo
passes them over. Leasing (curate.work.lease) checks the images of every task it hands out, and first puts back the
mode's held tasks whose images are back; `recheck_held` does the same for every mode on an admin's demand, hashing
again whatever the stamps say.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from vhmine.curate.base import (
    WorkerInfo,
    checked_worker,
    compare_and_set,
    image_problem,
    log_action,
    problem_kind,
    retried,
)
from vhmine.store import Action, Pair, Store, Task

HOLD_KINDS = ("hold", "release")  # the system's actions: undo and the worker-time figures pass them over


@dataclass(frozen=True)
class HeldTask:
    task_id: str
    mode: str
    reason: str  # "image missing: <id>" or "image changed: <id>"
    since: dt.datetime | None  # when it was held (its last hold action)


def task_images(s: Session, t: Task) -> list[str]:
    """The image ids a task shows: a pair's two, or its one image."""
    if t.pair_id:
        p = s.get(Pair, t.pair_id)
        return [p.image_a, p.image_b]
    return [t.image_id]


def _problem(s: Session, t: Task, force: bool) -> tuple[str, str] | None:
    for image_id in task_images(s, t):
        if (why := image_problem(s, image_id, force=force)) is not None:
            return why, image_id
    return None


def hold_if_unavailable(s: Session, t: Task, worker: str) -> bool:
    """Hold task `t` (just leased to `worker`) when one of its images is missing or changed: True when it was held
    (it left the queue, the reason recorded), False when it may be handed out."""
    bad = _problem(s, t, False)
    if bad is None:
        return False
    why, image_id = bad
    if compare_and_set(s, t, expect_status="open", status="held", held_reason=why, lease_worker=None, lease_until=None):
        log_action(s, worker, "hold", t.id, {"reason": why, "image_id": image_id})
    return True


def release_back(s: Session, worker: str, mode: str | None, *, force: bool = False) -> tuple[int, int]:
    """Put back in their queues the held tasks (of `mode`, or all) whose images are all there again; a task still
    held keeps its reason, brought up to date. Returns (released, still held). A held task another transaction is
    changing is passed over, as leasing passes over a locked task."""
    q = select(Task).where(Task.status == "held")
    if mode is not None:
        q = q.where(Task.mode == mode)
    held = s.scalars(
        q.order_by(Task.id).with_for_update(skip_locked=True, key_share=True).execution_options(populate_existing=True)
    ).all()
    released = 0
    for t in held:
        bad = _problem(s, t, force)
        if bad is None:
            if compare_and_set(s, t, expect_status="held", status="open", held_reason=None):
                log_action(s, worker, "release", t.id, {"reason": t.held_reason})
                released += 1
        elif bad[0] != t.held_reason:
            compare_and_set(s, t, expect_status="held", held_reason=bad[0])
    return released, len(held) - released


@retried
def recheck_held(store: Store, worker: str | WorkerInfo) -> tuple[int, int]:
    """Check the images of every held task again (hashing them, whatever their stamps say) and put back those whose
    images are all there: (released, still held). Any active worker may ask (the admin page's "Check again")."""
    with store.session() as s:
        return release_back(s, checked_worker(s, worker).name, None, force=True)


def held_tasks(store: Store, mode: str | None = None) -> list[HeldTask]:
    """The held tasks (of `mode`, or all), by mode and id."""
    q = select(Task.id, Task.mode, Task.held_reason).where(Task.status == "held")
    if mode is not None:
        q = q.where(Task.mode == mode)
    with store.session(write=False) as s:
        rows = s.execute(q.order_by(Task.mode, Task.id)).all()
        since = _held_since(s, [r.id for r in rows])
    return [HeldTask(r.id, r.mode, r.held_reason or "", since.get(r.id)) for r in rows]


def _held_since(s: Session, ids: list[str]) -> dict[str, dt.datetime]:
    out: dict[str, dt.datetime] = {}
    for k in range(0, len(ids), 500):  # IN lists of a bounded size
        part = ids[k : k + 500]
        out.update(
            s.execute(
                select(Action.task_id, func.max(Action.created_at))
                .where(Action.kind == "hold", Action.task_id.in_(part))
                .group_by(Action.task_id)
            ).all()
        )
    return out


def held_kinds(store: Store, mode: str | None = None) -> dict[str, int]:
    """How many tasks (of `mode`, or all) are held, per kind of reason ("image missing", "image changed")."""
    q = select(Task.held_reason).where(Task.status == "held")
    if mode is not None:
        q = q.where(Task.mode == mode)
    with store.session(write=False) as s:
        return dict(Counter(problem_kind(r) for r in s.scalars(q)))
