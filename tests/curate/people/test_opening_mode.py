"""curate.people.opening_mode (issue 42): a worker opens on their chosen mode when it has work for them, else on the
first mode that has (the app opened on a mode saying "Nothing left to annotate" while another had tasks); and
curate.work.work_left, the per-page counts it decides by: annotate (no pending draft; free or theirs), verify
(pending drafts), review (others' ready items they have not answered), label (model answers they have not labelled)."""

from __future__ import annotations

import pytest
from helpers import counting_annotation, seed_store

from vhmine import curate as C


@pytest.fixture
def store(tmp_path):
    store, _ = seed_store(tmp_path / "o.db", tmp_path, per_mode=1)
    yield store
    store.close()


def _only_modes(store, keep: set[str]) -> None:
    """Discard every task outside `keep` (as if they were all done): those modes have no work left."""
    from vhmine.store import Task

    with store.session() as s:
        for t in s.query(Task).filter(Task.mode.not_in(keep)):
            t.status = "discarded"


def _pending_draft(store, task_id: str) -> None:
    from vhmine.store import Draft, Task, utcnow

    with store.session() as s:
        t = s.get(Task, task_id)
        s.add(Draft(id="d1", task_id=t.id, mode=t.mode, model="m", prompt="p", raw="{}", status="pending",
                    created_at=utcnow()))  # fmt: skip


def test_a_worker_opens_where_there_is_work_for_them(store):
    _only_modes(store, {"color", "counting"})
    # nothing chosen: the first mode (rules' order: existence, shape, color, ...) with work, not existence
    assert C.people.chosen_mode(store, "alice") is None
    assert C.people.opening_mode(store, "alice") == "color"
    C.people.choose_mode(store, "alice", "existence")  # chosen, but nothing to do there
    assert C.people.opening_mode(store, "alice") == "color"
    C.people.choose_mode(store, "alice", "counting")  # chosen, with work: theirs first
    assert C.people.opening_mode(store, "alice") == "counting"

    # alice annotates counting's one item: nothing left there for her (her own items are not hers to review)
    item = C.next_item(store, "alice", "counting")
    saved = C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    C.confirm_drafts(store, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
    left = C.work.work_left(store, "alice")
    assert left["counting"] == C.work.WorkLeft("counting", 0, 0, 0, 0)
    assert C.people.opening_mode(store, "alice") == "color"
    # bob has her items to review there: his chosen counting has work although nothing is left to annotate
    C.people.choose_mode(store, "bob", "counting")
    ready = len(C.ready_instances(store, "counting"))
    assert C.work.work_left(store, "bob", "counting") == {"counting": C.work.WorkLeft("counting", 0, 0, ready, 0)}
    assert C.work.work_left(store, "bob")["counting"].review == C.work.reviews_left(store, "bob", "counting")
    assert C.people.opening_mode(store, "bob") == "counting"

    # color's one item leased to bob: none of alice's, so nothing anywhere for her: her chosen mode
    assert C.next_item(store, "bob", "color") is not None
    assert C.work.work_left(store, "alice")["color"].annotate == 0
    assert C.work.work_left(store, "bob")["color"].annotate == 1  # his lease: still his to do
    assert C.people.opening_mode(store, "alice") == "counting"
    assert C.people.opening_mode(store, "dave") == "counting"  # color is bob's now; counting has items to review
    C.people.choose_mode(store, "dave", "color")
    assert C.people.opening_mode(store, "dave") == "counting"


def test_a_pending_draft_is_verify_work_not_annotate_work(store):
    _only_modes(store, {"existence"})
    from vhmine.store import Task

    with store.session(write=False) as s:
        task_id = s.query(Task).filter_by(mode="existence").one().id
    assert C.work.work_left(store, "alice", "existence")["existence"].annotate == 1
    _pending_draft(store, task_id)
    assert C.work.work_left(store, "alice", "existence")["existence"] == C.work.WorkLeft("existence", 0, 1, 0, 0)
    assert C.next_item(store, "alice", "existence") is None  # the annotate queue agrees
    C.people.choose_mode(store, "alice", "color")
    assert C.people.opening_mode(store, "alice") == "existence"  # drafts to verify are work too


def test_with_no_work_anywhere_the_first_mode(store):
    _only_modes(store, set())
    assert C.people.opening_mode(store, "alice") == "existence"
    assert all(w.items == 0 for w in C.work.work_left(store, "alice").values())
