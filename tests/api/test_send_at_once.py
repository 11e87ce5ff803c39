"""A send after the active leaf: one statement on PostgreSQL (`repository.send_at_once`), four
Core statements on SQLite (`repository.send_in_steps`).

The common send claims the chat, stores the message and the first round of its answer, moves
the active leaf and hands the turn its path; every other send goes the long way. These tests
hold the two ways to the same rows, the one statement to the branch a concurrent switch
committed, and every refusal to the long way's answer with nothing written.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, select, text, update
from sqlalchemy.exc import DBAPIError

from app.agent import leases, turn
from app.agent.rows import load_path
from app.chats import repository, service
from app.core.db.engine import statements_alone
from app.llm.registry import ModelRegistry
from app.models import Chat, Message
from app.services import Services
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle
from tests.wire import conversation

pytestmark = pytest.mark.usefixtures("services", "registry")


@contextmanager
def writes(services: Services) -> Iterator[list[str]]:
    """The statements that write chats or messages while the block runs."""
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
        flat = " ".join(sql.split())
        if any(verb in flat for verb in ("UPDATE chats", "INSERT INTO messages")):
            seen.append(flat)

    event.listen(services.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(services.engine.sync_engine, "before_cursor_execute", record)


async def new_chat(user: Client) -> uuid.UUID:
    reply = await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})
    return uuid.UUID(reply.json()["id"])


async def post(user: Client, chat_id: uuid.UUID, body: dict[str, Any]) -> None:
    response = await user.post(f"/api/chats/{chat_id}/messages", json=body)
    assert response.status_code == 200, response.text
    assert "error" not in [c["type"] for c in parse_stream(response.text)]
    await wait_until_idle(user, str(chat_id))


async def rows(services: Services, chat_id: uuid.UUID) -> list[dict[str, Any]]:
    async with services.sessions() as db:
        found = await db.scalars(
            select(Message).where(Message.chat_id == chat_id).order_by(Message.id)
        )
        return [
            {
                "id": m.id,
                "parent_id": m.parent_id,
                "role": m.role,
                "content": m.content,
                "status": m.status,
                "model": m.model,
                "meta": m.meta,
                "created_at": m.created_at,
            }
            for m in found
        ]


async def chat_row(services: Services, chat_id: uuid.UUID) -> Chat:
    async with services.sessions() as db:
        chat = await db.get(Chat, chat_id)
        assert chat is not None
        return chat


def shape(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The messages with their ids made relative: what two chats' trees can be compared by."""
    index = {m["id"]: n for n, m in enumerate(messages)}
    return [
        (
            index.get(m["parent_id"]),
            m["role"],
            m["content"],
            m["status"],
            m["model"],
            {k: index[v] if k == "question_id" else v for k, v in m["meta"].items()},
        )
        for m in messages
    ]


async def test_a_send_after_the_active_leaf_stores_what_the_long_way_stores(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    """Two chats, the same two questions: one sent plainly (one statement on PostgreSQL), the
    other naming its parent, which always goes the long way. Same trees, same chat rows."""
    fake = fakes["openai"]
    fake.script(*(Reply(text="An answer.") for _ in range(4)))
    at_once, long_way = await new_chat(user), await new_chat(user)
    with writes(services) as seen:
        await post(user, at_once, {"content": "Q1 first line\nmore"})
    sends = [sql for sql in seen if "INSERT INTO messages" in sql]
    if services.engine.dialect.name == "postgresql":
        assert len(sends) == 1 and sends[0].startswith("WITH RECURSIVE leaf AS"), seen
    else:  # the claim answers the model and the old leaf, not the chat the ORM would load
        assert len(sends) == 2 and "RETURNING coalesce(" in seen[0], seen
        assert seen[1:3] == sends and seen[3].startswith("UPDATE chats SET active_leaf_id"), seen
    await post(user, long_way, {"content": "Q1 first line\nmore", "parent_id": None})
    leaf = (await chat_row(services, at_once)).active_leaf_id
    await post(user, at_once, {"content": "Q2"})
    long_leaf = (await chat_row(services, long_way)).active_leaf_id
    await post(user, long_way, {"content": "Q2", "parent_id": long_leaf})

    fast, slow = await rows(services, at_once), await rows(services, long_way)
    assert shape(fast) == shape(slow)
    assert [m["role"] for m in fast] == ["user", "assistant", "user", "assistant"]
    assert fast[2]["parent_id"] == leaf
    assert [m["id"] for m in fast] == sorted(m["id"] for m in fast)
    assert fast[0]["meta"] == {} and fast[1]["meta"] == {"question_id": fast[0]["id"]}
    assert all(m["created_at"] is not None for m in fast)
    for chat_id, messages in ((at_once, fast), (long_way, slow)):
        chat = await chat_row(services, chat_id)
        assert chat.title == "Q1 first line"
        assert chat.active_leaf_id == messages[-1]["id"]
        assert chat.turn_owner is None and chat.turn_lease_until is None
        assert chat.updated_at >= messages[-1]["created_at"]


async def test_a_turn_reads_nothing_the_send_read_for_it(
    user: Client,
    services: Services,
    fakes: dict[str, FakeProviderServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The send reads the chat's path (on PostgreSQL in its own statement, on SQLite once its
    rows are committed) and hands it to the turn, which reads it no more: one read per send, the
    send's, and the model gets the whole conversation from it, the turn's own round left out.
    The long way hands it over on PostgreSQL; on SQLite its turn reads it
    (`service._path_after_send` says why)."""
    fake = fakes["openai"]
    fake.script(Reply(text="A1."), Reply(text="A2."), Reply(text="A3."))
    chat_id = await new_chat(user)
    reads: list[str] = []

    def counted(reader: str, read: Any) -> Any:
        async def load_path(*args: Any) -> Any:
            reads.append(reader)
            return await read(*args)

        return load_path

    monkeypatch.setattr(service, "load_path", counted("send", service.load_path))
    monkeypatch.setattr(repository, "stored_path", counted("send", repository.stored_path))
    monkeypatch.setattr(repository, "load_path", counted("send", repository.load_path))
    monkeypatch.setattr(turn, "load_path", counted("turn", turn.load_path))
    await post(user, chat_id, {"content": "Q1"})
    await post(user, chat_id, {"content": "Q2"})
    leaf = (await chat_row(services, chat_id)).active_leaf_id
    await post(user, chat_id, {"content": "Q3", "parent_id": leaf})
    postgresql = services.engine.dialect.name == "postgresql"
    assert reads == ["send", "send", "send"] if postgresql else ["send", "send", "turn"]
    said = [
        (m["role"], m["content"])
        for m in conversation(fake.model_requests[-1].body)
        if m["role"] != "system"
    ]
    assert said == [
        ("user", "Q1"),
        ("assistant", "A1."),
        ("user", "Q2"),
        ("assistant", "A2."),
        ("user", "Q3"),
    ]


async def test_the_path_a_send_reads_is_the_path_it_stored(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    """What the send hands the turn equals what reading the chat afterwards finds, tool calls
    included, less the round the send opened: the message the one statement adds to the path
    itself is the stored one, field for field."""
    calls = [ToolCall("list_files", {"path": "."}, id="call_1")]
    fakes["openai"].script(Reply(text="Looking.", tool_calls=calls), Reply(text="Done."))
    chat_id = await new_chat(user)
    await post(user, chat_id, {"content": "What is there?"})
    now = services.clock.now()
    user_id = uuid.UUID(user.user["id"])
    claim = leases.claim_values(chat_id, user_id, "a test", now, timedelta(minutes=1), title=None)
    send = (
        repository.send_at_once
        if services.engine.dialect.name == "postgresql"
        else repository.send_in_steps
    )
    async with services.engine.connect() as connection:
        await statements_alone(connection)
        sent = await send(
            connection, claim, content="And now?", model_id=None, usable=[MODEL_IDS["openai"]]
        )
    assert sent is not None and sent.path is not None
    async with services.sessions() as db:
        stored, beside = await load_path(db, chat_id)
    assert stored[-1].id == sent.round_id
    assert sent.path == (stored[:-1], beside)
    assert beside.calls and stored[1].tool_calls[0].tool_call_id == "call_1"


async def test_a_send_whose_path_read_fails_still_answers(
    user: Client,
    services: Services,
    fakes: dict[str, FakeProviderServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The message is stored before the send reads the rest of the path (its tool calls in the
    one statement's case, the whole path otherwise): a read that fails there leaves the turn to
    read it, and the answer comes as usual, both ways."""
    fakes["openai"].script(Reply(text="Still here."), Reply(text="Again."))
    chat_id = await new_chat(user)

    async def failing(*_args: Any) -> Any:
        raise DBAPIError("SELECT", {}, ConnectionError("the connection dropped"))

    monkeypatch.setattr(service, "load_path", failing)
    monkeypatch.setattr(repository, "stored_path", failing)
    monkeypatch.setattr(repository, "load_path", failing)
    await post(user, chat_id, {"content": "Hello?"})
    leaf = (await chat_row(services, chat_id)).active_leaf_id
    await post(user, chat_id, {"content": "Once more?", "parent_id": leaf})
    stored = [m["content"] for m in await rows(services, chat_id)]
    assert stored == ["Hello?", "Still here.", "Once more?", "Again."]


async def test_a_send_hangs_under_the_leaf_a_concurrent_switch_committed(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    """A branch switch holds the chat row when the send arrives: the send waits for it and its
    message goes under the leaf the switch committed, not the one its statement began with."""
    if services.engine.dialect.name != "postgresql":
        pytest.skip("SQLite serialises writers: no send runs beside an open switch")
    fake = fakes["openai"]
    fake.script(Reply(text="A1."), Reply(text="A2."), Reply(text="A3."))
    chat_id = await new_chat(user)
    await post(user, chat_id, {"content": "Q1"})
    await post(user, chat_id, {"content": "Q2"})
    first_answer = (await rows(services, chat_id))[1]
    async with services.engine.connect() as switch:
        await switch.execute(
            update(Chat).where(Chat.id == chat_id).values(active_leaf_id=first_answer["id"])
        )
        sending = asyncio.create_task(post(user, chat_id, {"content": "Q3"}))
        for _ in range(500):
            waiting = await services.engine.connect()
            try:
                locked = await waiting.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE 'WITH RECURSIVE leaf AS%'"
                    )
                )
            finally:
                await waiting.close()
            if locked:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the send never waited for the switch")
        assert not sending.done()
        await switch.commit()
    await sending
    messages = await rows(services, chat_id)
    question = next(m for m in messages if m["content"] == "Q3")
    assert question["parent_id"] == first_answer["id"]
    assert (await chat_row(services, chat_id)).active_leaf_id == messages[-1]["id"]


async def test_a_send_the_one_statement_cannot_claim_for_is_answered_the_long_way(
    user: Client, services: Services, registry: ModelRegistry
) -> None:
    """The chat's own model gone (no key any more): the one statement claims nothing, and the
    long way refuses with the reason; nothing is stored and the chat is not held. A foreign
    chat is a 404, a held one a 409, as before."""
    chat_id = await new_chat(user)
    services.registry = ModelRegistry(registry.providers, env={})
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Hi"})
    assert response.status_code == 422, response.text
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "model"] and "is not available" in problem["msg"]
    services.registry = registry
    assert await rows(services, chat_id) == []
    chat = await chat_row(services, chat_id)
    assert chat.turn_owner is None and chat.title is None and chat.active_leaf_id is None

    foreign = await user.post(f"/api/chats/{uuid.uuid4()}/messages", json={"content": "Hi"})
    assert foreign.status_code == 404, foreign.text

    async with services.sessions() as db:
        lease = services.clock.now() + timedelta(minutes=5)
        await db.execute(
            update(Chat)
            .where(Chat.id == chat_id)
            .values(turn_owner="another-worker", turn_lease_until=lease)
        )
        await db.commit()
    held = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Hi"})
    assert held.status_code == 409, held.text
    assert await rows(services, chat_id) == []
