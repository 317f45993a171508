"""The endpoint that gave each model response (base URL without credentials), so two servers that
serve the same model name never count as one model. Responses stored before stay NULL: unknown.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep, put_values

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("responses") as batch:
        batch.add_column(sa.Column("endpoint", sa.String(500)))
    put_values(op.get_bind(), revision, "responses", "id", ("endpoint",))


def downgrade() -> None:
    conn = op.get_bind()  # which server gave each answer is known only here
    rows = conn.execute(sa.text("SELECT id, endpoint FROM responses WHERE endpoint IS NOT NULL"))
    keep(conn, revision, "responses", [dict(r._mapping) for r in rows])
    with op.batch_alter_table("responses") as batch:
        batch.drop_column("endpoint")
