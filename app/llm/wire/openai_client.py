"""The OpenAI SDK client that hearth's OpenAI-compatible models talk through.

The stock `AsyncOpenAI` spends CPU in two places that grow with what a turn sends and receives,
and neither buys anything for Chat Completions:

- **Request bodies.** `chat.completions.create` walks the whole body with the SDK's
  `async_maybe_transform`, which renames aliased keys and encodes file fields of the params
  TypedDicts. Chat Completions' request types declare neither, so the walk returns the body it
  was given, at about 0.3 ms per message: 1 ms for a one-message chat, 67 ms for a chat of 200
  messages, on every round. `create` below posts the body as given, leaving out the arguments
  that were not set (`omit`, `NOT_GIVEN`), as the SDK leaves them out. A test sends the same
  call through both clients and compares the bodies the server received.
- **Streamed chunks.** Every chunk is built by the SDK's `construct_type`, which reads type hints
  for each field of each chunk: about 120 µs a chunk, the largest single cost of streaming a
  token. pydantic-core validation builds the same `ChatCompletionChunk` in about 4 µs. A chunk
  that does not validate (servers that stray from the schema) still goes the SDK's lenient way,
  so nothing such a server sends is lost.

Retries are the client's own (`max_retries`), so no request needs a per-request copy of the
client. Everything else (auth, retries with `Retry-After`, errors, the stream reader) is the
SDK's.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import httpx2
import pydantic
from openai import AsyncOpenAI, AsyncStream, NotGiven, Omit, RequestOptions, not_given
from openai.resources.chat import AsyncChat
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletion, ChatCompletionChunk

_UNSET = (Omit, NotGiven)
_STREAM = AsyncStream[ChatCompletionChunk]
_VALIDATED: frozenset[type[pydantic.BaseModel]] = frozenset({ChatCompletionChunk})
"""Response types built by validation first: the one that arrives once per streamed token."""


class _Completions(AsyncCompletions):
    # One signature for the SDK's overloads by `stream`: it takes the same keywords, as **params.
    async def create(  # type: ignore[override]
        self,
        *,
        extra_headers: dict[str, str] | None = None,
        extra_query: dict[str, object] | None = None,
        extra_body: dict[str, object] | None = None,
        timeout: float | httpx2.Timeout | NotGiven | None = not_given,  # noqa: ASYNC109 (the SDK's)
        **params: Any,
    ) -> ChatCompletion | AsyncStream[ChatCompletionChunk]:
        body = {key: value for key, value in params.items() if not isinstance(value, _UNSET)}
        options: RequestOptions = {"security": {"bearer_auth": True}}
        if extra_headers is not None:
            options["headers"] = extra_headers
        if extra_query is not None:
            options["params"] = extra_query
        if extra_body is not None:
            options["extra_json"] = extra_body
        if not isinstance(timeout, NotGiven):
            options["timeout"] = timeout
        return await self._post(
            "/chat/completions",
            body=body,
            options=options,
            cast_to=ChatCompletion,
            stream=body.get("stream") is True,
            stream_cls=_STREAM,
        )


class _Chat(AsyncChat):
    @cached_property
    def completions(self) -> AsyncCompletions:
        return _Completions(self._client)


class HearthAsyncOpenAI(AsyncOpenAI):
    @property
    def user_agent(self) -> str:
        """The stock client's: the SDK names the client's class in it."""
        return f"{AsyncOpenAI.__name__}/Python {self._version}"

    @cached_property
    def chat(self) -> AsyncChat:
        return _Chat(self)

    def _process_response_data(
        self, *, data: object, cast_to: type[Any], response: httpx2.Response
    ) -> Any:
        if cast_to in _VALIDATED and isinstance(data, dict):
            try:
                return cast_to.model_validate(data)
            except pydantic.ValidationError:
                pass  # the SDK's lenient construction keeps whatever the server sent
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)
