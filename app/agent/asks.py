"""The turn's answers to what a call's MCP server asks: the user's forms, the model's completions.

**Forms** (`elicitation/create`) pause the turn like an approval, but the call stays open: the
server is waiting for the answer inside its call. The form is kept on the call's row
(`chat_llm_tools.elicitation`), so a reload shows it again and any worker can take the answer;
the stream sends `data-elicitation` and ends (the turn hands over, `Turn._hand_over`); the
request that answers (`POST /api/chats/{id}/elicitations`) stores the answer on the row and, in
the turn's own process, wakes the call at once and streams the rest of the turn. A turn whose
answer was stored by another worker sees it on the row within `POLL_SECONDS`. Unanswered within
the call's timeout, or when the turn is stopped, the form is cancelled.

**A new sign-in** a server asks for during a call (an OAuth step-up) is `data-authorization`
`{tool_call_id, group, url}`, after which the stream ends too; the call waits for the user to
come back through the callback (`app.tools.mcp.oauth`), and the turn goes on.

**Completions** (`sampling/createMessage`, only for servers with `allow_sampling`) run with the
chat's model, without tools, at most the model's own maximum output, and are logged in the
request log with purpose `sampling`, so they count as the user's usage like a round; a user
over quota is refused them (an MCP error naming the quota).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.direct import model_request
from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, TextPart
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.capabilities.request_log import describe_error
from app.agent.quotas import Limits, exceeded
from app.agent.runtime import TurnRuntime
from app.agent.stored_text import storable, storable_text
from app.core.db.retry import insert_once, transaction
from app.llm.factory import model_settings
from app.llm.registry import ModelInfo
from app.llm.usage import count as count_usage
from app.models import ChatLlmTool, LlmRequest
from app.observability.metrics import report_model_request
from app.tools.asks import Elicited, Sampled, SamplingRequest, ServerAsks
from app.tools.deps import TurnDeps
from app.tools.events import AuthorizationAsked, ElicitationAsked
from app.tools.mcp.asking import Refused

log = logging.getLogger("hearth.turns")

POLL_SECONDS = 0.5
"""How often a waiting form looks at its row for an answer another worker stored."""
CANCELLED = Elicited("cancel")


@dataclass(eq=False)
class _Waiting:
    row_id: int
    future: asyncio.Future[Elicited]


class TurnAsking:
    """The forms a turn's calls wait on, by elicitation id, and the completions they run."""

    def __init__(
        self,
        runtime: TurnRuntime,
        *,
        user_id: uuid.UUID,
        chat_id: uuid.UUID,
        model: ModelInfo,
        round_id: Callable[[], int | None],
        limits: Limits | None = None,
    ) -> None:
        self.runtime = runtime
        self.limits = limits or Limits()
        self.user_id = user_id
        self.chat_id = chat_id
        self.model = model
        self.round_id = round_id
        self._waiting: dict[str, _Waiting] = {}

    def for_call(self, ctx: RunContext[Any], tool_call_id: str) -> ServerAsks:
        return _CallAsks(self, ctx, tool_call_id)

    def waits_for(self, elicitation_id: str) -> bool:
        waiting = self._waiting.get(elicitation_id)
        return waiting is not None and not waiting.future.done()

    def answer(self, elicitation_id: str, answer: Elicited) -> bool:
        """Wake the call that waits on the form; False when none here does (any more)."""
        waiting = self._waiting.get(elicitation_id)
        if waiting is None or waiting.future.done():
            return False
        waiting.future.set_result(answer)
        return True

    def cancel_all(self) -> None:
        """The turn stops or ends: every form still waiting is cancelled."""
        for waiting in self._waiting.values():
            if not waiting.future.done():
                waiting.future.set_result(CANCELLED)

    # -- forms --------------------------------------------------------------------------------

    async def elicit(
        self,
        ctx: RunContext[TurnDeps],
        tool_call_id: str,
        message: str,
        requested_schema: dict[str, Any],
        timeout: float,  # noqa: ASYNC109 (how long the user has: the call's own timeout)
    ) -> Elicited:
        row_id = ctx.deps.call_rows.get(tool_call_id)
        if row_id is None:  # a call the recorder has no row for cannot be shown to anyone
            return Elicited("decline")
        elicitation_id = "eli_" + secrets.token_urlsafe(16)
        message = storable_text(message)
        asked = {
            "id": elicitation_id,
            "message": message,
            "requested_schema": storable(requested_schema),
        }
        await self._store(row_id, asked, what="asking the user")
        future: asyncio.Future[Elicited] = asyncio.get_running_loop().create_future()
        self._waiting[elicitation_id] = _Waiting(row_id, future)
        try:
            await ctx.emit(
                ElicitationAsked(
                    elicitation_id=elicitation_id,
                    message=message,
                    requested_schema=asked["requested_schema"],
                )
            )
            answer = await self._wait(elicitation_id, row_id, future, timeout)
        except asyncio.CancelledError:  # the call itself was cancelled (a stop)
            await asyncio.shield(self._settle(row_id, elicitation_id, CANCELLED))
            raise
        finally:
            self._waiting.pop(elicitation_id, None)
        await self._settle(row_id, elicitation_id, answer)
        return answer

    async def _wait(
        self,
        elicitation_id: str,
        row_id: int,
        future: asyncio.Future[Elicited],
        timeout: float,  # noqa: ASYNC109
    ) -> Elicited:
        loop = asyncio.get_running_loop()
        ends = loop.time() + timeout
        while (remaining := ends - loop.time()) > 0:
            await asyncio.wait([future], timeout=min(POLL_SECONDS, remaining))
            if future.done():
                return future.result()
            stored = await self._read(row_id)
            if stored.get("id") == elicitation_id and stored.get("action"):
                return Elicited(stored["action"], stored.get("content"))
        return CANCELLED

    async def _settle(self, row_id: int, elicitation_id: str, answer: Elicited) -> None:
        """Keep how the form ended on its row, unless the request that answered did."""
        stored = await self._read(row_id)
        if stored.get("id") != elicitation_id or stored.get("action"):
            return
        stored = {**stored, "action": answer.action, "content": answer.content}
        await self._store(row_id, stored, what="closing a form")

    async def _read(self, row_id: int) -> dict[str, Any]:
        async def read(db: AsyncSession) -> dict[str, Any]:
            stored = await db.scalar(
                select(ChatLlmTool.elicitation).where(ChatLlmTool.id == row_id)
            )
            return stored if isinstance(stored, dict) else {}

        return await transaction(self.runtime.sessions, read, what="reading a form")

    async def _store(self, row_id: int, value: dict[str, Any], *, what: str) -> None:
        async def write(db: AsyncSession) -> None:
            await db.execute(
                update(ChatLlmTool).where(ChatLlmTool.id == row_id).values(elicitation=value)
            )

        await transaction(self.runtime.sessions, write, what=what)

    async def authorize(
        self, ctx: RunContext[TurnDeps], tool_call_id: str, server: str, url: str
    ) -> None:
        """Kept on the call (a URL-mode question, for a reload) and streamed; the call waits."""
        row_id = ctx.deps.call_rows.get(tool_call_id)
        if row_id is not None:
            asked = {
                "id": "eli_" + secrets.token_urlsafe(16),
                "mode": "url",
                "message": f"{server} asks you to sign in again to go on.",
                "url": url,
            }
            await self._store(row_id, asked, what="asking the user to sign in")
        await ctx.emit(AuthorizationAsked(group=server, url=url))

    # -- completions --------------------------------------------------------------------------

    async def sample(self, request: SamplingRequest) -> Sampled:
        runtime, info = self.runtime, self.model
        if not self.limits.unlimited:
            async with runtime.sessions() as db:
                over = await exceeded(
                    db, runtime.registry, self.user_id, self.limits, runtime.clock.now()
                )
            if over is not None:
                runtime.metrics.quota_refused(over.quota)
                raise Refused(f"The user's {over.detail.removeprefix('the ')}.")
        model = runtime.models.get(info, runtime.registry)
        settings = model_settings(info)
        settings["max_tokens"] = max(1, min(request.max_tokens, info.config.max_output_tokens))
        if request.temperature is not None:
            settings["temperature"] = request.temperature
        if request.stop_sequences:
            settings["stop_sequences"] = request.stop_sequences
        messages = list(request.messages)
        if request.system_prompt and messages and isinstance(messages[0], ModelRequest):
            system = SystemPromptPart(request.system_prompt)
            messages[0] = ModelRequest(parts=[system, *messages[0].parts])
        started_at, started = runtime.clock.now(), runtime.clock.monotonic()
        response: ModelResponse | None = None
        error: BaseException | None = None
        try:
            response = await model_request(model, messages, model_settings=settings)
        except BaseException as exc:
            error = exc
            raise
        finally:
            await asyncio.shield(self._log(started_at, started, response, error))
        text = "".join(part.content for part in response.parts if isinstance(part, TextPart))
        cut = response.finish_reason == "length"
        return Sampled(text=text, model=info.id, stop_reason="maxTokens" if cut else "endTurn")

    async def _log(
        self,
        started_at: Any,
        started: float,
        response: ModelResponse | None,
        error: BaseException | None,
    ) -> None:
        usage = response.usage if response is not None else None
        values: dict[str, Any] = {
            "user_id": self.user_id,
            "chat_id": self.chat_id,
            "message_id": self.round_id(),
            "model": self.model.id,
            "provider": self.model.provider.id,
            "purpose": "sampling",
            "started_at": started_at,
            "duration_ms": round((self.runtime.clock.monotonic() - started) * 1000),
            "error": describe_error(error) if error is not None else None,
            "input_tokens": (usage.input_tokens or 0) if usage else None,
            "output_tokens": (usage.output_tokens or 0) if usage else None,
            "cache_read_tokens": (usage.cache_read_tokens or 0) if usage else None,
            "cache_write_tokens": (usage.cache_write_tokens or 0) if usage else None,
        }
        report_model_request(self.runtime.metrics, values)
        try:
            await insert_once(
                self.runtime.sessions,
                lambda: [LlmRequest(**values)],
                what="logging a sampling request",
                then=count_usage,
            )
        except Exception:
            log.exception("logging a sampling request of chat %s failed", self.chat_id)


@dataclass(eq=False)
class _CallAsks:
    """`ServerAsks` for one call: the turn's answers, with the call's context."""

    asking: TurnAsking
    ctx: RunContext[TurnDeps]
    tool_call_id: str

    async def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any],
        *,
        timeout: float,  # noqa: ASYNC109
    ) -> Elicited:
        return await self.asking.elicit(
            self.ctx, self.tool_call_id, message, requested_schema, timeout
        )

    async def sample(self, request: SamplingRequest) -> Sampled:
        return await self.asking.sample(request)

    async def authorize(self, server: str, url: str) -> None:
        await self.asking.authorize(self.ctx, self.tool_call_id, server, url)
