"""What a turn reads before its first request, on both databases: the path's messages, with
what else hangs off the path told in the same statement (`app.agent.rows.Beside`), and the
other reads only for what is there."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event, select, update

from app.agent.activations import load_anchors
from app.agent.rows import Beside, load_path
from app.agent.summaries import latest_summary
from app.models import ActivatedTool, Chat, ChatLlmTool, ChatSummary
from app.models.knowledge import ChatEvidence
from app.services import Services
from tests.chat_rows import append
from tests.fakes.providers import FakeProviderServer, Reply
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream

pytestmark = pytest.mark.usefixtures("services", "registry")


async def new_chat(user: Client) -> uuid.UUID:
    reply = await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})
    return uuid.UUID(reply.json()["id"])


async def add_call(
    services: Services, chat_id: uuid.UUID, message_id: int, tool_call_id: str
) -> None:
    """A finished tool call of `message_id`, as the recorder leaves one."""
    now = services.clock.now()
    async with services.sessions() as db:
        db.add(
            ChatLlmTool(
                chat_id=chat_id,
                message_id=message_id,
                tool_call_id=tool_call_id,
                name="list_files",
                status="done",
                result="[]",
                created_at=now,
                updated_at=now,
            )
        )
        await db.commit()


async def send(user: Client, chat_id: uuid.UUID, content: str) -> None:
    """A turn, to the end of its stream: `[DONE]` comes once the turn has let go of the chat."""
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    assert parse_stream(response.text)[-1]["type"] == "[DONE]"


async def test_the_path_tells_what_hangs_off_it(user: Client, services: Services) -> None:
    chat_id = await new_chat(user)
    now = services.clock.now()
    async with services.sessions() as db:
        question = await append(db, chat_id, role="user", content="Q", created_at=now)
        answer = await append(db, chat_id, role="assistant", content="A", created_at=now)
        await db.commit()
    async with services.alone() as db:
        rows, beside = await load_path(db, chat_id)
    assert [row.id for row in rows] == [question.id, answer.id]
    assert beside == Beside()

    await add_call(services, chat_id, answer.id, "call_1")
    async with services.alone() as db:
        rows, beside = await load_path(db, chat_id)
    assert beside == Beside(calls=True)
    assert [call.tool_call_id for call in rows[1].tool_calls] == ["call_1"]

    async with services.sessions() as db:
        db.add(
            ActivatedTool(
                chat_id=chat_id, message_id=answer.id, kind="group", ref="time", created_at=now
            )
        )
        db.add(
            ChatSummary(
                chat_id=chat_id,
                covers_up_to_message_id=question.id,
                content="S",
                model="m",
                created_at=now,
            )
        )
        db.add(
            ChatEvidence(
                chat_id=chat_id,
                question_id=question.id,
                epoch=answer.id,
                kind="declared_none",
                created_at=now,
            )
        )
        await db.commit()
    async with services.alone() as db:
        rows, beside = await load_path(db, chat_id)
        assert await load_anchors(db, chat_id) == {answer.id: ["time"]}
        summary = await latest_summary(db, chat_id)
    assert beside == Beside(calls=True, activations=True, summaries=True, evidence=True)
    assert summary is not None and summary.content == "S"

    # Another branch: what hangs off the first one is not beside it.
    async with services.sessions() as db:
        await db.execute(update(Chat).where(Chat.id == chat_id).values(active_leaf_id=None))
        root = await append(db, chat_id, role="user", content="Q again", created_at=now)
        await db.commit()
    async with services.alone() as db:
        rows, beside = await load_path(db, chat_id)
    assert [row.id for row in rows] == [root.id]
    assert beside == Beside()

    async with services.sessions() as db:
        await db.execute(update(Chat).where(Chat.id == chat_id).values(active_leaf_id=None))
        await db.commit()
    async with services.alone() as db:
        assert await load_path(db, chat_id) == ([], Beside())


@contextmanager
def statements(services: Services) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
        seen.append(" ".join(sql.split()))

    event.listen(services.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(services.engine.sync_engine, "before_cursor_execute", record)


async def test_a_turn_reads_only_what_its_path_has(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    """Nothing hangs off the path but messages: one statement reads the whole history. Once a
    message of the path has a tool call, the next turn reads the calls too, and nothing else."""
    fake = fakes["openai"]
    chat_id = await new_chat(user)
    fake.script(Reply(text="One."), Reply(text="Two."), Reply(text="Three."))
    await send(user, chat_id, "First")

    def path_reads(seen: list[str]) -> list[str]:
        """The table of the first column each read of the path selects; on PostgreSQL the
        messages are read by the send's own statement (`repository.send_at_once`)."""
        reads = [sql for sql in seen if sql.startswith("WITH RECURSIVE")]
        return [
            "messages" if "AS has_calls" in sql else sql.split(") SELECT ", 1)[1].split(".", 1)[0]
            for sql in reads
        ]

    with statements(services) as seen:
        await send(user, chat_id, "Second")
    assert path_reads(seen) == ["messages"], seen

    async with services.sessions() as db:
        leaf = await db.scalar(select(Chat.active_leaf_id).where(Chat.id == chat_id))
    assert leaf is not None
    await add_call(services, chat_id, leaf, "call_9")
    with statements(services) as seen:
        await send(user, chat_id, "Third")
    assert path_reads(seen) == ["messages", "chat_llm_tools"], seen
    assert len(fake.requests) == 3


async def test_a_send_refused_after_its_claim_leaves_the_chat_as_it_was(
    user: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    """Sending claims the chat before it checks the model, the parent and the attachments:
    each refusal rolls the claim back, and the chat takes the next message."""
    chat_id = await new_chat(user)
    refusals = [
        ({"content": "Hi", "model": "nowhere/none"}, 422),
        ({"content": "Hi", "parent_id": 987654321}, 404),
        ({"content": "Hi", "attachments": [str(uuid.uuid4())]}, 404),
        ({"content": "   "}, 422),
    ]
    for body, status in refusals:
        response = await user.post(f"/api/chats/{chat_id}/messages", json=body)
        assert response.status_code == status, (body, response.text)
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    assert chat["messages"] == [] and chat["title"] is None, chat
    async with services.sessions() as db:
        held = await db.scalar(select(Chat.turn_owner).where(Chat.id == chat_id))
    assert held is None
    fakes["openai"].script(Reply(text="Hello."))
    await send(user, chat_id, "Hi")
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    assert [m["content"] for m in chat["messages"]] == ["Hi", "Hello."]
    assert chat["title"] == "Hi"
