"""Derived state as a function of its sources and of people's decisions (curate.decisions.derived): on a yes/no question
drafted from an open one, `retired_from` is the status it had when derivation set it aside (its status is then
discarded; it comes back to that status when drafted again), `truth_fact` a truth a person decided
({"truth", "by", "source": the open answers it was decided against}; derivation never overwrites it), and
`contradiction` the person-queue: where the open answers now imply another truth than the fact, both sides
({"fact", "derived", "decided_against", "source", "since"}) wait for an admin on the Errata page. A ready yes/no
question already in a worker's own words gets its truth recorded as that worker's fact.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

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
    src = {i: a for i, a in conn.execute(sa.select(t.c.id, t.c.answers).where(t.c.derived_from.is_(None)))}
    for row in conn.execute(
        sa.select(t.c.id, t.c.derived_from, t.c.truth, t.c.created_by, t.c.updated_by).where(
            t.c.derived_from.is_not(None), t.c.template_id.like("%.own"), t.c.status == "ready"
        )
    ).all():
        fact = {
            "truth": bool(row.truth),
            "by": f"worker {row.updated_by or row.created_by}",
            "source": list(src.get(row.derived_from) or []),
        }
        conn.execute(sa.update(t).where(t.c.id == row.id).values(truth_fact=fact))


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("contradiction")
        batch.drop_column("truth_fact")
        batch.drop_column("retired_from")
