"""An index of held turn leases, for the sweep that settles the turns of dead processes.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 21:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HELD = sa.text("turn_owner IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_chats_held_lease",
        "chats",
        ["turn_lease_until"],
        postgresql_where=HELD,
        sqlite_where=HELD,
    )


def downgrade() -> None:
    op.drop_index("ix_chats_held_lease", table_name="chats")
