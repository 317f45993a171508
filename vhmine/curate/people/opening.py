"""Which mode a worker opens on when they sign in: one that has work for them, theirs first.

Reads the worker's chosen mode (curate.people.workers) and what each mode has left for them (curate.work.work_left:
the annotate, verify, review and label queues, one grouped COUNT each); writes nothing. Opening on the mode they
chose last showed "Nothing left to annotate" while another mode still had items.
"""

from __future__ import annotations

from vhmine import rules as R
from vhmine.curate.base import WorkerInfo
from vhmine.curate.people.workers import chosen_mode
from vhmine.curate.work import WorkLeft, work_left
from vhmine.store import Store


def opening_work(store: Store, worker: str | WorkerInfo) -> WorkLeft:
    """What is left for the worker in the mode they open on (its `mode`): their chosen mode if it has items left for
    them on any work page (annotate, verify drafts, review, label answers), else the first mode (in the rules' order)
    that has, else the chosen mode (or the first one). One read of every mode's counts."""
    chosen = chosen_mode(store, worker)  # checks the worker too
    left = work_left(store, worker)
    if chosen is not None and left[chosen].items:
        return left[chosen]
    return next((w for w in left.values() if w.items), left[chosen or R.mode_names()[0]])


def opening_mode(store: Store, worker: str | WorkerInfo) -> str:
    """The mode the worker opens on (opening_work)."""
    return opening_work(store, worker).mode
