"""Issue 8, curation: undo races on a real PostgreSQL server (two processes), and who may act: rotated
tokens, deactivated workers and admin rights, checked by the library on every call, through the CLI
and in the app (Streamlit AppTest; the real-browser check is in test_app_browser.py)."""

from __future__ import annotations

import multiprocessing as mp
import random
import re
import time
from pathlib import Path

import pytest

from helpers import counting_annotation, seed_store

from vhmine import curate as C
from vhmine.errors import AuthError, InputError

ROUNDS = 60
RACED = ("LeaseError", "cannot undo: your last action was undone elsewhere meanwhile (another tab?): nothing changed; "
                       "reload the page")
SIGNED_OUT = r"the sign-in of 'alice' is no longer valid \(the token was replaced or the worker deactivated\): nothing saved; sign in again with the current token"


# --- two processes racing on PostgreSQL ---------------------------------------------------------

def _racer(url, idx, job, worker, mode, rounds, barrier, out):  # runs in a spawned process
    from vhmine import curate as C
    from vhmine.errors import VhmineError
    from vhmine.store import open_store

    store = open_store(url)
    jitter = random.Random(idx)
    try:
        for _ in range(rounds):
            barrier.wait(120)  # the main process has set the round up: go together
            time.sleep(jitter.uniform(0, 0.008))  # vary who starts first, so the two calls interleave every way
            try:
                if job == "undo":
                    res = ("ok", C.undo_last(store, worker))
                else:
                    item = C.next_item(store, worker, mode)
                    res = ("ok", item and item.task_id)
            except VhmineError as err:
                res = (type(err).__name__, str(err))
            out.put((idx, res))
            barrier.wait(120)  # both done: the main process checks
    finally:
        store.close()


def _race(url, jobs, setup, check, rounds=ROUNDS):
    """Run `jobs` [(job, worker, mode)] in separate processes, `rounds` times, started together each
    round after `setup()`; `check(before, results)` sees each round's results in job order."""
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(len(jobs) + 1), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(url, i, *job, rounds, barrier, out), daemon=True) for i, job in enumerate(jobs)]
    for p in procs:
        p.start()
    try:
        for _ in range(rounds):
            before = setup()
            barrier.wait(180)
            barrier.wait(180)
            got = dict(out.get(timeout=30) for _ in jobs)
            check(before, [got[i] for i in range(len(jobs))])
    finally:
        barrier.abort()
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()


def _task(store, task_id):
    from vhmine.store import Task

    with store.session() as s:
        return s.get(Task, task_id)


def _actions(store, worker, kind):
    from vhmine.store import Action

    with store.session() as s:
        return s.query(Action).filter(Action.worker == worker, Action.kind == kind).order_by(Action.id).all()


def test_undo_and_take_racing_on_postgresql_never_both_win(tmp_path, pg_url):
    """Each round alice undoes her skip of the only counting item while bob takes it: the item ends with
    exactly one of them, in one state reached by one transition, and the loser knows it lost."""
    store, _ = seed_store(pg_url, tmp_path, per_mode=1)
    tid = C.next_item(store, "alice", "counting").task_id
    C.skip(store, "alice", tid)
    wins = {"alice": 0, "bob": 0}

    def setup():
        return _task(store, tid).version

    def check(before, results):
        (u_status, undone), (t_status, taken) = results
        t = _task(store, tid)
        assert (u_status, t_status) == ("ok", "ok"), results
        assert t.status == "open" and t.version == before + 1, (results, t.version, before)  # one transition applied
        holder = "bob" if taken == tid else "alice"
        assert taken in (tid, None) and t.lease_worker == holder, (results, t.lease_worker)
        if holder == "alice":  # the undo won: it says the item came back
            assert undone == f"skip of item {tid}"
        else:  # the take won: the undo says where the item is and left it there
            assert undone == f"skip of item {tid} (the item is leased to bob, so it stays there)"
        assert _actions(store, "alice", "skip")[-1].undone_at is not None
        wins[holder] += 1
        if holder == "bob":  # whoever holds it can act on it; hand it back to alice's skipped state
            C.skip(store, "bob", tid)
            assert C.next_item(store, "alice", "counting").task_id == tid
        C.skip(store, "alice", tid)

    _race(pg_url, [("undo", "alice", "counting"), ("take", "bob", "counting")], setup, check)
    assert wins["alice"] + wins["bob"] == ROUNDS and min(wins.values()) > 0, wins  # each side won some rounds
    store.close()


def test_two_undos_of_one_action_on_postgresql_never_both_apply(tmp_path, pg_url):
    """Two tabs of alice undo her discard at the same moment: one undo applies, the other changes nothing."""
    store, _ = seed_store(pg_url, tmp_path, per_mode=1)
    tid = C.next_item(store, "alice", "color").task_id

    def setup():
        C.discard(store, "alice", tid, "no unambiguous question fits")
        return _task(store, tid).version

    def check(before, results):
        applied = [msg for status, msg in results if status == "ok"]
        assert applied == [f"discard of item {tid}"], results
        [loser] = [r for r in results if r[0] != "ok"]
        assert loser in (RACED, ("InputError", "nothing to undo for alice")), results  # raced for it, or came after
        raced.append(loser == RACED)
        t = _task(store, tid)
        assert (t.status, t.lease_worker, t.done_by, t.version) == ("open", "alice", None, before + 1)
        assert all(a.undone_at is not None for a in _actions(store, "alice", "discard"))

    raced = []
    _race(pg_url, [("undo", "alice", "color"), ("undo", "alice", "color")], setup, check)
    assert any(raced), "the two undos never overlapped: the test proved nothing"
    assert len(_actions(store, "alice", "discard")) == ROUNDS
    store.close()


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
        ("next review", lambda: C.next_review(store, me, "counting")),
        ("review", lambda: C.save_review(store, me, review_id, "yes")),
        ("next label", lambda: C.next_response(store, me)),
        ("label", lambda: C.label_response(store, me, response_id, "correct")),
    ]


def _state(store):
    from vhmine.store import Action, Instance, Review, ResponseLabel, Task

    with store.session() as s:
        return ([(t.id, t.status, t.lease_worker, t.version) for t in s.query(Task).order_by(Task.id)],
                s.query(Action).count(), s.query(Instance).count(), s.query(Review).count(), s.query(ResponseLabel).count())


@pytest.mark.parametrize("how", ["rotate", "deactivate"])
def test_a_rotated_or_deactivated_worker_can_take_save_skip_or_undo_nothing(seeded, how):
    store, tokens = seeded
    bob_item = C.next_item(store, "bob", "color")  # something for alice to review and label
    saved = C.save_annotation(store, "bob", bob_item.task_id, C.Annotation(
        "color.what_color", {"object": "cup"}, answers={v.id: "red" for v in bob_item.images}))
    rid = C.add_response(store, saved.instance_ids[0], "tiny-vlm", "What color?", "red")
    me = C.sign_in(store, tokens["alice"])
    item = C.next_item(store, me, "counting")  # signed in: every action works
    C.skip(store, me, item.task_id)
    assert C.undo_last(store, me) == f"skip of item {item.task_id}"
    assert C.check_session(store, me) == me

    new = C.rotate_token(store, "alice") if how == "rotate" else C.deactivate_worker(store, "alice")
    before = _state(store)
    for name, call in _every_action(store, me, item.task_id, saved.instance_ids[0], rid):
        with pytest.raises(AuthError, match="^" + SIGNED_OUT + "$" if how == "rotate" else
                           r"^worker 'alice' is unknown or inactive: sign in again$"):
            call()
    with pytest.raises(AuthError):
        C.check_session(store, me)
    assert _state(store) == before  # nothing saved, skipped, undone or leased
    with pytest.raises(AuthError, match=r"^unknown or inactive token"):
        C.sign_in(store, tokens["alice"])  # the old token signs in no more

    if how == "rotate":
        assert new.startswith("vhm_") and new != tokens["alice"]
        me2 = C.sign_in(store, new)
        assert (me2.name, me2.generation) == ("alice", me.generation + 1)
        assert C.next_item(store, me2, "counting").task_id == item.task_id  # still hers: leases are untouched
    else:
        C.activate_worker(store, "alice")
        me2 = C.sign_in(store, tokens["alice"])  # back in with the same token ...
        assert C.next_item(store, me2, "counting").task_id == item.task_id
        with pytest.raises(AuthError, match="^" + SIGNED_OUT + "$"):
            C.next_item(store, me, "counting")  # ... but the session from before stays ended
        C.deactivate_worker(store, "alice")
        with pytest.raises(AuthError, match=r"^worker 'alice' is unknown or inactive"):
            C.next_item(store, "alice", "counting")  # callers that pass a bare name are stopped too


def test_admin_functions_check_the_right_in_the_store(seeded):
    from vhmine.store import Worker

    store, tokens = seeded
    alice, carol = C.sign_in(store, tokens["alice"]), C.sign_in(store, tokens["carol"])
    not_admin = r"^worker 'alice' is not an admin: ask an admin \(`vhmine workers add NAME --admin`\)$"
    admin_calls = [
        lambda by: C.agreement(store, by=by), lambda by: C.agreement(store, "responses", by=by),
        lambda by: C.disagreements(store, by=by), lambda by: C.list_workers(store, by=by),
        lambda by: C.add_worker(store, "erin", by=by), lambda by: C.rotate_token(store, "dave", by=by),
        lambda by: C.deactivate_worker(store, "dave", by=by), lambda by: C.activate_worker(store, "dave", by=by),
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
    assert carol.is_admin and not C.check_session(store, carol).is_admin
    with pytest.raises(AuthError, match=r"^worker 'carol' is not an admin"):
        C.agreement(store, by=carol)
    with pytest.raises(InputError, match=r"^no worker 'zed' in sqlite:///\S+: `vhmine workers list` shows them$"):
        C.rotate_token(store, "zed")


def test_a_store_from_0002_keeps_its_workers_and_their_tokens(tmp_path):
    from sqlalchemy import text

    from vhmine.store import open_store, schema_head

    db = tmp_path / "old.db"
    old = open_store(db, target="0002")
    with old.engine.begin() as c:
        c.execute(text("INSERT INTO workers (name, token_hash, is_admin, active, created_at) "
                       "VALUES ('ann', :h, true, true, '2024-01-02 03:04:05')"), {"h": C.hash_token("vhm_old")})
    old.close()
    with open_store(db) as store:
        assert store.revision() == schema_head()
        ann = C.sign_in(store, "vhm_old")
        assert ann == C.WorkerInfo("ann", True, True, 0) and C.agreement(store, by=ann)
        C.rotate_token(store, "ann")
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
    assert C.hash_token(new) not in r.stderr  # and the store keeps only the hash
    from vhmine.store import Worker

    with store.session() as s:
        assert s.get(Worker, "alice").token_hash == C.hash_token(new)

    r = CliRunner().invoke(app, ["workers", "deactivate", "alice", "--db", db])
    assert r.exit_code == 0 and "worker alice deactivated" in r.stdout
    with pytest.raises(AuthError):
        C.sign_in(store, new)
    r = CliRunner().invoke(app, ["workers", "list", "--db", db])
    assert "alice\tworker\tinactive" in r.stdout
    r = CliRunner().invoke(app, ["workers", "activate", "alice", "--db", db])
    assert r.exit_code == 0 and C.sign_in(store, new).name == "alice"
    r = CliRunner().invoke(app, ["workers", "rotate", "zed", "--db", db])
    assert r.exit_code == 2 and "no worker 'zed' in sqlite:///" in r.output and "`vhmine workers list` shows them" in r.output


# --- the app (Streamlit AppTest) ---------------------------------------------------------------

APP = str(Path(__file__).resolve().parent.parent / "vhmine" / "apps" / "curate.py")


@pytest.fixture
def env(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    store, tokens = seed_store(tmp_path / "app.db", tmp_path)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'app.db'}")
    yield store, tokens
    store.close()


def _signed_in(token, page=None, mode="counting"):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    if page:
        at.sidebar.radio(key="page").set_value(page).run()
    at.sidebar.selectbox(key="mode").select(mode).run()
    assert not at.exception, at.exception
    return at


def _plain(markdown: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def _by_label(widgets, label):
    [w] = [w for w in widgets if w.label == label]
    return w


@pytest.mark.parametrize("how", ["rotate", "deactivate"])
def test_app_signs_a_worker_out_at_the_next_click_and_saves_nothing(env, how):
    store, tokens = env
    at = _signed_in(tokens["alice"])
    _by_label(at.text_input, "{object}").input("cats").run()
    _by_label(at.text_area, "Reference answer(s) for image A, one per line").input("3")
    _by_label(at.text_area, "Reference answer(s) for image B, one per line").input("2")
    C.rotate_token(store, "alice") if how == "rotate" else C.deactivate_worker(store, "alice")
    _by_label(at.button, "Save").click().run()
    assert not at.exception, at.exception
    msg = (SIGNED_OUT if how == "rotate" else r"worker 'alice' is unknown or inactive: sign in again")
    assert [_plain(e.value) for e in at.error] and re.fullmatch("You were signed out: " + msg, _plain(at.error[0].value))
    assert "worker" not in at.session_state and len(at.sidebar.radio) == 0 and at.text_input(key="token")
    assert C.ready_instances(store) == [] and C.pending_drafts(store, "bob") == []
    assert _actions(store, "alice", "annotate") == []
    at.text_input(key="token").input(tokens["alice"])  # the old token no longer signs in
    at.button[0].click().run()
    assert "worker" not in at.session_state and _plain(at.error[0].value).startswith("unknown or inactive token")


def test_app_undo_after_rotation_undoes_nothing(env):
    store, tokens = env
    at = _signed_in(tokens["alice"])
    item = C.next_item(store, "alice", "counting")
    C.skip(store, "alice", item.task_id)  # alice's last action
    C.rotate_token(store, "alice")
    at.sidebar.button(key="undo").click().run()
    assert re.fullmatch("You were signed out: " + SIGNED_OUT, _plain(at.error[0].value))
    assert _actions(store, "alice", "skip")[-1].undone_at is None


def test_app_admin_page_needs_the_right_in_the_store(env):
    from vhmine.store import Worker

    store, tokens = env
    item = C.next_item(store, "alice", "counting")
    C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    at = _signed_in(tokens["carol"], page="Admin")
    assert [h.value for h in at.header] == ["Progress", "Agreement"]
    assert [d.value["name"].tolist() for d in at.main.table if "name" in d.value] == [["alice", "bob", "carol", "dave"]]
    with store.session() as s:  # carol is no longer an admin: the page she has open gets no data
        s.get(Worker, "carol").is_admin = False
    at.run()
    assert not at.exception, at.exception
    assert "Agreement" not in [h.value for h in at.header] and not [d for d in at.main.table if "name" in d.value]
    assert _by_label(at.sidebar.radio, "Page").options == ["Annotate", "Review", "Label answers", "Verify drafts", "Errata", "Blind flags"]


# --- many workers on PostgreSQL: no worker waits on another's candidate, no deadlock escapes ------

def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _wait_for_lock_wait(admin, seconds=20) -> None:
    """Until some backend of this database waits for a row lock (the library's call is blocked)."""
    deadline = time.monotonic() + seconds
    while not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND wait_event_type = 'Lock'").fetchone()[0]:
        assert time.monotonic() < deadline, "the library's call never waited for the lock"
        time.sleep(0.05)


def _in_thread(fn):
    import threading

    got = {}

    def run():
        try:
            got["ok"] = fn()
        except Exception as err:  # handed to the test, which asserts on it
            got["err"] = err

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, got


def _open_ids(mode, Task):
    from sqlalchemy import select

    return select(Task.id).where(Task.mode == mode, Task.status == "open").order_by(Task.priority, Task.id)


def test_next_item_on_postgresql_passes_over_a_task_another_transaction_is_changing(tmp_path, pg_url):
    """While another transaction holds the first candidate's row (a worker saving or skipping it),
    next_item hands out the next task at once instead of queueing behind it (where locks left by lost
    compare-and-sets piled up into deadlocks at 32 workers)."""
    import psycopg

    from vhmine.store import Task

    store, _ = seed_store(pg_url, tmp_path, per_mode=2)
    with store.session() as s:
        first, second = s.scalars(_open_ids("counting", Task)).all()[:2]
    with psycopg.connect(_libpq(pg_url)) as holder:
        holder.execute("UPDATE tasks SET priority = priority WHERE id = %s", (first,))  # mid-save, not committed
        th, got = _in_thread(lambda: C.next_item(store, "alice", "counting"))
        th.join(10)
        waited = th.is_alive()
        holder.rollback()
    th.join(60)
    assert not waited, "next_item waited for the row another transaction holds"
    assert "err" not in got and got["ok"].task_id == second, got
    assert C.next_item(store, "bob", "counting").task_id == first  # released: the next worker gets it
    store.close()


def _deadlocked_undo(store, url, action_id, instance_id):
    """alice's undo of her annotation claims the action, then waits for an instance that another
    transaction holds; that one then waits for the action: a real deadlock, which PostgreSQL breaks by
    aborting the undo (its deadlock_timeout runs out first). Returns the undo's outcome."""
    import psycopg

    with psycopg.connect(_libpq(url), autocommit=True) as admin, psycopg.connect(_libpq(url)) as other:
        other.execute("SET deadlock_timeout = '30s'")  # the undo's backend (1 s) finds the cycle, not this one
        other.execute("SELECT id FROM instances WHERE id = %s FOR UPDATE", (instance_id,))
        th, got = _in_thread(lambda: C.undo_last(store, "alice"))
        _wait_for_lock_wait(admin)
        other.execute("UPDATE actions SET payload = payload WHERE id = %s", (action_id,))  # waits: the cycle closes
        other.rollback()
    th.join(60)
    assert not th.is_alive()
    return got


def test_a_deadlock_on_postgresql_is_retried_and_never_reaches_the_app_as_a_driver_error(tmp_path, pg_url, monkeypatch):
    from vhmine.curate import _shared
    from vhmine.errors import LeaseError
    from vhmine.store import Instance

    store, _ = seed_store(pg_url, tmp_path, per_mode=1)
    item = C.next_item(store, "alice", "counting")
    saved = C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    [act] = _actions(store, "alice", "annotate")

    monkeypatch.setattr(_shared, "TRIES", 1, raising=False)  # no second attempt: the caller gets a LeaseError, nothing changed
    got = _deadlocked_undo(store, pg_url, act.id, saved.instance_ids[0])
    assert isinstance(got.get("err"), LeaseError), got
    assert str(got["err"]) == ("the store is busy: undo last was aborted 1 times by the database to resolve a deadlock "
                               "with other workers: nothing saved; try again")
    assert _task(store, item.task_id).status == "done" and _actions(store, "alice", "annotate")[0].undone_at is None

    monkeypatch.setattr(_shared, "TRIES", 4)  # the default: the aborted attempt is run again and succeeds
    got = _deadlocked_undo(store, pg_url, act.id, saved.instance_ids[0])
    assert got == {"ok": f"annotation of item {item.task_id}"}, got
    t = _task(store, item.task_id)
    assert (t.status, t.lease_worker) == ("open", "alice")
    with store.session() as s:
        assert {s.get(Instance, i).status for i in saved.instance_ids} == {"discarded"}
    store.close()


def _stresser(url, idx, seconds, go, out):  # runs in a spawned process
    from vhmine import curate as C
    from vhmine.errors import InputError, LeaseError
    from vhmine.store import open_store

    from helpers import counting_annotation

    store = open_store(url)
    rng = random.Random(idx)
    me = ("alice", "bob", "carol", "dave")[idx % 4]
    done, errors = {"take": 0, "conflict": 0}, []
    go.wait(180)  # every process has imported and opened the store: start together
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            item = C.next_item(store, me, "counting", lease_s=0.2)
            if item is None:
                C.undo_last(store, me, lease_s=0.2)  # an empty queue: reopen something
                continue
            done["take"] += 1
            r = rng.random()
            if r < 0.5:  # most items go back to the queue, so every worker keeps racing for the same few
                C.skip(store, me, item.task_id)
            elif r < 0.75:
                C.save_annotation(store, me, item.task_id, counting_annotation(item))
            elif r < 0.9:
                C.undo_last(store, me, lease_s=0.2)
            else:
                C.discard(store, me, item.task_id, "no unambiguous question fits")
        except LeaseError:
            done["conflict"] += 1
        except InputError as err:
            if not str(err).startswith("nothing to undo"):
                errors.append(f"{type(err).__name__}: {err}")
        except Exception as err:
            errors.append(f"{type(err).__name__}: {str(err).splitlines()[0]}")
    store.close()
    out.put((done, errors))


def test_many_workers_on_postgresql_hit_nothing_but_lease_conflicts(tmp_path, pg_url):
    """16 processes take, skip, save, undo and discard the same six items with 0.2 s leases: every
    failure a worker sees is the library's LeaseError, none a deadlock or other driver error."""
    store, _ = seed_store(pg_url, tmp_path, per_mode=6)
    store.close()
    ctx = mp.get_context("spawn")
    go, out = ctx.Barrier(16), ctx.Queue()
    procs = [ctx.Process(target=_stresser, args=(pg_url, i, 5.0, go, out), daemon=True) for i in range(16)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=240) for _ in procs]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
    errors = [e for _, errs in results for e in errs]
    assert errors == [], (len(errors), sorted(set(errors))[:5])
    assert sum(d["take"] for d, _ in results) > 50, results  # the workers really raced
