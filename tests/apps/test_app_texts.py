"""Texts and figures of the curation app in the browser (issue 32): a model's answer that does not answer gets its
own label, "No answer", with its shortcut shown (the page offered only Correct / Hallucinated); an admin's decision
on the person-queue names the question by its text (it named the id); the admin overview shows worker time per
mode (worker-seconds per ready question, the time left to the export's target), as curate.worker_time computes it.
`vhmine curate` on 127.0.0.1, driven by Playwright through Debian's chromium (as tests/apps/test_app_browser.py)."""

from __future__ import annotations

import re

import pytest
from curate_server import _serve

LAPTOP = {"width": 1280, "height": 800}
NO_ANSWER = "I cannot tell from this image."


@pytest.fixture
def texts_server(tmp_path):
    """(url, store, tokens, facts) over helpers.make_ready_store: bob (a worker) and carol (an admin); a model's
    answer that does not answer, on a ready open question; the person-queue holding "Is the cup red?" (its truth
    flipped by an erratum, then its open answers changed)."""
    from helpers import make_ready_store

    from vhmine import curate as C

    store = make_ready_store(tmp_path)
    tokens = {"bob": C.add_worker(store, "bob"), "carol": C.add_worker(store, "carol", admin=True)}
    recs = C.ready_instances(store, "color")
    cup_a = next(r for r in recs if r.kind == "OEQ" and r.answers[0] == "red")
    red_a = next(r for r in recs if r.question == "Is the cup red?" and r.image_id == cup_a.image_id)
    for iid, fix in ((red_a.id, dict(truth=False)), (cup_a.id, dict(answers=["red", "crimson"]))):
        C.decisions.accept_erratum(store, "carol", C.decisions.flag_instance(store, "bob", iid, "wrong"), **fix)
    oeq = next(r for r in C.ready_instances(store, "counting") if r.kind == "OEQ")
    rid = C.work.add_response(store, oeq.id, "m", oeq.question, NO_ANSWER)
    C.people.choose_mode(store, "bob", "counting")
    with _serve(tmp_path, f"sqlite:///{tmp_path / 'store.db'}") as (url, _log):
        yield url, store, tokens, {"response": rid, "queued": red_a}
    store.close()


def _signed_in(ctx, url, token):
    sync_api = pytest.importorskip("playwright.sync_api")
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    page.goto(url, timeout=60_000)
    page.get_by_label("Token", exact=True).fill(token)
    page.keyboard.press("Enter")
    sync_api.expect(page.get_by_text("Signed in as")).to_be_visible()
    return page


def _idle(page) -> None:
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()


@pytest.mark.slow
def test_an_answer_that_does_not_answer_is_labelled_so_by_its_shortcut(texts_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    from vhmine import curate as C

    url, store, tokens, facts = texts_server
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _signed_in(ctx, url, tokens["bob"])
        try:
            page.get_by_test_id("stSidebar").get_by_text("Label answers", exact=True).click()
            sync_api.expect(page.get_by_text(NO_ANSWER)).to_be_visible()
            _idle(page)
            button = page.get_by_role("button", name=re.compile(r"^No answer\b"))
            sync_api.expect(button).to_have_count(1)
            assert "Alt + 3" in button.inner_text(), button.inner_text()
            page.keyboard.press("Alt+3")
            said = "Verdict saved for the previous answer (no answer: How many cats are there in the picture?)."
            sync_api.expect(page.get_by_text(said)).to_be_visible()
        finally:
            ctx.close()
    assert C.work.response_verdicts(store, [facts["response"]])[facts["response"]].verdict == "no answer"


@pytest.mark.slow
def test_a_decision_on_the_person_queue_names_the_question_by_its_text(texts_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    from vhmine import curate as C

    url, store, tokens, facts = texts_server
    queued = facts["queued"]
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _signed_in(ctx, url, tokens["carol"])
        try:
            page.get_by_test_id("stSidebar").get_by_text("Errata", exact=True).click()
            sync_api.expect(page.get_by_text("Answers changed since a person decided (1)")).to_be_visible()
            _idle(page)
            page.get_by_role("button", name="Decide").click()
            sync_api.expect(page.get_by_text("Decided “Is the cup red?”: truth no.")).to_be_visible()
            assert queued.id not in page.get_by_test_id("stMain").inner_text()  # the id, which says nothing to people
        finally:
            ctx.close()
    assert C.decisions.contradictions(store) == [] and C.get_instance(store, queued.id).truth is False


@pytest.mark.slow
def test_the_admin_overview_shows_worker_time_per_mode_and_the_hours_left(texts_server, tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api")
    from vhmine import curate as C

    url, store, tokens, _ = texts_server
    want = {m.mode: m.row() for m in C.people.worker_time(store, 150)}
    assert want["color"]["worker time"] is not None and want["all"]["target"] == 150 * 8
    with chromium.new_context(viewport=LAPTOP) as ctx:
        page = _signed_in(ctx, url, tokens["carol"])
        try:
            page.get_by_test_id("stSidebar").get_by_text("Admin", exact=True).click()
            heading = page.get_by_role("heading", name="Worker time", exact=True)
            sync_api.expect(heading).to_be_visible(timeout=60_000)
            _idle(page)
            table = page.get_by_role("table").filter(has_text="s/ready instance")
            sync_api.expect(table).to_have_count(1)
            head = [c.inner_text().strip() for c in table.get_by_role("columnheader").all()]
            assert head == ["mode", "ready", "target", "worker time", "s/ready instance", "time left"], head
            rows = {}
            for row in table.get_by_role("row").all()[1:]:
                cells = [c.inner_text().strip() for c in row.get_by_role("cell").all()]
                rows[cells[0]] = cells
        finally:
            ctx.close()
    for mode in ("color", "counting", "all"):
        shown, w = rows[mode], want[mode]
        assert [int(shown[1]), int(shown[2])] == [w["ready"], w["target"]], (mode, shown, w)
        for cell, key in zip(shown[3:], ("worker time", "s/ready instance", "time left"), strict=True):
            assert cell == ("-" if w[key] is None else w[key]), (mode, cell, w)  # "2 h 15 min", "18.9" (issue 42)
