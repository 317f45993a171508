"""vhmine.store: opening, migrating and refusing stores, on SQLite and on a real PostgreSQL server.

`pg_server` / `pg_url` (conftest.py) start a throw-away PostgreSQL cluster (initdb into a temporary
folder, pg_ctl on a loopback port, as the `postgres` user when run as root).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import free_port, write_pairs, write_photos


@pytest.fixture(params=["sqlite", "postgresql"])
def any_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_url")


def _schema_diff(store):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from vhmine.store import Base

    with store.engine.connect() as conn:
        return compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)


def test_new_store_is_at_head_and_matches_the_table_classes(any_url):
    from vhmine.store import open_store, schema_head

    with open_store(any_url) as store:
        assert store.revision() == schema_head() == "0013"
        assert _schema_diff(store) == []


def test_sqlite_store_uses_wal_and_foreign_keys(tmp_path):
    from sqlalchemy.exc import IntegrityError

    from vhmine.store import Pair, open_store, utcnow

    with open_store(tmp_path / "s.db") as store:
        with store.engine.connect() as c:
            assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        with pytest.raises(IntegrityError):
            with store.session() as s:
                s.add(Pair(id="x-y", image_a="0" * 16, image_b="1" * 16, created_at=utcnow()))


def test_resolve_url_and_hidden_password(tmp_path, monkeypatch):
    from vhmine.store import DEFAULT_DB, display_url, resolve_url

    monkeypatch.delenv("VHMINE_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    assert resolve_url() == "sqlite:///" + str((tmp_path / DEFAULT_DB).resolve())
    monkeypatch.setenv("VHMINE_DB", "postgresql+psycopg://u:s3cret@db/x")
    assert resolve_url() == "postgresql+psycopg://u:s3cret@db/x"
    assert resolve_url("other.db") == "sqlite:///" + str(tmp_path / "other.db")
    assert display_url("postgresql+psycopg://u:s3cret@db/x") == "postgresql+psycopg://u:***@db/x"


def _old_store_rows(url: str, photos: list[Path]) -> dict:
    """Write, with plain SQL as vhmine at schema 0001 did, one of each kind of row."""
    import hashlib

    from sqlalchemy import text

    from vhmine.store import open_store

    sha = [hashlib.sha256(p.read_bytes()).hexdigest() for p in photos[:2]]
    ids = [s[:16] for s in sha]
    pid = "-".join(sorted(ids))
    store = open_store(url, target="0001")
    assert store.revision() == "0001"
    now = "2024-01-02 03:04:05"
    with store.engine.begin() as c:
        ins = lambda sql, **kw: c.execute(text(sql), kw)  # noqa: E731
        for i, s, p in zip(ids, sha, photos):
            ins(
                "INSERT INTO images (id, sha256, path, source, categories, created_at) VALUES (:i, :s, :p, 'mined',"
                " '[\"cat\"]', :t)",
                i=i,
                s=s,
                p=str(p),
                t=now,
            )
        ins(
            "INSERT INTO runs (name, pairs_path, meta, seeded_at) VALUES ('old', '/x/pairs.parquet', '{\"index\":"
            ' "c"}\', :t)',
            t=now,
        )
        ins(
            "INSERT INTO pairs (id, image_a, image_b, rank, clip_sim, dino_sim, gap, run, created_at) "
            "VALUES (:p, :a, :b, 1, 0.95, 0.3, 0.65, 'old', :t)",
            p=pid,
            a=ids[0],
            b=ids[1],
            t=now,
        )
        ins(
            "INSERT INTO workers (name, token_hash, is_admin, active, created_at) VALUES ('ann', :h, false, true, :t)",
            h="ab" * 32,
            t=now,
        )
        ins(
            "INSERT INTO tasks (id, mode, pair_id, priority, status, version, done_by, done_at, created_at) "
            "VALUES (:i, 'counting', :p, 1, 'done', 2, 'ann', :t, :t)",
            i=f"counting:{pid}",
            p=pid,
            t=now,
        )
        ins(
            "INSERT INTO actions (worker, kind, task_id, payload, created_at) VALUES ('ann', 'annotate', :i, '{}', :t)",
            i=f"counting:{pid}",
            t=now,
        )
        ins(
            "INSERT INTO instances (id, task_id, mode, kind, image_id, pair_id, template_id, slots, question, answers,"
            " truth, status, created_by, created_at) VALUES ('inst0001', :i, 'counting', 'YNQ', :img, :p,"
            ' \'counting.exactly\', \'{"object": "cats", "n": "2"}\', \'Are there exactly 2 cats in the picture?\','
            " '[\"No\"]', false, 'ready', 'ann', :t)",
            i=f"counting:{pid}",
            img=ids[0],
            p=pid,
            t=now,
        )
    store.close()
    return {"ids": ids, "pair": pid}


def test_store_from_schema_0001_opens_in_newer_vhmine_with_nothing_lost(tmp_path):
    from vhmine.curate import progress, ready_instances
    from vhmine.curate.work import add_response
    from vhmine.store import Response, open_store

    photos = write_photos(tmp_path / "photos", ("coffee", "rocket"))
    db = tmp_path / "old.db"
    old = _old_store_rows(f"sqlite:///{db}", photos)
    with open_store(db) as store:
        assert store.revision() == "0013"
        assert _schema_diff(store) == []
        [inst] = ready_instances(store)
        assert (inst.id, inst.question, inst.answers, inst.truth, inst.slots) == (
            "inst0001",
            "Are there exactly 2 cats in the picture?",
            ("No",),
            False,
            {"object": "cats", "n": "2"},
        )
        assert (inst.pair_id, inst.other_image_id, inst.created_by) == (old["pair"], old["ids"][1], "ann")
        assert [p.done for p in progress(store) if p.mode == "counting"] == [1]
        rid = add_response(store, "inst0001", "tiny-vlm", "Answer yes or no.", "Yes")  # a table from 0002
        with store.session() as s:
            assert s.get(Response, rid).answer == "Yes"
    assert (tmp_path / "old.db.bak-0001").is_file()  # the pre-migration copy


def test_store_from_schema_0001_migrates_on_postgresql(tmp_path, pg_url):
    from vhmine.curate import ready_instances
    from vhmine.store import open_store

    photos = write_photos(tmp_path / "photos", ("coffee", "rocket"))
    _old_store_rows(pg_url, photos)
    with open_store(pg_url) as store:
        assert store.revision() == "0013" and _schema_diff(store) == []
        assert [r.id for r in ready_instances(store)] == ["inst0001"]


def test_store_from_newer_vhmine_is_refused(tmp_path):
    from vhmine.errors import StoreVersionError
    from vhmine.store import open_store

    db = tmp_path / "new.db"
    open_store(db).close()
    import sqlite3

    with sqlite3.connect(db) as c:
        c.execute("UPDATE alembic_version SET version_num = '0042'")
    with pytest.raises(
        StoreVersionError,
        match=(
            r"^store sqlite:///.*new.db has schema revision 0042, which this vhmine does not know \(it knows up to"
            r" 0013\): "
            r"it was written by a newer vhmine; upgrade vhmine \(pip install -U vhmine\) or point --db at another"
            r" store$"
        ),
    ):
        open_store(db)


def test_foreign_database_is_refused(tmp_path):
    import sqlite3

    from vhmine.errors import StoreError
    from vhmine.store import open_store

    db = tmp_path / "other.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(
        StoreError, match=r"holds tables \(customers\) but no vhmine schema: point --db / VHMINE_DB at a new file"
    ):
        open_store(db)


def test_unreachable_server_names_the_url_without_password():
    from vhmine.errors import StoreError
    from vhmine.store import open_store

    port = free_port()
    with pytest.raises(StoreError) as info:
        open_store(f"postgresql+psycopg://u:s3cret@127.0.0.1:{port}/x")
    msg = str(info.value)
    assert msg.startswith(f"cannot open store postgresql+psycopg://u:***@127.0.0.1:{port}/x: connection failed")
    # one line, in the driver's words: no library class name, no SQLAlchemy "Background on this error" link
    assert "\n" not in msg and "OperationalError" not in msg and "sqlalche.me" not in msg
    assert "s3cret" not in msg and msg.endswith("check --db / VHMINE_DB and that the database server is running")


def test_seed_on_postgresql(tmp_path, pg_url):
    from vhmine.curate import progress
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    pairs = write_pairs(tmp_path / "runs" / "pg", write_photos(tmp_path / "photos", ("coffee", "rocket", "horse")))
    with open_store(pg_url) as store:
        assert sum(seed_pairs(store, pairs, per_mode=2).tasks_added.values()) == 16
        assert sum(p.remaining for p in progress(store)) == 16


def test_migrations_ship_in_the_package_as_one_linear_chain():
    from importlib.resources import files

    from alembic.script import ScriptDirectory

    from vhmine.store.db import _alembic_config, _revisions, schema_head

    names = {p.name for p in files("vhmine.store.migrations.versions").iterdir()}
    assert {
        "__init__.py",
        "0001_initial.py",
        "0002_next_stages.py",
        "0003_secrets.py",
        "0004_response_endpoint.py",
        "0005_worker_status.py",
        "0006_blind_answers.py",
        "0007_drafts_errata.py",
        "0008_near_duplicates.py",
        "0009_blind_rescoring.py",
        "0010_worker_mode.py",
        "0011_derived_facts.py",
        "0012_held_tasks.py",
        "0013_old_decisions.py",
    } <= names  # importable package: wheels carry it
    revs = list(ScriptDirectory.from_config(_alembic_config()).walk_revisions())
    # what vhmine reads without importing Alembic (status) is what Alembic reads
    assert _revisions() == {r.revision: r.down_revision for r in revs}
    assert schema_head() == ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert [(r.revision, r.down_revision) for r in revs] == [
        ("0013", "0012"),
        ("0012", "0011"),
        ("0011", "0010"),
        ("0010", "0009"),
        ("0009", "0008"),
        ("0008", "0007"),
        ("0007", "0006"),
        ("0006", "0005"),
        ("0005", "0004"),
        ("0004", "0003"),
        ("0003", "0002"),
        ("0002", "0001"),
        ("0001", None),
    ]


def test_cli_help_imports_no_store_or_app_libraries():
    import sys

    code = (
        "import sys; from vhmine.cli import main\n"
        "try:\n    main(['seed', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('sqlalchemy', 'alembic', 'streamlit', 'psycopg') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "--per-mode" in out and out.strip().splitlines()[-1] == "[]"


def test_open_store_without_create_refuses_a_store_that_does_not_exist(any_url, tmp_path):
    """create=False (every command but seed, generate, manipulate and workers add): a missing SQLite file, an empty
    one, or a database without vhmine's schema is named, and nothing is created in it."""
    from sqlalchemy import create_engine, inspect

    from vhmine.errors import StoreError
    from vhmine.store import open_store

    typo = tmp_path / "sub" / "typo.db"
    with pytest.raises(StoreError, match=rf"no store at {typo}: check --db / VHMINE_DB \(only `vhmine seed`, "):
        open_store(typo, create=False)
    assert not typo.exists() and not typo.parent.exists()
    with pytest.raises(StoreError, match=r"no store at .*: check --db"):
        open_store(any_url, create=False)  # a new SQLite file, or a PostgreSQL database with nothing in it
    if any_url.startswith("sqlite"):  # no file at all (a connection to look would make an empty one: no store)
        assert not (tmp_path / "store.db").exists()
    else:
        engine = create_engine(any_url)
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == []  # no schema was put there
        engine.dispose()
    open_store(any_url).close()  # created, as seed does
    with open_store(any_url, create=False) as store:
        assert store.revision() is not None


# --- a PostgreSQL restart under workers --------------------------------------------------------------


@pytest.mark.slow
def test_a_postgresql_restart_mid_session_loses_nothing_and_applies_nothing_twice(tmp_path, pg_own_server):
    """Workers of the curation library on a server of the test's own, restarted three ways: (1) while alice's
    save waits on a row lock inside its transaction (the server cuts it: retried, and saved once); (2) between
    two actions of bob's (his pooled connection is dead: the next action reconnects); (3) while the server is
    down when carol asks for an item (she waits, and gets it once it is back); (4) during dave's COMMIT (not
    retried: he is told it may have been saved)."""
    import threading
    import time

    import psycopg
    from helpers import counting_annotation, seed_store
    from sqlalchemy import func, select

    from vhmine import curate as C
    from vhmine.errors import StoreConnectionError
    from vhmine.store import Action, Instance, Task

    srv = pg_own_server
    url = srv.new_database()
    store, _ = seed_store(url, tmp_path, per_mode=4)
    a, b = C.next_item(store, "alice", "counting"), C.next_item(store, "bob", "counting")
    libpq = url.replace("postgresql+psycopg://", "postgresql://")

    # (1) alice's save blocks on her task's row, held by another transaction; the restart cuts both
    holder = psycopg.connect(libpq)
    holder.execute("UPDATE tasks SET priority = priority WHERE id = %s", (a.task_id,))
    got: dict = {}

    def save():
        try:
            got["ok"] = C.save_annotation(store, "alice", a.task_id, counting_annotation(a))
        except Exception as err:  # handed to the test, which asserts on it
            got["err"] = err

    th = threading.Thread(target=save, daemon=True)
    th.start()
    with psycopg.connect(libpq, autocommit=True) as admin:
        deadline = time.monotonic() + 20
        while not admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()[0]:
            assert time.monotonic() < deadline, "alice's save never waited for the row"
            time.sleep(0.05)
    srv.restart()
    th.join(60)
    holder.close()
    assert "err" not in got, f"{type(got['err']).__name__}: {got['err']}"
    assert got["ok"].task_id == a.task_id and len(got["ok"].instance_ids) == 2

    # (2) bob's next action after the restart: his pooled connection died with the server
    srv.restart()
    saved_b = C.save_annotation(store, "bob", b.task_id, counting_annotation(b, "1", "2"))

    # (3) the server is down when carol asks; it comes back 1.5 s later
    srv.stop()
    timer = threading.Timer(1.5, srv.start)
    timer.start()
    c = C.next_item(store, "carol", "counting")
    timer.join()
    assert c is not None and c.task_id not in (a.task_id, b.task_id)
    C.save_annotation(store, "carol", c.task_id, counting_annotation(c, "5", "4"))

    # (4) the restart cuts dave's save during its COMMIT (a deferred trigger makes the commit wait): that one is
    # never retried, it may have been saved, and he is told so; he looks, and saves it once
    d = C.next_item(store, "dave", "counting")
    assert d is not None
    with psycopg.connect(libpq, autocommit=True) as admin:
        admin.execute(
            "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$"
        )
        admin.execute(
            "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON actions DEFERRABLE INITIALLY DEFERRED "
            "FOR EACH ROW EXECUTE FUNCTION slow_commit()"
        )
    got = {}

    def save_d():
        try:
            got["ok"] = C.save_annotation(store, "dave", d.task_id, counting_annotation(d))
        except Exception as err:  # handed to the test, which asserts on it
            got["err"] = err

    th = threading.Thread(target=save_d, daemon=True)
    th.start()
    with psycopg.connect(libpq, autocommit=True) as admin:
        deadline = time.monotonic() + 20
        while not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'").fetchone()[0]:
            assert time.monotonic() < deadline, f"dave's commit never reached the trigger ({got})"
            time.sleep(0.05)
    srv.restart()
    th.join(60)
    assert isinstance(got.get("err"), StoreConnectionError), got
    assert "broke while saving" in str(got["err"]) and "may or may not have been saved" in str(got["err"])
    with psycopg.connect(libpq, autocommit=True) as admin:
        admin.execute("DROP TRIGGER slow_commit ON actions")
    assert C.save_annotation(store, "dave", d.task_id, counting_annotation(d)).task_id == d.task_id

    # nothing lost, nothing twice: one save per worker, with its instances, each task done once
    with store.session(write=False) as s:
        annotate = s.execute(
            select(Action.worker, func.count()).where(Action.kind == "annotate").group_by(Action.worker)
        ).all()
        assert sorted(annotate) == [("alice", 1), ("bob", 1), ("carol", 1), ("dave", 1)]
        for task_id, worker in ((a.task_id, "alice"), (b.task_id, "bob"), (c.task_id, "carol"), (d.task_id, "dave")):
            t = s.get(Task, task_id)
            assert (t.status, t.done_by) == ("done", worker)
            kinds = s.execute(
                select(Instance.kind, func.count()).where(Instance.task_id == task_id).group_by(Instance.kind)
            ).all()
            assert sorted(kinds) == [("OEQ", 2), ("YNQ", 4)]  # two open answers, four yes/no drafts
        answers = {i.id: i.answers for i in s.scalars(select(Instance).where(Instance.id.in_(saved_b.instance_ids)))}
    assert sorted(answers.values()) == [["1"], ["2"]]
    store.close()


def _as_unprivileged():
    """A command prefix under which file permissions hold: none for a normal user; root without the
    capabilities that let it write anywhere (setpriv), as a read-only folder stops a normal user."""
    import os
    import shutil

    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: a read-only folder does not stop root")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


@pytest.mark.parametrize("exists", [False, True])
def test_a_sqlite_store_in_a_read_only_folder_is_named_as_such(tmp_path, exists):
    import os
    import sys

    folder = tmp_path / "ro"
    folder.mkdir()
    if exists:
        from vhmine.store import open_store

        open_store(folder / "store.db").close()
    folder.chmod(0o555)
    try:
        # a store there is read (workers list); none there is made by a command that creates one (workers add)
        words = ["workers", "list"] if exists else ["workers", "add", "alice"]
        r = subprocess.run(
            [*_as_unprivileged(), sys.executable, "-m", "vhmine.cli", *words, "--db", str(folder / "store.db")],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, COLUMNS="200"),
        )
    finally:
        folder.chmod(0o755)
    assert r.returncode == 2, r.stderr
    said = " ".join(r.stderr.split())
    assert (
        f"cannot open store {folder / 'store.db'}: the folder {folder} is not writable, and SQLite writes the store "
        "and its -wal and -shm files beside it" in said
    ), said
    assert "--db with a file in a folder you can write to" in said
    assert "database server" not in said and "Traceback" not in said


def test_reading_only_creates_and_migrates_nothing(tmp_path):
    from vhmine.errors import StoreMissingError, StoreVersionError
    from vhmine.store import open_store

    with pytest.raises(StoreMissingError, match="no store at .* yet: `vhmine seed"):
        open_store(tmp_path / "none.db", migrate=False)
    assert not (tmp_path / "none.db").exists()
    open_store(tmp_path / "old.db", target="0001").close()
    before = (tmp_path / "old.db").read_bytes()
    with pytest.raises(StoreVersionError, match="has schema revision 0001.*the next command that writes to it"):
        open_store(tmp_path / "old.db", migrate=False)
    assert (tmp_path / "old.db").read_bytes() == before and not list(tmp_path.glob("old.db.bak-*"))
    open_store(tmp_path / "old.db").close()  # migrated now
    with open_store(tmp_path / "old.db", migrate=False) as store:
        assert store.revision() is not None


def test_schema_0011_records_a_ready_own_worded_yes_no_question_as_its_workers_fact(tmp_path):
    from alembic import command
    from helpers import make_ready_store
    from sqlalchemy import create_engine, text

    from vhmine.store import Instance, open_store
    from vhmine.store.db import _alembic_config

    store = make_ready_store(tmp_path)
    with store.session() as s:  # a question alice confirmed in her own words (before 0011 no fact recorded it)
        d = (
            s.query(Instance)
            .filter(Instance.derived_from.is_not(None), Instance.truth.is_(True))
            .order_by(Instance.id)
            .first()
        )
        d.template_id, d.truth_fact, iid, src = (
            "color.own" if d.mode == "color" else "counting.own",
            None,
            d.id,
            d.derived_from,
        )
        answers = list(s.get(Instance, src).answers)
    store.close()
    engine = create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0010")
        assert "truth_fact" not in {r[1] for r in conn.execute(text("PRAGMA table_info(instances)"))}
    engine.dispose()
    with open_store(tmp_path / "store.db") as store, store.session(write=False) as s:
        assert store.revision() == "0013"
        assert s.get(Instance, iid).truth_fact == {"truth": True, "by": "worker alice", "source": answers}
        assert s.query(Instance).filter(Instance.truth_fact.is_not(None), Instance.id != iid).count() == 0


def test_schema_0012_holds_a_task_with_its_reason_and_its_downgrade_puts_it_back_in_the_queue(tmp_path):
    # issue 32: a task whose image is missing or changed is held (status "held", held_reason), curate.work.holds
    from alembic import command
    from helpers import seed_store
    from sqlalchemy import create_engine, text

    from vhmine.store import Task, open_store
    from vhmine.store.db import _alembic_config

    store, _ = seed_store(tmp_path / "store.db", tmp_path)
    with store.session() as s:
        t = s.query(Task).filter_by(status="open").order_by(Task.id).first()
        tid = t.id
        t.status, t.held_reason = "held", "image missing: 0123456789abcdef"
    store.close()
    engine = create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0011")
        assert "held_reason" not in {r[1] for r in conn.execute(text("PRAGMA table_info(tasks)"))}
        assert conn.execute(text("SELECT status FROM tasks WHERE id = :i"), {"i": tid}).scalar() == "open"
    engine.dispose()
    with open_store(tmp_path / "store.db") as store, store.session(write=False) as s:
        assert store.revision() == "0013" and _schema_diff(store) == []
        assert (s.get(Task, tid).status, s.get(Task, tid).held_reason) == ("open", None)
