"""scripts/bench_store.py: the store's load figure runs on both backends, and its checks can fail.

The first test runs the script as a user does (a subprocess, its own throw-away PostgreSQL server);
the second stops it with Ctrl-C and finds its server and files gone; the third feeds its checker
a store that breaks each promise in turn: a lost action, a task annotated twice, a done task still
leased, an item held by two workers.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture
def bench():
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_store

        yield bench_store
    finally:
        sys.path.remove(str(SCRIPTS))


def _have_postgres() -> bool:
    return bool(list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))) or shutil.which("initdb") is not None


@pytest.fixture
def script_tmp():
    """A TMPDIR for the script that the `postgres` user can reach (pytest's tmp_path is root's alone)."""
    d = tempfile.mkdtemp(prefix="vhmine-bench-test-")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


def _start(args: list[str], tmp: Path, **kw):
    env = dict(
        os.environ,
        TMPDIR=str(tmp),
        PYTHONPATH=os.pathsep.join(filter(None, [str(SCRIPTS.parent), os.environ.get("PYTHONPATH")])),
    )
    return subprocess.Popen(
        [sys.executable, str(SCRIPTS / "bench_store.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp,
        **kw,
    )


@pytest.mark.slow
def test_bench_store_runs_workers_on_sqlite_and_postgresql_and_every_check_passes(script_tmp):
    if not _have_postgres():
        pytest.fail(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql"
            " (scripts/ci_services.sh)"
        )
    proc = _start(
        ["--workers", "4", "--seconds", "2", "--tasks", "120", "--backends", "sqlite", "postgresql"], script_tmp
    )
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, out + err[-3000:]
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["sqlite"], ["postgresql"])]
    assert [r[:2] for r in rows] == [["sqlite", "4"], ["postgresql", "4"]], out
    for r in rows:
        assert int(r[3]) > 0 and float(r[8]) > 0, out  # items were taken, actions per second measured
        assert r[-5:] == ["PASS"] * 5, out
    assert out.rstrip().endswith(
        "PASS: no double annotation, no action lost, every task in one state, one holder per lease"
    )
    assert "FAIL" not in out
    assert list(script_tmp.iterdir()) == []  # the store files and the PostgreSQL cluster are gone


def _actions_logged(port: int) -> bool:
    import psycopg

    try:
        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", autocommit=True) as c:
            names = [r[0] for r in c.execute("SELECT datname FROM pg_database WHERE datname LIKE 'b\\_%'")]
        for name in names:
            with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname=name, autocommit=True) as c:
                if (
                    c.execute("SELECT to_regclass('actions') IS NOT NULL").fetchone()[0]
                    and c.execute("SELECT count(*) FROM actions").fetchone()[0] > 0
                ):
                    return True
    except psycopg.OperationalError:  # the server is still starting
        pass
    return False


@pytest.mark.slow
def test_ctrl_c_stops_the_workers_and_removes_the_postgresql_server(script_tmp):
    if not _have_postgres():
        pytest.fail(
            "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql"
            " (scripts/ci_services.sh)"
        )
    proc = _start(["--workers", "2", "--seconds", "60", "--tasks", "800", "--backends", "postgresql"], script_tmp)
    deadline = time.monotonic() + 60
    pidfile = None
    while pidfile is None and time.monotonic() < deadline and proc.poll() is None:
        found = next(iter(script_tmp.glob("vhmine-bench-pg-*/data/postmaster.pid")), None)
        if found is not None and "ready" in found.read_text():  # complete: the real port is in it
            pidfile = found
        time.sleep(0.1)
    assert pidfile is not None, proc.communicate()
    server_pid, port = (int(x) for x in pidfile.read_text().split("\n")[0:4:3])
    while not _actions_logged(port) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)  # until the workers are writing
    assert _actions_logged(port), proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err[-2000:]
    assert "interrupted: cleaning up" in err
    assert list(script_tmp.iterdir()) == []
    assert _gone(server_pid)


def _gone(pid: int) -> bool:
    """The process has exited (a zombie left for a parent that never reaps it counts as exited)."""
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_the_checks_catch_a_lost_action_a_double_annotation_a_leased_done_task_and_two_holders(tmp_path, bench):
    from sqlalchemy import update

    from vhmine import curate as C
    from vhmine.store import Action, Task, utcnow

    store, _ = bench.seed(f"sqlite:///{tmp_path / 's.db'}", bench.write_pairs(tmp_path, 2), 2, 2)
    log = []
    first = C.next_item(store, "w000", "counting")
    saved = C.save_annotation(
        store,
        "w000",
        first.task_id,
        C.Annotation("counting.how_many", {"object": "cats"}, answers={v.id: "2" for v in first.images}),
    )
    log.append(["annotate", first.task_id, False, sorted(saved.instance_ids + saved.draft_ids)])
    second = C.next_item(store, "w000", "counting")
    C.skip(store, "w000", second.task_id)
    log.append(["skip", second.task_id, False, []])
    assert C.undo_last(store, "w000") == f"skip of item {second.task_id}"
    log[-1][2] = True
    results = [
        {"worker": "w000", "log": log, "errors": [], "undo_mismatch": []},
        {"worker": "w001", "log": [], "errors": [], "undo_mismatch": []},
    ]
    assert bench.check(store, results) == {k: [] for k in bench.CHECKS}

    lost = bench.check(store, [dict(results[0], log=log[:1]), results[1]])["no action lost"]
    assert lost == [
        "w000: store has 2 actions, worker saw 1 succeed; first difference at #1: "
        f"store [['skip', '{second.task_id}', True]], worker []"
    ]

    with store.session() as s:  # a done task that someone still holds a lease on (undo without compare-and-set)
        s.execute(update(Task).where(Task.id == first.task_id).values(lease_worker="w001"))
    state = bench.check(store, results)["one state"]
    assert len(state) == 1 and state[0].startswith(
        f"{first.task_id}: done and still leased to w001 (its actions: #1 annotate by w000"
    )

    with store.session() as s:  # w001 annotates the same task again, as a broken compare-and-set would let it
        s.add(Action(worker="w001", kind="annotate", task_id=first.task_id, payload={}, created_at=utcnow()))
    problems = bench.check(store, results)
    assert problems["no double annotation"] == [
        f"{first.task_id}: 2 live closing actions annotate by w000 (#1), annotate by w001 (#3)"
    ]
    assert problems["no action lost"] == [
        "w001: store has 1 actions, worker saw 0 succeed; first difference at #0: "
        f"store [['annotate', '{first.task_id}', False]], worker []"
    ]
    holders = bench.check(
        store, [results[0], dict(results[1], two_holders=[[second.task_id, "skip refused while our lease ran: x"]])]
    )
    assert holders["one holder"] == [
        "w001: skip refused while our lease ran: x (its actions: #2 skip by w000 (undone))"
    ]
    store.close()


def test_an_undone_skip_whose_item_another_worker_took_is_the_undo_the_worker_expected(tmp_path, bench):
    """undo_last undoes a skip even when someone took the item meanwhile, and says where the item is;
    the workers' log must count that as the undo of their skip, not as a lost action."""
    from vhmine import curate as C

    store, _ = bench.seed(f"sqlite:///{tmp_path / 's.db'}", bench.write_pairs(tmp_path, 1), 1, 2)
    tid = C.next_item(store, "w000", "counting").task_id
    C.skip(store, "w000", tid)
    assert C.next_item(store, "w001", "counting").task_id == tid
    what = C.undo_last(store, "w000")
    assert what == f"skip of item {tid} (the item is leased to w001, so it stays there)"
    assert bench.undid(what, "skip", tid)
    assert not bench.undid(what, "annotate", tid) and not bench.undid(what, "skip", tid + "x")
    saved = C.save_annotation(
        store,
        "w001",
        tid,
        C.Annotation(
            "counting.how_many",
            {"object": "cats"},
            answers={v.id: "2" for v in C.next_item(store, "w001", "counting").images},
        ),
    )
    assert bench.undid(C.undo_last(store, "w001"), "annotate", saved.task_id)
    store.close()


def test_the_held_line_times_the_next_item_with_the_folder_moved_while_another_process_saves(tmp_path, bench):
    """Issue 42's figure at a small size (bench_store.py --held N): every lease within the bound, every task held
    with the folder moved and back with it, the other process's saves all done, none refused."""
    import re

    import bench_held  # beside bench_store: the fixture put scripts/ on the path

    line, passed = bench_held.held_line("sqlite", bench_held.run_held(f"sqlite:///{tmp_path / 's.db'}", tmp_path, 60))
    assert passed, line
    m = re.fullmatch(
        r"held tasks \(sqlite\): next item in ([\d.]+) s with 60 tasks and the folder moved \(bound 1 s; it held "
        r"(\d+), (\d+) more leases the rest\), with the folder back [\d.]+ s \((\d+) back, all after \d+ more\); "
        r"slowest lease ([\d.]+) s; other process's saves: (\d+) ok, 0 refused \(longest [\d.]+ s\)  PASS",
        line,
    )
    assert m is not None, line
    assert float(m[1]) <= float(m[5]) <= 1.0 and m[2] == m[4] == "60" and m[3] == "0" and int(m[6]) > 0, line
    assert not (tmp_path / "held").exists() and not (tmp_path / "kept").exists()  # the folders it made are gone
