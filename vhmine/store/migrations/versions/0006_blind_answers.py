"""Blind solvers: a text-only model's answer to each instance without its image, whether it was right,
and the flag it raised when it was right on every image its question is asked of (vhmine blind),
with the worker who overruled the flag and why.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep_rows, put_rows

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "blind_answers",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("instance_id", sa.String(32), sa.ForeignKey("instances.id"), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("endpoint", sa.String(500)),
        sa.Column("prompt", sa.String(200), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("scorer", sa.String(300), nullable=False),
        sa.Column("group_key", sa.String(120), nullable=False),
        sa.Column("flag_id", sa.String(32)),
        sa.Column("overruled_by", sa.String(64), sa.ForeignKey("workers.name")),
        sa.Column("overruled_at", sa.DateTime()),
        sa.Column("overrule_reason", sa.Text()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_blind_answers_instance_id", "blind_answers", ["instance_id"])
    op.create_index("ix_blind_answers_flag_id", "blind_answers", ["flag_id"])
    put_rows(op.get_bind(), revision, "blind_answers")


def downgrade() -> None:
    keep_rows(op.get_bind(), revision, "blind_answers")  # the workers' overrules of its flags among them
    op.drop_index("ix_blind_answers_flag_id", "blind_answers")
    op.drop_index("ix_blind_answers_instance_id", "blind_answers")
    op.drop_table("blind_answers")
