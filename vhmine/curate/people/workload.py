"""Worker time per mode, from the action log: seconds per ready instance and the hours left to a target.

Reads the action log, ready instances per mode and tasks; writes nothing. A worker's time on an action is the gap
since their previous action when it is at most `IDLE_S` (a longer gap is a break), as curate.savings measures it.
Every action that names a task counts for that task's mode (annotate, confirm, skip, discard, verify, review,
errata); a confirm of drafted yes/no questions names none and counts for the mode of the worker's action before it;
a label of a model's answer counts for no mode. Seconds per ready instance are a mode's worker seconds over its
ready instances; the hours left are what the instances still missing to `target` take at that rate. `log_mark`
is what changes whenever the log or the instances do: a cache of these figures is good while it is the same.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select  # noqa: E402

from vhmine.curate.base.access import WorkerInfo, check_admin
from vhmine.curate.people.savings import IDLE_S
from vhmine.rules import modes as M
from vhmine.store import (  # first: it says which extra to install when SQLAlchemy is missing
    Action,
    Instance,
    Store,
)


@dataclass(frozen=True)
class ModeTime:
    mode: str  # a mode name, or "all"
    worker_s: float  # seconds of work (breaks left out)
    actions: int
    ready: int  # ready instances now
    target: int  # ready instances wanted (the export's per-mode target; "all": the modes' sum)
    s_per_instance: float | None  # None before any timed work or ready instance
    hours_left: float | None  # worker-hours to the target at the rate so far; 0 once reached; None: no rate yet

    def row(self) -> dict:
        def r(x, n=1):
            return None if x is None else round(x, n)

        return {
            "mode": self.mode,
            "ready": self.ready,
            "target": self.target,
            "worker hours": r(self.worker_s / 3600, 2),
            "s/ready instance": r(self.s_per_instance),
            "hours left": r(self.hours_left, 1),
        }


def _mode_time(mode: str, secs: float, n: int, ready: int, target: int) -> ModeTime:
    rate = secs / ready if ready and secs else None
    missing = max(0, target - ready)
    left = 0.0 if not missing else (None if rate is None else missing * rate / 3600)
    return ModeTime(mode, secs, n, ready, target, rate, left)


def log_mark(store: Store) -> tuple:
    """What changes with every logged action, undo and instance change: a cache key for figures read from the log."""
    with store.session(write=False) as s:
        last, undone = s.execute(select(func.max(Action.id), func.count(Action.undone_at))).one()
        changed = s.scalar(select(func.max(Instance.updated_at)))
        ready = s.scalar(select(func.count()).select_from(Instance).where(Instance.status == "ready"))
    return last, undone, str(changed), ready


def _mode_of(a: Action, before: str | None) -> str | None:
    if a.task_id:
        return a.task_id.split(":", 1)[0]
    return before if a.kind == "confirm" else None


def worker_time(store: Store, target: int = 150, *, by: str | WorkerInfo | None = None) -> list[ModeTime]:
    """Per mode (in the modes' order) and "all": worker seconds, seconds per ready instance and hours left to `target`
    ready instances per mode (VHTest: 1,200 over 8 modes). `by`: an admin, or None (the CLI)."""
    with store.session(write=False) as s:
        check_admin(s, by)
        rows = s.execute(
            select(Action.worker, Action.kind, Action.task_id, Action.created_at, Action.id).order_by(
                Action.worker, Action.created_at, Action.id
            )
        ).all()
        ready = dict(
            s.execute(
                select(Instance.mode, func.count()).where(Instance.status == "ready").group_by(Instance.mode)
            ).all()
        )
    secs: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    prev, prev_mode = None, None
    for a in rows:
        same = prev is not None and prev.worker == a.worker
        mode = _mode_of(a, prev_mode if same else None)
        gap = (a.created_at - prev.created_at).total_seconds() if same else None
        if mode in M.mode_names():
            count[mode] += 1
            if gap is not None and 0 <= gap <= IDLE_S:
                secs[mode] += gap
        prev, prev_mode = a, mode if mode is not None else (prev_mode if same else None)
    out = [_mode_time(m, secs[m], count[m], ready.get(m, 0), target) for m in M.mode_names()]
    left = [m.hours_left for m in out]
    total = _mode_time("all", sum(secs.values()), sum(count.values()), sum(ready.values()), target * len(out))
    out.append(
        ModeTime(
            total.mode,
            total.worker_s,
            total.actions,
            total.ready,
            total.target,
            total.s_per_instance,
            None if None in left else sum(left),
        )
    )  # each mode at its own rate
    return out
