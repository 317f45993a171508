"""The curation store: one database (SQLite file or any SQLAlchemy URL) that every stage after mine reads and writes.

Entry: `open_store` (vhmine.store.db), which opens a database and brings its schema up to date through the
Alembic migrations in `vhmine/store/migrations/`. The table classes are in vhmine.store.tables. Both are
importable from here (`from vhmine.store import Instance, open_store`), and a missing SQLAlchemy gets
db's message first. Stage modules hold no SQL: store queries live behind vhmine.curate.
"""

from vhmine.store.db import (  # noqa: F401  (first: it says which extra to install when SQLAlchemy is missing)
    DEFAULT_DB,
    MIGRATIONS,
    Store,
    display_url,
    is_disconnect,
    make_engine,
    open_store,
    resolve_url,
    schema_head,
)
from vhmine.store.tables import (  # noqa: F401
    DRAFT_STATUSES,
    ERRATUM_STATUSES,
    IMAGE_SOURCES,
    INSTANCE_STATUSES,
    TASK_STATUSES,
    VERDICTS,
    Action,
    Base,
    BlindAnswer,
    Description,
    Draft,
    Erratum,
    Generation,
    Image,
    Instance,
    NearDuplicate,
    Pair,
    Response,
    ResponseLabel,
    Review,
    Run,
    Secret,
    Task,
    Worker,
    utcnow,
)
