"""The mode a worker last chose in the app, so that it is theirs again at the next sign-in (any browser).

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep, put_values

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("mode", sa.String(16)))
    put_values(op.get_bind(), revision, "workers", "name", ("mode",))


def downgrade() -> None:
    conn = op.get_bind()  # the mode each worker chose
    rows = conn.execute(sa.text("SELECT name, mode FROM workers WHERE mode IS NOT NULL"))
    keep(conn, revision, "workers", [dict(r._mapping) for r in rows])
    with op.batch_alter_table("workers") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("mode")
