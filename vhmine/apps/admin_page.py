"""The app's "Admin" page: where the project stands, per mode, in sections an admin picks.

Reads through vhmine.curate only: progress, held_tasks (with recheck_held, an admin's "Check again"), worker_time
(worker seconds per ready instance and the hours left to the export's target), agreement and disagreements (blind
reviews, model-answer labels), list_workers, draft_savings. The library checks the admin right on every call it is
asked (list_workers, first, guards the page); the figures read from the whole action log are kept per `log_mark`
(they change only when the log or the instances do), and only the section picked is read and drawn, so the page
stays quick on a large store; disagreements come a page at a time. Figures are written as people read them
(curate.people.number, duration, percent: "18.9", "2 h 15 min", "-9909.2%" as `vhmine draft --stats` writes it).
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine.apps.page_helpers import esc, run_action, show_flash, table
from vhmine.apps.verify_page import savings_section
from vhmine.errors import VhmineError

SECTIONS = ("Progress and worker time", "Agreement", "Workers", "Drafts: time saved")
PAGE = 20  # disagreements per page
VHTEST_PER_MODE = 150  # VHTest: 1,200 instances over 8 modes


@st.cache_data(max_entries=16, show_spinner=False)
def _log_figures(_store, what: str, mark: tuple, target: int = 0):
    """A figure read from the whole action log, kept while `mark` (curate.people.log_mark) stays the same. The page
    checked the admin right before asking (the operator's call, by=None, reads what the admin may)."""
    if what == "worker time":
        return C.people.worker_time(_store, target)
    if what == "agreement":
        return (
            C.people.mode_agreement(_store),
            C.people.mode_agreement(_store, "responses"),
            C.people.disagreements(_store),
        )
    raise ValueError(what)


def _agreement_rows(rows):
    return [
        {
            "mode": a.mode,
            "statistic": a.statistic,
            "kappa": C.people.number(a.kappa, 3),  # "0.81", never "0.8100"
            "items": a.items,
            "raters": a.raters,
            "disagreements": a.disagreements,
        }
        for a in rows
    ]


def _bars(rows: list[dict], parts: dict[str, str], axis: str, height: int, *, counts: bool = True) -> None:
    """Horizontal bars, one per row's "mode" in the rows' order, of the `parts` (field -> colour; stacked when
    there are several, in that order), with `axis` under them (whole numbers for `counts`). A Vega-Lite spec of
    its own (st.vega_lite_chart): st.bar_chart builds its chart with altair, whose import alone cost the admin
    page's first view half a second."""
    values = [{"mode": r["mode"], "part": f, "k": k, "n": r[f]} for r in rows for k, f in enumerate(parts)]
    several = len(parts) > 1
    color = (
        {"field": "part", "type": "nominal", "title": None, "sort": list(parts)}
        | {"scale": {"domain": list(parts), "range": list(parts.values())}, "legend": {"orient": "bottom"}}
        if several
        else {"value": next(iter(parts.values()))}
    )
    spec = {
        "data": {"values": values},
        "mark": {"type": "bar", "tooltip": True},
        "encoding": {
            "y": {"field": "mode", "type": "nominal", "sort": [r["mode"] for r in rows], "title": None},
            "x": {"field": "n", "type": "quantitative", "title": axis, "stack": "zero" if several else None}
            | ({"axis": {"tickMinStep": 1, "format": "d"}} if counts else {}),
            "color": color,
            "order": {"field": "k", "type": "ordinal"},
        },
    }
    st.vega_lite_chart(spec=spec, width="stretch", height=height)


PARTS = {"done": "#2e7d32", "discarded": "#9e9e9e", "left": "#90caf9", "held": "#ef6c00"}  # a mode's tasks


def _progress_chart(progress) -> None:
    """Per mode, one bar of its tasks (done, discarded, left and held, stacked) and one of its ready questions."""
    rows = [
        {
            "mode": p.mode,
            "done": p.done,
            "discarded": p.discarded,
            "left": p.remaining,
            "held": p.held,
            "ready": p.ready_instances,
        }
        for p in progress
    ]
    tasks, ready = st.columns([3, 2])
    with tasks:
        _bars(rows, PARTS, "tasks", 40 * len(rows) + 80)
    with ready:
        _bars(rows, {"ready": "#2e7d32"}, "questions ready to export", 40 * len(rows) + 80)


def _agreement_chart(rows, what: str) -> None:
    """Kappa per mode as bars (modes without a figure yet are left out and said so)."""
    have = [a for a in rows if a.kappa is not None]
    if not have:
        st.caption(f"No {what} agreement yet: it needs items that two or more workers answered.")
        return
    _bars(
        [{"mode": a.mode, "kappa": round(a.kappa, 3)} for a in have],
        {"kappa": "#1976d2"},
        "kappa (1: full agreement, 0: chance)",
        220,
        counts=False,
    )
    missing = [a.mode for a in rows if a.kappa is None]
    if missing:
        st.caption("No figure yet for " + ", ".join(missing) + ".")


def admin_page(store, me: C.WorkerInfo) -> None:
    try:  # the library checks the right again on every call: the page is not the guard
        workers = C.list_workers(store, by=me)
        mark = C.people.log_mark(store)
    except VhmineError as err:
        st.error(esc(err))
        return
    section = st.radio("Show", SECTIONS, horizontal=True, key="admin_section", label_visibility="collapsed")
    if section == SECTIONS[0]:
        _progress_section(store, mark, me)
    elif section == SECTIONS[1]:
        _agreement_section(store, mark)
    elif section == SECTIONS[2]:
        st.header("Workers")
        table(
            [
                {"name": w.name, "admin": "yes" if w.is_admin else "no", "active": "yes" if w.active else "no"}
                for w in workers
            ]
        )
    else:
        savings_section(store, me)


def _held_section(store, me: C.WorkerInfo) -> None:
    """The tasks out of the queues while an image is missing or changed, with why, and a button to check again."""
    held = C.work.held_tasks(store)
    st.subheader(f"Held: {len(held)} item(s) whose image is missing or changed")
    st.caption(
        "They left the queues by themselves when a worker's lease found the image gone or changed, and come back by "
        "themselves when it is restored (its recorded file, or a copy `vhmine embed` indexed). Check again looks at "
        "every one now."
    )
    table(
        [
            {
                "item": h.task_id,
                "mode": h.mode,
                "why": h.reason,
                "since": f"{h.since:%Y-%m-%d %H:%M} UTC" if h.since else "",
            }
            for h in held[:PAGE]
        ]
    )
    if len(held) > PAGE:
        st.caption(f"... and {len(held) - PAGE} more.")
    st.button(
        "Check again",
        key="admin_recheck",
        on_click=run_action,
        args=(
            lambda: C.work.recheck_held(store, me),
            "info",
            lambda n: f"{n[0]} item(s) back in their queues; {n[1]} still held.",
            "held",
        ),
    )


def _progress_section(store, mark: tuple, me: C.WorkerInfo) -> None:
    progress = C.progress(store)
    st.header("Progress")
    _progress_chart(progress)
    table(
        [
            {
                "mode": p.mode,
                "done": p.done,
                "ready questions": p.ready_instances,
                "discarded": p.discarded,
                "left": p.remaining,
                "held": p.held,
            }
            for p in progress
        ]
    )
    show_flash("held")  # what Check again said, also once nothing is held any more
    if any(p.held for p in progress):
        _held_section(store, me)
    st.subheader("Worker time")
    target = st.number_input(
        "Target: ready questions per mode (the export's --per-mode)",
        min_value=1,
        value=VHTEST_PER_MODE,
        step=10,
        key="admin_target",
    )
    st.caption(
        "Worker seconds are gaps between a worker's actions in the mode (a gap longer than a lease is a "
        "break); per ready question: all of a mode's worker time over its ready questions; time left: the "
        "questions still missing to the target at that rate."
    )
    table([m.row() for m in _log_figures(store, "worker time", mark, int(target))])


def _agreement_section(store, mark: tuple) -> None:
    rows, label_rows, dis = _log_figures(store, "agreement", mark)
    st.header("Agreement")
    st.caption("Authors' reference answers against blind reviews: Cohen's kappa for two workers, Fleiss' for more.")
    _agreement_chart(rows, "review")
    table(_agreement_rows(rows))
    st.subheader(f"Disagreements ({len(dis)})")
    if dis:
        pages = (len(dis) + PAGE - 1) // PAGE
        page = st.number_input(f"Page (of {pages})", min_value=1, max_value=pages, value=1, key="admin_dis_page")
        table(
            [
                {
                    "mode": d.mode,
                    "instance": d.item_id,
                    "question": d.question,
                    "answers": "; ".join(f"{w}: {a}" for w, a in d.ratings.items()),
                }
                for d in dis[(page - 1) * PAGE : page * PAGE]
            ]
        )
    else:
        st.write("None.")
    st.subheader("Model-answer labels")
    _agreement_chart(label_rows, "label")
    table(_agreement_rows(label_rows))
