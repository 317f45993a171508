"""Blind answers follow their reference: `reference` is what an answer was scored against (the instance's
answers and truth then), so a rerun of `vhmine blind` sees which stored answers to score again; `correct`
may be NULL, an answer waiting to be scored again (its judge must see the new reference) that counts
nowhere until it is. Rows stored before keep NULL references: a rerun scores them once.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep, put_values, table_of

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("blind_answers") as batch:
        batch.add_column(sa.Column("reference", sa.JSON()))
        batch.alter_column("correct", existing_type=sa.Boolean(), nullable=True)
    put_values(op.get_bind(), revision, "blind_answers", "id", ("reference", "correct"))


def downgrade() -> None:
    # what each answer was scored against, and which wait to be scored again, kept for the upgrade back; before this
    # revision every answer is scored: those count as wrong meanwhile (False raises no flag)
    conn = op.get_bind()
    t = table_of(conn, "blind_answers")
    rows = conn.execute(
        sa.select(t.c.id, t.c.reference, t.c.correct).where(t.c.reference.is_not(None) | t.c.correct.is_(None))
    )
    keep(conn, revision, "blind_answers", [dict(r._mapping) for r in rows])
    conn.execute(sa.update(t).where(t.c.correct.is_(None)).values(correct=False))
    with op.batch_alter_table("blind_answers") as batch:
        batch.alter_column("correct", existing_type=sa.Boolean(), nullable=False)
        batch.drop_column("reference")
