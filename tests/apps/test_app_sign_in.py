"""The app's sign-in (vhmine/apps/curate.py through Streamlit's AppTest): a rotated or deactivated worker is signed out
at the next click and saves or undoes nothing; the admin page needs the admin right in the store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import SIGNED_OUT, counting_annotation, logged_actions, seed_store

from vhmine import curate as C

APP = str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py")


@pytest.fixture
def env(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    store, tokens = seed_store(tmp_path / "app.db", tmp_path)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'app.db'}")
    yield store, tokens
    store.close()


def _signed_in(token, page=None, mode="counting"):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    if page:
        at.sidebar.radio(key="page").set_value(page).run()
    at.sidebar.selectbox(key="mode").select(mode).run()
    assert not at.exception, at.exception
    return at


def _plain(markdown: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def _by_label(widgets, label):
    [w] = [w for w in widgets if w.label == label]
    return w


@pytest.mark.slow
@pytest.mark.parametrize("how", ["rotate", "deactivate"])
def test_app_signs_a_worker_out_at_the_next_click_and_saves_nothing(env, how):
    store, tokens = env
    at = _signed_in(tokens["alice"])
    _by_label(at.text_input, "{object}").input("cats").run()
    _by_label(at.text_area, "Reference answer(s) for image A, one per line").input("3")
    _by_label(at.text_area, "Reference answer(s) for image B, one per line").input("2")
    C.people.rotate_token(store, "alice") if how == "rotate" else C.people.deactivate_worker(store, "alice")
    _by_label(at.button, "Save").click().run()
    assert not at.exception, at.exception
    msg = SIGNED_OUT if how == "rotate" else r"worker 'alice' is unknown or inactive: sign in again"
    assert [_plain(e.value) for e in at.error] and re.fullmatch(
        "You were signed out: " + msg, _plain(at.error[0].value)
    )
    assert "worker" not in at.session_state and len(at.sidebar.radio) == 0 and at.text_input(key="token")
    assert C.ready_instances(store) == [] and C.pending_drafts(store, "bob") == []
    assert logged_actions(store, "alice", "annotate") == []
    at.text_input(key="token").input(tokens["alice"])  # the old token no longer signs in
    at.button[0].click().run()
    assert "worker" not in at.session_state and _plain(at.error[0].value).startswith("unknown or inactive token")


def test_app_undo_after_rotation_undoes_nothing(env):
    store, tokens = env
    at = _signed_in(tokens["alice"])
    item = C.next_item(store, "alice", "counting")
    C.skip(store, "alice", item.task_id)  # alice's last action
    C.people.rotate_token(store, "alice")
    at.sidebar.button(key="undo").click().run()
    assert re.fullmatch("You were signed out: " + SIGNED_OUT, _plain(at.error[0].value))
    assert logged_actions(store, "alice", "skip")[-1].undone_at is None


def test_app_admin_page_needs_the_right_in_the_store(env):
    from vhmine.store import Worker

    store, tokens = env
    item = C.next_item(store, "alice", "counting")
    C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    at = _signed_in(tokens["carol"], page="Admin")
    assert [h.value for h in at.header] == ["Progress"]  # the first of the sections an admin picks
    at.radio(key="admin_section").set_value("Workers").run()
    assert [h.value for h in at.header] == ["Workers"]
    assert [d.value["name"].tolist() for d in at.main.table if "name" in d.value] == [["alice", "bob", "carol", "dave"]]
    with store.session() as s:  # carol is no longer an admin: the page she has open gets no data
        s.get(Worker, "carol").is_admin = False
    at.run()
    assert not at.exception, at.exception
    assert "Workers" not in [h.value for h in at.header] and not [d for d in at.main.table if "name" in d.value]
    assert _by_label(at.sidebar.radio, "Page").options == [
        "Annotate",
        "Review",
        "Label answers",
        "Verify drafts",
        "Errata",
        "Blind flags",
    ]
