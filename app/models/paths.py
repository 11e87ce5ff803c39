"""The active path of a chat, in SQL: the messages from a root down to the chat's active leaf.

A chat is a tree (`Message.parent_id`), and everything read for a user or a model is one path
through it. The path is a recursive CTE that walks parent links up from the leaf, so reading it
is one statement however long the chat is and however many branches it has; every query that
must see the path alone (its messages, their tool calls, activations, summaries, evidence)
selects from the CTE in the same statement, so a chat of any shape is read in the same fixed
number of statements as a linear one. A child's id is always above its parent's, so the path in
id order is the conversation in order.

It lives beside the tables rather than in a feature package because the features that read
the path span layers (the turn engine, the knowledge evidence, the chat views).
"""

from __future__ import annotations

import uuid

from sqlalchemy import CTE, ColumnElement, Select, bindparam, func, literal, select

from app.core.db.types import BigId
from app.models.chats import Chat, Message

ChatKey = uuid.UUID | ColumnElement[uuid.UUID]
"""A chat id, or a bound parameter standing for one (in statements built once)."""


def path_to(leaf: ColumnElement[int] | int, chat_id: ChatKey | None = None) -> CTE:
    """The ids of the messages from a root to `leaf` (one column, `id`), as a recursive CTE.

    With `chat_id`, the walk stays inside that chat, so a leaf of another chat gives nothing.
    """
    start = select((literal(leaf, BigId) if isinstance(leaf, int) else leaf).label("id"))
    if chat_id is not None:
        start = start.where(
            select(Message.id).where(Message.id == leaf, Message.chat_id == chat_id).exists()
        )
    path = start.cte("path", recursive=True)
    parent = select(Message.parent_id.label("id")).join(path, Message.id == path.c.id)
    return path.union_all(parent.where(Message.parent_id.is_not(None)))


def active_path(chat_id: ChatKey) -> CTE:
    """The ids on the chat's active path (none while the chat is empty)."""
    leaf = select(Chat.active_leaf_id).where(Chat.id == chat_id).scalar_subquery()
    return path_to(leaf, chat_id)


BOUND_PATH = active_path(bindparam("chat_id"))
"""The active path of the chat bound as `chat_id`, for the statements built once at import
(`app.chats.repository` says why): one CTE, shared by every statement that reads a path."""


def on_path(path: CTE) -> Select[tuple[int]]:
    """`column.in_(on_path(path))`: whether a message id is on the path."""
    return select(path.c.id)


def newest_leaf_under(message_id: int) -> Select[tuple[int | None]]:
    """The leaf reached from `message_id` by following, at each fork, the newest child.

    Ids grow down a path, so the leaf is the largest id of the walk."""
    down = select(literal(message_id, BigId).label("id")).cte("down", recursive=True)
    newest_child = (
        select(func.max(Message.id)).where(Message.parent_id == down.c.id).scalar_subquery()
    )
    down = down.union_all(select(newest_child.label("id")).where(down.c.id.is_not(None)))
    return select(func.max(down.c.id))
