"""The app's "Blind flags" page: questions a text-only model answered right without their image (`vhmine blind`),
and the near duplicates `vhmine export` found (vhmine.export.neardup).

A worker sees each flag of the mode (the question, the model and prompt that raised it, its blind answer
and the reference on each image) and overrules it with a reason when the question needs its image after
all, or reinstates an overruled flag. Below, every near-duplicate pair (of all modes) side by side with
both cosines and the encoders and thresholds that found it, overruled or reinstated the same way. Reads
and writes only through vhmine.curate (flag_list, overrule_blind_flag, reinstate_blind_flag,
near_duplicate_list, overrule_near_duplicate, reinstate_near_duplicate, image_bytes).
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine.apps.page_helpers import esc, overrule_controls
from vhmine.errors import VhmineError


def blind_page(store, me: C.WorkerInfo, mode: str) -> None:
    st.header(f"Blind flags: {mode}")
    st.caption(
        "A text-only model answered these right on every image without seeing it; "
        "`vhmine export --drop-blind` leaves them out unless overruled."
    )
    try:
        flags = C.work.flag_list(store, me, mode=mode)
    except VhmineError as err:
        st.error(esc(err))
        return
    if not flags:
        st.info(f"No blind flags in {mode}.")
    for f in flags:
        with st.container(border=True):
            st.caption(esc(f"flag {f.flag_id}: {f.kind} by {f.model} ({f.prompt}; scored by {f.scorer})"))
            st.text(f.question)
            st.dataframe(
                [
                    {
                        "instance": it.instance_id,
                        "image": it.image_id,
                        "reference": "; ".join(it.references),
                        "blind answer": it.blind_answer,
                    }
                    for it in f.items
                ],
                hide_index=True,
                key=f"bf:{f.flag_id}",
            )
            overrule_controls(
                store,
                me,
                f,
                f.flag_id,
                key="b",
                why="Why it needs its image",
                reinstate_label="Reinstate the flag",
                reinstate=C.work.reinstate_blind_flag,
                reinstated=f"Flag {f.flag_id} counts again.",
                overrule=C.work.overrule_blind_flag,
                overruled=f"Overruled flag {f.flag_id}: export keeps its questions.",
            )
    near_dup_section(store, me)


def _show_image(store, d, side: str) -> None:
    """One image of a pair: the store's (by id), or the index's file recorded by the export."""
    try:
        if side == "a" or d.b_index is None:
            st.image(C.image_bytes(store, d.a_image if side == "a" else d.b_image), width=220)
        elif d.b_path:
            st.image(d.b_path, width=220)
    except (VhmineError, OSError) as err:
        st.caption(esc(f"(image unreadable: {err})"))
    st.caption(esc(d.a_image if side == "a" else (f"index {d.b_index}: " if d.b_index else "") + d.b_image))


def near_dup_section(store, me: C.WorkerInfo) -> None:
    st.subheader("Near duplicates")
    st.caption(
        "Pairs `vhmine export` found alike by CLIP and DINOv2; overrule one when it is no problem "
        "(the next export lists it as overruled, with your reason)."
    )
    try:
        dups = C.work.near_duplicate_list(store, me)
    except VhmineError as err:
        st.error(esc(err))
        return
    if not dups:
        st.info("No near duplicates recorded (run `vhmine export`).")
        return
    for d in dups:
        with st.container(border=True):
            th = d.thresholds
            st.caption(
                esc(
                    f"pair {d.id} ({d.scope}): CLIP {d.clip:.4f}, DINOv2 {d.dino:.4f}"
                    f"{', same bytes' if d.exact else ''}; CLIP {d.encoders.get('clip', {}).get('spec')} >= "
                    f"{th.get('clip')}, DINOv2 {d.encoders.get('dino', {}).get('spec')} >= {th.get('dino')}"
                )
            )
            left, right = st.columns(2)
            with left:
                _show_image(store, d, "a")
            with right:
                _show_image(store, d, "b")
            overrule_controls(
                store,
                me,
                d,
                d.id,
                key="nd",
                why="Why it is no problem",
                reinstate_label="Reinstate",
                reinstate=C.work.reinstate_near_duplicate,
                reinstated=f"Pair {d.id} counts again.",
                overrule=C.work.overrule_near_duplicate,
                overruled=f"Overruled pair {d.id}: the next export lists it as overruled.",
            )
