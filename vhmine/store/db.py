"""The curation store: opening a database, sessions, and its Alembic migrations.

Reads and writes one database: a SQLite file (default `data/vhmine.db`, WAL, foreign keys on) or any
SQLAlchemy URL given by `--db` / VHMINE_DB (PostgreSQL included). Opening a store brings its schema
up to date through the migrations shipped in `vhmine/store/migrations/` (a SQLite file is first copied to
`<file>.bak-<revision>`), and refuses a store written by a newer vhmine. `open_store(migrate=False)` (what
`vhmine status` uses) only reads: a SQLite file is opened read-only (SQLite's mode=ro URI, no pragma that
writes), so its bytes, its journal mode and its folder stay as they were. An existing file that is empty or
not a SQLite database is refused before any connection, by every command (vhmine.store.sqlite_file).

A server database may restart under its users: pooled connections are checked before use (pool_pre_ping),
a session waits up to RECONNECT_S for the server to take a connection again, and a connection lost while
committing is said (StoreConnectionError: it may or may not be saved) rather than retried, so nothing is
applied twice. A connection lost mid-transaction (nothing committed) is retried by curate.base.retry.retried.

The table classes live in vhmine.store.tables and are imported from here (`from vhmine.store import Instance`),
so that a missing SQLAlchemy gets the message below first. Import cost: SQLAlchemy loads with this module, which
the CLI imports only inside the commands that use the store; Alembic only when a store is created or migrated
(the schema revisions are read from the migration files' own lines). Errors name the store in one line: URLs
through vhmine.files.display_url (the one masking of printed URLs), the driver's words without its secrets.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vhmine.errors import (
    StoreConnectionError,
    StoreError,
    StoreExtraMissingError,
    StoreMissingError,
    StoreVersionError,
)

try:
    import sqlalchemy  # noqa: F401  (checked here so a missing extra gets one clear message)
except ModuleNotFoundError as _err:
    raise StoreExtraMissingError(f"the curation store needs {_err.name}: pip install 'vhmine[app]'") from None

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from vhmine.config import DEFAULT_DB, resolve_url  # noqa: F401  (importable from here as before)
from vhmine.files import display_url, without_secrets  # the one masking of printed URLs
from vhmine.store.revisions import (  # noqa: F401  (importable from here as before)
    MIGRATIONS,
    _alembic_config,
    _current_revision,
    _known_revisions,
    _revisions,
    schema_head,
)
from vhmine.store.sqlite_file import (  # noqa: F401  (CREATORS importable from here as before)
    CREATORS,
    _corrupt,
    _missing,
    _no_store,
    _not_sqlite,
    _read_only_uri,
    _sqlite_file,
    _unwritable_folder,
    is_corrupt,
)
from vhmine.store.tables import (  # noqa: F401  (the table classes, importable from here as before)
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

log = logging.getLogger(__name__)

RECONNECT_S = 30.0  # how long a session waits for a server database that went away (a restart) to come back
_GONE = ("57P01", "57P02", "57P03")  # PostgreSQL: admin shutdown, crash shutdown, starting up (cannot connect now)


def is_disconnect(err: BaseException) -> bool:
    """Whether `err` says the connection to the database server broke or could not be made (a restart, a
    cut network), as against an error of the statement itself."""
    if not isinstance(err, DBAPIError):
        return False
    if err.connection_invalidated:
        return True
    orig = err.orig
    code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if code:
        return code.startswith("08") or code in _GONE  # class 08: connection exceptions
    # psycopg that cannot connect at all (refused, reset) raises OperationalError without a SQLSTATE
    return type(orig).__module__.split(".")[0] in ("psycopg", "psycopg2") and type(orig).__name__ == "OperationalError"


def _reason(err: DBAPIError, url: str = "") -> str:
    """The driver's own words, on one line, with the URL's secrets masked (SQLAlchemy's text adds its class
    name and a second line, "Background on this error at ...")."""
    return without_secrets(" ".join(str(err.orig).split())[:160], url)


# --- opening a store -----------------------------------------------------------------------------


def _sqlite_hooks(engine: Engine, read_only: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        if not read_only:  # setting it writes the file's header (and turns a 0-byte file into a database)
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn):  # noqa: ANN001
        # Writers take the lock up front, so two writers queue on busy_timeout instead of
        # failing when a read lock cannot be upgraded; readers use a plain BEGIN.
        conn.exec_driver_sql(
            "BEGIN" if read_only or conn.get_execution_options().get("vhmine_read") else "BEGIN IMMEDIATE"
        )


def make_engine(url: str, read_only: bool = False) -> Engine:
    """The engine of `url`; `read_only` (`vhmine status`): a SQLite file is opened read-only (see
    _read_only_uri) and no folder is made for it."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        file = _sqlite_file(url)
        if read_only and file is not None:
            import sqlite3

            uri = _read_only_uri(file)
            engine = create_engine(
                url, creator=lambda: sqlite3.connect(uri, uri=True, timeout=30, check_same_thread=False)
            )
        else:
            if u.database and u.database != ":memory:":
                Path(u.database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})
        _sqlite_hooks(engine, read_only)
        return engine
    return create_engine(url, pool_pre_ping=True)


class Store:
    """An open store: an engine and sessions. Make one with `open_store`."""

    def __init__(self, engine: Engine, url: str):
        self.engine = engine
        self.url = url
        self._read_engine = engine.execution_options(vhmine_read=True)

    @property
    def display_url(self) -> str:
        return display_url(self.url)

    @property
    def db_option(self) -> str:
        """ " --db STORE" for a command line that names this store, "" when it is the default one (--db left
        out, or VHMINE_DB). A server URL is shown with its password hidden: type the password in yourself."""
        if self.url == resolve_url(None):
            return ""
        u = make_url(self.url)
        if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:":
            from vhmine.files import shown_path

            return f" --db {shown_path(u.database)}"
        return f" --db '{self.display_url}'"

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self, write: bool = True) -> Iterator[Session]:
        """A session that commits on success and rolls back on error (see the module docstring for a
        server that went away: its start waits for it, a commit it cut is StoreConnectionError)."""
        s = self._begin(self.engine if write else self._read_engine)
        with s:
            try:
                yield s
                s.flush()  # statements fail here, before COMMIT: the transaction surely did not commit
            except BaseException as err:
                s.rollback()
                if is_corrupt(err) and _sqlite_file(self.url) is not None:  # one line naming the file
                    raise _corrupt(_sqlite_file(self.url)) from None
                raise
            try:
                s.commit()
            except DBAPIError as err:
                if is_disconnect(err):
                    raise StoreConnectionError(
                        f"the connection to the store {self.display_url} broke while saving ({_reason(err, self.url)}):"
                        " the change may or may not have been saved; look (reload) before doing it again"
                    ) from None
                raise

    def _begin(self, engine: Engine) -> Session:
        """A session in a transaction; on a server database, with its connection made, waiting for a
        server that is restarting (up to RECONNECT_S)."""
        if self.dialect == "sqlite":
            s = Session(engine, expire_on_commit=False)
            s.begin()
            return s
        deadline, wait, said = time.monotonic() + RECONNECT_S, 0.1, False
        while True:
            s = Session(engine, expire_on_commit=False)
            s.begin()
            try:
                s.connection()
                return s
            except DBAPIError as err:
                s.close()
                if not is_disconnect(err):
                    raise
                if time.monotonic() + wait > deadline:
                    raise StoreConnectionError(
                        f"the store {self.display_url} cannot be reached ({_reason(err, self.url)}) after"
                        f" {RECONNECT_S:g} s: nothing was read or saved; try again once the database server is back"
                    ) from None
                if not said:
                    log.warning("store %s unreachable (%s): waiting for it", self.display_url, _reason(err, self.url))
                    said = True
            time.sleep(wait)
            wait = min(2 * wait, 2.0)

    def revision(self) -> str | None:
        with self.engine.connect() as conn:
            rev = _current_revision(conn)
            conn.rollback()
        return rev

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _backup_sqlite(engine: Engine, rev: str) -> Path | None:
    db = engine.url.database
    if not db or db == ":memory:" or not Path(db).exists():
        return None
    from vhmine.files import atomic_write

    dest = Path(f"{db}.bak-{rev}")

    def vacuum_into(tmp: Path) -> None:
        tmp.unlink()  # VACUUM INTO wants a new file
        raw = engine.raw_connection()  # autocommit: VACUUM cannot run inside a transaction
        try:
            raw.driver_connection.execute("VACUUM INTO '" + str(tmp).replace("'", "''") + "'")
        finally:
            raw.close()

    atomic_write(dest, vacuum_into)  # on disk (fsync) before it takes the backup's name
    return dest


def _cannot_open(url: str, err: Exception) -> StoreError:
    file = _sqlite_file(url)
    if file is not None:  # a file, not a server: say what about the file or its folder is wrong
        folder = _unwritable_folder(file)
        if folder is not None:
            what = (
                f"the file {file} is read-only"
                if file.exists() and os.access(folder, os.W_OK)
                else f"the folder {folder} is not writable"
            )
            return StoreError(
                f"cannot open store {file}: {what}, and SQLite writes the store and its -wal and "
                "-shm files beside it; make it writable (chmod u+w), or pass --db with a file in a "
                "folder you can write to"
            )
        if is_corrupt(err):
            return _corrupt(file)
        return StoreError(
            f"cannot open store {file}: {_words(err, url)}; check --db / VHMINE_DB "
            "(a SQLite file vhmine wrote, or a new file)"
        )
    return StoreError(
        f"cannot open store {display_url(url)}: {_words(err, url)}; "
        "check --db / VHMINE_DB and that the database server is running"
    )


def _words(err: Exception, url: str) -> str:
    """What went wrong, in the driver's words when there is a driver error: one line, no library class name
    or SQLAlchemy's "Background on this error" link, the URL's secrets masked."""
    return without_secrets(" ".join(str(getattr(err, "orig", None) or err).split())[:200], url)


def open_store(
    db: str | os.PathLike | None = None, *, target: str = "head", create: bool = True, migrate: bool = True
) -> Store:
    """Open (creating or upgrading as needed) the store at `db`; see `resolve_url`.

    `target` is the schema revision to migrate to; anything but "head" is for tests that build an
    old store. `create=False` refuses a store that does not exist yet (a missing or empty SQLite file,
    a database without vhmine's schema) with a StoreError naming it, and creates nothing: every command
    but CREATORS opens its store so, so a mistyped `--db` never makes a new empty store. `migrate=False`
    only reads (`vhmine status`): a SQLite file that is not there is StoreMissingError (nothing is
    created), and a store whose schema is not this vhmine's is StoreVersionError (nothing is migrated).
    Raises StoreVersionError for a store from a newer vhmine, StoreError for a database that holds other
    tables but no vhmine schema, and names a SQLite store's folder when it cannot be written.
    """
    url = resolve_url(db)
    file = _sqlite_file(url)
    if not migrate and file is not None and not file.is_file():
        raise StoreMissingError(f"no store at {file} yet: `vhmine seed --pairs runs/<run>/pairs.parquet` creates it")
    if not create and _missing(url):
        raise _no_store(_missing(url))
    if file is not None and file.is_file():  # read before a connection writes to it (sqlite_file)
        bad = _not_sqlite(file, reading=not migrate)
        if bad is not None:
            raise bad
    if migrate and file is not None and _unwritable_folder(file) is not None:  # before anything tries to create it
        raise _cannot_open(url, PermissionError("not writable"))
    try:
        engine = make_engine(url, read_only=not migrate)
    except Exception as err:  # bad driver names and the like, before any connection
        if file is not None and isinstance(err, OSError):
            raise _cannot_open(url, err) from None
        raise StoreError(f"cannot open store {display_url(url)}: {_words(err, url)}; check --db / VHMINE_DB") from None
    head = schema_head() if target == "head" else target
    try:
        with engine.connect() as conn:
            current = _current_revision(conn)
            tables = set(inspect(conn).get_table_names()) - {"alembic_version"}
            conn.rollback()
    except Exception as err:
        engine.dispose()
        if isinstance(err, StoreError):
            raise
        raise _cannot_open(url, err) from None
    if current is not None and current not in _known_revisions():
        engine.dispose()
        raise StoreVersionError(
            f"store {display_url(url)} has schema revision {current}, which this vhmine does not know "
            f"(it knows up to {schema_head()}): it was written by a newer vhmine; upgrade vhmine "
            "(pip install -U vhmine) or point --db at another store"
        )
    if current is None and not tables and not migrate:  # an empty file or database: nothing to read yet
        engine.dispose()
        raise StoreMissingError(
            f"the store {file or display_url(url)} is empty: `vhmine seed --pairs "
            "runs/<run>/pairs.parquet` creates its tables"
        )
    if current is None and not tables and not create:
        engine.dispose()
        raise _no_store(make_url(url).database if engine.dialect.name == "sqlite" else display_url(url))
    if current is None and tables:
        engine.dispose()
        raise StoreError(
            f"database {display_url(url)} holds tables ({', '.join(sorted(tables)[:5])}) but no vhmine "
            "schema: point --db / VHMINE_DB at a new file or an empty database"
        )
    if current != head and not migrate:
        engine.dispose()
        raise StoreVersionError(
            f"store {display_url(url)} has schema revision {current or '(none)'}, this vhmine's is "
            f"{head}: the next command that writes to it (seed, curate, ...) migrates it, keeping "
            "a copy of a SQLite file"
        )
    if current != head:
        if current is not None and engine.dialect.name == "sqlite":
            backup = _backup_sqlite(engine, current)
            log.info("copied store to %s before migrating", backup)
        cfg = _alembic_config()
        from alembic import command

        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":  # one migrator at a time
                conn.execute(text("SELECT pg_advisory_xact_lock(7261636)"))
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, head)
        log.info("store %s: schema %s -> %s", display_url(url), current or "(new)", head)
    return Store(engine, url)
