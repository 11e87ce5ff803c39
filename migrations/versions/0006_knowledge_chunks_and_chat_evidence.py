"""Knowledge: the user's documents as passages, their full-text index, and chat evidence.

The index differs per database: SQLite gets an FTS5 table over the passages (external content,
kept in step by triggers, Porter stemming), PostgreSQL a stored generated tsvector column under a
GIN index. `app.knowledge.index` names these objects; `alembic check` leaves them alone.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 23:27:17.102592
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX_DDL = {
    "sqlite": (
        "CREATE VIRTUAL TABLE knowledge_fts USING fts5(heading, text, "
        "content='knowledge_chunks', content_rowid='id', "
        "tokenize='porter unicode61 remove_diacritics 2')",
        "CREATE TRIGGER knowledge_fts_ai AFTER INSERT ON knowledge_chunks BEGIN "
        "INSERT INTO knowledge_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); "
        "END",
        "CREATE TRIGGER knowledge_fts_ad AFTER DELETE ON knowledge_chunks BEGIN "
        "INSERT INTO knowledge_fts(knowledge_fts, rowid, heading, text) "
        "VALUES ('delete', old.id, old.heading, old.text); END",
        "CREATE TRIGGER knowledge_fts_au AFTER UPDATE ON knowledge_chunks BEGIN "
        "INSERT INTO knowledge_fts(knowledge_fts, rowid, heading, text) "
        "VALUES ('delete', old.id, old.heading, old.text); "
        "INSERT INTO knowledge_fts(rowid, heading, text) VALUES (new.id, new.heading, new.text); "
        "END",
    ),
    "postgresql": (
        "ALTER TABLE knowledge_chunks ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
        "setweight(to_tsvector('english', coalesce(heading, '')), 'A') || "
        "setweight(to_tsvector('english', text), 'B')) STORED",
        "CREATE INDEX ix_knowledge_chunks_search_vector ON knowledge_chunks "
        "USING gin (search_vector)",
    ),
}
INDEX_DROP = {
    "sqlite": (
        "DROP TRIGGER knowledge_fts_au",
        "DROP TRIGGER knowledge_fts_ad",
        "DROP TRIGGER knowledge_fts_ai",
        "DROP TABLE knowledge_fts",
    ),
    "postgresql": (
        "DROP INDEX ix_knowledge_chunks_search_vector",
        "ALTER TABLE knowledge_chunks DROP COLUMN search_vector",
    ),
}


def upgrade() -> None:
    op.create_table(
        "knowledge_chunks",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("upload_id", sa.Uuid(), nullable=False),
        sa.Column("chunk_id", sa.String(length=64), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("page", sa.Integer(), nullable=True),
        sa.Column("heading", sa.Text(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["upload_id"],
            ["uploads.id"],
            name=op.f("fk_knowledge_chunks_upload_id_uploads"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_knowledge_chunks_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_knowledge_chunks")),
        sa.UniqueConstraint(
            "user_id", "chunk_id", name=op.f("uq_knowledge_chunks_user_id_chunk_id")
        ),
    )
    with op.batch_alter_table("knowledge_chunks", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_knowledge_chunks_upload_id"), ["upload_id"], unique=False
        )

    op.create_table(
        "chat_evidence",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("chat_id", sa.Uuid(), nullable=False),
        sa.Column(
            "question_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("epoch", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column(
            "chunk_row_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["chat_id"],
            ["chats.id"],
            name=op.f("fk_chat_evidence_chat_id_chats"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["chunk_row_id"],
            ["knowledge_chunks.id"],
            name=op.f("fk_chat_evidence_chunk_row_id_knowledge_chunks"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["epoch"],
            ["messages.id"],
            name=op.f("fk_chat_evidence_epoch_messages"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["question_id"],
            ["messages.id"],
            name=op.f("fk_chat_evidence_question_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_evidence")),
    )
    with op.batch_alter_table("chat_evidence", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_chat_evidence_chat_id_question_id_epoch"),
            ["chat_id", "question_id", "epoch"],
            unique=False,
        )
        batch_op.create_index(
            batch_op.f("ix_chat_evidence_chunk_row_id"), ["chunk_row_id"], unique=False
        )

    with op.batch_alter_table("uploads", schema=None) as batch_op:
        batch_op.add_column(sa.Column("ingest_status", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("ingest_error", sa.Text(), nullable=True))

    for statement in INDEX_DDL.get(op.get_bind().dialect.name, ()):
        op.execute(statement)


def downgrade() -> None:
    for statement in INDEX_DROP.get(op.get_bind().dialect.name, ()):
        op.execute(statement)
    with op.batch_alter_table("uploads", schema=None) as batch_op:
        batch_op.drop_column("ingest_error")
        batch_op.drop_column("ingest_status")

    with op.batch_alter_table("chat_evidence", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_chat_evidence_chunk_row_id"))
        batch_op.drop_index(batch_op.f("ix_chat_evidence_chat_id_question_id_epoch"))

    op.drop_table("chat_evidence")
    with op.batch_alter_table("knowledge_chunks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_knowledge_chunks_upload_id"))

    op.drop_table("knowledge_chunks")
