"""The app's "Errata" page: any worker flags an item of a released export as wrong; admins decide the flags.

A worker types the instance id an export wrote (or finds a ready item of the mode by its words: a few are listed at
once, however many the store holds), says what is wrong and,
optionally, the right answer; they see their own flags and what became of them. An admin sees every open
flag with the item, and accepts it (a new answer, a new yes/no truth, or removing the item) or rejects it
with a reason; and decides the person-queue (curate.decisions.person_queue): yes/no questions whose open answers changed
since a person decided their truth, shown with both sides. Reads and writes only through vhmine.curate
(flag_instance, errata_list, accept_erratum, reject_erratum, ready_instances, get_instance, contradictions,
resolve_contradiction); the library checks the admin right on every call.
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine import rules as R
from vhmine.apps.page_helpers import ACTIONS, act, esc, image, run_action, show_flash, table
from vhmine.errors import VhmineError


def _answer_text(kind: str, answers, truth) -> str:
    return ("yes" if truth else "no") if kind == R.YNQ else "; ".join(answers)


PICK = 30  # ready items the picker lists at once


@st.cache_data(max_entries=16, show_spinner=False)
def _ready_labels(_store, mode: str, mark: tuple) -> dict[str, str]:
    """The ready items of `mode` as the picker names them, read again only when the store changed
    (curate.people.log_mark)."""
    return {
        r.id: f"{r.id}: {r.question} ({_answer_text(r.kind, r.answers, r.truth)})"
        for r in C.ready_instances(_store, mode, locate=False)
    }  # only the text: no image is hashed


def _flag_form(store, me: C.WorkerInfo, mode: str) -> None:
    st.subheader("Flag an item as wrong")
    typed = st.text_input("Instance id", key="er_id", help="The id field of the released export's instance.")
    labels = _ready_labels(store, mode, C.people.log_mark(store))
    words = (
        (st.text_input(f"Or find a ready {mode} item by words of its question or answer", key=f"er_find:{mode}") or "")
        .lower()
        .split()
    )
    hits = [i for i, text in labels.items() if all(w in text.lower() for w in words)]
    shown = list(
        dict.fromkeys(
            [
                *([st.session_state[f"er_pick:{mode}"]] if st.session_state.get(f"er_pick:{mode}") in labels else []),
                *hits[:PICK],
            ]
        )
    )  # a few, not all of a large store's
    picked = st.selectbox(
        f"and pick it ({min(len(hits), PICK)} of {len(hits)} matching shown)",
        [None, *shown],
        key=f"er_pick:{mode}",
        format_func=lambda i: "-" if i is None else labels[i],
    )
    iid = (typed or "").strip() or picked
    if iid:
        try:
            rec = C.get_instance(store, iid)
        except VhmineError as err:
            st.error(esc(err))
        else:
            left, right = st.columns([1, 3])
            with left:
                image(store, rec.image_id, "image")
            right.text(rec.question)
            right.caption("Reference answer")
            right.text(_answer_text(rec.kind, rec.answers, rec.truth))
    st.text_input("What is wrong", key="er_reason", placeholder="image B shows three cats, not two")
    st.text_input("Right answer (optional)", key="er_proposed")
    show_flash(ACTIONS)
    st.button("Flag as wrong", type="primary", key="er_flag", on_click=_flag, args=(store, me, mode))


def _flag(store, me: C.WorkerInfo, mode: str) -> None:
    """Flag as wrong's on_click: the flag saved, the form is emptied for the next one (it kept its text)."""
    ss = st.session_state
    iid = (ss.get("er_id") or "").strip() or ss.get(f"er_pick:{mode}")
    reason, proposed = ss.get("er_reason") or "", ss.get("er_proposed") or ""
    got = run_action(
        lambda: C.decisions.flag_instance(store, me, iid or "", reason, proposed),
        "success",
        f"Flagged {iid}: an admin will accept or reject the flag.",
    )
    if got is not None:
        for key in ("er_id", "er_reason", "er_proposed", f"er_find:{mode}"):
            ss[key] = ""
        ss[f"er_pick:{mode}"] = None


def _item_box(store, image_id: str, caption: str, question: str):
    """A bordered box with the item's image on the left; returns the right column, its caption and question shown."""
    left, right = st.container(border=True).columns([1, 3])
    with left:
        image(store, image_id, "image")
    right.caption(esc(caption))
    right.text(question)
    return right


def _decide(store, me: C.WorkerInfo, e: C.decisions.ErratumView) -> None:
    right = _item_box(
        store, e.image_id, f"flag {e.id} on {e.mode} {e.kind} {e.instance_id} by {e.flagged_by}", e.question
    )
    right.caption("Reference answer now")
    right.text(_answer_text(e.kind, e.answers, e.truth))
    right.caption("What is wrong" + (" (proposed answer below)" if e.proposed else ""))
    right.text(e.reason + (f"\n{e.proposed}" if e.proposed else ""))
    remove = right.checkbox("Remove the item instead of fixing it", key=f"er_rm:{e.id}")
    if e.kind == R.YNQ:
        truth = (
            right.radio(
                "Right truth", ["yes", "no"], index=1 if e.truth else 0, horizontal=True, key=f"er_truth:{e.id}"
            )
            == "yes"
        )
        answers = None
    else:
        truth = None
        answers = right.text_area("Right answer(s), one per line", value=e.proposed or "", key=f"er_ans:{e.id}")
    note = right.text_input("Note (needed to reject)", key=f"er_note:{e.id}")
    c1, c2 = right.columns(2)
    if c1.button("Accept flag", type="primary", key=f"er_acc:{e.id}"):
        act(
            lambda: C.decisions.accept_erratum(
                store, me, e.id, answers=answers, truth=truth, remove=remove, reason=note
            ),
            "success",
            lambda ch: f"Accepted flag {e.id}: " + "; ".join(f"{k} {o} -> {n}" for k, (o, n) in ch.items()),
            f"er:{e.id}",
        )
    if c2.button("Reject flag", key=f"er_rej:{e.id}"):
        act(lambda: C.decisions.reject_erratum(store, me, e.id, note), "info", f"Rejected flag {e.id}.", f"er:{e.id}")


def _queued(store, me: C.WorkerInfo, c: C.decisions.Contradiction) -> None:
    """One question of the person-queue: both sides, and the admin's choice of the truth that stands."""
    right = _item_box(
        store, c.image_id, f"{c.mode} yes/no question, waiting since {c.since} (item {c.instance_id}):", c.question
    )
    right.caption(
        esc(
            f"Decided by {c.decided_by}: {'yes' if c.truth else 'no'}, against the open answers "
            f"{' / '.join(c.decided_against) or '(none)'}"
        )
    )
    right.caption(
        esc(
            f"The open answers now: {' / '.join(c.source_answers)}, which "
            + (
                f"imply {'yes' if c.derived else 'no'}"
                if c.derived is not None
                else "the rules cannot read against this wording"
            )
        )
    )
    truth = (
        right.radio(
            "Truth that stands",
            ["yes", "no"],
            index=0 if c.truth else 1,
            horizontal=True,
            key=f"cq_truth:{c.instance_id}",
        )
        == "yes"
    )
    note = right.text_input("Note (optional)", key=f"cq_note:{c.instance_id}")
    if right.button("Decide", type="primary", key=f"cq_ok:{c.instance_id}"):
        act(
            lambda: C.decisions.resolve_contradiction(store, me, c.instance_id, truth, note),
            "success",
            f"Decided “{c.question}”: truth {'yes' if truth else 'no'}.",
            f"cq:{c.instance_id}",
        )


def errata_page(store, me: C.WorkerInfo, mode: str) -> None:
    st.header("Errata")
    st.caption(
        "Found a wrong item in a released benchmark? Flag it here; the fix goes into the next export's changelog."
    )
    left = st.empty()  # what is left, said at the top once the flags below are read
    _flag_form(store, me, mode)
    try:
        flags = C.decisions.errata_list(store, me, status=None)  # one read: open flags are those of status open
        mine = [e for e in flags if e.flagged_by == me.name]
        open_flags = [e for e in flags if e.status == "open"] if me.is_admin else []
        queue = C.decisions.contradictions(store, me) if me.is_admin else []
    except VhmineError as err:
        st.error(esc(err))
        return
    waiting = sum(e.status == "open" for e in mine)
    left.caption(
        f"{len(open_flags)} flag(s) and {len(queue)} changed answer(s) left to decide; "
        f"{waiting} of your flags wait for an admin."
        if me.is_admin
        else f"{waiting} of your flags wait for an admin."
    )
    st.subheader("Your flags")
    if mine:
        table(
            [
                {
                    "flag": e.id,
                    "instance": e.instance_id,
                    "question": e.question,
                    "what is wrong": e.reason,
                    "status": e.status,
                    "decided by": e.decided_by,
                    "why": e.decision_reason,
                }
                for e in mine
            ]
        )
    else:
        st.write("None.")
    if me.is_admin:
        st.subheader(f"Open flags ({len(open_flags)})")
        for e in open_flags:
            _decide(store, me, e)
        st.subheader(f"Answers changed since a person decided ({len(queue)})")
        st.caption(
            "A yes/no question whose truth a person decided, while the open answers it was drafted from now say "
            "otherwise: it stays ready as it is until you choose the truth that stands."
        )
        for c in queue:
            _queued(store, me, c)
