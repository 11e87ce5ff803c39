"""Chats, messages and what hangs under them, as the API shows them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt, field_validator

from app.core.http.schemas import RequestBody
from app.files.schemas import UploadOut

MessageId = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
"""A message id in a request body: a JSON integer (not a string, not a float), in range."""

MessageStatus = Literal["streaming", "ok", "failed", "cancelled", "incomplete"]
ToolStatus = Literal["running", "pending", "done", "failed", "cancelled", "rejected"]


def _clean_title(value: str | None) -> str | None:
    if value is None:
        return None
    value = " ".join(value.split())
    return value or None


class ChatIn(RequestBody):
    title: str | None = Field(default=None, max_length=200)
    model: str | None = Field(default=None, max_length=300, examples=["demo/scripted"])

    _title = field_validator("title")(_clean_title)


class ChatPatch(RequestBody):
    """Fields left out stay as they are; `title: null` clears the title."""

    title: str | None = Field(default=None, max_length=200)
    model: str | None = Field(default=None, min_length=1, max_length=300)

    _title = field_validator("title")(_clean_title)


class ChatOut(BaseModel):
    id: uuid.UUID
    title: str | None
    model: str
    created_at: datetime
    updated_at: datetime
    running: bool
    """Whether a turn is running in the chat now (a frontend shows its stop button)."""
    active_leaf_id: int | None
    """The last message of the branch shown (null while the chat is empty)."""


class ChatPage(BaseModel):
    items: list[ChatOut]
    next_cursor: str | None


class UsageOut(BaseModel):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class ToolMediaOut(BaseModel):
    path: str
    mime: str
    size: int
    url: str


class ToolCallOut(BaseModel):
    id: int
    tool_call_id: str
    name: str
    arguments: Any
    status: ToolStatus
    result: str | None
    preview_old: str | None
    preview_new: str | None
    media: list[ToolMediaOut]
    elicitation: ElicitationOut | None
    """What the call's MCP server asked the user while it ran; `action` is null until answered
    (`POST /api/chats/{chat_id}/elicitations`)."""


class ElicitationOut(BaseModel):
    elicitation_id: str
    mode: Literal["form", "url"]
    """`form`: answered with `POST /api/chats/{chat_id}/elicitations`; `url`: the server wants
    the user to sign in again at `url` (a wider scope), and the call goes on once they are back."""
    message: str
    requested_schema: dict[str, Any]
    url: str | None
    action: Literal["accept", "decline", "cancel"] | None
    content: dict[str, Any] | None


class CitationOut(BaseModel):
    chunk_id: str
    upload_id: uuid.UUID
    filename: str
    page: int | None
    quote: str


class MessageOut(BaseModel):
    id: int
    chat_id: uuid.UUID
    parent_id: int | None
    """The message this one follows on its branch; null for a root."""
    sibling_ids: list[int]
    """The alternatives to page through, in creation order, this message included: the
    messages with the same parent and role (`[id]` when there are none)."""
    role: Literal["user", "assistant"]
    content: str
    reasoning: str | None
    status: MessageStatus
    error: str | None
    model: str | None
    created_at: datetime
    attachments: list[UploadOut]
    tool_calls: list[ToolCallOut]
    usage: UsageOut | None
    citations: list[CitationOut]
    citation_status: Literal["missing", "grounded", "ungrounded"] | None


class SummaryOut(BaseModel):
    id: int
    covers_up_to_message_id: int
    content: str
    created_at: datetime


class ChatDetailOut(ChatOut):
    messages: list[MessageOut]
    summaries: list[SummaryOut]


class MessageIn(RequestBody):
    content: str = Field(default="", max_length=200_000)
    attachments: list[uuid.UUID] = Field(default_factory=list, max_length=20)
    model: str | None = Field(default=None, min_length=1, max_length=300)
    """A model for this turn only; the chat's model otherwise."""
    parent_id: MessageId | None = None
    """Left out: the turn continues the active branch. An id: the message hangs under it (the
    last message of a finished turn); editing a message is sending with its `parent_id`.
    `null`: the message starts a new root."""


class RegenerateIn(RequestBody):
    message_id: MessageId
    """The user message to answer again; the old answer stays as a sibling."""
    model: str | None = Field(default=None, min_length=1, max_length=300)
    """A model for this answer only; the chat's model otherwise."""


class ActiveIn(RequestBody):
    message_id: MessageId
    """The branch to show: the newest leaf under this message becomes the active leaf."""


class StopOut(BaseModel):
    status: Literal["stopping", "stopped"]


class DecisionIn(RequestBody):
    tool_call_id: str = Field(min_length=1, max_length=200)
    """As the model sent it (the `approvalId` of the stream's approval request)."""
    approved: StrictBool
    note: str | None = Field(default=None, max_length=10_000)
    """Why, for a rejection: the model reads it."""


class ApprovalsIn(RequestBody):
    decisions: list[DecisionIn] = Field(min_length=1, max_length=100)


class WaitingOut(BaseModel):
    pending: list[str]
    """The tool call ids that still wait for a decision."""


class ElicitationIn(RequestBody):
    elicitation_id: str = Field(min_length=1, max_length=100)
    """As the stream's `data-elicitation` part gave it."""
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    """The form's values, for `accept` only: checked against the requested schema, whose
    defaults fill the fields left out."""


class ElicitationAnsweredOut(BaseModel):
    elicitation_id: str
    action: Literal["accept", "decline", "cancel"]


class CompactOut(BaseModel):
    summary_id: int
    covers_up_to_message_id: int
