"""Tool-call decisions: the user's answer to a call that waits for approval.

Decisions may arrive in several requests; each is kept on its call until the last one resumes
the paused turn, so a pause survives a restart of the service.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 21:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chat_llm_tools", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "decision",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("chat_llm_tools", schema=None) as batch_op:
        batch_op.drop_column("decision")
