"""The turn's HTTP stream: pydantic-ai's Vercel AI encoder plus hearth's data parts.

`VercelAIEventStream` already speaks the UI message stream protocol of the AI SDK (v7 wire);
this subclass adds what only hearth knows: `data-user-message` right after `start`, each
capability's `HearthPart` as its `data-*` chunk, and at the end the question's citations
(`data-citations`, and a standard `source-document` part per cited passage, so stock AI SDK
frontends list the sources too) and `data-usage` with the turn's usage, just before `finish`.
It also remembers the error that ended a run, so the turn runner can store it, and words
the errors a user may see in plain terms (`user_facing_error`): the round limit; a provider's
own answer (an HTTP error's message) as the provider gave it; a lost connection to the provider
in a sentence of hearth's; and anything else — a fault of hearth's own, whose text may come from
the database, its driver or a library — as a generic message with the request id, the full
text going to the log only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import PartDeltaEvent, TextPart, TextPartDelta
from pydantic_ai.ui.vercel_ai import VercelAIEventStream
from pydantic_ai.ui.vercel_ai.response_types import (
    BaseChunk,
    DataChunk,
    DoneChunk,
    ErrorChunk,
    FinishChunk,
    FinishStepChunk,
    SourceDocumentChunk,
    StartChunk,
    TextDeltaChunk,
)

from app.agent.quotas import QuotaReached
from app.knowledge.evidence import EvidenceRow, citation
from app.tools.events import HearthPart

SDK_VERSION: Final = 7
STREAM_HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


def is_internal(error: BaseException) -> bool:
    """Whether `error` is hearth's own fault rather than the provider's, the round limit or the
    user's quota."""
    return not isinstance(
        error, ModelAPIError | UsageLimitExceeded | UnexpectedModelBehavior | QuotaReached
    )


def internal_error(reference: str | None) -> str:
    """What a user is told about a fault of hearth's own: no text of it, the request id."""
    where = f" (request {reference})" if reference else ""
    return f"hearth could not finish this turn because of an internal error{where}."


def provider_error(error: BaseException) -> str | None:
    """What a user is told about a failed model request; None when the fault is hearth's."""
    if isinstance(error, ModelConnectionError):
        return "The connection to the model provider failed before the answer was complete."
    if isinstance(error, UnexpectedModelBehavior):
        return "The model's answer could not be used."
    if isinstance(error, ModelHTTPError):
        said = provider_message(error.body)
        answer = f"The model provider answered {error.status_code}"
        return f"{answer}: {said}" if said else f"{answer}."
    if isinstance(error, ModelAPIError):
        return f"The model request failed: {error.message}"
    return None


def provider_message(body: object, limit: int = 500) -> str | None:
    """The sentence a provider put in its error body (`{"error": {"message": ...}}` and the
    like), or the body itself when it is text; None when there is none."""
    for _ in range(3):  # {"error": {"message": ...}} is the deepest shape providers use
        if not isinstance(body, dict):
            break
        body = next(
            (body[key] for key in ("error", "message", "detail") if body.get(key)),
            None,
        )
    if not isinstance(body, str) or not body.strip():
        return None
    text = " ".join(body.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def user_facing_error(error: BaseException, max_rounds: int, reference: str | None = None) -> str:
    if isinstance(error, UsageLimitExceeded):
        return f"This turn reached its limit of {max_rounds} model rounds and was ended."
    if isinstance(error, QuotaReached):
        return error.detail
    return provider_error(error) or internal_error(reference)


_MARKER: Final = "\x00"
_MARKER_JSON: Final = '"\\u0000"'


@dataclass(kw_only=True)
class TurnEventStream(VercelAIEventStream[Any, Any]):
    user_message_id: int | None
    """None for a resumed turn, which stores no user message of its own."""
    usage: Callable[[], dict[str, int]]
    citations: Callable[[], Awaitable[tuple[int, list[EvidenceRow]] | None]] | None = None
    """The question's latest message and the passages it cited, read when the stream ends."""
    max_rounds: int = 25
    reference: str | None = None
    """The request id a user quotes to find an internal error in the log."""
    error: BaseException | None = field(default=None, init=False)
    _delta_frames: dict[str, tuple[str, str]] = field(default_factory=dict, init=False)
    """What comes before and after the delta in a text part's chunks, by the part's id."""
    compaction: dict[str, Any] | None = field(default=None, init=False)
    """`data-compaction`: the summary made before this turn, if one was."""

    async def before_stream(self) -> AsyncIterator[BaseChunk]:
        yield StartChunk(message_id=self.server_message_id)
        if self.user_message_id is not None:
            yield DataChunk(type="data-user-message", data={"id": self.user_message_id})
        if self.compaction is not None:
            yield DataChunk(type="data-compaction", data=self.compaction)

    def text_delta(self, event: object) -> str | None:
        """The text of a plain text delta of the open text part, with the state the transform
        keeps for it (the open part's deltas, which an error uses to close the part); None for
        every other event, which takes the transform's path. `encode_text_delta` writes its
        chunk as `handle_text_delta` would have made it.

        Why: a text delta is nearly every event of a turn, and the transform passes each through
        three generator layers and a dispatch (`transform_stream`, `handle_event`,
        `handle_part_delta`, `handle_text_delta`). Measured (bench/turn_overhead.py --parts d,
        PostgreSQL): hearth's CPU per token beyond pydantic-ai alone's went from 47 µs to 25-38
        µs with this path."""
        if type(event) is not PartDeltaEvent:
            return None
        delta = event.delta
        if (
            type(delta) is not TextPartDelta
            or not delta.content_delta
            or delta.provider_name is not None
            or delta.provider_details is not None
            or event.index != self._open_part_index
            or type(self._open_part) is not TextPart
        ):
            return None
        self._open_part_deltas.append(delta)
        return delta.content_delta

    def encode_text_delta(self, delta: str) -> str:
        """`encode_event(TextDeltaChunk(id=self.message_id, delta=delta))`, byte for byte, without
        building the chunk: the delta's JSON string inside a frame that depends only on the
        part's id, cut once per part. Measured in-process: 0.2 µs a token against 2.4 µs for the
        model and its serialiser; hearth's whole cost per token beyond pydantic-ai alone was
        16.5-35 µs in the benchmark runs of the same day (bench/turn_overhead.py --parts d)."""
        frame = self._delta_frames.get(self.message_id)
        if frame is None:
            # Cut from a chunk the model wrote around a marker delta, so the fields keep its
            # order (`type`, `delta`, `id`) and whatever it writes besides.
            whole = self.encode_event(TextDeltaChunk(id=self.message_id, delta=_MARKER))
            before, _, after = whole.partition(_MARKER_JSON)
            frame = self._delta_frames[self.message_id] = (before, after)
        try:
            text = orjson.dumps(delta).decode()
        except TypeError:  # a lone surrogate, which only the model's serialiser writes
            return self.encode_event(TextDeltaChunk(id=self.message_id, delta=delta))
        return frame[0] + text + frame[1]

    async def handle_capability_event(self, event: Any) -> AsyncIterator[BaseChunk]:
        if isinstance(event, HearthPart):
            yield DataChunk(type=f"data-{event.part}", data=event.payload)

    async def on_error(self, error: Exception) -> AsyncIterator[BaseChunk]:
        self.error = error
        async for chunk in super().on_error(error):
            if isinstance(chunk, ErrorChunk):
                chunk = ErrorChunk(
                    error_text=user_facing_error(error, self.max_rounds, self.reference)
                )
            yield chunk

    async def after_stream(self) -> AsyncIterator[BaseChunk]:
        yield FinishStepChunk()
        cited = await self.citations() if self.citations is not None else None
        if cited is not None:
            message_id, passages = cited
            yield DataChunk(
                type="data-citations",
                data={"message_id": message_id, "citations": [citation(p) for p in passages]},
            )
            for passage in passages:
                yield SourceDocumentChunk(
                    source_id=passage.chunk_id or "",
                    media_type=passage.mime or "text/plain",
                    title=passage.filename or "",
                    filename=passage.filename,
                )
        yield DataChunk(type="data-usage", data=self.usage())
        if self.cancelled is None:
            yield FinishChunk(finish_reason=self._finish_reason)
        yield DoneChunk()
