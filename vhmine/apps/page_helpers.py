"""What the app's page modules share: Markdown-safe text, the flash message shown after a rerun, images.

Reads image bytes only through vhmine.curate.image_bytes (files recorded in the store); writes only
Streamlit session state ("flash", which vhmine/apps/curate.py shows at the top of the next run).
Mirrors the helpers of vhmine/apps/curate.py, which cannot be imported (it is the Streamlit script).
"""

from __future__ import annotations

import re
import string

import streamlit as st

from vhmine import curate as C
from vhmine.errors import VhmineError

_PUNCT = re.compile("([" + re.escape(string.punctuation) + "])")


def esc(text: object) -> str:
    """Text for Markdown-rendering elements: every ASCII punctuation mark escaped, so typed text shows literally."""
    return _PUNCT.sub(r"\\\1", str(text))


def flash(kind: str, msg: str) -> None:
    st.session_state["flash"] = (kind, msg)


def image(store, image_id: str, caption: str) -> None:
    try:
        st.image(C.image_bytes(store, image_id), caption=caption, width="stretch")
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
