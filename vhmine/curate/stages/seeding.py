"""Mined pairs entering the curation store (vhmine.seed reads and plans them; this writes them).

Reads the store's images, pairs, runs and tasks; writes the run, its images (source "mined") and
pairs, and one open task per (mode, pair) the plan names; known_pairs says which pairs an earlier seeded
run put in the store already (vhmine.seed queues only the others). Idempotent: what the store holds already
is counted, not added again; an image whose sha256 differs from the store's stops the seeding; an
image whose recorded file moved or changed gets the path where its content is now.

Seedings are ordered by the store, not by the seeding machine's clock: one seeding at a time (SQLite's write
lock; on PostgreSQL an advisory lock), and each one's time (the run's, and its pairs' created_at) is the
database's clock, or just after the latest seeding the store holds if that is later (seeding_time). A machine
whose clock is ahead, or two machines seeding one PostgreSQL store, cannot make a later seeding look earlier.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, text

from vhmine.errors import InputError
from vhmine.index import locate_image
from vhmine.store import (
    Image,
    Pair,
    Run,
    Store,
    Task,
    utcnow,
)


@dataclass
class SeedCounts:
    images_added: int = 0
    pairs_added: int = 0
    tasks_added: dict = field(default_factory=dict)  # mode -> tasks queued now
    tasks_existing: int = 0


SEEDING_LOCK = 7261637  # pg_advisory_xact_lock key: one seeding at a time (the migrations' is 7261636)
SEEDINGS = "vhmine_seedings"  # Run.meta's record of each run_id seeded under the run's name: its first seeding's time


def first_seeding(run_row, run_id: str | None):
    """When this run (its folder's name, and its run.json's run_id) was first seeded, or None. A run of a grown
    index written into the same folder is another run: the same name, another run_id."""
    if run_row is None:
        return None
    meta = run_row.meta or {}
    seen = meta.get(SEEDINGS) or {}
    if run_id is None:  # a pairs table without a run_id (an older vhmine's): the run is its folder's name
        return run_row.seeded_at
    if run_id in seen:
        return dt.datetime.fromisoformat(seen[run_id])
    return run_row.seeded_at if not seen and meta.get("run_id") == run_id else None


class SeedRaced(Exception):
    """Another seeding committed between planning this one and writing it: plan again."""


def _latest(s) -> dt.datetime | None:
    """The latest seeding the store holds: its runs' (first) seeding times and its pairs' created_at."""
    times = [s.scalar(select(func.max(Pair.created_at))), s.scalar(select(func.max(Run.seeded_at)))]
    for (meta,) in s.execute(select(Run.meta)).all():
        for at in ((meta or {}).get(SEEDINGS) or {}).values() if isinstance(meta, dict) else ():
            times.append(dt.datetime.fromisoformat(at))
    times = [t if isinstance(t, dt.datetime) else dt.datetime.fromisoformat(str(t)) for t in times if t is not None]
    return max(times, default=None)


def seeding_time(s) -> dt.datetime:
    """This seeding's time, in a write session that holds the seeding lock: the database's clock (a server's
    own; SQLite's is this machine's), or 1 microsecond after the store's latest seeding if that is not earlier,
    so that seedings are ordered as the store committed them whatever any client's clock says."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text(f"SELECT pg_advisory_xact_lock({SEEDING_LOCK})"))
        clock = s.scalar(text("SELECT clock_timestamp() AT TIME ZONE 'UTC'"))
    else:
        clock = utcnow()
    latest = _latest(s)
    return clock if latest is None or clock > latest else latest + dt.timedelta(microseconds=1)


def known_pairs(store: Store, run: str, run_id: str | None = None) -> tuple[set[str], bool, dt.datetime | None]:
    """(ids of the pairs the store held before this run was first seeded, whether it was seeded before, the
    store's latest seeding now: add_mined_pairs checks that none came since). Fixed by that first seeding, so
    seeding it again plans the same pairs: a pair it added itself, or that a run seeded after it added, is not
    "known" to it; a new run (a new run_id, also in an old run's folder) knows every pair in the store."""
    with store.session(write=False) as s:
        since = first_seeding(s.get(Run, run), run_id)
        # the store's pairs, not an IN over the run's: a large Ray run has millions, a store thousands
        rows = s.execute(select(Pair.id, Pair.created_at)).all()
        latest = _latest(s)
    known = {pid for pid, at in rows if since is None or at < since}
    return known, since is not None, latest


def add_mined_pairs(
    store: Store,
    run: str,
    pairs_path: Path,
    meta: dict | None,
    pairs: Sequence[tuple[int, str, Any]],
    plan: dict[str, list[int]],
    files: dict[tuple[str, str], str],
    first: bool = False,
    planned_at: dt.datetime | None = None,
) -> SeedCounts:
    """`pairs[i]` = (rank, pair id, the pairs table's row); `plan[mode]` = the indices into `pairs` queued for it;
    `files[(sha256, path in the table)]` = the file that holds that content now (vhmine.seed found it);
    `first`: planned as the run's first seeding, when the store's latest seeding was `planned_at` (known_pairs).
    SeedRaced when another seeding came since: its pairs would be known to this run on a reseed, so plan again."""
    used = sorted({i for idx in plan.values() for i in idx})
    counts = SeedCounts(tasks_added={m: 0 for m in plan})
    with store.session() as s:
        now = seeding_time(s)
        row, run_id = s.get(Run, run), (meta or {}).get("run_id") if isinstance(meta, dict) else None
        if first and (first_seeding(row, run_id) is not None or _latest(s) != planned_at):
            raise SeedRaced(run)
        if row is None:
            row = Run(name=run, pairs_path=str(pairs_path), meta=meta, seeded_at=now)
            s.add(row)
        if run_id is not None and first_seeding(row, run_id) in (None, now):  # the folder now holds this run
            seen = dict((row.meta or {}).get(SEEDINGS) or {})
            if not seen and row.seeded_at != now and (row.meta or {}).get("run_id"):  # the run first seeded here
                seen[row.meta["run_id"]] = row.seeded_at.isoformat()
            seen[run_id] = now.isoformat()
            row.meta, row.pairs_path = {**meta, SEEDINGS: seen}, str(pairs_path)
        for i in used:
            rank, pid, r = pairs[i]
            for side in ("a", "b"):
                iid = r[f"image_id_{side}"]
                img = s.get(Image, iid)
                path = files[(r[f"sha256_{side}"], r[f"path_{side}"])]
                if img is None:
                    cats = r.get(f"categories_{side}")
                    s.add(
                        Image(
                            id=iid,
                            sha256=r[f"sha256_{side}"],
                            path=path,
                            source="mined",
                            categories=[str(c) for c in (cats if cats is not None else [])],
                            created_at=now,
                        )
                    )
                    counts.images_added += 1
                elif img.sha256 != r[f"sha256_{side}"]:
                    raise InputError(
                        f"image {iid} is already in the store with sha256 {img.sha256}, but {pairs_path} "
                        f"(rank {rank}) gives {r[f'sha256_{side}']}: the two runs disagree; re-run `vhmine mine`"
                    )
                elif img.path != path and locate_image(img.sha256, Path(img.path), lambda: []) is None:
                    img.path = path  # the recorded file moved or changed: record where the content is now
            s.flush()
            if s.get(Pair, pid) is None:
                s.add(
                    Pair(
                        id=pid,
                        image_a=r["image_id_a"],
                        image_b=r["image_id_b"],
                        rank=rank,
                        clip_sim=float(r["clip_sim"]),
                        dino_sim=float(r["dino_sim"]),
                        gap=float(r["gap"]),
                        run=run,
                        created_at=now,
                    )
                )
                counts.pairs_added += 1
        s.flush()
        existing = set(s.scalars(select(Task.id).where(Task.pair_id.in_([pairs[i][1] for i in used]))))
        for m, idx in plan.items():
            for i in idx:
                rank, pid, _ = pairs[i]
                tid = f"{m}:{pid}"
                if tid in existing:
                    counts.tasks_existing += 1
                    continue
                s.add(Task(id=tid, mode=m, pair_id=pid, priority=float(rank), status="open", version=0, created_at=now))
                counts.tasks_added[m] += 1
    return counts
