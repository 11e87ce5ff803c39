"""Summaries: when a chat nears its model's context window, its older messages are summarised
and the model gets the summary instead of them.

- When: at the start of a turn, when the previous request's input (input + cache read + cache
  write tokens) reached the threshold share of the model's `context_window` (the model's own
  `compact_threshold`, else `HEARTH_COMPACT_THRESHOLD`), or when a user asks
  (`POST /api/chats/{id}/compact`).
- What: everything since the previous summary except the most recent `HEARTH_COMPACT_KEEP`
  stored messages, the cut moved back so the kept part starts at a user message (a round is
  never split). The summary request is a separate request to the chat's model (or
  `HEARTH_SUMMARY_MODEL`) with no tools; the previous summary goes along as context, so each
  summary covers the whole chat up to its cut.
- After: one `chat_summaries` row, and nothing else changes: covered messages stay stored and
  listed, and activations anchored at covered messages stay where they are (the builder renders
  them at the summary, docs/wire.md §2). A summary request that fails leaves the chat exactly
  as it was; its `SummaryFailed` carries the provider's answer, or for a fault of hearth's own
  a plain sentence with the request id (the full text goes to the log).
- Over branches: everything is read along the active path. A summary covers the path from the
  root to its `covers_up_to_message_id` and is in force on every path through that message; of
  the summaries in force on a path, the one that covers the furthest wins (the newest, when two
  cover up to the same message), so a summary made on another branch that forks later, or that
  covers less, never replaces the one a path already uses.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent.capabilities.request_log import describe_error
from app.agent.history import build_history
from app.agent.rows import StoredMessage, load_rows
from app.agent.runtime import TurnRuntime
from app.agent.stored_text import storable_text
from app.agent.stream import provider_error
from app.core.db.base import Base
from app.core.db.retry import insert_once
from app.core.http.request_id import current_request_id
from app.llm.factory import model_settings
from app.llm.registry import ModelInfo
from app.llm.usage import count as count_usage
from app.models import ChatSummary, LlmRequest
from app.models.paths import BOUND_PATH, on_path
from app.observability.metrics import report_model_request
from app.settings import Settings

log = logging.getLogger("hearth.summaries")

SUMMARY_PREFIX = "Summary of the earlier conversation"
SUMMARY_INSTRUCTIONS = (
    "You write the summary of a conversation between a user and an assistant, for the assistant "
    "to continue it without the messages themselves. Keep every fact, decision, open question, "
    "file path, name and number the conversation relies on, what tools were used for and what "
    "they found. Write plain prose and short lists; no preamble."
)
SUMMARY_REQUEST = (
    "Summarise the conversation above, including the earlier summary if there is one, so that "
    "it can be continued from your summary alone."
)


class NothingToCover(Exception):
    """The chat has no more messages than the kept window (after its last summary)."""


class SummaryFailed(Exception):
    """The summary request failed; the chat is as it was."""


@dataclass(frozen=True, slots=True)
class StoredSummary:
    id: int
    covers_up_to_message_id: int
    content: str


def summary_block(summary: StoredSummary) -> str:
    """The system block that stands for the covered messages, after the static block."""
    return f"{SUMMARY_PREFIX} (what came before the messages that follow):\n\n{summary.content}"


_LATEST = (
    select(ChatSummary.id, ChatSummary.covers_up_to_message_id, ChatSummary.content)
    .where(ChatSummary.covers_up_to_message_id.in_(on_path(BOUND_PATH)))
    .order_by(ChatSummary.covers_up_to_message_id.desc(), ChatSummary.id.desc())
    .limit(1)
)
"""Built once: every turn reads it (`app.chats.repository` says why)."""


async def latest_summary(db: AsyncSession, chat_id: uuid.UUID) -> StoredSummary | None:
    """The summary in force on the chat's active path, if any."""
    row = (await db.execute(_LATEST, {"chat_id": chat_id})).first()
    return StoredSummary(*row) if row else None


def plan_cut(rows: Sequence[StoredMessage], keep: int, covered_up_to: int) -> int | None:
    """The id of the last message a new summary covers, or None when there is nothing to cover."""
    open_rows = [row for row in rows if row.id > covered_up_to]
    first_kept = len(open_rows) - keep
    while first_kept > 0 and open_rows[first_kept].role != "user":
        first_kept -= 1
    if first_kept <= 0:
        return None
    return open_rows[first_kept - 1].id


def previous_input_tokens(rows: Sequence[StoredMessage]) -> int:
    """What the chat's last request cost as input: input + cache read + cache write tokens."""
    return next(
        (
            row.request_tokens
            for row in reversed(rows)
            if row.role == "assistant" and row.request_tokens is not None
        ),
        0,
    )


def threshold(settings: Settings, model: ModelInfo) -> float:
    return model.config.compact_threshold or settings.compact_threshold


def due(rows: Sequence[StoredMessage], settings: Settings, model: ModelInfo) -> bool:
    """Whether the chat's last request neared the model's context window, so that the next
    turn starts with a summary. Read off the rows the turn loads anyway: no query of its own."""
    used = previous_input_tokens(rows)
    return used >= threshold(settings, model) * model.config.context_window


def summariser(services: TurnRuntime, chat_model: ModelInfo) -> ModelInfo:
    configured = services.settings.summary_model
    if configured:
        model = services.registry.get(configured)
        if model is not None and services.registry.is_available(model):
            return model
    return chat_model


async def summarise(
    services: TurnRuntime, user_id: uuid.UUID, chat_id: uuid.UUID, chat_model: ModelInfo
) -> ChatSummary:
    """Write a summary of the chat's older messages; NothingToCover or SummaryFailed otherwise.

    A round still streaming (the one a turn that summarises first has opened) is no part of
    what is kept or covered."""
    async with services.sessions() as db:
        rows = [row for row in await load_rows(db, chat_id) if row.status != "streaming"]
        previous = await latest_summary(db, chat_id)
    covered_up_to = previous.covers_up_to_message_id if previous else 0
    cut = plan_cut(rows, services.settings.compact_keep, covered_up_to)
    if cut is None:
        raise NothingToCover
    covered = [row for row in rows if covered_up_to < row.id <= cut]
    model = summariser(services, chat_model)
    instructions = [SUMMARY_INSTRUCTIONS]
    if previous is not None:
        instructions.append(summary_block(previous))
    agent: Agent[None, str] = Agent(services.models.get(model, services.registry))
    started_at, started = services.clock.now(), services.clock.monotonic()

    def logged(usage: Any, error: BaseException | None) -> dict[str, Any]:
        """The summary request's row in the request log (it counts as the user's usage),
        counted in the metrics once, whatever retries its insert takes."""
        values: dict[str, Any] = {
            "user_id": user_id,
            "chat_id": chat_id,
            "model": model.id,
            "provider": model.provider.id,
            "purpose": "summary",
            "started_at": started_at,
            "duration_ms": round((services.clock.monotonic() - started) * 1000),
            "error": describe_error(error) if error is not None else None,
            "input_tokens": (usage.input_tokens or 0) if usage else None,
            "output_tokens": (usage.output_tokens or 0) if usage else None,
            "cache_read_tokens": (usage.cache_read_tokens or 0) if usage else None,
            "cache_write_tokens": (usage.cache_write_tokens or 0) if usage else None,
        }
        report_model_request(services.metrics, values)
        return values

    try:
        result = await agent.run(
            SUMMARY_REQUEST,
            message_history=build_history(covered),
            instructions=instructions,
            model_settings=model_settings(model),
        )
    except Exception as exc:  # any fault: the chat stays as it was
        reference = current_request_id()
        told = provider_error(exc)
        log.warning(
            "summary of chat %s failed (request %s): %s",
            chat_id,
            reference,
            exc,
            exc_info=exc if told is None else None,
            extra={"request_id": reference, "chat_id": str(chat_id)},
        )
        where = f" (request {reference})" if reference else ""
        failed = logged(None, exc)
        with contextlib.suppress(Exception):
            await insert_once(
                services.sessions,
                lambda: [LlmRequest(**failed)],
                what="logging a summary request",
                then=count_usage,
            )
        raise SummaryFailed(told or f"an internal error{where}") from exc
    usage: Any = result.usage
    request = logged(usage, None)

    def stored() -> list[Base]:
        return [
            ChatSummary(
                chat_id=chat_id,
                covers_up_to_message_id=cut,
                content=storable_text(result.output.strip()),
                model=model.id,
                input_tokens=usage.input_tokens or 0,
                output_tokens=usage.output_tokens or 0,
                created_at=services.clock.now(),
            ),
            LlmRequest(**request),
        ]

    [summary, _] = await insert_once(
        services.sessions, stored, what="storing a summary", then=count_usage
    )
    assert isinstance(summary, ChatSummary)
    return summary
