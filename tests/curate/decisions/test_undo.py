"""curate.undo on a real PostgreSQL server: two processes racing an undo against a take, or two undos of one
action, never both win."""

from __future__ import annotations

import multiprocessing as mp
import random
import time

import pytest
from helpers import logged_actions, seed_store, stored_task

from vhmine import curate as C

ROUNDS = 60


RACED = (
    "LeaseError",
    "cannot undo: your last action was undone elsewhere meanwhile (another tab?): nothing changed; reload the page",
)


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
    procs = [
        ctx.Process(target=_racer, args=(url, i, *job, rounds, barrier, out), daemon=True) for i, job in enumerate(jobs)
    ]
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


@pytest.mark.slow
def test_undo_and_take_racing_on_postgresql_never_both_win(tmp_path, pg_url):
    """Each round alice undoes her skip of the only counting item while bob takes it: the item ends with
    exactly one of them, in one state reached by one transition, and the loser knows it lost."""
    store, _ = seed_store(pg_url, tmp_path, per_mode=1)
    tid = C.next_item(store, "alice", "counting").task_id
    C.skip(store, "alice", tid)
    wins = {"alice": 0, "bob": 0}

    def setup():
        return stored_task(store, tid).version

    def check(before, results):
        (u_status, undone), (t_status, taken) = results
        t = stored_task(store, tid)
        assert (u_status, t_status) == ("ok", "ok"), results
        assert t.status == "open" and t.version == before + 1, (results, t.version, before)  # one transition applied
        holder = "bob" if taken == tid else "alice"
        assert taken in (tid, None) and t.lease_worker == holder, (results, t.lease_worker)
        if holder == "alice":  # the undo won: it says the item came back
            assert undone == f"skip of item {tid}"
        else:  # the take won: the undo says where the item is and left it there
            assert undone == f"skip of item {tid} (the item is leased to bob, so it stays there)"
        assert logged_actions(store, "alice", "skip")[-1].undone_at is not None
        wins[holder] += 1
        if holder == "bob":  # whoever holds it can act on it; hand it back to alice's skipped state
            C.skip(store, "bob", tid)
            assert C.next_item(store, "alice", "counting").task_id == tid
        C.skip(store, "alice", tid)

    _race(pg_url, [("undo", "alice", "counting"), ("take", "bob", "counting")], setup, check)
    assert wins["alice"] + wins["bob"] == ROUNDS and min(wins.values()) > 0, wins  # each side won some rounds
    store.close()


@pytest.mark.slow
def test_two_undos_of_one_action_on_postgresql_never_both_apply(tmp_path, pg_url):
    """Two tabs of alice undo her discard at the same moment: one undo applies, the other changes nothing."""
    store, _ = seed_store(pg_url, tmp_path, per_mode=1)
    tid = C.next_item(store, "alice", "color").task_id

    def setup():
        C.discard(store, "alice", tid, "no unambiguous question fits")
        return stored_task(store, tid).version

    def check(before, results):
        applied = [msg for status, msg in results if status == "ok"]
        assert applied == [f"discard of item {tid}"], results
        [loser] = [r for r in results if r[0] != "ok"]
        assert loser in (RACED, ("InputError", "nothing to undo for alice")), results  # raced for it, or came after
        raced.append(loser == RACED)
        t = stored_task(store, tid)
        assert (t.status, t.lease_worker, t.done_by, t.version) == ("open", "alice", None, before + 1)
        assert all(a.undone_at is not None for a in logged_actions(store, "alice", "discard"))

    raced = []
    _race(pg_url, [("undo", "alice", "color"), ("undo", "alice", "color")], setup, check)
    assert any(raced), "the two undos never overlapped: the test proved nothing"
    assert len(logged_actions(store, "alice", "discard")) == ROUNDS
    store.close()
