"""Worker status: a token generation per worker, so rotating a token or deactivating a worker ends
every session signed in with the old one.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep, put_values

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("token_generation", sa.Integer(), nullable=False, server_default=sa.text("0")))
    put_values(op.get_bind(), revision, "workers", "name", ("token_generation",))


def downgrade() -> None:
    conn = op.get_bind()  # back at 0 a ticket signed before a rotation or deactivation would be good again
    rows = conn.execute(sa.text("SELECT name, token_generation FROM workers WHERE token_generation <> 0"))
    keep(conn, revision, "workers", [dict(r._mapping) for r in rows])
    with op.batch_alter_table("workers") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("token_generation")
