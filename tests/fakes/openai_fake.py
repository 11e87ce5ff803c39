"""A fake OpenAI Chat Completions API, in two flavours: OpenAI itself and Moonshot (Kimi).

The shapes follow the installed `openai` SDK's `ChatCompletionChunk` and `ChatCompletion`: a
stream is `data: {chunk}` lines and a final `data: [DONE]`; the first chunk carries the
assistant role, then content deltas, then tool calls (each opened by a delta with its `index`,
`id`, `type` and function `name` with empty `arguments`, then argument fragments under the same
`index`), then a chunk with an empty delta and the `finish_reason`. With
`stream_options.include_usage` every chunk has `"usage": null` and a last chunk with no choices
carries the usage, `prompt_tokens_details.cached_tokens` included.

The Moonshot flavour differs where Kimi does: thinking streams as `reasoning_content` deltas,
tool call ids are `functions.<name>:<n>` (n counts the conversation's tool calls), the finishing
choice carries its own `usage` (Kimi's documented place, with a top-level `cached_tokens`), chunks
have no `service_tier`/`obfuscation`, and errors are `{"error": {"message", "type"}}` with Kimi's
types (`rate_limit_reached_error`, ...). Kimi also honours `include_usage` with the OpenAI-style
usage chunk, which is what pydantic-ai reads. Request bodies are checked with
`validate_openai_request(body, moonshot=...)`.

The OpenAI flavour also stands in for OpenAI-compatible local servers (LM Studio, Ollama), which
is why `GET /v1/models` answers without a key and why a scripted `reasoning` is streamed as
`reasoning_content` (as those servers do) rather than dropped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from starlette.requests import Request
from starlette.routing import Route

from tests.fakes.script import Fail, Reply, Scripted, Usage
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
from tests.fakes.validation import InvalidRequestBody, validate_openai_request

__all__ = ["FakeOpenAI", "Flavour"]

Flavour = Literal["openai", "moonshot"]

_HEX = "0123456789abcdef"

OPENAI_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}

MOONSHOT_ERRORS: dict[int, str] = {
    400: "invalid_request_error",
    401: "invalid_authentication_error",
    403: "permission_denied_error",
    404: "resource_not_found_error",
    429: "rate_limit_reached_error",
}


class FakeOpenAI(FakeProviderServer):
    """Fake `https://api.openai.com/v1` or `https://api.moonshot.ai/v1` (`flavour="moonshot"`).

    `base_url` ends in `/v1`, ready for `openai.AsyncOpenAI(base_url=fake.base_url, ...)`,
    pydantic-ai's `OpenAIProvider(base_url=...)` or `MoonshotAIProvider(base_url=...)`.
    """

    kind = "openai"
    default_models: Sequence[str] = ("gpt-4.1", "gpt-4.1-mini")
    model_path: ClassVar[str] = "/v1/chat/completions"
    request_id_header: ClassVar[str] = "x-request-id"
    request_id_prefix: ClassVar[str] = "req_"
    opening_events: ClassVar[int] = 1

    def __init__(
        self,
        flavour: Flavour = "openai",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] | None = None,
        always: Scripted | None = None,
        reject_invalid: bool = True,
        require_auth: bool = True,
        max_records: int | None = None,
    ) -> None:
        if flavour not in ("openai", "moonshot"):
            raise ValueError(f"unknown flavour {flavour!r}")
        self.flavour: Flavour = flavour
        self.kind = flavour
        if models is None and flavour == "moonshot":
            models = ("kimi-k3", "kimi-k2.6")
        super().__init__(
            host=host,
            port=port,
            models=models,
            always=always,
            reject_invalid=reject_invalid,
            require_auth=require_auth,
            max_records=max_records,
        )

    @property
    def moonshot(self) -> bool:
        return self.flavour == "moonshot"

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, as OpenAI-style clients expect."""
        return f"{self.root_url}/v1"

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self.endpoint(self.completions), methods=["POST"]),
            Route("/v1/models", self.endpoint(self.list_models), methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.endpoint(self.get_model), methods=["GET"]),
        ]

    # --- endpoints -------------------------------------------------------------------------

    async def completions(self, request: Request, record: RecordedRequest) -> Plan:
        if self.require_auth and not record.headers.get("authorization", "").startswith("Bearer "):
            message = (
                "Invalid Authentication"
                if self.moonshot
                else "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
            )
            return self.error_plan(Fail(401, message))
        if not isinstance(record.body, dict):
            return self.error_plan(Fail(400, "We could not parse the JSON body of your request."))
        try:
            validate_openai_request(record.body, moonshot=self.moonshot)
        except InvalidRequestBody as exc:
            record.validation_error = str(exc)
            if self.reject_invalid:
                return self.error_plan(Fail(400, str(exc)))
        return self.answer_model_request(record)

    async def list_models(self, request: Request, record: RecordedRequest) -> Plan:
        return self.json_plan({"object": "list", "data": [self.model_info(m) for m in self.models]})

    async def get_model(self, request: Request, record: RecordedRequest) -> Plan:
        model_id = request.path_params["model_id"]
        if model_id not in self.models:
            return self.error_plan(Fail(404, f"The model '{model_id}' does not exist"))
        return self.json_plan(self.model_info(model_id))

    def model_info(self, model_id: str) -> dict[str, Any]:
        owner = "moonshot" if self.moonshot else "openai"
        return {"id": model_id, "object": "model", "created": 1_735_689_600, "owned_by": owner}

    # --- wire shapes -----------------------------------------------------------------------

    def error_body(self, fail: Fail) -> dict[str, Any]:
        if self.moonshot:
            kind = fail.error_type or MOONSHOT_ERRORS.get(
                fail.status, "server_error" if fail.status >= 500 else "invalid_request_error"
            )
            return {"error": {"message": fail.message, "type": kind}}
        default_type, default_code = OPENAI_ERRORS.get(
            fail.status, ("server_error" if fail.status >= 500 else "invalid_request_error", None)
        )
        return {
            "error": {
                "message": fail.message,
                "type": fail.error_type or default_type,
                "param": None,
                "code": fail.code if fail.code is not None else default_code,
            }
        }

    def stream_error_event(self, fail: Fail) -> bytes:
        return sse(self.error_body(fail))

    def usage_for(self, reply: Reply, record: RecordedRequest) -> Usage:
        if reply.usage is not None:
            return reply.usage
        estimate = self.estimate_input_tokens(record)
        return Usage(input_tokens=estimate, output_tokens=max(1, count_deltas(reply)))

    def usage_json(self, usage: Usage) -> dict[str, Any]:
        completion_details: dict[str, int] = {"reasoning_tokens": usage.reasoning_tokens}
        prompt_details: dict[str, int] = {"cached_tokens": usage.cache_read_tokens}
        wire: dict[str, Any] = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
        }
        if self.moonshot:
            wire["cached_tokens"] = usage.cache_read_tokens
            wire["prompt_tokens_details"] = prompt_details
            if usage.reasoning_tokens:
                wire["completion_tokens_details"] = completion_details
            return wire
        prompt_details["audio_tokens"] = 0
        if usage.cache_write_tokens:  # explicit prompt caching; Kimi's caching reports no writes
            prompt_details["cache_write_tokens"] = usage.cache_write_tokens
        completion_details |= {
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
        wire["prompt_tokens_details"] = prompt_details
        wire["completion_tokens_details"] = completion_details
        return wire

    def tool_ids(self, reply: Reply, record: RecordedRequest) -> list[str]:
        """Ids for the reply's tool calls: scripted ones, else `call_...` or `functions.NAME:N`."""
        earlier = 0
        if self.moonshot:
            for message in record.body.get("messages", []):
                if isinstance(message, dict) and message.get("role") == "assistant":
                    earlier += len(message.get("tool_calls") or [])
        ids: list[str] = []
        for position, call in enumerate(reply.tool_calls):
            if call.id is not None:
                ids.append(call.id)
            elif self.moonshot:
                ids.append(f"functions.{call.name}:{earlier + position}")
            else:
                ids.append(random_id("call_"))
        return ids

    def finish_reason(self, reply: Reply) -> str:
        return reply.stop_reason or ("tool_calls" if reply.tool_calls else "stop")

    def fingerprint(self) -> str:
        if self.moonshot:
            return random_id("fpv0_", 8, _HEX)
        return random_id("fp_", 10, _HEX)

    def response_json(self, reply: Reply, record: RecordedRequest) -> dict[str, Any]:
        """The non-streaming `chat.completion`."""
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if not self.moonshot:
            message |= {"refusal": None, "annotations": []}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            ids = self.tool_ids(reply, record)
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": compact_json(call.arguments)},
                }
                for call, call_id in zip(reply.tool_calls, ids, strict=True)
            ]
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": self.finish_reason(reply),
        }
        if not self.moonshot:
            choice["logprobs"] = None
        completion: dict[str, Any] = {
            "id": self.completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or record.body.get("model", self.models[0]),
            "choices": [choice],
            "usage": self.usage_json(self.usage_for(reply, record)),
            "system_fingerprint": self.fingerprint(),
        }
        if not self.moonshot:
            completion["service_tier"] = "default"
        return completion

    def completion_id(self) -> str:
        if self.moonshot:
            return random_id("chatcmpl-", 24, _HEX)
        return random_id("chatcmpl-", 29)

    def stream_events(self, reply: Reply, record: RecordedRequest) -> list[tuple[bytes, bool]]:
        """The `data:` lines of a streamed reply, each with whether it is a paced delta."""
        body = record.body
        stream_options = body.get("stream_options") or {}
        include_usage = isinstance(stream_options, dict) and stream_options.get("include_usage")
        completion_id = self.completion_id()
        created = int(time.time())
        model = reply.model or body.get("model", self.models[0])
        fingerprint = self.fingerprint()
        usage = self.usage_json(self.usage_for(reply, record))

        def chunk(choices: list[dict[str, Any]], usage_value: object = None) -> bytes:
            data: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
            }
            if not self.moonshot:
                data["service_tier"] = "default"
            data["system_fingerprint"] = fingerprint
            data["choices"] = choices
            if include_usage:
                data["usage"] = usage_value
            if not self.moonshot:
                data["obfuscation"] = random_id("", 4)
            return sse(data)

        def delta(content: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "delta": content}
            if not self.moonshot:
                choice["logprobs"] = None
            choice["finish_reason"] = finish_reason
            return choice

        size = reply.chunk_chars
        role: dict[str, Any] = {
            "role": "assistant",
            "content": "" if reply.text or not reply.tool_calls else None,
        }
        if not self.moonshot:
            role["refusal"] = None
        events: list[tuple[bytes, bool]] = [(chunk([delta(role)]), False)]
        for part in split_text(reply.reasoning, size):
            events.append((chunk([delta({"reasoning_content": part})]), True))
        for part in split_text(reply.text, size):
            events.append((chunk([delta({"content": part})]), True))
        ids = self.tool_ids(reply, record)
        for index, (call, call_id) in enumerate(zip(reply.tool_calls, ids, strict=True)):
            opening = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            events.append((chunk([delta({"tool_calls": [opening]})]), True))
            for fragment in split_text(compact_json(call.arguments), size):
                more = {"index": index, "function": {"arguments": fragment}}
                events.append((chunk([delta({"tool_calls": [more]})]), True))
        finish = delta({}, self.finish_reason(reply))
        if self.moonshot:
            finish["usage"] = usage
        events.append((chunk([finish]), False))
        if include_usage:
            events.append((chunk([], usage), False))
        events.append((b"data: [DONE]\n\n", False))
        return events
