"""What an MCP server asked the user during a call, and the request log's purpose column.

`chat_llm_tools.elicitation` keeps a server's `elicitation/create` on the call that it paused
(answerable from any worker, shown again after a reload); `llm_requests.purpose` tells a turn's
model rounds from the completions MCP servers asked for (`sampling`), which count as usage too.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 05:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chat_llm_tools") as table:
        table.add_column(sa.Column("elicitation", JSON_DOC, nullable=True))
    with op.batch_alter_table("llm_requests") as table:
        table.add_column(
            sa.Column("purpose", sa.String(length=16), server_default="round", nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("llm_requests") as table:
        table.drop_column("purpose")
    with op.batch_alter_table("chat_llm_tools") as table:
        table.drop_column("elicitation")
