"""Property (issue 23): whatever sequence of the app's actions people take on a ready store (errata on open and
yes/no questions: alias, new answer, truth flip, removal; confirming, rewording in their own words or rejecting
drafts; undo; model answers, labels, blind answers; admins' decisions on the person-queue), the derived state is
a derivation from scratch of the sources and the facts people decided, no fact is lost or overturned, undo
restores rows exactly, every contradiction waits in the person-queue, and the export ships exactly that.

The machine is derived_machine.DerivedMachine; the store is built once (helpers.make_ready_store with workers bob,
carol (admin) and dave) and copied per example. Bounded for CI; VHMINE_HYPOTHESIS=long runs it longer.
"""

from __future__ import annotations

import itertools
import os

import pytest
from derived_machine import DerivedMachine
from derived_model import color_questions, erratum, fresh_copy
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

LONG = os.environ.get("VHMINE_HYPOTHESIS") == "long"


@pytest.fixture(scope="module")
def ready_db(tmp_path_factory):
    from helpers import make_ready_store

    from vhmine import curate as C

    folder = tmp_path_factory.mktemp("derived_base")
    store = make_ready_store(folder)
    for w in ("bob", "dave"):
        C.add_worker(store, w)
    C.add_worker(store, "carol", admin=True)
    store.close()
    return folder / "store.db"


def _machine(ready_db, folder):
    n = itertools.count()

    def export_dir():
        return folder / f"export{next(n)}"

    return type(
        "Machine",
        (DerivedMachine,),
        {"open_store": staticmethod(fresh_copy(ready_db, folder)), "export_dir": staticmethod(export_dir)},
    )


@pytest.mark.slow
def test_derived_state_is_a_function_of_sources_and_decisions_property(ready_db, tmp_path):
    machine = _machine(ready_db, tmp_path)
    machine.totals = {}
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=int(os.environ.get("VHMINE_DERIVED_EXAMPLES", 200 if LONG else 20)),
            stateful_step_count=int(os.environ.get("VHMINE_DERIVED_STEPS", 40 if LONG else 20)),
            **(
                {"phases": [Phase.explicit, Phase.reuse, Phase.generate]}
                if os.environ.get("VHMINE_DERIVED_NO_SHRINK")
                else {}
            ),
        ),
    )
    print(f"derived machine: {machine.totals}")  # what the run covered (pytest -s shows it)
    # the run reached the paths the invariants are about: undos that took a decision back, refusals, the queue
    assert machine.totals["undone"] and machine.totals["refused"] and machine.totals["queued"], machine.totals


# --- the counterexamples the machine found on the way, shrunk and kept -------------------------------------


def _live(store, iid):
    from vhmine.store import Instance

    with store.session(write=False) as s:
        return s.get(Instance, iid).status in ("ready", "draft")


def test_a_blind_answer_given_after_an_erratum_is_scored_again_when_it_is_undone(reviewed_store):
    from vhmine import curate as C
    from vhmine.store import BlindAnswer

    store = reviewed_store
    blue_b = color_questions(store)[("B", "Is the cup blue?")]
    erratum(store, blue_b.id, truth=False)
    bid = C.work.record_blind_answer(
        store,
        blue_b.id,
        model="m",
        endpoint=None,
        prompt="blind@v1#x",
        answer="Yes.",
        correct=False,
        scorer="rule:vhtest",
        group=C.work.blind_group_key("color", "YNQ", blue_b.pair_id, blue_b.question, blue_b.id),
    )
    C.undo_last(store, "carol")
    with store.session(write=False) as s:  # was False: scored against the truth the undo took back
        b = s.get(BlindAnswer, bid)
        assert (b.correct, b.reference["truth"]) == (True, True)


def test_a_queued_question_leaves_the_queue_when_its_source_or_itself_is_removed(reviewed_store):
    from vhmine import curate as C

    store = reviewed_store
    q = color_questions(store)
    red_a, cup_a = q[("A", "Is the cup red?")], q[("A", "What color is the cup?")]
    erratum(store, red_a.id, truth=False)
    erratum(store, cup_a.id, answers=["red", "crimson"])
    assert [c.instance_id for c in C.decisions.contradictions(store)] == [red_a.id]
    erratum(store, red_a.id, remove=True)  # was: still queued, though removed
    assert C.decisions.contradictions(store) == []
    C.undo_last(store, "carol")
    assert [c.instance_id for c in C.decisions.contradictions(store)] == [red_a.id]
    erratum(store, cup_a.id, remove=True)  # was: still queued, though its open question is gone
    assert C.decisions.contradictions(store) == [] and not _live(store, red_a.id)
    C.undo_last(store, "carol")
    assert [c.instance_id for c in C.decisions.contradictions(store)] == [red_a.id] and _live(store, red_a.id)


def test_undoing_a_confirmation_never_revives_a_question_the_answers_no_longer_draft(reviewed_store):
    from vhmine import curate as C

    store = reviewed_store
    cup_b = color_questions(store)[("B", "What color is the cup?")]
    erratum(store, cup_b.id, answers="green")
    green = {d.role: d.instance_id for d in C.pending_drafts(store, "alice")}
    C.confirm_drafts(store, "alice", [C.DraftDecision(green["B"], True)])
    C.confirm_drafts(store, "alice", [C.DraftDecision(green["A"], False)])
    erratum(store, cup_b.id, answers="blue")  # green is no longer drafted: both set aside
    assert not _live(store, green["B"]) and not _live(store, green["A"])
    C.undo_last(store, "alice")  # the rejection back: was a live draft again
    C.undo_last(store, "alice")  # the confirmation back: was a live draft again
    assert not _live(store, green["B"]) and not _live(store, green["A"]) and C.pending_drafts(store, "alice") == []
    erratum(store, cup_b.id, answers="green")  # drafted again: back as the drafts they are now
    assert {d.instance_id for d in C.pending_drafts(store, "alice")} == set(green.values())


def test_undoing_a_confirmation_leaves_the_truth_the_answers_imply_now(reviewed_store):
    from vhmine import curate as C

    store = reviewed_store
    C.undo_last(store, "alice")  # her confirmation of the color drafts: they wait for her again
    drafts = {(d.role, d.question): d.instance_id for d in C.pending_drafts(store, "alice", "color")}
    blue_b = drafts[("B", "Is the cup blue?")]
    C.confirm_drafts(store, "alice", [C.DraftDecision(blue_b, True)])
    erratum(store, color_questions(store)[("B", "What color is the cup?")].id, answers=["blue", "navy"])
    erratum(store, color_questions(store)[("B", "What color is the cup?")].id, answers="red")  # "Is the cup blue?": no
    assert C.get_instance(store, blue_b).truth is False
    C.undo_last(store, "alice")
    [d] = [d for d in C.pending_drafts(store, "alice") if d.instance_id == blue_b]
    assert d.truth is False  # not the "yes" it was confirmed with, which the answers no longer imply


def test_a_label_its_worker_took_back_stays_taken_back_when_the_erratum_that_set_it_aside_is_undone(reviewed_store):
    from vhmine import curate as C

    store = reviewed_store
    C.add_worker(store, "dave")
    blue_b = color_questions(store)[("B", "Is the cup blue?")]
    rid = C.work.add_response(store, blue_b.id, "vlm", "p", "Yes.", "correct", judge="rule:vhtest")
    C.work.label_response(store, "dave", rid, "hallucinated")
    erratum(store, blue_b.id, truth=False)  # dave's label set aside
    C.undo_last(store, "dave")  # dave takes his label back
    C.undo_last(store, "carol")
    assert C.work.response_verdicts(store)[rid] == C.work.ResponseVerdict(
        "correct", "rule:vhtest"
    )  # was dave's label again
