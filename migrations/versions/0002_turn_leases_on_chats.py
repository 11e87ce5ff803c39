"""Turn leases on chats: which turn runs in a chat, until when, and whether it was asked to stop.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 15:06:26.768149
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("chats", schema=None) as batch_op:
        batch_op.add_column(sa.Column("turn_owner", sa.String(length=64), nullable=True))
        batch_op.add_column(
            sa.Column("turn_lease_until", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column(
                "turn_stop_requested", sa.Boolean(), server_default=sa.false(), nullable=False
            )
        )


def downgrade() -> None:
    with op.batch_alter_table("chats", schema=None) as batch_op:
        batch_op.drop_column("turn_stop_requested")
        batch_op.drop_column("turn_lease_until")
        batch_op.drop_column("turn_owner")
