"""Tasks held while one of their images is missing or changed: they leave the queues by themselves, with the
reason, and come back when the image does.

Reads `tasks`, their `pairs` and `images`, and the image files (curate.base.located, which hashes a file again only
when its stamp changed); writes a task's status ("held" with `held_reason`, and back to "open"), bumping its
`version` as the compare-and-set does, and logs one `hold` or `release` action per task. Those are the system's,
not the worker's: they are logged under the worker whose lease found the image gone or back (the action log names
a worker), and undo passes them over.

The work goes by image and is bounded per lease, never one transaction over the queue (issue 42: 8,385 pairs over
130 images whose folder had moved took one lease 350 s, holding SQLite's write lock, and other workers' saves
failed with "database is locked"). A lease that finds an image gone checks at once, each image once, the images of
the next SCREEN tasks in the queue, and holds the mode's tasks that show any image found gone, HOLD_ROWS at most
(one UPDATE and one INSERT, each run per task); the next leases hold the rest. It puts back held tasks by the
image their reason names, RELEASE_IMAGES of those per lease in turn, HOLD_ROWS tasks at most. A task another
transaction is changing (PostgreSQL: row-locked) is passed over, as leasing passes it over. `recheck_held` checks
every held image of every mode on an admin's demand, hashing again whatever the stamps say.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import bindparam, func, insert, or_, select, update
from sqlalchemy.orm import Session

from vhmine.curate.base import WorkerInfo, checked_worker, image_problem, problem_kind, retried
from vhmine.store import Action, Image, Pair, Store, Task, utcnow

HOLD_KINDS = ("hold", "release")  # the system's actions: undo and the worker-time figures pass them over
SCREEN = 200  # tasks ahead in the queue whose images a lease checks at once, once it found one image gone
HOLD_ROWS = 1000  # tasks one lease holds, or releases, at most: its transaction stays short
RELEASE_IMAGES = 32  # held tasks' images (by reason) a lease checks again, in turn: its work stays bounded
_CHUNK = 500  # ids per IN list
_TURN: dict[tuple[str, str | None], str] = {}  # (store, mode) -> the held reason checked last: the next lease goes on


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


def task_problem(s: Session, t: Task) -> tuple[str, str] | None:
    """(why, image id) of the first of the task's images that is missing or changed; None when all are there."""
    for image_id in task_images(s, t):
        if (why := image_problem(s, image_id)) is not None:
            return why, image_id
    return None


def _shown(cond: list, order=(), limit: int | None = None):
    """(task id, its image, its pair's two, its reason) of the tasks `cond` selects, locked by us (a task another
    transaction is changing is passed over, SKIP LOCKED: SQLite has one writer anyway)."""
    return (
        select(Task.id, Task.image_id, Pair.image_a, Pair.image_b, Task.held_reason)
        .outerjoin(Pair, Task.pair_id == Pair.id)
        .where(*cond)
        .order_by(*order, Task.id)
        .limit(limit)
        .with_for_update(of=Task, skip_locked=True, key_share=True)
    )


def _images(row) -> list[str]:
    return [row.image_id] if row.image_id else [row.image_a, row.image_b]


def _set(s: Session, expect: str, changes: list[tuple[str, str | None]], log: tuple[str, str] | None = None, **values):
    """Set `values` and each task's reason on the tasks `changes` lists ((task id, reason)), of status `expect` and
    locked by us (or under SQLite's write lock), bumping their versions as the compare-and-set does; `log` (worker,
    kind): one such action per task too, as undo and the figures read them. One UPDATE and one INSERT, each run for
    every task (executemany: the fastest way on both backends, grouping by image was 3 to 4 times slower)."""
    if not changes:
        return
    t = Task.__table__
    s.execute(
        update(t)
        .where(t.c.id == bindparam("tid"), t.c.status == expect)
        .values(**values, held_reason=bindparam("why"), version=t.c.version + 1),
        [{"tid": i, "why": why} for i, why, *_ in changes],
    )
    if log is not None:
        now = utcnow()
        s.execute(
            insert(Action.__table__),
            [dict(worker=log[0], kind=log[1], task_id=i, payload=p, created_at=now) for i, _, p in changes],
        )


def hold_images(
    s: Session,
    worker: str,
    mode: str,
    gone: dict[str, str],
    now: dt.datetime,
    *,
    first: str | None = None,
    limit: int = HOLD_ROWS,
) -> list[str]:
    """Hold `limit` at most of the open tasks of `mode` that show an image of `gone` (image id -> why) and have no
    running lease of another worker's (theirs is held when they next ask for an item), task `first` first; the
    ids held."""
    holdable = or_(Task.lease_worker.is_(None), Task.lease_worker == worker, Task.lease_until <= now)
    ids = list(gone)
    shows = or_(Task.image_id.in_(ids), Pair.image_a.in_(ids), Pair.image_b.in_(ids))
    cond = [Task.mode == mode, Task.status == "open", holdable, shows]
    held = []
    for r in s.execute(_shown(cond, [Task.id != first] if first else [], limit)):
        image = next(i for i in _images(r) if i in gone)  # the first gone, as a lease checks them
        held.append((r.id, gone[image], {"reason": gone[image], "image_id": image}))
    _set(s, "open", held, (worker, "hold"), status="held", lease_worker=None, lease_until=None)
    return [i for i, _, _ in held]


def images_gone(s: Session, shown, known: dict[str, str]) -> dict[str, str]:
    """Of the images the rows `shown` select (a task's image, its pair's two), those missing or changed (image id
    -> why), each checked once; `known`: already found gone."""
    ids = sorted({i for r in s.execute(shown) for i in r if i} - set(known))
    loaded = s.scalars(select(Image).where(Image.id.in_(ids))).all()  # one query, not one per image
    gone = dict(known)
    for image_id in [i.id for i in loaded] + sorted(set(ids) - {i.id for i in loaded}):
        if (why := image_problem(s, image_id)) is not None:
            gone[image_id] = why
    return gone


def reason_image(reason: str) -> str:
    """The image id a hold's reason names: "image missing: <id>" (or "... <id> (not in the store)")."""
    return reason.partition(": ")[2].split(" ", 1)[0]


def _reasons(s: Session, cond: list, key: tuple[str, str | None], limit: int | None) -> list[str]:
    """The distinct reasons of the held tasks `cond` selects: all, or `limit` of them going on from where the last
    call stopped (so every one comes up within a few leases, however many there are)."""
    q = select(Task.held_reason).where(*cond, Task.held_reason.is_not(None)).distinct().order_by(Task.held_reason)
    if limit is None:
        return list(s.scalars(q))
    after = _TURN.get(key, "")
    got = list(s.scalars(q.where(Task.held_reason > after).limit(limit)))
    if len(got) < limit:  # round again from the first
        got += [r for r in s.scalars(q.where(Task.held_reason <= after).limit(limit - len(got))) if r not in got]
    if got:
        _TURN[key] = got[-1]
    return got


def release_back(
    s: Session, worker: str, mode: str | None, *, force: bool = False, limit: int | None = RELEASE_IMAGES
) -> tuple[int, int]:
    """Put back in their queues the held tasks (of `mode`, or all) whose images are all there again, checking
    `limit` of the held images in turn (None: all); a task still held keeps its reason, brought up to date.
    Returns (released, still held). `force`: hash the images again whatever their stamps say."""
    base = [Task.status == "held"] + ([Task.mode == mode] if mode is not None else [])
    checked: dict[str, str | None] = {}

    def problem(image_id: str) -> str | None:  # once per image and call
        if image_id not in checked:
            checked[image_id] = image_problem(s, image_id, force=force)
        return checked[image_id]

    back, moved = [], {}
    for reason in _reasons(s, base, (str(s.get_bind().url), mode), limit):
        why = problem(reason_image(reason))
        if why is None:
            back.append(reason)
        elif why != reason:  # still gone, another way now (missing, then changed)
            moved[reason] = why
    for reason, why in moved.items():
        _set(s, "held", [(r.id, why) for r in s.execute(_shown([*base, Task.held_reason == reason]))])
    released, still = [], []
    for k in range(0, len(back), _CHUNK):
        left = None if limit is None else HOLD_ROWS - len(released) - len(still)  # a lease's share; an admin's: all
        for r in s.execute(_shown([*base, Task.held_reason.in_(back[k : k + _CHUNK])], (), left)) if left != 0 else []:
            # its image is back; another of its images may still be gone: then it stays held, for that one
            why = next((w for i in _images(r) if (w := problem(i)) is not None), None)
            if why is None:
                released.append((r.id, None, {"reason": r.held_reason}))
            elif why != r.held_reason:
                still.append((r.id, why))
    _set(s, "held", still)
    _set(s, "held", released, (worker, "release"), status="open")
    return len(released), s.scalar(select(func.count()).select_from(Task).where(*base))


@retried
def recheck_held(store: Store, worker: str | WorkerInfo) -> tuple[int, int]:
    """Check the images of every held task again (hashing them, whatever their stamps say) and put back those whose
    images are all there: (released, still held). Any active worker may ask (the admin page's "Check again")."""
    with store.session() as s:
        return release_back(s, checked_worker(s, worker).name, None, force=True, limit=None)


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
    for k in range(0, len(ids), _CHUNK):  # IN lists of a bounded size
        part = ids[k : k + _CHUNK]
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
