"""A chat's stored rows along its active path, as the message builder and the turn runner read
them.

Loading is two queries however long the chat is and however many branches it has (the path's
messages, then their tool calls, each selecting from the path's recursive CTE; a third for the
attached uploads when there are any), and the result is plain frozen data, so everything built
from it is a pure function of the rows.

The statement that reads the messages also tells which other kinds of rows hang off the path
(`Beside`: tool calls, activations, summaries, evidence), in `EXISTS` columns the database
works out once per statement: what is not there is not read. Most chats have few of them, and
a turn reads the lot before its first request, where each statement is a round trip of waiting
and about 0.3 ms of CPU (`bench/turn_overhead.py` part a): a chat without tool calls is read in
one statement rather than five.
"""

from __future__ import annotations

import functools
import operator
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import CTE, Row, Select, bindparam, exists, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from app.models import ActivatedTool, ChatEvidence, ChatLlmTool, ChatSummary, Message, Upload
from app.models.paths import BOUND_PATH, on_path


@dataclass(frozen=True, slots=True)
class StoredMedium:
    """A file a model may be shown: relative to the user's file root, with its sniffed type."""

    path: str
    mime: str
    size: int

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "mime": self.mime, "size": self.size}


@dataclass(frozen=True, slots=True)
class StoredToolCall:
    id: int
    tool_call_id: str
    name: str
    arguments: Any
    status: str
    result: str | None
    media: tuple[StoredMedium, ...] = field(default=())


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
    attachments: tuple[StoredMedium, ...] = field(default=())
    request_tokens: int | None = None
    """What the round's request cost as input (input + cache read + cache write tokens);
    None where no usage was recorded (user messages, rounds that did not finish)."""


_PATH = BOUND_PATH


def probed(path: CTE) -> Select[Any]:
    """The messages of `path` in order, with the columns `Beside` is made from: what
    `load_path` runs on a chat's active path, and what a send's statement reads on the path it
    extends (`app.chats.repository`).

    The messages are those whose id is `IN` the path rather than joined to it: SQLite then
    looks them up in the order of the ids it collected, and needs no sort for `ORDER BY`
    (with a join, it sorted the rows in a temporary B-tree). Through sqlite3 alone, reading a
    2,000-message chat's path took 6.5 ms instead of 9.9, and a 200-message chat's 0.51 instead
    of 0.61; PostgreSQL plans both forms alike (`bench/turn_overhead.py` part l)."""
    return (
        select(
            Message.id,
            Message.role,
            Message.content,
            Message.reasoning,
            Message.status,
            Message.model,
            Message.provider_details,
            Message.meta.label("meta"),  # its column's name is `metadata`: read on a connection too
            Message.created_at,
            Message.input_tokens,
            Message.cache_read_tokens,
            Message.cache_write_tokens,
            exists().where(ChatLlmTool.message_id.in_(on_path(path))).label("has_calls"),
            exists().where(ActivatedTool.message_id.in_(on_path(path))).label("has_activations"),
            exists()
            .where(ChatSummary.covers_up_to_message_id.in_(on_path(path)))
            .label("has_summaries"),
            exists()
            .where(
                ChatEvidence.chat_id == bindparam("chat_id"), ChatEvidence.epoch.in_(on_path(path))
            )
            .label("has_evidence"),
        )
        .where(Message.id.in_(on_path(path)))
        .order_by(Message.id)
    )


_MESSAGES_PROBED = probed(_PATH)
_CALLS = (
    select(
        ChatLlmTool.id,
        ChatLlmTool.message_id,
        ChatLlmTool.tool_call_id,
        ChatLlmTool.name,
        ChatLlmTool.arguments,
        ChatLlmTool.status,
        ChatLlmTool.result,
        ChatLlmTool.media,
    )
    .where(ChatLlmTool.message_id.in_(on_path(_PATH)))
    .order_by(ChatLlmTool.id)
)
_UPLOADS = select(Upload.id, Upload.stored_path, Upload.mime, Upload.size).where(
    Upload.id.in_(bindparam("ids", expanding=True))
)
"""Built once: every turn reads them (`app.chats.repository` says why)."""


@dataclass(frozen=True, slots=True)
class Beside:
    """Which kinds of rows hang off a path besides its messages: its messages' tool calls,
    activations anchored on it, summaries covering up to one of its messages, evidence of its
    questions. A reader skips the statements that would find nothing."""

    calls: bool = False
    activations: bool = False
    summaries: bool = False
    evidence: bool = False


async def load_rows(db: AsyncSession, chat_id: uuid.UUID) -> list[StoredMessage]:
    """The messages of the chat's active path, root first, each with its tool calls."""
    rows, _ = await load_path(db, chat_id)
    return rows


Path = tuple[list[StoredMessage], Beside]
"""A chat's active path as `load_path` reads it."""


async def load_path(db: AsyncSession | AsyncConnection, chat_id: uuid.UUID) -> Path:
    """`load_rows`, and what else hangs off the path (`Beside`); on a session, or on a
    connection (a request's, whose send just stored the path's end: `app.chats.service`)."""
    messages = (await db.execute(_MESSAGES_PROBED, {"chat_id": chat_id})).all()
    return await stored_path(db, chat_id, messages)


async def stored_path(
    db: AsyncSession | AsyncConnection, chat_id: uuid.UUID, messages: Sequence[Row[Any]]
) -> Path:
    """The path whose messages `probed` read, with their tool calls and attachments, read on
    `db` when the path has any."""
    if not messages:
        return [], Beside()
    first = messages[0]
    beside = Beside(first.has_calls, first.has_activations, first.has_summaries, first.has_evidence)
    calls = (await db.execute(_CALLS, {"chat_id": chat_id})).all() if beside.calls else []
    by_message: dict[int, list[StoredToolCall]] = defaultdict(list)
    for call_id, message_id, tool_call_id, name, arguments, status, result, media in calls:
        by_message[message_id].append(
            StoredToolCall(call_id, tool_call_id, name, arguments, status, result, media_of(media))
        )
    pick = _picker(first._fields)
    picked = [pick(row) for row in messages]
    attached = await _attachments(db, [row[_META] for row in picked])
    no_calls: tuple[StoredToolCall, ...] = ()
    rows = [
        StoredMessage(
            message_id,
            role,
            content,
            reasoning,
            status,
            model,
            details,
            meta or {},
            created_at,
            tuple(by_message[message_id]) if message_id in by_message else no_calls,
            tuple(attached[i] for i in attachment_ids(meta) if i in attached) if attached else (),
            None if input_tokens is None else input_tokens + (cache_read or 0) + (cache_write or 0),
        )
        for (
            message_id,
            role,
            content,
            reasoning,
            status,
            model,
            details,
            meta,
            created_at,
            input_tokens,
            cache_read,
            cache_write,
        ) in picked
    ]
    return rows, beside


_PICKED = (
    "id",
    "role",
    "content",
    "reasoning",
    "status",
    "model",
    "provider_details",
    "meta",
    "created_at",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
"""The columns of `probed` a `StoredMessage` is made from, in the order `stored_path` unpacks."""
_META = _PICKED.index("meta")


@functools.lru_cache(maxsize=8)
def _picker(fields: tuple[str, ...]) -> Callable[[Row[Any]], tuple[Any, ...]]:
    """What takes `_PICKED` out of a row with these `fields`, in one call: a path's rows come
    from `probed` alone (`load_path`) or with the send's columns before them (PostgreSQL's
    send, `app.chats.repository`). A row's attributes cost about 0.3 us apiece, 7 ms of the
    27 a 2,000-message chat took to build here; an `itemgetter` call per row, 0.4 ms."""
    return operator.itemgetter(*(fields.index(name) for name in _PICKED))


def attachment_ids(meta: dict[str, Any] | None) -> list[str]:
    ids = (meta or {}).get("attachments")
    return [str(i) for i in ids] if isinstance(ids, list) else []


def media_of(value: Any) -> tuple[StoredMedium, ...]:
    """The media references stored on a tool call, as sent by `read_file`."""
    if not isinstance(value, list):
        return ()
    return tuple(
        StoredMedium(str(m["path"]), str(m["mime"]), int(m["size"]))
        for m in value
        if isinstance(m, dict) and {"path", "mime", "size"} <= m.keys()
    )


async def _attachments(
    db: AsyncSession | AsyncConnection, metas: list[dict[str, Any] | None]
) -> dict[str, StoredMedium]:
    ids = {uuid.UUID(i) for meta in metas for i in attachment_ids(meta)}
    if not ids:
        return {}
    rows = await db.execute(_UPLOADS, {"ids": list(ids)})
    return {str(i): StoredMedium(path, mime, size) for i, path, mime, size in rows}
