"""The "all" row of curate.people.draft_savings (`vhmine draft --stats`, the admin page's Drafts table) is the sum of
its modes (issue 42): it showed 13 drafts / 7 rejected by rule where the modes summed to 50 / 44, as its draft counts
kept one mode's count per status instead of adding them up. A property over stores with drafts of every status and
annotate, confirm and verify actions over three modes, and the CLI's table saying the same."""

from __future__ import annotations

import datetime as dt

import pytest
from helpers import write_pairs, write_photos
from hypothesis import given, settings
from hypothesis import strategies as st

MODES = ("existence", "color", "counting")
STATUSES = ("pending", "rule_rejected", "accepted", "edited", "rejected")
COUNTS = ("scratch_items", "drafted", "rule_rejected", "decided", "accepted", "edited", "rejected")
T0 = dt.datetime(2025, 1, 1, 9, 0, 0)


@pytest.fixture(scope="module")
def drafts_store(tmp_path_factory):
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import Task, open_store

    folder = tmp_path_factory.mktemp("sum")
    store = open_store(folder / "s.db")
    photos = write_photos(folder / "photos", ("astronaut", "coffee", "rocket"))
    seed_pairs(store, write_pairs(folder / "runs" / "t", photos), per_mode=3, modes=list(MODES))
    for w in ("alice", "bob"):
        C.add_worker(store, w)
    with store.session(write=False) as s:
        tasks = {m: [t.id for t in s.query(Task).filter_by(mode=m).order_by(Task.id)] for m in MODES}
    yield store, tasks
    store.close()


def _write(store, tasks, drafts, log) -> None:
    from vhmine.store import Action, Draft

    with store.session() as s:
        s.query(Draft).delete()
        s.query(Action).delete()
        for k, (mode, i, status) in enumerate(drafts):
            s.add(Draft(id=f"d{k}", task_id=tasks[mode][i], mode=mode, model="m", prompt="p", raw="{}",
                        status=status, created_at=T0))  # fmt: skip
        for w, kind, mode, i, secs, undone, decision in log:
            at = T0 + dt.timedelta(seconds=secs)
            s.add(
                Action(
                    worker=w,
                    kind=kind,
                    task_id=None if kind == "confirm" else tasks[mode][i],
                    payload={"decision": decision, "mode": mode} if kind == "verify" else {},
                    created_at=at,
                    undone_at=at if undone else None,
                )
            )


draft = st.tuples(st.sampled_from(MODES), st.integers(0, 2), st.sampled_from(STATUSES))
action = st.tuples(
    st.sampled_from(("alice", "bob")),
    st.sampled_from(("annotate", "confirm", "verify")),
    st.sampled_from(MODES),
    st.integers(0, 2),
    st.integers(0, 2_000),  # seconds: gaps from ties to breaks past 15 min
    st.booleans(),
    st.sampled_from(("accept", "edit", "reject")),
)


@settings(derandomize=True, max_examples=30, deadline=None)
@given(drafts=st.lists(draft, max_size=25), log=st.lists(action, max_size=20))
def test_the_all_row_is_the_sum_of_the_mode_rows(drafts_store, drafts, log):
    from vhmine import curate as C

    store, tasks = drafts_store
    _write(store, tasks, drafts, log)
    rows = C.people.draft_savings(store)
    if not rows:
        assert not drafts and not [a for a in log if a[1] != "confirm"]
        return
    *modes, everything = rows
    assert everything.mode == "all" and {r.mode for r in modes} <= set(MODES)
    for field in COUNTS:
        assert getattr(everything, field) == sum(getattr(r, field) for r in modes), field
    assert everything.drafted == len(drafts)
    assert everything.rule_rejected == sum(1 for _, _, status in drafts if status == "rule_rejected")


def test_the_cli_table_and_the_app_row_write_the_saving_alike(drafts_store):
    from vhmine import curate as C

    store, tasks = drafts_store
    drafts = [(m, 0, "rule_rejected") for m in MODES] + [(m, 1, "pending") for m in MODES]
    log = [
        ("alice", "annotate", "color", 0, 0, False, None),
        ("alice", "annotate", "color", 1, 1, False, None),  # 1 s an item from scratch
        ("alice", "verify", "color", 2, 200, False, "accept"),  # 199 s a kept draft
    ]
    _write(store, tasks, drafts, log)
    rows = {r.mode: r for r in C.people.draft_savings(store)}
    assert (rows["all"].drafted, rows["all"].rule_rejected) == (6, 3)  # not one mode's 2 / 1
    assert rows["color"].saving == pytest.approx(-198.0)
    assert rows["color"].row()["saving"] == C.people.percent(rows["color"].saving) == "-19800.0%"
    table = C.people.savings_table(list(rows.values()))
    color = next(line for line in table.splitlines() if line.startswith("color "))
    assert color.split()[-1] == "-19800.0%" and "     -" in table  # None as before: a dash in a 6-wide column
    everything = next(line for line in table.splitlines() if line.startswith("all "))
    assert everything.split()[3:5] == ["6", "3"]
