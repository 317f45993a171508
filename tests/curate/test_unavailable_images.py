"""Tasks whose image is missing or changed leave the queues by themselves, with the reason, and come back when the
image is back (issue 32). On main they stayed queued: after the index grew (one image deleted, one changed) the
app kept handing them out with only a warning scrolled out of view, and the only way out was an erratum flag plus
an admin's "Remove the item" for each. The fix lies in vhmine/curate (lease and queue, a task status), which the
house move (issue 31) is regrouping: its plan is in the issue's notes (i32-port.md); these tests say what it must do,
and fail until it is done (strict xfail: they turn red the day they pass, to be unmarked)."""

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import write_pairs, write_photos  # noqa: E402

PLAN = "issue 32: tasks of missing or changed images leave the queue (plan: i32-port.md, curate.lease / curate.queue)"


def _store(tmp_path):
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(tmp_path / "s.db")
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket"))
    seed_pairs(store, write_pairs(tmp_path / "runs" / "t", photos), per_mode=3, modes=["color"])
    C.add_worker(store, "alice")
    return store, photos


def _images(item) -> set[str]:
    return {v.id for v in item.images}


@pytest.mark.xfail(strict=True, reason=PLAN)
def test_a_task_whose_image_changed_is_never_handed_out_and_comes_back_with_its_image(tmp_path):
    from vhmine import curate as C
    from vhmine.images import sha256_file

    store, photos = _store(tmp_path)
    coffee = photos[1]
    original = coffee.read_bytes()
    coffee_id = sha256_file(coffee)[:16]
    PILImage.fromarray(np.full((20, 20, 3), 7, np.uint8)).save(coffee)  # changed in place
    shown = []
    while (item := C.next_item(store, "alice", "color")) is not None and item.task_id not in shown:
        shown.append(item.task_id)
        assert coffee_id not in _images(item)  # main handed them out, the error beside the images
        C.skip(store, "alice", item.task_id)
    assert len(shown) == 1  # of the three pairs of three photos, two have coffee
    held = [p for p in C.progress(store) if p.mode == "color"][0]
    assert held.remaining == 1 and getattr(held, "held", None) == 2  # said, with the reason, not silently dropped
    coffee.write_bytes(original)  # the image is back: so are its tasks
    back = set()
    while (item := C.next_item(store, "alice", "color")) is not None and item.task_id not in back:
        back.add(item.task_id)
        C.skip(store, "alice", item.task_id)
    assert len(back) == 3


@pytest.mark.xfail(strict=True, reason=PLAN)
def test_a_task_whose_image_is_missing_leaves_the_queue_with_the_reason_recorded(tmp_path):
    from vhmine import curate as C
    from vhmine.store import Action

    store, photos = _store(tmp_path)
    photos[0].unlink()
    while (item := C.next_item(store, "alice", "color")) is not None:
        C.discard(store, "alice", item.task_id, "nothing fits")
    with store.session(write=False) as s:
        holds = [a for a in s.query(Action) if a.kind == "hold"]
    assert len(holds) == 2 and all("missing" in (a.payload or {}).get("reason", "") for a in holds)
