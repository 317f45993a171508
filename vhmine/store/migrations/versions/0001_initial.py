"""Initial schema: images, runs, pairs, workers, the task queue, the action log, instances, reviews.

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import drop_kept

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "images",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("categories", sa.JSON()),
        sa.Column("width", sa.Integer()),
        sa.Column("height", sa.Integer()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("pairs_path", sa.Text(), nullable=False),
        sa.Column("meta", sa.JSON()),
        sa.Column("seeded_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "pairs",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("image_a", sa.String(16), sa.ForeignKey("images.id"), nullable=False),
        sa.Column("image_b", sa.String(16), sa.ForeignKey("images.id"), nullable=False),
        sa.Column("rank", sa.Integer()),
        sa.Column("clip_sim", sa.Float()),
        sa.Column("dino_sim", sa.Float()),
        sa.Column("gap", sa.Float()),
        sa.Column("run", sa.String(200), sa.ForeignKey("runs.name")),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "workers",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(80), primary_key=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("pair_id", sa.String(40), sa.ForeignKey("pairs.id")),
        sa.Column("image_id", sa.String(16), sa.ForeignKey("images.id")),
        sa.Column("priority", sa.Float(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("discard_reason", sa.Text()),
        sa.Column("lease_worker", sa.String(64), sa.ForeignKey("workers.name")),
        sa.Column("lease_until", sa.DateTime()),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("done_by", sa.String(64), sa.ForeignKey("workers.name")),
        sa.Column("done_at", sa.DateTime()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_tasks_queue", "tasks", ["mode", "status", "priority"])
    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("worker", sa.String(64), sa.ForeignKey("workers.name"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("task_id", sa.String(80), sa.ForeignKey("tasks.id")),
        sa.Column("payload", sa.JSON()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("undone_at", sa.DateTime()),
    )
    op.create_index("ix_actions_worker", "actions", ["worker", "id"])
    op.create_table(
        "instances",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("task_id", sa.String(80), sa.ForeignKey("tasks.id"), nullable=False),
        sa.Column("action_id", sa.Integer(), sa.ForeignKey("actions.id")),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(3), nullable=False),
        sa.Column("image_id", sa.String(16), sa.ForeignKey("images.id"), nullable=False),
        sa.Column("pair_id", sa.String(40), sa.ForeignKey("pairs.id")),
        sa.Column("template_id", sa.String(64), nullable=False),
        sa.Column("slots", sa.JSON(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("truth", sa.Boolean()),
        sa.Column("derived_from", sa.String(32), sa.ForeignKey("instances.id")),
        sa.Column("draft_value", sa.Text()),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("discard_reason", sa.Text()),
        sa.Column("created_by", sa.String(64), sa.ForeignKey("workers.name"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_by", sa.String(64), sa.ForeignKey("workers.name")),
        sa.Column("updated_at", sa.DateTime()),
    )
    op.create_index("ix_instances_mode", "instances", ["mode", "kind", "status"])
    op.create_table(
        "reviews",
        sa.Column("instance_id", sa.String(32), sa.ForeignKey("instances.id"), primary_key=True),
        sa.Column("worker", sa.String(64), sa.ForeignKey("workers.name"), primary_key=True),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("action_id", sa.Integer(), sa.ForeignKey("actions.id")),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    drop_kept(op.get_bind())  # no store left to put back into
    for name in ("reviews", "instances", "actions", "tasks", "workers", "pairs", "runs", "images"):
        op.drop_table(name)
