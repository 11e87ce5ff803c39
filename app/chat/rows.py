"""A chat's stored rows, as the message builder and the turn runner read them.

Loading is two queries however long the chat is (its messages, then all its tool calls), and
the result is plain frozen data, so everything built from it is a pure function of the rows.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import ChatLlmTool, Message


@dataclass(frozen=True, slots=True)
class StoredToolCall:
    id: int
    tool_call_id: str
    name: str
    arguments: Any
    status: str
    result: str | None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    id: int
    role: str
    content: str
    reasoning: str | None
    status: str
    model: str | None
    provider_details: dict[str, Any] | None
    meta: dict[str, Any]
    created_at: datetime
    tool_calls: tuple[StoredToolCall, ...] = field(default=())


async def load_rows(db: AsyncSession, chat_id: uuid.UUID) -> list[StoredMessage]:
    messages = (
        await db.execute(
            select(
                Message.id,
                Message.role,
                Message.content,
                Message.reasoning,
                Message.status,
                Message.model,
                Message.provider_details,
                Message.meta,
                Message.created_at,
            )
            .where(Message.chat_id == chat_id)
            .order_by(Message.id)
        )
    ).all()
    calls = (
        await db.execute(
            select(
                ChatLlmTool.id,
                ChatLlmTool.message_id,
                ChatLlmTool.tool_call_id,
                ChatLlmTool.name,
                ChatLlmTool.arguments,
                ChatLlmTool.status,
                ChatLlmTool.result,
            )
            .where(ChatLlmTool.chat_id == chat_id)
            .order_by(ChatLlmTool.id)
        )
    ).all()
    by_message: dict[int, list[StoredToolCall]] = defaultdict(list)
    for call in calls:
        by_message[call.message_id].append(
            StoredToolCall(
                call.id, call.tool_call_id, call.name, call.arguments, call.status, call.result
            )
        )
    return [
        StoredMessage(
            id=row.id,
            role=row.role,
            content=row.content,
            reasoning=row.reasoning,
            status=row.status,
            model=row.model,
            provider_details=row.provider_details,
            meta=row.meta or {},
            created_at=row.created_at,
            tool_calls=tuple(by_message.get(row.id, ())),
        )
        for row in messages
    ]
