"""People's decisions and what is derived from them: drafted yes/no questions confirmed, errata decided, the
person-queue, and undo.

Reads and writes the curation store's `instances` (drafts confirmed or rejected; a fix and everything derived
from it: re-drafted yes/no questions, `responses` verdicts, `response_labels`, `blind_answers`, `reviews`),
`errata`, and the action log, which undo reads back to revert a worker's last action. Stands on curate.work
and curate.base.

Its face: the names in `__all__` below, grouped by the module that holds them; the other rooms and stages import
them from here, never from one of its modules.
"""

from vhmine.curate.decisions.drafts import DraftDecision, DraftView, confirm_drafts, pending_drafts
from vhmine.curate.decisions.errata import ErratumView, accept_erratum, errata_list, flag_instance, reject_erratum
from vhmine.curate.decisions.person_queue import Contradiction, contradictions, resolve_contradiction
from vhmine.curate.decisions.undo import undo_last

__all__ = [
    # drafts
    "DraftDecision",
    "DraftView",
    "confirm_drafts",
    "pending_drafts",
    # errata
    "ErratumView",
    "accept_erratum",
    "errata_list",
    "flag_instance",
    "reject_erratum",
    # person_queue
    "Contradiction",
    "contradictions",
    "resolve_contradiction",
    # undo
    "undo_last",
]
