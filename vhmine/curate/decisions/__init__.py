"""People's decisions and what is derived from them: drafted yes/no questions confirmed, errata decided, the
person-queue, and undo.

Reads and writes the curation store's `instances` (drafts confirmed or rejected; a fix and everything derived
from it: re-drafted yes/no questions, `responses` verdicts, `response_labels`, `blind_answers`, `reviews`),
`errata`, and the action log, which undo reads back to revert a worker's last action. Stands on curate.work
and curate.base.
"""
