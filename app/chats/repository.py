"""Chat queries, each scoped to its user inside the query itself.

"Chat X of user U" is one WHERE clause, never "chat X" followed by a comparison, so a route
can't leak another user's chat by forgetting a check. Reads for the API select plain columns
rather than ORM entities: a chat of hundreds of messages is a handful of queries and no
identity-map work. A chat is read along its active path (`app.models.paths`): the same fixed
number of statements for a chat of any length and any number of branches.

The statements a request or a turn runs every time are built once, at import, with bound
parameters, here and in the turn's modules: building a statement with its path CTE and deriving
its cache key cost more CPU than running it (an activations read: 1.23 ms an execution built
each time against 0.54 ms built once on SQLite, 0.90 against 0.25 ms on PostgreSQL).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    Connection,
    Select,
    Sequence,
    String,
    Update,
    and_,
    any_,
    bindparam,
    delete,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.sql.dml import ReturningInsert

from app.agent import leases
from app.agent.capabilities.recorder import round_row
from app.agent.rows import Path, StoredMessage, load_path, probed, stored_path
from app.chats import views
from app.core.db.engine import one_snapshot, rows_changed
from app.core.db.sqlite_trips import in_one_trip
from app.knowledge import evidence
from app.models import Chat, ChatLlmTool, ChatSummary, Message, Upload
from app.models.paths import BOUND_PATH, on_path, path_to

_CHAT_DETAIL = select(
    Chat.id,
    Chat.title,
    Chat.model,
    Chat.created_at,
    Chat.updated_at,
    Chat.turn_owner,
    Chat.turn_lease_until,
    Chat.active_leaf_id,
).where(Chat.id == bindparam("chat_id"), Chat.user_id == bindparam("user_id"))
_PATH = BOUND_PATH
_MESSAGES = (
    select(*(getattr(Message, name) for name in views.MESSAGE_COLUMNS))
    .join(_PATH, Message.id == _PATH.c.id)
    .order_by(Message.id)
)
_SIBLINGS = (
    select(Message.id, Message.parent_id, Message.role)
    .where(
        Message.chat_id == bindparam("chat_id"),
        or_(Message.parent_id.in_(on_path(_PATH)), Message.parent_id.is_(None)),
    )
    .order_by(Message.id)
)
"""Every child of a message on the path, and every root: the alternatives a user pages through."""
_TOOL_CALLS = (
    select(*(getattr(ChatLlmTool, name) for name in views.TOOL_COLUMNS))
    .where(ChatLlmTool.message_id.in_(on_path(_PATH)))
    .order_by(ChatLlmTool.id)
)
_UPLOADS = select(*(getattr(Upload, name) for name in views.UPLOAD_COLUMNS)).where(
    Upload.user_id == bindparam("user_id"), Upload.id.in_(bindparam("ids", expanding=True))
)
_SUMMARIES = (
    select(
        ChatSummary.id,
        ChatSummary.covers_up_to_message_id,
        ChatSummary.content,
        ChatSummary.created_at,
    )
    .where(ChatSummary.covers_up_to_message_id.in_(on_path(_PATH)))
    .order_by(ChatSummary.id)
)
_CHAT = select(Chat).where(Chat.id == bindparam("chat_id"), Chat.user_id == bindparam("user_id"))
"""Built once: the chat route and every turn run them (see above)."""


_ROUND_COLUMNS = (
    "chat_id",
    "parent_id",
    "role",
    "content",
    "status",
    "model",
    "metadata",
    "created_at",
)
"""The columns a round starts with (`round_row`), in `_ADD_QUESTION`'s order."""


def _question(chat: BindParameter[Any], at: BindParameter[Any]) -> ReturningInsert[Any]:
    """The user's message in `chat` at `at`, under `:under`, with `:text` and
    `:question_meta`, answering its id: what every send stores first."""
    column = Message.__table__.c
    return (
        insert(Message)
        .values(
            chat_id=chat,
            parent_id=bindparam("under", type_=column.parent_id.type),
            role="user",
            content=bindparam("text", type_=column.content.type),
            status="ok",
            meta=bindparam("question_meta", type_=column.metadata.type),
            created_at=at,
        )
        .returning(Message.id)
    )


def _add_question() -> Update:
    """PostgreSQL: the user's message, the first round of its answer under it, and the round
    made the chat's active leaf, in one statement (data-modifying CTEs), which answers the two
    ids. Three statements elsewhere (`add_question`)."""
    column = Message.__table__.c
    chat = bindparam("of_chat", type_=column.chat_id.type)
    at = bindparam("at", type_=column.created_at.type)
    question = _question(chat, at).cte("question")
    answer = (
        insert(Message)
        .from_select(
            _ROUND_COLUMNS,
            select(
                chat,
                question.c.id,
                literal("assistant"),
                literal(""),
                literal("streaming"),
                bindparam("round_model", type_=column.model.type),
                func.jsonb_build_object("question_id", question.c.id),
                at,
            ),
        )
        .returning(Message.id, Message.parent_id, Message.chat_id)
        .cte("answer")
    )
    return (
        update(Chat)
        .where(Chat.id == answer.c.chat_id)
        .values(active_leaf_id=answer.c.id)
        .returning(answer.c.parent_id, answer.c.id)
        .execution_options(synchronize_session=False)
    )


_ADD_QUESTION = _add_question()
"""Built once (see above)."""


async def add_question(
    db: AsyncSession,
    chat: Chat,
    *,
    parent_id: int | None,
    content: str,
    meta: dict[str, Any],
    model_id: str,
    now: datetime,
) -> tuple[int, int]:
    """Store a user message under `parent_id` and the first round of its answer (as
    `round_row` makes it) under the message, and make the round the chat's active leaf, in
    the caller's transaction; the two ids.

    On PostgreSQL that is one statement (`_ADD_QUESTION`): sending is on the way to the first
    token, and each round trip there is about 0.3 ms of CPU and more of waiting
    (`bench/turn_overhead.py` part a)."""
    if db.get_bind().dialect.name == "postgresql":
        values = {
            "of_chat": chat.id,
            "under": parent_id,
            "text": content,
            "question_meta": meta,
            "round_model": model_id,
            "at": now,
        }
        question_id, round_id = (await db.execute(_ADD_QUESTION, values)).one()
        set_committed_value(chat, "active_leaf_id", round_id)
        return question_id, round_id
    question = Message(
        chat_id=chat.id,
        parent_id=parent_id,
        role="user",
        content=content,
        status="ok",
        meta=meta,
        created_at=now,
    )
    db.add(question)
    await db.flush()
    first_round = round_row(chat.id, model_id, now, question.id, question.id)
    db.add(first_round)
    await db.flush()
    chat.active_leaf_id = first_round.id
    return question.id, first_round.id


def _send_at_once() -> Select[Any]:
    """PostgreSQL: a whole send after the active leaf in one statement: the chat claimed as
    `leases.CLAIM_FOR_MESSAGE` claims it (and only if its model is one of `usable`), the user's
    message under the chat's active leaf, the first round of its answer under the message, and
    the round made the active leaf. It answers the model, the message's id and the round's, or
    no row when the chat could not be claimed (nothing is written then). With them, one row per
    message of the path the message extends (`app.agent.rows.probed`), which the statement's
    snapshot shows without the two new rows: the turn's history, with no read of its own.

    A table is written once per statement, so the chats row is claimed and given its new leaf
    in one UPDATE, with the two ids drawn from the sequence beforehand, the message's first (ids
    keep the order rows were made in). That UPDATE's `RETURNING` tells only the new leaf; the
    old one, the message's parent, is read first by `leaf`, which locks the row: under READ
    COMMITTED a plain read would see the leaf as of the statement's start, not the one a branch
    switch committed while the statement waited for the row
    (`tests/api/test_send_at_once.py`).

    Against the long way's BEGIN, claim, insert, COMMIT and path read it saves four round trips
    and the ORM's work on the chat row, on the way to the first token. Measured in alternation
    with `bench/turn_overhead.py` a (hearth minus pydantic-ai alone, p50 of 60 turns): 9.56 and
    9.97 ms before, 7.85 and 7.86 ms with the send in one statement, 6.86 and 7.05 ms with the
    path read after it on the same connection, 6.51 and 6.77 ms with the path in the statement."""
    column = Message.__table__.c
    chat_id = bindparam("chat_id", type_=column.chat_id.type)
    at = bindparam("now", type_=column.created_at.type)
    messages = Sequence("messages_id_seq")
    leaf = (
        select(Chat.id, Chat.active_leaf_id, messages.next_value().label("question_id"))
        .where(Chat.id == chat_id, Chat.user_id == bindparam("of_user"))
        .with_for_update()
        .cte("leaf")
    )
    ids = select(leaf, messages.next_value().label("round_id")).cte("ids")
    model = func.coalesce(bindparam("asked_model", type_=column.model.type), Chat.model)
    claimed = (
        leases.CLAIM_FOR_MESSAGE.where(
            Chat.id == ids.c.id, model == any_(bindparam("usable", type_=ARRAY(String)))
        )
        .values(active_leaf_id=ids.c.round_id)
        .returning(
            Chat.id,
            model.label("model"),
            ids.c.active_leaf_id.label("parent_id"),
            ids.c.question_id,
            ids.c.round_id,
        )
        .cte("claimed")
    )
    question = insert(Message).from_select(
        ("id", "chat_id", "parent_id", "role", "content", "status", "metadata", "created_at"),
        select(
            claimed.c.question_id,
            claimed.c.id,
            claimed.c.parent_id,
            literal_column("'user'"),
            bindparam("text", type_=column.content.type),
            literal_column("'ok'"),
            literal_column("'{}'::jsonb"),
            at,
        ),
    )
    answer = insert(Message).from_select(
        ("id", *_ROUND_COLUMNS),
        select(
            claimed.c.round_id,
            claimed.c.id,
            claimed.c.question_id,
            literal_column("'assistant'"),
            literal_column("''"),
            literal_column("'streaming'"),
            claimed.c.model,
            func.jsonb_build_object(literal_column("'question_id'"), claimed.c.question_id),
            at,
        ),
    )
    extended = path_to(select(leaf.c.active_leaf_id).scalar_subquery(), chat_id)
    read = probed(extended).subquery("read")
    return (
        select(claimed.c.model.label("sent_model"), claimed.c.question_id, claimed.c.round_id, read)
        .select_from(claimed.outerjoin(read, true()))
        .order_by(read.c.id)
        .add_cte(question.cte("question"), answer.cte("answer"))
    )


_SEND_AT_ONCE = _send_at_once()
"""Built once (see above)."""


def _sent_in_steps() -> tuple[Update, ReturningInsert[Any], ReturningInsert[Any], Update]:
    """SQLite: `_SEND_AT_ONCE` as four statements, since SQLite has no data-modifying CTEs:
    the claim, which answers the model and the old leaf (`RETURNING` tells the row as the
    statement left it, and the claim leaves the leaf alone), the message, the round, and the
    round made the active leaf."""
    column = Message.__table__.c
    chat_id = bindparam("chat_id", type_=column.chat_id.type)
    at = bindparam("now", type_=column.created_at.type)
    model = func.coalesce(bindparam("asked_model", type_=column.model.type), Chat.model)
    claim = leases.CLAIM_FOR_MESSAGE.where(
        model.in_(bindparam("usable", expanding=True))
    ).returning(model.label("model"), Chat.active_leaf_id)
    question = _question(chat_id, at)
    answer = (
        insert(Message)
        .values(
            chat_id=chat_id,
            parent_id=bindparam("question", type_=column.parent_id.type),
            role="assistant",
            content="",
            status="streaming",
            model=bindparam("round_model", type_=column.model.type),
            meta=bindparam("round_meta", type_=column.metadata.type),
            created_at=at,
        )
        .returning(Message.id)
    )
    leaf = (
        update(Chat)
        .where(Chat.id == chat_id)
        .values(active_leaf_id=bindparam("round", type_=column.id.type))
    )
    return claim, question, answer, leaf


_CLAIM, _QUESTION, _ANSWER, _LEAF = _sent_in_steps()
"""Built once (see above)."""


async def send_in_steps(
    connection: AsyncConnection,
    claim: dict[str, Any],
    *,
    content: str,
    model_id: str | None,
    usable: list[str],
) -> Sent | None:
    """SQLite: what `send_at_once` does, in one transaction on the request's `connection` run
    whole on its thread (`in_one_trip`: the four statements and the commit in one trip, holding
    the database's write turn only while they run), then the path read after the commit (the
    turn holds the chat: nothing changes it meanwhile); None, with nothing written, when the
    chat could not be claimed.

    The long way's ORM session cost more than its statements, and its turn opened a session of
    its own to read the path before its run; here the turn starts from the path it is handed.

    What authentication read on the connection needs no ending first: SQLite opened no
    transaction for it (Python's sqlite3 begins one before the first write, here the claim)."""
    values = {"chat_id": claim["chat_id"], "now": claim["now"], "text": content}

    def send(lent: Connection) -> tuple[str, int, int] | None:
        claimed = lent.execute(_CLAIM, {**claim, "asked_model": model_id, "usable": usable}).first()
        if claimed is None:
            return None
        question_id: int = lent.execute(
            _QUESTION, {**values, "under": claimed.active_leaf_id, "question_meta": {}}
        ).scalar_one()
        round_id: int = lent.execute(
            _ANSWER,
            {
                **values,
                "question": question_id,
                "round_model": claimed.model,
                "round_meta": {"question_id": question_id},
            },
        ).scalar_one()
        lent.execute(_LEAF, {"chat_id": claim["chat_id"], "round": round_id})
        return claimed.model, question_id, round_id

    sent = await in_one_trip(connection, send)
    if sent is None:
        return None
    model, question_id, round_id = sent
    try:
        rows, beside = await load_path(connection, claim["chat_id"])
    except DBAPIError:  # the send is stored: the turn reads the path and answers for it
        return Sent(model, question_id, round_id, None)
    return Sent(model, question_id, round_id, (rows[:-1], beside))  # less the round


@dataclass(frozen=True, slots=True)
class Sent:
    """What `send_at_once` stored: the model that answers, the message's id and the round's, and
    the chat's active path up to the message (the turn's history: `TurnPlan.path`)."""

    model: str
    question_id: int
    round_id: int
    path: Path | None
    """None when the path's tool calls or attachments could not be read: the turn reads it."""


async def send_at_once(
    connection: AsyncConnection,
    claim: dict[str, Any],
    *,
    content: str,
    model_id: str | None,
    usable: list[str],
) -> Sent | None:
    """PostgreSQL, on a connection whose statements commit alone: `_SEND_AT_ONCE` with the
    lease's `claim` values (`leases.claim_values`); None when the chat could not be claimed (the
    caller goes the long way)."""
    values = {**claim, "asked_model": model_id, "usable": usable, "text": content}
    found = (await connection.execute(_SEND_AT_ONCE, values)).all()
    if not found:
        return None
    first = found[0]
    on_path = [row for row in found if row.id is not None]
    try:
        rows, beside = await stored_path(connection, claim["chat_id"], on_path)
    except DBAPIError:  # the send is stored: the turn reads the path and answers for it
        return Sent(first.sent_model, first.question_id, first.round_id, None)
    question = StoredMessage(
        id=first.question_id,
        role="user",
        content=content,
        reasoning=None,
        status="ok",
        model=None,
        provider_details=None,
        meta={},
        created_at=claim["now"],
    )
    return Sent(first.sent_model, first.question_id, first.round_id, ([*rows, question], beside))


async def get_chat(db: AsyncSession, user_id: uuid.UUID, chat_id: uuid.UUID) -> Chat | None:
    return await db.scalar(_CHAT, {"chat_id": chat_id, "user_id": user_id})


async def list_chats(
    db: AsyncSession,
    user_id: uuid.UUID,
    limit: int,
    after: tuple[datetime, uuid.UUID] | None,
) -> tuple[list[Chat], bool]:
    """One page, newest activity first, after the (updated_at, id) key; and whether more follow."""
    query = select(Chat).where(Chat.user_id == user_id)
    if after is not None:
        at, last_id = after
        query = query.where(
            or_(Chat.updated_at < at, and_(Chat.updated_at == at, Chat.id < last_id))
        )
    query = query.order_by(Chat.updated_at.desc(), Chat.id.desc()).limit(limit + 1)
    chats = list((await db.scalars(query)).all())
    return chats[:limit], len(chats) > limit


async def delete_chat(db: AsyncSession, user_id: uuid.UUID, chat_id: uuid.UUID) -> bool:
    deleted = await rows_changed(
        db, delete(Chat).where(Chat.id == chat_id, Chat.user_id == user_id)
    )
    return bool(deleted)


async def chat_detail(
    connection: AsyncConnection, user_id: uuid.UUID, chat_id: uuid.UUID, now: datetime
) -> views.ChatDetailView | None:
    """The chat with messages, tool calls and uploads as JSON-ready dicts; None if not theirs.

    Its several reads see one snapshot, so the chat shown is one the database held."""
    await one_snapshot(connection)
    keys = {"chat_id": chat_id, "user_id": user_id}
    chat = (await connection.execute(_CHAT_DETAIL, keys)).first()
    if chat is None:
        return None
    messages = [views.MessageRow._make(r) for r in await connection.execute(_MESSAGES, keys)]
    alternatives: dict[tuple[int | None, str], list[int]] = defaultdict(list)
    for message_id, parent_id, role in await connection.execute(_SIBLINGS, keys):
        alternatives[parent_id, role].append(message_id)
    tools_by_message: dict[int, list[views.ToolCallView]] = defaultdict(list)
    for tool in await connection.execute(_TOOL_CALLS, keys):
        row = views.ToolRow._make(tool)
        tools_by_message[row.message_id].append(views.tool_call(row))

    attachment_ids = {
        uuid.UUID(str(upload_id))
        for message in messages
        if message.meta
        for upload_id in message.meta.get("attachments", ())
    }
    uploads: dict[str, views.UploadView] = {}
    if attachment_ids:
        found = await connection.execute(_UPLOADS, {**keys, "ids": list(attachment_ids)})
        uploads = {str(row.id): views.upload(row) for row in views.upload_rows(found)}

    # A question's citations and status go on its final message: its latest assistant round.
    questions = await evidence.question_views(connection, chat_id)
    final: dict[int, int] = {}
    for message in messages:
        question_id = (message.meta or {}).get("question_id")
        if question_id in questions:
            final[question_id] = message.id
    by_final = {message_id: questions[q] for q, message_id in final.items()}
    summaries = await connection.execute(_SUMMARIES, keys)
    return {
        **views.chat(chat, now),
        "messages": [
            views.message(
                message,
                tools_by_message.get(message.id, []),
                uploads,
                by_final.get(message.id),
                alternatives.get((message.parent_id, message.role)),
            )
            for message in messages
        ],
        "summaries": [
            {"id": i, "covers_up_to_message_id": c, "content": text, "created_at": at}
            for i, c, text, at in summaries
        ],
    }


def touch(chat: Chat, now: datetime) -> None:
    chat.updated_at = now
