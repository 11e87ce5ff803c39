"""Turns against fake Anthropic, OpenAI and Moonshot servers that speak the real wire.

Every request a fake receives is validated against the provider SDK's own request types. The
golden files pin the exact bodies of a two-round turn with a tool call per provider kind.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from sqlalchemy import select

from app.llm.registry import ModelRegistry
from app.models import LlmRequest, Message
from app.services import Services
from tests.chat_rows import append
from tests.clock import ShiftedClock
from tests.fakes.providers import (
    Cut,
    Fail,
    FakeProviderServer,
    Hang,
    Reply,
    ToolCall,
    Usage,
)
from tests.golden import assert_golden
from tests.provider_setup import CALL_IDS, KINDS, MODEL_IDS
from tests.support import Client, parse_stream, wait_until, wait_until_idle
from tests.wire import conversation, tail_of

pytestmark = pytest.mark.usefixtures("services")


async def send(client: Client, chat_id: str, content: str) -> list[dict[str, Any]]:
    response = await client.post(f"/api/chats/{chat_id}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    return parse_stream(response.text)


def bodies(fake: FakeProviderServer) -> list[dict[str, Any]]:
    requests = fake.model_requests
    for request in requests:
        assert request.validation_error is None, request.validation_error
    return [request.body for request in requests]


def two_round_script(kind: str) -> list[Reply]:
    return [
        Reply(
            text="Let me look at your files.",
            reasoning="The user wants a listing." if kind == "moonshot" else "",
            tool_calls=[ToolCall("list_files", {"path": "."}, id=CALL_IDS[kind])],
            usage=Usage(input_tokens=120, output_tokens=20, cache_read_tokens=100),
        ),
        Reply(text="Your workspace is empty.", usage=Usage(input_tokens=160, output_tokens=8)),
    ]


@pytest.mark.parametrize("kind", KINDS)
async def test_two_round_turn_with_a_tool_call(
    kind: str, user: Client, fakes: dict[str, FakeProviderServer], registry: ModelRegistry
) -> None:
    fake = fakes[kind]
    fake.script(*two_round_script(kind))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    chunks = await send(user, chat_id, "What is in my files?")
    types = [c["type"] for c in chunks]
    assert "error" not in types, chunks
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert text == "Let me look at your files.Your workspace is empty."
    tool_input = next(c for c in chunks if c["type"] == "tool-input-available")
    assert tool_input["toolCallId"] == CALL_IDS[kind]

    sent = bodies(fake)
    assert len(sent) == 2
    assert_golden(f"wire_two_rounds_{kind}", sent)

    chat = await wait_until_idle(user, chat_id)
    first, second = chat["messages"][1:]
    assert first["status"] == second["status"] == "ok"
    assert first["tool_calls"][0]["tool_call_id"] == CALL_IDS[kind]
    assert first["tool_calls"][0]["result"] == ". is empty."
    assert first["usage"]["input_tokens"] == 120
    assert first["usage"]["cache_read_tokens"] == 100
    assert second["usage"]["output_tokens"] == 8
    if kind == "moonshot":
        assert first["reasoning"] == "The user wants a listing."
        assistant = next(m for m in sent[1]["messages"] if m["role"] == "assistant")
        assert assistant["reasoning_content"] == "The user wants a listing."
        assert assistant["tool_calls"][0]["id"] == "functions.list_files:0"
        tool_message = next(m for m in sent[1]["messages"] if m["role"] == "tool")
        assert tool_message["tool_call_id"] == "functions.list_files:0"


@pytest.mark.parametrize("kind", KINDS)
async def test_next_turn_replays_the_stored_history_byte_for_byte(
    kind: str, user: Client, fakes: dict[str, FakeProviderServer], registry: ModelRegistry
) -> None:
    fake = fakes[kind]
    fake.script(*two_round_script(kind), Reply(text="Still empty."))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    await send(user, chat_id, "What is in my files?")
    await wait_until_idle(user, chat_id)
    await send(user, chat_id, "And now?")
    sent = bodies(fake)
    assert len(sent) == 3
    earlier, later = conversation(sent[1]), conversation(sent[2])
    # What the model was sent in the first turn comes back unchanged from the stored rows, and
    # the dynamic tail is the last thing of every request.
    assert later[: len(earlier)] == earlier
    assert all(tail_of(body) for body in sent)
    assert sent[2].get("tools") == sent[1].get("tools")
    assert sent[2].get("system") == sent[1].get("system")


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_429_is_retried_then_succeeds(
    kind: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    services: Services,
) -> None:
    fake = fakes[kind]
    fake.script(Fail(429, "slow down", retry_after=0.3), Reply(text="Fine now."))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    chunks = await send(user, chat_id, "hello")
    assert "error" not in [c["type"] for c in chunks]
    requests = fake.model_requests
    assert len(requests) == 2
    waited = requests[1].received_monotonic - requests[0].received_monotonic
    assert waited >= 0.25, "Retry-After was not honoured"
    chat = await wait_until_idle(user, chat_id)
    assert chat["messages"][-1]["status"] == "ok"
    assert chat["messages"][-1]["content"] == "Fine now."


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_5xx_until_failure_keeps_the_error(
    kind: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    services: Services,
) -> None:
    fake = fakes[kind]
    fake.script(*[Fail(500, "upstream broke", retry_after=0.01) for _ in range(4)])
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    chunks = await send(user, chat_id, "hello")
    errors = [c for c in chunks if c["type"] == "error"]
    assert len(errors) == 1 and "upstream broke" in errors[0]["errorText"]
    assert len(fake.model_requests) == 4  # the first try and three retries, then no more
    chat = await wait_until_idle(user, chat_id)
    failed = chat["messages"][-1]
    assert failed["role"] == "assistant" and failed["status"] == "failed"
    assert "upstream broke" in failed["error"]
    async with services.sessions() as db:
        logged = (
            await db.scalars(select(LlmRequest).where(LlmRequest.chat_id == uuid.UUID(chat_id)))
        ).all()
    assert len(logged) == 1 and logged[0].error and "upstream broke" in logged[0].error


@pytest.mark.parametrize("kind", KINDS)
async def test_stream_cut_mid_way_is_stored_incomplete(
    kind: str, user: Client, fakes: dict[str, FakeProviderServer], registry: ModelRegistry
) -> None:
    fake = fakes[kind]
    fake.script(Cut(after_events=6, reply=Reply(text="The answer begins here and then " * 5)))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    chunks = await send(user, chat_id, "hello")
    assert any(c["type"] == "error" for c in chunks)
    chat = await wait_until_idle(user, chat_id)
    cut = chat["messages"][-1]
    assert cut["status"] == "incomplete"
    assert cut["content"] and "The answer begins here".startswith(cut["content"][:10])
    assert cut["error"]


async def test_round_limit_ends_the_turn_clearly(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    services: Services,
) -> None:
    services.settings = services.settings.model_copy(update={"max_rounds": 3})
    fake = fakes["openai"]
    fake.script(*[Reply(tool_calls=[ToolCall("list_files", {"path": "."})]) for _ in range(5)])
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    chunks = await send(user, chat_id, "loop forever")
    errors = [c["errorText"] for c in chunks if c["type"] == "error"]
    assert errors == ["This turn reached its limit of 3 model rounds and was ended."]
    assert len(fake.model_requests) == 3
    chat = await wait_until_idle(user, chat_id)
    rounds = [m for m in chat["messages"] if m["role"] == "assistant"]
    assert len(rounds) == 3
    assert all(m["tool_calls"][0]["status"] == "done" for m in rounds)
    assert rounds[-1]["error"] == errors[0]


async def test_the_request_log_times_a_request_by_the_clock(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    services: Services,
    clock: ShiftedClock,
) -> None:
    fake = fakes["openai"]
    answered = asyncio.Event()
    fake.script(Reply(text="Slowly.", hold=answered))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    sending = asyncio.create_task(send(user, chat_id, "Take your time"))
    await fake.wait_for_request(0)
    clock.advance(seconds=90)  # the provider thinks for a minute and a half
    answered.set()
    assert "error" not in [c["type"] for c in await sending]
    async with services.sessions() as db:
        [logged] = (
            await db.scalars(select(LlmRequest).where(LlmRequest.chat_id == uuid.UUID(chat_id)))
        ).all()
    assert 90_000 <= logged.duration_ms < 100_000


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_stop_cancels_the_upstream_request(
    kind: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    services: Services,
) -> None:
    fake = fakes[kind]
    fake.script(Hang(after_events=5))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "think for ever"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as response:
        record = await fake.wait_for_request(0)
        await asyncio.wait_for(record.hanging.wait(), 5)  # the turn is streaming, for ever
        # A streaming turn holds no pooled connection (the route's went back when it returned);
        # one it held would stay out as long as it hangs. The supervisor's ticks borrow one now
        # and then, so the pool has to be seen empty once, not at every look.
        pool = services.engine.pool
        await wait_until(
            lambda: pool.checkedout() == 0,  # type: ignore[attr-defined]
            within=1,
            failure=lambda: f"{pool.checkedout()} connections out",  # type: ignore[attr-defined]
        )
        assert (await user.post(f"/api/chats/{chat_id}/stop")).status_code == 202
        body = (await response.aread()).decode()
    cancelled = await fake.wait_cancelled(0, within=2.0)
    assert cancelled.cancelled
    assert '"type":"abort"' in body
    chat = await wait_until_idle(user, chat_id)
    assert chat["messages"][-1]["status"] == "cancelled"
    async with services.sessions() as db:
        logged = (
            await db.scalars(select(LlmRequest).where(LlmRequest.chat_id == uuid.UUID(chat_id)))
        ).all()
    assert [row.error for row in logged] == ["cancelled"]


async def test_a_crash_mid_tool_is_replayed_as_interrupted(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    services: Services,
) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from app.models import Chat, ChatLlmTool

    fake = fakes["anthropic"]
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["anthropic"]})).json()["id"]
    # A process dies while its tool runs: simulate by storing what it left behind.
    now = services.clock.now()
    async with services.sessions() as db:
        await append(db, uuid.UUID(chat_id), role="user", content="list", created_at=now)
        round_row = await append(
            db,
            uuid.UUID(chat_id),
            role="assistant",
            content="Looking.",
            status="ok",
            model=MODEL_IDS["anthropic"],
            created_at=now,
        )
        db.add(
            ChatLlmTool(
                chat_id=uuid.UUID(chat_id),
                message_id=round_row.id,
                tool_call_id="toolu_crashed",
                name="list_files",
                arguments={"path": "."},
                status="running",
                created_at=now,
                updated_at=now,
            )
        )
        await append(
            db,
            uuid.UUID(chat_id),
            role="assistant",
            content="half a thou",
            status="streaming",
            created_at=now,
        )
        await db.execute(
            update(Chat)
            .where(Chat.id == uuid.UUID(chat_id))
            .values(turn_owner="dead", turn_lease_until=now - timedelta(seconds=1))
        )
        await db.commit()

    fake.script(Reply(text="Sorry, that was interrupted."))
    await send(user, chat_id, "try again")
    [request] = bodies(fake)
    messages = request["messages"]
    assistant = messages[1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][-1] == {
        "type": "tool_use",
        "id": "toolu_crashed",
        "name": "list_files",
        "input": {"path": "."},
    }
    result = messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_crashed"
    assert "interrupted" in result["content"][0]["text"]
    chat = await wait_until_idle(user, chat_id)
    statuses = [(m["role"], m["status"]) for m in chat["messages"]]
    assert statuses[2] == ("assistant", "incomplete")
    assert chat["messages"][1]["tool_calls"][0]["status"] == "cancelled"
    assert statuses[-1] == ("assistant", "ok")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_streaming_rounds_text_reaches_its_row_while_it_streams(
    kind: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: ModelRegistry,
    services: Services,
) -> None:
    """What the client has seen is in the round's row within half a second, while the round
    is still `streaming`: a process killed now would lose none of it."""
    fake = fakes[kind]
    said = "Every word of this goes to the row before the round ends. " * 3
    fake.script(Hang(after_events=12, reply=Reply(text=said, chunk_chars=8)))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS[kind]})).json()["id"]
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "talk, then hang"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as response:
        record = await fake.wait_for_request(0)
        await asyncio.wait_for(record.hanging.wait(), 5)
        seen = ""
        lines = response.aiter_lines()
        async for line in lines:
            if line.startswith("data: {") and '"text-delta"' in line:
                seen += json.loads(line[6:])["delta"]
            if seen and said.startswith(seen) and len(seen) >= 8 * 5:
                break

        async def stored() -> tuple[str, str] | None:
            async with services.sessions() as db:
                row = (
                    await db.execute(
                        select(Message.status, Message.content)
                        .where(Message.chat_id == uuid.UUID(chat_id), Message.role == "assistant")
                        .order_by(Message.id.desc())
                    )
                ).first()
            # All the client has read, less at most the delta in flight at the last write.
            caught_up = row is not None and len(row.content) >= len(seen) - 8
            return (row.status, row.content) if row is not None and caught_up else None

        status, content = await wait_until(stored, within=3, failure="no text in the row")
        assert status == "streaming"
        assert said.startswith(content)
        assert (await user.post(f"/api/chats/{chat_id}/stop")).status_code == 202
        async for _ in lines:
            pass
    chat = await wait_until_idle(user, chat_id)
    last = chat["messages"][-1]
    assert last["status"] == "cancelled" and said.startswith(last["content"])
    assert len(last["content"]) >= len(content)
