"""What a downgrade drops that its upgrade cannot make again, kept in the store until that upgrade puts it back
(issue 43): people's decisions in the tables and columns a later revision added (labels, errata and drafts,
overrules, truth facts, retired_from, a worker's chosen mode and token generation), the blind answers' references
and the store's own secret. A store taken down to any earlier revision and up again keeps them.

Reads and writes one table, `kept_on_downgrade` (revision, what, data: one JSON record per kept row), which no
revision's schema names and no vhmine code but the migrations reads: a downgrade creates it when it keeps
something; the upgrade of the same revision takes its records back (`take`, `put_rows`) and drops the table once
it is empty, so a store at head never holds it. 0001's downgrade (the whole store gone) drops it with the rest.
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

TABLE = "kept_on_downgrade"
_T = sa.Table(
    TABLE,
    sa.MetaData(),
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
    sa.Column("revision", sa.String(8), nullable=False),
    sa.Column("what", sa.String(64), nullable=False),
    sa.Column("data", sa.JSON(), nullable=False),
)


def keep(conn, revision: str, what: str, records: list[dict]) -> None:
    """Keep `records` (JSON-able) for the upgrade of `revision` to take back under `what`."""
    if not records:
        return
    _T.create(conn, checkfirst=True)
    conn.execute(_T.insert(), [{"revision": revision, "what": what, "data": r} for r in records])


def take(conn, revision: str, what: str) -> list[dict]:
    """The records kept under (`revision`, `what`), oldest first, removed from the store."""
    if not sa.inspect(conn).has_table(TABLE):
        return []
    where = (_T.c.revision == revision) & (_T.c.what == what)
    out = [r for (r,) in conn.execute(sa.select(_T.c.data).where(where).order_by(_T.c.id))]
    conn.execute(_T.delete().where(where))
    if conn.execute(sa.select(sa.func.count()).select_from(_T)).scalar() == 0:
        _T.drop(conn)
    return out


def drop_kept(conn) -> None:
    """Drop the table, whatever it holds (the base: no store left to put anything back into)."""
    _T.drop(conn, checkfirst=True)


def table_of(conn, name: str) -> sa.TableClause:
    """Table `name` as the store holds it now, its JSON columns writing None as SQL NULL (as the store's own
    columns that tell "none" by NULL do: a fact, a contradiction)."""
    cols = sa.inspect(conn).get_columns(name)
    return sa.table(name, *(sa.column(c["name"], _plain(c["type"])) for c in cols))


def _plain(t):
    return sa.JSON(none_as_null=True) if isinstance(t, sa.JSON) else t


def keep_rows(conn, revision: str, name: str) -> None:
    """Keep every row of table `name` (that the downgrade of `revision` drops next), datetimes as ISO text."""
    t = table_of(conn, name)
    rows = [
        {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in r._mapping.items()}
        for r in conn.execute(sa.select(t))
    ]
    keep(conn, revision, name, rows)


def put_rows(conn, revision: str, name: str) -> int:
    """Put back the rows `keep_rows` kept of table `name` (just made again by the upgrade of `revision`), into the
    columns it has now (a later revision's columns come back with that revision's own upgrade); returns how many."""
    rows = take(conn, revision, name)
    if not rows:
        return 0
    t = table_of(conn, name)
    dates = {c.name for c in t.columns if isinstance(c.type, sa.DateTime)}
    back = [
        {k: dt.datetime.fromisoformat(v) if k in dates and v is not None else v for k, v in r.items() if k in t.c}
        for r in rows
    ]
    conn.execute(sa.insert(t), back)
    return len(back)


def put_values(conn, revision: str, name: str, key: str, columns: tuple[str, ...]) -> None:
    """Put back `columns` of the rows of `name` (by `key`) that a downgrade kept with `keep(..., name, [{key, column:
    value, ...}])` before dropping those columns; rows no longer there are passed over."""
    rows = take(conn, revision, name)
    if not rows:
        return
    t = table_of(conn, name)
    stmt = sa.update(t).where(t.c[key] == sa.bindparam("k_")).values({c: sa.bindparam(f"v_{c}") for c in columns})
    conn.execute(stmt, [{"k_": r[key], **{f"v_{c}": r[c] for c in columns}} for r in rows])
