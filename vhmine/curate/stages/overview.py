"""Where a store stands, in counts: what `vhmine status` shows of it (and the admin page could).

Reads `tasks` (held ones with their reasons), `instances` (also the person-queue: curate.decisions.person_queue),
`drafts`, `errata`, `blind_answers`, `near_duplicates`, `workers` and `runs` with a handful of grouped counts (no
row is loaded per task, so it stays fast on large stores); writes nothing. Per-mode task counts come from
`curate.work.queue.progress`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select

from vhmine.curate.work import held_kinds, progress
from vhmine.store import (
    BlindAnswer,
    Draft,
    Erratum,
    Instance,
    NearDuplicate,
    Run,
    Store,
    Worker,
)


@dataclass(frozen=True)
class ModeCounts:
    mode: str
    open: int  # tasks left to annotate
    done: int
    discarded: int
    ready: int  # instances ready to export
    drafts_waiting: int  # model drafts (vhmine draft) waiting on the Verify drafts page
    yes_no_to_confirm: int  # yes/no questions drafted from workers' answers, not yet confirmed
    held: int = 0  # tasks out of the queue while an image is missing or changed (curate.work.holds)


@dataclass(frozen=True)
class StoreOverview:
    modes: list[ModeCounts]
    errata_open: int  # flags on released items waiting for an admin
    blind_flags_open: int  # questions a blind solver got right, not overruled
    near_duplicates_open: int  # pairs the export's check found, not overruled
    workers_active: int
    workers_admin: int
    workers_inactive: int
    runs: list[dict] = field(default_factory=list)  # seeded runs: name, pairs file
    contradictions_open: int = 0  # the person-queue: drafted questions whose answers now contradict a person's truth
    held_kinds: dict[str, int] = field(default_factory=dict)  # held tasks per reason: "image missing", "image changed"
    ready_yes_no: dict[str, list[int]] = field(default_factory=dict)  # mode -> [yes, no] of its ready yes/no questions

    @property
    def tasks(self) -> int:
        return sum(m.open + m.done + m.discarded + m.held for m in self.modes)


def store_overview(store: Store) -> StoreOverview:
    """The store's counts (see the module docstring)."""
    prog = progress(store)
    with store.session(write=False) as s:
        waiting = dict(
            s.execute(select(Draft.mode, func.count()).where(Draft.status == "pending").group_by(Draft.mode)).all()
        )
        confirm = dict(
            s.execute(
                select(Instance.mode, func.count()).where(Instance.status == "draft").group_by(Instance.mode)
            ).all()
        )
        errata = s.scalar(select(func.count()).select_from(Erratum).where(Erratum.status == "open")) or 0
        blind = (
            s.scalar(
                select(func.count(func.distinct(BlindAnswer.flag_id))).where(
                    BlindAnswer.flag_id.is_not(None), BlindAnswer.overruled_by.is_(None)
                )
            )
            or 0
        )
        queued = s.scalar(select(func.count()).select_from(Instance).where(Instance.contradiction.is_not(None))) or 0
        dups = (
            s.scalar(select(func.count()).select_from(NearDuplicate).where(NearDuplicate.overruled_by.is_(None))) or 0
        )
        workers = s.execute(
            select(Worker.active, Worker.is_admin, func.count()).group_by(Worker.active, Worker.is_admin)
        ).all()
        yes_no: dict[str, list[int]] = {}
        for mode, truth, n in s.execute(
            select(Instance.mode, Instance.truth, func.count())
            .where(Instance.status == "ready", Instance.kind == "YNQ")
            .group_by(Instance.mode, Instance.truth)
        ).all():
            yes_no.setdefault(mode, [0, 0])[0 if truth else 1] += n
        runs = [
            {"name": name, "pairs": path}
            for name, path in s.execute(select(Run.name, Run.pairs_path).order_by(Run.seeded_at)).all()
        ]
    modes = [
        ModeCounts(
            p.mode,
            p.remaining,
            p.done,
            p.discarded,
            p.ready_instances,
            waiting.get(p.mode, 0),
            confirm.get(p.mode, 0),
            p.held,
        )
        for p in prog
    ]
    return StoreOverview(
        modes,
        errata,
        blind,
        dups,
        workers_active=sum(n for active, _, n in workers if active),
        workers_admin=sum(n for active, admin, n in workers if active and admin),
        workers_inactive=sum(n for active, _, n in workers if not active),
        runs=runs,
        contradictions_open=queued,
        held_kinds=held_kinds(store) if any(p.held for p in prog) else {},
        ready_yes_no=yes_no,
    )
