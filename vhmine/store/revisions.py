"""The store's schema revisions: the ones this vhmine ships (read from its migration files, without importing
Alembic, so `vhmine status` stays quick and works without it) and the one a store holds (Alembic's own table).

Reads `vhmine/store/migrations/versions/*.py` (their `revision =` and `down_revision =` lines, what Alembic
reads too) and a store's `alembic_version` table; writes nothing. Alembic itself is imported only by
`_alembic_config`, which vhmine.store.db uses to create or migrate a store.
"""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy import inspect, text

from vhmine.errors import StoreError, StoreExtraMissingError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _alembic_config():
    try:
        from alembic.config import Config
    except ModuleNotFoundError as err:
        raise StoreExtraMissingError(
            f"the curation store needs {err.name} to create or migrate a store: pip install 'vhmine[app]'"
        ) from None

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


_REVISION = re.compile(r"^(down_)?revision\s*=\s*(?:None|[\"']([^\"']+)[\"'])", re.M)


def _revisions() -> dict[str, str | None]:
    """revision -> the one before it, read from the migration files' `revision =` and `down_revision =`
    lines (what Alembic reads too, without importing Alembic: `vhmine status` stays quick and works without it)."""
    out = {}
    for f in sorted((MIGRATIONS / "versions").glob("[0-9]*.py")):
        found = {bool(m.group(1)): m.group(2) for m in _REVISION.finditer(f.read_text(encoding="utf-8"))}
        if found.get(False):
            out[found[False]] = found.get(True)
    return out


def schema_head() -> str:
    """The newest schema revision this vhmine knows (the one no migration follows)."""
    revs = _revisions()
    heads = set(revs) - set(revs.values())
    if len(heads) != 1:
        raise StoreError(
            f"the store's migrations have {len(heads)} heads ({', '.join(sorted(heads))}); "
            "this vhmine is broken: reinstall it"
        )
    return heads.pop()


def _known_revisions() -> set[str]:
    return set(_revisions())


def _current_revision(conn) -> str | None:  # noqa: ANN001
    """The store's schema revision, from Alembic's own table (None: no vhmine schema)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
