"""The work of curation: the queues, the leases, and what a worker does with the item leased to them.

Reads and writes the curation store's `tasks` (leased and closed through curate.base.tasks' compare-and-set),
`instances` (annotating, verifying a model's draft), `drafts` (the models' pair drafts), `reviews`, `responses`
and `response_labels`, `blind_answers` (blind-solver flags and their overrules), `near_duplicates` (and their
overrules), and the action log. Imports only curate.base; curate.decisions, curate.people and curate.stages
stand on it.
"""
