"""The worker's hand (issue 42): a shortcut pressed while typing takes the text being typed, keys typed before the
page is ready are kept in the field they were meant for (or refused on screen), focus lands where the next keystroke
belongs after every action (Review's answer field, the item after Undo), and a reload keeps the worker signed in
(a signed, expiring cookie: never the token, never in the URL). `vhmine curate` on 127.0.0.1 in Debian's chromium
through Playwright, as tests/apps/test_app_keyboard.py."""

from __future__ import annotations

import json
import re

import pytest
from curate_server import _serve
from helpers import annotate_color, write_pairs, write_photos

LAPTOP = {"width": 1280, "height": 800}
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
FIRST_SLOT = "[data-testid=stMain] [data-testid=stTextInput] input"


@pytest.fixture
def hand_server(tmp_path):
    """(url, db, tokens) over six photos, every mode with items: bob annotated a color item (its questions ready for
    alice to review: open and yes/no), and a model drafted an existence item (for alice to verify). alice is an
    admin, bob a worker."""
    from vhmine import curate as C
    from vhmine.rules.draft_check import parse_draft
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    db = f"sqlite:///{tmp_path / 'hand.db'}"
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "camera", "horse", "clock"))
    with open_store(db) as store:
        seed_pairs(store, write_pairs(tmp_path / "runs" / "h", photos), per_mode=3)
        tokens = {"alice": C.add_worker(store, "alice", admin=True), "bob": C.add_worker(store, "bob")}
        annotate_color(store, "bob")
        raw = json.dumps(
            {
                "template": "existence.what_is",
                "slots": {"where": "on the table"},
                "answer_a": "a cup",
                "answer_b": "a spoon",
            }
        )
        for _ in range(2):  # two existence items drafted by a model, for alice to verify
            task = C.next_item(store, "bob", "existence")
            C.skip(store, "bob", task.task_id)
            content = parse_draft(raw, "existence", [v.id for v in task.images])
            C.work.record_draft(
                store, task.task_id, model="fake-vlm", endpoint=None, prompt="draft@v1#test", raw=raw, content=content
            )
        tokens["carol"] = C.add_worker(store, "carol")
        C.people.choose_mode(store, "carol", "color")  # carol reviews bob's color questions
        tokens["dave"] = C.add_worker(store, "dave")
        C.people.choose_mode(store, "dave", "shape")  # three items nobody touched
    with _serve(tmp_path, db) as (url, _log):
        yield url, db, tokens


def _settled(page) -> None:
    page.locator(IDLE).wait_for()
    page.wait_for_timeout(400)  # the landing script runs after the page is drawn
    page.locator(IDLE).wait_for()


def _sign_in(page, url: str, token: str) -> None:
    page.goto(url, timeout=60_000)
    page.get_by_label("Token", exact=True).fill(token)
    page.keyboard.press("Enter")
    page.get_by_text("Signed in as").wait_for()
    _settled(page)


def _goto(page, name: str) -> None:
    page.get_by_text(name, exact=True).click()
    _settled(page)


def _focused(page, selector: str) -> bool:
    return page.evaluate(f"document.activeElement === document.querySelector({selector!r})")


def _open(chromium):
    ctx = chromium.new_context(viewport=LAPTOP)
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    return ctx, page


@pytest.mark.slow
def test_a_shortcut_pressed_in_a_field_takes_what_was_typed(hand_server, chromium):
    """Alt+D with a discard reason still in its field discards with that reason; on Verify drafts, Alt+E with an
    answer still being edited saves the edit, and Alt+J with a reject reason still being typed rejects with it."""
    from vhmine import curate as C
    from vhmine.store import Action, Draft, open_store

    url, db, tokens = hand_server
    ctx, page = _open(chromium)
    with ctx:
        _sign_in(page, url, tokens["alice"])
        _goto(page, "Annotate")
        first = page.get_by_text(re.compile(r"^item \S+; yours until")).inner_text().split(";")[0][5:]
        page.get_by_label("Discard reason", exact=True).click()
        page.keyboard.type("both images show the same thing")
        page.keyboard.press("Alt+D")  # the cursor still in the field
        page.get_by_text(f"Discarded {first}.").wait_for()
        _settled(page)
        _goto(page, "Verify drafts")
        page.get_by_text("Verify drafts: existence").wait_for()
        field = page.get_by_label("Answer(s) for image B, one per line", exact=True)
        field.click()
        field.press("End")
        page.keyboard.press("Enter")
        page.keyboard.type("a fork")  # a second answer for image B
        page.keyboard.press("Alt+E")  # Save my edit, still in the field
        page.get_by_text(re.compile(r"^Saved \((edited|no change: accepted)\)")).wait_for()
        _settled(page)
        page.get_by_label("Reject reason", exact=True).click()
        page.keyboard.type("image B shows no table")
        page.keyboard.press("Alt+J")  # Reject, still in the field
        page.get_by_text(re.compile(r"^Rejected the draft of")).wait_for()
        _settled(page)
    with open_store(db) as store:
        with store.session(write=False) as s:
            discard = s.query(Action).filter_by(worker="alice", kind="discard").one()
            assert (discard.payload or {}).get("reason") == "both images show the same thing", discard.payload
            drafts = {d.status: d.reason for d in s.query(Draft).filter_by(mode="existence")}
            assert drafts == {"edited": None, "rejected": "image B shows no table"}, drafts  # not "accepted"
        answers = sorted(a for r in C.ready_instances(store, "existence", "OEQ") for a in r.answers)
        assert "a fork" in answers, answers


@pytest.mark.slow
def test_keys_typed_before_the_page_is_ready_go_where_they_were_meant(hand_server, chromium):
    """Typed at once after Sign in, and at once after a shortcut, the keys end in the next item's first field, whole
    and in order; typed after an action that lands nowhere (a refused discard), they are refused on screen."""
    url, _db, tokens = hand_server
    ctx, page = _open(chromium)
    with ctx:
        page.goto(url, timeout=60_000)
        page.get_by_label("Token", exact=True).fill(tokens["dave"])
        page.keyboard.press("Enter")
        page.keyboard.type("on the table", delay=80)  # about a second: the page is still being drawn
        _settled(page)
        assert page.locator(FIRST_SLOT).first.input_value() == "on the table"
        assert _focused(page, FIRST_SLOT)
        page.keyboard.press("Alt+K")  # Skip, the cursor in the field
        page.keyboard.type("under the bed", delay=80)
        page.get_by_text(re.compile(r"^Skipped ")).wait_for()
        _settled(page)
        assert page.locator(FIRST_SLOT).first.input_value() == "under the bed"
        page.get_by_label("Discard reason", exact=True).click()
        page.keyboard.press("Alt+D")  # no reason: refused, the page lands nowhere
        page.keyboard.type("xyz", delay=80)
        page.get_by_text("Not typed anywhere").wait_for()
        assert '"xyz"' in page.get_by_text("Not typed anywhere").inner_text()
        assert page.locator(FIRST_SLOT).first.input_value() == "under the bed"


@pytest.mark.slow
def test_focus_lands_where_the_next_keystroke_belongs(hand_server, chromium):
    """Review: after every answer the keyboard is on the next item's answer field (an open question) or its Yes
    button (a yes/no one), never on the image's Fullscreen button. Undo: the keyboard goes back to the item."""
    from vhmine import curate as C
    from vhmine.store import open_store

    url, db, tokens = hand_server
    yes = "[data-testid=stMain] [data-testid=stButton] button"
    ctx, page = _open(chromium)
    with ctx:
        _sign_in(page, url, tokens["carol"])
        _goto(page, "Review")
        page.get_by_text("Review: color").wait_for()
        kinds = []
        for _ in range(4):
            open_question = page.locator(FIRST_SLOT).count() > 0
            kinds.append("OEQ" if open_question else "YNQ")
            if open_question:
                page.locator(FIRST_SLOT).first.click()
                page.keyboard.type("red")
                page.keyboard.press("Control+Enter")
            else:
                page.keyboard.press("Alt+Y")
            page.get_by_text(re.compile(r"^Answer .* saved for the previous item")).wait_for()
            _settled(page)
            if page.locator(FIRST_SLOT).count():
                assert _focused(page, FIRST_SLOT), page.evaluate("document.activeElement.outerHTML.slice(0, 200)")
            else:
                assert _focused(page, yes), page.evaluate("document.activeElement.outerHTML.slice(0, 200)")
        assert "YNQ" in kinds
        page.get_by_role("button", name="Undo last action").click()
        page.get_by_text(re.compile(r"^Undone: ")).wait_for()
        _settled(page)
        assert page.evaluate("!!document.activeElement.closest('[data-testid=stMain]')"), page.evaluate(
            "document.activeElement.outerHTML.slice(0, 200)"
        )
    with open_store(db) as store:
        # six questions, four answered, one undone: three left (the undo acted, not just moved the keyboard)
        assert C.work.reviews_left(store, "carol", "color") == 3


@pytest.mark.slow
def test_a_reload_keeps_the_worker_signed_in_until_sign_out(hand_server, chromium):
    """F5 keeps bob signed in, on his page; the cookie that does it holds no token and the URL none either; after
    Sign out a reload asks for the token again."""
    url, _db, tokens = hand_server
    ctx, page = _open(chromium)
    with ctx:
        _sign_in(page, url, tokens["bob"])
        page.reload()
        page.get_by_text("Signed in as").wait_for()
        assert "bob" in page.get_by_text("Signed in as").inner_text()
        cookies = ctx.cookies()
        assert cookies and all(tokens["bob"] not in c["value"] for c in cookies)
        assert tokens["bob"] not in page.url and "token" not in page.url.lower()
        page.get_by_role("button", name="Sign out").click()
        page.get_by_label("Token", exact=True).wait_for()
        page.wait_for_timeout(500)
        page.reload()
        page.get_by_label("Token", exact=True).wait_for()
        _settled(page)
        assert page.get_by_text("Signed in as").count() == 0
