"""The mode a worker last chose in the app, so that it is theirs again at the next sign-in (any browser).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("mode", sa.String(16)))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("mode")
