"""The work of curation: the queues, the leases, and what a worker does with the item leased to them.

Reads and writes the curation store's `tasks` (leased and closed through curate.base.tasks' compare-and-set),
`instances` (annotating, verifying a model's draft), `drafts` (the models' pair drafts), `reviews`, `responses`
and `response_labels`, `blind_answers` (blind-solver flags and their overrules), `near_duplicates` (and their
overrules), and the action log. Imports only curate.base; curate.decisions, curate.people and curate.stages
stand on it.

Its face: the names in `__all__` below, grouped by the module that holds them; the other rooms and stages import
them from here, never from one of its modules.
"""

from vhmine.curate.work.annotate import Annotation, Saved, save_annotation
from vhmine.curate.work.blind import (
    BlindFlag,
    FlaggedItem,
    blind_answered,
    blind_dropped,
    blind_summary,
    flag_count,
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
from vhmine.curate.work.blind import refresh_flags as refresh_blind_flags_in
from vhmine.curate.work.blind import solver_rows as blind_solver_rows
from vhmine.curate.work.blind import stored_answers as blind_stored_answers
from vhmine.curate.work.holds import HOLD_KINDS, HeldTask, held_kinds, held_tasks, recheck_held
from vhmine.curate.work.lease import LEASE_S
from vhmine.curate.work.leased import Leased, leased_to_others
from vhmine.curate.work.left import WorkLeft, work_left
from vhmine.curate.work.neardups import (
    NearDuplicateView,
    near_duplicate_count,
    near_duplicate_id,
    near_duplicate_list,
    overrule_near_duplicate,
    record_near_duplicates,
    reinstate_near_duplicate,
)
from vhmine.curate.work.queue import Progress, add_generation, discard, next_item, progress, skip
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
from vhmine.curate.work.review import (
    UNANSWERABLE,
    ReviewItem,
    author_label,
    next_review,
    review_label,
    reviews_left,
    save_review,
)
from vhmine.curate.work.verify import (
    Verified,
    VerifyItem,
    accept_draft,
    drafted_tasks,
    edit_draft,
    next_verify_item,
    record_draft,
    reject_draft,
    undo_verify,
)

__all__ = [
    # annotate
    "Annotation",
    "Saved",
    "save_annotation",
    # blind
    "BlindFlag",
    "FlaggedItem",
    "blind_answered",
    "blind_dropped",
    "blind_group_key",
    "blind_reference",
    "blind_solver_rows",
    "blind_stored_answers",
    "blind_summary",
    "flag_count",
    "flag_list",
    "overrule_blind_flag",
    "record_blind_answer",
    "refresh_blind_flags",
    "refresh_blind_flags_in",
    "reinstate_blind_flag",
    "rescore_blind_answer",
    "score_stored",
    # holds
    "HOLD_KINDS",
    "HeldTask",
    "held_kinds",
    "held_tasks",
    "recheck_held",
    # lease
    "LEASE_S",
    # leased
    "Leased",
    "leased_to_others",
    # left
    "WorkLeft",
    "work_left",
    # neardups
    "NearDuplicateView",
    "near_duplicate_count",
    "near_duplicate_id",
    "near_duplicate_list",
    "overrule_near_duplicate",
    "record_near_duplicates",
    "reinstate_near_duplicate",
    # queue
    "Progress",
    "add_generation",
    "discard",
    "next_item",
    "progress",
    "skip",
    # responses
    "ResponseItem",
    "ResponseVerdict",
    "add_response",
    "decide_verdict",
    "label_response",
    "majority_verdict",
    "next_response",
    "response_verdicts",
    # review
    "ReviewItem",
    "UNANSWERABLE",
    "author_label",
    "next_review",
    "review_label",
    "reviews_left",
    "save_review",
    # verify
    "Verified",
    "VerifyItem",
    "accept_draft",
    "drafted_tasks",
    "edit_draft",
    "next_verify_item",
    "record_draft",
    "reject_draft",
    "undo_verify",
]
