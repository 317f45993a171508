"""Derived state as a function of its sources and of people's decisions (curate.decisions.derived): on a yes/no question
drafted from an open one, `retired_from` is the status it had when derivation set it aside (its status is then
discarded; it comes back to that status when drafted again), `truth_fact` a truth a person decided
({"truth", "by", "source": the open answers it was decided against}; derivation never overwrites it), and
`contradiction` the person-queue: where the open answers now imply another truth than the fact, both sides
({"fact", "derived", "decided_against", "source", "since"}) wait for an admin on the Errata page. A ready yes/no
question already in a worker's own words gets its truth recorded as that worker's fact. The downgrade keeps the three
(vhmine.store.migrations.kept); the upgrade back puts each where the question is still as it was then.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep, table_of, take

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instances") as batch:
        batch.add_column(sa.Column("retired_from", sa.String(16)))
        batch.add_column(sa.Column("truth_fact", sa.JSON()))
        batch.add_column(sa.Column("contradiction", sa.JSON()))
    # a ready yes/no question in a worker's own words already holds the worker's truth: recorded as the fact it is
    t = sa.table(
        "instances",
        sa.column("id"),
        sa.column("derived_from"),
        sa.column("template_id"),
        sa.column("status"),
        sa.column("truth", sa.Boolean),
        sa.column("answers", sa.JSON),
        sa.column("created_by"),
        sa.column("updated_by"),
        sa.column("truth_fact", sa.JSON),
    )
    conn = op.get_bind()
    back = _put_back(conn)
    src = {i: a for i, a in conn.execute(sa.select(t.c.id, t.c.answers).where(t.c.derived_from.is_(None)))}
    for row in conn.execute(
        sa.select(t.c.id, t.c.derived_from, t.c.truth, t.c.created_by, t.c.updated_by).where(
            t.c.derived_from.is_not(None), t.c.template_id.like("%.own"), t.c.status == "ready"
        )
    ).all():
        if row.id in back:  # its fact as decided (an admin's, or the worker's against the answers then)
            continue
        fact = {
            "truth": bool(row.truth),
            "by": f"worker {row.updated_by or row.created_by}",
            "source": list(src.get(row.derived_from) or []),
        }
        conn.execute(sa.update(t).where(t.c.id == row.id).values(truth_fact=fact))


_KEPT = ("retired_from", "truth_fact", "contradiction")


def _state(row, answers: dict) -> dict:
    """What a question's kept values hold good for: its truth, status and reason, its open question's answers."""
    source = answers.get(row.derived_from)
    return {
        "truth": row.truth,
        "status": row.status,
        "discard_reason": row.discard_reason,
        "source": None if source is None else list(source),
    }


def _put_back(conn) -> set[str]:
    """Put back what the downgrade kept, where the question is still as it was then (code before this revision may
    have changed it meanwhile: then it is read as that code left it): the fact where the truth is unchanged,
    retired_from where it lies set aside with the same reason, the contradiction where its truth, status and open
    answers are unchanged (else the next re-derivation asks again). Returns the ids whose fact came back."""
    records = take(conn, revision, "instances")
    if not records:
        return set()
    t = table_of(conn, "instances")
    rows = {r.id: r for r in conn.execute(sa.select(t))}
    answers = {i: r.answers for i, r in rows.items() if r.derived_from is None}
    back, updates = set(), []
    for k in records:
        row = rows.get(k["id"])
        if row is None:
            continue
        now, was = _state(row, answers), k["state"]
        same = {c: now[c] == was[c] for c in now}
        values = {
            "truth_fact": k["truth_fact"] if same["truth"] else None,
            "retired_from": k["retired_from"] if same["status"] and same["discard_reason"] else None,
            "contradiction": k["contradiction"] if same["truth"] and same["status"] and same["source"] else None,
        }
        if values["truth_fact"] is not None:
            back.add(row.id)
        updates.append({"k_": row.id, **{f"v_{c}": v for c, v in values.items()}})
    stmt = sa.update(t).where(t.c.id == sa.bindparam("k_")).values({c: sa.bindparam(f"v_{c}") for c in _KEPT})
    if updates:
        conn.execute(stmt, updates)
    return back


def downgrade() -> None:
    # people's decisions that nothing else records as they stand (a fact's source, a retired question's status):
    # kept until the upgrade puts them back
    conn = op.get_bind()
    t = table_of(conn, "instances")
    rows = conn.execute(sa.select(t)).all()
    answers = {r.id: r.answers for r in rows if r.derived_from is None}
    records = [
        {"id": r.id, **{c: getattr(r, c) for c in _KEPT}, "state": _state(r, answers)}
        for r in rows
        if any(getattr(r, c) is not None for c in _KEPT)
    ]
    keep(conn, revision, "instances", records)
    with op.batch_alter_table("instances") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("contradiction")
        batch.drop_column("truth_fact")
        batch.drop_column("retired_from")
