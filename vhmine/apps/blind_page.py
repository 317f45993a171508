"""The app's "Blind flags" page: questions a text-only model answered right without their image (`vhmine blind`).

A worker sees each flag of the mode (the question, the model and prompt that raised it, its blind answer
and the reference on each image) and overrules it with a reason when the question needs its image after
all, or reinstates an overruled flag. Reads and writes only through vhmine.curate (flag_list,
overrule_blind_flag, reinstate_blind_flag).
"""

from __future__ import annotations

import streamlit as st

from vhmine import curate as C
from vhmine.apps.page_helpers import act, esc
from vhmine.errors import VhmineError


def blind_page(store, me: C.WorkerInfo, mode: str) -> None:
    st.header(f"Blind flags: {mode}")
    st.caption("A text-only model answered these right on every image without seeing it; "
               "`vhmine export --drop-blind` leaves them out unless overruled.")
    try:
        flags = C.flag_list(store, me, mode=mode)
    except VhmineError as err:
        st.error(esc(err))
        return
    if not flags:
        st.info(f"No blind flags in {mode}.")
        return
    for f in flags:
        with st.container(border=True):
            st.caption(esc(f"flag {f.flag_id}: {f.kind} by {f.model} ({f.prompt}; scored by {f.scorer})"))
            st.text(f.question)
            st.dataframe([{"instance": it.instance_id, "image": it.image_id, "reference": "; ".join(it.references),
                           "blind answer": it.blind_answer} for it in f.items], hide_index=True, key=f"bf:{f.flag_id}")
            if f.overruled:
                st.caption(esc(f"overruled by {f.overruled_by} at {f.overruled_at:%Y-%m-%d %H:%M} UTC:"))
                st.text(f.overrule_reason or "")
                if st.button("Reinstate the flag", key=f"bre:{f.flag_id}"):
                    act(lambda f=f: C.reinstate_blind_flag(store, me, f.flag_id), "info", f"Flag {f.flag_id} counts again.")
            else:
                reason = st.text_input("Why it needs its image", key=f"bwhy:{f.flag_id}")
                if st.button("Overrule", key=f"bov:{f.flag_id}"):
                    act(lambda f=f, r=reason: C.overrule_blind_flag(store, me, f.flag_id, r), "success",
                        f"Overruled flag {f.flag_id}: export keeps its questions.")
