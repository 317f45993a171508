"""Tasks whose image is missing or changed leave the queues by themselves, with the reason, and come back when the
image is back (issue 32; curate.work.holds). Before, they stayed queued: after the index grew (one image deleted,
one changed) the app kept handing them out with only a warning scrolled out of view, and the only way out was an
erratum flag plus an admin's "Remove the item" for each. test_holds_property.py proves it over sequences of file
changes and workers' actions; its shrunk counterexamples are named here."""

import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import write_pairs, write_photos  # noqa: E402


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


def _change(path):
    PILImage.fromarray(np.full((20, 20, 3), 7, np.uint8)).save(path)  # in place, other bytes


def _id(path) -> str:
    from vhmine.images import sha256_file

    return sha256_file(path)[:16]


def _showing(store, image_id) -> list[str]:
    """The ids of the tasks whose pair shows `image_id`."""
    from vhmine.store import Pair, Task

    with store.session(write=False) as s:
        rows = s.query(Task.id, Pair.image_a, Pair.image_b).join(Pair, Task.pair_id == Pair.id).order_by(Task.id)
        return [r.id for r in rows if image_id in (r.image_a, r.image_b)]


def _color(store):
    from vhmine import curate as C

    return next(p for p in C.progress(store) if p.mode == "color")


def test_a_held_task_is_counted_with_its_reason_and_refused_to_whoever_still_has_it(tmp_path):
    from vhmine import curate as C
    from vhmine.errors import LeaseError

    store, photos = _store(tmp_path)
    C.add_worker(store, "bob")
    first = C.next_item(store, "bob", "color")  # bob holds a lease while one of its images changes
    image = first.images[0].id
    _change(next(p for p in photos if _id(p) == image))
    while (item := C.next_item(store, "alice", "color")) is not None:
        C.discard(store, "alice", item.task_id, "nothing fits")
    assert C.work.held_kinds(store, "color") == {"image changed": 1}  # the other pair of that image; bob's is his
    assert C.next_item(store, "bob", "color") is None  # his own lease is checked when he asks for his next item
    assert C.work.held_kinds(store, "color") == {"image changed": 2} and C.work.held_kinds(store, "counting") == {}
    held = C.work.held_tasks(store)
    assert [h.reason for h in held] == [f"image changed: {image}"] * 2 and all(h.since for h in held)
    with pytest.raises(LeaseError, match=rf"item {first.task_id} is held \(image changed: {image}\)"):
        C.skip(store, "bob", first.task_id)
    assert _color(store).held == 2 and _color(store).total == 3
    ov = C.store_overview(store)
    assert next(m for m in ov.modes if m.mode == "color").held == 2 and ov.held_kinds == {"image changed": 2}


def test_undo_passes_over_a_hold(tmp_path):
    from vhmine import curate as C
    from vhmine.store import Action

    store, photos = _store(tmp_path)
    item = C.next_item(store, "alice", "color")
    C.discard(store, "alice", item.task_id, "nothing fits")
    third = next(p for p in photos if _id(p) not in _images(item))  # in both other pairs
    third.unlink()
    assert C.next_item(store, "alice", "color") is None  # both held, logged under alice's name
    assert C.undo_last(store, "alice") == f"discard of item {item.task_id}"  # her own last action, not a hold
    assert len(C.work.held_tasks(store)) == 2
    with store.session(write=False) as s:
        assert [a.undone_at for a in s.query(Action).filter(Action.kind == "hold")] == [None, None]


def test_an_admin_check_brings_back_what_is_back_and_says_what_is_still_held(tmp_path):
    from vhmine import curate as C

    store, photos = _store(tmp_path)
    original = photos[0].read_bytes()
    photos[0].unlink()
    assert C.next_item(store, "alice", "color") is not None
    assert _color(store).held == 2
    assert C.work.recheck_held(store, "alice") == (0, 2)
    photos[0].write_bytes(original)
    assert C.work.recheck_held(store, "alice") == (2, 0)
    assert C.work.held_tasks(store) == [] and _color(store).remaining == 3


def test_the_verify_queue_holds_a_drafted_task_whose_image_changed(tmp_path):
    import json

    from vhmine import curate as C
    from vhmine.rules.draft_check import parse_draft

    store, photos = _store(tmp_path)
    item = C.next_item(store, "alice", "color")
    a, b = (v.id for v in item.images)
    C.skip(store, "alice", item.task_id)
    text = json.dumps(
        {
            "template": "color.what_color",
            "slots": {"object": "cup"},
            "answer_a": "red",
            "answer_b": "blue",
            "yes_no": [{"question": "Is the cup red?", "answer_a": "yes", "answer_b": "no"}],
        }
    )
    content = parse_draft(text, "color", [a, b])
    C.work.record_draft(store, item.task_id, model="m", endpoint=None, prompt="draft@v1#x", raw=text, content=content)
    changed = next(p for p in photos if _id(p) == a)
    original = changed.read_bytes()
    _change(changed)
    assert C.work.next_verify_item(store, "alice", "color") is None
    # held with the other task of that image, though that one waits in the annotate queue (issue 42: by image)
    assert [h.task_id for h in C.work.held_tasks(store)] == _showing(store, a)
    assert item.task_id in _showing(store, a)
    changed.write_bytes(original)
    assert C.work.next_verify_item(store, "alice", "color").task_id == item.task_id


def test_a_worker_with_two_leases_gets_the_other_when_one_image_goes(tmp_path):
    # shrunk from test_holds_property: an undone skip gave bob a second lease; the first one's image went, and
    # next_item gave him nothing while the second stayed leased to him
    from vhmine import curate as C

    store, photos = _store(tmp_path)
    C.add_worker(store, "bob")
    first = C.next_item(store, "bob", "color")
    C.skip(store, "bob", first.task_id)
    second = C.next_item(store, "bob", "color")
    C.undo_last(store, "bob")  # the skip: first is bob's again, beside second
    gone = next(p for p in photos if _id(p) in _images(first) - _images(second))
    gone_id = _id(gone)
    gone.unlink()
    assert C.next_item(store, "bob", "color").task_id == second.task_id
    held = [h.task_id for h in C.work.held_tasks(store)]  # with the third pair, which shows that image too
    assert held == _showing(store, gone_id) and first.task_id in held and second.task_id not in held
