"""One turn: the agent run that answers a user message, stored and streamed as it happens.

The turn runs in a task of its own, detached from the HTTP request that started it, so a client
that disconnects cancels nothing: the turn runs to its end and everything is stored. Its events
go to its log (`app.agent.live`), which the HTTP response follows while the client stays, as does
any other reader (a reload, another tab, another worker).

Each turn is a pydantic-ai run over the history the builder made from the stored rows, with its
capabilities: the recorder (rows for every round, tool call and piece of evidence), the request
log, request-time compaction (with the capsule of earlier questions' cited evidence), the media
router and the request shape (the dynamic tail, with budget notices). A stop
fires the run's `CancellationToken`, which cancels the in-flight model request upstream; the
recorder then closes the open round as `cancelled`, keeping its partial text.

A call whose MCP server asks the user to fill in a form (or to sign in again) hands the turn
over: its response ends after `data-elicitation` (or `data-authorization`), the turn keeps
running (the call waits for the answer, holding the lease), and the request that answers
continues the same stream (`answer_elicitation`), starting with `start` of the same message
(`app.agent.asks`).

However a turn ends, it leaves nothing open (`Recorder.leftovers`, with the statement that
releases the chat), and what a user sees of a failure of hearth's own is a generic message
with the request id (`app.agent.stream.user_facing_error`); the log line keeps the full text,
the chat and the request id. A tool's errors are the model's to correct, not the turn's end: a
tool may fail any number of times, so only `HEARTH_MAX_ROUNDS` bounds a model that keeps
calling a failing tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, CancellationToken, DeferredToolRequests, DeferredToolResults, Tool
from pydantic_ai.exceptions import ModelHTTPError, UsageLimitExceeded
from pydantic_ai.models import Model
from pydantic_ai.output import OutputSpec
from pydantic_ai.ui.vercel_ai.response_types import (
    AbortChunk,
    BaseChunk,
    DataChunk,
    DoneChunk,
    FinishChunk,
    StartChunk,
)
from pydantic_ai.usage import UsageLimits
from sqlalchemy import Update
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.activations import load_anchors
from app.agent.asks import TurnAsking
from app.agent.capabilities.compaction import ToolReturnCompaction
from app.agent.capabilities.media import MediaRouter
from app.agent.capabilities.recorder import Recorder
from app.agent.capabilities.request_log import RequestLog
from app.agent.capabilities.request_shape import RequestShape
from app.agent.capabilities.turn_hooks import TurnHooks, TurnSlot
from app.agent.history import build_history
from app.agent.leases import INTERRUPTED_ROUND
from app.agent.live import DONE_EVENT, Reader, TurnLog
from app.agent.partial import Mark, SentText
from app.agent.quotas import Limits, QuotaGuard
from app.agent.rows import Path, StoredMessage, load_path
from app.agent.runtime import TurnRuntime
from app.agent.stream import (
    SDK_VERSION,
    TurnEventStream,
    internal_error,
    is_internal,
    user_facing_error,
)
from app.agent.summaries import (
    NothingToCover,
    StoredSummary,
    SummaryFailed,
    due,
    latest_summary,
    summarise,
    summary_block,
)
from app.core.db.retry import transaction
from app.core.http.request_id import current_request_id
from app.files.roots import user_root
from app.knowledge import evidence
from app.knowledge.evidence import EvidenceRow
from app.llm.factory import model_settings
from app.llm.registry import ModelInfo
from app.observability.logs import bind_chat, bind_turn
from app.tools.activation import activate_tools_tool
from app.tools.asks import Elicited
from app.tools.catalogue import Catalogue
from app.tools.deps import TurnDeps
from app.tools.files import describe_read_file, list_files, read_file
from app.tools.groups import GroupToolset
from app.tools.writing import WRITE_FILE, write_file

log = logging.getLogger("hearth.turns")

INSTRUCTIONS = (
    "You are the assistant of hearth, a chat service. Answer the user's questions. "
    "You can look at the user's files with the tools you are given; paths are relative to the "
    "user's file root."
)

UNBOUNDED_RETRIES = 1_000_000_000
"""A tool's errors are the model's to correct: no count of them ends a turn, only the rounds."""

TURN_OUTPUT: OutputSpec[str | DeferredToolRequests] = [str, DeferredToolRequests]
"""A turn ends with the model's text, or with tool calls that wait for the user's approval."""

read_file_tool: Tool[TurnDeps] = Tool(read_file, prepare=describe_read_file)


def turn_agent(model: Model) -> Agent[TurnDeps, str]:
    """The agent of a model's turns; the `ModelCache` keeps one per model, beside the model.

    What differs per turn (history, deps, toolsets) is passed to each run; its capability comes
    with its deps (`TurnSlot`).
    """
    return Agent(
        model,
        deps_type=TurnDeps,
        capabilities=[TurnSlot()],
        tools=[
            read_file_tool,
            list_files,
            Tool(write_file, name=WRITE_FILE, requires_approval=True),
            activate_tools_tool,
        ],
    )


def instructions(catalogue: Catalogue) -> str:
    """The static system text: instructions, then the fixed catalogue table (if any)."""
    table = catalogue.system_table()
    return f"{INSTRUCTIONS}\n\n{table}" if table else INSTRUCTIONS


@dataclass(frozen=True, slots=True)
class TurnPlan:
    """What a turn needs to know before it starts, decided by the chat service that starts it."""

    owner: str
    user_id: uuid.UUID
    chat_id: uuid.UUID
    user_message_id: int
    """The user message that started the question this turn answers."""
    model: ModelInfo
    resume: DeferredToolResults | None = None
    """The user's decisions on the calls a paused turn waits for; the turn continues from them."""
    first_round_id: int | None = None
    """The first round's assistant row, when sending stored it with the user message."""
    limits: Limits = field(default_factory=Limits)
    """The user's quota, checked before each later round (`app.agent.quotas`)."""
    path: Path | None = None
    """The chat's active path as the send that started the turn left it, read by the send (on
    PostgreSQL: `app.chats.service`): the turn reads it no more (see `Turn._history`)."""


def end_status(error: BaseException, streamed: bool) -> str:
    """`incomplete` for a stream cut off after output began, `failed` for anything else."""
    if isinstance(error, ModelHTTPError | UsageLimitExceeded):
        return "failed"
    return "incomplete" if streamed else "failed"


class Turn:
    def __init__(self, services: TurnRuntime, plan: TurnPlan, log: TurnLog) -> None:
        self.services = services
        self.plan = plan
        self.log = log
        """Every event of the turn's stream, which each of its readers follows."""
        self.cancellation = CancellationToken()
        self.stop_requested = False
        self.lease_lost = False
        """Its process stalled past the lease: another worker may have settled the chat."""
        self._marks: list[Mark | None] = []
        """For each event of the log, how much of the open round it covers (if it is text)."""
        self._response: Reader | None = None
        """The reader of the response that started the turn (or that an answer continued)."""
        self._response_from = 0
        """Where that response's stream starts in the log."""
        self._sent = SentText()
        self._saved: Mark | None = None
        """How much of it the supervisor has written to the round's row."""
        self._done: str | None = None
        """The stream's `[DONE]`, held back until the turn has let go of the chat."""
        self.task: asyncio.Task[None] | None = None
        self.recorder: Recorder | None = None
        self.asking: TurnAsking | None = None
        """The forms and completions its calls' servers ask for, once the run has begun."""
        self._encode: TurnEventStream | None = None
        """The turn's encoder, which a continued response uses too."""
        self._passed: object = None
        """The last event the shortcut let go down the run's stream to the transform."""
        self._done_with: object = None
        """The last event the transform has finished with (its chunks are in the log)."""
        self.end_stored = True
        """False when the turn could not store how it ended: its chat is then left to lapse,
        and a sweep settles it (`app.agent.leases.sweep`)."""
        self.ended: str | None = None
        """What the stored chat says about how the turn ended, if it failed."""
        self.outcome = "ok"
        """How it ended, for the metrics: ok, stopped, failed, incomplete or interrupted (the
        service stopped under it)."""

    # -- control -----------------------------------------------------------------------------

    def stop(self) -> None:
        """Cancel the run: the model request in flight is cancelled upstream."""
        self.stop_requested = True
        if self.asking is not None:
            self.asking.cancel_all()
        with contextlib.suppress(Exception):
            self.cancellation.cancel()

    def lose_lease(self) -> None:
        """Stop the run, which no longer holds its chat (`Recorder.interrupt` closes it)."""
        self.lease_lost = True
        self.stop()

    def answer_elicitation(self, elicitation_id: str, answer: Elicited) -> bool:
        """Wake the call that waits on the form, this response ending and a new one (`listen`)
        carrying the rest of the turn; False when no call of this turn waits on it."""
        if self.asking is None or not self.asking.waits_for(elicitation_id):
            return False
        self._reopen()
        return self.asking.answer(elicitation_id, answer)

    def listen(self) -> Reader:
        """The reader for the HTTP response; a client that leaves does not stop the turn."""
        self._response = self.log.follow(self._response_from)
        return self._response

    @property
    def _listening(self) -> bool:
        return self._response is not None and self._response.following

    def _emit(self, chunk: str, mark: Mark | None = None) -> None:
        if chunk == DONE_EVENT:
            self._done = chunk
            return
        self._append(chunk, mark)

    def _append(self, chunk: str, mark: Mark | None = None) -> None:
        """Put an event in the log, beside how much of the open round it covers."""
        self._marks.append(mark)
        self.log.append(chunk)

    def _hand_over(self, encode: TurnEventStream) -> None:
        """End the response after the form it just carried (`finish`, `[DONE]`): the call waits
        for the user, and the request that answers continues the stream (`_reopen`)."""
        self._emit(encode.encode_event(FinishChunk()))
        self._append(DONE_EVENT)

    def _reopen(self) -> None:
        """A new response for the rest of the turn, from `start` of the same message."""
        self._response_from = len(self.log)
        if self._encode is not None:
            start = StartChunk(message_id=self._encode.server_message_id)
            self._emit(self._encode.encode_event(start))

    def unsaved(self) -> Mark | None:
        """How much of the open round its row should hold, when that is more than it holds:
        what the client was sent (`app.agent.partial`), or all of it once the client left."""
        mark = self._delivered() if self._listening else self._sent.mark()
        return None if mark is None or mark == self._saved else mark

    def _delivered(self) -> Mark | None:
        """How much of the open round the response has handed to the server."""
        taken = self._response.delivered if self._response is not None else 0
        for position in range(taken - 1, -1, -1):
            if (mark := self._marks[position]) is not None:
                return mark
        return None

    def saved(self, mark: Mark) -> None:
        """The supervisor wrote the round's row up to `mark`."""
        self._saved = mark

    def end_stream(self) -> None:
        """End the stream: `[DONE]`, then nothing more. Called once the turn has stored its
        end and released the chat's lease, so a client that sends its next message the moment
        it reads `[DONE]` finds the chat free, never a 409 from the turn it just read."""
        if self._done is not None:
            self._append(self._done)
        self.log.end()

    def shortcut(self, event: object) -> bool:
        """Put a plain text delta into the log from the run's own task, when the transform has
        finished with every event sent down the stream before it; whether it did. Every other
        event goes on down the stream (and is noted, so nothing overtakes it).

        Why: pydantic-ai hands each event from the task that runs the agent to the one that
        reads `run_stream_events` through a zero-buffer memory stream: a checkpoint and cancel
        scopes on each side, a switch of tasks, and a resume of the reader's whole chain of
        awaits (supervisor, turn, transform, `_text_deltas`), for every token. A delta taken here
        skips all of it; one that comes while an event is still on its way (a burst read from
        the socket at once) goes the long way, behind it, so the order holds. Measured (two
        servers side by side on SQLite, bursts to each in turn, medians of 8 bursts, of 6 for
        the 100 turns): 20 turns of 500 tokens 2 ms apart cost 119 ms of server CPU a turn, 148
        without it; of 50 tokens, 24.8 against 32.5; 100 turns of 50 tokens 20 ms apart, 43.5
        against 53.4 (the same tree on both sides: 29.5 and 29.5)."""
        stream = self._encode
        if stream is not None and self._done_with is self._passed and self._put_text(stream, event):
            return True
        self._passed = event
        return False

    def _put_text(self, stream: TurnEventStream, event: object) -> bool:
        """Put `event` into the log if it is a plain text delta of the open text part; whether
        it was (`TurnEventStream.text_delta` says why such deltas skip the transform)."""
        delta = stream.text_delta(event)
        if delta is None:
            return False
        self._emit(stream.encode_text_delta(delta), self._sent.take_text(delta))
        return True

    # -- the run -----------------------------------------------------------------------------

    async def run(self) -> None:
        plan = self.plan
        bind_chat(plan.chat_id)  # this task's log lines say which chat and turn they are about
        bind_turn(plan.user_message_id)
        recorder = Recorder(
            self.services.sessions,
            plan.chat_id,
            plan.model.id,
            self.services.clock,
            plan.user_message_id,
            plan.first_round_id,
            metrics=self.services.metrics,
            alone=self.services.alone,
        )
        self.recorder = recorder
        self.asking = asking = TurnAsking(
            self.services,
            user_id=plan.user_id,
            chat_id=plan.chat_id,
            model=plan.model,
            round_id=lambda: recorder.round.message_id if recorder.round is not None else None,
            limits=plan.limits,
        )
        if plan.resume is not None:
            await recorder.adopt_pending()
        reference = current_request_id()
        context = {"request_id": reference, "chat_id": str(plan.chat_id)}
        stream = TurnEventStream(
            sdk_version=SDK_VERSION,
            server_message_id=f"turn-{plan.user_message_id}",
            user_message_id=None if plan.resume is not None else plan.user_message_id,
            usage=recorder.usage.as_dict,
            citations=lambda: self._citations(recorder),
            max_rounds=self.services.settings.max_rounds,
            reference=reference,
        )
        self._encode = stream
        ended: str | None = None
        try:
            history = await self._history_for(stream)
            await self._stream(history, recorder, stream)
            ended = await self._settle(recorder, stream, context)
        except asyncio.CancelledError:
            # The service is shutting down: keep what was said, mark the round unfinished.
            self.outcome = "interrupted"
            ended = "the service stopped mid-turn"
            await asyncio.shield(self._abort(recorder, "incomplete", ended))
            self._emit(stream.encode_event(AbortChunk(reason="the service stopped")))
            self._emit(stream.encode_event(DoneChunk()))
            raise
        except Exception as exc:  # a fault of hearth's own: stored and reported, never lost
            log.exception(
                "turn in chat %s failed (request %s)", plan.chat_id, reference, extra=context
            )
            self.outcome = "failed"
            ended = internal_error(reference)
            await self._abort(recorder, "failed", ended, last_failed=True)
            async for chunk in stream.transform_stream(_raising(exc)):
                self._emit(stream.encode_event(chunk))
        finally:
            asking.cancel_all()
            self.ended = ended

    async def _history_for(self, stream: TurnEventStream) -> _History:
        """The history, after a summary first when the last request neared the context window."""
        plan = self.plan
        history = await self._history(plan.path)
        if plan.resume is None and due(history.rows, self.services.settings, plan.model):
            stream.compaction = await self._compact()
            if stream.compaction is not None:
                history = await self._history()
        return history

    async def _stream(self, history: _History, recorder: Recorder, stream: TurnEventStream) -> None:
        """The agent run, its events encoded for the client as they come."""
        services, plan = self.services, self.plan
        settings = services.settings
        max_rounds = settings.max_rounds
        summary = history.summary
        active_groups = {group for groups in history.anchors.values() for group in groups}
        # A tool list that changes waits for the next turn.
        catalogue = await services.catalogue.pinned_once_started(active_groups)
        deps = TurnDeps(
            user_id=plan.user_id,
            chat_id=plan.chat_id,
            file_root=user_root(settings.data_dir, plan.user_id),
            storage_quota=settings.user_storage_bytes,
            catalogue=catalogue,
            active_groups=active_groups,
            evidence=history.question,
            largest_medium=settings.max_upload_bytes,
            asks=self.asking.for_call if self.asking is not None else None,
        )
        request_log = RequestLog(
            services.alone,
            user_id=plan.user_id,
            chat_id=plan.chat_id,
            model_id=plan.model.id,
            provider=plan.model.provider.id,
            clock=services.clock,
            message_id=lambda: recorder.round.message_id if recorder.round else None,
            metrics=services.metrics,
        )
        compaction = (
            [ToolReturnCompaction(plan.user_message_id, history.capsule)]
            if settings.compact_tool_returns
            else []
        )
        guard = (
            None
            if plan.limits.unlimited
            else QuotaGuard(
                services.sessions,
                services.registry,
                services.clock,
                plan.user_id,
                plan.limits,
                services.metrics,
            )
        )
        hooks = TurnHooks(
            guard=guard,
            shortcut=self.shortcut,
            recorder=recorder,
            request_log=request_log,
            preparers=[
                *compaction,
                MediaRouter(deps.file_root, plan.user_message_id),
                RequestShape(services.clock, max_rounds),
            ],
        )
        deps.capability = hooks
        agent = services.models.agent(plan.model, services.registry, turn_agent)
        async with (
            agent.run_stream_events(
                message_history=build_history(
                    history.rows, history.anchors, summary.covers_up_to_message_id if summary else 0
                ),
                instructions=[
                    instructions(catalogue),
                    *([summary_block(summary)] if summary else []),
                ],
                toolsets=[GroupToolset(services.group_call)],
                model_settings=model_settings(plan.model),
                deps=deps,
                output_type=TURN_OUTPUT,
                deferred_tool_results=plan.resume,
                usage_limits=UsageLimits(request_limit=max_rounds),
                retries={"tools": UNBOUNDED_RETRIES},
                cancellation_token=self.cancellation,
            ) as events,
            contextlib.aclosing(self._text_deltas(events, stream)) as passed,
        ):
            async for chunk in stream.transform_stream(passed):
                self._emit(stream.encode_event(chunk), self._sent.take(chunk))
                if _asks_the_user(chunk):
                    self._hand_over(stream)

    async def _text_deltas(
        self, events: AsyncIterable[Any], stream: TurnEventStream
    ) -> AsyncGenerator[Any]:
        """The run's events on their way to the transform, less the plain text deltas, which
        go into the log here (`TurnEventStream.text_delta` says why). The transform asks for
        an event only once the chunks of the one before are out, so the order holds; that is
        when `_done_with` names the one before, which `shortcut` looks at."""
        async for event in events:
            if not self._put_text(stream, event):
                yield event
            self._done_with = event

    async def _settle(
        self, recorder: Recorder, stream: TurnEventStream, context: dict[str, Any]
    ) -> str | None:
        """Store how a run that returned ended: interrupted (it lost its chat), stopped, or
        failed (what the user is told)."""
        if self.lease_lost:
            self.outcome = "interrupted"
            await recorder.interrupt()
            return INTERRUPTED_ROUND
        if stream.cancelled is not None or self.stop_requested:
            self.outcome = "stopped"
            await recorder.abort("cancelled", None)
            return None
        error = stream.error
        if error is None:
            return None
        internal = is_internal(error)
        log.log(
            logging.ERROR if internal else logging.WARNING,
            "turn in chat %s ended by an error (request %s): %s",
            self.plan.chat_id,
            context["request_id"],
            error,
            exc_info=error if internal else None,
            extra=context,
        )
        status = self.outcome = end_status(error, recorder.streamed_in_open_round)
        told = user_facing_error(error, stream.max_rounds, context["request_id"])
        await recorder.abort(status, told, last_failed=internal)
        return told

    async def _abort(
        self, recorder: Recorder, status: str, error: str, *, last_failed: bool = False
    ) -> None:
        """`recorder.abort`, which may fail too (the database may be what failed)."""
        try:
            await recorder.abort(status, error, last_failed=last_failed)
        except Exception:
            self.end_stored = False
            log.exception("closing the turn in chat %s failed", self.plan.chat_id)

    def leftovers(self) -> tuple[tuple[Update, ...], dict[str, Any]]:
        """The statements that fail what the turn left open (`Recorder.leftovers`), to run
        with the one that releases its chat, and their values."""
        if self.recorder is None:
            return (), {}
        return self.recorder.leftovers(self.ended, holds_chat=not self.lease_lost)

    async def _citations(self, recorder: Recorder) -> tuple[int, list[EvidenceRow]] | None:
        """The question's cited passages and its latest message, once a round of it is stored."""
        if not recorder.message_ids or not (recorder.cited or self.plan.resume is not None):
            return None

        async def read(db: AsyncSession) -> list[EvidenceRow]:
            return await evidence.load_rows(
                db, self.plan.chat_id, question=self.plan.user_message_id
            )

        rows = await transaction(self.services.alone, read, what="reading citations")
        passages = evidence.cited(rows)
        return (recorder.message_ids[-1], passages) if passages else None

    async def _history(self, path: Path | None = None) -> _History:
        """What the run is built from, read in one session that only reads: the chat's rows
        (less the round the chat service opened for this turn), its activations, latest summary
        and evidence, each only when the path has any (`app.agent.rows.Beside`).

        A send hands over the `path` it read on its own connection; a turn given one that has
        nothing else hanging off it reads nothing, and starts its run a pooled connection, a
        session and a round trip sooner (`bench/turn_overhead.py` a)."""
        services, plan = self.services, self.plan
        budget = services.settings.search_budget
        compact = services.settings.compact_tool_returns

        def history(
            rows: list[StoredMessage],
            anchors: dict[int, list[str]] | None = None,
            summary: StoredSummary | None = None,
            question: evidence.QuestionEvidence | None = None,
            capsule: str | None = None,
        ) -> _History:
            if plan.first_round_id is not None:
                rows = [row for row in rows if row.id != plan.first_round_id]
            if question is None:  # a new question
                question = evidence.QuestionEvidence(plan.user_message_id, budget)
            return _History(rows, anchors or {}, summary, question, capsule)

        if path is not None and plan.resume is None:
            rows, beside = path
            if not (beside.activations or beside.summaries or (compact and beside.evidence)):
                return history(rows)

        async def read(db: AsyncSession) -> _History:
            rows, beside = path if path is not None else await load_path(db, plan.chat_id)
            anchors = await load_anchors(db, plan.chat_id) if beside.activations else {}
            summary = await latest_summary(db, plan.chat_id) if beside.summaries else None
            capsule = (
                await evidence.earlier_capsule(db, plan.chat_id, plan.user_message_id)
                if compact and beside.evidence
                else None
            )
            question = (
                await evidence.load_question(db, plan.chat_id, plan.user_message_id, budget)
                if plan.resume is not None
                else None
            )
            return history(rows, anchors, summary, question, capsule)

        return await transaction(services.alone, read, what="reading the chat")

    async def _compact(self) -> dict[str, Any] | None:
        """A summary before the turn, since the last request neared the context window.

        A summary that fails leaves the chat as it was; the turn goes on uncompacted."""
        services, plan = self.services, self.plan
        try:
            made = await summarise(services, plan.user_id, plan.chat_id, plan.model)
        except (NothingToCover, SummaryFailed):
            return None
        return {"summary_id": made.id, "covers_up_to_message_id": made.covers_up_to_message_id}


@dataclass(frozen=True, slots=True)
class _History:
    rows: list[StoredMessage]
    anchors: dict[int, list[str]]
    summary: StoredSummary | None
    question: evidence.QuestionEvidence
    capsule: str | None
    """The earlier questions' cited evidence (None when there is none or returns stay whole)."""


def _asks_the_user(chunk: BaseChunk) -> bool:
    """A form, or a new sign-in: the response ends there, and the user's answer goes on."""
    return isinstance(chunk, DataChunk) and chunk.type in ("data-elicitation", "data-authorization")


async def _raising(error: Exception) -> AsyncIterator[Any]:
    raise error
    yield  # an async generator that fails at its first step
