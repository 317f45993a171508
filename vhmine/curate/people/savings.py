"""What verifying model drafts saves over writing items from scratch, per mode, from the action log.

Reads the action log and the `drafts` table; writes nothing. A worker's time on an action is the gap
since their previous action, when that gap is at most `IDLE_S` (a longer gap is a break: that action
counts as an item but not towards the time). An item written from scratch is an `annotate` action plus
the `confirm` of its drafted yes/no questions when that is the worker's next action; a verified item
is a `verify` action whose decision is accept or edit. Rejected drafts cost time too: `s_per_kept` is
all verify time (rejections included) over the drafts kept, the figure to set against `s_per_scratch`.
Undone actions are left out as items; their times still bound the gaps around them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select

from vhmine.curate.base.access import WorkerInfo, check_admin
from vhmine.curate.work.lease import LEASE_S
from vhmine.rules import modes as M
from vhmine.store import (
    Action,
    Draft,
    Store,
)

IDLE_S = LEASE_S  # a gap longer than a lease is a break, not work on the next item


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
    def saving(self) -> float | None:
        """1 - s_per_kept / s_per_scratch: the share of a worker's time per item that drafts save."""
        if not self.s_per_kept or not self.s_per_scratch:
            return None
        return 1.0 - self.s_per_kept / self.s_per_scratch

    def row(self) -> dict:
        def r(x, n=1):
            return None if x is None else round(x, n)

        return {
            "mode": self.mode,
            "scratch items": self.scratch_items,
            "s/scratch item": r(self.s_per_scratch),
            "drafts": self.drafted,
            "rule-rejected": self.rule_rejected,
            "verified": self.decided,
            "accept rate": r(self.accept_rate, 3),
            "edit rate": r(self.edit_rate, 3),
            "reject rate": r(self.rejected / self.decided if self.decided else None, 3),
            "s/verify decision": r(self.s_per_decision),
            "s/kept draft": r(self.s_per_kept),
            "saving": r(self.saving, 3),
        }


def _timed_items(actions: list[Action]) -> list[tuple[str, str, float | None]]:
    """(mode, what, seconds or None) per item: what is "scratch" or a verify decision."""
    by_worker: dict[str, list[Action]] = defaultdict(list)
    for a in actions:
        by_worker[a.worker].append(a)
    out = []
    for acts in by_worker.values():
        acts.sort(key=lambda a: (a.created_at, a.id))
        gaps: list[float | None] = [None]
        for prev, cur in zip(acts, acts[1:]):
            g = (cur.created_at - prev.created_at).total_seconds()
            gaps.append(g if 0 <= g <= IDLE_S else None)
        for k, a in enumerate(acts):
            if a.undone_at is not None:
                continue
            if a.kind == "annotate":
                secs = gaps[k]
                nxt = acts[k + 1] if k + 1 < len(acts) else None
                if secs is not None and nxt is not None and nxt.kind == "confirm" and nxt.undone_at is None:
                    secs = None if gaps[k + 1] is None else secs + gaps[k + 1]
                out.append((a.task_id.split(":", 1)[0], "scratch", secs))
            elif a.kind == "verify":
                out.append(
                    (
                        (a.payload or {}).get("mode") or a.task_id.split(":", 1)[0],
                        (a.payload or {}).get("decision", "accept"),
                        gaps[k],
                    )
                )
    return out


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def draft_savings(store: Store, *, by: str | WorkerInfo | None = None) -> list[ModeSavings]:
    """Per mode (in the modes' order, those with any item or draft) and "all": time per verified item against
    time per item written from scratch, and acceptance, edit and rejection rates. `by`: an admin, or None (CLI)."""
    with store.session(write=False) as s:
        check_admin(s, by)
        actions = list(s.scalars(select(Action).where(Action.kind.in_(("annotate", "confirm", "verify")))))
        drafts = {
            (m, st): n
            for m, st, n in s.execute(select(Draft.mode, Draft.status, func.count()).group_by(Draft.mode, Draft.status))
        }
    items = _timed_items(actions)
    out = []
    for m in list(M.mode_names()) + ["all"]:
        mine = [it for it in items if m == "all" or it[0] == m]
        nd = {st: n for (dm, st), n in drafts.items() if m == "all" or dm == m}
        if not mine and not nd:
            continue
        scratch = [it for it in mine if it[1] == "scratch"]
        ver = [it for it in mine if it[1] != "scratch"]
        n = {d: sum(1 for it in ver if it[1] == d) for d in ("accept", "edit", "reject")}
        timed = [t for _, _, t in ver if t is not None]
        kept_timed = sum(1 for it in ver if it[2] is not None and it[1] != "reject")
        out.append(
            ModeSavings(
                m,
                len(scratch),
                _mean([t for _, _, t in scratch if t is not None]),
                sum(nd.values()),
                nd.get("rule_rejected", 0),
                len(ver),
                n["accept"],
                n["edit"],
                n["reject"],
                _mean(timed),
                sum(timed) / kept_timed if kept_timed else None,
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
        return "     -" if x is None else f"{100 * x:5.1f}%"

    def sec(x):
        return "      -" if x is None else f"{x:7.1f}"

    lines = [head]
    for r in rows:
        lines.append(
            f"{r.mode:<12} {r.scratch_items:>7} {sec(r.s_per_scratch)} {r.drafted:>6} {r.rule_rejected:>7} "
            f"{r.decided:>8} {pct(r.accept_rate)} {pct(r.edit_rate)} "
            f"{pct(r.rejected / r.decided if r.decided else None)} {sec(r.s_per_kept)} {pct(r.saving)}"
        )
    lines.append(
        f"seconds are gaps between a worker's actions (a gap over {IDLE_S:.0f} s is a break); s/kept counts "
        "rejected drafts' time too; saving = 1 - s/kept / s/item"
    )
    return "\n".join(lines)
