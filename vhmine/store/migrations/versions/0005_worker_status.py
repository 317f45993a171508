"""Worker status: a token generation per worker, so rotating a token or deactivating a worker ends
every session signed in with the old one.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("token_generation", sa.Integer(), nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("token_generation")
