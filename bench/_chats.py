"""Chats the benchmarks store straight into the database, linked as hearth links them."""

from __future__ import annotations

from collections.abc import Sequence

from app.models import Chat, Message


def link_in_order(chat: Chat, messages: Sequence[Message]) -> None:
    """Make flushed `messages` one branch, each under the one before, the last the active leaf.

    The next flush writes the links."""
    parent: int | None = None
    for message in messages:
        message.parent_id = parent
        parent = message.id
    chat.active_leaf_id = parent
