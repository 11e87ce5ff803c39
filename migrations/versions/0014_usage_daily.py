"""Usage totals per user, UTC day and model, filled from the request log so far.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "usage_daily",
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_read_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cache_write_tokens", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "model", "day"),
        sqlite_with_rowid=False,
    )
    if op.get_bind().dialect.name == "postgresql":
        day = "CAST(started_at AT TIME ZONE 'UTC' AS DATE)"
    else:
        day = "date(started_at)"  # stored as UTC text, 'YYYY-MM-DD HH:MM:SS…'
    op.execute(
        f"""
        INSERT INTO usage_daily (user_id, day, model, requests, input_tokens, output_tokens,
                                 cache_read_tokens, cache_write_tokens)
        SELECT user_id, {day}, model, count(*), coalesce(sum(input_tokens), 0),
               coalesce(sum(output_tokens), 0), coalesce(sum(cache_read_tokens), 0),
               coalesce(sum(cache_write_tokens), 0)
        FROM llm_requests WHERE user_id IS NOT NULL
        GROUP BY user_id, {day}, model
        """
    )


def downgrade() -> None:
    op.drop_table("usage_daily")
