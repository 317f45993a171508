"""The app's "Blind flags" page: questions a text-only model answered right without their image (`vhmine blind`),
and the near duplicates `vhmine export` found (vhmine.export.neardup).

A worker sees each flag of the mode (the question, the model and prompt that raised it, its blind answer
and the reference on each image) and overrules it with a reason when the question needs its image after
all, or reinstates an overruled flag. Below, the near-duplicate pairs (of all modes) side by side with
both cosines and the encoders and thresholds that found it, overruled or reinstated the same way. Both lists
come a page at a time (PAGE, with Previous and Next, how many there are said above): a page whose every pair
drew its two images took 4 s with 63 pairs. Reads and writes only through vhmine.curate (flag_count,
flag_list, overrule_blind_flag, reinstate_blind_flag, near_duplicate_count, near_duplicate_list,
overrule_near_duplicate, reinstate_near_duplicate, image_bytes through page_helpers.image_data); writes the
page shown of each list to the session state.
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine.apps.page_helpers import esc, image_data, overrule_controls
from vhmine.errors import VhmineError

PAGE = 10  # flags, or pairs, drawn at once


def _page_shown(key: str, total: int) -> int:
    """The page of a list shown now (0 first), kept in the session under `key`; within the list as it is now."""
    last = max(0, (total - 1) // PAGE)
    page = min(st.session_state.get(key, 0), last)
    st.session_state[key] = page
    return page


def _turn(key: str, step: int) -> None:
    st.session_state[key] = st.session_state.get(key, 0) + step


def _count(what: str, total: int, overruled: int, page: int) -> None:
    """How many there are, which of them this page shows, and how many were overruled."""
    shown = f"{page * PAGE + 1}-{min(total, (page + 1) * PAGE)} shown" if total > PAGE else "all shown"
    st.caption(f"{total} {what} ({overruled} overruled); {shown}.")


def _pager(key: str, total: int, page: int) -> None:
    """Previous and Next, below the page's flags or pairs, where a worker who looked through them is."""
    if total <= PAGE:
        return
    back, on, where = st.columns([1, 1, 4], vertical_alignment="center")
    back.button("Previous", key=f"{key}:prev", disabled=page == 0, on_click=_turn, args=(key, -1))
    on.button("Next", key=f"{key}:next", disabled=(page + 1) * PAGE >= total, on_click=_turn, args=(key, 1))
    where.caption(f"page {page + 1} of {(total - 1) // PAGE + 1}")


def blind_page(store, me: C.WorkerInfo, mode: str) -> None:
    st.header(f"Blind flags: {mode}")
    st.caption(
        "A text-only model answered these right on every image without seeing it; "
        "`vhmine export --drop-blind` leaves them out unless overruled."
    )
    key = f"bf_page:{mode}"
    try:
        total, overruled = C.work.flag_count(store, me, mode=mode)
        page = _page_shown(key, total)
        flags = C.work.flag_list(store, me, mode=mode, offset=page * PAGE, limit=PAGE)
    except VhmineError as err:
        st.error(esc(err))
        return
    if not flags:
        st.info(f"No blind flags in {mode}.")
    else:
        _count(f"blind flag(s) in {mode}", total, overruled, page)
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
    _pager(key, total, page)
    near_dup_section(store, me)


def _show_image(store, d, side: str) -> None:
    """One image of a pair: the store's (by id), or the index's file recorded by the export."""
    try:
        if side == "a" or d.b_index is None:
            st.image(image_data(store, d.a_image if side == "a" else d.b_image), width=220)  # read once
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
    key = "nd_page"
    try:
        total, overruled = C.work.near_duplicate_count(store, me)
        page = _page_shown(key, total)
        dups = C.work.near_duplicate_list(store, me, offset=page * PAGE, limit=PAGE)
    except VhmineError as err:
        st.error(esc(err))
        return
    if not dups:
        st.info("No near duplicates recorded (run `vhmine export`).")
        return
    _count("near-duplicate pair(s)", total, overruled, page)
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
    _pager(key, total, page)
