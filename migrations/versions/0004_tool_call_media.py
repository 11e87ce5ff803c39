"""Tool-call media: the files a call returned for the model to see, as references.

`read_file` on an image, a PDF or a video answers a neutral note; the medium itself is kept as
`[{path, mime, size}]` (relative to the user's file root, never the bytes), and the message
builder reads it again, contained, when a request of the same turn is built.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 21:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chat_llm_tools", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "media",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("chat_llm_tools", schema=None) as batch_op:
        batch_op.drop_column("media")
