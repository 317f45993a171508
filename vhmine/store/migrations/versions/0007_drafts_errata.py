"""Drafts that workers verify (vhmine draft: a vision model's question and answers per pair task, with the
model, endpoint and prompt that made it, and the rule or worker that decided it) and errata (a worker's
flag that an instance is wrong, and an admin's decision with what it changed).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep_rows, put_rows

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "drafts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("task_id", sa.String(80), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("endpoint", sa.String(500)),
        sa.Column("prompt", sa.String(200), nullable=False),
        sa.Column("raw", sa.Text(), nullable=False),
        sa.Column("template_id", sa.String(64)),
        sa.Column("slots", sa.JSON()),
        sa.Column("question", sa.Text()),
        sa.Column("answers", sa.JSON()),
        sa.Column("yes_no", sa.JSON()),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text()),
        sa.Column("decided_by", sa.String(64), sa.ForeignKey("workers.name")),
        sa.Column("decided_at", sa.DateTime()),
        sa.Column("action_id", sa.Integer(), sa.ForeignKey("actions.id")),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_drafts_task_id", "drafts", ["task_id"])
    op.create_table(
        "errata",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("instance_id", sa.String(32), sa.ForeignKey("instances.id"), nullable=False),
        sa.Column("flagged_by", sa.String(64), sa.ForeignKey("workers.name"), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("proposed", sa.Text()),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("decided_by", sa.String(64), sa.ForeignKey("workers.name")),
        sa.Column("decided_at", sa.DateTime()),
        sa.Column("decision_reason", sa.Text()),
        sa.Column("changes", sa.JSON()),
        sa.Column("action_id", sa.Integer(), sa.ForeignKey("actions.id")),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_errata_instance_id", "errata", ["instance_id"])
    for name in ("drafts", "errata"):  # what a downgrade kept
        put_rows(op.get_bind(), revision, name)


def downgrade() -> None:
    for name in ("errata", "drafts"):  # flags, the admins' decisions on them, the drafts workers decided
        keep_rows(op.get_bind(), revision, name)
    op.drop_index("ix_errata_instance_id", "errata")
    op.drop_table("errata")
    op.drop_index("ix_drafts_task_id", "drafts")
    op.drop_table("drafts")
