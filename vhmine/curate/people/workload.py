"""Worker time per mode, from the action log: seconds per ready instance and the hours left to a target.

Reads the action log (its gaps summed per mode in SQL, curate.people.gaps: no action is loaded), ready instances
per mode and tasks; writes nothing. A worker's time on an action is the gap since their previous action when it is
at most `IDLE_S` (a longer gap is a break), as curate.people.savings measures it; the system's holds and releases of
tasks (curate.work.holds) are no worker's actions.
Every action that names a task counts for that task's mode (annotate, confirm, skip, discard, verify, review,
errata); a confirm of drafted yes/no questions names none and counts for the mode of the worker's action before it;
a label of a model's answer counts for no mode. Seconds per ready instance are a mode's worker seconds over its
ready instances; the hours left are what the instances still missing to `target` take at that rate. `log_mark`
is what changes whenever the log or the instances do: a cache of these figures is good while it is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import case, func, select

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, check_admin
from vhmine.curate.people.figures import duration, number
from vhmine.curate.people.gaps import timed_actions
from vhmine.store import (
    Action,
    Instance,
    Store,
    Task,
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
        """The row as the app's table shows it: times in hours and minutes (figures.duration), seconds without
        trailing zeros (figures.number)."""
        return {
            "mode": self.mode,
            "ready": self.ready,
            "target": self.target,
            "worker time": duration(self.worker_s / 3600),
            "s/ready instance": number(self.s_per_instance),
            "time left": duration(self.hours_left),
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


def _mode_seconds(s) -> dict[str, tuple[float, int]]:
    """mode -> (worker seconds, actions), summed in SQL: each action that names a task counts for its task's mode; a
    confirm names none and counts for the mode of the last action before it that named one (the worker's own)."""
    a = timed_actions(s)  # every action but the system's holds and releases
    w = dict(partition_by=a.c.worker, order_by=(a.c.created_at, a.c.id))
    # islands: the running count of task-naming actions; each island's first row names the task the rest carry
    isl = select(a, func.count(a.c.task_id).over(**w).label("island")).subquery()
    carried = func.first_value(isl.c.task_id).over(
        partition_by=(isl.c.worker, isl.c.island), order_by=(isl.c.created_at, isl.c.id)
    )
    rows = select(isl.c.kind, isl.c.task_id, isl.c.gap, carried.label("carried")).subquery()
    task = case((rows.c.task_id.is_not(None), rows.c.task_id), (rows.c.kind == "confirm", rows.c.carried), else_=None)
    got = s.execute(
        select(Task.mode, func.sum(rows.c.gap), func.count()).join(Task, Task.id == task).group_by(Task.mode)
    ).all()
    return {m: (float(secs or 0), n) for m, secs, n in got}


def worker_time(store: Store, target: int = 150, *, by: str | WorkerInfo | None = None) -> list[ModeTime]:
    """Per mode (in the modes' order) and "all": worker seconds, seconds per ready instance and hours left to `target`
    ready instances per mode (VHTest: 1,200 over 8 modes). `by`: an admin, or None (the CLI). Summed in the database
    (curate.people.gaps): no action is loaded."""
    with store.session(write=False) as s:
        check_admin(s, by)
        per_mode = _mode_seconds(s)
        ready = dict(
            s.execute(
                select(Instance.mode, func.count()).where(Instance.status == "ready").group_by(Instance.mode)
            ).all()
        )
    secs = {m: per_mode.get(m, (0.0, 0))[0] for m in R.mode_names()}
    count = {m: per_mode.get(m, (0.0, 0))[1] for m in R.mode_names()}
    out = [_mode_time(m, secs[m], count[m], ready.get(m, 0), target) for m in R.mode_names()]
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
