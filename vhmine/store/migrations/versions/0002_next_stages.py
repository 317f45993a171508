"""Room for the next stages: model responses and their worker labels, descriptions, generations.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep_rows, put_rows

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TABLES = ("responses", "response_labels", "descriptions", "generations")  # parents first


def upgrade() -> None:
    op.create_table(
        "responses",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("instance_id", sa.String(32), sa.ForeignKey("instances.id"), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("verdict", sa.String(16)),
        sa.Column("judge", sa.String(200)),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_responses_instance_id", "responses", ["instance_id"])
    op.create_table(
        "response_labels",
        sa.Column("response_id", sa.String(32), sa.ForeignKey("responses.id"), primary_key=True),
        sa.Column("worker", sa.String(64), sa.ForeignKey("workers.name"), primary_key=True),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("action_id", sa.Integer(), sa.ForeignKey("actions.id")),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "descriptions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("model", sa.String(200)),
        sa.Column("hypothetical", sa.Boolean(), nullable=False),
        sa.Column("sources", sa.JSON()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_descriptions_mode", "descriptions", ["mode"])
    op.create_table(
        "generations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("image_id", sa.String(16), sa.ForeignKey("images.id"), nullable=False, unique=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=False),
        sa.Column("description_id", sa.String(32), sa.ForeignKey("descriptions.id")),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("seed", sa.Integer()),
        sa.Column("params", sa.JSON()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    for name in _TABLES:  # what a downgrade kept
        put_rows(op.get_bind(), revision, name)


def downgrade() -> None:
    for name in reversed(_TABLES):  # workers' labels, model answers, descriptions: the upgrade cannot make them again
        keep_rows(op.get_bind(), revision, name)
        op.drop_table(name)
