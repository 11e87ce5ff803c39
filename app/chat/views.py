"""Rows as the API shows them (API.md): plain dicts, ready for orjson.

Each function takes a row (ORM object or Core row with the same attribute names) and returns
exactly the fields of its schema in `app.api.schemas.chats`; the API tests check the two agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote


def chat(row: Any, now: datetime) -> dict[str, Any]:
    lease = row.turn_lease_until
    return {
        "id": row.id,
        "title": row.title,
        "model": row.model,
        "created_at": row.created_at,
        "updated_at": row.updated_at,
        "running": row.turn_owner is not None and lease is not None and lease >= now,
    }


def upload(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "filename": row.filename,
        "mime": row.mime,
        "size": row.size,
        "sha256": row.sha256,
        "path": row.stored_path,
        "url": f"/data/{row.id}/{quote(row.filename, safe='')}",
        "created_at": row.created_at,
        "ingestion": None,
    }


def tool_call(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "tool_call_id": row.tool_call_id,
        "name": row.name,
        "arguments": row.arguments,
        "status": row.status,
        "result": row.result,
        "preview_old": row.preview_old,
        "preview_new": row.preview_new,
        "media": [],
    }


def usage(row: Any) -> dict[str, int] | None:
    if row.input_tokens is None and row.output_tokens is None:
        return None
    return {
        "input_tokens": row.input_tokens or 0,
        "output_tokens": row.output_tokens or 0,
        "cache_read_tokens": row.cache_read_tokens or 0,
        "cache_write_tokens": row.cache_write_tokens or 0,
    }


def message(
    row: Any, tool_calls: list[dict[str, Any]], uploads: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    attachment_ids = (row.meta or {}).get("attachments", ())
    return {
        "id": row.id,
        "chat_id": row.chat_id,
        "role": row.role,
        "content": row.content,
        "reasoning": row.reasoning,
        "status": row.status,
        "error": row.error,
        "model": row.model,
        "created_at": row.created_at,
        "attachments": [uploads[str(i)] for i in attachment_ids if str(i) in uploads],
        "tool_calls": tool_calls,
        "usage": usage(row),
        "citations": [],
        "citation_status": None,
    }
