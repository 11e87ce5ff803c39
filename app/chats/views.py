"""Rows as the API shows them (docs/http-api.md): plain dicts, ready for orjson.

The chat route serialises hundreds of rows per request, so rows arrive as plain tuples in the
column order this module declares (`MESSAGE_COLUMNS`, `TOOL_COLUMNS`, `UPLOAD_COLUMNS`) and are
unpacked positionally; attribute access on SQLAlchemy rows costs ten times more. The queries in
`app.chats.repository` select exactly these columns. The API tests check every dict against its
schema in `app.chats.schemas`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

MESSAGE_COLUMNS = (
    "id",
    "chat_id",
    "role",
    "content",
    "reasoning",
    "status",
    "error",
    "model",
    "created_at",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "meta",
)
TOOL_COLUMNS = (
    "message_id",
    "id",
    "tool_call_id",
    "name",
    "arguments",
    "status",
    "result",
    "preview_old",
    "preview_new",
    "media",
)
UPLOAD_COLUMNS = (
    "id",
    "filename",
    "mime",
    "size",
    "sha256",
    "stored_path",
    "created_at",
    "ingest_status",
    "ingest_error",
)


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


def upload(row: Sequence[Any]) -> dict[str, Any]:
    upload_id, filename, mime, size, sha256, stored_path, created_at, ingested, error = row
    return {
        "id": upload_id,
        "filename": filename,
        "mime": mime,
        "size": size,
        "sha256": sha256,
        "path": stored_path,
        "url": f"/data/{upload_id}/{quote(filename, safe='')}",
        "created_at": created_at,
        "ingestion": None if ingested is None else {"status": ingested, "error": error},
    }


def tool_call(row: Sequence[Any]) -> dict[str, Any]:
    _, call_id, tool_call_id, name, arguments, status, result, preview_old, preview_new, media = row
    return {
        "id": call_id,
        "tool_call_id": tool_call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
        "result": result,
        "preview_old": preview_old,
        "preview_new": preview_new,
        "media": [
            {**medium, "url": "/data/files/" + quote(str(medium.get("path", "")))}
            for medium in media or ()
            if isinstance(medium, dict)
        ],
    }


def message(
    row: Sequence[Any],
    tool_calls: list[dict[str, Any]],
    uploads: dict[str, dict[str, Any]],
    evidence: tuple[str | None, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """A message; `evidence` (citation status, citations) on the final message of a question."""
    (
        message_id,
        chat_id,
        role,
        content,
        reasoning,
        status,
        error,
        model,
        created_at,
        input_tokens,
        output_tokens,
        cache_read_tokens,
        cache_write_tokens,
        meta,
    ) = row
    usage = None
    if input_tokens is not None or output_tokens is not None:
        usage = {
            "input_tokens": input_tokens or 0,
            "output_tokens": output_tokens or 0,
            "cache_read_tokens": cache_read_tokens or 0,
            "cache_write_tokens": cache_write_tokens or 0,
        }
    attachment_ids = meta.get("attachments", ()) if meta else ()
    return {
        "id": message_id,
        "chat_id": chat_id,
        "role": role,
        "content": content,
        "reasoning": reasoning,
        "status": status,
        "error": error,
        "model": model,
        "created_at": created_at,
        "attachments": [uploads[str(i)] for i in attachment_ids if str(i) in uploads],
        "tool_calls": tool_calls,
        "usage": usage,
        "citations": evidence[1] if evidence else [],
        "citation_status": evidence[0] if evidence else None,
    }
