"""Property (issue 32): whatever happens to the image files (deleted, changed in place, restored) between workers'
leases, skips, discards and undos, the queue never hands out an item whose image is missing or changed; such a
task is held with the true reason, and is back in the queue at the next lease of its mode once its images are all
back; nothing is lost (every task is open, done, discarded or held); undo never takes back a hold or a release.

The machine works on a fresh store per example: four photos copied into its own folder, their six pairs queued
in one mode, workers alice and bob. Bounded for CI; VHMINE_HYPOTHESIS=long runs it longer.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from PIL import Image as PILImage

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import write_pairs, write_photos  # noqa: E402

NAMES = ("astronaut", "coffee", "rocket", "horse")
WORKERS = ("alice", "bob")
MODE = "color"


class HoldMachine(RuleBasedStateMachine):
    photos_from: Path  # a folder holding the photos, copied per example
    totals: dict = {}  # over a run: holds, releases and items handed out, so the property is known not to be empty

    def __init__(self):
        super().__init__()
        from vhmine import curate as C
        from vhmine.images import sha256_file
        from vhmine.seed import seed_pairs
        from vhmine.store import open_store

        self.C = C
        self.folder = Path(tempfile.mkdtemp(prefix="holds-"))
        photos = self.folder / "photos"
        shutil.copytree(self.photos_from, photos)
        self.paths = {n: photos / f"{n}.png" for n in NAMES}
        self.original = {n: p.read_bytes() for n, p in self.paths.items()}
        self.ids = {n: sha256_file(p)[:16] for n, p in self.paths.items()}
        self.state = dict.fromkeys(NAMES, "ok")  # ok, missing or changed: the files as the test left them
        self.store = open_store(self.folder / "s.db")
        seed_pairs(self.store, write_pairs(self.folder / "runs" / "t", list(self.paths.values())), 6, modes=[MODE])
        for w in WORKERS:
            C.add_worker(self.store, w)
        self.leased: dict[str, str | None] = dict.fromkeys(WORKERS)  # the item each worker was last handed
        self.undoable = dict.fromkeys(WORKERS, 0)  # each worker's own actions (skip, discard) not undone yet

    def teardown(self):
        from vhmine.store import Action

        with self.store.session(write=False) as s:
            for kind in ("hold", "release"):
                self.totals[kind] = self.totals.get(kind, 0) + s.query(Action).filter(Action.kind == kind).count()
        self.store.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _bad(self) -> set[str]:
        return {self.ids[n] for n, s in self.state.items() if s != "ok"}

    def _tasks(self):
        from vhmine.store import Pair, Task

        with self.store.session(write=False) as s:
            return [
                (t.id, t.status, t.held_reason, t.lease_worker, {p.image_a, p.image_b})
                for t, p in s.query(Task, Pair).join(Pair, Task.pair_id == Pair.id)
            ]

    # --- the files -------------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name):
        self.paths[name].unlink(missing_ok=True)
        self.state[name] = "missing"

    @rule(name=st.sampled_from(NAMES), value=st.integers(0, 255))
    def change(self, name, value):
        PILImage.fromarray(np.full((20, 20, 3), value, np.uint8)).save(self.paths[name])  # in place
        self.state[name] = "changed"

    @precondition(lambda self: any(s != "ok" for s in self.state.values()))
    @rule(data=st.data())
    def restore(self, data):
        name = data.draw(st.sampled_from(sorted(n for n, s in self.state.items() if s != "ok")))
        self.paths[name].write_bytes(self.original[name])
        self.state[name] = "ok"

    # --- the workers -----------------------------------------------------------------------------

    @rule(worker=st.sampled_from(WORKERS))
    def lease(self, worker):
        from vhmine.store import Action

        with self.store.session(write=False) as s:
            before = s.query(Action).count()
        item = self.C.next_item(self.store, worker, MODE)
        bad = self._bad()
        if item is not None:
            assert not {v.id for v in item.images} & bad, (item.task_id, self.state)  # never handed out
        self.leased[worker] = item.task_id if item is not None else None
        self.totals["handed out"] = self.totals.get("handed out", 0) + (item is not None)
        with self.store.session(write=False) as s:
            new = s.query(Action).filter(Action.id > before).all()
        for a in new:  # each hold names an image of its task, and says truly what is wrong with it
            assert a.kind in ("hold", "release"), a.kind
            if a.kind == "hold":
                name = next(n for n, i in self.ids.items() if i == a.payload["image_id"])
                assert a.payload["reason"] == f"image {self.state[name]}: {self.ids[name]}", (a.payload, self.state)
        for tid, status, _, lease_worker, images in self._tasks():
            if status == "held":  # the mode's held tasks whose images are all back came back first
                assert images & bad, (tid, self.state)
            if item is None and status == "open":  # nothing handed out: every open task is another's
                assert lease_worker not in (None, worker), (tid, lease_worker)

    @rule(worker=st.sampled_from(WORKERS))
    def skip(self, worker):
        from vhmine.errors import LeaseError

        if self.leased[worker] is None:
            return
        try:
            self.C.skip(self.store, worker, self.leased[worker])
            self.undoable[worker] += 1
        except LeaseError:  # it was held (or taken) since it was handed out: nothing to skip
            pass
        self.leased[worker] = None

    @rule(worker=st.sampled_from(WORKERS))
    def discard(self, worker):
        if self.leased[worker] is None:
            return
        self.C.discard(self.store, worker, self.leased[worker], "nothing fits")
        self.undoable[worker] += 1
        self.leased[worker] = None

    @rule(worker=st.sampled_from(WORKERS))
    def undo(self, worker):
        from vhmine.errors import InputError, LeaseError

        try:
            what = self.C.undo_last(self.store, worker)
        except InputError:  # nothing of theirs left: holds and releases are not theirs to undo
            assert self.undoable[worker] == 0
            return
        except LeaseError:
            return
        assert what.startswith(("skip of", "discard of")), what
        self.undoable[worker] -= 1
        self.leased[worker] = None

    # --- always ----------------------------------------------------------------------------------

    @invariant()
    def every_task_is_somewhere_and_holds_say_why(self):
        from vhmine.store import Action

        tasks = self._tasks()
        assert len(tasks) == 6
        for tid, status, reason, lease_worker, images in tasks:
            assert status in ("open", "done", "discarded", "held"), status
            if status == "held":
                kind, _, image = (reason or "").partition(": ")
                assert kind in ("image missing", "image changed") and image in images, (tid, reason)
                assert lease_worker is None
            else:
                assert reason is None
        p = next(p for p in self.C.progress(self.store) if p.mode == MODE)
        assert p.total == 6 and p.held == sum(1 for t in tasks if t[1] == "held")
        with self.store.session(write=False) as s:
            assert not s.query(Action).filter(Action.kind.in_(("hold", "release")), Action.undone_at.is_not(None)).all()


@pytest.mark.slow
def test_the_queue_never_hands_out_an_unavailable_image_and_gives_back_what_returns(tmp_path_factory):
    HoldMachine.photos_from = tmp_path_factory.mktemp("photos")
    write_photos(HoldMachine.photos_from, NAMES)
    HoldMachine.totals = {}
    run_state_machine_as_test(HoldMachine, settings=settings(max_examples=25, stateful_step_count=40))
    assert min(HoldMachine.totals.get(k, 0) for k in ("hold", "release", "handed out")) >= 5, HoldMachine.totals
