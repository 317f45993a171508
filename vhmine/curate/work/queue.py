"""The per-mode queues: generated images entering them, leasing the next task, discard, skip, progress.

Reads and writes `tasks`: a lease is a compare-and-set on the task's `version`, and a worker's
skipped tasks (from the action log) come back to them last. On PostgreSQL a candidate is chosen
with FOR NO KEY UPDATE SKIP LOCKED: a task another transaction is changing is passed over, never
waited for, so workers taking items never queue behind each other nor deadlock (NO KEY: the lock an
UPDATE takes, which still lets others log actions that refer to the task; SQLite ignores the clause:
its writers take turns). Discard and skip close or release the task and log an action. A task whose image is
missing or changed is held out of the queue, with the reason, until the image is back (curate.work.holds).
`add_generation` records a generated image (`images`, `generations`) and queues it; mined pairs are
queued by vhmine.seed. `progress` counts tasks and ready instances.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select

from vhmine import rules as R
from vhmine.curate.base import (
    Item,
    WorkerInfo,
    check_lease,
    checked_worker,
    close_task,
    collapse_whitespace,
    compare_and_set,
    log_action,
    new_id,
    retried,
    task_item,
)

# LEASE_S: vhmine.curate re-exports it from here
from vhmine.curate.work.lease import LEASE_S, lease_next, pending_draft_tasks  # noqa: F401
from vhmine.errors import FormError, InputError, LeaseError
from vhmine.images import sha256_file
from vhmine.store import (
    Generation,
    Image,
    Instance,
    Store,
    Task,
    utcnow,
)


@retried
def next_item(store: Store, worker: str | WorkerInfo, mode: str, *, lease_s: float = LEASE_S) -> Item | None:
    """Lease the next open task of `mode` to `worker` (their current lease first; skipped ones last; a task with
    a model draft waiting for a worker is left to the verify queue, curate.work.verify)."""
    mode = R.get_mode(mode).name
    with store.session() as s:
        worker = checked_worker(s, worker).name
        undrafted = Task.id.not_in(pending_draft_tasks())  # a pair with a model's draft goes to the verify queue
        t = lease_next(s, worker, mode, undrafted, utcnow(), lease_s)
        return task_item(s, t) if t is not None else None


@retried
def discard(store: Store, worker: str | WorkerInfo, task_id: str, reason: str) -> None:
    """Discard an item with a reason (no unambiguous question fits)."""
    reason = collapse_whitespace(reason)
    if not reason:
        raise FormError("reason", "give a reason for discarding, e.g. 'no unambiguous question fits'")
    with store.session() as s:
        worker = checked_worker(s, worker).name
        now = utcnow()
        t = check_lease(s, task_id, worker, now)
        close_task(s, t, worker, now, "discarded", reason)
        log_action(s, worker, "discard", task_id, {"reason": reason})


@retried
def skip(store: Store, worker: str | WorkerInfo, task_id: str) -> None:
    """Give the item back to the queue; it comes back to this worker only after all others."""
    with store.session() as s:
        worker = checked_worker(s, worker).name
        t = check_lease(s, task_id, worker, utcnow())
        # someone saved or took it between our read and our write
        if not compare_and_set(s, t, lease_worker=None, lease_until=None):
            raise LeaseError(
                f"item {task_id} was changed by another worker meanwhile: nothing skipped; take the next item"
            )
        log_action(s, worker, "skip", task_id, {})


@dataclass(frozen=True)
class Progress:
    mode: str
    total: int
    done: int
    discarded: int
    remaining: int  # open: in the queue
    ready_instances: int
    held: int = 0  # out of the queue while an image is missing or changed (curate.work.holds)


def progress(store: Store) -> list[Progress]:
    """Per mode, in the modes' order: tasks done, discarded, remaining and held, and ready instances."""
    with store.session(write=False) as s:
        counts: dict[tuple[str, str], int] = {
            (m, st): n
            for m, st, n in s.execute(select(Task.mode, Task.status, func.count()).group_by(Task.mode, Task.status))
        }
        ready = dict(
            s.execute(
                select(Instance.mode, func.count()).where(Instance.status == "ready").group_by(Instance.mode)
            ).all()
        )
    out = []
    for m in R.mode_names():
        d, x, o = counts.get((m, "done"), 0), counts.get((m, "discarded"), 0), counts.get((m, "open"), 0)
        h = counts.get((m, "held"), 0)
        out.append(Progress(m, d + x + o + h, d, x, o, ready.get(m, 0), h))
    return out


def add_generation(
    store: Store,
    path: str | Path,
    mode: str,
    prompt: str,
    *,
    backend: str,
    model: str,
    seed: int | None = None,
    description_id: str | None = None,
    params: Mapping | None = None,
    priority: float = 0.0,
) -> str:
    """Record a generated image with its provenance and queue it in `mode`; returns the task id."""
    mode = R.get_mode(mode).name
    p = Path(path).resolve()
    if not p.is_file():
        raise InputError(f"generated image {p} does not exist")
    sha = sha256_file(p)
    now = utcnow()
    with store.session() as s:
        img = s.get(Image, sha[:16])
        if img is None:
            img = Image(id=sha[:16], sha256=sha, path=str(p), source="generated", categories=[], created_at=now)
            s.add(img)
        if s.scalar(select(Generation).where(Generation.image_id == img.id)) is None:
            s.add(
                Generation(
                    id=new_id(),
                    image_id=img.id,
                    mode=mode,
                    prompt=prompt,
                    description_id=description_id,
                    backend=backend,
                    model=model,
                    seed=seed,
                    params=dict(params or {}),
                    created_at=now,
                )
            )
        tid = f"{mode}:{img.id}"
        if s.get(Task, tid) is None:
            s.add(Task(id=tid, mode=mode, image_id=img.id, priority=priority, status="open", version=0, created_at=now))
    return tid
