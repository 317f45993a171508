"""The four chains of issue 23, as a worker and an admin meet them: each is a short sequence of ordinary actions
that used to lose or overturn a person's work without a word. Derived state is a function of its sources and of
people's decisions (curate.derived): a round trip of an answer restores the questions it had, a later erratum on
the source never overturns an accepted one, a worker's own wording survives an alias, and an undo never leaves
labels that judged two different truths.

The store is helpers.make_ready_store (conftest.reviewed_store): color, a red cup on image A and a blue one on B,
each an open question with its two drafted yes/no questions per image, confirmed by alice; bob flags, carol decides.
"""

from __future__ import annotations

import json

from derived_model import color_questions, erratum


def _export_ids(store, out):
    from vhmine.export.job import ExportOptions, export_benchmark

    export_benchmark(store, ExportOptions(out=out, format="vhtest", allow_unbalanced=True))
    return json.loads((out / "manifest.json").read_text())["content_hash"]


def test_an_answer_round_trip_restores_exactly_the_yes_no_questions_it_had(reviewed_store, tmp_path):
    from vhmine import curate as C

    store = reviewed_store
    before = color_questions(store)
    h1 = _export_ids(store, tmp_path / "v1")
    cup_b = before[("B", "What color is the cup?")]
    erratum(store, cup_b.id, answers="green")
    mid = color_questions(store)
    assert ("B", "Is the cup blue?") not in mid and ("A", "Is the cup blue?") not in mid
    assert {d.question for d in C.pending_drafts(store, "alice")} == {"Is the cup green?"}
    erratum(store, cup_b.id, answers="blue")
    # blue again: the same questions, ids, truths and status as before; nothing waits for the author
    after = color_questions(store)
    assert {k: (r.id, r.truth, r.status) for k, r in after.items()} == {
        k: (r.id, r.truth, r.status) for k, r in before.items()
    }
    assert C.pending_drafts(store, "alice") == []
    assert _export_ids(store, tmp_path / "v2") == h1  # no churn for the changelog to report


def test_an_alias_on_the_source_never_overturns_an_accepted_truth_flip(reviewed_store, tmp_path):
    from vhmine import curate as C

    store = reviewed_store
    q = color_questions(store)
    red_a, cup_a = q[("A", "Is the cup red?")], q[("A", "What color is the cup?")]
    erratum(store, red_a.id, truth=False)  # an admin decided: no (say the cup is orange)
    fid = erratum(store, cup_a.id, answers=["red", "crimson"])
    # the first admin's decision stands, ready; the alias says "yes", so an admin is asked, with both sides
    assert (C.get_instance(store, red_a.id).truth, C.get_instance(store, red_a.id).status) == (False, "ready")
    [c] = C.decisions.contradictions(store, "carol")
    assert (c.instance_id, c.truth, c.derived, c.decided_against, c.source_answers, c.since) == (
        red_a.id,
        False,
        True,
        ("red",),
        ("red", "crimson"),
        f"erratum {fid}",
    )
    assert C.store_overview(store).contradictions_open == 1
    from vhmine.status import collect  # `vhmine status` shows the queue, and who must act on it

    st = collect(tmp_path / "elsewhere", db=str(store.url))
    assert "person-queue: 1 contradiction(s)" in st.text()
    assert any(a.startswith("1 yes/no question(s) whose open answers now contradict") for a in st.also), st.also
    assert (
        C.decisions.resolve_contradiction(store, "carol", red_a.id, False) == {}
    )  # kept: the queue is empty, the truth stays
    assert C.decisions.contradictions(store) == [] and C.get_instance(store, red_a.id).truth is False
    assert C.store_overview(store).contradictions_open == 0
    # another alias implies the same "yes" the admin kept the truth against: not asked again
    erratum(store, cup_a.id, answers=["red", "crimson", "scarlet"])
    assert C.decisions.contradictions(store) == [] and C.get_instance(store, red_a.id).truth is False


def test_a_workers_own_wording_survives_an_alias_on_its_source(reviewed_store):
    from vhmine import curate as C

    store = reviewed_store
    C.undo_last(store, "alice")  # her confirmation of the color drafts: they wait for her again
    drafts = {(d.role, d.question): d for d in C.pending_drafts(store, "alice", "color")}
    own = "Would you call the mug on the left scarlet?"
    C.confirm_drafts(
        store,
        "alice",
        [
            C.DraftDecision(d.instance_id, True, question=own if k == ("A", "Is the cup red?") else None, checked=True)
            for k, d in drafts.items()
        ],
    )
    mine = drafts[("A", "Is the cup red?")].instance_id
    cup_a = color_questions(store)[("A", "What color is the cup?")]
    erratum(store, cup_a.id, answers=["red", "crimson"])
    rec = C.get_instance(store, mine)
    assert (rec.question, rec.truth, rec.status) == (
        own,
        True,
        "ready",
    )  # still true: every answer it was checked against holds
    assert C.decisions.contradictions(store) == []
    # a change of the answer itself may make it false: it stays ready and waits for an admin
    erratum(store, cup_a.id, answers="orange")
    assert C.get_instance(store, mine).status == "ready" and [
        c.instance_id for c in C.decisions.contradictions(store)
    ] == [mine]


def test_undo_of_an_erratum_sets_aside_the_labels_given_since_against_the_truth_it_takes_back(reviewed_store):
    from vhmine import curate as C

    store = reviewed_store
    C.add_worker(store, "dave")
    blue_b = color_questions(store)[("B", "Is the cup blue?")]
    rid = C.work.add_response(store, blue_b.id, "vlm", "p", "Yes.", "correct", judge="rule:vhtest")
    C.work.label_response(store, "bob", rid, "correct")
    erratum(store, blue_b.id, truth=False)
    assert C.work.response_verdicts(store)[rid] == C.work.ResponseVerdict(
        "hallucinated", "rule:vhtest"
    )  # bob's label set aside
    C.work.label_response(store, "dave", rid, "hallucinated")  # right, against the erratum's truth
    said = C.undo_last(store, "carol")
    # bob's label judged the restored truth and counts again; dave's judged the one undo took back: set aside
    assert C.work.response_verdicts(store)[rid] == C.work.ResponseVerdict("correct", "workers", 1)  # was "workers tied"
    assert f"{rid} by dave" in said and "set aside" in said  # undo names what it set aside
    assert C.work.next_response(store, "dave").response_id == rid  # dave labels it again, against the truth now
