"""The people who curate: workers and their sign-in, how far they agree, and what verifying drafts saves them.

Reads and writes the curation store's `workers` (tokens as sha256 hashes, token generations, chosen modes);
reads `reviews`, `response_labels` and the action log (agreement, savings), which it never writes, and the
queues' counts (curate.work.work_left) to pick the mode a worker opens on (`opening_mode`); `figures` writes their
figures as people read them (the app's tables, `vhmine draft --stats`). Stands on
curate.work and curate.base.

Its face: the names in `__all__` below, grouped by the module that holds them; the other rooms and stages import
them from here, never from one of its modules.
"""

from vhmine.curate.people.agreement import Disagreement, ModeAgreement, disagreements
from vhmine.curate.people.agreement import agreement as mode_agreement
from vhmine.curate.people.figures import duration, number, percent
from vhmine.curate.people.kappa import cohen_kappa
from vhmine.curate.people.opening import opening_mode, opening_work
from vhmine.curate.people.savings import ModeSavings, draft_savings, savings_table
from vhmine.curate.people.tickets import TICKET_S, resume_session, session_ticket
from vhmine.curate.people.workers import (
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

__all__ = [
    # agreement
    "Disagreement",
    "ModeAgreement",
    "disagreements",
    "mode_agreement",
    # figures
    "duration",
    "number",
    "percent",
    # kappa
    "cohen_kappa",
    # opening
    "opening_mode",
    "opening_work",
    # savings
    "ModeSavings",
    "draft_savings",
    "savings_table",
    # tickets
    "TICKET_S",
    "resume_session",
    "session_ticket",
    # workers
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
    # workload
    "ModeTime",
    "log_mark",
    "worker_time",
]
