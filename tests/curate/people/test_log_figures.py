"""The admin page's figures from the action log, summed in SQL (issue 32): worker seconds per ready instance and the
hours left to a target per mode (curate.worker_time), and the time drafts save (curate.draft_savings). Before, both
loaded every action into Python; the figures must not change: a property over action logs (workers, kinds, modes,
times with breaks and ties, undone actions, verify decisions, the system's holds) compares them with the Python
they replace, kept here as the reference. By hand: worker time on a small log, on SQLite and on PostgreSQL."""

from __future__ import annotations

import datetime as dt
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import write_pairs, write_photos  # noqa: E402

T0 = dt.datetime(2025, 1, 1, 9, 0, 0)
IDLE_S = 15 * 60
MODES = ("counting", "color")


def _store(folder: Path, url=None):
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import Task, open_store

    store = open_store(url or folder / "s.db")
    photos = write_photos(folder / "photos", ("astronaut", "coffee", "rocket"))
    seed_pairs(store, write_pairs(folder / "runs" / "t", photos), per_mode=3, modes=list(MODES))
    for w in ("alice", "bob"):
        C.add_worker(store, w)
    C.add_worker(store, "carol", admin=True)
    with store.session(write=False) as s:
        tasks = {m: [t.id for t in s.query(Task).filter_by(mode=m).order_by(Task.id)] for m in MODES}
    return store, tasks


def _write_log(store, tasks, log) -> None:
    """log: (worker, kind, mode or None, task index, ms after T0, undone, decision)."""
    from vhmine.store import Action

    with store.session() as s:
        s.query(Action).delete()
        for w, kind, mode, k, ms, undone, decision in log:
            at = T0 + dt.timedelta(milliseconds=ms)
            payload = {"decision": decision, "mode": mode} if kind == "verify" else {}
            s.add(
                Action(
                    worker=w,
                    kind=kind,
                    task_id=tasks[mode][k] if mode else None,
                    payload=payload,
                    created_at=at,
                    undone_at=at if undone else None,
                )
            )


# --- the Python the SQL replaced (curate.people.workload and savings before issue 32), the reference ------------


def _rows(store, kinds=None):
    from vhmine.store import Action

    with store.session(write=False) as s:
        acts = s.query(Action).all()
        rows = [(a.worker, a.kind, a.task_id, a.created_at, a.id, a.undone_at, dict(a.payload or {})) for a in acts]
    rows = [r for r in rows if (r[1] in kinds if kinds else r[1] not in ("hold", "release"))]
    return sorted(rows, key=lambda r: (r[0], r[3], r[4]))


def reference_worker_time(store) -> dict[str, tuple[float, int]]:
    secs: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    prev, prev_mode = None, None
    for a in _rows(store):
        same = prev is not None and prev[0] == a[0]
        mode = a[2].split(":", 1)[0] if a[2] else (prev_mode if same and a[1] == "confirm" else None)
        gap = (a[3] - prev[3]).total_seconds() if same else None
        if mode is not None:
            count[mode] += 1
            if gap is not None and 0 <= gap <= IDLE_S:
                secs[mode] += gap
        prev, prev_mode = a, mode if mode is not None else (prev_mode if same else None)
    return {m: (secs[m], count[m]) for m in count}


def reference_items(store) -> list[tuple[str, str, float | None]]:
    by_worker = defaultdict(list)
    for a in _rows(store, ("annotate", "confirm", "verify")):
        by_worker[a[0]].append(a)
    out = []
    for acts in by_worker.values():
        gaps = [None] + [
            g if 0 <= (g := (cur[3] - prev[3]).total_seconds()) <= IDLE_S else None
            for prev, cur in zip(acts, acts[1:], strict=False)
        ]
        for k, a in enumerate(acts):
            if a[5] is not None:
                continue
            if a[1] == "annotate":
                secs, nxt = gaps[k], acts[k + 1] if k + 1 < len(acts) else None
                if secs is not None and nxt is not None and nxt[1] == "confirm" and nxt[5] is None:
                    secs = None if gaps[k + 1] is None else secs + gaps[k + 1]
                out.append((a[2].split(":", 1)[0], "scratch", secs))
            elif a[1] == "verify":
                out.append((a[6].get("mode") or a[2].split(":", 1)[0], a[6].get("decision", "accept"), gaps[k]))
    return out


def _check_against_reference(store) -> None:
    from vhmine import curate as C

    want = reference_worker_time(store)
    for m in C.people.worker_time(store, 10):
        if m.mode in MODES:
            secs, n = want.get(m.mode, (0.0, 0))
            assert (m.worker_s, m.actions) == (pytest.approx(secs, abs=1e-3), n), m
    items = reference_items(store)
    for row in C.people.draft_savings(store):
        mine = [it for it in items if row.mode in ("all", it[0])]
        scratch = [t for _, w, t in mine if w == "scratch"]
        ver = [(w, t) for _, w, t in mine if w != "scratch"]
        timed = [t for _, t in ver if t is not None]
        kept = sum(1 for w, t in ver if t is not None and w != "reject")
        timed_scratch = [t for t in scratch if t is not None]
        assert row.scratch_items == len(scratch) and row.decided == len(ver), row
        assert (row.accepted, row.edited, row.rejected) == tuple(
            sum(1 for w, _ in ver if w == d) for d in ("accept", "edit", "reject")
        )
        assert row.s_per_scratch == (pytest.approx(sum(timed_scratch) / len(timed_scratch)) if timed_scratch else None)
        assert row.s_per_decision == (pytest.approx(sum(timed) / len(timed)) if timed else None)
        assert row.s_per_kept == (pytest.approx(sum(timed) / kept) if kept else None)


@pytest.fixture(scope="module")
def log_store(tmp_path_factory):
    store, tasks = _store(tmp_path_factory.mktemp("log"))
    yield store, tasks
    store.close()


KINDS = ("annotate", "confirm", "verify", "skip", "discard", "label", "hold", "release")
action = st.tuples(
    st.sampled_from(("alice", "bob")),
    st.sampled_from(KINDS),
    st.sampled_from(MODES),
    st.integers(0, 2),
    st.integers(0, 2_500_000),  # ms: gaps from none (ties) to breaks past IDLE_S
    st.booleans(),
    st.sampled_from(("accept", "edit", "reject")),
)


@settings(max_examples=40)
@given(log=st.lists(action, max_size=30))
def test_the_sql_figures_are_those_the_python_gave_on_any_log(log_store, log):
    store, tasks = log_store
    no_task = ("confirm", "label")
    _write_log(store, tasks, [(w, k, None if k in no_task else m, i, ms, u, d) for w, k, m, i, ms, u, d in log])
    _check_against_reference(store)


def _hand_log(store, tasks) -> None:
    """alice: annotate counting@0 (first: untimed), confirm@20 (20 s, counting's: the task before it), label@30 (no
    mode; 10 s to no one), skip counting@100 (70 s), hold color@105 (the system's: no time, not hers), annotate
    color@2000 (a break: counted, untimed), discard color@2030 (30 s). bob: annotate color@0, confirm@45 (45 s)."""
    s = 1000
    _write_log(
        store,
        tasks,
        [
            ("alice", "annotate", "counting", 0, 0, False, None),
            ("alice", "confirm", None, 0, 20 * s, False, None),
            ("alice", "label", None, 0, 30 * s, False, None),
            ("alice", "skip", "counting", 1, 100 * s, False, None),
            ("alice", "hold", "color", 2, 105 * s, False, None),
            ("alice", "annotate", "color", 0, 2000 * s, False, None),
            ("alice", "discard", "color", 1, 2030 * s, True, None),
            ("bob", "annotate", "color", 1, 0, False, None),
            ("bob", "confirm", None, 0, 45 * s, False, None),
        ],
    )


def _check_hand(store, tasks) -> None:
    from vhmine import curate as C
    from vhmine.errors import AuthError

    _hand_log(store, tasks)
    rows = {m.mode: m for m in C.people.worker_time(store, 4, by="carol")}
    assert (rows["counting"].worker_s, rows["counting"].actions) == (90.0, 3)
    assert (rows["color"].worker_s, rows["color"].actions) == (75.0, 4)
    assert rows["counting"].s_per_instance is None and rows["counting"].hours_left is None  # nothing ready yet
    assert (rows["all"].worker_s, rows["all"].actions, rows["all"].target) == (165.0, 7, 4 * 8)
    with pytest.raises(AuthError, match="not an admin"):
        C.people.worker_time(store, 4, by="alice")
    _check_against_reference(store)


def test_worker_time_by_hand(log_store):
    _check_hand(*log_store)


def test_worker_time_by_hand_on_postgresql(pg_url, tmp_path):
    store, tasks = _store(tmp_path, pg_url)
    try:
        _check_hand(store, tasks)
    finally:
        store.close()
