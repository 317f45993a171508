"""Decisions kept on a round trip (issue 43): a store taken down to any earlier schema revision with Alembic's
downgrade and up again to head holds every row it held, on SQLite and PostgreSQL: each downgrade keeps what its
upgrade cannot make again (vhmine/store/migrations/kept.py) and the upgrade puts it back. The upgrade property
(test_upgrade.py, upgrade_machine.UpgradeMachine.round_trip) takes stores down and up between people's actions too;
here are the issue's reproduction, a store holding a row of every kind a downgrade drops, what the store holds
while it is down, a store that code before 0011 changed while it was down, and the action log read once.

Reads the store made at head by tests/store/old_story.py; writes stores in temporary folders and PostgreSQL
databases (the `pg_url` fixture).
"""

from __future__ import annotations

import datetime as dt

import pytest
from upgrade_machine import EARLIER, act, copy_of, decisions, down_and_up, head_story, rows, to_postgresql

COUNT = "Are there exactly 3 cats in the picture?"


@pytest.fixture(scope="module")
def head_file(tmp_path_factory):
    """A SQLite store made at head by the whole story: carol's erratum made COUNT false on image A (her truth
    fact), her erratum red -> green on A set "Is the cup red?" aside on both images (retired_from "ready"), and alice
    confirmed B's "Is the cup green?" in her own words (her fact)."""
    return head_story(tmp_path_factory.mktemp("head"), "0012")


def _open(head_file, db, tmp_path, request):
    """A copy of `head_file`, as a SQLite file or in a PostgreSQL database."""
    if db == "sqlite":
        return copy_of(head_file)
    from vhmine.store import open_store, schema_head

    url = request.getfixturevalue("pg_url")
    to_postgresql(head_file, url, schema_head())
    return open_store(url)


def _ynq(store, mode, image_k, question):
    from upgrade_machine import _images, _instances

    image = _images(store, mode)[image_k]
    return [i for i in _instances(store, mode=mode, kind="YNQ", image_id=image) if i.question == question]


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
@pytest.mark.parametrize("rev", ["0010", "0009", "0007"])
def test_an_admins_false_and_a_set_aside_question_survive_a_round_trip(head_file, db, rev, tmp_path, request):
    # the reproduction: 0011's downgrade dropped truth_fact and retired_from, and 0013's upgrade reads back
    # only errata written before 0011 (these record their facts themselves): the admin's "false" was gone, so the
    # alias 3 -> 3 / 4 on its open question flipped it back to true, and green -> red left "Is the cup red?" discarded
    store = down_and_up(_open(head_file, db, tmp_path, request), rev)
    same = copy_of(head_file)
    try:
        for step in (("alias", "counting", 0, 0), ("answer", "color", 0, 0)):  # 3 -> 3 / 4 on A; green -> red on A
            assert (act(store, step), act(same, step)) == ("ok", "ok")
        [q] = _ynq(store, "counting", 0, COUNT)
        assert (q.status, q.truth, (q.truth_fact or {}).get("truth")) == ("ready", False, False), "flipped back"
        assert q.truth_fact["by"].startswith("erratum ")
        assert q.contradiction["derived"] is True and q.contradiction["fact"] is False
        [red] = _ynq(store, "color", 0, "Is the cup red?")
        assert (red.status, red.truth, red.discard_reason, red.retired_from) == ("ready", True, None, None)
        assert decisions(store) == decisions(same)
    finally:
        store.close(), same.close()


def _every_kind(store) -> None:
    """A row of each kind a downgrade drops, people's decisions among them: a model's answer from an endpoint and
    bob's label on it, a description and a generation from it, a blind answer with its reference and one waiting to
    be scored again (correct NULL) whose flag bob overruled, a model's draft alice accepted, a near duplicate bob
    overruled; alice's chosen mode, bob's rotated token (its generation)."""
    from vhmine import curate as C
    from vhmine.store import BlindAnswer, Description, Draft, Generation, Instance, NearDuplicate, Task

    at = dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
    with store.session() as s:
        q = s.query(Instance).filter_by(kind="YNQ", status="ready").order_by(Instance.id).first()
        task = s.query(Task).order_by(Task.id).first()
        iid, image, tid = q.id, q.image_id, task.id
    rid = C.work.add_response(store, iid, "vlm", "Answer yes or no.", "Yes", endpoint="http://127.0.0.1:8000/v1")
    C.work.label_response(store, "bob", rid, "hallucinated")
    C.people.choose_mode(store, "alice", "color")
    C.people.rotate_token(store, "bob")
    blind = dict(instance_id=iid, model="text", prompt="blind@v1#0", scorer="match", group_key="g", created_at=at)
    with store.session() as s:
        s.add(Description(id="d1", mode="color", kind="scene", text="a red cup", hypothetical=False, created_at=at))
        s.flush()  # the generation names it
        s.add(
            Generation(
                id="g1", image_id=image, mode="color", prompt="a red cup", description_id="d1", backend="sd",
                model="tiny", seed=7, params={"steps": 2}, created_at=at,
            )
        )  # fmt: skip
        s.add(BlindAnswer(id="b1", answer="Yes", correct=True, reference={"answers": ["Yes"], "truth": True}, **blind))
        s.add(
            BlindAnswer(
                id="b2", answer="No", correct=None, reference=None, flag_id="f1", overruled_by="bob",
                overruled_at=at, overrule_reason="needs the image", **blind,
            )
        )  # fmt: skip
        s.add(
            Draft(
                id="r1", task_id=tid, mode="color", model="vlm", endpoint="http://127.0.0.1:8000/v1", prompt="draft@v1",
                raw="{}", question="What color is the cup?", answers={image: ["red"]}, yes_no=[], status="accepted",
                decided_by="alice", decided_at=at, created_at=at,
            )
        )  # fmt: skip
        s.add(
            NearDuplicate(
                id="n1", scope="within", a_image=image, b_image="other", clip=0.987654321, dino=0.5, exact=False,
                encoders={"clip": {"dim": 8}}, thresholds={"clip": 0.9}, overruled_by="bob", overruled_at=at,
                overrule_reason="different cups", created_at=at, seen_at=at,
            )
        )  # fmt: skip


@pytest.mark.slow  # twelve round trips, ~0.25 s each
@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_every_row_survives_a_round_trip_through_each_earlier_revision(head_file, db, tmp_path, request):
    # before: the secret (every pseudonym) was made anew, labels, drafts, errata, overrules, endpoints, the chosen
    # mode and the token generation (back at 0: a ticket signed before bob's rotation was good again) were dropped,
    # and 0009's downgrade failed on the answer waiting to be scored again (correct NULL under NOT NULL)
    from sqlalchemy import inspect

    from vhmine.store import BlindAnswer, Worker

    store = _open(head_file, db, tmp_path, request)
    _every_kind(store)
    before, said = rows(store), decisions(store)
    assert all(before[t] for t in ("response_labels", "generations", "blind_answers", "drafts", "near_duplicates"))
    try:
        for rev in reversed(EARLIER):
            store = down_and_up(store, rev)
            assert rows(store) == before, f"the round trip through {rev} changed the store"
            assert decisions(store) == said
            assert "kept_on_downgrade" not in inspect(store.engine).get_table_names()
        with store.session(write=False) as s:
            assert (s.get(BlindAnswer, "b2").correct, s.get(Worker, "bob").token_generation) == (None, 1)
    finally:
        store.close()


def test_what_is_kept_waits_below_in_a_table_of_its_own(head_file):
    import json

    from alembic import command
    from sqlalchemy import create_engine, inspect, text

    from vhmine.store import Instance
    from vhmine.store.db import _alembic_config

    store = copy_of(head_file)
    with store.session(write=False) as s:  # COUNT's fact, alice's own-worded one, "Is the cup red?" set aside twice
        decided = {
            i.id: (i.retired_from, i.truth_fact)
            for i in s.query(Instance)
            if i.truth_fact is not None or i.retired_from is not None or i.contradiction is not None
        }
    url = store.url
    store.close()
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = _alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0010")
        kept = conn.execute(text("SELECT revision, what, data FROM kept_on_downgrade ORDER BY id")).all()
        assert "truth_fact" not in {c["name"] for c in inspect(conn).get_columns("instances")}
    engine.dispose()
    assert len(decided) == 4 and sorted({(r, w) for r, w, _ in kept}) == [
        ("0011", "instances"),
        ("0013", "actions read"),
    ]
    data = [json.loads(d) if isinstance(d, str) else d for r, w, d in kept if w == "instances"]
    assert {d["id"]: (d["retired_from"], d["truth_fact"]) for d in data} == decided


def test_a_question_older_code_changed_while_down_is_read_as_that_code_left_it(head_file):
    # down at 0010, code of that era took carol's erratum back by another one (COUNT true again, logged as it logged
    # errata then: no "fact"): the kept fact (false) no longer holds; 0013 reads that erratum (logged after the
    # downgrade) and records its truth as the fact, while "Is the cup red?", untouched, gets its retired_from back
    from alembic import command
    from sqlalchemy import create_engine, text

    from vhmine.store import open_store
    from vhmine.store.db import _alembic_config

    store = copy_of(head_file)
    url, [q] = store.url, _ynq(store, "counting", 0, COUNT)
    store.close()
    engine = create_engine(url)
    with engine.begin() as conn:
        cfg = _alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0010")
        conn.execute(text("UPDATE instances SET truth = 1, answers = '[\"Yes\"]' WHERE id = :i"), {"i": q.id})
        payload = f'{{"flag_id": "0123456789abcdef", "instance_id": "{q.id}", "changes": {{"truth": [false, true]}}}}'
        conn.execute(
            text(
                "INSERT INTO actions (worker, kind, task_id, payload, created_at)"
                " VALUES ('carol', 'errata_accept', NULL, :p, '2030-01-01 00:00:00.000000')"
            ),
            {"p": payload},
        )
    engine.dispose()
    with open_store(url) as store:
        [q] = _ynq(store, "counting", 0, COUNT)
        assert (q.truth, q.truth_fact["truth"], q.truth_fact["by"]) == (True, True, "erratum 0123456789abcdef")
        assert q.contradiction is None
        [red] = _ynq(store, "color", 0, "Is the cup red?")
        assert (red.status, red.retired_from) == ("discarded", "ready")


def test_the_upgrade_back_reads_only_the_errata_logged_since_the_downgrade(head_file):
    # an erratum logged by code before 0011 that 0013 read and passed over when the store first came to head (the
    # question's truth was another then): read again on the way back up, it would make the question's truth, which
    # the store now holds as derived (no person decided it since), into the erratum's fact
    from vhmine.store import Action, Instance

    store = copy_of(head_file)
    with store.session() as s:
        q = (
            s.query(Instance)
            .filter(Instance.derived_from.is_not(None), Instance.status == "ready", Instance.truth.is_(True))
            .filter(Instance.truth_fact.is_(None))
            .order_by(Instance.id)
            .first()
        )
        old = {"instance_id": q.id, "flag_id": "0123456789abcdef", "changes": {"truth": [False, True]}}
        s.add(Action(worker="carol", kind="errata_accept", payload=old, created_at=dt.datetime(2024, 1, 1)))
        iid = q.id
    before = rows(store)
    store = down_and_up(store, "0010")
    try:
        assert rows(store) == before
        with store.session(write=False) as s:
            assert s.get(Instance, iid).truth_fact is None
    finally:
        store.close()
