"""The app's "Annotate" page: the next item of the worker's queue, its question and answers, and the yes/no
questions drafted from them to confirm.

Reads and writes only through vhmine.curate (progress, held_kinds, pending_drafts, confirm_drafts, next_item,
leased_to_others, save_annotation, skip, discard). Every action is one page run: its button's on_click calls the
library before the page runs (page_helpers.run_action), reading the fields from the session state, so the run the
click starts already shows the next item; the fields are a fragment (st.fragment), so committing one reruns only
them, not the images and the sidebar. After every action the page lands on the next item (its top in view, the
keyboard on its first field, or on Confirm); every decision has a keyboard shortcut, shown on its button
(SHORTCUTS). Above the item: how many items are left here for the worker (curate.work.work_left).
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine import rules as R
from vhmine.apps.page_helpers import ACTIONS, esc, image_row, land, run_action, show_flash, whole_page
from vhmine.errors import VhmineError

# a shortcut with Ctrl or Alt works while the cursor is in a field (Streamlit takes the field's text first)
SHORTCUTS = {"save": "Ctrl+Enter", "skip": "Alt+K", "discard": "Alt+D", "confirm": "Ctrl+Enter"}
DRAFT_HEIGHT = 130  # px: a draft's image beside it, small enough for two drafts on a laptop screen
FIRST_FIELD = "[data-testid=stMain] [data-testid=stTextInput] input"  # the first slot of the item's template
CONFIRM = "[data-testid=stMain] [data-testid=stBaseButton-primary]"


def annotate_page(store, worker: C.WorkerInfo, mode_name: str) -> None:
    mode = R.get_mode(mode_name)
    st.header(f"Annotate: {mode.name}")
    head = st.empty()  # the counts, filled once the lease below has held what it found unavailable
    if drafts_form(store, worker, mode.name):
        _counts(head, store, worker, mode)
        return
    try:
        item = C.next_item(store, worker, mode.name)
    except VhmineError as err:
        st.error(esc(err))
        return
    finally:
        _counts(head, store, worker, mode)
    if item is None:
        show_flash(ACTIONS)
        _nothing_left(store, worker, mode.name)
        return
    _item(store, worker, mode, item)


def _counts(box, store, worker: C.WorkerInfo, mode: R.Mode) -> None:
    """The mode's counts under its definition, and what is left here for this worker (the mode's "left" also counts
    pairs whose draft waits on Verify drafts and items other workers hold); the items held while an image is missing
    or changed, and why."""
    p = next(p for p in C.progress(store) if p.mode == mode.name)
    left = C.work.work_left(store, worker, mode.name)[mode.name]
    with box.container():
        st.caption(
            esc(
                f"{mode.definition} Look for: {mode.look_for} ({p.done} done, {p.remaining} left, "
                f"{p.discarded} discarded)"
            )
        )
        st.caption(
            f"{left.annotate} item(s) left to annotate in {mode.name}"
            + (f"; {left.verify} drafted pair(s) wait on Verify drafts." if left.verify else ".")
        )
        if p.held:
            why = ", ".join(f"{kind}: {n}" for kind, n in sorted(C.work.held_kinds(store, mode.name).items()))
            st.warning(
                esc(
                    f"{p.held} item(s) held: an image missing or changed ({why}). They come back here by themselves "
                    "when the image is restored; an admin sees which on the Admin page."
                )
            )


def _nothing_left(store, worker: C.WorkerInfo, mode: str) -> None:
    """The queue is empty for this worker: say so, and which items others hold and when they come back."""
    held = C.work.leased_to_others(store, worker, mode)
    if not held:
        st.info(f"Nothing left to annotate in {mode}.")
        return
    who = "; ".join(f"{h.worker} until {h.until:%H:%M} UTC" for h in held[:5]) + ("; ..." if len(held) > 5 else "")
    st.info(
        esc(
            f"Nothing for you to annotate in {mode} now: {len(held)} item(s) are with other workers ({who}). "
            "Each comes back here if it is not done by then."
        )
    )


def _item(store, worker: C.WorkerInfo, mode: R.Mode, item: C.Item) -> None:
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
    _fields(mode.name, item)
    show_flash(ACTIONS)  # what the last Save, Skip or Discard said, or its error, above the buttons
    c1, c2, c3 = st.columns(3)
    c1.button(
        "Save",
        type="primary",
        key=f"save:{key}",
        shortcut=SHORTCUTS["save"],
        on_click=_save,
        args=(store, worker, item),
    )
    c2.button(
        "Skip",
        key=f"skip:{key}",
        shortcut=SHORTCUTS["skip"],
        on_click=run_action,
        args=(lambda: C.skip(store, worker, key), "info", f"Skipped {key}.", ACTIONS, FIRST_FIELD),
    )
    c3.text_input("Discard reason", key=f"reason:{key}", placeholder="no unambiguous question fits")
    c3.button(
        "Discard",
        key=f"discard:{key}",
        shortcut=SHORTCUTS["discard"],
        on_click=run_action,
        args=(
            lambda: C.discard(store, worker, key, st.session_state.get(f"reason:{key}") or ""),
            "info",
            f"Discarded {key}.",
            ACTIONS,
            FIRST_FIELD,
        ),
    )


def _filled(tpl: R.Template, slots: dict) -> str:
    try:
        return R.fill(tpl, slots)
    except VhmineError:
        return tpl.text


def _question(key: str, tpl: R.Template, slots: dict) -> str:
    """The question as it stands: the template as filled now, unless the worker reworded the one filled last.
    A field whose slots changed is offered the newly filled template; so is one whose state Streamlit dropped
    because it was not drawn in some run (skip, then undo): the ":filled" mark is no widget and outlives it."""
    filled, qkey, ss = _filled(tpl, slots), f"q:{key}:{tpl.id}", st.session_state
    return filled if qkey not in ss or ss.get(qkey + ":filled") != filled else ss[qkey]


def _template(mode: R.Mode, key: str) -> R.Template:
    return mode.template(st.session_state.get(f"tpl:{key}") or mode.templates[0].id)


@st.fragment
def _fields(mode_name: str, item: C.Item) -> None:
    """The item's template, slots, question and answers: committing a field reruns only these."""
    whole_page()
    mode, key = R.get_mode(mode_name), item.task_id
    tpl_id = st.selectbox(
        "Template",
        [t.id for t in mode.templates],
        key=f"tpl:{key}",
        format_func=lambda t: f"[{mode.template(t).kind}] {mode.template(t).text}",
    )
    tpl = mode.template(tpl_id)
    slots = {
        s: st.text_input(f"{{{s}}}", key=f"slot:{key}:{tpl.id}:{s}", placeholder=R.slot_hint(s)) for s in tpl.slots
    }
    qkey, filled = f"q:{key}:{tpl.id}", _filled(tpl, slots)
    if qkey not in st.session_state or st.session_state.get(qkey + ":filled") != filled:
        st.session_state[qkey] = st.session_state[qkey + ":filled"] = filled
    st.text_input("Question", key=qkey, help="The filled template; reword it if you need to.")
    roles = {v.role: v.id for v in item.images}
    chosen = (
        st.multiselect("The question is about", list(roles), default=list(roles), key=f"targets:{key}")
        if len(item.images) > 1
        else list(roles)
    )
    for role in chosen:
        label = f"image {role}" if role != "image" else "the image"
        if tpl.kind == R.YNQ:
            st.radio(
                f"Truth for {label}", ["not set", "yes", "no"], horizontal=True, key=f"truth:{key}:{tpl.id}:{role}"
            )
        st.text_area(
            f"Reference answer(s) for {label}, one per line" + (" (optional)" if tpl.kind == R.YNQ else ""),
            key=f"ans:{key}:{tpl.id}:{role}",
        )


def _save(store, worker: C.WorkerInfo, item: C.Item) -> None:
    """Save's on_click: the annotation as the fields hold it now."""
    ss, key = st.session_state, item.task_id
    mode = R.get_mode(item.mode)
    tpl = _template(mode, key)
    slots = {s: ss.get(f"slot:{key}:{tpl.id}:{s}") or "" for s in tpl.slots}
    question = _question(key, tpl, slots)
    roles = {v.role: v.id for v in item.images}
    chosen = ss.get(f"targets:{key}", list(roles)) if len(item.images) > 1 else list(roles)
    answers, truths = {}, {}
    for role in chosen:
        if tpl.kind == R.YNQ:
            t = ss.get(f"truth:{key}:{tpl.id}:{role}", "not set")
            truths[roles[role]] = None if t == "not set" else t == "yes"
        answers[roles[role]] = ss.get(f"ans:{key}:{tpl.id}:{role}") or ""
    ann = C.Annotation(tpl.id, slots, question, answers, truths, [roles[r] for r in chosen])
    saved = run_action(
        lambda: C.save_annotation(store, worker, key, ann),
        "success",
        lambda saved: (
            f"Saved {len(saved.instance_ids)} question(s)"
            + (f"; confirm {len(saved.draft_ids)} drafted yes/no question(s)." if saved.draft_ids else ".")
        ),
        ACTIONS,
        FIRST_FIELD,
    )
    if saved is not None and saved.draft_ids:  # the drafts come next: the keyboard on Confirm
        land(CONFIRM)


def drafts_form(store, worker: C.WorkerInfo, mode: str) -> bool:
    """Show the worker's YNQ drafts to confirm; True while some are pending."""
    drafts = C.pending_drafts(store, worker, mode)
    if not drafts:
        return False
    st.subheader("Confirm the yes/no questions drafted from your answers")
    show_flash(ACTIONS)  # what Save said, beside the button that comes next
    st.button(
        "Confirm",
        key="confirm",
        type="primary",
        shortcut=SHORTCUTS["confirm"],
        on_click=_confirm,
        args=(store, worker, drafts),
    )
    for d in drafts:
        with st.container(border=True):
            left, right = st.columns([1, 4])
            with left:  # the thumbnail the item showed (encoded once, inline): no image to fetch per draft
                image_row(store, [(d.image_id, f"image {d.role}" if d.role != "image" else "image")], DRAFT_HEIGHT)
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
    """Confirm's on_click (drawn above the drafts, so it shows without scrolling): the widgets' values as decisions."""
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
    run_action(
        lambda: C.confirm_drafts(store, worker, decisions),
        "success",
        lambda kept: f"Confirmed {len(kept)} yes/no question(s).",
        ACTIONS,
        FIRST_FIELD,
    )
