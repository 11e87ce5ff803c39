"""A chat and everything that lives and dies with it: messages, tool calls, activations.

A chat is a tree of messages (`Message.parent_id`); what a user sees and a model is sent is one
path through it, from a root to `Chat.active_leaf_id` (`app.models.paths`). Message and tool-call
ids are global integers that grow with time (SQLite keeps them monotonic through AUTOINCREMENT,
PostgreSQL through an identity sequence), so a child's id is always above its parent's: along a
path "after message N" is a comparison, and a path in id order is a path in conversation order.
Every child row cascades from its chat, in the database itself, so deleting a chat (with every
branch) is one statement.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.sql.expression import false

from app.core.db.base import Base
from app.core.db.types import BigId, JSONDoc, UTCDateTime


class Chat(Base):
    __tablename__ = "chats"
    __table_args__ = (
        Index(None, "user_id", "updated_at", "id"),
        # Every worker's sweep asks for lapsed leases every few seconds: only held ones are indexed.
        Index(
            "ix_chats_held_lease",
            "turn_lease_until",
            postgresql_where=text("turn_owner IS NOT NULL"),
            sqlite_where=text("turn_owner IS NOT NULL"),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    title: Mapped[str | None] = mapped_column(String(200), default=None)
    model: Mapped[str] = mapped_column(String(300))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """Last activity: creation, a change to the chat, or a message stored in it."""
    turn_owner: Mapped[str | None] = mapped_column(String(64), default=None)
    """The id of the turn running in this chat, if one is (set together with its lease)."""
    turn_lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    """The running turn renews this; a turn whose process died lapses when it passes."""
    turn_stop_requested: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=false()
    )
    """Set by `/stop`; whichever process owns the turn sees it and cancels the turn."""
    active_leaf_id: Mapped[int | None] = mapped_column(BigId, default=None)
    """The last message of the branch the user is on (None while the chat is empty). Not a
    foreign key: chats and messages would reference each other, and a message is only ever
    deleted with its chat."""


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (
        Index(None, "chat_id", "id"),
        Index(None, "parent_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    chat_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    parent_id: Mapped[int | None] = mapped_column(BigId, default=None)
    """The message this one follows (None for a root): a turn's user message hangs under the
    last message of the turn before it, its first round under it, each later round under the
    round before. Always a message of the same chat, set by hearth alone. Not a foreign key:
    SQLite adds one to an existing table only by rebuilding it, and dropping `messages` with
    foreign keys on would cascade into every table that points at it; a message is only ever
    deleted with its whole chat, so no parent goes missing."""
    role: Mapped[str] = mapped_column(String(16))
    """`user` or `assistant`."""
    content: Mapped[str] = mapped_column(Text, default="")
    reasoning: Mapped[str | None] = mapped_column(Text, default=None)
    status: Mapped[str] = mapped_column(String(16), default="ok")
    """`streaming`, `ok`, `failed`, `cancelled` or `incomplete`."""
    error: Mapped[str | None] = mapped_column(Text, default=None)
    model: Mapped[str | None] = mapped_column(String(300), default=None)
    provider_details: Mapped[dict[str, Any] | None] = mapped_column(JSONDoc, default=None)
    """What replaying the round needs: thinking signatures, reasoning content, response ids."""
    input_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    output_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    cache_read_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    cache_write_tokens: Mapped[int | None] = mapped_column(Integer, default=None)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONDoc, default=dict)
    """Attachments (`{"attachments": [upload_id, ...]}`) and other per-message facts."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ChatLlmTool(Base):
    __tablename__ = "chat_llm_tools"
    __table_args__ = (
        Index(None, "message_id", "id"),
        Index(None, "chat_id", "tool_call_id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    chat_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    """The assistant message (model round) that made the call."""
    tool_call_id: Mapped[str] = mapped_column(String(200))
    """Exactly as the model sent it; replayed to the provider unchanged."""
    name: Mapped[str] = mapped_column(String(200))
    arguments: Mapped[Any] = mapped_column(JSONDoc, default=dict)
    result: Mapped[str | None] = mapped_column(Text, default=None)
    result_type: Mapped[str | None] = mapped_column(String(32), default=None)
    status: Mapped[str] = mapped_column(String(16), default="running")
    """`running`, `pending`, `done`, `failed`, `cancelled` or `rejected`."""
    preview_old: Mapped[str | None] = mapped_column(Text, default=None)
    preview_new: Mapped[str | None] = mapped_column(Text, default=None)
    media: Mapped[Any] = mapped_column(JSONDoc, default=None, nullable=True)
    """`[{path, mime, size}]` of the media a call returned: references, never bytes."""
    decision: Mapped[Any] = mapped_column(JSONDoc, default=None, nullable=True)
    """The user's answer to a `pending` call, `{approved, note}`, kept until the turn resumes."""
    elicitation: Mapped[Any] = mapped_column(JSONDoc, default=None, nullable=True)
    """What the call's MCP server asked the user while it ran (`elicitation/create`):
    `{id, message, requested_schema}`, and once answered `action` and `content`."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ActivatedTool(Base):
    __tablename__ = "activated_tools"
    __table_args__ = (UniqueConstraint("message_id", "kind", "ref"),)
    """A group activates once per path (a second call answers `already_active`), but two
    branches may each activate it, at anchors of their own."""

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    chat_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    """The assistant message whose tool call activated the group (its anchor): the activation
    is in force on exactly the paths through it."""
    kind: Mapped[str] = mapped_column(String(16))
    """`builtin` or `mcp`."""
    ref: Mapped[str] = mapped_column(String(200))
    """The group's name."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ChatSummary(Base):
    """A summary of a chat's earlier messages: the model gets it instead of the ones it covers.

    The covered messages stay stored and listed; only the requests change.
    """

    __tablename__ = "chat_summaries"
    __table_args__ = (Index(None, "chat_id", "covers_up_to_message_id"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    chat_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("chats.id", ondelete="CASCADE"))
    covers_up_to_message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE")
    )
    content: Mapped[str] = mapped_column(Text)
    model: Mapped[str] = mapped_column(String(300))
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
