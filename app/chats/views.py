"""Rows as the API shows them (docs/http-api.md): typed dicts, ready for orjson.

The chat route serialises hundreds of rows per request, so the queries in `app.chats.repository`
select exactly the columns of the row types here (`MessageRow`, `ToolRow`, `UploadRow`) and
each result row becomes one of these named tuples: fields by name, typed, and read at tuple
speed (attribute access on SQLAlchemy rows or ORM objects costs ten times more). The views are
`TypedDict`s; the API tests check every one against its schema in `app.chats.schemas`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypedDict
from urllib.parse import quote


class MessageRow(NamedTuple):
    id: int
    chat_id: uuid.UUID
    parent_id: int | None
    role: str
    content: str
    reasoning: str | None
    status: str
    error: str | None
    model: str | None
    created_at: datetime
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    meta: dict[str, Any] | None


class ToolRow(NamedTuple):
    message_id: int
    id: int
    tool_call_id: str
    name: str
    arguments: Any
    status: str
    result: Any
    preview_old: str | None
    preview_new: str | None
    media: list[Any] | None
    elicitation: dict[str, Any] | None


class UploadRow(NamedTuple):
    id: uuid.UUID
    filename: str
    mime: str
    size: int
    sha256: str
    stored_path: str
    created_at: datetime
    ingest_status: str | None
    ingest_error: str | None


MESSAGE_COLUMNS = MessageRow._fields
TOOL_COLUMNS = ToolRow._fields
UPLOAD_COLUMNS = UploadRow._fields


class ChatLike(Protocol):
    """A chat row or ORM object: the columns the chat view reads."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def title(self) -> str | None: ...
    @property
    def model(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def updated_at(self) -> datetime: ...
    @property
    def turn_owner(self) -> str | None: ...
    @property
    def turn_lease_until(self) -> datetime | None: ...
    @property
    def active_leaf_id(self) -> int | None: ...


class ChatView(TypedDict):
    id: uuid.UUID
    title: str | None
    model: str
    created_at: datetime
    updated_at: datetime
    running: bool
    active_leaf_id: int | None


class IngestionView(TypedDict):
    status: str
    error: str | None


class UploadView(TypedDict):
    id: uuid.UUID
    filename: str
    mime: str
    size: int
    sha256: str
    path: str
    url: str
    created_at: datetime
    ingestion: IngestionView | None


class ToolCallView(TypedDict):
    id: int
    tool_call_id: str
    name: str
    arguments: Any
    status: str
    result: Any
    preview_old: str | None
    preview_new: str | None
    media: list[dict[str, Any]]
    elicitation: ElicitationView | None


class ElicitationView(TypedDict):
    elicitation_id: str
    mode: str
    """`form` (answered with `POST /elicitations`) or `url` (a new sign-in at `url`)."""
    message: str
    requested_schema: dict[str, Any]
    url: str | None
    action: str | None
    """None while the user has not answered."""
    content: dict[str, Any] | None


class UsageView(TypedDict):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class MessageView(TypedDict):
    id: int
    chat_id: uuid.UUID
    parent_id: int | None
    sibling_ids: list[int]
    role: str
    content: str
    reasoning: str | None
    status: str
    error: str | None
    model: str | None
    created_at: datetime
    attachments: list[UploadView]
    tool_calls: list[ToolCallView]
    usage: UsageView | None
    citations: list[dict[str, Any]]
    citation_status: str | None


class SummaryView(TypedDict):
    id: int
    covers_up_to_message_id: int
    content: str
    created_at: datetime


class ChatDetailView(ChatView):
    messages: list[MessageView]
    summaries: list[SummaryView]


Evidence = tuple[str | None, list[dict[str, Any]]]
"""A question's citation status and citations, shown on its final message."""


def chat(row: ChatLike, now: datetime) -> ChatView:
    lease = row.turn_lease_until
    return {
        "id": row.id,
        "title": row.title,
        "model": row.model,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "running": row.turn_owner is not None and lease is not None and lease >= now,
        "active_leaf_id": row.active_leaf_id,
    }


def upload(row: UploadRow) -> UploadView:
    status = row.ingest_status
    return {
        "id": row.id,
        "filename": row.filename,
        "mime": row.mime,
        "size": row.size,
        "sha256": row.sha256,
        "path": row.stored_path,
        "url": f"/data/{row.id}/{quote(row.filename, safe='')}",
        "created_at": row.created_at,
        "ingestion": None if status is None else {"status": status, "error": row.ingest_error},
    }


def upload_rows(rows: Iterable[Any]) -> list[UploadRow]:
    return [UploadRow._make(row) for row in rows]


def tool_call(row: ToolRow) -> ToolCallView:
    return {
        "id": row.id,
        "tool_call_id": row.tool_call_id,
        "name": row.name,
        "arguments": row.arguments,
        "status": row.status,
        "result": row.result,
        "preview_old": row.preview_old,
        "preview_new": row.preview_new,
        "media": [
            {**medium, "url": "/data/files/" + quote(str(medium.get("path", "")))}
            for medium in row.media or ()
            if isinstance(medium, dict)
        ],
        "elicitation": elicitation(row.elicitation),
    }


def elicitation(stored: dict[str, Any] | None) -> ElicitationView | None:
    """What a call's server asked the user, as `chat_llm_tools.elicitation` keeps it."""
    if not isinstance(stored, dict):
        return None
    return {
        "elicitation_id": stored["id"],
        "mode": stored.get("mode", "form"),
        "message": stored["message"],
        "requested_schema": stored.get("requested_schema") or {},
        "url": stored.get("url"),
        "action": stored.get("action"),
        "content": stored.get("content"),
    }


def message(
    row: MessageRow,
    tool_calls: list[ToolCallView],
    uploads: dict[str, UploadView],
    evidence: Evidence | None = None,
    sibling_ids: list[int] | None = None,
) -> MessageView:
    """A message; `evidence` (citation status, citations) on the final message of a question,
    `sibling_ids` where it has alternatives (else `[id]`)."""
    usage: UsageView | None = None
    if row.input_tokens is not None or row.output_tokens is not None:
        usage = {
            "input_tokens": row.input_tokens or 0,
            "output_tokens": row.output_tokens or 0,
            "cache_read_tokens": row.cache_read_tokens or 0,
            "cache_write_tokens": row.cache_write_tokens or 0,
        }
    meta = row.meta
    attachment_ids = meta.get("attachments", ()) if meta else ()
    return {
        "id": row.id,
        "chat_id": row.chat_id,
        "parent_id": row.parent_id,
        "sibling_ids": sibling_ids or [row.id],
        "role": row.role,
        "content": row.content,
        "reasoning": row.reasoning,
        "status": row.status,
        "error": row.error,
        "model": row.model,
        "created_at": row.created_at,
        "attachments": [uploads[str(i)] for i in attachment_ids if str(i) in uploads],
        "tool_calls": tool_calls,
        "usage": usage,
        "citations": evidence[1] if evidence else [],
        "citation_status": evidence[0] if evidence else None,
    }
