"""Branches: each message's parent, each chat's active leaf, activations anchored per branch.

Every existing chat becomes one branch: each message's parent is the message stored before it in
its chat (ids grow with time), and the chat's active leaf is its last message. A group could be
activated once per chat; now once per anchor, since two branches may each activate it.

The parent is a plain column, not a foreign key (app/models/chats.py says why): on SQLite a
foreign key is added only by rebuilding `messages`, and dropping it with foreign keys on would
cascade into every table that points at it.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

BACKFILL_PARENTS = """
UPDATE messages SET parent_id = (
    SELECT max(earlier.id) FROM messages AS earlier
    WHERE earlier.chat_id = messages.chat_id AND earlier.id < messages.id
)
"""
BACKFILL_LEAVES = """
UPDATE chats SET active_leaf_id = (
    SELECT max(messages.id) FROM messages WHERE messages.chat_id = chats.id
)
"""


def upgrade() -> None:
    op.add_column("messages", sa.Column("parent_id", BIG_ID, nullable=True))
    op.execute(BACKFILL_PARENTS)
    op.create_index(op.f("ix_messages_parent_id"), "messages", ["parent_id"])

    op.add_column("chats", sa.Column("active_leaf_id", BIG_ID, nullable=True))
    op.execute(BACKFILL_LEAVES)

    with op.batch_alter_table("activated_tools") as table:
        table.drop_constraint(op.f("uq_activated_tools_chat_id_kind_ref"), type_="unique")
        table.drop_index(op.f("ix_activated_tools_message_id"))
        table.create_unique_constraint(
            op.f("uq_activated_tools_message_id_kind_ref"), ["message_id", "kind", "ref"]
        )


def downgrade() -> None:
    # Two branches may have activated the same group: the oldest activation of each stays.
    op.execute(
        "DELETE FROM activated_tools WHERE id NOT IN ("
        "SELECT min(id) FROM activated_tools GROUP BY chat_id, kind, ref)"
    )
    with op.batch_alter_table("activated_tools") as table:
        table.drop_constraint(op.f("uq_activated_tools_message_id_kind_ref"), type_="unique")
        table.create_index(op.f("ix_activated_tools_message_id"), ["message_id"])
        table.create_unique_constraint(
            op.f("uq_activated_tools_chat_id_kind_ref"), ["chat_id", "kind", "ref"]
        )
    # In place on both engines (SQLite 3.35+ drops a column itself): a batch copy of either
    # table would drop it, and the drop would cascade into the tables that point at it.
    op.drop_column("chats", "active_leaf_id")
    op.drop_index(op.f("ix_messages_parent_id"), table_name="messages")
    op.drop_column("messages", "parent_id")
