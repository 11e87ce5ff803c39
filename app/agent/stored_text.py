"""What may be stored, whatever a model or a tool produced: text both databases can hold.

PostgreSQL cannot keep a NUL character in `text` or in a JSONB string, nor a lone surrogate
(a string decoded with `surrogateescape`, e.g. a file name that is not UTF-8); SQLite keeps both.
A model's reply, a tool's arguments or its result may carry either, and a write that fails for
that reason would end the turn and leave its rows open. So every string the recorder stores goes
through `storable` first: NUL and lone surrogates become U+FFFD, the same on both backends, so a
chat reads back the same wherever it is stored.

Identifiers a model chooses (a tool call's id, a tool's name) go in `String(200)` columns.
`bounded` keeps short ones as they are and turns a longer one into a stable 200-character form
(a prefix and a hash of the whole), so the builder can find a call's row again from the id in
the stored response, which keeps the id exactly as the provider sent it.
"""

from __future__ import annotations

import hashlib
from typing import Any

ID_LENGTH = 200
"""The width of `chat_llm_tools.tool_call_id` and `chat_llm_tools.name`."""

REPLACEMENT = "\ufffd"


def storable_text(text: str) -> str:
    """`text` with NUL and lone surrogates replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def storable(value: Any) -> Any:
    """A JSON-like value with every string in it (keys included) made storable."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value


def bounded(identifier: str, limit: int = ID_LENGTH) -> str:
    """`identifier` if it fits in `limit` characters, else a stable form that does."""
    identifier = storable_text(identifier)
    if len(identifier) <= limit:
        return identifier
    digest = hashlib.sha256(identifier.encode()).hexdigest()[:16]
    return f"{identifier[: limit - len(digest) - 1]}~{digest}"
