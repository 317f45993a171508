"""Derived state follows its source (issue 16, curate.derived): an accepted erratum carries through to the yes/no
questions drafted from the question it fixes, the pair groups, model verdicts, workers' labels, blind answers and
flags and reviews, all found through the store's recorded links; the export's changelog says what changed and
why; an undo of the decision takes every piece back.

The store is helpers.make_ready_store: counting (3 cats on image A, 2 on B) and color (a red cup on A, a blue one
on B), each an open question on both images with its two drafted yes/no questions per image, all confirmed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


@pytest.fixture
def store(reviewed_store):  # (conftest.py)
    return reviewed_store


ROLES: dict = {}


def _mode(store, mode):
    """{(image role A/B, question): instance} of the ready instances of `mode`. A: the image make_ready_store
    answered with 3 cats / a red cup (read on the first call, before any fix)."""
    from vhmine import curate as C

    recs = C.ready_instances(store, mode)
    if (id(store), mode) not in ROLES:
        a = next(r for r in recs if r.kind == "OEQ" and r.answers[0] in ("3", "red"))
        ROLES[(id(store), mode)] = {a.image_id: "A", a.other_image_id: "B"}
    role = ROLES[(id(store), mode)]
    return {(role[r.image_id], r.question): r for r in recs}


def _instance(store, iid):
    from vhmine.store import Instance

    with store.session(write=False) as s:
        i = s.get(Instance, iid)
        return i.status, i.truth, i.discard_reason


def _export(store, out, **kw):
    from vhmine import formats as F
    from vhmine.export.job import ExportOptions, export_benchmark

    export_benchmark(store, ExportOptions(out=out, format="vhtest", allow_unbalanced=True, **kw))
    return {it.id: it for it in F.load(out)}, json.loads((out / "manifest.json").read_text())


def test_the_issues_colour_fix_redrafts_its_yes_no_questions_rebuilds_groups_and_undoes(store, tmp_path):
    from vhmine import curate as C

    v1, m1 = _export(store, tmp_path / "v1")
    before = _mode(store, "color")
    cup_b = before[("B", "What color is the cup?")]
    blue_b, red_b = before[("B", "Is the cup blue?")], before[("B", "Is the cup red?")]
    assert (blue_b.truth, red_b.truth) == (True, False)
    fid = C.decisions.flag_instance(
        store, "bob", cup_b.id, "the cup on B is red, the light made it look blue", proposed="red"
    )
    C.decisions.accept_erratum(store, "carol", fid, answers="red")

    # today, before the fix: "Is the cup blue? -> Yes" and "Is the cup red? -> No" stayed ready for image B
    after = _mode(store, "color")
    assert after[("B", "What color is the cup?")].answers == ("red",)
    assert (after[("B", "Is the cup blue?")].truth, after[("B", "Is the cup red?")].truth) == (False, True)
    assert after[("B", "Is the cup blue?")].id == blue_b.id  # drafted again in place: the ids exports give stay
    # image A's variants (red: yes, blue: no) were right and stay as they were
    assert (after[("A", "Is the cup red?")].truth, after[("A", "Is the cup blue?")].truth) == (True, False)

    # the next export ships no contradiction, and its pair groups are rebuilt: both images now answer "red"
    v2, m2 = _export(store, tmp_path / "v2", since=tmp_path / "v1")
    assert (v2[blue_b.id].truth, v2[red_b.id].truth) == (False, True)
    assert all(v2[i].group_id is None for i in v2 if v2[i].mode == "color")
    assert all(v1[i].group_id is not None for i in v1 if v1[i].mode == "color")
    assert m2["pair_groups"] == {"counting": {"OEQ": 1, "YNQ": 1}}
    log = json.loads((tmp_path / "v2" / "changelog.json").read_text())
    changed = {e["id"]: e for e in log["changed"]}
    assert set(changed) == {r.id for r in before.values()}  # the fixed question, 2 re-drafted, every group change
    assert (
        changed[blue_b.id]["fields"]["truth"] == [True, False] and changed[blue_b.id]["fields"]["group_id"][1] is None
    )
    why = changed[blue_b.id]["why"]
    assert any(
        f"erratum {fid}: drafted again from the fixed answers (answers blue → red): truth yes → no" in w for w in why
    )
    a_red = before[("A", "Is the cup red?")].id
    assert changed[a_red]["fields"] == {"group_id": [v1[a_red].group_id, None]}
    assert any("pair group" in w and "rebuilt from the fixed answers" in w for w in changed[a_red]["why"])
    md = (tmp_path / "v2" / "CHANGELOG.md").read_text()
    assert f"erratum {fid}: drafted again from the fixed answers (answers blue → red): truth yes → no" in md
    assert "## Derived from errata" not in md  # nothing else was derived: no verdicts, labels or blind answers

    # an undo of the decision takes it all back: the next export is v1's content again
    assert C.undo_last(store, "carol").startswith("accept of flag")
    assert {k: (r.truth, r.answers) for k, r in _mode(store, "color").items()} == {
        k: (r.truth, r.answers) for k, r in before.items()
    }
    v3, m3 = _export(store, tmp_path / "v3")
    assert m3["content_hash"] == m1["content_hash"]


def test_a_new_count_drafts_new_questions_for_the_author_and_retires_the_old(store):
    from vhmine import curate as C
    from vhmine.errors import LeaseError

    before = _mode(store, "counting")
    cats_a = before[("A", "How many cats are there in the picture?")]
    three_a, two_a = (
        before[("A", "Are there exactly 3 cats in the picture?")],
        before[("A", "Are there exactly 2 cats in the picture?")],
    )
    three_b, two_b = (
        before[("B", "Are there exactly 3 cats in the picture?")],
        before[("B", "Are there exactly 2 cats in the picture?")],
    )
    fid = C.decisions.flag_instance(store, "bob", cats_a.id, "four cats, one behind the sofa")
    C.decisions.accept_erratum(store, "carol", fid, answers="4")
    # A: "exactly 3" (yes) is no longer a question drafted from "4"; B: "exactly 3" (no) took its "3" from A
    for iid in (three_a.id, three_b.id):
        status, _, reason = _instance(store, iid)
        assert status == "discarded" and reason.startswith(f"erratum {fid}: ")
    assert (
        "no longer among the yes/no questions drafted from the fixed answers (answers 3 → 4)"
        in _instance(store, three_a.id)[2]
    )
    assert "its 'no' value came from the pair's open question" in _instance(store, three_b.id)[2]
    assert _instance(store, two_a.id)[:2] == ("ready", False) and _instance(store, two_b.id)[:2] == ("ready", True)
    # "exactly 4" is drafted on both images, waiting for alice (who wrote the question) with the reason
    drafts = C.pending_drafts(store, "alice")
    assert sorted((d.role, d.question, d.truth) for d in drafts) == [
        ("A", "Are there exactly 4 cats in the picture?", True),
        ("B", "Are there exactly 4 cats in the picture?", False),
    ]
    assert all(
        d.note.startswith(f"erratum {fid}: drafted from the fixed answers") and d.oeq_answers in (("4",), ("2",))
        for d in drafts
    )
    assert C.pending_drafts(store, "bob") == []
    # once alice confirmed one, the erratum can no longer be undone (she built on it), and nothing changes
    C.confirm_drafts(store, "alice", [C.DraftDecision(drafts[0].instance_id, True)])
    with pytest.raises(LeaseError, match="was confirmed since"):
        C.undo_last(store, "carol")
    assert C.get_instance(store, cats_a.id).answers == ("4",)
    C.undo_last(store, "alice")  # her confirmation back: now the erratum's undo takes everything back
    C.undo_last(store, "carol")
    assert C.get_instance(store, cats_a.id).answers == ("3",)
    assert _instance(store, three_a.id)[:2] == ("ready", True) and _instance(store, three_b.id)[:2] == ("ready", False)
    assert C.pending_drafts(store, "alice") == []
    assert {k: (r.id, r.truth) for k, r in _mode(store, "counting").items()} == {
        k: (r.id, r.truth) for k, r in before.items()
    }


def _blind(store, inst, answer, correct, scorer, model="text-only"):
    from vhmine import curate as C

    return C.work.record_blind_answer(
        store,
        inst.id,
        model=model,
        endpoint="http://127.0.0.1:1/v1",
        prompt="blind@v1#x",
        answer=answer,
        correct=correct,
        scorer=scorer,
        group=C.work.blind_group_key(inst.mode, inst.kind, inst.pair_id, inst.question, inst.id),
    )


def _rows(store):
    from vhmine.store import BlindAnswer, Response, ResponseLabel, Review

    with store.session(write=False) as s:
        return (
            {r.id: (r.verdict, r.judge) for r in s.query(Response)},
            {(r.response_id, r.worker): r.verdict for r in s.query(ResponseLabel)},
            {r.id: (r.correct, r.flag_id) for r in s.query(BlindAnswer)},
            {(r.instance_id, r.worker): r.label for r in s.query(Review)},
        )


@pytest.mark.slow
def test_verdicts_labels_blind_answers_and_reviews_are_scored_again_and_restored_by_undo(store, tmp_path):
    from vhmine import curate as C
    from vhmine.export.privacy import pseudonym, pseudonym_key

    q = _mode(store, "color")
    cup_b, blue_b = q[("B", "What color is the cup?")], q[("B", "Is the cup blue?")]
    red_a, red_b = q[("A", "Is the cup red?")], q[("B", "Is the cup red?")]
    # a probe run: a rule's verdict on a yes/no answer, a judge's on an open one; a worker's label on each
    r_yn = C.work.add_response(store, blue_b.id, "vlm", "p", "Yes, it is blue.", "correct", judge="rule:vhtest")
    r_oe = C.work.add_response(store, cup_b.id, "vlm", "p", "A blue cup.", "correct", judge="llm:judge judge_oeq@v1#x")
    C.work.label_response(store, "bob", r_yn, "correct")
    # blind answers: right on both images of "Is the cup red?" would flag it; here "Yes" on A (right), on B (wrong)
    b_yn_a = _blind(store, red_a, "Yes.", True, "rule:vhtest")
    b_yn_b = _blind(store, red_b, "Yes.", False, "rule:vhtest")
    b_match = _blind(store, cup_b, "red", False, "match")
    b_judge = _blind(store, cup_b, "blue", True, "llm:judge judge_oeq@v1#x", model="other")
    C.work.refresh_blind_flags(store, "text-only", "http://127.0.0.1:1/v1", "blind@v1#x")
    C.work.save_review(store, "bob", cup_b.id, "crimson")  # not an answer of the item: its own label
    old = _rows(store)
    assert old[2][b_yn_a][1] is None and old[3][(cup_b.id, "bob")] == "crimson"
    _export(store, tmp_path / "v1")

    fid = C.decisions.flag_instance(store, "bob", cup_b.id, "red, not blue")
    C.decisions.accept_erratum(store, "carol", fid, answers=["red", "crimson"])
    verdicts, labels, blind, reviews = _rows(store)
    assert verdicts[r_yn] == ("hallucinated", "rule:vhtest")  # "Yes" to "Is the cup blue?" on B is now wrong
    assert verdicts[r_oe] == (None, None)  # the judge saw "blue": cleared for `vhmine probe --judge`
    assert labels == {}  # bob's label judged the old truth: set aside, the response is his to label again
    assert C.work.next_response(store, "bob").response_id in {r_yn, r_oe}
    assert blind[b_yn_b][0] is True and blind[b_match][0] is True  # "Yes" and "red" are right now
    assert blind[b_judge][0] is None  # only the judge can say: unscored until `vhmine blind` judges it again
    # "Is the cup red?" is now answered right blind on both images: the flag follows
    assert blind[b_yn_a][1] is not None and blind[b_yn_a][1] == blind[b_yn_b][1]
    assert red_a.id in C.work.blind_dropped(store)
    assert reviews[(cup_b.id, "bob")] == "red"  # "crimson" is an accepted answer now: agrees with the author
    derived = [p for w, p in _payloads(store, "errata_accept")][0]["derived"]
    tables = sorted({e["table"] for e in derived})
    assert tables == ["blind_answers", "groups", "instances", "response_labels", "responses", "reviews"]
    # the next export's changelog lists what was derived beyond its items, workers as pseudonyms
    _export(store, tmp_path / "v2", since=tmp_path / "v1")
    log = json.loads((tmp_path / "v2" / "changelog.json").read_text())
    got = {(e["table"], e["id"] if isinstance(e["id"], str) else tuple(e["id"])): e for e in log["derived"]}
    bob = pseudonym("bob", pseudonym_key(store))
    assert got[("response_labels", (r_yn, bob))]["what"] == "set aside: correct"
    assert got[("responses", r_yn)]["what"] == "verdict: correct → hallucinated"
    assert "unscored until `vhmine blind` judges it again" in got[("blind_answers", b_judge)]["why"]
    assert got[("reviews", (cup_b.id, bob))]["what"] == "label: crimson → red"
    assert all(e["flag_id"] == fid and e["instance_id"] == cup_b.id for e in log["derived"])
    md = (tmp_path / "v2" / "CHANGELOG.md").read_text()
    assert (
        "## Derived from errata" in md
        and f"| {fid} | {cup_b.id} | worker's label | {r_yn}/{bob} | set aside: correct |" in md
    )
    assert "bob" not in md and "bob" not in json.dumps(log)

    C.undo_last(store, "carol")
    assert _rows(store) == old
    assert red_a.id not in C.work.blind_dropped(store)


def _payloads(store, kind):
    from vhmine.store import Action

    with store.session(write=False) as s:
        return [(a.worker, a.payload) for a in s.query(Action).filter_by(kind=kind).order_by(Action.id)]


def test_removing_a_question_takes_its_yes_no_questions_along(store):
    from vhmine import curate as C

    q = _mode(store, "color")
    cup_a = q[("A", "What color is the cup?")]
    fid = C.decisions.flag_instance(store, "bob", cup_a.id, "no cup in this picture")
    C.decisions.accept_erratum(store, "carol", fid, remove=True)
    for k in (("A", "Is the cup red?"), ("A", "Is the cup blue?")):
        status, _, reason = _instance(store, q[k].id)
        assert status == "discarded" and reason == f"erratum {fid}: the open question it was drafted from was removed"
    # B's "no" variant took "red" from A; it is drafted again without A (the mode's alternatives give "red" still)
    assert _instance(store, q[("B", "Is the cup blue?")].id)[:2] == ("ready", True)
    C.undo_last(store, "carol")
    assert all(_instance(store, r.id)[0] == "ready" for r in q.values())


def test_a_reworded_questions_yes_no_questions_wait_ready_in_the_person_queue(store):
    from vhmine import curate as C
    from vhmine.store import Instance

    q = _mode(store, "color")
    cup_b, blue_b, red_b = q[("B", "What color is the cup?")], q[("B", "Is the cup blue?")], q[("B", "Is the cup red?")]
    with store.session() as s:  # a question reworded past its template: nothing to draft its variants from
        s.get(Instance, cup_b.id).template_id, s.get(Instance, cup_b.id).slots = "color.own", {}
    fid = C.decisions.flag_instance(store, "bob", cup_b.id, "red")
    C.decisions.accept_erratum(store, "carol", fid, answers="red")
    # each truth was its author's and cannot be drafted again: it stands, ready, until an admin decides (issue 23)
    assert _instance(store, blue_b.id) == ("ready", True, None)
    queue = {c.instance_id: c for c in C.decisions.contradictions(store, "carol")}
    assert set(queue) == {blue_b.id, red_b.id} and _instance(store, red_b.id) == ("ready", False, None)
    c = queue[blue_b.id]
    assert (c.truth, c.derived, c.decided_against, c.source_answers, c.since) == (
        True,
        None,
        ("blue",),
        ("red",),
        f"erratum {fid}",
    )
    assert C.decisions.resolve_contradiction(store, "carol", blue_b.id, False) == {
        "truth": [True, False],
        "answers": [["Yes"], ["No"]],
    }
    assert C.get_instance(store, blue_b.id).truth is False and [
        c.instance_id for c in C.decisions.contradictions(store)
    ] == [red_b.id]
    C.undo_last(store, "carol")  # the decision back: the question waits again, with the truth it had
    assert C.get_instance(store, blue_b.id).truth is True and {
        c.instance_id for c in C.decisions.contradictions(store)
    } == set(queue)
