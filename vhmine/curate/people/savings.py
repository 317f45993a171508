"""What verifying model drafts saves over writing items from scratch, per mode, from the action log.

Reads the action log (its gaps summed per mode in SQL: curate.people.gaps) and the `drafts` table; writes nothing. A
worker's time on an action is the gap since their previous action, when that gap is at most `IDLE_S` (a longer gap
is a break: that action counts as an item but not towards the time). An item written from scratch is an `annotate`
action plus the `confirm` of its drafted yes/no questions when that is the worker's next action; a verified item is
a `verify` action whose decision is accept or edit. Rejected drafts cost time too: `s_per_kept` is all verify time
(rejections included) over the drafts kept, the figure to set against `s_per_scratch`. Undone actions are left out
as items; their times still bound the gaps around them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, case, func, select

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo, check_admin
from vhmine.curate.people.figures import number, percent
from vhmine.curate.people.gaps import IDLE_S, timed_actions
from vhmine.store import (
    Draft,
    Store,
    Task,
)


@dataclass(frozen=True)
class ModeSavings:
    mode: str  # a mode name, or "all"
    scratch_items: int
    s_per_scratch: float | None  # mean seconds per item written from scratch (timed items only)
    drafted: int  # drafts the model made (rule-rejected included)
    rule_rejected: int
    decided: int  # drafts a worker accepted, edited or rejected
    accepted: int
    edited: int
    rejected: int
    s_per_decision: float | None
    s_per_kept: float | None  # all verify time over accepted + edited

    @property
    def accept_rate(self) -> float | None:
        return self.accepted / self.decided if self.decided else None

    @property
    def edit_rate(self) -> float | None:
        return self.edited / self.decided if self.decided else None

    @property
    def reject_rate(self) -> float | None:
        return self.rejected / self.decided if self.decided else None

    @property
    def saving(self) -> float | None:
        """1 - s_per_kept / s_per_scratch: the share of a worker's time per item that drafts save."""
        if not self.s_per_kept or not self.s_per_scratch:
            return None
        return 1.0 - self.s_per_kept / self.s_per_scratch

    def row(self) -> dict:
        """The row as the app's table shows it: shares as `vhmine draft --stats` writes them (figures.percent),
        seconds without trailing zeros (figures.number)."""
        return {
            "mode": self.mode,
            "scratch items": self.scratch_items,
            "s/scratch item": number(self.s_per_scratch),
            "drafts": self.drafted,
            "rule-rejected": self.rule_rejected,
            "verified": self.decided,
            "accept rate": percent(self.accept_rate),
            "edit rate": percent(self.edit_rate),
            "reject rate": percent(self.reject_rate),
            "s/verify decision": number(self.s_per_decision),
            "s/kept draft": number(self.s_per_kept),
            "saving": percent(self.saving),
        }


def _item_times(s) -> dict[tuple[str, str], tuple[int, int, float]]:
    """(mode, what) -> (items, timed items, their seconds), summed in SQL: what is "scratch" (an annotate, with the
    confirm of its drafts when that is the worker's next action) or a verify decision (accept, edit, reject)."""
    a = timed_actions(s, ("annotate", "confirm", "verify"))
    w = dict(partition_by=a.c.worker, order_by=(a.c.created_at, a.c.id))
    nxt = select(
        a.c.kind,
        a.c.task_id,
        a.c.undone_at,
        a.c.decision,
        a.c.gap,
        func.lead(a.c.kind).over(**w).label("next_kind"),
        func.lead(a.c.undone_at).over(**w).label("next_undone"),
        func.lead(a.c.gap).over(**w).label("next_gap"),
    ).subquery()
    with_confirm = and_(nxt.c.next_kind == "confirm", nxt.c.next_undone.is_(None))
    secs = case(
        (nxt.c.kind != "annotate", nxt.c.gap),
        (with_confirm, nxt.c.gap + nxt.c.next_gap),  # NULL when either is a break
        else_=nxt.c.gap,
    )
    what = case((nxt.c.kind == "annotate", "scratch"), else_=func.coalesce(nxt.c.decision, "accept"))
    rows = s.execute(
        select(Task.mode, what.label("what"), func.count(), func.count(secs), func.sum(secs))
        .join(Task, Task.id == nxt.c.task_id)
        .where(nxt.c.kind.in_(("annotate", "verify")), nxt.c.undone_at.is_(None))
        .group_by(Task.mode, what)
    ).all()
    return {(m, w_): (n, timed, float(total or 0)) for m, w_, n, timed, total in rows}


def draft_savings(store: Store, *, by: str | WorkerInfo | None = None) -> list[ModeSavings]:
    """Per mode (in the modes' order, those with any item or draft) and "all": time per verified item against
    time per item written from scratch, and acceptance, edit and rejection rates. `by`: an admin, or None (CLI).
    The log's gaps are summed in the database (curate.people.gaps): no action is loaded."""
    with store.session(write=False) as s:
        check_admin(s, by)
        items = _item_times(s)
        drafts = {
            (m, st): n
            for m, st, n in s.execute(select(Draft.mode, Draft.status, func.count()).group_by(Draft.mode, Draft.status))
        }
    out = []
    for m in list(R.mode_names()) + ["all"]:
        mine: dict[str, tuple[int, int, float]] = {}
        for (im, what), v in items.items():
            if m in ("all", im):
                mine[what] = tuple(x + y for x, y in zip(mine.get(what, (0, 0, 0.0)), v, strict=True))
        nd: dict[str, int] = {}  # status -> drafts; "all" sums each status over the modes
        for (dm, st), n in drafts.items():
            if m in ("all", dm):
                nd[st] = nd.get(st, 0) + n
        if not mine and not nd:
            continue

        def total(whats, k, mine=mine):
            return sum(mine.get(w_, (0, 0, 0.0))[k] for w_ in whats)

        verdicts = ("accept", "edit", "reject")
        timed, secs = total(verdicts, 1), total(verdicts, 2)
        kept_timed = total(("accept", "edit"), 1)
        scratch_timed = total(("scratch",), 1)
        out.append(
            ModeSavings(
                m,
                total(("scratch",), 0),
                total(("scratch",), 2) / scratch_timed if scratch_timed else None,
                sum(nd.values()),
                nd.get("rule_rejected", 0),
                total(verdicts, 0),
                total(("accept",), 0),
                total(("edit",), 0),
                total(("reject",), 0),
                secs / timed if timed else None,
                secs / kept_timed if kept_timed else None,
            )
        )
    return out


def savings_table(rows: list[ModeSavings]) -> str:
    """The rows as the text `vhmine draft --stats` prints."""
    head = (
        f"{'mode':<12} {'scratch':>7} {'s/item':>7} {'drafts':>6} {'by rule':>7} {'verified':>8} {'accept':>6} "
        f"{'edit':>6} {'reject':>6} {'s/kept':>7} {'saving':>7}"
    )

    def pct(x):
        return f"{percent(x):>6}"  # as the app writes it

    def sec(x):
        return "      -" if x is None else f"{x:7.1f}"

    lines = [head]
    for r in rows:
        lines.append(
            f"{r.mode:<12} {r.scratch_items:>7} {sec(r.s_per_scratch)} {r.drafted:>6} {r.rule_rejected:>7} "
            f"{r.decided:>8} {pct(r.accept_rate)} {pct(r.edit_rate)} "
            f"{pct(r.reject_rate)} {sec(r.s_per_kept)} {pct(r.saving)}"
        )
    lines.append(
        f"seconds are gaps between a worker's actions (a gap over {IDLE_S:.0f} s is a break); s/kept counts "
        "rejected drafts' time too; saving = 1 - s/kept / s/item"
    )
    return "\n".join(lines)
