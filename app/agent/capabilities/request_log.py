"""The request log: one `llm_requests` row per model request, whatever its outcome.

A capability wrapping each model request: it hands the request and its streamed response
through untouched and only observes — the duration, the tokens split four ways, and the error
text of a request that failed or was cancelled. The row is written even when the turn is being
cancelled (the write is shielded), so stopped requests are on record too, and exactly once when
its connection drops, with the user's usage totals in the same transaction
(`app.llm.usage.log_request`: one statement on PostgreSQL).

A streamed response fails in the task that consumes the stream, and pydantic-ai then cancels the
task running `wrap_model_request`; so the error is caught where the events flow past
(`wrap_run_event_stream`) and the row names it instead of the cancellation it caused.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterable, Callable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai._utils import aclose_if_supported
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.clock import Clock
from app.llm import usage
from app.observability.metrics import NO_METRICS, Reporter, report_model_request
from app.tools.deps import TurnDeps


def describe_error(error: BaseException) -> str:
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    text = str(error) or type(error).__name__
    return text[:4000]


class RequestLog(AbstractCapability[TurnDeps]):
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        user_id: uuid.UUID,
        chat_id: uuid.UUID,
        model_id: str,
        provider: str,
        clock: Clock,
        message_id: Callable[[], int | None],
        metrics: Reporter = NO_METRICS,
    ) -> None:
        self.sessions = sessions
        self.metrics = metrics
        self.user_id = user_id
        self.chat_id = chat_id
        self.model_id = model_id
        self.provider = provider
        self.clock = clock
        self.message_id = message_id

    _stream_error: BaseException | None = None
    _first_event: float | None = None
    """When the open request's first event arrived (monotonic), for the time to first token."""

    async def wrap_run_event_stream(
        self, ctx: RunContext[TurnDeps], *, stream: AsyncIterable[Any]
    ) -> AsyncIterable[Any]:
        try:
            async for event in stream:
                if self._first_event is None:
                    self._first_event = self.clock.monotonic()
                yield event
        except BaseException as exc:
            self._stream_error = exc
            raise
        finally:
            await aclose_if_supported(stream)

    async def wrap_model_request(
        self, ctx: RunContext[TurnDeps], *, request_context: Any, handler: Any
    ) -> ModelResponse:
        started_at = self.clock.now()
        started = self.clock.monotonic()
        self._first_event = None
        response: ModelResponse | None = None
        error: BaseException | None = None
        try:
            response = await handler(request_context)
            return response
        except BaseException as exc:
            error = exc
            raise
        finally:
            if isinstance(error, asyncio.CancelledError) and self._stream_error is not None:
                error = self._stream_error
            self._stream_error = None
            values: dict[str, Any] = {
                "user_id": self.user_id,
                "chat_id": self.chat_id,
                "message_id": self.message_id(),
                "model": self.model_id,
                "provider": self.provider,
                "started_at": started_at,
                "duration_ms": round((self.clock.monotonic() - started) * 1000),
                "error": describe_error(error) if error is not None else None,
            }
            if response is not None:
                values["input_tokens"] = response.usage.input_tokens or 0
                values["output_tokens"] = response.usage.output_tokens or 0
                values["cache_read_tokens"] = response.usage.cache_read_tokens or 0
                values["cache_write_tokens"] = response.usage.cache_write_tokens or 0
            first = self._first_event
            report_model_request(self.metrics, values, first - started if first else None)
            await asyncio.shield(usage.log_request(self.sessions, values))
