"""The app's "Review" and "Label answers" pages: a worker answers a ready question blind, or labels a model's answer.

Reads and writes only through vhmine.curate (reviews_left, next_review, save_review, next_response, label_response);
text a worker or a model wrote is shown with st.text. Each decision is one button with a keyboard shortcut shown on
it (Yes, No, Can't tell; Correct, Hallucinated, No answer; Save answer for an open question), run before the page reruns
(page_helpers.run_action): one run per decision, and the page lands on the next item's first control.
Both say how many items are left (reviews_left; work_left).
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine import rules as R
from vhmine.apps.page_helpers import ACTIONS, NEXT_KEYS, image, run_action, show_flash

SHORTCUTS = {
    "yes": "Alt+Y",
    "no": "Alt+N",
    "can't tell": "Alt+T",
    "save": "Ctrl+Enter",
    "correct": "Alt+1",
    "hallucinated": "Alt+2",
    "no answer": "Alt+3",
}


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
    left = C.work.reviews_left(store, worker, mode)
    st.caption(f"{left} item(s) left to review in {mode}. Answer without seeing the author's answer.")
    item = C.work.next_review(store, worker, mode)
    if item is None:
        show_flash(ACTIONS)
        st.info(f"Nothing to review in {mode}.")
        return
    _image_beside_form(store, item.image_id, lambda: _review_form(store, worker, item))


def _save_review(store, worker: C.WorkerInfo, item, answer: str | None) -> None:
    """A decision's on_click: `answer`, or (None) what the answer field holds."""
    answer = answer if answer is not None else (st.session_state.get(f"rv:{item.instance_id}") or "")
    # shown above the next item's buttons: it names the item saved, so it never reads as this one's
    run_action(
        lambda: C.work.save_review(store, worker, item.instance_id, answer),
        "success",
        f"Answer “{answer}” saved for the previous item {item.instance_id} ({item.question}).",
        ACTIONS,
        NEXT_KEYS,  # the next item's answer field, or its Yes button: whichever kind it is
    )


def _review_form(store, worker: C.WorkerInfo, item) -> None:
    st.text(item.question)
    st.caption(f"item {item.instance_id}")  # the id the message of a saved answer names: which item that was
    if item.kind != R.YNQ:
        st.text_input("Your answer", key=f"rv:{item.instance_id}")
    show_flash(ACTIONS)
    # the choices as buttons, each a whole decision: "can't tell" is named as the messages name it
    choices = ["yes", "no", "can't tell"] if item.kind == R.YNQ else [None, "can't tell"]
    for col, answer in zip(st.columns(len(choices)), choices, strict=True):
        label = "Save answer" if answer is None else answer[0].upper() + answer[1:]
        col.button(
            label,
            key=f"rv:{answer}:{item.instance_id}",
            shortcut=SHORTCUTS[answer or "save"],
            type="primary" if answer in (None, "yes") else "secondary",
            on_click=_save_review,
            args=(store, worker, item, answer),
        )


def label_page(store, worker: C.WorkerInfo, mode: str) -> None:
    st.header(f"Label model answers: {mode}")
    left = C.work.work_left(store, worker, mode)[mode].label
    st.caption(f"{left} model answer(s) left to label in {mode}.")
    item = C.work.next_response(store, worker, mode)
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
    show_flash(ACTIONS)
    # "no answer": the model's answer does not answer ("I cannot tell from this image."): neither of the others
    verdicts = ("correct", "hallucinated", "no answer")
    for col, verdict in zip(st.columns(len(verdicts)), verdicts, strict=True):
        col.button(
            verdict.capitalize(),
            key=f"lv:{verdict}:{item.response_id}",
            shortcut=SHORTCUTS[verdict],
            on_click=run_action,
            args=(
                lambda v=verdict: C.work.label_response(store, worker, item.response_id, v),
                "success",
                f"Verdict saved for the previous answer ({verdict}: {item.question}).",
                ACTIONS,
                NEXT_KEYS,
            ),
        )
