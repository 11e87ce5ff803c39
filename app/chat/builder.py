"""The message builder: stored rows -> the pydantic-ai message history a model is sent.

It is a pure function of the rows (and, as later features land, the serving model and the tool
catalogue): the same rows give the same history, which keeps provider prompt caches warm across
turns and makes golden wire tests possible.

- A user message becomes a request with its text.
- A model round becomes the response it was. The recorder keeps each round's full response
  (`provider_details["response"]`, pydantic-ai's own serialisation, so thinking signatures and
  reasoning content replay exactly); rows without it are rebuilt from their columns.
- Every tool call the response made is answered in the request that follows it, from its
  `chat_llm_tools` row. A call left `running` or `pending` by a crash, or `cancelled` by a stop,
  is answered as interrupted rather than dropped, so the provider always sees each call paired
  with its result.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

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

from app.chat.rows import StoredMessage, StoredToolCall

REJECTED_TOOL_RETURN_CONTENT = "The user rejected this tool call."


def build_history(rows: Sequence[StoredMessage]) -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for row in rows:
        if row.role == "user":
            history.append(_user_request(row))
            continue
        response = _response(row)
        if response is None:
            continue
        history.append(response)
        returns = list(_tool_returns(response, row))
        if returns:
            history.append(ModelRequest(parts=returns, timestamp=row.created_at))
    return history


def _user_request(row: StoredMessage) -> ModelRequest:
    return ModelRequest(
        parts=[UserPromptPart(content=row.content, timestamp=row.created_at)],
        timestamp=row.created_at,
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


def _tool_returns(response: ModelResponse, row: StoredMessage) -> Iterable[ModelRequestPart]:
    by_id = {call.tool_call_id: call for call in row.tool_calls}
    for part in response.parts:
        if isinstance(part, ToolCallPart):
            yield _tool_return(part, by_id.get(part.tool_call_id), row)


def _tool_return(
    part: ToolCallPart, call: StoredToolCall | None, row: StoredMessage
) -> ToolReturnPart:
    status = call.status if call is not None else "running"
    if status == "done":
        content, outcome = call.result if call and call.result is not None else "", "success"
    elif status == "failed":
        # As the agent loop sent it: a tool error the model was asked to correct.
        content, outcome = (call.result if call else None) or "The tool failed.", "retried"
    elif status == "rejected":
        content, outcome = (call.result if call else None) or REJECTED_TOOL_RETURN_CONTENT, "denied"
    else:  # running, pending, cancelled: the call never finished
        content, outcome = INTERRUPTED_TOOL_RETURN_CONTENT, "interrupted"
    return ToolReturnPart(
        tool_name=part.tool_name,
        content=content,
        tool_call_id=part.tool_call_id,
        outcome=outcome,
        timestamp=row.created_at,
    )
