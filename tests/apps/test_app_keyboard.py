"""A worker's hour in the browser (issue 32): a whole item done by keyboard alone, every action landing on the new
item (its images and first field in view at 1280 x 800, the keyboard on that field), shortcuts shown on their
buttons, an empty queue that names the items other workers hold, items of a missing image held out of the queue
with the reason (and brought back by an admin), and texts that match their controls. `vhmine
curate` on 127.0.0.1, driven by Playwright through Debian's chromium (as tests/apps/test_app_browser.py)."""

from __future__ import annotations

import os
import re

import pytest
from curate_server import _serve
from helpers import CHROMIUM, write_pairs, write_photos

LAPTOP = {"width": 1280, "height": 800}
FIRST_SLOT = "[data-testid=stMain] [data-testid=stTextInput] input"


@pytest.fixture
def keyboard_server(tmp_path):
    """(url, db, tokens) over six photos: every mode has items; alice is an admin, bob a worker."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    db = f"sqlite:///{tmp_path / 'keys.db'}"
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "camera", "horse", "clock"))
    with open_store(db) as store:
        seed_pairs(store, write_pairs(tmp_path / "runs" / "k", photos), per_mode=3)
        tokens = {"alice": C.add_worker(store, "alice", admin=True), "bob": C.add_worker(store, "bob")}
    with _serve(tmp_path, db) as (url, _log):
        yield url, db, tokens


def _page(ctx):
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    return page


def _in_view(page, locator) -> bool:
    box = locator.bounding_box()
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= LAPTOP["height"] + 0.5


def _settled(page) -> None:
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()
    page.wait_for_function("[...document.images].every(i => i.complete)")
    page.wait_for_timeout(300)  # the landing script runs after the page is drawn
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()


def _landed_on_item(page) -> None:
    """The top of the item in view (both images, the first field) and the keyboard on the first field."""
    _settled(page)
    imgs = page.locator("[data-vh-row] img")
    assert imgs.count() == 2 and all(_in_view(page, imgs.nth(k)) for k in range(2))
    assert _in_view(page, page.locator(FIRST_SLOT).first)
    assert page.evaluate(f"document.activeElement === document.querySelector({FIRST_SLOT!r})")


def _item_id(page) -> str:
    text = page.get_by_text(re.compile(r"^item \S+; yours until")).inner_text()
    return text.split(";")[0]


@pytest.mark.slow
def test_an_item_by_keyboard_alone_and_every_action_lands_on_the_next(keyboard_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import open_store

    url, db, tokens = keyboard_server
    expect = sync_api.expect
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _page(ctx)
        try:
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(tokens["bob"])
            page.keyboard.press("Enter")  # the form's submit
            expect(page.get_by_text("Annotate: existence")).to_be_visible()
            _landed_on_item(page)
            # shortcuts shown on the buttons
            for label, keys in (
                ("Save", "Ctrl + Enter"),
                ("Skip", "Alt + K"),
                ("Discard", "Alt + D"),
                ("Next mode", "Alt + M"),
            ):
                button = page.get_by_role("button", name=re.compile(rf"^{label}\b"))
                assert keys in button.first.inner_text(), (label, button.first.inner_text())
            first = _item_id(page)
            # the item, keyboard only: type into the focused field, Tab on, Ctrl+Enter saves
            page.keyboard.type("on the table")
            page.keyboard.press("Tab")  # to the Question field, filled from the template
            expect(page.get_by_label("Question", exact=True)).to_have_value("What is on the table?")
            page.get_by_label("Reference answer(s) for image A, one per line", exact=True).focus()  # as Tab would
            page.keyboard.type("a cup")
            page.keyboard.press("Tab")
            page.keyboard.type("a spoon")  # the keyboard moved on to image B's answers
            page.keyboard.press("Control+Enter")  # Save, while the cursor is still in the field: its text counts
            expect(page.get_by_text("Saved 2 question(s); confirm 4 drafted yes/no question(s).")).to_be_visible()
            _settled(page)
            assert page.evaluate("document.activeElement.innerText").startswith("Confirm")  # the keyboard on Confirm
            page.keyboard.press("Control+Enter")
            expect(page.get_by_text("Confirmed 4 yes/no question(s).")).to_be_visible()
            _landed_on_item(page)
            assert _item_id(page) != first
            # Skip by its shortcut: the next item, landed on
            before = _item_id(page)
            page.keyboard.press("Alt+K")
            expect(page.get_by_text(f"Skipped {before[5:]}.")).to_be_visible()
            _landed_on_item(page)
            assert _item_id(page) != before
            # Next mode by its shortcut: landed on the next mode's item
            page.keyboard.press("Alt+M")
            expect(page.get_by_text("Annotate: shape")).to_be_visible()
            _landed_on_item(page)
        finally:
            ctx.close()
    with open_store(db) as store:
        got = sorted((r.question, r.answers, r.created_by) for r in C.ready_instances(store, "existence", "OEQ"))
        assert got == [("What is on the table?", ("a cup",), "bob"), ("What is on the table?", ("a spoon",), "bob")]
        assert len(C.ready_instances(store, "existence", "YNQ")) == 4
        assert C.people.chosen_mode(store, "bob") == "shape"


@pytest.mark.slow
def test_an_empty_queue_names_the_items_other_workers_hold(keyboard_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import open_store

    url, db, tokens = keyboard_server
    with open_store(db) as store:  # of counting's three items alice and dave hold one each, bob discards the third
        C.add_worker(store, "dave")
        held = {w: C.next_item(store, w, "counting", lease_s=3600) for w in ("alice", "dave")}
        last = C.next_item(store, "bob", "counting")
        C.discard(store, "bob", last.task_id, "no question fits")
        C.people.choose_mode(store, "bob", "counting")
    expect = sync_api.expect
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _page(ctx)
        try:
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(tokens["bob"])
            page.keyboard.press("Enter")
            expect(page.get_by_text("Signed in as")).to_be_visible()  # on a mode with work for him: not counting
            page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").click()
            page.get_by_role("option", name="counting", exact=True).click()
            expect(page.get_by_text("Annotate: counting")).to_be_visible()
            said = page.get_by_text(re.compile(r"^Nothing for you to annotate in counting now"))
            expect(said).to_be_visible()
            text = said.inner_text()
            assert "2 item(s) are with other workers" in text, text
            for who, item in held.items():
                assert f"{who} until {item.lease_until:%H:%M} UTC" in text, text
            assert "Nothing left to annotate" not in page.get_by_test_id("stMain").inner_text()
        finally:
            ctx.close()


@pytest.mark.slow
def test_review_and_label_decisions_are_buttons_named_as_the_page_names_them(keyboard_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import open_store

    url, db, tokens = keyboard_server
    with open_store(db) as store:
        item = C.next_item(store, "alice", "color")
        a, b = (v.id for v in item.images)
        C.save_annotation(
            store,
            "alice",
            item.task_id,
            C.Annotation("color.what_color", {"object": "cup"}, answers={a: "red", b: "blue"}),
        )
        C.confirm_drafts(
            store,
            "alice",
            [C.DraftDecision(d.instance_id, False) for d in C.pending_drafts(store, "alice")],
        )  # the open questions only
        C.people.choose_mode(store, "bob", "color")
    expect = sync_api.expect
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _page(ctx)
        try:
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(tokens["bob"])
            page.keyboard.press("Enter")
            expect(page.get_by_text("Annotate: color")).to_be_visible()
            page.get_by_test_id("stSidebar").get_by_text("Review", exact=True).click()
            expect(page.get_by_text("Review: color")).to_be_visible()
            _settled(page)
            save = page.get_by_role("button", name=re.compile(r"^Save answer"))
            save.click()  # nothing typed: the message names the control to use instead
            err = page.get_by_text(re.compile("answer the question, or choose"))
            expect(err).to_be_visible()
            named = re.search(r'choose "([^"]+)"', err.inner_text()).group(1)
            control = page.get_by_role("button", name=re.compile(rf"^{re.escape(named)}\b", re.IGNORECASE))
            expect(control).to_have_count(1)
            assert "Alt + T" in control.inner_text()
            control.click()
            expect(page.get_by_text(re.compile("^Answer “can't tell” saved for the previous item"))).to_be_visible()
        finally:
            ctx.close()
    with open_store(db) as store:
        from vhmine.store import Review

        with store.session(write=False) as s:
            assert [(r.worker, r.answer) for r in s.query(Review)] == [("bob", "can't tell")]


@pytest.mark.slow
def test_the_errata_form_is_empty_after_a_flag(keyboard_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import open_store

    url, db, tokens = keyboard_server
    with open_store(db) as store:
        item = C.next_item(store, "alice", "counting")
        a, b = (v.id for v in item.images)
        C.save_annotation(
            store,
            "alice",
            item.task_id,
            C.Annotation("counting.how_many", {"object": "cats"}, answers={a: "3", b: "2"}),
        )
        target = C.ready_instances(store, "counting", "OEQ")[0]
    expect = sync_api.expect
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _page(ctx)
        try:
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(tokens["bob"])
            page.keyboard.press("Enter")
            expect(page.get_by_text("Annotate: existence")).to_be_visible()
            page.get_by_test_id("stSidebar").get_by_text("Errata", exact=True).click()
            _settled(page)
            fields = {"Instance id": target.id, "What is wrong": "there are four cats", "Right answer (optional)": "4"}
            for label, value in fields.items():
                box = page.get_by_label(label, exact=True)
                box.fill(value)
                box.press("Tab")
                _settled(page)
            page.get_by_role("button", name=re.compile(r"^Flag as wrong")).click()
            expect(page.get_by_text(f"Flagged {target.id}: an admin will accept or reject the flag.")).to_be_visible()
            _settled(page)
            for label in fields:
                assert page.get_by_label(label, exact=True).input_value() == "", label
        finally:
            ctx.close()
    with open_store(db) as store:
        [flag] = C.decisions.errata_list(store, "bob")
        assert (flag.instance_id, flag.reason, flag.proposed) == (target.id, "there are four cats", "4")


@pytest.mark.slow
def test_held_items_leave_the_queue_and_an_admin_brings_them_back(keyboard_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import Image, Pair, Task, open_store

    url, db, tokens = keyboard_server
    with open_store(db) as store:
        C.people.choose_mode(store, "bob", "counting")
        with store.session(write=False) as s:
            first = s.query(Task).filter_by(mode="counting").order_by(Task.priority, Task.id).first()
            pair = s.get(Pair, first.pair_id)
            gone_id, gone = pair.image_a, s.get(Image, pair.image_a).path
    kept = open(gone, "rb").read()
    os.unlink(gone)
    expect = sync_api.expect
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _page(ctx)
        try:
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(tokens["bob"])
            page.keyboard.press("Enter")
            expect(page.get_by_text("Annotate: counting")).to_be_visible()
            _landed_on_item(page)  # the next good item, its images shown, no error beside them
            shown = page.get_by_text(re.compile(r"^item \S+; yours until")).inner_text().split(";")[0][5:]
            with open_store(db) as store:
                held = C.work.held_tasks(store, "counting")
            assert held and shown not in {h.task_id for h in held} and shown != first.id
            assert {h.reason for h in held} == {f"image missing: {gone_id}"}
            warning = page.get_by_text(re.compile(r"^\d+ item\(s\) held"))
            assert warning.inner_text().startswith(
                f"{len(held)} item(s) held: an image missing or changed (image missing: {len(held)})"
            )
            assert _in_view(page, warning)
            assert not page.get_by_text(re.compile("no longer matches|is recorded at .* which is missing")).count()
            # the admin: which items, why, and Check again once the file is back
            page.get_by_test_id("stSidebar").get_by_role("button", name=re.compile("^Sign out")).click()
            page.get_by_label("Token", exact=True).fill(tokens["alice"])
            page.keyboard.press("Enter")
            page.get_by_test_id("stSidebar").get_by_text("Admin", exact=True).click()
            _settled(page)
            with open_store(db) as store:  # alice's own Annotate page held her mode's item of that image too
                held = C.work.held_tasks(store)
            expect(page.get_by_text(f"Held: {len(held)} item(s) whose image is missing or changed")).to_be_visible()
            body = page.get_by_test_id("stMain").inner_text()
            assert all(h.task_id in body for h in held) and f"image missing: {gone_id}" in body
            with open(gone, "wb") as f:
                f.write(kept)
            page.get_by_role("button", name=re.compile("^Check again")).click()
            expect(page.get_by_text(f"{len(held)} item(s) back in their queues; 0 still held.")).to_be_visible()
            _settled(page)
            assert not page.get_by_text(re.compile(r"^Held: ")).count()
        finally:
            ctx.close()
    with open_store(db) as store:
        assert C.work.held_tasks(store) == [] and first.id not in {h.task_id for h in C.work.held_tasks(store)}
