"""The recorder: stores each model round of a turn as it happens.

A pydantic-ai capability, so it sees every round whichever way the run is driven:

- when a round starts (`wrap_model_request`) it creates the round's assistant message with
  status `streaming` and announces its id (`data-assistant-message`); a new message's first
  round uses the row sending stored with the message, in the same transaction;
- while the round streams (`wrap_run_event_stream`) it keeps the partial text and reasoning,
  so a round that fails, is cut off or is stopped keeps what the model had said. Meanwhile the
  round's row gets what the client was sent twice a second, written by the turn supervisor for
  every turn of the process at once (`app.agent.partial`): the stream never waits for a write,
  and a process killed mid-round loses at most the last half second;
- when the round ends it stores the content, reasoning, the full response for replay (thinking
  signatures, reasoning content), the model and the usage split into input, output, cache read
  and cache write tokens;
- what the knowledge tools retrieved and cited becomes evidence rows of the question, with
  the round as their epoch (`app.knowledge.evidence`);
- each tool call becomes a `chat_llm_tools` row that goes `running` -> `done` / `failed`; a
  call that waits for the user's approval goes `pending` when the run pauses (a `write_file`
  row gets its preview when the call is made), and when the turn resumes from the user's
  decisions the same row goes on: `running` -> `done` / `failed`, or `rejected`.

When a turn ends abnormally the turn runner calls `abort`, which closes whatever is open, and
whatever way it ends `leftovers` fails any call of the chat still `running`: no row outlives
its turn in a state that says it is still going. The statements every turn runs are built once
(`app.chats.repository` says why).
Every write is its own short transaction: what happened is stored as soon as it happened. A write
whose connection drops is made again on a fresh one (`app.core.db.retry`), inserts exactly once;
one that still fails ends the turn as hearth's own fault, which its client is told.

What a model sends is screened before anything runs (`_screen_calls`), so no call of its can
break the bookkeeping that pairs calls with rows and results:
- a tool call id used twice in one response: the later call gets a derived id (`<id>-2`) and is
  answered as an error without running. Sending the id back as received would give the provider
  two results for one id (Anthropic refuses a message whose tool_use ids repeat, so every later
  request of the chat would fail); the derived id goes into the stored response, so every later
  request replays the same, valid, exchange;
- a tool call id longer than the 200 characters a row holds is answered as an error without
  running (it could not be approved or matched by its stored form); the row keeps a bounded form
  of it (`app.agent.stored_text.bounded`), while the stored response keeps the id exactly as the
  provider sent it, which is what goes back on the wire, paired with the row by the same bound.
  A tool name that long names no tool: pydantic-ai answers it as unknown; the row keeps it bounded;
- a `write_file` whose content could not be written exactly as previewed (`app.tools.writing`)
  is answered as an error at once rather than put to the user for approval.
Every string stored passes through `storable` (no NUL, no lone surrogate), since PostgreSQL can
hold neither.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import uuid
from collections.abc import AsyncIterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai._utils import aclose_if_supported
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    DeferredToolRequestsEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessagesTypeAdapter,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    RetryPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.tools import ToolDefinition
from sqlalchemy import Executable, Update, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agent import leases
from app.agent.leases import INTERRUPTED_ROUND
from app.agent.stored_text import ID_LENGTH, bounded, storable, storable_text
from app.clock import Clock
from app.core.db.retry import insert_once, transaction
from app.knowledge import evidence
from app.knowledge.evidence import EVIDENCE_KEY
from app.llm.dtl import MEDIA_KEY
from app.models import ActivatedTool, Chat, ChatLlmTool, Message
from app.observability.metrics import NO_METRICS, Reporter
from app.tools.activation import ACTIVATE_TOOLS
from app.tools.deps import TurnDeps
from app.tools.events import HearthPart
from app.tools.writing import WRITE_FILE, check_room, preview, writable_content

log = logging.getLogger("hearth.turns")

UNFINISHED_CALL = "The tool call did not finish: the turn ended first."


@dataclass
class TurnUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, usage: Any) -> None:
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.cache_read_tokens += usage.cache_read_tokens or 0
        self.cache_write_tokens += usage.cache_write_tokens or 0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass
class _Round:
    message_id: int
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    streamed: bool = False
    """Whether any output arrived, which tells a stream cut off mid-way from a failed request."""


_CLOSE_ROUND = (
    update(Message)
    .where(Message.id == bindparam("round_id"), Message.status == "streaming")
    .values(
        status="ok",
        **{
            name: bindparam(f"new_{name}")
            for name in (
                "content",
                "reasoning",
                "model",
                "provider_details",
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
            )
        },
    )
    .execution_options(synchronize_session=False)
)
"""A round ends `ok` with what its response held; one some other worker settled (this one lost
its lease) is not made `ok` again."""
_MAKE_LEAF = (
    update(Chat)
    .where(Chat.id == bindparam("chat_id"))
    .values(active_leaf_id=bindparam("leaf"))
    .execution_options(synchronize_session=False)
)
_FINISH_CALL = (
    update(ChatLlmTool)
    .where(ChatLlmTool.id == bindparam("row_id"))
    .values(
        status=bindparam("new_status"),
        result=bindparam("new_result"),
        result_type=bindparam("new_result_type"),
        media=bindparam("new_media"),
        updated_at=bindparam("now"),
    )
    .execution_options(synchronize_session=False)
)
_FAIL_ROUNDS = (
    update(Message)
    .where(Message.id.in_(bindparam("rounds", expanding=True)), Message.status == "streaming")
    .values(status="failed", error=bindparam("reason"))
    .execution_options(synchronize_session=False)
)
_FAIL_CALLS = (
    update(ChatLlmTool)
    .where(ChatLlmTool.chat_id == bindparam("of_chat"), ChatLlmTool.status == "running")
    .values(status="failed", result=bindparam("reason"), updated_at=bindparam("now"))
    .execution_options(synchronize_session=False)
)
_FAIL_OWN_CALLS = (
    update(ChatLlmTool)
    .where(
        ChatLlmTool.message_id.in_(bindparam("own_rounds", expanding=True)),
        ChatLlmTool.status == "running",
    )
    .values(status="failed", result=bindparam("reason"), updated_at=bindparam("now"))
    .execution_options(synchronize_session=False)
)


def round_row(
    chat_id: uuid.UUID, model_id: str, now: datetime, question_id: int, parent_id: int
) -> Message:
    """A round's assistant message as it starts: empty, `streaming`, tied to its question and
    hung under the message before it (the user message, or the round before)."""
    return Message(
        chat_id=chat_id,
        parent_id=parent_id,
        role="assistant",
        content="",
        status="streaming",
        model=model_id,
        meta={"question_id": question_id} if question_id else {},
        created_at=now,
    )


def tool_result_text(content: Any) -> tuple[str, str]:
    """A tool's return value as stored: text as it is, anything else as JSON."""
    if isinstance(content, str):
        return content, "text"
    return orjson.dumps(content, default=str).decode(), "json"


class Recorder(AbstractCapability[TurnDeps]):
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        chat_id: uuid.UUID,
        model_id: str,
        clock: Clock,
        question_id: int = 0,
        first_round_id: int | None = None,
        metrics: Reporter = NO_METRICS,
        alone: async_sessionmaker[AsyncSession] | None = None,
    ) -> None:
        self.sessions = sessions
        self.alone = alone or sessions
        """Where a write of one statement runs (`app.core.db.engine.alone_factory`)."""
        self.metrics = metrics
        self.chat_id = chat_id
        self.model_id = model_id
        self.clock = clock
        self.question_id = question_id
        """The user message that started the question; recorded on every round it makes."""
        self.first_round_id = first_round_id
        """The first round's row when sending stored it; used by the first round."""
        self.usage = TurnUsage()
        self.round: _Round | None = None
        self.message_ids: list[int] = []
        self.running_tools: dict[str, int] = {}
        """tool_call_id -> chat_llm_tools row id, for calls that have not finished."""
        self.cited = False
        """Whether this turn recorded a citation."""
        self.adopted: dict[str, int] = {}
        """tool_call_id -> row id of the pending calls a resumed turn carries on."""
        self.refused: dict[str, str] = {}
        """tool_call_id -> why the call is answered as an error without running."""
        self.paused_round: int | None = None
        """The round a resumed turn continues from: its first new round hangs under it."""

    async def adopt_pending(self) -> None:
        """A resumed turn continues the chat's pending calls on their own rows, and its next
        round hangs under the round that made them."""

        async def read(db: AsyncSession) -> list[tuple[str, int, int]]:
            rows = await db.execute(
                select(ChatLlmTool.tool_call_id, ChatLlmTool.id, ChatLlmTool.message_id).where(
                    ChatLlmTool.chat_id == self.chat_id, ChatLlmTool.status == "pending"
                )
            )
            return [(call_id, row_id, message_id) for call_id, row_id, message_id in rows]

        pending = await transaction(self.sessions, read, what="reading pending calls")
        self.adopted = {tool_call_id: row_id for tool_call_id, row_id, _ in pending}
        if pending:
            self.paused_round = max(message_id for _, _, message_id in pending)

    # -- rounds ------------------------------------------------------------------------------

    async def wrap_model_request(
        self, ctx: RunContext[TurnDeps], *, request_context: Any, handler: Any
    ) -> ModelResponse:
        await self._open_round()
        assert self.round is not None
        await ctx.emit(HearthPart(part="assistant-message", payload={"id": self.round.message_id}))
        response: ModelResponse = self._screen_calls(await handler(request_context))
        await self._close_round(response)
        return response

    def _screen_calls(self, response: ModelResponse) -> ModelResponse:
        """The response with each repeated tool call id made unique; which calls are refused."""
        calls = [part for part in response.parts if isinstance(part, ToolCallPart)]
        taken = {call.tool_call_id for call in calls}
        seen: set[str] = set()
        parts = list(response.parts)
        for index, part in enumerate(parts):
            if not isinstance(part, ToolCallPart):
                continue
            call_id = part.tool_call_id
            if call_id in seen:
                n = 2
                while f"{call_id}-{n}" in taken:
                    n += 1
                renamed = f"{call_id}-{n}"
                taken.add(renamed)
                parts[index] = part = dataclasses.replace(part, tool_call_id=renamed)
                self.refused[renamed] = (
                    "This call was not run: its id repeats the id of another call in the same "
                    "response. Call the tool again, with a new id, if it is still needed."
                )
            elif len(call_id) > ID_LENGTH:
                self.refused[call_id] = (
                    f"This call was not run: its id is longer than {ID_LENGTH} characters."
                )
            seen.add(call_id)
        if parts == response.parts:
            return response
        return dataclasses.replace(response, parts=parts)

    async def before_tool_validate(
        self, ctx: RunContext[TurnDeps], *, call: ToolCallPart, tool_def: ToolDefinition, args: Any
    ) -> Any:
        reason = self.refused.pop(call.tool_call_id, None)
        if reason is not None:
            raise ModelRetry(reason)
        if call.tool_name == WRITE_FILE:
            arguments = call.args_as_dict()
            content = arguments.get("content")
            if isinstance(content, str):
                # A write that could not be done asks nobody first.
                size = len(writable_content(content))
                await asyncio.to_thread(
                    check_room,
                    ctx.deps.file_root,
                    str(arguments.get("path", "")),
                    size,
                    ctx.deps.storage_quota,
                )
        return args

    async def _open_round(self) -> None:
        if self.first_round_id is not None:  # stored with the user message when it was sent
            message_id, self.first_round_id = self.first_round_id, None
        else:
            now = self.clock.now()
            parent = self.message_ids[-1] if self.message_ids else self.paused_round
            [message] = await insert_once(
                self.sessions,
                lambda: [
                    round_row(
                        self.chat_id,
                        self.model_id,
                        now,
                        self.question_id,
                        parent or self.question_id,
                    )
                ],
                what="opening a round",
                then=self._make_leaf,
            )
            message_id = message.id
        self.round = _Round(message_id)
        self.message_ids.append(message_id)

    async def _make_leaf(self, db: AsyncSession, rows: list[Message]) -> None:
        """The new round ends the chat's active path (the turn holds the chat: no switch races)."""
        await db.execute(_MAKE_LEAF, {"chat_id": self.chat_id, "leaf": rows[0].id})

    async def _close_round(self, response: ModelResponse) -> None:
        assert self.round is not None
        self.usage.add(response.usage)
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        reasoning = "\n\n".join(p.content for p in response.parts if isinstance(p, ThinkingPart))
        stored = storable(ModelMessagesTypeAdapter.dump_python([response], mode="json")[0])
        usage = response.usage
        await self._write(
            _CLOSE_ROUND,
            "closing a round",
            {
                "round_id": self.round.message_id,
                "new_content": storable_text(text),
                "new_reasoning": storable_text(reasoning) or None,
                "new_model": self.model_id,
                "new_provider_details": {"response": stored},
                "new_input_tokens": usage.input_tokens or 0,
                "new_output_tokens": usage.output_tokens or 0,
                "new_cache_read_tokens": usage.cache_read_tokens or 0,
                "new_cache_write_tokens": usage.cache_write_tokens or 0,
            },
        )

    # -- streaming and tools -----------------------------------------------------------------

    async def wrap_run_event_stream(
        self, ctx: RunContext[TurnDeps], *, stream: AsyncIterable[Any]
    ) -> AsyncIterable[Any]:
        """Each event of the run as it passes, before the turn's stream encodes it.

        A wrapper rather than `on_event`: pydantic-ai hands each listener a copy of the run
        context per event, which cost a turn 8 µs of CPU per streamed token (more than the rest
        of this capability's work together); a wrapper gets its context once per node, and sees
        the same events at the same stream positions (dispatch and wrappers are applied
        together, listeners first)."""
        try:
            async for event in stream:
                if isinstance(event, PartDeltaEvent | PartStartEvent):
                    if (current := self.round) is not None:
                        current.streamed = True
                        self._keep(current, event)
                elif isinstance(event, FunctionToolCallEvent):
                    await self._tool_started(ctx, event)
                elif isinstance(event, FunctionToolResultEvent):
                    await self._tool_finished(ctx, event)
                elif isinstance(event, DeferredToolRequestsEvent):
                    await self._paused([call.tool_call_id for call in event.requests.approvals])
                yield event
        finally:
            await aclose_if_supported(stream)

    @staticmethod
    def _keep(current: _Round, event: PartStartEvent | PartDeltaEvent) -> bool:
        """Keep the text or reasoning an event brings; whether it brought any."""
        if isinstance(event, PartStartEvent):
            if isinstance(event.part, TextPart):
                current.text.append(event.part.content)
                return True
            if isinstance(event.part, ThinkingPart):
                current.reasoning.append(event.part.content)
                return True
        elif isinstance(event.delta, TextPartDelta):
            current.text.append(event.delta.content_delta)
            return True
        elif isinstance(event.delta, ThinkingPartDelta) and event.delta.content_delta:
            current.reasoning.append(event.delta.content_delta)
            return True
        return False

    async def _tool_started(self, ctx: RunContext[TurnDeps], event: FunctionToolCallEvent) -> None:
        part = event.part
        now = self.clock.now()
        adopted = self.adopted.pop(part.tool_call_id, None)
        if adopted is not None:
            await self._write(
                update(ChatLlmTool)
                .where(ChatLlmTool.id == adopted)
                .values(status="running", updated_at=now),
                "starting a call",
            )
            self.running_tools[part.tool_call_id] = adopted
            ctx.deps.call_rows[part.tool_call_id] = adopted
            return
        assert self.round is not None
        message_id = self.round.message_id
        arguments = part.args_as_dict()
        previews = None
        if (
            part.tool_name == WRITE_FILE
            and part.tool_call_id not in self.refused
            and isinstance(arguments.get("content"), str)
        ):
            previews = await asyncio.to_thread(
                preview,
                ctx.deps.file_root,
                str(arguments.get("path", "")),
                arguments["content"],
            )

        def row() -> list[ChatLlmTool]:
            return [
                ChatLlmTool(
                    chat_id=self.chat_id,
                    message_id=message_id,
                    tool_call_id=bounded(part.tool_call_id),
                    name=bounded(part.tool_name),
                    arguments=storable(arguments),
                    status="running",
                    preview_old=storable_text(previews[0]) if previews else None,
                    preview_new=previews[1] if previews else None,
                    created_at=now,
                    updated_at=now,
                )
            ]

        [stored] = await insert_once(self.sessions, row, what="starting a call")
        self.running_tools[part.tool_call_id] = stored.id
        ctx.deps.call_rows[part.tool_call_id] = stored.id

    async def _paused(self, tool_call_ids: list[str]) -> None:
        """The run stops here: these calls wait for the user's decision."""
        rows = [self.running_tools.pop(i) for i in tool_call_ids if i in self.running_tools]
        if not rows:
            return
        await self._write(
            update(ChatLlmTool)
            .where(ChatLlmTool.id.in_(rows))
            .values(status="pending", updated_at=self.clock.now()),
            "pausing for approvals",
        )

    async def _tool_finished(
        self, ctx: RunContext[TurnDeps], event: FunctionToolResultEvent
    ) -> None:
        part = event.part
        row_id = self.running_tools.pop(part.tool_call_id, None)
        if row_id is None:
            return
        media = None
        if isinstance(part, RetryPromptPart):
            result, result_type, status = part.model_response(), "text", "failed"
            if isinstance(part.content, str):
                result = part.content
        else:
            assert isinstance(part, ToolReturnPart)
            result, result_type = tool_result_text(part.content)
            status = {"success": "done", "denied": "rejected"}.get(part.outcome, "failed")
            if isinstance(part.metadata, dict) and part.metadata.get(MEDIA_KEY):
                media = part.metadata[MEDIA_KEY]
        await self._write(
            _FINISH_CALL,
            "finishing a call",
            {
                "row_id": row_id,
                "new_status": status,
                "new_result": storable_text(result),
                "new_result_type": result_type,
                "new_media": storable(media),
                "now": self.clock.now(),
            },
        )
        if self.metrics.enabled:
            owner = ctx.deps.catalogue.tool_owner(part.tool_name)
            self.metrics.tool_call(owner.group.name if owner else "core", status)
        if part.tool_name == ACTIVATE_TOOLS and status == "done":
            await self._record_activations(ctx, result)
        elif isinstance(part, ToolReturnPart) and isinstance(part.metadata, dict):
            report = part.metadata.get(EVIDENCE_KEY)
            if report and self.round is not None and self.question_id:
                self.cited |= await evidence.record(
                    self.sessions,
                    chat_id=self.chat_id,
                    question_id=self.question_id,
                    epoch=self.round.message_id,
                    report=report,
                    now=self.clock.now(),
                )

    async def _record_activations(self, ctx: RunContext[TurnDeps], result: str) -> None:
        """One `activated_tools` row per group the call activated, anchored at this round."""
        assert self.round is not None
        activated = [r["group"] for r in json.loads(result) if r.get("status") == "activated"]
        if not activated:
            return
        now = self.clock.now()
        catalogue = ctx.deps.catalogue
        message_id = self.round.message_id

        def rows() -> list[ActivatedTool]:
            return [
                ActivatedTool(
                    chat_id=self.chat_id,
                    message_id=message_id,
                    kind=entry.kind if (entry := catalogue.find(name)) else "mcp",
                    ref=name,
                    created_at=now,
                )
                for name in activated
            ]

        await insert_once(self.sessions, rows, what="recording activations")
        await ctx.emit(
            HearthPart(
                part="activation",
                payload={"message_id": self.round.message_id, "groups": activated},
            )
        )

    # -- abnormal ends -----------------------------------------------------------------------

    async def abort(self, status: str, error: str | None, *, last_failed: bool = False) -> None:
        """Close the open round with `status` (keeping its partial text) and open tool calls.

        When no round is open (the turn ended between rounds, e.g. at the round limit), the
        error is kept on the last round instead, so the stored chat says why the turn ended;
        with `last_failed` (hearth's own fault ended the turn) that round is `failed` too.
        """
        error = storable_text(error) if error is not None else None
        current, self.round = self.round, None
        if current is None and self.first_round_id is not None:  # it ended before its 1st round
            current, self.first_round_id = _Round(self.first_round_id), None
            self.message_ids.append(current.message_id)
        last = self.message_ids[-1] if self.message_ids else None
        running = list(self.running_tools.values())
        now = self.clock.now()

        async def close(db: AsyncSession) -> None:
            open_round = current
            if open_round is not None and not await self._is_streaming(db, open_round.message_id):
                open_round = None
            if open_round is None and error and last is not None:
                values: dict[str, Any] = {"error": error}
                if last_failed:
                    values["status"] = "failed"
                await db.execute(update(Message).where(Message.id == last).values(**values))
            if open_round is not None:
                await db.execute(_ending(open_round, status, error))
            if running:
                await db.execute(
                    update(ChatLlmTool)
                    .where(ChatLlmTool.id.in_(running))
                    .values(
                        status="cancelled" if status == "cancelled" else "failed",
                        result=error,
                        updated_at=now,
                    )
                )

        await transaction(self.sessions, close, what="closing a turn")
        self.running_tools.clear()

    async def interrupt(self) -> None:
        """Close the turn as a sweep closes a dead worker's (`leases.settle_own`): it lost its
        chat's lease, so it ends as interrupted, not as stopped by the user. The open round
        keeps all the text this process has of it."""
        current, self.round = self.round, None
        rounds = list(self.message_ids)
        if self.first_round_id is not None:  # it lost the chat before its first round
            rounds.append(self.first_round_id)
            self.first_round_id = None
        running = list(self.running_tools.values())
        self.running_tools.clear()
        now = self.clock.now()

        async def close(db: AsyncSession) -> None:
            if current is not None:
                await db.execute(_ending(current, "incomplete", INTERRUPTED_ROUND))
            await leases.settle_own(db, rounds, running, now)

        await transaction(self.sessions, close, what="closing an interrupted turn")

    def leftovers(
        self, error: str | None, *, holds_chat: bool = True
    ) -> tuple[tuple[Update, ...], dict[str, Any]]:
        """The statements that fail whatever this turn left open, with their values: a round
        still `streaming`, a call of the chat still `running` (the turn holds the chat's lease,
        so they are its). They run with the statement that releases the chat (`TurnSupervisor`):
        one commit for all, and none without the others.

        A turn that lost the chat's lease (`holds_chat` false) touches its own rounds' calls
        only: another turn may hold the chat by now, and its running calls are not this one's.
        """
        self.running_tools.clear()
        reason = error or UNFINISHED_CALL
        rounds = [*self.message_ids, *([self.paused_round] if self.paused_round else [])]
        statements: list[Update] = []
        if self.message_ids:
            statements.append(_FAIL_ROUNDS)
        if holds_chat:
            statements.append(_FAIL_CALLS)
        elif rounds:
            statements.append(_FAIL_OWN_CALLS)
        values = {
            "rounds": self.message_ids,
            "own_rounds": rounds,
            "reason": reason,
            "of_chat": self.chat_id,
            "now": self.clock.now(),
        }
        return tuple(statements), values

    async def _write(
        self, statement: Executable, what: str, values: dict[str, Any] | None = None
    ) -> None:
        """One statement, alone (atomic by itself: no `BEGIN` and `COMMIT` around it), tried
        again on a dropped connection."""

        async def run(db: AsyncSession) -> None:
            await db.execute(statement, values)

        await transaction(self.alone, run, what=what)

    @staticmethod
    async def _is_streaming(db: AsyncSession, message_id: int) -> bool:
        status = await db.scalar(select(Message.status).where(Message.id == message_id))
        return status == "streaming"

    @property
    def streamed_in_open_round(self) -> bool:
        return self.round is not None and self.round.streamed


def _ending(open_round: _Round, status: str, error: str | None) -> Update:
    """The statement that ends a round still `streaming` with `status`, keeping all the text and
    reasoning this process has of it."""
    return (
        update(Message)
        .where(Message.id == open_round.message_id, Message.status == "streaming")
        .values(
            content=storable_text("".join(open_round.text)),
            reasoning=storable_text("".join(open_round.reasoning)) or None,
            status=status,
            error=error,
        )
    )
