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

One module per concern, all re-exported here (`from vhmine import curate as C; C.next_item(...)`):
workers (sign-in, tokens, (de)activation), queue (leases, discard, skip, progress, generated images entering the queue),
annotate (saving questions and answers), drafts (drafted yes/no questions), undo, review (blind
review and agreement), responses (model responses and their labels), records (ready instances for
export), verify (model drafts of pair tasks: accept, edit, reject), errata (flags on released items and
admins' decisions), person_queue (the person-queue: drafted questions whose answers now contradict a person's truth), neardups (near duplicates export found, and their overrules), savings (time per verified against per scratch item), workload (worker seconds per ready instance and hours
left to a target, per mode), leased (items of a mode other workers hold, and until when), overview (the store's counts for `vhmine status`), images (serving recorded image bytes), app (launching Streamlit); _shared holds the ids,
action log, worker lookup and lease checks they all use.
"""

from __future__ import annotations

from vhmine.curate.workers import (  # first: imports vhmine.store
    WorkerInfo, activate_worker, add_worker, check_session, choose_mode, chosen_mode, deactivate_worker, hash_token,
    list_workers, rotate_token, sign_in,
)
from vhmine.curate.images import image_bytes, image_file, image_stamp
from vhmine.curate._shared import ImageView, Item
from vhmine.curate.queue import LEASE_S, Progress, add_generation, discard, next_item, progress, skip
from vhmine.curate.annotate import Annotation, Saved, save_annotation
from vhmine.curate.drafts import DraftDecision, DraftView, confirm_drafts, pending_drafts
from vhmine.curate.undo import undo_last
from vhmine.curate.review import (
    UNANSWERABLE, Disagreement, ModeAgreement, ReviewItem, agreement, disagreements, next_review, reviews_left,
    save_review,
)
from vhmine.curate.responses import (
    ResponseItem, ResponseVerdict, add_response, decide_verdict, label_response, majority_verdict, next_response,
    response_verdicts,
)
from vhmine.curate.records import InstanceRecord, get_instance, ready_instances
from vhmine.curate.blind import (
    BlindFlag, FlaggedItem, blind_answered, blind_dropped, blind_summary, flag_list, overrule_blind_flag,
    record_blind_answer, refresh_blind_flags, reinstate_blind_flag, rescore_blind_answer, score_stored,
)
from vhmine.curate.blind import group_key as blind_group_key
from vhmine.curate.blind import reference_of as blind_reference
from vhmine.curate.blind import stored_answers as blind_stored_answers
from vhmine.curate.verify import VerifyItem, Verified, accept_draft, edit_draft, next_verify_item, record_draft, reject_draft
from vhmine.curate.neardups import (
    NearDuplicateView, near_duplicate_id, near_duplicate_list, overrule_near_duplicate, record_near_duplicates,
    reinstate_near_duplicate,
)
from vhmine.curate.errata import ErratumView, accept_erratum, errata_list, flag_instance, reject_erratum
from vhmine.curate.person_queue import Contradiction, contradictions, resolve_contradiction
from vhmine.curate.savings import ModeSavings, draft_savings, savings_table
from vhmine.curate.overview import ModeCounts, StoreOverview, store_overview
from vhmine.curate.workload import ModeTime, log_mark, worker_time
from vhmine.curate.leased import Held, held_by_others
from vhmine.curate.app import default_app_path, run_app, streamlit_command
from vhmine.store import resolve_url  # vhmine/apps/curate.py reads it as C.resolve_url

__all__ = [
    "LEASE_S", "UNANSWERABLE",
    "WorkerInfo", "activate_worker", "add_worker", "check_session", "choose_mode", "chosen_mode", "deactivate_worker",
    "hash_token", "list_workers", "rotate_token", "sign_in",
    "image_bytes", "image_file", "image_stamp",
    "ImageView", "Item", "Progress", "add_generation", "discard", "next_item", "progress", "skip",
    "Annotation", "Saved", "save_annotation",
    "DraftDecision", "DraftView", "confirm_drafts", "pending_drafts",
    "undo_last",
    "Disagreement", "ModeAgreement", "ReviewItem", "agreement", "disagreements", "next_review", "reviews_left", "save_review",
    "ResponseItem", "add_response", "label_response", "next_response",
    "ResponseVerdict", "decide_verdict", "majority_verdict", "response_verdicts",
    "InstanceRecord", "get_instance", "ready_instances",
    "BlindFlag", "FlaggedItem", "blind_answered", "blind_dropped", "blind_group_key", "blind_summary", "flag_list",
    "overrule_blind_flag", "record_blind_answer", "refresh_blind_flags", "reinstate_blind_flag",
    "blind_reference", "blind_stored_answers", "rescore_blind_answer", "score_stored",
    "VerifyItem", "Verified", "accept_draft", "edit_draft", "next_verify_item", "record_draft", "reject_draft",
    "NearDuplicateView", "near_duplicate_id", "near_duplicate_list", "overrule_near_duplicate",
    "record_near_duplicates", "reinstate_near_duplicate",
    "ErratumView", "accept_erratum", "errata_list", "flag_instance", "reject_erratum",
    "Contradiction", "contradictions", "resolve_contradiction",
    "ModeSavings", "draft_savings", "savings_table",
    "ModeCounts", "StoreOverview", "store_overview",
    "ModeTime", "log_mark", "worker_time", "Held", "held_by_others",
    "default_app_path", "run_app", "streamlit_command",
    "resolve_url",
]
