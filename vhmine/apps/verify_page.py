"""The app's "Verify drafts" page, and the drafts' saving on the admin page.

A worker sees a pair a vision model drafted (`vhmine draft`): both images, the question, an answer per
image and the yes/no variants with their truth on each image, and the model and prompt that made them;
they accept it as drafted, save their edit, or reject it with a reason (each a button with a keyboard shortcut, acting
before the page runs: one run per decision). Reads and writes only through
vhmine.curate (work_left, next_verify_item, accept_draft, edit_draft, reject_draft, draft_savings); text the model
or a worker wrote is shown with st.text or in escaped Markdown.
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine.apps.page_helpers import ACTIONS, esc, image_row, run_action, show_flash, table
from vhmine.errors import VhmineError

SHORTCUTS = {"accept": "Ctrl+Enter", "edit": "Alt+E", "reject": "Alt+J"}  # Alt+R: Streamlit keeps R for itself
NEXT = "[data-testid=stMain] [data-testid=stTextInput] input"  # the next draft's question


def verify_page(store, me: C.WorkerInfo, mode: str) -> None:
    st.header(f"Verify drafts: {mode}")
    st.caption("A model drafted this question and its answers: accept them, fix them, or reject the draft.")
    try:
        item = C.work.next_verify_item(store, me, mode)
        left = C.work.work_left(store, me, mode)[mode].verify  # after the lease, which may have held some
    except VhmineError as err:
        st.error(esc(err))
        return
    st.caption(f"{left} draft(s) left to verify in {mode}.")
    if item is None:
        show_flash(ACTIONS)
        st.info(f"No drafts to verify in {mode}.")
        return
    key = item.draft_id
    roles = {v.id: v.role for v in item.images}
    image_row(store, [(v.id, f"image {v.role}") for v in item.images])  # one capped height: the form stays on screen
    st.caption(
        esc(
            f"draft {item.draft_id} of item {item.task_id} by {item.model} ({item.prompt}); "
            f"yours until {item.lease_until:%H:%M} UTC"
        )
    )
    st.text_input("Question", value=item.question, key=f"vq:{key}")
    for col, (img, ans) in zip(st.columns(len(item.answers)), item.answers.items(), strict=True):
        col.text_area(
            f"Answer(s) for image {roles[img]}, one per line", value="\n".join(ans), key=f"va:{key}:{roles[img]}"
        )
    st.subheader("Yes/no variants")
    for k, (q, truths) in enumerate(item.yes_no):  # their values are read when a button acts (_decide)
        with st.container(border=True):
            st.checkbox("Keep", value=True, key=f"vk:{key}:{k}")
            if q in item.unchecked:
                st.warning("The rules cannot check this question against the answers: check its truths on the images.")
            st.text_input(f"Yes/no question {k + 1}", value=q, key=f"vyq:{key}:{k}")
            for col, (img, t) in zip(st.columns(len(truths)), truths.items(), strict=True):
                col.radio(
                    f"Image {roles[img]}",
                    ["yes", "no"],
                    index=0 if t else 1,
                    horizontal=True,
                    key=f"vyt:{key}:{k}:{roles[img]}",
                )
            st.checkbox(
                "I checked these truths on the images (needed where the rules cannot check them)",
                value=False,
                key=f"vc:{key}:{k}",
            )
    show_flash(ACTIONS)  # what the last action said, and the error of the next, above the buttons
    c1, c2, c3 = st.columns(3)
    c1.button(
        "Accept as drafted",
        type="primary",
        key=f"vacc:{key}",
        shortcut=SHORTCUTS["accept"],
        on_click=_decide,
        args=(store, me, item, "accept"),
    )
    c2.button(
        "Save my edit", key=f"vedit:{key}", shortcut=SHORTCUTS["edit"], on_click=_decide, args=(store, me, item, "edit")
    )
    c3.text_input("Reject reason", key=f"vreason:{key}", placeholder="answer for image B is wrong")
    c3.button(
        "Reject", key=f"vrej:{key}", shortcut=SHORTCUTS["reject"], on_click=_decide, args=(store, me, item, "reject")
    )


def _decide(store, me: C.WorkerInfo, item, decision: str) -> None:
    """A decision's on_click, before the page runs (one run): the fields as they hold now."""
    ss, key = st.session_state, item.draft_id
    roles = {v.id: v.role for v in item.images}
    yes_no, checked = [], []
    for k, (q, truths) in enumerate(item.yes_no):
        yq = ss.get(f"vyq:{key}:{k}", q)
        if ss.get(f"vc:{key}:{k}", False):
            checked.append(yq)
        if ss.get(f"vk:{key}:{k}", True):
            yes_no.append(
                (
                    yq,
                    {
                        img: ss.get(f"vyt:{key}:{k}:{roles[img]}", "yes" if t else "no") == "yes"
                        for img, t in truths.items()
                    },
                )
            )
    if decision == "accept":
        run_action(
            lambda: C.work.accept_draft(store, me, item.draft_id, checked=checked),
            "success",
            lambda v: f"Accepted the draft: {len(v.instance_ids)} question(s) ready.",
            ACTIONS,
            NEXT,
        )
    elif decision == "edit":
        answers = {img: ss.get(f"va:{key}:{roles[img]}", "\n".join(ans)) for img, ans in item.answers.items()}
        run_action(
            lambda: C.work.edit_draft(
                store,
                me,
                item.draft_id,
                question=ss.get(f"vq:{key}", item.question),
                answers=answers,
                yes_no=yes_no,
                checked=checked,
            ),
            "success",
            lambda v: (
                f"Saved ({'no change: accepted' if v.decision == 'accept' else 'edited'}): "
                f"{len(v.instance_ids)} question(s) ready."
            ),
            ACTIONS,
            NEXT,
        )
    else:
        run_action(
            lambda: C.work.reject_draft(store, me, item.draft_id, ss.get(f"vreason:{key}") or ""),
            "info",
            f"Rejected the draft of {item.task_id}; the pair goes back to the annotate queue.",
            ACTIONS,
            NEXT,
        )


def savings_section(store, me: C.WorkerInfo) -> None:
    """For the admin page: what verifying drafts saves over writing items from scratch, per mode."""
    st.subheader("Drafts: time saved")
    try:
        rows = C.people.draft_savings(store, by=me)
    except VhmineError as err:
        st.error(esc(err))
        return
    if not rows:
        st.write("No items written or drafts verified yet.")
        return
    st.caption(
        "Seconds are gaps between a worker's actions (a long gap is a break); s/kept draft counts the time "
        "of rejected drafts too; saving = 1 - s/kept draft / s/scratch item. `vhmine draft --stats` prints the same."
    )
    # two narrower tables rather than one of twelve columns, which ran off the page's right edge
    cols = [r.row() for r in rows]
    table(
        [
            {k: r[k] for k in ("mode", "scratch items", "s/scratch item", "drafts", "rule-rejected", "verified")}
            for r in cols
        ]
    )
    table(
        [
            {
                k: r[k]
                for k in (
                    "mode",
                    "accept rate",
                    "edit rate",
                    "reject rate",
                    "s/verify decision",
                    "s/kept draft",
                    "saving",
                )
            }
            for r in cols
        ]
    )
