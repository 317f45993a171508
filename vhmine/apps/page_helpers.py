"""What the app's page modules share: Markdown-safe text, the flash message shown after a rerun, images.

Reads image bytes only through vhmine.curate.image_bytes (files recorded in the store); writes only
Streamlit session state ("flash", which `show_flash` shows at the top of the next run). vhmine/apps/curate.py
(the Streamlit script, which nothing imports) uses these too.
"""

from __future__ import annotations

import re
import string

import streamlit as st

from vhmine import curate as C
from vhmine.errors import VhmineError

_PUNCT = re.compile("([" + re.escape(string.punctuation) + "])")


def esc(text: object) -> str:
    """Text for Markdown-rendering elements (errors, captions): every ASCII punctuation mark escaped,
    so worker-typed `**x**`, `<b>`, `:red[x]` or `$x$` show literally."""
    return _PUNCT.sub(r"\\\1", str(text))


def flash(kind: str, msg: str) -> None:
    st.session_state["flash"] = (kind, msg)


def show_flash() -> None:
    kind, msg = st.session_state.pop("flash", (None, None))
    if kind:
        getattr(st, kind)(esc(msg))


def image(store, image_id: str, caption: str) -> None:
    try:
        # "content": its own pixel width, shrunk to fit the column but never stretched (a 32 px image drawn
        # 940 px wide shows nothing a worker can judge); the caption apart, as st.image's own caption widens
        # a small image to the caption's width
        st.image(C.image_bytes(store, image_id), width="content")
        st.caption(esc(caption))
    except VhmineError as err:
        st.error(esc(err))


def act(fn, ok_kind: str, ok_msg) -> None:
    """Run a library call; on success flash `ok_msg` (a str, or a function of the result) and rerun, else show the error."""
    try:
        got = fn()
    except VhmineError as err:
        st.error(esc(err))
        return
    flash(ok_kind, ok_msg(got) if callable(ok_msg) else ok_msg)
    st.rerun()


def overrule_controls(store, me, flag, fid: str, *, key: str, why: str, reinstate_label: str, reinstate, reinstated: str,
                      overrule, overruled: str) -> None:
    """Who overruled `flag` (a blind flag or a near-duplicate pair), when and why, with a button that
    reinstates it; else a reason box and an Overrule button. `fid`: its id; `reinstate(store, me, fid)` and
    `overrule(store, me, fid, reason)` are the library calls; `key` + re/why/ov + ":" + fid keys the widgets."""
    if flag.overruled:
        st.caption(esc(f"overruled by {flag.overruled_by} at {flag.overruled_at:%Y-%m-%d %H:%M} UTC:"))
        st.text(flag.overrule_reason or "")
        if st.button(reinstate_label, key=f"{key}re:{fid}"):
            act(lambda: reinstate(store, me, fid), "info", reinstated)
    else:
        reason = st.text_input(why, key=f"{key}why:{fid}")
        if st.button("Overrule", key=f"{key}ov:{fid}"):
            act(lambda: overrule(store, me, fid, reason), "success", overruled)
