"""A worker's time on each action, in SQL: the gap since their previous action, as a window over the action log.

Reads the action log (`actions`); writes nothing. savings and workload sum these gaps per mode in the database, so
neither loads the log (the admin page's figures on a store of 10,000 tasks read a few rows, not every action). A gap
longer than `IDLE_S` (a lease) is a break: no time. Gaps are read to the millisecond (SQLite's julianday; on
PostgreSQL the interval's epoch), so sums match Python's datetime arithmetic to within a millisecond per action.
"""

from __future__ import annotations

from sqlalchemy import Numeric, case, cast, func, select
from sqlalchemy.orm import Session

from vhmine.curate.work import HOLD_KINDS, LEASE_S
from vhmine.store import Action

IDLE_S = LEASE_S  # a gap longer than a lease is a break, not work on the next item


def seconds_between(s: Session, later, earlier):
    """SQL for the seconds from `earlier` to `later` (naive UTC timestamps), to the millisecond."""
    if s.get_bind().dialect.name == "postgresql":
        secs = func.extract("epoch", later - earlier)
    else:  # SQLite keeps a DateTime as ISO text, which julianday reads (in days)
        secs = (func.julianday(later) - func.julianday(earlier)) * 86400.0
    return func.round(cast(secs, Numeric), 3)


def timed_actions(s: Session, kinds: tuple[str, ...] | None = None):
    """A subquery of actions (of `kinds`, or all but the system's holds and releases) with `gap`: the seconds since
    the same worker's previous action among them, or NULL for the first and after a break (over IDLE_S); ordered
    per worker by (created_at, id). Columns: id, worker, kind, task_id, undone_at, created_at, decision (a verify's
    payload), gap."""
    prev = func.lag(Action.created_at).over(partition_by=Action.worker, order_by=(Action.created_at, Action.id))
    cond = Action.kind.in_(kinds) if kinds is not None else Action.kind.not_in(HOLD_KINDS)
    inner = (
        select(
            Action.id,
            Action.worker,
            Action.kind,
            Action.task_id,
            Action.undone_at,
            Action.created_at,
            Action.payload["decision"].as_string().label("decision"),
            seconds_between(s, Action.created_at, prev).label("raw_gap"),
        )
        .where(cond)
        .subquery()
    )
    gap = case((inner.c.raw_gap.between(0, IDLE_S), inner.c.raw_gap), else_=None)
    return select(*(c for c in inner.c if c.name != "raw_gap"), gap.label("gap")).subquery()
