"""curate.annotate: what a worker saves. An edited question keeps no slot values its text no longer holds, a
reworded draft tests the value its text names, and a reference answer eval would read as the opposite is refused."""

from __future__ import annotations

import json

import pytest
from helpers import seed_store

from vhmine import curate as C
from vhmine.errors import FormError
from vhmine.rules import answers as A
from vhmine.rules import modes as M

# --- one yes/no reader: curation and eval ---------------------------------------------------------------


def test_a_reference_answer_eval_reads_as_the_opposite_is_refused(tmp_path):
    store, _ = seed_store(tmp_path / "c.db", tmp_path)
    try:
        item = C.next_item(store, "alice", "color")
        a, b = (v.id for v in item.images)
        ann = C.Annotation(
            "color.is_color",
            {"object": "cup", "color": "red"},
            answers={a: "Yes?", b: "no"},
            truths={a: False, b: False},
        )
        with pytest.raises(
            FormError, match=r"reference answer 'Yes\?' for image A \(\w+\) contradicts the yes/no truth \(no\)"
        ):
            C.save_annotation(store, "alice", item.task_id, ann)
        # drafts: their answers read as their truth under every rule
        saved = C.save_annotation(
            store,
            "alice",
            item.task_id,
            C.Annotation("color.what_color", {"object": "cup"}, answers={a: "red", b: "blue"}),
        )
        C.confirm_drafts(store, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
        drafts = [r for r in C.ready_instances(store, "color", "YNQ")]
        assert len(drafts) == 4
        for r in drafts:
            assert {A.parse_yes_no(r.answers[0], rule) for rule in A.rule_names()} == {r.truth}
    finally:
        store.close()


# --- an edited question keeps no slot values it no longer holds ----------------------------------------


@pytest.fixture
def color_item(tmp_path):
    store, _ = seed_store(tmp_path / "c.db", tmp_path)
    item = C.next_item(store, "alice", "color")
    yield store, item, [v.id for v in item.images]
    store.close()


def _saved(store, saved):
    ready = {r.id: r for r in C.ready_instances(store, "color")}
    return [ready[i] for i in saved.instance_ids], C.pending_drafts(store, "alice", "color")


def test_a_value_edited_in_the_question_replaces_the_slot_value(color_item):
    store, item, (a, b) = color_item
    saved = C.save_annotation(
        store,
        "alice",
        item.task_id,
        C.Annotation(
            "color.what_color",
            {"object": "Ann Smith's car"},
            question="What color is the truck?",
            answers={a: "red", b: "blue"},
        ),
    )
    inst, drafts = _saved(store, saved)
    assert {(r.template_id, json.dumps(r.slots)) for r in inst} == {("color.what_color", '{"object": "truck"}')}
    assert {d.question for d in drafts} == {"Is the truck red?", "Is the truck blue?"}
    assert not any("Smith" in json.dumps(r.slots) for r in C.ready_instances(store))


def test_a_question_reworded_past_its_template_keeps_no_slots_and_drafts_nothing(color_item):
    store, item, (a, b) = color_item
    saved = C.save_annotation(
        store,
        "alice",
        item.task_id,
        C.Annotation(
            "color.what_color",
            {"object": "Ann Smith's car"},
            question="Which paint was used on the vehicle?",
            answers={a: "red", b: "blue"},
        ),
    )
    inst, drafts = _saved(store, saved)
    assert {(r.template_id, json.dumps(r.slots)) for r in inst} == {("color.own", "{}")} and drafts == []
    assert saved.draft_ids == ()


def test_a_rewording_that_names_every_value_keeps_them(color_item):
    store, item, (a, b) = color_item
    saved = C.save_annotation(
        store,
        "alice",
        item.task_id,
        C.Annotation(
            "color.what_color",
            {"object": "car"},
            question="What is the color of the car, seen from here?",
            answers={a: "red", b: "blue"},
        ),
    )
    inst, drafts = _saved(store, saved)
    assert {(r.template_id, json.dumps(r.slots)) for r in inst} == {("color.what_color", '{"object": "car"}')}
    assert len(drafts) == 4


def test_a_reworded_draft_tests_the_value_its_text_names(color_item):
    store, item, (a, b) = color_item
    C.save_annotation(
        store, "alice", item.task_id, C.Annotation("color.what_color", {"object": "cup"}, answers={a: "red", b: "blue"})
    )
    drafts = {(d.image_id, d.truth): d for d in C.pending_drafts(store, "alice", "color")}
    yes_a = drafts[(a, True)]
    assert yes_a.question == "Is the cup red?"
    # "blue" is not image A's answer: kept as "yes", the reworded draft contradicts it (before: checked against "red")
    with pytest.raises(
        FormError,
        match=(
            r"yes/no truth yes for the yes/no question \w+ contradicts the open-ended answer \(red\): 'blue' is not one"
            r" of them"
        ),
    ):
        C.confirm_drafts(store, "alice", [C.DraftDecision(yes_a.instance_id, True, "Is the cup blue?")])
    decisions = [
        C.DraftDecision(yes_a.instance_id, True, "Is the mug red?"),
        C.DraftDecision(drafts[(a, False)].instance_id, True, "Would you call the paint of it blue?"),
        C.DraftDecision(drafts[(b, True)].instance_id, True, "Is the cup blue?"),
    ]
    C.confirm_drafts(store, "alice", decisions)
    got = {r.question: (r.template_id, r.slots) for r in C.ready_instances(store, "color", "YNQ")}
    assert got == {
        "Is the mug red?": ("color.is_color", {"object": "mug", "color": "red"}),
        "Would you call the paint of it blue?": ("color.own", {}),
        "Is the cup blue?": ("color.is_color", {"object": "cup", "color": "blue"}),
    }
    assert C.undo_last(store, "alice").startswith("confirmation of 3")
    back = {d.instance_id: d.question for d in C.pending_drafts(store, "alice", "color")}
    assert back[yes_a.instance_id] == "Is the cup red?"
    from vhmine.store import Instance

    with store.session(write=False) as s:
        d = s.get(Instance, drafts[(a, False)].instance_id)
        assert (d.template_id, d.slots, d.draft_value) == ("color.is_color", {"object": "cup", "color": "blue"}, "blue")


@pytest.mark.parametrize(
    "template, question, slots, expected",
    [
        ("color.what_color", "What color is the car?", {"object": "car"}, {"object": "car"}),
        ("color.what_color", "what color is the Truck?", {"object": "car"}, {"object": "Truck"}),
        ("color.what_color", "What color is Ann's car?", {"object": "Ann's truck"}, None),
        (
            "position.is_at",
            "Is the big dog to the right of the cat?",
            {"a": "big dog", "relation": "to the left of", "b": "cat"},
            {"a": "big dog", "relation": "to the right of", "b": "cat"},
        ),
        (
            "size.which_larger",
            "Is the cat or the dog the larger one?",
            {"a": "dog", "b": "cat"},
            {"a": "dog", "b": "cat"},
        ),
        ("size.which_larger", "Is the cat or the mouse the larger one?", {"a": "dog", "b": "cat"}, None),
    ],
)
def test_slots_of(template, question, slots, expected):
    assert M.slots_of(M.get_template(template), question, slots) == expected


def test_a_reworded_choice_draft_is_checked_against_the_answer(tmp_path):
    store, _ = seed_store(tmp_path / "c.db", tmp_path)
    try:
        item = C.next_item(store, "alice", "size")
        a, b = (v.id for v in item.images)
        C.save_annotation(
            store,
            "alice",
            item.task_id,
            C.Annotation("size.which_larger", {"a": "dog", "b": "cat"}, answers={a: "the dog", b: "cat"}),
        )
        yes_a = next(d for d in C.pending_drafts(store, "alice", "size") if d.image_id == a and d.truth)
        assert yes_a.question == "Is the dog larger than the cat in the picture?"
        # the objects swapped in the text, the truth left at yes: it now contradicts image A's answer
        with pytest.raises(
            FormError,
            match=(
                r"yes/no truth yes for the yes/no question \w+ contradicts the open-ended answer \(the dog\): 'cat' is"
                r" not one of them"
            ),
        ):
            C.confirm_drafts(
                store,
                "alice",
                [C.DraftDecision(yes_a.instance_id, True, "Is the cat larger than the dog in the picture?")],
            )
        C.confirm_drafts(
            store,
            "alice",
            [C.DraftDecision(yes_a.instance_id, True, "Is the cat larger than the dog in the picture?", False)],
        )
        [r] = [r for r in C.ready_instances(store, "size", "YNQ")]
        assert (r.truth, r.slots) == (False, {"a": "cat", "b": "dog"})
    finally:
        store.close()
