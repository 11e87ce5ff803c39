"""The installation table: the id of this database, which a data dir records as its own.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 14:50:00.000000
"""

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    installation = op.create_table(
        "installation",
        sa.Column("key", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_installation")),
        sa.UniqueConstraint("id", name=op.f("uq_installation_id")),
    )
    op.bulk_insert(installation, [{"key": 1, "id": uuid.uuid4(), "created_at": datetime.now(UTC)}])


def downgrade() -> None:
    op.drop_table("installation")
