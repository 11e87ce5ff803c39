"""Reading provider request bodies the way the cache-stability rules of docs/wire.md §2c talk about
them: the conversation without the dynamic tail, and without the one breakpoint that moves."""

from __future__ import annotations

import copy
from typing import Any

TAIL_PREFIX = "[hearth/context]"


def _is_tail_text(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(TAIL_PREFIX)


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's messages with the tail removed and moving breakpoints taken off blocks."""
    messages: list[dict[str, Any]] = []
    for message in copy.deepcopy(body["messages"]):
        content = message.get("content")
        if message.get("role") == "system" and _is_tail_text(content):
            continue  # OpenAI-compatible: the tail is the final system message
        if isinstance(content, list):
            content = [b for b in content if not _is_tail_text(b.get("text"))]
            for block in content:
                block.pop("cache_control", None)
            if not content:
                continue
            message["content"] = content
        messages.append(message)
    return messages


def tail_of(body: dict[str, Any]) -> str | None:
    """The tail's text, checked to be the very last thing of the request."""
    last = body["messages"][-1]
    content = last.get("content")
    if isinstance(content, list):
        content = content[-1].get("text")
    return content if _is_tail_text(content) else None
