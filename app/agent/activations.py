"""A chat's activated tool groups along its active path: read at the start of each turn,
listed, and reset.

An activation is in force on a path exactly when its anchor (the assistant message whose call
activated it) is on that path, so every read here selects the path's anchors and nothing else,
and a reset clears what the user's branch shows.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import ActivatedTool
from app.models.paths import BOUND_PATH, active_path, on_path

_ANCHORS = (
    select(ActivatedTool.message_id, ActivatedTool.ref)
    .where(ActivatedTool.message_id.in_(on_path(BOUND_PATH)))
    .order_by(ActivatedTool.id)
)
"""Built once: every turn reads it (`app.chats.repository` says why)."""


async def load_anchors(db: AsyncSession, chat_id: uuid.UUID) -> dict[int, list[str]]:
    """The path's activated groups by the assistant message that activated them."""
    rows = await db.execute(_ANCHORS, {"chat_id": chat_id})
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
            .where(ActivatedTool.message_id.in_(on_path(active_path(chat_id))))
            .order_by(ActivatedTool.message_id, ActivatedTool.id)
        )
    ).all()
    return [
        {"kind": kind, "ref": ref, "message_id": message_id, "created_at": created_at}
        for kind, ref, message_id, created_at in rows
    ]


async def reset_activations(db: AsyncSession, chat_id: uuid.UUID) -> None:
    """Remove the path's activations (anchors shared with other branches are theirs too)."""
    path = select(active_path(chat_id).c.id)
    await db.execute(
        delete(ActivatedTool)
        .where(ActivatedTool.chat_id == chat_id, ActivatedTool.message_id.in_(path))
        .execution_options(synchronize_session=False)
    )
