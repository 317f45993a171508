"""Where the app opens (issue 42), through Streamlit's AppTest: on the mode the worker chose if it has work for them,
else on the first mode that has, and on the first page with something to do there (a mode with nothing to annotate
but answers to review opens on Review), never on "Nothing left to annotate" while work waits."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")

from app_session import signed_in  # noqa: E402
from helpers import counting_annotation, seed_store  # noqa: E402

from vhmine import curate as C  # noqa: E402
from vhmine import rules as R  # noqa: E402


@pytest.fixture
def store(tmp_path, monkeypatch):
    store, tokens = seed_store(tmp_path / "app.db", tmp_path)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'app.db'}")
    yield store, tokens
    store.close()


def _empty(store, worker: str, mode: str) -> None:
    while (item := C.next_item(store, worker, mode)) is not None:
        C.discard(store, worker, item.task_id, "not for this test")


def test_a_chosen_mode_with_nothing_left_opens_on_the_next_mode_with_work(store):
    store, tokens = store
    first, second = R.mode_names()[:2]
    _empty(store, "bob", first)
    C.people.choose_mode(store, "bob", first)
    at = signed_in(tokens["bob"])
    assert at.session_state["mode"] == second
    assert at.header[0].value == f"Annotate: {second}"
    assert not [i for i in at.info if "Nothing left" in i.value]


def test_a_mode_with_only_answers_to_review_opens_on_review(store):
    store, tokens = store
    item = C.next_item(store, "alice", "counting")  # alice writes one counting item: bob has her questions to review
    C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    C.confirm_drafts(store, "alice", [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, "alice")])
    _empty(store, "bob", "counting")  # and nothing left to annotate there
    C.people.choose_mode(store, "bob", "counting")
    at = signed_in(tokens["bob"])
    assert at.session_state["mode"] == "counting"
    assert at.session_state["page"] == "Review"
    assert at.header[0].value == "Review: counting"
