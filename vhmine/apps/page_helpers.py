"""What the app's page modules share: Markdown-safe text, messages shown beside the button that caused them,
images (one, or a row of them at one height), and the layout that fits a laptop screen.

Reads image bytes only through vhmine.curate.image_bytes (files recorded in the store); writes only
Streamlit session state ("flash": the message of the last action and the place it belongs, which
`show_flash(place)` shows there in the next run). vhmine/apps/curate.py (the Streamlit script, which nothing
imports) uses these too.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import string
import time

import streamlit as st

from vhmine import curate as C
from vhmine.errors import VhmineError

_PUNCT = re.compile("([" + re.escape(string.punctuation) + "])")
_CODE = re.compile(r"`([^`\n]+)`")

ROW_HEIGHT = 260  # px: a pair's images at this height leave the form's first field on a 1280 x 800 screen
ACTIONS = "actions"  # the place of a page's action buttons (show_flash)


def esc(text: object) -> str:
    """Text for Markdown-rendering elements (errors, captions): every ASCII punctuation mark escaped, so
    worker-typed `**x**`, `<b>`, `:red[x]` or `$x$` show literally; a `command` in backticks (vhmine's
    messages name commands so) shows as code, its content literal, never as stray backticks."""
    out, last = [], 0
    text = str(text)
    for m in _CODE.finditer(text):
        out.append(_PUNCT.sub(r"\\\1", text[last : m.start()]))
        out.append(f"`{m.group(1)}`")  # inside a code span nothing is Markdown: no escaping needed
        last = m.end()
    out.append(_PUNCT.sub(r"\\\1", text[last:]))
    return "".join(out)


def fit_screen() -> None:
    """Less empty space above the page (Streamlit's default padding is 6rem) and tables that wrap rather
    than run off the right edge: what lets a page's form start on a 1280 x 800 screen."""
    st.html(
        "<style>"
        "[data-testid=stMainBlockContainer]{padding-top:2.2rem;padding-bottom:2rem}"
        "[data-testid=stMain] h2{padding-top:0.2rem;padding-bottom:0.4rem}"
        "[data-testid=stTable] table{table-layout:auto;width:100%}"
        "[data-testid=stTable] td,[data-testid=stTable] th{white-space:normal;overflow-wrap:anywhere}"
        "</style>"
    )


def flash(kind: str, msg: str, place: str = ACTIONS) -> None:
    """Say `msg` in the next run, at `place` (where the page calls show_flash with it: beside the button)."""
    st.session_state["flash"] = (kind, msg, place)


def show_flash(place: str = ACTIONS):
    """The pending message, if it belongs here, in a slot that is returned: the error of a button drawn next goes
    into the same slot (`note.error(...)`), above the button row where the eye is, not below it, where a row at the
    bottom of a laptop screen pushed it out of view."""
    note = st.empty()
    kind, msg, where = st.session_state.get("flash", (None, None, None))
    if kind and where == place:
        st.session_state.pop("flash")
        getattr(note, kind)(esc(msg))
    return note


def show_leftover_flash(box) -> None:
    """A message whose place the page did not draw this time (its item is gone): shown in `box`, at the top."""
    kind, msg, _ = st.session_state.pop("flash", (None, None, None))
    if kind:
        getattr(box, kind)(esc(msg))


def _stamp(store, image_id: str) -> tuple:
    """The recorded file's stamp (curate.stages.image_stamp); an image with none (a tar member, a URL) is checked again
    each minute."""
    stamp = C.stages.image_stamp(store, image_id)
    return stamp if stamp[2] is not None else stamp + (int(time.time() // 60),)


@st.cache_data(max_entries=32, show_spinner=False)  # whole files (photos of megabytes): a few
def _cached_bytes(_store, image_id: str, stamp: tuple) -> bytes:
    return C.image_bytes(_store, image_id)  # checked against its sha256: an error is never cached


def image_data(store, image_id: str) -> bytes:
    """The image's bytes, read and hashed once while its file stays as it is (not again on every rerun)."""
    return _cached_bytes(store, image_id, _stamp(store, image_id))


@st.cache_data(max_entries=512, show_spinner=False)
def _thumbnail(_store, image_id: str, height: int, stamp: tuple) -> tuple[str, float]:
    return _scaled_png(C.image_bytes(_store, image_id), height)


def image(store, image_id: str, caption: str) -> None:
    try:
        # "content": its own pixel width, shrunk to fit the column but never stretched (a 32 px image drawn
        # 940 px wide shows nothing a worker can judge); the caption apart, as st.image's own caption widens
        # a small image to the caption's width
        st.image(image_data(store, image_id), width="content")
        st.caption(esc(caption))
    except VhmineError as err:
        st.error(esc(err))


def _scaled_png(data: bytes, height: int) -> tuple[str, float]:
    """(data URL, width / height) of the image drawn `height` px high: scaled down, or up when it is smaller
    (twice the height, for sharp screens), so every image of a row has one common height."""
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    img = img.convert("RGB") if img.mode not in ("RGB", "L") else img
    ratio = img.width / max(img.height, 1)
    target = 2 * height
    resample = Image.Resampling.LANCZOS if img.height > target else Image.Resampling.BICUBIC
    img = img.resize((max(1, round(target * ratio)), target), resample)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=88)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii"), ratio


def image_row(store, views, height: int = ROW_HEIGHT) -> None:
    """The images of an item side by side at one height (at most `height` px): a portrait image stands beside
    a landscape one as tall as it, a small image is scaled up to that height, and the row shrinks as a whole
    (heights staying equal) when the page is narrower. `views`: (image id, caption) pairs."""
    cells = []
    for image_id, caption in views:
        try:  # encoded once per image (and file state): a rerun of the page only looks its file up
            url, ratio = _thumbnail(store, image_id, height, _stamp(store, image_id))
        except VhmineError as err:
            st.error(esc(err))
            continue
        # flex-grow by the aspect ratio and a common basis of 0: each image's width is share x row width, so
        # every height is row width / sum of ratios; max-width caps that height at `height`
        cells.append(
            (
                ratio,
                f'<figure style="flex:{ratio:.4f} 1 0;margin:0;min-width:0">'
                f'<img src="{url}" alt="{html.escape(caption)}" data-vh-image="{html.escape(image_id)}" '
                'style="width:100%;height:auto;display:block;border-radius:4px">'
                f'<figcaption style="font-size:0.85rem;opacity:0.7">{html.escape(caption)}</figcaption>'
                "</figure>",
            )
        )
    if not cells:
        return
    gap = 12
    width = sum(r for r, _ in cells) * height + gap * (len(cells) - 1)
    st.html(
        f'<div data-vh-row style="display:flex;gap:{gap}px;max-width:{width:.0f}px;align-items:flex-start">'
        + "".join(c for _, c in cells)
        + "</div>"
    )


# where the next keystroke belongs on any page: the item's first field, else its first decision button (never the
# image's Fullscreen button, which sits in a column block before them)
NEXT_KEYS = ", ".join(
    f"[data-testid=stMain] {x}"
    for x in ("[data-testid=stTextInput] input", "[data-testid=stTextArea] textarea", "[data-testid=stButton] button")
)


def land(target: str) -> None:
    """After an action: the page's next run shows its top and puts the keyboard on `target` (a CSS selector, e.g.
    the next item's first field), so that a worker goes on without scrolling or reaching for the mouse."""
    st.session_state["land"] = target


def show_landing() -> None:
    """Scroll to the top of the page and focus what `land` asked for (drawn last, once per action)."""
    target = st.session_state.pop("land", None)
    if target is None:
        return
    n = st.session_state["land_n"] = st.session_state.get("land_n", 0) + 1  # new text: the script runs again
    st.html(
        f"""<script>/* {n} */ (() => {{
  let tries = 0;
  const go = () => {{
    const el = document.querySelector({json.dumps(target)});
    if (!el && tries++ < 40) {{ setTimeout(go, 25); return; }}
    const top = document.querySelector('[data-testid=stMain] h2') || document.querySelector('[data-testid=stMain]');
    if (top) top.scrollIntoView({{block: 'start'}});
    if (el) el.focus({{preventScroll: true}});
    if (window.vhLanded) window.vhLanded(el);  // keys typed while the page ran go into it (apps/keyboard.py)
  }};
  go();
}})();</script>""",
        unsafe_allow_javascript=True,
    )


def run_action(fn, ok_kind: str, ok_msg, place: str = ACTIONS, target: str | None = None):
    """A button's on_click: run the library call `fn` before the page runs, so that the run the click starts shows
    its outcome (one run per action, where `act`'s st.rerun made two); its message (or error) shows at `place`, and
    the page lands on `target` (land) when it succeeded. Returns what `fn` returned (None after an error)."""
    st.session_state["acted"] = st.session_state.get("acted", 0) + 1  # the whole page must show it (whole_page)
    try:
        got = fn()
    except VhmineError as err:
        flash("error", str(err), place)
        return None
    flash(ok_kind, ok_msg(got) if callable(ok_msg) else ok_msg, place)
    if target:
        land(target)
    return got


def page_ran() -> None:
    """The whole page runs (called at its top): it shows every action so far."""
    st.session_state["shown_acted"] = st.session_state.get("acted", 0)


def whole_page() -> None:
    """At the top of a fragment: where an action acted in a run of the fragment alone (a shortcut pressed while
    typing in one of its fields sends the field and the click together, and Streamlit runs the fragment only),
    run the whole page, which shows its outcome."""
    if st.session_state.get("acted", 0) != st.session_state.get("shown_acted", 0):
        st.rerun(scope="app")


def act(fn, ok_kind: str, ok_msg, place: str = ACTIONS, note=None) -> None:
    """Run a library call; on success flash `ok_msg` (a str, or a function of the result) at `place` and rerun,
    else show the error in `note` (the slot show_flash returned, beside the button), or here without one."""
    try:
        got = fn()
    except VhmineError as err:
        (note or st).error(esc(err))
        return
    flash(ok_kind, ok_msg(got) if callable(ok_msg) else ok_msg, place)
    st.rerun()


def overrule_controls(
    store,
    me,
    flag,
    fid: str,
    *,
    key: str,
    why: str,
    reinstate_label: str,
    reinstate,
    reinstated: str,
    overrule,
    overruled: str,
) -> None:
    """Who overruled `flag` (a blind flag or a near-duplicate pair), when and why, with a button that
    reinstates it; else a reason box and an Overrule button. `fid`: its id; `reinstate(store, me, fid)` and
    `overrule(store, me, fid, reason)` are the library calls; `key` + re/why/ov + ":" + fid keys the widgets.
    The message of either shows beside them."""
    place = f"{key}:{fid}"
    if flag.overruled:
        st.caption(esc(f"overruled by {flag.overruled_by} at {flag.overruled_at:%Y-%m-%d %H:%M} UTC:"))
        st.text(flag.overrule_reason or "")
        note = show_flash(place)
        if st.button(reinstate_label, key=f"{key}re:{fid}"):
            act(lambda: reinstate(store, me, fid), "info", reinstated, place, note)
    else:
        reason = st.text_input(why, key=f"{key}why:{fid}")
        note = show_flash(place)
        if st.button("Overrule", key=f"{key}ov:{fid}"):
            act(lambda: overrule(store, me, fid, reason), "success", overruled, place, note)


def table(rows: list[dict]) -> None:
    """A small table that fits the page (cells wrap) and shows an empty cell as "-", never "None". st.table
    renders its cells as Markdown, so text (a worker's question, a lone "-") is escaped to show literally."""
    empty = {k for r in rows for k, v in r.items() if v is None or v == ""}

    def cell(k, v):
        if k in empty:  # a column with an empty cell becomes text throughout: one type per column
            v = "-" if v is None or v == "" else str(v)
        return esc(v) if isinstance(v, str) else v

    st.table([{k: cell(k, v) for k, v in r.items()} for r in rows], hide_index=True)
