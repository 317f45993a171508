"""Derived state as a function of its sources and of people's decisions (curate.derived): on a yes/no question
drafted from an open one, `retired_from` is the status it had when derivation set it aside (its status is then
discarded; it comes back to that status when drafted again), `truth_fact` a truth a person decided
({"truth", "by", "source": the open answers it was decided against}; derivation never overwrites it), and
`contradiction` the person-queue: where the open answers now imply another truth than the fact, both sides
({"fact", "derived", "decided_against", "source", "since"}) wait for an admin on the Errata page.

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


def downgrade() -> None:
    with op.batch_alter_table("instances") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("contradiction")
        batch.drop_column("truth_fact")
        batch.drop_column("retired_from")
