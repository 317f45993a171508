"""A store's own secrets: the key that turns worker names into stable pseudonyms in exports.

Revision ID: 0003
Revises: 0002
"""

import datetime as dt
import secrets

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep_rows, put_rows

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "secrets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.String(128), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    if put_rows(op.get_bind(), revision, "secrets"):  # a downgrade kept the store's own: the same pseudonyms
        return
    # made here, once per store, so every export of this store gives a worker the same pseudonym
    op.bulk_insert(
        table,
        [
            {
                "name": "pseudonyms",
                "value": secrets.token_hex(32),
                "created_at": dt.datetime.now(dt.timezone.utc).replace(tzinfo=None),
            }
        ],
    )


def downgrade() -> None:
    keep_rows(op.get_bind(), revision, "secrets")  # a new key would give every worker a new pseudonym
    op.drop_table("secrets")
