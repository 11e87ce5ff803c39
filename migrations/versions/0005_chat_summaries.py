"""Chat summaries: what the model gets instead of the earlier messages a summary covers.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 21:37:58.395849
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "chat_summaries",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("chat_id", sa.Uuid(), nullable=False),
        sa.Column(
            "covers_up_to_message_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            nullable=False,
        ),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chat_id"],
            ["chats.id"],
            name=op.f("fk_chat_summaries_chat_id_chats"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["covers_up_to_message_id"],
            ["messages.id"],
            name=op.f("fk_chat_summaries_covers_up_to_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_summaries")),
    )
    with op.batch_alter_table("chat_summaries", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_chat_summaries_chat_id_covers_up_to_message_id"),
            ["chat_id", "covers_up_to_message_id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("chat_summaries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chat_summaries_chat_id_covers_up_to_message_id"))

    op.drop_table("chat_summaries")
