"""Curation: the library behind `vhmine/apps/curate.py` and the `workers` / `seed` commands.

Reads and writes the curation store (vhmine.store): workers and their token hashes, the per-mode
queues of tasks with their leases, instances (OEQ questions with reference answers, YNQ variants
with their yes/no truth), blind reviews, worker labels of model responses, and an action log that
makes "undo the last action" possible. Image bytes are read only from paths recorded in the store.

Concurrency: a task is handed to one worker at a time through a lease (compare-and-set on the
task's `version`); saving requires the task to be open and leased to the saver (or to nobody), so a
second writer gets a LeaseError and nothing of the first is overwritten. Undo claims its action and
changes the task through the same compare-and-set, and never deletes an instance: it marks it
discarded, "undone by <worker>".

Who may act: every call that takes a worker checks, in the store, that they are active; a signed-in
`WorkerInfo` (what the app passes) must also still hold the token generation it signed in with, so a
rotated token or a deactivation ends a browser session at its next action. Admin reads and writes
(`agreement`, `disagreements`, `list_workers`, adding, rotating, (de)activating workers) check that
the worker asking (`by=`) is an admin; `by=None` is the store's operator (the CLI).

This face names the few entry points most callers need (`from vhmine import curate as C; C.next_item(...)`):
who acts (`WorkerInfo`, `add_worker`, `list_workers`, `sign_in`), the queue's work (`Item`, `next_item`,
`Annotation`, `save_annotation`, the yes/no drafts it makes (`pending_drafts`, `DraftDecision`,
`confirm_drafts`), `skip`, `discard`, `progress`, `undo_last`), and what the other stages read
(`InstanceRecord`, `ready_instances`, `get_instance`, `image_bytes`, `image_file`, `store_overview`,
`run_app`). Everything else is behind the face of one of its five rooms (`C.work.next_review(...)`,
`C.stages.add_mined_pairs(...)`), whose modules stay private to the room; each room imports only
the faces of the ones before it in this list:
- `base/`: what every curation module needs: `retry` (transitions retried), `ids`, `text`, `access`
  (`WorkerInfo`, worker and admin checks), `tasks` (lease checks, the compare-and-set on a task's version,
  the action log), `items` (the queue `Item`), `located` (whether a recorded image is still there, hashed again
  only when its file's stamp changed);
- `work/`: the work itself: `lease` (how every queue hands out its next task), `holds` (tasks held out of the
  queues while an image is missing or changed, and back with it), `leased` (the items of a mode other workers
  hold, and until when), `left` (what each work page has left for a worker), `queue` (discard, skip,
  progress, generated images entering the queue), `annotate` (saving questions and answers), `verify`
  (model drafts of pair tasks: accept, edit, reject), `review` (blind review), `responses` (model responses
  and their labels), `blind` (blind-solver flags), `neardups` (near duplicates export found, and their
  overrules);
- `decisions/`: people's decisions and what is derived from them: `drafts` (drafted yes/no questions
  confirmed), `errata` (flags on released items and admins' decisions), `derived` and `redraft` (what a fix
  carries through to), `person_queue` (drafted questions whose answers now contradict a person's truth),
  `undo`;
- `people/`: `workers` (sign-in, tokens, (de)activation), `agreement` (between workers, with `kappa`),
  `savings` (time per verified against per scratch item), `workload` (worker seconds per ready instance and
  the hours left to a target, per mode), `figures` (their figures as people read them), `opening` (the mode a
  worker opens on);
- `stages/`: what the other stages and commands read and write through curate: `records` (ready instances
  for export), `images` (serving recorded image bytes), `model_responses`, `descriptions`, `generations`,
  `seeding` (mined pairs entering the store), `overview` (the store's counts for `vhmine status`), `app`
  (launching Streamlit).
"""

from __future__ import annotations

# first, before any curation module imports SQLAlchemy: a missing app extra gets vhmine.store's message
import vhmine.store  # noqa: F401  # isort: skip
from vhmine.curate import base, decisions, people, stages, work
from vhmine.curate.base import Item, WorkerInfo
from vhmine.curate.decisions import DraftDecision, confirm_drafts, pending_drafts, undo_last
from vhmine.curate.people import add_worker, list_workers, sign_in
from vhmine.curate.stages import (
    InstanceRecord,
    get_instance,
    image_bytes,
    image_file,
    ready_instances,
    run_app,
    store_overview,
)
from vhmine.curate.work import Annotation, discard, next_item, progress, save_annotation, skip

__all__ = [
    # the rooms' faces
    "base",
    "work",
    "decisions",
    "people",
    "stages",
    # who acts
    "WorkerInfo",
    "add_worker",
    "list_workers",
    "sign_in",
    # the queue's work
    "Item",
    "next_item",
    "Annotation",
    "save_annotation",
    "pending_drafts",
    "DraftDecision",
    "confirm_drafts",
    "skip",
    "discard",
    "progress",
    "undo_last",
    # what the other stages read
    "InstanceRecord",
    "ready_instances",
    "get_instance",
    "image_bytes",
    "image_file",
    "store_overview",
    "run_app",
]
