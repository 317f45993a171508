"""The curation app in a real browser: `vhmine curate` (streamlit run) on 127.0.0.1, driven by
Playwright through Debian's chromium. Signs in, annotates one item, checks the store and saves a
screenshot under test-artifacts/."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from curate_server import _serve
from helpers import CHROMIUM, annotate_color, write_pairs, write_photos

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SAVE = re.compile(r"^Save( |$)")  # the button's name: its label, then its keyboard shortcut


@pytest.fixture
def app_server(tmp_path):
    """(url, db url, tokens) of `vhmine curate` serving a seeded store."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    db = f"sqlite:///{tmp_path / 'browser.db'}"
    with open_store(db) as store:
        seed_pairs(
            store,
            write_pairs(tmp_path / "runs" / "b", write_photos(tmp_path / "photos", ("coffee", "rocket"))),
            per_mode=1,
        )
        token = C.add_worker(store, "alice")
    with _serve(tmp_path, db) as (url, log):
        yield url, db, token, log


@pytest.mark.slow
def test_sign_in_and_annotate_in_chromium(app_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import open_store

    url, db, token, log = app_server
    ARTIFACTS.mkdir(exist_ok=True)
    expect = sync_api.expect
    with chromium.new_context(viewport={"width": 1400, "height": 1400}) as ctx:
        try:
            page = ctx.new_page()
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(token)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_text("Signed in as")).to_be_visible(timeout=60_000)
            expect(page.get_by_text("Annotate: existence")).to_be_visible(timeout=30_000)
            slot = page.get_by_label("{where}", exact=True)
            slot.fill("on the table")
            slot.press("Tab")
            expect(page.get_by_label("Question", exact=True)).to_have_value("What is on the table?", timeout=30_000)
            for role, answer in (("A", "a cup of coffee"), ("B", "a spoon")):
                area = page.get_by_label(f"Reference answer(s) for image {role}, one per line", exact=True)
                area.fill(answer)
                area.press("Tab")
            page.get_by_role("button", name=SAVE).click()
            expect(page.get_by_text("Saved 2 question(s); confirm 4 drafted yes/no question(s).")).to_be_visible(
                timeout=60_000
            )
            expect(page.get_by_role("button", name="Confirm")).to_be_visible(timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "curate_browser.png"), full_page=True)
            html = page.content()
        finally:
            ctx.close()
    assert token not in html and token not in log.read_text()
    with open_store(db) as store:
        got = sorted((r.question, r.answers) for r in C.ready_instances(store, "existence"))
        assert got == [("What is on the table?", ("a cup of coffee",)), ("What is on the table?", ("a spoon",))]
        assert {r.created_by for r in C.ready_instances(store)} == {"alice"}
        assert len(C.pending_drafts(store, "alice")) == 4
    assert (ARTIFACTS / "curate_browser.png").stat().st_size > 10_000


@pytest.mark.slow
def test_rotated_token_signs_the_browser_out_at_its_next_click(app_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import Action, open_store

    url, db, token, log = app_server
    expect = sync_api.expect
    with chromium.new_context(viewport={"width": 1400, "height": 1400}) as ctx:
        try:
            page = ctx.new_page()
            page.set_default_timeout(60_000)  # a loaded machine reruns slowly; widgets wait disabled meanwhile
            idle = page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]')
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(token)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_text("Annotate: existence")).to_be_visible(timeout=60_000)
            idle.wait_for(timeout=60_000)
            for role, answer in (("A", "a cup of coffee"), ("B", "a spoon")):
                area = page.get_by_label(f"Reference answer(s) for image {role}, one per line", exact=True)
                area.fill(answer)
                area.press("Tab")
            slot = page.get_by_label("{where}", exact=True)
            slot.fill("on the table")
            slot.press("Tab")
            # the filled question shows only once the last rerun has passed the sign-in check; then wait for
            # it to end, so that the token changes between two clicks and the Save click is the next action
            expect(page.get_by_label("Question", exact=True)).to_have_value("What is on the table?", timeout=60_000)
            idle.wait_for(timeout=60_000)
            with open_store(db) as store:  # the admin rotates alice's token while her browser is signed in
                new = C.people.rotate_token(store, "alice")
            page.get_by_role("button", name=SAVE).click()
            expect(page.get_by_text("You were signed out: the sign-in of 'alice' is no longer valid")).to_be_visible(
                timeout=60_000
            )
            expect(page.get_by_label("Token", exact=True)).to_be_visible()
            expect(page.get_by_text("Signed in as")).to_have_count(0)
            page.get_by_label("Token", exact=True).fill(token)  # the old token no longer signs in ...
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_text("unknown or inactive token")).to_be_visible(timeout=60_000)
            page.get_by_label("Token", exact=True).fill(new)  # ... the new one does
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_text("Signed in as")).to_be_visible(timeout=60_000)
            expect(page.get_by_label("Token", exact=True)).to_have_count(0, timeout=60_000)
            idle.wait_for(timeout=60_000)
            html = page.content()
        finally:
            ctx.close()
    assert token not in html and new not in html and new not in log.read_text()
    with open_store(db) as store:
        assert C.ready_instances(store) == [] and C.pending_drafts(store, "alice") == []  # the click saved nothing
        with store.session() as s:
            assert s.query(Action).count() == 0


def _write_sized(folder: Path, name: str, width: int) -> Path:
    """A sample photo resized to `width` px wide (aspect kept), saved as <name>.png."""
    import numpy as np
    import skimage.data
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    img = Image.fromarray(np.asarray(getattr(skimage.data, name)()))
    img = img.resize((width, round(img.height * width / img.width)))
    img.save(folder / f"{name}.png")
    return folder / f"{name}.png"


@pytest.fixture
def layout_server(tmp_path):
    """(url, token) of `vhmine curate` over one pair: a 32 px wide image and a 1280 px wide one; bob has
    annotated the existence item and a model answered both of its questions."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    photos = [_write_sized(tmp_path / "photos", "coffee", 32), _write_sized(tmp_path / "photos", "rocket", 1280)]
    db = f"sqlite:///{tmp_path / 'layout.db'}"
    with open_store(db) as store:
        seed_pairs(store, write_pairs(tmp_path / "runs" / "l", photos), per_mode=1)
        token = C.add_worker(store, "alice")
        C.add_worker(store, "bob")
        item = C.next_item(store, "bob", "existence")
        a, b = (v.id for v in item.images)
        C.save_annotation(
            store,
            "bob",
            item.task_id,
            C.Annotation(
                "existence.what_is", {"where": "on the table"}, answers={a: "a cup of coffee", b: "a launch pad"}
            ),
        )
        for inst in C.ready_instances(store, "existence"):
            C.work.add_response(
                store, inst.id, "m", inst.question, f"Model says: a red bicycle ({inst.answers[0]} truly)"
            )
    with _serve(tmp_path, db) as (url, _log):
        yield url, token


def _inside(inner, outer) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["y"] >= outer["y"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


@pytest.mark.slow
def test_layout_at_1400x1000(layout_server, tmp_path, chromium):
    """Images at natural size (never stretched), the whole progress table inside the sidebar, and on
    "Label answers" the question and the model's answer on screen without scrolling."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    url, token = layout_server
    ARTIFACTS.mkdir(exist_ok=True)
    expect = sync_api.expect
    viewport = {"x": 0, "y": 0, "width": 1400, "height": 1000}
    with chromium.new_context(viewport={"width": 1400, "height": 1000}) as ctx:
        try:
            page = ctx.new_page()
            page.set_default_timeout(60_000)
            idle = page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]')
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(token)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_text("Signed in as")).to_be_visible()
            idle.wait_for()
            page.screenshot(path=str(ARTIFACTS / "curate_annotate.png"))

            # every header inside the sidebar and inside the table's own frame, which clips (scrolls) what overflows
            sidebar = page.get_by_test_id("stSidebarContent").bounding_box()
            frame = page.get_by_test_id("stSidebar").get_by_test_id("stTable")
            headers = frame.locator("thead th").all()
            boxes = {h.inner_text().strip(): h.bounding_box() for h in headers}
            assert [n for n in boxes if n] == ["mode", "done", "left", "ready"], boxes
            for name, box in boxes.items():
                assert _inside(box, sidebar) and _inside(box, frame.bounding_box()), (name, boxes, frame.bounding_box())
            assert frame.evaluate("f => [f, ...f.querySelectorAll('*')].every(e => e.scrollWidth <= e.clientWidth + 1)")

            page.get_by_test_id("stSidebar").get_by_text("Label answers", exact=True).click()
            natural_widths = set()
            for n in (1, 2):
                expect(page.get_by_text("Label model answers: existence")).to_be_visible()
                idle.wait_for()
                page.wait_for_function(
                    "[...document.querySelectorAll('[data-testid=stMain] img')].every(i => i.complete)"
                )
                page.screenshot(path=str(ARTIFACTS / f"curate_label_{n}.png"))
                img = page.get_by_test_id("stMain").locator("img")
                expect(img).to_have_count(1)
                natural = img.evaluate("i => i.naturalWidth")
                natural_widths.add(natural)
                box = img.bounding_box()
                assert box["width"] <= natural + 0.5, (box, natural)  # never stretched beyond its pixels
                assert _inside(box, page.get_by_test_id("stMain").bounding_box())
                for text in ("What is on the table?", "Model says: a red bicycle"):
                    shown = (
                        page.get_by_test_id("stMain").get_by_test_id("stText").filter(has_text=text)
                    )  # not the message
                    assert _inside(shown.bounding_box(), viewport), text  # no scrolling needed
                assert page.evaluate("window.scrollY") == 0
                page.get_by_role("button", name=re.compile(r"^Hallucinated")).click()  # the decision, saved
                expect(page.get_by_text("Verdict saved for the previous answer (hallucinated: ")).to_be_visible()
            assert natural_widths == {32, 1280}
            expect(page.get_by_text("No model answers to label in existence.")).to_be_visible()
        finally:
            ctx.close()


@pytest.mark.slow
def test_verify_a_draft_and_flag_an_item_in_chromium(app_server, tmp_path, chromium):
    """The verify queue and the errata flag: alice accepts a model's draft of the existence pair, then flags one
    of the questions it made, by the id an export writes, as wrong."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    import json as _json

    from vhmine import curate as C
    from vhmine.rules.draft_check import parse_draft
    from vhmine.store import Draft, Erratum, Pair, Task, open_store

    url, db, token, log = app_server
    with open_store(db) as store:
        with store.session(write=False) as s:
            t = s.query(Task).filter_by(mode="existence").one()
            p = s.get(Pair, t.pair_id)
        raw = _json.dumps(
            {
                "template": "existence.what_is",
                "slots": {"where": "on the table"},
                "answer_a": "a cup",
                "answer_b": "a spoon",
            }
        )
        did = C.work.record_draft(
            store,
            t.id,
            model="fake-vlm",
            endpoint=None,
            prompt="draft@v1#test",
            raw=raw,
            content=parse_draft(raw, "existence", [p.image_a, p.image_b]),
        )
    expect = sync_api.expect
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium.new_context(viewport={"width": 1400, "height": 1600}) as ctx:
        try:
            page = ctx.new_page()
            page.set_default_timeout(60_000)
            idle = page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]')
            page.goto(url, timeout=60_000)
            page.get_by_label("Token", exact=True).fill(token)
            page.get_by_role("button", name="Sign in").click()
            # the existence pair's only work is the model's draft: sign-in opens on Verify drafts
            expect(page.get_by_text("Verify drafts: existence")).to_be_visible(timeout=60_000)
            expect(page.get_by_label("Question", exact=True)).to_have_value("What is on the table?")
            expect(page.get_by_label("Answer(s) for image B, one per line", exact=True)).to_have_value("a spoon")
            idle.wait_for()
            page.get_by_role("button", name="Accept as drafted").click()
            expect(page.get_by_text("Accepted the draft: 6 question(s) ready.")).to_be_visible(timeout=60_000)
            expect(page.get_by_text("No drafts to verify in existence.")).to_be_visible()
            with open_store(db) as store:
                target = next(r for r in C.ready_instances(store, "existence", "OEQ") if r.answers == ("a spoon",))
            idle.wait_for()
            page.get_by_text("Errata", exact=True).click()
            expect(page.get_by_role("heading", name="Errata")).to_be_visible(timeout=60_000)
            box = page.get_by_label("Instance id", exact=True)
            box.fill(target.id)
            box.press("Tab")
            expect(page.get_by_text("a spoon", exact=True)).to_be_visible(timeout=60_000)  # the item shown to check
            why = page.get_by_label("What is wrong", exact=True)
            why.fill("it is a fork, not a spoon")
            why.press("Tab")
            idle.wait_for()
            page.get_by_role("button", name="Flag as wrong").click()
            expect(page.get_by_text(f"Flagged {target.id}: an admin will accept or reject the flag.")).to_be_visible(
                timeout=60_000
            )
            page.screenshot(path=str(ARTIFACTS / "verify_errata_browser.png"), full_page=True)
            html = page.content()
        finally:
            ctx.close()
    assert token not in html and token not in log.read_text()
    with open_store(db) as store:
        with store.session(write=False) as s:
            assert (s.get(Draft, did).status, s.get(Draft, did).decided_by) == ("accepted", "alice")
            [flag] = s.query(Erratum).all()
            assert (flag.instance_id, flag.flagged_by, flag.reason, flag.status) == (
                target.id,
                "alice",
                "it is a fork, not a spoon",
                "open",
            )


# --- a laptop screen: 1280 x 800 ----------------------------------------------------------------------------

LAPTOP = {"width": 1280, "height": 800}


@pytest.fixture
def laptop_server(tmp_path):
    """(url, db, tokens) of `vhmine curate` over one pair: a portrait photo at full size (rocket, 427 x 640) and
    a landscape one 48 px wide; bob annotated the color item (ready for alice to review, a model answered it),
    and a model drafted the counting item (for alice to verify). alice is an admin."""
    from vhmine import curate as C
    from vhmine.rules.draft_check import parse_draft
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    rocket = write_photos(tmp_path / "big", ("rocket",))[0]
    import skimage.data
    from PIL import Image

    Image.fromarray(skimage.data.rocket()).transpose(Image.Transpose.ROTATE_90).save(rocket)  # 427 x 640: portrait
    photos = [rocket, _write_sized(tmp_path / "photos", "coffee", 48)]
    db = f"sqlite:///{tmp_path / 'laptop.db'}"
    with open_store(db) as store:
        seed_pairs(store, write_pairs(tmp_path / "runs" / "l", photos), per_mode=1)
        tokens = {"alice": C.add_worker(store, "alice", admin=True), "bob": C.add_worker(store, "bob")}
        annotate_color(store, "bob")
        C.add_worker(store, "carol")
        for k, inst in enumerate(C.ready_instances(store, "color")):
            C.work.add_response(store, inst.id, "m", inst.question, "Model says: green")
            right = inst.answers[0] if inst.kind == "OEQ" else ("yes" if inst.truth else "no")
            C.work.save_review(store, "carol", inst.id, right if k else "purple")  # carol agrees on all but one
        task = C.next_item(store, "bob", "counting")
        C.skip(store, "bob", task.task_id)
        ids = [v.id for v in task.images]
        raw = '{"template": "counting.how_many", "slots": {"object": "rockets"}, "answer_a": "1", "answer_b": "0"}'
        C.work.record_draft(
            store,
            task.task_id,
            model="fake-vlm",
            endpoint=None,
            prompt="draft@v1#test",
            raw=raw,
            content=parse_draft(raw, "counting", ids),
        )
    with _serve(tmp_path, db) as (url, _log):
        yield url, db, tokens


def _in_view(box, viewport=None) -> bool:
    v = viewport or {"x": 0, "y": 0, **LAPTOP}
    return box is not None and _inside(box, v)


@pytest.mark.slow
def test_every_page_fits_a_laptop_screen(laptop_server, tmp_path, chromium):
    """At 1280 x 800: the first field of the annotate, review and verify forms on screen without scrolling, a
    pair's images side by side at one height (the 48 px one scaled up), messages beside their button (the error
    of Save with an empty slot on screen, just above the button row: it was below the row, off the screen's
    bottom edge; a saved review answer's message naming the item it was saved for, as it shows above the next
    item's button), Sign out in view in the sidebar, the review queue's count, the mode kept across sign-ins,
    and admin charts and tables that fit. A screenshot of every page, and after each of those actions, is saved
    under the test's tmp folder (and test-artifacts/)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (scripts/ci_services.sh)")
    from vhmine import curate as C
    from vhmine.store import open_store

    url, db, tokens = laptop_server
    shots = tmp_path / "screenshots"
    shots.mkdir()
    ARTIFACTS.mkdir(exist_ok=True)
    expect = sync_api.expect
    with chromium.new_context(viewport=LAPTOP) as ctx:
        try:
            page = ctx.new_page()
            page.set_default_timeout(60_000)
            idle = page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]')
            sidebar = page.get_by_test_id("stSidebar")

            def shot(name: str) -> None:
                idle.wait_for()
                page.wait_for_function("[...document.querySelectorAll('img')].every(i => i.complete)")
                page.screenshot(path=str(shots / f"{name}.png"))
                shutil.copy(shots / f"{name}.png", ARTIFACTS / f"laptop_{name}.png")

            def goto(name: str) -> None:
                sidebar.get_by_text(name, exact=True).click()
                idle.wait_for()

            def choose_mode(mode: str) -> None:
                sidebar.get_by_test_id("stSelectbox").click()
                page.get_by_role("option", name=mode, exact=True).click()
                idle.wait_for()

            def sign_in(token: str) -> None:
                page.get_by_label("Token", exact=True).fill(token)
                page.get_by_role("button", name="Sign in").click()
                expect(page.get_by_text("Signed in as")).to_be_visible()
                idle.wait_for()

            page.goto(url, timeout=60_000)
            shot("sign_in")
            sign_in(tokens["alice"])
            assert _in_view(sidebar.get_by_role("button", name="Sign out").bounding_box())  # no scrolling the sidebar

            # Annotate: the images in one row at one height, the form's first field on screen
            expect(page.get_by_text("Annotate: existence")).to_be_visible()
            shot("annotate")
            imgs = page.locator("[data-vh-row] img")
            expect(imgs).to_have_count(2)
            a, b = (imgs.nth(k).bounding_box() for k in (0, 1))
            assert abs(a["height"] - b["height"]) <= 1 and a["height"] <= 261, (a, b)  # one height, capped
            assert abs(a["y"] - b["y"]) <= 1 and b["x"] >= a["x"] + a["width"], (a, b)  # side by side
            portrait, landscape = sorted((a, b), key=lambda x: x["width"] / x["height"])
            assert portrait["height"] > portrait["width"] and landscape["width"] > landscape["height"]  # side by side
            assert landscape["width"] > 48 * 2  # the 48 px photo scaled up to the row's height
            assert _in_view(page.get_by_test_id("stSelectbox").filter(has_text="Template").bounding_box())
            slot = page.get_by_label("{where}", exact=True)
            assert _in_view(slot.bounding_box())
            assert slot.get_attribute("placeholder") == "e.g. on the table, in the centre of the picture"
            page.get_by_role("button", name=SAVE).click()  # the {where} slot still empty
            err = page.get_by_text("slot {where} of template existence.what_is is empty: fill it in")
            expect(err).to_be_visible()
            shot("annotate_save_error")
            e, save = err.bounding_box(), page.get_by_role("button", name=SAVE).bounding_box()
            assert _in_view(e), e  # on screen as it is after the click (at y 800 of 800 before)
            assert abs(save["y"] - (e["y"] + e["height"])) < 80, (e, save)  # just above the button row
            slot.fill("in the centre of the picture")
            slot.press("Tab")
            expect(page.get_by_label("Question", exact=True)).to_have_value("What is in the centre of the picture?")
            for role, answer in (("A", "a rocket"), ("B", "a cup of coffee")):
                area = page.get_by_label(f"Reference answer(s) for image {role}, one per line", exact=True)
                area.fill(answer)
                area.press("Tab")
            idle.wait_for()
            page.get_by_role("button", name=SAVE).click()
            msg = page.get_by_text("Saved 2 question(s); confirm 4 drafted yes/no question(s).")
            expect(msg).to_be_visible()
            idle.wait_for()
            confirm = page.get_by_role("button", name="Confirm").bounding_box()
            m = msg.bounding_box()
            assert _in_view(m) and _in_view(confirm) and abs(confirm["y"] - (m["y"] + m["height"])) < 80, (m, confirm)
            shot("annotate_drafts")

            # Undo, in the sidebar: its message there too
            sidebar.get_by_role("button", name="Undo last action").click()
            undone = page.get_by_text("Undone:", exact=False)
            expect(undone).to_be_visible()
            assert _inside(undone.bounding_box(), sidebar.bounding_box())
            assert "`" not in page.get_by_test_id("stMain").inner_text()

            # Review: how many are left, the first field on screen
            choose_mode("color")
            goto("Review")
            expect(page.get_by_text("Review: color")).to_be_visible()
            expect(page.get_by_text("6 item(s) left to review in color.", exact=False)).to_be_visible()
            # the form drawn (a yes/no question's buttons or an open one's field) before asking which it is
            yes_button = page.get_by_role("button", name=re.compile(r"^Yes\b"))
            expect(yes_button.or_(page.get_by_label("Your answer", exact=True)).first).to_be_visible()
            yes_no = yes_button.count() > 0
            first_control = (
                page.get_by_role("button", name=re.compile(r"^Yes\b"))
                if yes_no
                else page.get_by_label("Your answer", exact=True)
            )
            assert _in_view(first_control.first.bounding_box())
            shot("review")
            main = page.get_by_test_id("stMain")
            question = main.get_by_test_id("stText").first.inner_text()
            item_id = main.get_by_text(re.compile(r"^item [0-9a-f]+$"))  # the caption under the question
            first = item_id.inner_text()
            if yes_no:  # a yes/no question: the answer is one button
                answer = "yes"
                page.get_by_role("button", name=re.compile(r"^Yes\b")).click()
            else:
                answer = "red"
                box = page.get_by_label("Your answer", exact=True)
                box.fill(answer)
                box.press("Tab")
                idle.wait_for()
                page.get_by_role("button", name=re.compile(r"^Save answer")).click()
            said = page.get_by_text(f"Answer “{answer}” saved for the previous item ", exact=False)
            expect(said).to_be_visible()
            shot("review_saved")
            assert said.inner_text() == f"Answer “{answer}” saved for the previous {first} ({question}).", (
                said.inner_text()
            )
            assert _in_view(said.bounding_box())
            now = item_id.inner_text()
            assert now.startswith("item ") and now != first, (
                now,
                first,
            )  # the next item, which the message does not name
            goto("Label answers")
            expect(page.get_by_text("Label model answers: color")).to_be_visible()
            shot("label")

            # Verify drafts: both images at one height, the first field on screen
            choose_mode("counting")
            goto("Verify drafts")
            expect(page.get_by_text("Verify drafts: counting")).to_be_visible()
            expect(page.get_by_label("Question", exact=True)).to_have_value(
                "How many rockets are there in the picture?"
            )
            assert _in_view(page.get_by_label("Question", exact=True).bounding_box())
            shot("verify")
            for name in ("Errata", "Blind flags"):
                goto(name)
                shot(name.lower().replace(" ", "_"))

            # Admin, a section at a time: charts, tables that fit the page, "-" for empty cells
            goto("Admin")
            progress = page.get_by_test_id("stMain").get_by_role("heading", name="Progress", exact=True)
            expect(progress).to_be_visible(timeout=60_000)  # the page's own (the sidebar has one too)
            # tasks and ready questions per mode
            expect(page.get_by_test_id("stVegaLiteChart")).to_have_count(2, timeout=60_000)
            charts, cells, n_tables = 0, [], 0
            for section in ("Progress and worker time", "Agreement", "Workers", "Drafts: time saved"):
                page.get_by_test_id("stMain").get_by_text(section, exact=True).first.click()
                idle.wait_for()
                name = section.split(":")[0].split(" and ")[0].lower().replace(" ", "_")
                shot(f"admin_{name}")  # the first screen; then the whole section (the main area scrolls)
                page.set_viewport_size({"width": 1280, "height": 2600})
                idle.wait_for()
                page.screenshot(path=str(shots / f"admin_{name}_whole.png"))
                shutil.copy(shots / f"admin_{name}_whole.png", ARTIFACTS / f"laptop_admin_{name}_whole.png")
                page.set_viewport_size(LAPTOP)
                idle.wait_for()
                main = page.get_by_test_id("stMain")
                charts += page.get_by_test_id("stVegaLiteChart").count()
                tables = main.get_by_test_id("stTable")
                n_tables += tables.count()
                for k in range(tables.count()):
                    t = tables.nth(k)
                    assert t.evaluate(
                        "t => [t, ...t.querySelectorAll('*')].every(e => e.scrollWidth <= e.clientWidth + 1)"
                    ), k
                    box, frame = t.bounding_box(), main.bounding_box()  # stMain scrolls: compare left and right edges
                    assert box["x"] >= frame["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"] + 0.5, (
                        k,
                        box,
                    )
                cells += main.locator("[data-testid=stTable] td").all_inner_texts()
            assert charts == 3 and n_tables >= 5  # tasks and ready per mode; kappa per mode
            assert "None" not in cells and "-" in cells

            # the mode chosen (counting) is alice's again at her next sign-in, in a new session (a new tab: its own
            # Streamlit session state), and bob's is his own
            sidebar.get_by_role("button", name="Sign out").click()
            expect(page.get_by_label("Token", exact=True)).to_be_visible()
            page = ctx.new_page()
            page.set_default_timeout(60_000)
            idle = page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]')
            page.goto(url, timeout=60_000)
            sign_in(tokens["alice"])
            with open_store(db) as store:  # her choice is kept; she opens on it if it still has work for her
                assert C.people.chosen_mode(store, "alice") == "counting"
                opening = C.people.opening_mode(store, "alice")
            expect(page.get_by_test_id("stMain").locator("h2").first).to_contain_text(f": {opening}")
            shot("signed_in_again")
            page.get_by_test_id("stSidebar").get_by_role("button", name="Sign out").click()
            expect(page.get_by_label("Token", exact=True)).to_be_visible()
            sign_in(tokens["bob"])
            with open_store(db) as store:  # bob never chose: the first mode with work for him
                assert C.people.chosen_mode(store, "bob") is None
                opening = C.people.opening_mode(store, "bob")
            expect(page.get_by_test_id("stMain").locator("h2").first).to_contain_text(f": {opening}")
        finally:
            ctx.close()
    assert {p.name for p in shots.iterdir()} >= {
        "sign_in.png",
        "annotate.png",
        "annotate_save_error.png",
        "annotate_drafts.png",
        "review.png",
        "review_saved.png",
        "label.png",
        "verify.png",
        "errata.png",
        "blind_flags.png",
        "admin_progress.png",
    }
