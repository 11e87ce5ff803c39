"""Calls that wait for the user: what is pending in a chat, the decisions on them, and the
`DeferredToolResults` a resumed turn continues from.

A paused turn has ended as far as the process is concerned: everything about it is in the
database (the `pending` rows and the decisions stored on them as they arrive), so it can be
resumed by any worker, after a restart too.

The pending calls of a chat are those of its active path: nothing moves the path while calls
wait (an edit, a regeneration or a switch is refused then, `app.chats.service`), so reading them
by chat is reading them on the path.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_ai import DeferredToolResults, ToolApproved, ToolDenied
from sqlalchemy import exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.history import REJECTED_TOOL_RETURN_CONTENT
from app.core.db.engine import rows_changed
from app.models import ChatLlmTool, Message


@dataclass(frozen=True, slots=True)
class PendingCall:
    row_id: int
    tool_call_id: str
    message_id: int
    decision: Mapping[str, Any] | None


async def has_pending(db: AsyncSession, chat_id: uuid.UUID) -> bool:
    return bool(
        await db.scalar(
            select(exists().where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "pending"))
        )
    )


async def pending_calls(db: AsyncSession, chat_id: uuid.UUID) -> list[PendingCall]:
    rows = await db.execute(
        select(
            ChatLlmTool.id, ChatLlmTool.tool_call_id, ChatLlmTool.message_id, ChatLlmTool.decision
        )
        .where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "pending")
        .order_by(ChatLlmTool.id)
    )
    return [PendingCall(*row) for row in rows]


async def record_decision(
    db: AsyncSession, row_id: int, approved: bool, note: str | None, now: datetime
) -> None:
    await db.execute(
        update(ChatLlmTool)
        .where(ChatLlmTool.id == row_id, ChatLlmTool.status == "pending")
        .values(decision={"approved": approved, "note": note}, updated_at=now)
    )


async def cancel_pending(db: AsyncSession, chat_id: uuid.UUID, now: datetime) -> bool:
    """End a paused turn: its pending calls are cancelled (the model later sees them
    interrupted). False when nothing was pending."""
    cancelled = await rows_changed(
        db,
        update(ChatLlmTool)
        .where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "pending")
        .values(status="cancelled", result="The user stopped the turn.", updated_at=now),
    )
    return bool(cancelled)


async def question_of(db: AsyncSession, chat_id: uuid.UUID, message_id: int) -> int:
    """The question a paused round belongs to, as its round recorded it when it started."""
    meta = await db.scalar(
        select(Message.meta).where(Message.chat_id == chat_id, Message.id == message_id)
    )
    question = (meta or {}).get("question_id")
    if isinstance(question, int):
        return question
    # A round stored before rounds recorded their question: the user message before it.
    found = await db.scalar(
        select(func.max(Message.id)).where(
            Message.chat_id == chat_id, Message.role == "user", Message.id < message_id
        )
    )
    return int(found or 0)


def rejection(note: str | None) -> str:
    note = (note or "").strip()
    return (
        f"{REJECTED_TOOL_RETURN_CONTENT} Their note: {note}"
        if note
        else (REJECTED_TOOL_RETURN_CONTENT)
    )


def deferred_results(calls: list[PendingCall]) -> DeferredToolResults:
    """What pydantic-ai resumes from: approved calls run, rejected ones answer with the note."""
    approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
    for call in calls:
        decision = call.decision or {}
        if decision.get("approved"):
            approvals[call.tool_call_id] = True
        else:
            approvals[call.tool_call_id] = ToolDenied(rejection(decision.get("note")))
    return DeferredToolResults(approvals=approvals)
