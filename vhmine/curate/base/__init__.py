"""What every curation module needs: the base the work, the decisions and the people stand on.

Reads workers and tasks (with the pair, images and generation a task shows) from the curation store
(vhmine.store); writes action-log rows, and changes a task only through one compare-and-set on its `version`
(`tasks.compare_and_set`), which leasing, saving, discarding, skipping and undoing all use. Its modules:
`retry` (every transition retried when PostgreSQL aborts it or the connection breaks before the commit), `ids`
(new ids, the id of a drafted yes/no question), `text` (a worker's free text as the store keeps it), `access`
(`WorkerInfo`, and who may act: active workers, admins), `tasks` (lease checks, the compare-and-set, closing a
task, the action log, what already built on an instance), `items` (the queue `Item` a task is shown as) and
`located` (whether a recorded image's bytes are still there, from a stamp of its file kept per process).

Its face: the names in `__all__` below, grouped by the module that holds them; the other rooms and stages import
them from here, never from one of its modules.
"""

from vhmine.curate.base.access import WorkerInfo, check_admin, checked_worker
from vhmine.curate.base.ids import derived_id, new_id
from vhmine.curate.base.items import ImageView, Item, task_item
from vhmine.curate.base.located import file_stamp, image_problem, index_folders_in, problem_kind
from vhmine.curate.base.retry import retried
from vhmine.curate.base.tasks import built_on, check_lease, close_task, compare_and_set, log_action
from vhmine.curate.base.text import collapse_whitespace

__all__ = [
    # access
    "WorkerInfo",
    "check_admin",
    "checked_worker",
    # ids
    "derived_id",
    "new_id",
    # items
    "ImageView",
    "Item",
    "task_item",
    # located
    "file_stamp",
    "image_problem",
    "index_folders_in",
    "problem_kind",
    # retry
    "retried",
    # tasks
    "built_on",
    "check_lease",
    "close_task",
    "compare_and_set",
    "log_action",
    # text
    "collapse_whitespace",
]
