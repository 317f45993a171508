"""Tasks held by the system (status "held") while one of their images is missing or changed: `held_reason` says
which image and why ("image missing: <id>", "image changed: <id>"); the task comes back to "open" when the image
does (curate.work.holds). A worker's `discard_reason` stays the worker's own.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("tasks", sa.Column("held_reason", sa.Text()))


def downgrade() -> None:
    # a held task is an open one whose image is to be checked again: so it is before this revision
    op.execute(sa.text("UPDATE tasks SET status = 'open' WHERE status = 'held'"))
    with op.batch_alter_table("tasks") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("held_reason")
