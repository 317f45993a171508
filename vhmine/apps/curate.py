"""The curation app: workers sign in, annotate the per-mode queues, review blind, label model answers.

Run it with `vhmine curate` (which sets VHMINE_DB). Reads and writes only through vhmine.curate and
vhmine.store: no SQL and no file paths here; images come from `curate.image_bytes`, which serves only
files recorded in the store (a pair's images drawn in one row at one height by page_helpers.image_row). Text
that workers typed is shown with st.text or escaped in tables, never as Markdown or HTML; a message appears
beside the button that caused it (page_helpers.flash / show_flash). The mode menu remembers each worker's
choice in the store (curate.choose_mode). Tokens are typed into a password field and never shown or logged. The session
holds the signed-in `C.WorkerInfo` (name, token generation), never the token; every page run re-checks it
(`C.check_session`) and every library call checks it again, so a rotated token or a deactivated worker
is signed out at the next click, and admin data comes only from calls the library lets an admin make.
"""

from __future__ import annotations

import os

import streamlit as st

from vhmine import curate as C
from vhmine.apps.blind_page import blind_page
from vhmine.apps.errata_page import errata_page
from vhmine.apps.page_helpers import (
    ACTIONS,
    esc,
    fit_screen,
    flash,
    image,
    image_row,
    show_flash,
    show_leftover_flash,
    table,
)
from vhmine.apps.verify_page import savings_section, verify_page
from vhmine.errors import VhmineError
from vhmine.rules import modes as M
from vhmine.store import open_store

st.set_page_config(page_title="vhmine curate", layout="wide")


@st.cache_resource
def _store(url: str):
    return open_store(url, create=False)


def sign_in_page(store) -> None:
    st.title("vhmine curation")
    note = st.empty()
    with st.form("signin"):
        token = st.text_input("Token", type="password", key="token", help="Printed once by `vhmine workers add NAME`.")
        ok = st.form_submit_button("Sign in")
    if not ok and "signed_out" in st.session_state:  # why the last session ended (token rotated, worker deactivated)
        note.error(esc(st.session_state["signed_out"]))
    if ok:
        st.session_state.pop("signed_out", None)
        try:
            w = C.sign_in(store, token)
        except VhmineError as err:
            st.error(esc(err))
            return
        st.session_state["worker"] = w
        st.session_state["mode"] = C.chosen_mode(store, w) or M.mode_names()[0]  # theirs, in any browser
        st.session_state.pop("token", None)
        st.rerun()


def sidebar(store, me: C.WorkerInfo) -> tuple[str, str]:
    with st.sidebar:
        who, out = st.columns([3, 2], vertical_alignment="center")  # Sign out at the top: in view on a laptop
        who.write(f"Signed in as **{esc(me.name)}**" + (" (admin)" if me.is_admin else ""))
        if out.button("Sign out", key="signout"):
            st.session_state.pop("worker", None)
            st.rerun()
        pages = ["Annotate", "Review", "Label answers", "Verify drafts", "Errata", "Blind flags"] + (
            ["Admin"] if me.is_admin else []
        )
        if st.session_state.get("page") not in (None, *pages):  # an admin page after the right was taken away
            st.session_state.pop("page")
        page = st.radio("Page", pages, key="page")
        mode = st.selectbox("Mode", M.mode_names(), key="mode", on_change=_remember_mode, args=(store, me))
        if st.button("Undo last action", key="undo"):
            try:
                flash("info", "Undone: " + C.undo_last(store, me), "sidebar")
            except VhmineError as err:
                flash("error", str(err), "sidebar")
            st.rerun()
        show_flash("sidebar")  # beside the Undo button
        st.subheader("Progress")
        # a plain table of four short columns: all of it fits the sidebar's width, where a data grid of five
        # hid its last ones; the discarded counts are on the Annotate page (its mode) and the Admin page
        st.table(
            [
                {"mode": p.mode, "done": p.done, "left": p.remaining, "ready": p.ready_instances}
                for p in C.progress(store)
            ],
            hide_index=True,
        )
        st.caption("Items annotated (done) and left to annotate; ready: questions ready to export.")
    return page, mode


def _remember_mode(store, me: C.WorkerInfo) -> None:
    """The mode menu changed: keep the choice in the store, so the next sign-in (any browser) starts there."""
    try:
        C.choose_mode(store, me, st.session_state["mode"])
    except VhmineError:  # signed out meanwhile: the page run that follows says so
        pass


def drafts_form(store, worker: C.WorkerInfo, mode: str) -> bool:
    """Show the worker's YNQ drafts to confirm; True while some are pending."""
    drafts = C.pending_drafts(store, worker, mode)
    if not drafts:
        return False
    st.subheader("Confirm the yes/no questions drafted from your answers")
    show_flash(ACTIONS)  # what Save said, beside the button that comes next
    if st.button("Confirm", key="confirm", type="primary"):
        _confirm(store, worker, drafts)
    for d in drafts:
        with st.container(border=True):
            left, right = st.columns([1, 4])
            with left:
                image(store, d.image_id, f"image {d.role}" if d.role != "image" else "image")
            right.caption(esc(f"From: {d.oeq_question} Your answer(s): {'; '.join(d.oeq_answers)}"))
            if d.note:  # an accepted erratum changed the answers it comes from: why it is here
                right.warning(esc(d.note))
            right.checkbox("Keep", value=True, key=f"keep:{d.instance_id}")
            right.text_input("Yes/no question", value=d.question, key=f"dq:{d.instance_id}")
            right.radio("Truth", ["yes", "no"], index=0 if d.truth else 1, horizontal=True, key=f"dt:{d.instance_id}")
            right.checkbox(
                "I checked this truth on the image (needed where the rules cannot read a reworded question)",
                value=False,
                key=f"dc:{d.instance_id}",
            )
    return True


def _confirm(store, worker: C.WorkerInfo, drafts) -> None:
    """The Confirm button (drawn above the drafts, so it shows without scrolling): the widgets' values as decisions."""
    ss = st.session_state
    decisions = [
        C.DraftDecision(
            d.instance_id,
            ss.get(f"keep:{d.instance_id}", True),
            ss.get(f"dq:{d.instance_id}", d.question),
            ss.get(f"dt:{d.instance_id}", "yes" if d.truth else "no") == "yes",
            ss.get(f"dc:{d.instance_id}", False),
        )
        for d in drafts
    ]
    try:
        kept = C.confirm_drafts(store, worker, decisions)
    except VhmineError as err:
        st.error(esc(err))
        return
    flash("success", f"Confirmed {len(kept)} yes/no question(s).")
    st.rerun()


def annotate_page(store, worker: C.WorkerInfo, mode_name: str) -> None:
    mode = M.get_mode(mode_name)
    st.header(f"Annotate: {mode.name}")
    p = next(p for p in C.progress(store) if p.mode == mode.name)
    st.caption(
        esc(f"{mode.definition} Look for: {mode.look_for} ({p.done} done, {p.remaining} left, {p.discarded} discarded)")
    )
    if drafts_form(store, worker, mode.name):
        return
    try:
        item = C.next_item(store, worker, mode.name)
    except VhmineError as err:
        st.error(esc(err))
        return
    if item is None:
        show_flash(ACTIONS)
        st.info(f"Nothing left to annotate in {mode.name}.")
        return
    key = item.task_id
    # side by side at one capped height: the form's first field stays on a laptop screen
    image_row(
        store,
        [
            (
                v.id,
                (f"image {v.role}" if v.role != "image" else "generated image")
                + (f" (objects: {', '.join(v.categories)})" if v.categories else ""),
            )
            for v in item.images
        ],
    )
    if item.prompt is not None:
        st.caption("Prompt that generated it:")
        st.text(item.prompt)
    st.caption(esc(f"item {item.task_id}; yours until {item.lease_until:%H:%M} UTC"))

    tpl_id = st.selectbox(
        "Template",
        [t.id for t in mode.templates],
        key=f"tpl:{key}",
        format_func=lambda t: f"[{mode.template(t).kind}] {mode.template(t).text}",
    )
    tpl = mode.template(tpl_id)
    slots = {
        s: st.text_input(f"{{{s}}}", key=f"slot:{key}:{tpl.id}:{s}", placeholder=M.slot_hint(s)) for s in tpl.slots
    }
    try:
        filled = M.fill(tpl, slots)
    except VhmineError:
        filled = tpl.text
    qkey = f"q:{key}:{tpl.id}"
    # offer the newly filled template when the slots changed, or when Streamlit dropped the field's state
    # because it was not drawn in some run (skip, then undo): the ":filled" mark is no widget and outlives it
    if qkey not in st.session_state or st.session_state.get(qkey + ":filled") != filled:
        st.session_state[qkey] = st.session_state[qkey + ":filled"] = filled
    question = st.text_input("Question", key=qkey, help="The filled template; reword it if you need to.")
    roles = {v.role: v.id for v in item.images}
    if len(item.images) > 1:
        chosen = st.multiselect("The question is about", list(roles), default=list(roles), key=f"targets:{key}")
    else:
        chosen = list(roles)
    answers, truths = {}, {}
    for role in chosen:
        iid = roles[role]
        label = f"image {role}" if role != "image" else "the image"
        if tpl.kind == M.YNQ:
            t = st.radio(
                f"Truth for {label}", ["not set", "yes", "no"], horizontal=True, key=f"truth:{key}:{tpl.id}:{role}"
            )
            truths[iid] = None if t == "not set" else t == "yes"
        answers[iid] = st.text_area(
            f"Reference answer(s) for {label}, one per line" + (" (optional)" if tpl.kind == M.YNQ else ""),
            key=f"ans:{key}:{tpl.id}:{role}",
        )
    note = show_flash(ACTIONS)  # what the last Save, Skip or Discard said, and the error of the next, above them
    c1, c2, c3 = st.columns(3)
    if c1.button("Save", type="primary", key=f"save:{key}"):
        ann = C.Annotation(tpl.id, slots, question, answers, truths, [roles[r] for r in chosen])
        try:
            saved = C.save_annotation(store, worker, item.task_id, ann)
            flash(
                "success",
                f"Saved {len(saved.instance_ids)} question(s)"
                + (f"; confirm {len(saved.draft_ids)} drafted yes/no question(s)." if saved.draft_ids else "."),
            )
            st.rerun()
        except VhmineError as err:
            note.error(esc(err))
    if c2.button("Skip", key=f"skip:{key}"):
        try:
            C.skip(store, worker, item.task_id)
            flash("info", f"Skipped {item.task_id}.")
            st.rerun()
        except VhmineError as err:
            note.error(esc(err))
    reason = c3.text_input("Discard reason", key=f"reason:{key}", placeholder="no unambiguous question fits")
    if c3.button("Discard", key=f"discard:{key}"):
        try:
            C.discard(store, worker, item.task_id, reason)
            flash("info", f"Discarded {item.task_id}.")
            st.rerun()
        except VhmineError as err:
            note.error(esc(err))


def _image_beside_form(store, image_id: str, form) -> None:
    """The image left, `form()` right: side by side, a large image does not push the question (and the
    answer being labelled) off screen."""
    pic, right = st.columns([2, 3])
    with pic:
        image(store, image_id, "image")
    with right:
        form()


def review_page(store, worker: C.WorkerInfo, mode: str) -> None:
    st.header(f"Review: {mode}")
    left = C.reviews_left(store, worker, mode)
    st.caption(f"{left} item(s) left to review in {mode}. Answer without seeing the author's answer.")
    item = C.next_review(store, worker, mode)
    if item is None:
        show_flash(ACTIONS)
        st.info(f"Nothing to review in {mode}.")
        return
    _image_beside_form(store, item.image_id, lambda: _review_form(store, worker, item))


def _review_form(store, worker: C.WorkerInfo, item) -> None:
    st.text(item.question)
    st.caption(f"item {item.instance_id}")  # the id the message of a saved answer names: which item that was
    if item.kind == M.YNQ:
        answer = st.radio(
            "Your answer", ["yes", "no", "can't tell"], index=None, horizontal=True, key=f"rv:{item.instance_id}"
        )
    else:
        answer = st.text_input("Your answer", key=f"rv:{item.instance_id}")
        if st.checkbox("I can't tell", key=f"rvx:{item.instance_id}"):
            answer = "can't tell"
    note = show_flash(ACTIONS)
    if st.button("Save answer", type="primary", key=f"rvs:{item.instance_id}"):
        try:
            C.save_review(store, worker, item.instance_id, answer or "")
            # shown above the next item's button: it names the item saved, so it never reads as this one's
            flash("success", f"Answer “{answer}” saved for the previous item {item.instance_id} ({item.question}).")
            st.rerun()
        except VhmineError as err:
            note.error(esc(err))


def label_page(store, worker: C.WorkerInfo, mode: str) -> None:
    st.header(f"Label model answers: {mode}")
    item = C.next_response(store, worker, mode)
    if item is None:
        show_flash(ACTIONS)
        st.info(f"No model answers to label in {mode}.")
        return
    _image_beside_form(store, item.image_id, lambda: _label_form(store, worker, item))


def _label_form(store, worker: C.WorkerInfo, item) -> None:
    st.caption("Question")
    st.text(item.question)
    st.caption("Reference answer(s)" + (f" (truth: {'yes' if item.truth else 'no'})" if item.truth is not None else ""))
    st.text("\n".join(item.answers))
    st.caption("The model's answer")
    st.text(item.model_answer)
    verdict = st.radio(
        "Verdict", ["correct", "hallucinated"], index=None, horizontal=True, key=f"lv:{item.response_id}"
    )
    note = show_flash(ACTIONS)
    if st.button("Save verdict", type="primary", key=f"lvs:{item.response_id}"):
        try:
            C.label_response(store, worker, item.response_id, verdict or "")
            flash("success", f"Verdict saved for the previous answer ({verdict}: {item.question}).")
            st.rerun()
        except VhmineError as err:
            note.error(esc(err))


def _agreement_rows(rows):
    return [
        {
            "mode": a.mode,
            "statistic": a.statistic,
            "kappa": None if a.kappa is None else round(a.kappa, 3),
            "items": a.items,
            "raters": a.raters,
            "disagreements": a.disagreements,
        }
        for a in rows
    ]


def _progress_chart(progress) -> None:
    """Per mode, one bar of its tasks (done, discarded and left, stacked) and one of its ready questions."""
    import pandas as pd

    data = pd.DataFrame(
        [{"mode": p.mode, "done": p.done, "discarded": p.discarded, "left": p.remaining} for p in progress]
    )
    tasks, ready = st.columns([3, 2])
    with tasks:  # horizontal: x names the bars (modes), y_label the length axis
        st.bar_chart(
            data,
            x="mode",
            y=["done", "discarded", "left"],
            horizontal=True,
            stack=True,
            sort=False,
            color=["#2e7d32", "#9e9e9e", "#90caf9"],
            x_label="",
            y_label="tasks",
            height=40 * len(data) + 80,
        )
    with ready:
        st.bar_chart(
            pd.DataFrame([{"mode": p.mode, "ready": p.ready_instances} for p in progress]),
            x="mode",
            y="ready",
            horizontal=True,
            sort=False,
            color="#2e7d32",
            x_label="",
            y_label="questions ready to export",
            height=40 * len(data) + 80,
        )


def _agreement_chart(rows, what: str) -> None:
    """Kappa per mode as bars (modes without a figure yet are left out and said so)."""
    import pandas as pd

    have = [a for a in rows if a.kappa is not None]
    if not have:
        st.caption(f"No {what} agreement yet: it needs items that two or more workers answered.")
        return
    st.bar_chart(
        pd.DataFrame([{"mode": a.mode, "kappa": round(a.kappa, 3)} for a in have]),
        x="mode",
        y="kappa",
        horizontal=True,
        sort=False,
        x_label="",
        y_label="kappa (1: full agreement, 0: chance)",
        height=220,
    )
    missing = [a.mode for a in rows if a.kappa is None]
    if missing:
        st.caption("No figure yet for " + ", ".join(missing) + ".")


def admin_page(store, me: C.WorkerInfo) -> None:
    try:  # the library checks the right again on every call: the page is not the guard
        rows, dis = C.agreement(store, by=me), C.disagreements(store, by=me)
        label_rows, workers = C.agreement(store, "responses", by=me), C.list_workers(store, by=me)
    except VhmineError as err:
        st.error(esc(err))
        return
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
            }
            for p in progress
        ]
    )
    st.header("Agreement")
    st.caption("Authors' reference answers against blind reviews: Cohen's kappa for two workers, Fleiss' for more.")
    _agreement_chart(rows, "review")
    table(_agreement_rows(rows))
    st.subheader("Disagreements")
    if dis:
        table(
            [
                {
                    "mode": d.mode,
                    "instance": d.item_id,
                    "question": d.question,
                    "answers": "; ".join(f"{w}: {a}" for w, a in d.ratings.items()),
                }
                for d in dis
            ]
        )
    else:
        st.write("None.")
    st.subheader("Model-answer labels")
    _agreement_chart(label_rows, "label")
    table(_agreement_rows(label_rows))
    st.subheader("Workers")
    table(
        [
            {"name": w.name, "admin": "yes" if w.is_admin else "no", "active": "yes" if w.active else "no"}
            for w in workers
        ]
    )
    savings_section(store, me)


def main() -> None:
    url = os.environ.get("VHMINE_DB")
    try:
        store = _store(C.resolve_url(url))
    except VhmineError as err:
        st.error(esc(err))
        return
    if "worker" in st.session_state:
        try:  # every run: a rotated token or a deactivation signs the browser out before any click acts
            st.session_state["worker"] = C.check_session(store, st.session_state["worker"])
        except VhmineError as err:
            st.session_state.pop("worker")
            st.session_state["signed_out"] = f"You were signed out: {err}"
    if "worker" not in st.session_state:
        sign_in_page(store)
        return
    me = st.session_state["worker"]  # a C.WorkerInfo: every call below re-checks it in the store
    fit_screen()
    page, mode = sidebar(store, me)
    top = st.container()  # a message whose button's place is gone this run (its item done) shows here
    if page == "Annotate":
        annotate_page(store, me, mode)
    elif page == "Review":
        review_page(store, me, mode)
    elif page == "Label answers":
        label_page(store, me, mode)
    elif page == "Verify drafts":
        verify_page(store, me, mode)
    elif page == "Errata":
        errata_page(store, me, mode)
    elif page == "Blind flags":
        blind_page(store, me, mode)
    elif page == "Admin":
        admin_page(store, me)
    show_leftover_flash(top)


main()
