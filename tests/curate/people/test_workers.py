"""curate.workers: who may act. Rotated tokens, deactivated workers and admin rights are checked by the library on every
call and through the CLI; a store from migration 0002 keeps its workers and their tokens."""

from __future__ import annotations

import re

import pytest
from helpers import SIGNED_OUT, seed_store

from vhmine import curate as C
from vhmine.errors import AuthError, InputError

# --- two processes racing on PostgreSQL ---------------------------------------------------------


# --- rotated tokens, deactivated workers, admin rights (library) --------------------------------


@pytest.fixture
def seeded(tmp_path):
    store, tokens = seed_store(tmp_path / "c.db", tmp_path)
    yield store, tokens
    store.close()


def _every_action(store, me, task_id, review_id, response_id):
    """Each worker action of the library, as me: (name, call)."""
    return [
        ("take", lambda: C.next_item(store, me, "counting")),
        ("save", lambda: C.save_annotation(store, me, task_id, C.Annotation("counting.how_many", {"object": "cats"}))),
        ("skip", lambda: C.skip(store, me, task_id)),
        ("discard", lambda: C.discard(store, me, task_id, "no unambiguous question fits")),
        ("undo", lambda: C.undo_last(store, me)),
        ("drafts", lambda: C.pending_drafts(store, me)),
        ("confirm", lambda: C.confirm_drafts(store, me, [])),
        ("next review", lambda: C.work.next_review(store, me, "counting")),
        ("review", lambda: C.work.save_review(store, me, review_id, "yes")),
        ("next label", lambda: C.work.next_response(store, me)),
        ("label", lambda: C.work.label_response(store, me, response_id, "correct")),
    ]


def _state(store):
    from vhmine.store import Action, Instance, ResponseLabel, Review, Task

    with store.session() as s:
        return (
            [(t.id, t.status, t.lease_worker, t.version) for t in s.query(Task).order_by(Task.id)],
            s.query(Action).count(),
            s.query(Instance).count(),
            s.query(Review).count(),
            s.query(ResponseLabel).count(),
        )


@pytest.mark.slow
@pytest.mark.parametrize("how", ["rotate", "deactivate"])
def test_a_rotated_or_deactivated_worker_can_take_save_skip_or_undo_nothing(seeded, how):
    store, tokens = seeded
    bob_item = C.next_item(store, "bob", "color")  # something for alice to review and label
    saved = C.save_annotation(
        store,
        "bob",
        bob_item.task_id,
        C.Annotation("color.what_color", {"object": "cup"}, answers={v.id: "red" for v in bob_item.images}),
    )
    rid = C.work.add_response(store, saved.instance_ids[0], "tiny-vlm", "What color?", "red")
    me = C.sign_in(store, tokens["alice"])
    item = C.next_item(store, me, "counting")  # signed in: every action works
    C.skip(store, me, item.task_id)
    assert C.undo_last(store, me) == f"skip of item {item.task_id}"
    assert C.people.check_session(store, me) == me

    new = C.people.rotate_token(store, "alice") if how == "rotate" else C.people.deactivate_worker(store, "alice")
    before = _state(store)
    for _name, call in _every_action(store, me, item.task_id, saved.instance_ids[0], rid):
        with pytest.raises(
            AuthError,
            match="^" + SIGNED_OUT + "$"
            if how == "rotate"
            else r"^worker 'alice' is unknown or inactive: sign in again$",
        ):
            call()
    with pytest.raises(AuthError):
        C.people.check_session(store, me)
    assert _state(store) == before  # nothing saved, skipped, undone or leased
    with pytest.raises(AuthError, match=r"^unknown or inactive token"):
        C.sign_in(store, tokens["alice"])  # the old token signs in no more

    if how == "rotate":
        assert new.startswith("vhm_") and new != tokens["alice"]
        me2 = C.sign_in(store, new)
        assert (me2.name, me2.generation) == ("alice", me.generation + 1)
        assert C.next_item(store, me2, "counting").task_id == item.task_id  # still hers: leases are untouched
    else:
        C.people.activate_worker(store, "alice")
        me2 = C.sign_in(store, tokens["alice"])  # back in with the same token ...
        assert C.next_item(store, me2, "counting").task_id == item.task_id
        with pytest.raises(AuthError, match="^" + SIGNED_OUT + "$"):
            C.next_item(store, me, "counting")  # ... but the session from before stays ended
        C.people.deactivate_worker(store, "alice")
        with pytest.raises(AuthError, match=r"^worker 'alice' is unknown or inactive"):
            C.next_item(store, "alice", "counting")  # callers that pass a bare name are stopped too


def test_admin_functions_check_the_right_in_the_store(seeded):
    from vhmine.store import Worker

    store, tokens = seeded
    alice, carol = C.sign_in(store, tokens["alice"]), C.sign_in(store, tokens["carol"])
    not_admin = r"^worker 'alice' is not an admin: ask an admin \(`vhmine workers add NAME --admin`\)$"
    admin_calls = [
        lambda by: C.people.mode_agreement(store, by=by),
        lambda by: C.people.mode_agreement(store, "responses", by=by),
        lambda by: C.people.disagreements(store, by=by),
        lambda by: C.list_workers(store, by=by),
        lambda by: C.add_worker(store, "erin", by=by),
        lambda by: C.people.rotate_token(store, "dave", by=by),
        lambda by: C.people.deactivate_worker(store, "dave", by=by),
        lambda by: C.people.activate_worker(store, "dave", by=by),
    ]
    before = _state(store), [(w.name, w.active, w.generation) for w in C.list_workers(store)]
    for call in admin_calls:
        for by in (alice, "alice"):
            with pytest.raises(AuthError, match=not_admin):
                call(by)
        with pytest.raises(AuthError, match=r"^worker 'mallory' is unknown or inactive"):
            call("mallory")
    assert (_state(store), [(w.name, w.active, w.generation) for w in C.list_workers(store)]) == before
    for call in admin_calls:
        call(carol)  # an admin may
    assert {w.name for w in C.list_workers(store, by=carol)} == {"alice", "bob", "carol", "dave", "erin"}
    with store.session() as s:  # carol loses the right while signed in: her session says admin, the store does not
        s.get(Worker, "carol").is_admin = False
    assert carol.is_admin and not C.people.check_session(store, carol).is_admin
    with pytest.raises(AuthError, match=r"^worker 'carol' is not an admin"):
        C.people.mode_agreement(store, by=carol)
    with pytest.raises(InputError, match=r"^no worker 'zed' in sqlite:///\S+: `vhmine workers list` shows them$"):
        C.people.rotate_token(store, "zed")


def test_a_store_from_0002_keeps_its_workers_and_their_tokens(tmp_path):
    from sqlalchemy import text

    from vhmine.store import open_store, schema_head

    db = tmp_path / "old.db"
    old = open_store(db, target="0002")
    with old.engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO workers (name, token_hash, is_admin, active, created_at) "
                "VALUES ('ann', :h, true, true, '2024-01-02 03:04:05')"
            ),
            {"h": C.people.hash_token("vhm_old")},
        )
    old.close()
    with open_store(db) as store:
        assert store.revision() == schema_head()
        ann = C.sign_in(store, "vhm_old")
        assert ann == C.WorkerInfo("ann", True, True, 0) and C.people.mode_agreement(store, by=ann)
        C.people.rotate_token(store, "ann")
        with pytest.raises(AuthError):
            C.sign_in(store, "vhm_old")


# --- the CLI -----------------------------------------------------------------------------------


def test_cli_rotate_prints_a_new_token_and_the_old_one_fails(seeded, tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    store, tokens = seeded
    db = str(tmp_path / "c.db")
    r = CliRunner().invoke(app, ["workers", "rotate", "alice", "--db", db])
    assert r.exit_code == 0, r.output
    new = r.stdout.strip()
    assert re.fullmatch(r"vhm_[A-Za-z0-9_-]{43}", new) and new != tokens["alice"]
    assert "shown only now" in r.stderr and tokens["alice"] not in r.output
    with pytest.raises(AuthError):
        C.sign_in(store, tokens["alice"])
    assert C.sign_in(store, new).name == "alice"
    assert C.people.hash_token(new) not in r.stderr  # and the store keeps only the hash
    from vhmine.store import Worker

    with store.session() as s:
        assert s.get(Worker, "alice").token_hash == C.people.hash_token(new)

    r = CliRunner().invoke(app, ["workers", "deactivate", "alice", "--db", db])
    assert r.exit_code == 0 and "worker alice deactivated" in r.stdout
    with pytest.raises(AuthError):
        C.sign_in(store, new)
    r = CliRunner().invoke(app, ["workers", "list", "--db", db])
    assert "alice\tworker\tinactive" in r.stdout
    r = CliRunner().invoke(app, ["workers", "activate", "alice", "--db", db])
    assert r.exit_code == 0 and C.sign_in(store, new).name == "alice"
    r = CliRunner().invoke(app, ["workers", "rotate", "zed", "--db", db])
    assert (
        r.exit_code == 2
        and "no worker 'zed' in sqlite:///" in r.output
        and "`vhmine workers list` shows them" in r.output
    )


# --- the app (Streamlit AppTest) ---------------------------------------------------------------


# --- many workers on PostgreSQL: no worker waits on another's candidate, no deadlock escapes ------
