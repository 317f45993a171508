"""curate.drafts (a worker confirming the yes/no questions drafted from their answers) and curate.verify (a
worker verifying a model's draft): a kept question never contradicts what the open answers imply, however it
is reworded; one the rules cannot read becomes ready only once the worker marks it checked."""

import json

import pytest
from helpers import seed_store

from vhmine import curate as C
from vhmine.errors import FormError


@pytest.fixture
def store(tmp_path):
    store, _ = seed_store(tmp_path / "c.db", tmp_path)
    yield store
    store.close()


def test_a_reworded_draft_never_contradicts_the_answers(store):
    item = C.next_item(store, "alice", "color")
    a, b = (v.id for v in item.images)
    C.save_annotation(
        store, "alice", item.task_id, C.Annotation("color.what_color", {"object": "cup"}, answers={a: "red", b: "blue"})
    )
    drafts = {(d.image_id, d.truth): d for d in C.pending_drafts(store, "alice", "color")}
    yes_a = drafts[(a, True)]
    # the issue's: red on A, "Does the cup look red?" = No on A (before: a wording past the template was never checked)
    with pytest.raises(
        FormError,
        match=(
            r"yes/no truth no for the yes/no question \w+ contradicts the open-ended answer \(red\): 'red' is one of"
            r" them"
        ),
    ):
        C.confirm_drafts(store, "alice", [C.DraftDecision(yes_a.instance_id, True, "Does the cup look red?", False)])
    # the other image's answer is a wrong value there too: "blue" on A, kept yes
    with pytest.raises(FormError, match=r"contradicts the open-ended answer \(red\): 'blue' is not one of them"):
        C.confirm_drafts(
            store, "alice", [C.DraftDecision(yes_a.instance_id, True, "Would you say the cup is blue?", True)]
        )
    # a wording the check cannot read is refused until the worker marks it checked
    with pytest.raises(
        FormError, match=r"cannot tell whether the yes/no question 'Is the cup not blue\?' .* mark it checked"
    ):
        C.confirm_drafts(store, "alice", [C.DraftDecision(yes_a.instance_id, True, "Is the cup not blue?", True)])
    assert C.pending_drafts(store, "alice", "color")  # nothing saved
    kept = C.confirm_drafts(
        store,
        "alice",
        [
            C.DraftDecision(yes_a.instance_id, True, "Is the cup not blue?", True, checked=True),
            C.DraftDecision(drafts[(b, True)].instance_id, True, "Does the cup look blue?"),
        ],
    )
    assert len(kept) == 2
    got = {r.question: r.truth for r in C.ready_instances(store, "color", "YNQ")}
    assert got == {"Is the cup not blue?": True, "Does the cup look blue?": True}


def test_a_model_draft_the_rules_cannot_read_waits_for_the_verifiers_check(store):
    item = C.next_item(store, "alice", "color")
    a, b = (v.id for v in item.images)
    C.skip(store, "alice", item.task_id)
    from vhmine.rules.draft_check import parse_draft

    text = json.dumps(
        {
            "template": "color.what_color",
            "slots": {"object": "cup"},
            "answer_a": "red",
            "answer_b": "blue",
            "yes_no": [
                {"question": "Is the cup red?", "answer_a": "yes", "answer_b": "no"},
                {"question": "Is the cup any colour but red?", "answer_a": "no", "answer_b": "yes"},
            ],
        }
    )
    content = parse_draft(text, "color", [a, b])
    assert content.unchecked == ("Is the cup any colour but red?",)
    C.work.record_draft(store, item.task_id, model="m", endpoint=None, prompt="draft@v1#x", raw=text, content=content)
    v = C.work.next_verify_item(store, "bob", "color")
    assert v.draft_id and v.unchecked == ("Is the cup any colour but red?",)
    with pytest.raises(FormError, match=r"cannot tell whether the yes/no question 'Is the cup any colour but red\?'"):
        C.work.accept_draft(store, "bob", v.draft_id)
    got = C.work.accept_draft(store, "bob", v.draft_id, checked=["Is the cup any colour but red?"])
    assert got.decision == "accept" and len(got.instance_ids) == 6
