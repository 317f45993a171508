"""Blind answers follow their reference: `reference` is what an answer was scored against (the instance's
answers and truth then), so a rerun of `vhmine blind` sees which stored answers to score again; `correct`
may be NULL, an answer waiting to be scored again (its judge must see the new reference) that counts
nowhere until it is. Rows stored before keep NULL references: a rerun scores them once.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("blind_answers") as batch:
        batch.add_column(sa.Column("reference", sa.JSON()))
        batch.alter_column("correct", existing_type=sa.Boolean(), nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("blind_answers") as batch:
        batch.alter_column("correct", existing_type=sa.Boolean(), nullable=False)
        batch.drop_column("reference")
