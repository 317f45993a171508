"""Property (issue 23), on PostgreSQL: the transitions two workers can race on one open question and what is
derived from it (an answer changed, an alias added, a drafted question's truth flipped, its drafts confirmed, a
model's answer labelled, the earlier decision undone), run two at a time in threads. Each either commits or is
refused with nothing changed, and the store ends as the plain model of derived_machine says for the ones that
committed, taken in the order they were logged: derived state a derivation from scratch, no fact lost, every
contradiction queued, labels judging the truth now.

The store (helpers.make_ready_store on the session's server) is built once, with the color question of image B
answered green instead of blue by frank, an admin (its green drafts wait for alice), and flags bob raised; each
example races on a fresh copy of that database (CREATE DATABASE ... TEMPLATE). 8 pairs in CI, 40 under
VHMINE_HYPOTHESIS=long.
"""

from __future__ import annotations

import os
import threading
import uuid

import pytest
from derived_machine import DerivedMachine
from hypothesis import example, given, settings
from hypothesis import strategies as st

RACES = ("answer", "alias", "flip", "confirm", "label", "undo")


def _psql(pg_url, sql):
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(pg_url)
    with psycopg.connect(host=u.host, port=u.port, user=u.username, dbname="postgres", autocommit=True) as c:
        c.execute(sql)


def _base(pg_url, tmp_path):
    """The template database, and the ids the races need."""
    from helpers import make_ready_store

    from vhmine import curate as C

    store = make_ready_store(tmp_path, url=pg_url)
    C.add_worker(store, "bob")
    for w in ("carol", "dave", "erin", "frank"):
        C.add_worker(store, w, admin=True)
    recs = C.ready_instances(store, "color", locate=False)
    cup_b = next(r for r in recs if r.kind == "OEQ" and r.answers == ("blue",))
    red_b = next(r for r in recs if r.question == "Is the cup red?" and r.image_id == cup_b.image_id)
    C.decisions.accept_erratum(
        store, "frank", C.decisions.flag_instance(store, "bob", cup_b.id, "green under daylight"), answers="green"
    )
    ids = {
        "cup_b": cup_b.id,
        "red_b": red_b.id,
        "flags": {
            k: C.decisions.flag_instance(store, "bob", iid, "wrong")
            for k, iid in (("answer", cup_b.id), ("alias", cup_b.id), ("flip", red_b.id))
        },
        "response": C.work.add_response(store, red_b.id, "vlm", "p", "No.", "correct", judge="rule:vhtest"),
    }
    store.close()
    return ids


def _transition(store, name, ids):
    from vhmine import curate as C

    f = ids["flags"]
    if name == "answer":
        return C.decisions.accept_erratum(store, "carol", f["answer"], answers="blue")
    if name == "alias":
        return C.decisions.accept_erratum(store, "dave", f["alias"], answers=["green", "lime"])
    if name == "flip":
        return C.decisions.accept_erratum(store, "erin", f["flip"], truth=True)
    if name == "confirm":
        drafts = C.pending_drafts(store, "alice", "color")
        return C.confirm_drafts(
            store,
            "alice",
            [
                C.DraftDecision(
                    d.instance_id,
                    True,
                    question=None if d.role == "B" else "Would you call the cup in this picture by that colour?",
                    checked=True,
                )
                for d in drafts
            ],
        )
    if name == "label":
        return C.work.label_response(store, "bob", ids["response"], "correct")
    return C.undo_last(store, "frank")


_KINDS = {
    "answer": ("carol", "errata_accept"),
    "alias": ("dave", "errata_accept"),
    "flip": ("erin", "errata_accept"),
    "confirm": ("alice", "confirm"),
    "label": ("bob", "label"),
    "undo": ("frank", None),
}


def _model(m, name, ids, drafts):
    """What the committed transition `name` did, in the plain model of DerivedMachine `m`."""
    src = m.source[ids["cup_b"]]
    if name == "answer":
        src["answers"] = ["blue"]
    elif name == "alias":
        src["answers"] = ["green", "lime"]
    elif name == "undo":
        src["answers"] = ["blue"]
    elif name == "flip":
        m.facts[ids["red_b"]] = {"truth": True, "source": list(src["answers"])}
    elif name == "confirm":
        for d in drafts:
            m.confirmed.add(d.instance_id)
            if d.role != "B":  # checked against the answers of the question it was drafted from, image A's
                m.facts[d.instance_id] = {"truth": d.truth, "source": list(d.oeq_answers)}
                m.own.add(d.instance_id)
    elif name == "label":
        m.labels[(ids["response"], "bob")] = [
            {"verdict": "correct", "moved": True, "truth": m.facts.get(ids["red_b"], {"truth": False})["truth"]}
        ]


def _order(store, committed):
    """The committed transitions in the order the action log has them (an undo: when it marked the action)."""
    from vhmine.store import Action

    with store.session(write=False) as s:
        acts = s.query(Action).all()
    at = {}
    for name in committed:
        worker, kind = _KINDS[name]
        if kind is None:
            at[name] = max(a.id for a in acts if a.worker == "frank" and a.undone_at) + 0.5  # after what it undid
        else:
            at[name] = max(a.id for a in acts if a.worker == worker and a.kind == kind)
    return sorted(committed, key=at.get)


@pytest.mark.slow
def test_two_workers_racing_on_a_question_and_what_it_derives_property(pg_url, tmp_path):
    from vhmine import curate as C
    from vhmine.errors import FormError, LeaseError
    from vhmine.store import open_store

    ids = _base(pg_url, tmp_path)
    base = pg_url.rsplit("/", 1)[1]

    @settings(max_examples=40 if os.environ.get("VHMINE_HYPOTHESIS") == "long" else 8)
    @given(pair=st.lists(st.sampled_from(RACES), min_size=2, max_size=2, unique=True))
    # found on the way: an undo of frank's decision read its new drafts unlocked, so alice's confirmation of them,
    # committed meanwhile, was overwritten (both committed; her questions set aside); timing-dependent, so kept
    @example(pair=["confirm", "undo"])
    @example(pair=["undo", "confirm"])
    @example(pair=["answer", "confirm"])
    # found on the way: a label committed while a flip of the instance's truth had already read its labels, so the
    # label stood judging the old truth (label_response now locks the instance, as the erratum does)
    @example(pair=["label", "flip"])
    @example(pair=["flip", "label"])
    def race(pair):
        name = "r_" + uuid.uuid4().hex[:10]
        _psql(pg_url, f'CREATE DATABASE "{name}" TEMPLATE "{base}"')
        store = open_store(pg_url.rsplit("/", 1)[0] + "/" + name)
        try:
            machine = type(
                "M",
                (DerivedMachine,),
                {"open_store": staticmethod(lambda: store), "export_dir": staticmethod(lambda: tmp_path / name)},
            )()
            drafts = C.pending_drafts(store, "alice", "color")
            gate, outcome = threading.Barrier(2), {}

            def run(n):
                gate.wait()
                try:
                    _transition(store, n, ids)
                    outcome[n] = "committed"
                except (LeaseError, FormError) as err:  # refused: said in one line, nothing of it saved
                    outcome[n] = f"refused: {err}"

            threads = [threading.Thread(target=run, args=(n,)) for n in pair]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert set(outcome) == set(pair), outcome
            committed = _order(store, [n for n in pair if outcome[n] == "committed"])
            assert committed, outcome  # two of these never both refuse
            for n in committed:
                _model(machine, n, ids, drafts)
            machine.derived_state_is_a_derivation_from_sources_and_facts()
            machine.no_fact_is_lost_or_overturned()
            machine.every_contradiction_is_in_the_person_queue()
            machine.labels_and_scores_judge_the_truth_now()
        finally:
            store.close()
            _psql(pg_url, f'DROP DATABASE "{name}"')

    race()
