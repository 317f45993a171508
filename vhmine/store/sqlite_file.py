"""A store that is a SQLite file, as a file (vhmine.store.db opens it): which file a URL names, whether it is
there, whether it is a SQLite database at all, whether its folder lets SQLite write it and its -wal and -shm
files, the read-only URI `vhmine status` opens it with, and the one-line refusals that name it.

Reads the first 16 bytes of an existing file (SQLite's header, "SQLite format 3\\0") before any connection is
made, because a connection writes: it turns a 0-byte file into a database (the journal mode's pragma writes
its header) and may leave a -journal, -wal or -shm file beside any file. So a 0-byte file and a file of
another kind are refused by every command, the creators (CREATORS) too, which make a store only where no
file is, and are left byte for byte as they were. Writes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine import make_url

from vhmine.errors import StoreCorruptError, StoreError, StoreMissingError

CREATORS = ("seed", "generate", "manipulate", "workers add")  # the commands that put the first things into a store
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def is_corrupt(err: BaseException) -> bool:
    """Whether `err` says a SQLite file is not a database or is damaged ("file is not a database",
    "database disk image is malformed"): sqlite3 raises those as DatabaseError itself, not a subclass."""
    import sqlite3

    orig = getattr(err, "orig", err)
    return type(orig) is sqlite3.DatabaseError


def _corrupt(file) -> StoreCorruptError:
    return StoreCorruptError(
        f"the store {file} is not a SQLite database vhmine can read (damaged, or another kind of "
        f"file): check --db / VHMINE_DB, or restore it from a copy (vhmine keeps {Path(file).name}"
        ".bak-<revision> beside it when it migrates)"
    )


def _not_sqlite(file: Path, reading: bool) -> StoreError | None:
    """Why the existing file `file` holds no store, told before any connection could write to it: it is empty
    (StoreMissingError where the store is only read, `vhmine status`), or it does not start with SQLite's
    header (StoreCorruptError); None when it starts as a SQLite database does (or cannot be read: the
    connection says why)."""
    try:
        with open(file, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return None
    if not head:
        return (StoreMissingError if reading else StoreError)(
            f"no store at {file}: the file is empty (0 bytes), and vhmine leaves it so; check --db / VHMINE_DB, "
            "or remove the empty file to let `vhmine seed` (or generate, manipulate, workers add) make the store there"
        )
    return None if head == SQLITE_HEADER else _corrupt(file)


def _read_only_uri(file: Path) -> str:
    """SQLite's URI that opens `file` without writing anything: mode=ro; and, when no -wal file lies beside
    it (no writer has it open, the file holds every commit), immutable=1 too, because a read-only
    connection to a WAL store would otherwise create its -wal and -shm files (and leave them there)."""
    from urllib.parse import quote

    uri = f"file:{quote(str(file.resolve()))}?mode=ro"
    return uri if Path(f"{file}-wal").exists() else uri + "&immutable=1"


def _missing(url: str) -> str | None:
    """A SQLite file that does not exist: its path (opening it would create it); else None."""
    u = make_url(url)
    if u.get_backend_name() == "sqlite" and u.database and u.database != ":memory:" and not Path(u.database).exists():
        return u.database
    return None


def _no_store(where: str) -> StoreError:
    return StoreError(
        f"no store at {where}: check --db / VHMINE_DB (only "
        + ", ".join(f"`vhmine {c}`" for c in CREATORS)
        + " make a new one)"
    )


def _sqlite_file(url: str) -> Path | None:
    u = make_url(url)
    if (
        u.get_backend_name() == "sqlite"
        and u.database
        and u.database != ":memory:"
        and not u.database.startswith("file:")
    ):
        return Path(u.database)
    return None


def _unwritable_folder(file: Path) -> Path | None:
    """The folder that keeps SQLite from writing `file` (or its -wal and -shm files beside it), if one does."""
    folder = file.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK) or (file.exists() and not os.access(file, os.W_OK)):
        return folder
    return None
