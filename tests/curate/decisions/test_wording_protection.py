"""A worker's reworded negation keeps its protection through an erratum (issue 32): the question "Is the mug any colour
other than white?", confirmed "no" and checked on the image, was stored as color.is_color with the object "mug any
colour other than"; accepting the erratum white -> light blue then left its truth standing and queued nothing for a
person. Stored as the worker's own wording, the changed answers put it in the person-queue."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import seed_store  # noqa: E402


def test_a_reworded_negation_reaches_the_person_queue_after_an_erratum(tmp_path):
    from vhmine import curate as C

    store, _ = seed_store(tmp_path / "s.db", tmp_path, per_mode=1)
    item = C.next_item(store, "alice", "color")
    a, b = (v.id for v in item.images)
    C.save_annotation(
        store,
        "alice",
        item.task_id,
        C.Annotation("color.what_color", {"object": "mug"}, answers={a: "white", b: "blue"}),
    )
    drafts = C.pending_drafts(store, "alice")
    target = next(d for d in drafts if d.image_id == a and d.question == "Is the mug white?")
    C.confirm_drafts(
        store,
        "alice",
        [
            C.DraftDecision(d.instance_id, True, "Is the mug any colour other than white?", False, checked=True)
            if d is target
            else C.DraftDecision(d.instance_id, True)
            for d in drafts
        ],
    )
    with store.session(write=False) as s:
        from vhmine.store import Instance

        mine = s.get(Instance, target.instance_id)
        assert (mine.template_id, mine.slots, mine.truth) == ("color.own", {}, False)
        assert mine.truth_fact == {"truth": False, "by": "worker alice", "source": ["white"]}
    source = next(r for r in C.ready_instances(store, "color") if r.kind == "OEQ" and r.image_id == a)
    fid = C.decisions.flag_instance(store, "bob", source.id, "it is light blue, not white", proposed="light blue")
    C.decisions.accept_erratum(store, "carol", fid, answers="light blue")
    [queued] = C.decisions.contradictions(store, "carol")
    assert (queued.instance_id, queued.question, queued.truth) == (
        target.instance_id,
        "Is the mug any colour other than white?",
        False,
    )
    assert queued.source_answers == ("light blue",) and queued.decided_against == ("white",)
    assert C.get_instance(store, target.instance_id).truth is False  # it stands until an admin decides
