"""What a user does with a chat, between the routes and storage: one function per action.

Routes parse a request, call one of these and render what it returns; everything a user can be
refused is a `HearthError` raised here (docs/http-api.md, "Errors and conventions"). Starting a
turn is one sequence wherever it happens (a new message, a regenerated answer, the last approval
of a paused turn, a summary on request): take the chat's turn lease, close what a dead turn left
open (`_take_lease`), store what the turn starts from, and hand the lease to the turn supervisor.

A chat is a tree of messages and the user is on one branch of it, the active path (API.md
"Branches"). Sending continues it, or hangs the new message under any message that ends a
finished turn (an edit is a send under the edited message's parent); regenerating hangs a new
first round under a user message; switching moves the active leaf. Each keeps the active leaf
in the same transaction as the rows it adds, and none of them runs while a turn holds the chat
or waits for approvals, so the path a turn reads cannot change under it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from sqlalchemy import exists, func, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import aliased

from app.agent import approvals, leases, quotas
from app.agent.activations import list_activations, reset_activations
from app.agent.capabilities.recorder import round_row
from app.agent.quotas import Limits
from app.agent.rows import Path, load_path
from app.agent.summaries import NothingToCover, SummaryFailed, summarise
from app.agent.turn import Turn, TurnPlan
from app.chats import repository
from app.chats.views import ChatDetailView
from app.core.db.engine import rows_changed, session_on, statements_alone
from app.core.errors import Conflict, Invalid, NotFound, UpstreamFailed
from app.llm.registry import ModelInfo
from app.models import Chat, ChatLlmTool, ChatSummary, Message, Upload
from app.models.paths import active_path, newest_leaf_under, on_path
from app.services import Services
from app.tools.asks import ElicitAction, Elicited
from app.tools.mcp.forms import BadAnswer, checked_answer

TITLE_LENGTH = 80
CHAT_NOT_FOUND = "chat not found"
WAITS_FOR_APPROVALS = "the turn waits for approvals: answer them, or stop the turn"
TURN_RUNNING = "a turn is already running in this chat"
MESSAGE_NOT_FOUND = "message not found in this chat"

ACTIVE: Final = "active"
"""Where a message goes when the client names no parent: after the active leaf."""
Parent = int | None | Literal["active"]


@dataclass(frozen=True, slots=True)
class Decision:
    tool_call_id: str
    approved: bool
    note: str | None


def usable_model(services: Services, model_id: str | None) -> ModelInfo:
    """The model a chat or turn may use, or a 422 on `body.model` that says why not."""
    registry = services.registry
    if model_id is None:
        default = registry.default_model()
        if default is None:
            raise Invalid(("body", "model"), "no model is available; configure a provider")
        return default
    model = registry.get(model_id)
    if model is None:
        raise Invalid(("body", "model"), f"unknown model {model_id!r}; see GET /api/models")
    if not registry.is_available(model):
        reason = (
            f"set {model.provider.api_key_env}"
            if model.provider.api_key_env and registry.api_key(model.provider) is None
            else "its server does not answer"
        )
        raise Invalid(("body", "model"), f"model {model_id!r} is not available ({reason})")
    return model


async def owned_chat(db: AsyncSession, user_id: uuid.UUID, chat_id: uuid.UUID) -> Chat:
    chat = await repository.get_chat(db, user_id, chat_id)
    if chat is None:
        raise NotFound(CHAT_NOT_FOUND)
    return chat


def title_from(content: str) -> str | None:
    """A new chat's title: the first line of its first message."""
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    return first[:TITLE_LENGTH] or None


# -- chats -----------------------------------------------------------------------------------


async def create_chat(
    services: Services, db: AsyncSession, user_id: uuid.UUID, title: str | None, model: str | None
) -> Chat:
    now = services.clock.now()
    chat = Chat(
        user_id=user_id,
        title=title,
        model=usable_model(services, model).id,
        created_at=now,
        updated_at=now,
    )
    db.add(chat)
    await db.commit()
    return chat


async def chat_detail(
    services: Services, connection: AsyncConnection, user_id: uuid.UUID, chat_id: uuid.UUID
) -> ChatDetailView:
    detail = await repository.chat_detail(connection, user_id, chat_id, services.clock.now())
    if detail is None:
        raise NotFound(CHAT_NOT_FOUND)
    return detail


async def update_chat(
    services: Services,
    db: AsyncSession,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    changes: dict[str, Any],
) -> Chat:
    """Rename a chat or switch its model; `changes` holds only the fields the client sent."""
    chat = await owned_chat(db, user_id, chat_id)
    if "model" in changes:
        if changes["model"] is None:
            raise Invalid(("body", "model"), "model cannot be null")
        chat.model = usable_model(services, changes["model"]).id
    if "title" in changes:
        chat.title = changes["title"]
    if changes:
        repository.touch(chat, services.clock.now())
    await db.commit()
    return chat


async def delete_chat(
    services: Services, db: AsyncSession, user_id: uuid.UUID, chat_id: uuid.UUID
) -> None:
    """Delete a chat with everything in it; a running turn is stopped and waited for first."""
    await owned_chat(db, user_id, chat_id)
    await services.turns.stop_and_wait(chat_id, user_id)
    if not await repository.delete_chat(db, user_id, chat_id):
        raise NotFound(CHAT_NOT_FOUND)
    await db.commit()


# -- turns -----------------------------------------------------------------------------------


async def _take_lease(
    services: Services,
    db: AsyncSession,
    chat: Chat,
    now: datetime,
    *,
    for_message: bool = False,
    title: str | None = None,
) -> str | None:
    """Take the chat's turn lease for a new owner, or None when a live turn holds it.

    A lease taken over from a turn whose process died closes what that turn left open.
    """
    owner = services.turns.new_owner()
    previous_owner = chat.turn_owner
    taken = await leases.acquire(
        db,
        chat.id,
        chat.user_id,
        owner,
        now,
        services.turns.lease,
        for_message=for_message,
        title=title,
    )
    if not taken:
        return None
    if previous_owner is not None:
        await leases.settle(db, chat.id, now, pending=False)
    return owner


async def _refuse_busy(db: AsyncSession, chat_id: uuid.UUID) -> Conflict:
    if await approvals.has_pending(db, chat_id):
        return Conflict(WAITS_FOR_APPROVALS)
    return Conflict(TURN_RUNNING)


async def _parent(db: AsyncSession, chat: Chat, parent: Parent) -> int | None:
    """The message a new user message hangs under: 404 outside the chat, 422 for a message
    that does not end its turn (a round followed by another round of the same turn)."""
    if parent == ACTIVE:
        return chat.active_leaf_id
    if parent is None:
        return None
    child = aliased(Message)
    followed = exists().where(child.parent_id == Message.id, child.role == "assistant")
    found = (
        await db.execute(
            select(Message.id, followed).where(Message.id == parent, Message.chat_id == chat.id)
        )
    ).first()
    if found is None:
        raise NotFound(MESSAGE_NOT_FOUND)
    if found[1]:
        raise Invalid(
            ("body", "parent_id"),
            "a new message goes under the last message of a finished turn; "
            f"message {parent} is followed by another round of its turn",
        )
    return parent


async def _root_content(db: AsyncSession, chat_id: uuid.UUID) -> str | None:
    """The first message of the chat's active path."""
    return await db.scalar(
        select(Message.content).where(
            Message.id.in_(on_path(active_path(chat_id))), Message.parent_id.is_(None)
        )
    )


def _follow_root(chat: Chat, old_root: str | None, new_root: str | None) -> None:
    """A title made from the first message follows it to another root; one the user gave
    (or that differs from the old root's first line) stays."""
    if new_root is None or old_root is None or chat.title != title_from(old_root):
        return
    chat.title = title_from(new_root)


async def send_message(
    services: Services,
    connection: AsyncConnection,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    content: str,
    attachments: Sequence[uuid.UUID],
    model_id: str | None,
    parent: Parent = ACTIVE,
    *,
    quota: Mapping[str, Any] | None,
) -> Turn:
    """Store the user's message under `parent` and start the turn that answers it; `quota` is
    the user's own (null: the defaults apply). `connection` is the request's, its statements
    committing alone (`app.api.deps`).

    The common send (after the active leaf, text only, a usable model, no quota to read) is one
    statement on PostgreSQL (`repository.send_at_once`) and four Core statements on SQLite
    (`repository.send_in_steps`), each handing the turn its path; everything else, and every
    send they cannot claim the chat for, goes the long way in a transaction, which also says
    why a send is refused."""
    now = services.clock.now()
    limits = quotas.limits_for(services.settings, quota)
    owner = services.turns.new_owner()
    claim = leases.claim_values(
        chat_id, user_id, owner, now, services.turns.lease, title=title_from(content)
    )
    if (
        parent == ACTIVE
        and not attachments
        and content.strip()
        and limits.unlimited
        and (model_id is None or _usable(services, model_id))
    ):
        usable = services.registry.available()
        send = (
            repository.send_at_once
            if connection.dialect.name == "postgresql"
            else repository.send_in_steps
        )
        sent = await send(
            connection, claim, content=content, model_id=model_id, usable=list(usable)
        )
        if sent is not None:
            model = usable[sent.model]
            fast: _Plan = (chat_id, user_id, owner, sent.question_id, sent.round_id, model, limits)
            return _launch(services, *fast, path=sent.path)
    async with session_on(connection) as db:
        plan = await _send(services, db, claim, content, attachments, model_id, parent, limits, now)
    return _launch(services, *plan, path=await _path_after_send(connection, chat_id))


async def _path_after_send(connection: AsyncConnection, chat_id: uuid.UUID) -> Path | None:
    """The path a send extends, read once the send is committed, for its turn; None where the
    turn reads it itself.

    On SQLite the read stays the turn's. Made by the request, it cost the server 36.5-37.7 ms of
    CPU per turn at N = 100 against 32.6-33.9 ms without it, measured in alternation
    (`bench/turn_overhead.py` b), for 0.3-0.5 ms less to the first text (a). The request then
    holds its pooled connection longer, and SQLite's pool opens a connection, with a thread of
    its own, for each one it lacks (PostgreSQL's keeps 30: `app.core.db.engine`)."""
    if connection.dialect.name != "postgresql":
        return None
    await statements_alone(connection)
    try:
        return await load_path(connection, chat_id)
    except DBAPIError:  # the send is stored: the turn reads the path and answers for it
        return None


_Plan = tuple[uuid.UUID, uuid.UUID, str, int, int, ModelInfo, Limits]
"""`_launch`'s arguments: the chat, its user, the lease's owner, the message, the first round,
the model and the user's limits."""


def _usable(services: Services, model_id: str) -> bool:
    try:
        usable_model(services, model_id)
    except Invalid:
        return False
    return True


async def _send(
    services: Services,
    db: AsyncSession,
    claim: dict[str, Any],
    content: str,
    attachments: Sequence[uuid.UUID],
    model_id: str | None,
    parent: Parent,
    limits: Limits,
    now: datetime,
) -> _Plan:
    """`send_message` the long way: claim the chat with `claim` (`leases.claim_values`), or read
    it and take its lease after what a dead turn left, check every part of the send, store it,
    commit; what `_launch` takes."""
    user_id, chat_id, owner = claim["of_user"], claim["chat_id"], claim["owner"]
    chat = await leases.claim_for_message(db, claim)
    claimed = chat is not None
    if chat is None:  # not the user's, held, or left by a dead turn: the long way
        chat = await owned_chat(db, user_id, chat_id)
    # What is refused below rolls the claim back with the transaction.
    if not content.strip() and not attachments:
        raise Invalid(("body", "content"), "a message needs content or an attachment")
    model = usable_model(services, model_id or chat.model)
    parent_id = await _parent(db, chat, parent)
    old_root = (
        await _root_content(db, chat_id)
        if parent is None and chat.active_leaf_id is not None
        else None
    )
    attached = list(dict.fromkeys(attachments))
    if attached:
        owned = await db.scalar(
            select(func.count())
            .select_from(Upload)
            .where(Upload.user_id == user_id, Upload.id.in_(attached))
        )
        if owned != len(attached):
            raise NotFound("upload not found")
    await quotas.refuse_if_exceeded(db, services.registry, user_id, limits, now, services.metrics)
    if not claimed:
        title = title_from(content) if chat.title is None else None
        taken = await _take_lease(services, db, chat, now, for_message=True, title=title)
        if taken is None:
            raise await _refuse_busy(db, chat_id)
        owner = taken
    _follow_root(chat, old_root, content)
    question_id, first_round_id = await repository.add_question(
        db,
        chat,
        parent_id=parent_id,
        content=content,
        meta={"attachments": [str(a) for a in attached]} if attached else {},
        model_id=model.id,
        now=now,
    )
    await db.commit()
    return chat.id, chat.user_id, owner, question_id, first_round_id, model, limits


async def _within_quota(
    services: Services,
    db: AsyncSession,
    user_id: uuid.UUID,
    quota: Mapping[str, Any] | None,
    now: datetime,
) -> Limits:
    """The user's limits, once they are known not to be used up (429 otherwise)."""
    limits = quotas.limits_for(services.settings, quota)
    await quotas.refuse_if_exceeded(db, services.registry, user_id, limits, now, services.metrics)
    return limits


async def _start_answer(
    services: Services,
    db: AsyncSession,
    chat: Chat,
    owner: str,
    question_id: int,
    model: ModelInfo,
    limits: Limits,
) -> Turn:
    """Store the first round of the answer to `question_id` (the turn then starts without a
    write of its own), make it the active leaf, and launch the turn; the caller holds the lease."""
    first_round = round_row(chat.id, model.id, services.clock.now(), question_id, question_id)
    db.add(first_round)
    await db.flush()
    chat.active_leaf_id = first_round.id
    await db.commit()
    plan = (chat.id, chat.user_id, owner, question_id, first_round.id, model, limits)
    return _launch(services, *plan)


def _launch(
    services: Services,
    chat_id: uuid.UUID,
    user_id: uuid.UUID,
    owner: str,
    question_id: int,
    first_round_id: int,
    model: ModelInfo,
    limits: Limits,
    *,
    path: Path | None = None,
) -> Turn:
    """Launch the turn that answers `question_id`, its first round stored and committed; the
    chat's active `path`, when the caller read it."""
    plan = TurnPlan(
        owner=owner,
        user_id=user_id,
        chat_id=chat_id,
        user_message_id=question_id,
        model=model,
        first_round_id=first_round_id,
        limits=limits,
        path=path,
    )
    return services.turns.launch(plan)


async def regenerate(
    services: Services,
    db: AsyncSession,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    message_id: int,
    model_id: str | None,
    *,
    quota: Mapping[str, Any] | None,
) -> Turn:
    """A new answer to the user message `message_id`, beside the old one (its sibling)."""
    chat = await owned_chat(db, user_id, chat_id)
    is_question = await db.scalar(
        select(
            exists().where(
                Message.id == message_id, Message.chat_id == chat_id, Message.role == "user"
            )
        )
    )
    if not is_question:
        raise NotFound(f"no user message {message_id} in this chat")
    model = usable_model(services, model_id or chat.model)
    now = services.clock.now()
    limits = await _within_quota(services, db, user_id, quota, now)
    owner = await _take_lease(services, db, chat, now, for_message=True)
    if owner is None:
        raise await _refuse_busy(db, chat_id)
    return await _start_answer(services, db, chat, owner, message_id, model, limits)


async def switch_branch(
    services: Services,
    db: AsyncSession,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    message_id: int,
) -> None:
    """Show the branch through `message_id`: its newest leaf becomes the active leaf.

    One conditional UPDATE, like taking the lease: it does nothing while a turn holds the chat
    or waits for approvals, so no turn ever sees its path move."""
    chat = await owned_chat(db, user_id, chat_id)
    in_chat = await db.scalar(
        select(exists().where(Message.id == message_id, Message.chat_id == chat_id))
    )
    if not in_chat:
        raise NotFound(MESSAGE_NOT_FOUND)
    old_root = await _root_content(db, chat_id)
    leaf = await db.scalar(newest_leaf_under(message_id))
    now = services.clock.now()
    pending = exists().where(ChatLlmTool.chat_id == chat_id, ChatLlmTool.status == "pending")
    # The leaf is read first: an UPDATE that starts with its CTE (`WITH ... UPDATE`) tells no
    # row count through Python's sqlite3.
    switched = await rows_changed(
        db,
        update(Chat)
        .where(Chat.id == chat_id, Chat.user_id == user_id, leases.free(now), ~pending)
        .values(active_leaf_id=leaf)
        .execution_options(synchronize_session=False),
    )
    if not switched:
        raise await _refuse_busy(db, chat_id)
    await db.refresh(chat)
    _follow_root(chat, old_root, await _root_content(db, chat_id))
    await db.commit()


async def answer_approvals(
    services: Services,
    db: AsyncSession,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    decisions: Sequence[Decision],
    *,
    quota: Mapping[str, Any] | None,
) -> Turn | list[str]:
    """Store the decisions; the request that answers the last pending call resumes the turn.

    Returns the resumed turn, or the tool call ids that still wait (none when another request
    answering at the same moment resumed it).
    """
    chat = await owned_chat(db, user_id, chat_id)
    ids = [d.tool_call_id for d in decisions]
    if len(set(ids)) != len(ids):
        raise Invalid(("body", "decisions"), "each tool_call_id may appear once")
    pending = {call.tool_call_id: call for call in await approvals.pending_calls(db, chat_id)}
    unknown = [i for i in ids if i not in pending]
    if unknown:
        raise NotFound(f"no pending tool call {unknown[0]!r} in this chat")
    now = services.clock.now()
    limits = await _within_quota(services, db, user_id, quota, now)
    for decision in decisions:
        row = pending[decision.tool_call_id].row_id
        await approvals.record_decision(db, row, decision.approved, decision.note, now)
    await db.commit()

    calls = await approvals.pending_calls(db, chat_id)
    waiting = [call.tool_call_id for call in calls if call.decision is None]
    if waiting or not calls:
        return waiting
    round_model = await db.get(Message, calls[0].message_id)
    model = usable_model(services, round_model.model if round_model else chat.model)
    owner = await _take_lease(services, db, chat, now)
    if owner is None:
        await db.rollback()
        return []
    # Read again holding the lease: every decision, whichever request stored it.
    calls = await approvals.pending_calls(db, chat_id)
    question = await approvals.question_of(db, chat_id, calls[0].message_id)
    await db.commit()
    plan = TurnPlan(
        owner=owner,
        user_id=user_id,
        chat_id=chat_id,
        user_message_id=question,
        model=model,
        resume=approvals.deferred_results(calls),
        limits=limits,
    )
    return services.turns.launch(plan)


async def answer_elicitation(
    services: Services,
    db: AsyncSession,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    elicitation_id: str,
    action: ElicitAction,
    content: dict[str, Any] | None,
) -> Turn | Elicited:
    """Answer a form a call's MCP server asked for: stored on the call's row, then the call wakes.

    Returns the turn when it runs in this process (its response carries the rest of the turn),
    or the stored answer when another worker runs it (that worker reads it from the row).
    """
    await owned_chat(db, user_id, chat_id)
    rows = await db.execute(
        select(ChatLlmTool.id, ChatLlmTool.elicitation)
        .where(
            ChatLlmTool.chat_id == chat_id,
            ChatLlmTool.status == "running",
            ChatLlmTool.elicitation.is_not(None),
        )
        .with_for_update()  # two answers at once: the second sees the first
    )
    found = next(
        (
            (row_id, asked)
            for row_id, asked in rows
            if isinstance(asked, dict) and asked.get("id") == elicitation_id
        ),
        None,
    )
    if found is None:
        raise NotFound(f"no elicitation {elicitation_id!r} waits in this chat")
    row_id, asked = found
    if asked.get("mode") == "url":
        raise Conflict("this one is answered by signing in at its URL, not here")
    if asked.get("action"):
        raise Conflict(f"the elicitation was answered already ({asked['action']})")
    if action != "accept" and content is not None:
        raise Invalid(("body", "content"), "content goes with 'accept' only")
    if action == "accept":
        try:
            content = checked_answer(asked.get("requested_schema") or {}, content)
        except BadAnswer as exc:
            raise Invalid(("body", "content"), str(exc)) from None
    answer = Elicited(action, content)
    await db.execute(
        update(ChatLlmTool)
        .where(ChatLlmTool.id == row_id)
        .values(elicitation={**asked, "action": action, "content": content})
    )
    await db.commit()
    turn = services.turns.local_turn(chat_id)
    if turn is not None and turn.answer_elicitation(elicitation_id, answer):
        return turn
    return answer


async def stop_turn(
    services: Services, db: AsyncSession, user_id: uuid.UUID, chat_id: uuid.UUID
) -> Literal["stopping", "stopped"]:
    """Stop the chat's running turn (`stopping`), or end a turn paused for approvals (`stopped`)."""
    await owned_chat(db, user_id, chat_id)
    if await services.turns.stop(chat_id, user_id):
        return "stopping"
    if await approvals.cancel_pending(db, chat_id, services.clock.now()):
        await db.commit()
        return "stopped"
    raise Conflict("no turn is running in this chat")


async def compact(
    services: Services,
    db: AsyncSession,
    user_id: uuid.UUID,
    chat_id: uuid.UUID,
    *,
    quota: Mapping[str, Any] | None,
) -> ChatSummary:
    """Summarise the chat's older messages now, holding its turn lease while the summary runs."""
    chat = await owned_chat(db, user_id, chat_id)
    model = usable_model(services, chat.model)
    if await approvals.has_pending(db, chat_id):
        raise Conflict(WAITS_FOR_APPROVALS)
    await _within_quota(services, db, user_id, quota, services.clock.now())
    owner = await _take_lease(services, db, chat, services.clock.now())
    if owner is None:
        raise Conflict("a turn is running in this chat")
    await db.commit()
    try:
        async with services.turns.holding(owner):
            return await summarise(services, user_id, chat_id, model)
    except NothingToCover:
        raise Invalid(
            ("path", "chat_id"), "nothing to summarise: the chat is within the kept window"
        ) from None
    except SummaryFailed as exc:
        raise UpstreamFailed(f"the summary request failed: {exc}") from None
    finally:
        await leases.release(db, chat_id, owner, services.clock.now())
        await db.commit()


# -- activations -----------------------------------------------------------------------------


async def activations(
    db: AsyncSession, user_id: uuid.UUID, chat_id: uuid.UUID
) -> list[dict[str, Any]]:
    await owned_chat(db, user_id, chat_id)
    return await list_activations(db, chat_id)


async def reset_chat_activations(
    services: Services, db: AsyncSession, user_id: uuid.UUID, chat_id: uuid.UUID
) -> None:
    """Later turns start with no group active (a deliberate cache reset); 409 while one runs."""
    chat = await owned_chat(db, user_id, chat_id)
    now = services.clock.now()
    if chat.turn_owner is not None and chat.turn_lease_until and chat.turn_lease_until >= now:
        raise Conflict("a turn is running in this chat; stop it or wait for its end")
    await reset_activations(db, chat_id)
    await db.commit()
