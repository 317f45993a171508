"""What every curation module needs: the base the work, the decisions and the people stand on.

Reads workers and tasks (with the pair, images and generation a task shows) from the curation store
(vhmine.store); writes action-log rows, and changes a task only through one compare-and-set on its `version`
(`tasks.compare_and_set`), which leasing, saving, discarding, skipping and undoing all use. Its modules:
`retry` (every transition retried when PostgreSQL aborts it or the connection breaks before the commit), `ids`
(new ids, the id of a drafted yes/no question), `text` (a worker's free text as the store keeps it), `access`
(`WorkerInfo`, and who may act: active workers, admins), `tasks` (lease checks, the compare-and-set, closing a
task, the action log, what already built on an instance), `items` (the queue `Item` a task is shown as) and
`located` (whether a recorded image's bytes are still there, from a stamp of its file kept per process).
"""
