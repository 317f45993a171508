"""The curation app: workers sign in, annotate the per-mode queues, review blind, label model answers.

Run it with `vhmine curate` (which sets VHMINE_DB). Reads and writes only through vhmine.curate and
vhmine.store: no SQL and no file paths here; images come from `curate.image_bytes`, which serves only
files recorded in the store (a pair's images drawn in one row at one height by page_helpers.image_row). Text
that workers typed is shown with st.text or escaped in tables, never as Markdown or HTML; a message appears
beside the button that caused it (page_helpers.flash / show_flash). The mode menu remembers each worker's
choice in the store (curate.people.choose_mode). Tokens are typed into a password field and never shown or logged.
The session holds the signed-in `C.WorkerInfo` (name, token generation), never the token; every page run re-checks it
(`C.people.check_session`) and every library call checks it again, so a rotated token or a deactivated worker
is signed out at the next click, and admin data comes only from calls the library lets an admin make.
"""

from __future__ import annotations

import json
import os

import streamlit as st

from vhmine import curate as C
from vhmine import rules as R
from vhmine.apps.admin_page import admin_page
from vhmine.apps.annotate_page import FIRST_FIELD, annotate_page
from vhmine.apps.blind_page import blind_page
from vhmine.apps.errata_page import errata_page
from vhmine.apps.keyboard import keep_keys
from vhmine.apps.page_helpers import (
    NEXT_KEYS,
    esc,
    fit_screen,
    land,
    page_ran,
    run_action,
    show_flash,
    show_landing,
    show_leftover_flash,
)
from vhmine.apps.review_pages import label_page, review_page
from vhmine.apps.verify_page import verify_page
from vhmine.errors import VhmineError
from vhmine.store import open_store, resolve_url

st.set_page_config(page_title="vhmine curate", layout="wide")

NEXT_MODE = "Alt+M"
TICKET_COOKIE = "vhmine_session"


@st.cache_resource
def _store(url: str):
    return open_store(url, create=False)


def sign_in_page(store) -> None:
    st.title("vhmine curation")
    note = st.empty()
    with st.form("signin"):
        st.text_input("Token", type="password", key="token", help="Printed once by `vhmine workers add NAME`.")
        st.form_submit_button("Sign in", on_click=_sign_in, args=(store,))
    why = st.session_state.pop("signin_error", None) or st.session_state.get("signed_out")
    if why:  # the token refused, or why the last session ended (token rotated, worker deactivated)
        note.error(esc(why))


def _sign_in(store) -> None:
    """Sign in's on_click: the run the click starts is already the signed-in page (one run, not two)."""
    st.session_state.pop("signed_out", None)
    try:
        w = C.sign_in(store, st.session_state.get("token") or "")
    except VhmineError as err:
        st.session_state["signin_error"] = str(err)
        return
    finally:
        st.session_state.pop("token", None)  # never kept in the session
    _signed_in(store, w, C.people.session_ticket(store, w))


def _signed_in(store, w: C.WorkerInfo, ticket: str | None) -> None:
    """The session holds `w` from now on, on the mode they chose (in any browser) if it has work for them, else the
    first that has, and on the first page with work there. A new `ticket` goes into the tab's
    cookie and keeps them signed in when the page is reloaded, until it expires (curate.people.session_ticket: no
    token, never in the URL); a reload keeps the ticket it came with, so reloading never prolongs a session."""
    st.session_state["worker"] = w
    left = C.people.opening_work(store, w)  # theirs, unless another mode has work and it has none
    st.session_state["mode"] = left.mode
    # the first page with something to do there (a mode with only answers to review opens on Review)
    pages = (("Annotate", left.annotate), ("Verify drafts", left.verify), ("Review", left.review))
    st.session_state["page"] = next((p for p, n in (*pages, ("Label answers", left.label)) if n), "Annotate")
    if ticket is not None:
        st.session_state["ticket"] = ticket
    st.session_state.pop("forget_ticket", None)
    land(FIRST_FIELD)


def _sign_out() -> None:
    st.session_state.pop("worker", None)
    st.session_state["forget_ticket"] = True  # and this tab's cookie is cleared (keep_ticket), never read again


def _resume(store) -> None:
    """A reloaded page (a new Streamlit session): sign in again from the tab's ticket cookie, if it is still good."""
    ticket = st.context.cookies.get(TICKET_COOKIE)
    if not isinstance(ticket, str) or not ticket or st.session_state.get("forget_ticket"):
        return
    try:
        _signed_in(store, C.people.resume_session(store, ticket), None)
    except VhmineError as err:
        st.session_state["forget_ticket"] = True
        st.session_state["signed_out"] = f"You were signed out: {err}"


def keep_ticket() -> None:
    """Write the session's new ticket into the tab's cookie, or clear it after Sign out (a script: Streamlit reads
    cookies but does not set them)."""
    ticket = st.session_state.pop("ticket", None)
    if ticket is not None:
        age = C.people.TICKET_S
    elif st.session_state.get("forget_ticket"):  # drawn each run while signed out: clearing twice is harmless
        ticket, age = "", 0
    else:
        return
    cookie = f"{TICKET_COOKIE}={ticket}; Path=/; Max-Age={age}; SameSite=Strict"
    st.html(
        f"<script>document.cookie = {json.dumps(cookie)} + (location.protocol === 'https:' ? '; Secure' : '');"
        "</script>",
        unsafe_allow_javascript=True,
    )


def sidebar(store, me: C.WorkerInfo) -> tuple[str, str]:
    with st.sidebar:
        who, out = st.columns([3, 2], vertical_alignment="center")  # Sign out at the top: in view on a laptop
        who.write(f"Signed in as **{esc(me.name)}**" + (" (admin)" if me.is_admin else ""))
        out.button("Sign out", key="signout", on_click=_sign_out)
        pages = ["Annotate", "Review", "Label answers", "Verify drafts", "Errata", "Blind flags"] + (
            ["Admin"] if me.is_admin else []
        )
        if st.session_state.get("page") not in (None, *pages):  # an admin page after the right was taken away
            st.session_state.pop("page")
        page = st.radio("Page", pages, key="page")
        mode = st.selectbox("Mode", R.mode_names(), key="mode", on_change=_remember_mode, args=(store, me))
        st.button("Next mode", key="next_mode", shortcut=NEXT_MODE, on_click=_next_mode, args=(store, me))
        st.button(
            "Undo last action",
            key="undo",
            on_click=run_action,
            # the keyboard goes back to the page's item (the one undone, if it came back), not the Undo button
            args=(lambda: C.undo_last(store, me), "info", lambda what: "Undone: " + what, "sidebar", NEXT_KEYS),
        )
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
        C.people.choose_mode(store, me, st.session_state["mode"])
    except VhmineError:  # signed out meanwhile: the page run that follows says so
        pass
    land(FIRST_FIELD)


def _next_mode(store, me: C.WorkerInfo) -> None:
    """Next mode's on_click: the mode after this one (the first after the last)."""
    names = R.mode_names()
    now = st.session_state.get("mode")
    st.session_state["mode"] = names[(names.index(now) + 1) % len(names)] if now in names else names[0]
    _remember_mode(store, me)


def main() -> None:
    keep_keys()  # first of all: the sign-in page's Enter already starts a run whose keys must be kept
    url = os.environ.get("VHMINE_DB")
    try:
        store = _store(resolve_url(url))
    except VhmineError as err:
        st.error(esc(err))
        return
    if "worker" in st.session_state:
        try:  # every run: a rotated token or a deactivation signs the browser out before any click acts
            st.session_state["worker"] = C.people.check_session(store, st.session_state["worker"])
        except VhmineError as err:
            st.session_state.pop("worker")
            st.session_state.pop("flash", None)  # what a click said meanwhile (refused too) is not the next one's
            st.session_state["signed_out"] = f"You were signed out: {err}"
            st.session_state["forget_ticket"] = True
    if "worker" not in st.session_state:
        _resume(store)
    keep_ticket()
    if "worker" not in st.session_state:
        sign_in_page(store)
        return
    me = st.session_state["worker"]  # a C.WorkerInfo: every call below re-checks it in the store
    page_ran()
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
    show_landing()


main()
