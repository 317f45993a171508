"""Which mode a worker opens on when they sign in: one that has work for them, theirs first.

Reads the worker's chosen mode (curate.people.workers) and what each mode has left for them (curate.work.work_left:
the annotate, verify, review and label queues, one grouped COUNT each); writes nothing. Opening on the mode they
chose last showed "Nothing left to annotate" while another mode still had items.
"""

from __future__ import annotations

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo
from vhmine.curate.people.workers import chosen_mode
from vhmine.curate.work import work_left
from vhmine.store import Store


def opening_mode(store: Store, worker: str | WorkerInfo) -> str:
    """The worker's chosen mode if it has items left for them on any work page (annotate, verify drafts, review,
    label answers), else the first mode (in the rules' order) that has, else the chosen mode (or the first one)."""
    chosen = chosen_mode(store, worker)  # checks the worker too
    left = work_left(store, worker)
    if chosen is not None and left[chosen].items:
        return chosen
    return next((m for m, w in left.items() if w.items), chosen or R.mode_names()[0])
