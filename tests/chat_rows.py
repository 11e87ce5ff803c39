"""Messages stored straight into a chat, as hearth stores them: each under the active leaf,
which it then becomes (the chat is a tree, API.md "Branches")."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Chat, Message


async def append(db: AsyncSession, chat_id: uuid.UUID, **fields: Any) -> Message:
    """A message at the end of the chat's active path (flushed, so it has its id)."""
    leaf = await db.scalar(select(Chat.active_leaf_id).where(Chat.id == chat_id))
    message = Message(chat_id=chat_id, parent_id=leaf, **fields)
    db.add(message)
    await db.flush()
    await db.execute(update(Chat).where(Chat.id == chat_id).values(active_leaf_id=message.id))
    return message
