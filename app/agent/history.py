"""The message builder: stored rows -> the pydantic-ai message history a model is sent.

It is a pure function of the rows (messages, tool calls, activations, the summary in force): the
same rows give the same history, which keeps provider prompt caches warm across turns and makes
golden wire tests possible. What differs per serving model (DTL rendering, media) is decided
later, by the request's capabilities and the model class, from neutral metadata set here.

- A user message becomes a request with its text; its id and its attachments (references, not
  bytes) ride in the request's metadata, for the media router that decides per serving model
  what is shown and what is a note.
- A model round becomes the response it was. The recorder keeps each round's full response
  (`provider_details["response"]`, pydantic-ai's own serialisation, so thinking signatures and
  reasoning content replay exactly); rows without it are rebuilt from their columns.
- Every tool call the response made is answered in the request that follows it, from its
  `chat_llm_tools` row. A call left `running` by a crash, or `cancelled` by a stop, is answered
  as interrupted rather than dropped, so the provider always sees each call paired with its
  result. A `pending` call (a turn paused for approvals) is left unanswered: only the resumed
  turn exists then, and pydantic-ai answers it from the user's decisions. A call is found by its
  id in bounded form (`app.agent.stored_text.bounded`), the form its row keeps; the request
  carries the id exactly as the stored response has it.
- The `activate_tools` return that activated groups still anchored at its message
  (`activated_tools` rows) carries them in its metadata, where each model class renders the
  activation its own way (docs/wire.md §2); after a reset it is the plain answer again.
- Messages a summary covers are left out; the summary itself goes in as a system block. An
  activation whose anchor the summary covers is rendered at the summary: its groups ride on the
  first surviving (user) request's metadata, which each model class renders before that message.
  Rows are never moved for this (a chat is a tree, and the messages after a summary differ from
  branch to branch), so a path's request depends on that path's rows alone. Activations that an
  older release moved onto a surviving user message are rendered the same way, from there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic_ai.messages import (
    INTERRUPTED_TOOL_RETURN_CONTENT,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from app.agent.rows import StoredMessage, StoredToolCall
from app.agent.stored_text import bounded
from app.llm.dtl import ACTIVATED_KEY, MEDIA_KEY, MESSAGE_ID_KEY
from app.tools.activation import ACTIVATE_TOOLS

REJECTED_TOOL_RETURN_CONTENT = "The user rejected this tool call."


def build_history(
    rows: Sequence[StoredMessage],
    anchors: Mapping[int, Sequence[str]] | None = None,
    covered_up_to: int = 0,
) -> list[ModelMessage]:
    """The history for `rows`; `anchors` maps a message id to the groups activated there, and
    messages up to `covered_up_to` are left out (a summary stands for them)."""
    anchors = anchors or {}
    covered = [g for anchor, groups in anchors.items() if anchor <= covered_up_to for g in groups]
    history: list[ModelMessage] = []
    for row in rows:
        if row.id <= covered_up_to:
            continue
        if row.role == "user":
            at_summary = covered if not history else []
            history.append(_user_request(row, [*at_summary, *anchors.get(row.id, ())]))
            continue
        response = _response(row)
        if response is None:
            continue
        history.append(response)
        returns = list(_tool_returns(response, row, anchors.get(row.id, ())))
        if returns:
            history.append(ModelRequest(parts=returns, timestamp=row.created_at))
    return history


def _user_request(row: StoredMessage, anchored: Sequence[str]) -> ModelRequest:
    metadata: dict[str, Any] = {MESSAGE_ID_KEY: row.id}
    if anchored:
        # Activations a summary covers (or that an older release moved here): rendered before
        # this message.
        metadata[ACTIVATED_KEY] = list(anchored)
    if row.attachments:
        metadata[MEDIA_KEY] = [medium.as_dict() for medium in row.attachments]
    return ModelRequest(
        parts=[UserPromptPart(content=row.content, timestamp=row.created_at)],
        timestamp=row.created_at,
        metadata=metadata,
    )


def _response(row: StoredMessage) -> ModelResponse | None:
    stored = (row.provider_details or {}).get("response")
    if stored is not None:
        [message] = ModelMessagesTypeAdapter.validate_python([stored])
        assert isinstance(message, ModelResponse)
        return message
    parts: list[ModelResponsePart] = []
    if row.reasoning:
        parts.append(ThinkingPart(content=row.reasoning))
    if row.content:
        parts.append(TextPart(content=row.content))
    parts.extend(
        ToolCallPart(
            tool_name=call.name, args=_args(call.arguments), tool_call_id=call.tool_call_id
        )
        for call in row.tool_calls
    )
    if not parts:
        return None  # a round that failed before saying anything leaves nothing to replay
    return ModelResponse(parts=parts, model_name=row.model, timestamp=row.created_at)


def _args(arguments: Any) -> dict[str, Any] | str:
    return arguments if isinstance(arguments, dict | str) else {}


def _tool_returns(
    response: ModelResponse, row: StoredMessage, anchored: Sequence[str]
) -> Iterable[ModelRequestPart]:
    by_id = {call.tool_call_id: call for call in row.tool_calls}
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            call = by_id.get(bounded(part.tool_call_id))
            if call is not None and call.status == "pending":
                continue
            yield _tool_return(part, call, row, anchored)


def _activated(call: StoredToolCall | None, anchored: Sequence[str]) -> list[str]:
    """The anchored groups this `activate_tools` call is the one that activated."""
    if call is None or call.name != ACTIVATE_TOOLS or not anchored or not call.result:
        return []
    try:
        report = json.loads(call.result)
    except ValueError:
        return []
    if not isinstance(report, list):
        return []
    return [
        r["group"]
        for r in report
        if isinstance(r, dict) and r.get("status") == "activated" and r.get("group") in anchored
    ]


Outcome = Literal["success", "failed", "denied", "interrupted", "retried"]
"""How a tool call ended, as pydantic-ai's ToolReturnPart tells it."""


def _tool_return(
    part: ToolCallPart, call: StoredToolCall | None, row: StoredMessage, anchored: Sequence[str]
) -> ToolReturnPart:
    status = call.status if call is not None else "running"
    outcome: Outcome
    if status == "done":
        content, outcome = call.result if call and call.result is not None else "", "success"
    elif status == "failed":
        # As the agent loop sent it: a tool error the model was asked to correct.
        content, outcome = (call.result if call else None) or "The tool failed.", "retried"
    elif status == "rejected":
        content, outcome = (call.result if call else None) or REJECTED_TOOL_RETURN_CONTENT, "denied"
    else:  # running, cancelled: the call never finished
        content, outcome = INTERRUPTED_TOOL_RETURN_CONTENT, "interrupted"
    metadata: dict[str, Any] = {}
    if status == "done" and call is not None:
        if activated := _activated(call, anchored):
            metadata[ACTIVATED_KEY] = activated
        if call.media:
            metadata[MEDIA_KEY] = [medium.as_dict() for medium in call.media]
    return ToolReturnPart(
        tool_name=part.tool_name,
        content=content,
        tool_call_id=part.tool_call_id,
        metadata=metadata or None,
        outcome=outcome,
        timestamp=row.created_at,
    )
