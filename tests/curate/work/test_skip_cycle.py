"""Skip cycles through every item (issue 32): once every item of a mode was skipped, each Skip showed the same item
again (the skipped ones were leased by priority, so the one just skipped came first) and the others never came back."""

import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import write_pairs, write_photos  # noqa: E402


def _store(folder: Path, n_tasks: int):
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(folder / "s.db")
    photos = write_photos(folder / "photos", ("astronaut", "coffee", "rocket", "horse"))
    seed_pairs(store, write_pairs(folder / "runs" / "t", photos), per_mode=n_tasks, modes=["color"])
    C.add_worker(store, "alice")
    C.add_worker(store, "bob")
    return store


def _shown_after_skips(store, worker: str, skips: int) -> list[str]:
    from vhmine import curate as C

    shown = []
    for _ in range(skips):
        item = C.next_item(store, worker, "color")
        shown.append(item.task_id)
        C.skip(store, worker, item.task_id)
    return shown


def test_skip_shows_every_item_in_turn(tmp_path):
    from vhmine import curate as C

    store = _store(tmp_path, 3)
    shown = _shown_after_skips(store, "alice", 9)
    assert len(set(shown[:3])) == 3 and shown == shown[:3] * 3, shown
    # an item another worker holds is passed over, and comes back in its turn once they give it back
    held = C.next_item(store, "bob", "color")
    after = _shown_after_skips(store, "alice", 4)
    assert held.task_id not in after and len(set(after)) == 2
    C.skip(store, "bob", held.task_id)
    assert set(_shown_after_skips(store, "alice", 3)) == set(shown[:3])


@pytest.mark.slow
@settings(max_examples=8)
@given(n=st.integers(1, 5), rounds=st.integers(1, 3), first=st.integers(0, 4))
def test_any_window_of_skips_shows_every_item(tmp_path_factory, n, rounds, first):
    """With n items, any n consecutive Skips (after `first` items were skipped) show each item once."""
    store = _store(tmp_path_factory.mktemp("skip"), n)
    shown = _shown_after_skips(store, "alice", first + n * rounds)
    for k in range(first, len(shown) - n + 1):
        assert len(set(shown[k : k + n])) == n, (n, shown)
