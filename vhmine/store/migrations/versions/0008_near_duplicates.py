"""Near duplicates found by `vhmine export` (vhmine.export.neardup): each pair with the encoders and thresholds
that found it, and a worker's overrule (who, when, why).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep_rows, put_rows

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "near_duplicates",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("a_image", sa.String(64), nullable=False),
        sa.Column("a_sha256", sa.String(64)),
        sa.Column("b_index", sa.String(200)),
        sa.Column("b_image", sa.String(200), nullable=False),
        sa.Column("b_sha256", sa.String(64)),
        sa.Column("b_path", sa.Text()),
        sa.Column("clip", sa.Float(), nullable=False),
        sa.Column("dino", sa.Float(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=False),
        sa.Column("encoders", sa.JSON(), nullable=False),
        sa.Column("thresholds", sa.JSON(), nullable=False),
        sa.Column("overruled_by", sa.String(64), sa.ForeignKey("workers.name")),
        sa.Column("overruled_at", sa.DateTime()),
        sa.Column("overrule_reason", sa.Text()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("seen_at", sa.DateTime(), nullable=False),
    )
    put_rows(op.get_bind(), revision, "near_duplicates")


def downgrade() -> None:
    keep_rows(op.get_bind(), revision, "near_duplicates")  # the workers' overrules among them
    op.drop_table("near_duplicates")
