"""A chat's activated tool groups: read at the start of each turn, listed, and reset."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import ActivatedTool


async def load_anchors(db: AsyncSession, chat_id: uuid.UUID) -> dict[int, list[str]]:
    """The chat's activated groups by the assistant message that activated them."""
    rows = await db.execute(
        select(ActivatedTool.message_id, ActivatedTool.ref)
        .where(ActivatedTool.chat_id == chat_id)
        .order_by(ActivatedTool.id)
    )
    anchors: dict[int, list[str]] = {}
    for message_id, ref in rows:
        anchors.setdefault(message_id, []).append(ref)
    return anchors


async def list_activations(db: AsyncSession, chat_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = (
        await db.execute(
            select(
                ActivatedTool.kind,
                ActivatedTool.ref,
                ActivatedTool.message_id,
                ActivatedTool.created_at,
            )
            .where(ActivatedTool.chat_id == chat_id)
            .order_by(ActivatedTool.message_id, ActivatedTool.id)
        )
    ).all()
    return [
        {"kind": kind, "ref": ref, "message_id": message_id, "created_at": created_at}
        for kind, ref, message_id, created_at in rows
    ]


async def reset_activations(db: AsyncSession, chat_id: uuid.UUID) -> None:
    await db.execute(delete(ActivatedTool).where(ActivatedTool.chat_id == chat_id))
