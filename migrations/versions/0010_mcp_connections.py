"""Each user's credentials for MCP servers that sign people in (`auth: oauth`), encrypted.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 06:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "mcp_connections",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("server", sa.String(length=64), nullable=False),
        sa.Column("tokens", sa.LargeBinary(), nullable=True),
        sa.Column("client", sa.LargeBinary(), nullable=True),
        sa.Column("metadata", JSON_DOC, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "server"),
    )


def downgrade() -> None:
    op.drop_table("mcp_connections")
