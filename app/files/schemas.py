"""Uploads as the API shows them.

An upload is one shape everywhere: in a message's `attachments` and in the upload routes alike
(`app.chats.schemas` uses `UploadOut` from here). The upload form is parsed by hand
(it streams to disk), so its OpenAPI description is written out here.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel


class IngestionOut(BaseModel):
    status: Literal["pending", "ready", "failed"]
    error: str | None


class UploadOut(BaseModel):
    id: uuid.UUID
    filename: str
    mime: str
    size: int
    sha256: str
    path: str
    url: str
    created_at: datetime
    ingestion: IngestionOut | None = None


class UploadPage(BaseModel):
    items: list[UploadOut]
    next_cursor: str | None


UPLOAD_FORM: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "additionalProperties": False,
                    "properties": {
                        "file": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": 100,
                            "items": {"type": "string", "format": "binary"},
                            "description": "One part per file; its type is read from its bytes",
                        },
                        "chat_id": {
                            "type": "string",
                            "format": "uuid",
                            "description": "One of your chats, to file the uploads under",
                        },
                    },
                }
            }
        },
    }
}
