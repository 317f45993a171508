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

One module per concern, in five subpackages, all re-exported here (`from vhmine import curate as C;
C.next_item(...)`); each imports only the ones before it in this list:
- `base/`: what every curation module needs: `retry` (transitions retried), `ids`, `text`, `access`
  (`WorkerInfo`, worker and admin checks), `tasks` (lease checks, the compare-and-set on a task's version,
  the action log), `items` (the queue `Item`), `located` (whether a recorded image is still there, hashed again
  only when its file's stamp changed);
- `work/`: the work itself: `lease` (how every queue hands out its next task), `holds` (tasks held out of the
  queues while an image is missing or changed, and back with it), `leased` (the items of a mode other workers
  hold, and until when), `queue` (discard, skip,
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
  the hours left to a target, per mode);
- `stages/`: what the other stages and commands read and write through curate: `records` (ready instances
  for export), `images` (serving recorded image bytes), `model_responses`, `descriptions`, `generations`,
  `seeding` (mined pairs entering the store), `overview` (the store's counts for `vhmine status`), `app`
  (launching Streamlit).
"""

from __future__ import annotations

# first, before any curation module imports SQLAlchemy: a missing app extra gets vhmine.store's message
import vhmine.store  # noqa: F401  # isort: skip
from vhmine.curate.base.items import ImageView, Item
from vhmine.curate.decisions.drafts import DraftDecision, DraftView, confirm_drafts, pending_drafts
from vhmine.curate.decisions.errata import ErratumView, accept_erratum, errata_list, flag_instance, reject_erratum
from vhmine.curate.decisions.person_queue import Contradiction, contradictions, resolve_contradiction
from vhmine.curate.decisions.undo import undo_last
from vhmine.curate.people.agreement import Disagreement, ModeAgreement, agreement, disagreements
from vhmine.curate.people.savings import ModeSavings, draft_savings, savings_table
from vhmine.curate.people.workers import (
    WorkerInfo,
    activate_worker,
    add_worker,
    check_session,
    choose_mode,
    chosen_mode,
    deactivate_worker,
    hash_token,
    list_workers,
    rotate_token,
    sign_in,
)
from vhmine.curate.people.workload import ModeTime, log_mark, worker_time
from vhmine.curate.stages.app import default_app_path, run_app, streamlit_command
from vhmine.curate.stages.images import image_bytes, image_file, image_stamp
from vhmine.curate.stages.overview import ModeCounts, StoreOverview, store_overview
from vhmine.curate.stages.records import InstanceRecord, get_instance, ready_instances
from vhmine.curate.work.annotate import Annotation, Saved, save_annotation
from vhmine.curate.work.blind import (
    BlindFlag,
    FlaggedItem,
    blind_answered,
    blind_dropped,
    blind_summary,
    flag_list,
    overrule_blind_flag,
    record_blind_answer,
    refresh_blind_flags,
    reinstate_blind_flag,
    rescore_blind_answer,
    score_stored,
)
from vhmine.curate.work.blind import group_key as blind_group_key
from vhmine.curate.work.blind import reference_of as blind_reference
from vhmine.curate.work.blind import stored_answers as blind_stored_answers
from vhmine.curate.work.holds import HeldTask, held_kinds, held_tasks, recheck_held
from vhmine.curate.work.leased import Leased, leased_to_others
from vhmine.curate.work.neardups import (
    NearDuplicateView,
    near_duplicate_id,
    near_duplicate_list,
    overrule_near_duplicate,
    record_near_duplicates,
    reinstate_near_duplicate,
)
from vhmine.curate.work.queue import LEASE_S, Progress, add_generation, discard, next_item, progress, skip
from vhmine.curate.work.responses import (
    ResponseItem,
    ResponseVerdict,
    add_response,
    decide_verdict,
    label_response,
    majority_verdict,
    next_response,
    response_verdicts,
)
from vhmine.curate.work.review import UNANSWERABLE, ReviewItem, next_review, reviews_left, save_review
from vhmine.curate.work.verify import (
    Verified,
    VerifyItem,
    accept_draft,
    edit_draft,
    next_verify_item,
    record_draft,
    reject_draft,
)
from vhmine.store import resolve_url  # vhmine/apps/curate.py reads it as C.resolve_url

__all__ = [
    "LEASE_S",
    "UNANSWERABLE",
    "WorkerInfo",
    "activate_worker",
    "add_worker",
    "check_session",
    "choose_mode",
    "chosen_mode",
    "deactivate_worker",
    "hash_token",
    "list_workers",
    "rotate_token",
    "sign_in",
    "image_bytes",
    "image_file",
    "image_stamp",
    "ImageView",
    "Item",
    "Progress",
    "add_generation",
    "discard",
    "next_item",
    "progress",
    "skip",
    "Annotation",
    "Saved",
    "save_annotation",
    "DraftDecision",
    "DraftView",
    "confirm_drafts",
    "pending_drafts",
    "undo_last",
    "Disagreement",
    "ModeAgreement",
    "ReviewItem",
    "agreement",
    "disagreements",
    "next_review",
    "reviews_left",
    "save_review",
    "ResponseItem",
    "add_response",
    "label_response",
    "next_response",
    "ResponseVerdict",
    "decide_verdict",
    "majority_verdict",
    "response_verdicts",
    "InstanceRecord",
    "get_instance",
    "ready_instances",
    "BlindFlag",
    "FlaggedItem",
    "blind_answered",
    "blind_dropped",
    "blind_group_key",
    "blind_summary",
    "flag_list",
    "overrule_blind_flag",
    "record_blind_answer",
    "refresh_blind_flags",
    "reinstate_blind_flag",
    "blind_reference",
    "blind_stored_answers",
    "rescore_blind_answer",
    "score_stored",
    "VerifyItem",
    "Verified",
    "accept_draft",
    "edit_draft",
    "next_verify_item",
    "record_draft",
    "reject_draft",
    "NearDuplicateView",
    "near_duplicate_id",
    "near_duplicate_list",
    "overrule_near_duplicate",
    "record_near_duplicates",
    "reinstate_near_duplicate",
    "ErratumView",
    "accept_erratum",
    "errata_list",
    "flag_instance",
    "reject_erratum",
    "Contradiction",
    "contradictions",
    "resolve_contradiction",
    "ModeSavings",
    "draft_savings",
    "savings_table",
    "ModeCounts",
    "StoreOverview",
    "store_overview",
    "ModeTime",
    "log_mark",
    "worker_time",
    "Leased",
    "leased_to_others",
    "HeldTask",
    "held_kinds",
    "held_tasks",
    "recheck_held",
    "default_app_path",
    "run_app",
    "streamlit_command",
    "resolve_url",
]
