"""A fake Anthropic Messages API that speaks the real wire protocol.

The shapes follow the installed `anthropic` SDK's types (`RawMessageStreamEvent`, `Message`,
`Usage`, `MessageDeltaUsage`, the error objects) and the API's documented stream: `message_start`
(usage with the input and cache counts, `output_tokens` 1), a `ping`, then per content block
`content_block_start` / `content_block_delta` / `content_block_stop` (thinking blocks stream
`thinking_delta`s then one `signature_delta`; tool-use blocks open with empty `input` and stream
`input_json_delta` fragments, the first one empty), then `message_delta` with the stop reason and
cumulative usage, then `message_stop`. Every event is `event: TYPE` plus `data: JSON`.

Errors are `{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}` with the
status's own error type; in a stream the same object arrives as an `error` event. A request needs
a key and `anthropic-version`, as the real API does; SDK 2.x sends the key as
`Authorization: Bearer ...` rather than `x-api-key`, so either is accepted. pydantic-ai calls
`client.beta.messages.create`, which SDK 2.x sends to plain `POST /v1/messages` (no `?beta=true`),
with an `anthropic-beta` header only when betas are on; such requests are checked against the
beta request types, the rest against `MessageCreateParams`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from starlette.requests import Request
from starlette.routing import Route

from tests.fakes.script import Fail, Reply, Usage
from tests.fakes.server import (
    FakeProviderServer,
    Plan,
    RecordedRequest,
    compact_json,
    count_deltas,
    random_id,
    split_text,
    sse,
)
from tests.fakes.validation import InvalidRequestBody, validate_anthropic_request

__all__ = ["ANTHROPIC_ERROR_TYPES", "FakeAnthropic"]

ANTHROPIC_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def error_type_for(status: int) -> str:
    return ANTHROPIC_ERROR_TYPES.get(
        status, "api_error" if status >= 500 else "invalid_request_error"
    )


class FakeAnthropic(FakeProviderServer):
    """Fake `https://api.anthropic.com`: `POST /v1/messages` (SSE or JSON), count_tokens, models.

    Point `anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test")` or pydantic-ai's
    `AnthropicProvider(base_url=fake.base_url, api_key="test")` at it.
    """

    kind = "anthropic"
    model_path: ClassVar[str] = "/v1/messages"
    request_id_header: ClassVar[str] = "request-id"
    request_id_prefix: ClassVar[str] = "req_011C"
    opening_events: ClassVar[int] = 2
    default_models = ("claude-sonnet-5-5", "claude-haiku-5-5")

    def routes(self) -> list[Route]:
        return [
            Route("/v1/messages", self.endpoint(self.messages), methods=["POST"]),
            Route("/v1/messages/count_tokens", self.endpoint(self.count_tokens), methods=["POST"]),
            Route("/v1/models", self.endpoint(self.list_models), methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.endpoint(self.get_model), methods=["GET"]),
        ]

    # --- endpoints -------------------------------------------------------------------------

    async def messages(self, request: Request, record: RecordedRequest) -> Plan:
        if (refusal := self.check_request(record)) is not None:
            return refusal
        try:
            validate_anthropic_request(record.body, beta=self.uses_beta(record))
        except InvalidRequestBody as exc:
            record.validation_error = str(exc)
            if self.reject_invalid:
                return self.error_plan(Fail(400, str(exc)))
        return self.answer_model_request(record)

    async def count_tokens(self, request: Request, record: RecordedRequest) -> Plan:
        if (refusal := self.check_request(record)) is not None:
            return refusal
        return self.json_plan({"input_tokens": self.estimate_input_tokens(record)})

    async def list_models(self, request: Request, record: RecordedRequest) -> Plan:
        data = [self.model_info(model) for model in self.models]
        return self.json_plan(
            {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    async def get_model(self, request: Request, record: RecordedRequest) -> Plan:
        model_id = request.path_params["model_id"]
        if model_id not in self.models:
            return self.error_plan(Fail(404, f"model: {model_id}"))
        return self.json_plan(self.model_info(model_id))

    @staticmethod
    def model_info(model_id: str) -> dict[str, Any]:
        return {
            "type": "model",
            "id": model_id,
            "display_name": model_id,
            "created_at": "2025-09-29T00:00:00Z",
            "lifecycle": "active",
        }

    @staticmethod
    def uses_beta(record: RecordedRequest) -> bool:
        """Whether the request is a beta Messages request: an `anthropic-beta` header, or the
        `?beta=true` query older SDKs add (2.x marks `client.beta` calls by the header alone)."""
        return "anthropic-beta" in record.headers or "beta=true" in record.query

    def check_request(self, record: RecordedRequest) -> Plan | None:
        headers = record.headers
        if self.require_auth and not (
            headers.get("x-api-key") or headers.get("authorization", "").startswith("Bearer ")
        ):
            return self.error_plan(Fail(401, "x-api-key header is required"))
        if "anthropic-version" not in headers:
            return self.error_plan(Fail(400, "anthropic-version: header is required"))
        if not isinstance(record.body, dict):
            return self.error_plan(Fail(400, "There was an error parsing the body of your request"))
        return None

    # --- wire shapes -----------------------------------------------------------------------

    def error_body(self, fail: Fail) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {
                "type": fail.error_type or error_type_for(fail.status),
                "message": fail.message,
            },
            "request_id": self.new_request_id(),
        }

    def stream_error_event(self, fail: Fail) -> bytes:
        return sse(self.error_body(fail), "error")

    def usage_for(self, reply: Reply, record: RecordedRequest) -> Usage:
        if reply.usage is not None:
            return reply.usage
        return Usage(
            input_tokens=self.estimate_input_tokens(record),
            output_tokens=max(1, count_deltas(reply)),
        )

    @staticmethod
    def tool_ids(reply: Reply) -> list[str]:
        return [call.id or random_id("toolu_01") for call in reply.tool_calls]

    def stop_reason(self, reply: Reply) -> str:
        return reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")

    @staticmethod
    def start_usage(usage: Usage) -> dict[str, Any]:
        return {
            "input_tokens": usage.uncached_input_tokens,
            "cache_creation_input_tokens": usage.cache_write_tokens,
            "cache_read_input_tokens": usage.cache_read_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage.cache_write_tokens,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": 1,
            "service_tier": "standard",
        }

    def response_json(self, reply: Reply, record: RecordedRequest) -> dict[str, Any]:
        """The non-streaming `Message`."""
        usage = self.usage_for(reply, record)
        content: list[dict[str, Any]] = []
        if reply.reasoning:
            content.append(
                {
                    "type": "thinking",
                    "thinking": reply.reasoning,
                    "signature": reply.signature or random_id("", 64),
                }
            )
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for call, call_id in zip(reply.tool_calls, self.tool_ids(reply), strict=True):
            content.append(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments}
            )
        return {
            "id": random_id("msg_01"),
            "type": "message",
            "role": "assistant",
            "model": reply.model or record.body.get("model", self.models[0]),
            "content": content,
            "stop_reason": self.stop_reason(reply),
            "stop_sequence": None,
            "usage": self.start_usage(usage) | {"output_tokens": usage.output_tokens},
        }

    def stream_events(self, reply: Reply, record: RecordedRequest) -> list[tuple[bytes, bool]]:
        """The SSE events of a streamed reply, from `message_start` to `message_stop`."""
        usage = self.usage_for(reply, record)
        message = self.response_json(reply, record) | {
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.start_usage(usage),
        }
        events = [
            sse({"type": "message_start", "message": message}, "message_start"),
            sse({"type": "ping"}, "ping"),
        ]
        index = 0

        def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
            nonlocal index
            events.append(
                sse(
                    {"type": "content_block_start", "index": index, "content_block": start},
                    "content_block_start",
                )
            )
            for delta in deltas:
                events.append(
                    sse(
                        {"type": "content_block_delta", "index": index, "delta": delta},
                        "content_block_delta",
                    )
                )
            events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1

        size = reply.chunk_chars
        if reply.reasoning:
            thinking = [
                {"type": "thinking_delta", "thinking": part}
                for part in split_text(reply.reasoning, size)
            ]
            signature = {
                "type": "signature_delta",
                "signature": reply.signature or random_id("", 64),
            }
            block({"type": "thinking", "thinking": "", "signature": ""}, [*thinking, signature])
        if reply.text:
            block(
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": part} for part in split_text(reply.text, size)],
            )
        for call, call_id in zip(reply.tool_calls, self.tool_ids(reply), strict=True):
            fragments = split_text(compact_json(call.arguments), size)
            block(
                {"type": "tool_use", "id": call_id, "name": call.name, "input": {}},
                [{"type": "input_json_delta", "partial_json": ""}]
                + [{"type": "input_json_delta", "partial_json": part} for part in fragments],
            )
        events.append(
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason(reply), "stop_sequence": None},
                    "usage": {
                        "input_tokens": usage.uncached_input_tokens,
                        "cache_creation_input_tokens": usage.cache_write_tokens,
                        "cache_read_input_tokens": usage.cache_read_tokens,
                        "output_tokens": usage.output_tokens,
                    },
                },
                "message_delta",
            )
        )
        events.append(sse({"type": "message_stop"}, "message_stop"))
        return [(event, event.startswith(b"event: content_block_delta")) for event in events]
