"""Turns over real HTTP with the offline demo model: the stream, the stored rows, the lease."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from app.agent import leases
from app.agent.turn import Turn
from app.llm.demo import GREETING as DEMO_GREETING
from app.models import Chat, LlmRequest
from app.services import Services
from tests.conftest import NewUser
from tests.support import Client, parse_stream, wait_until_idle

pytestmark = pytest.mark.usefixtures("services")


async def new_chat(client: Client, **body: object) -> str:
    return (await client.post("/api/chats", json=body)).json()["id"]


async def test_demo_turn_streams_text_tool_call_and_result(user: Client) -> None:
    chat_id = await new_chat(user)
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Hi there"})
    assert response.status_code == 200
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = parse_stream(response.text)
    types = [c["type"] for c in chunks]
    assert types[0] == "start" and isinstance(chunks[0]["messageId"], str)
    assert types[1] == "data-user-message"
    assert types[-3:] == ["data-usage", "finish", "[DONE]"]
    assert types.count("data-assistant-message") == 2
    assert "tool-input-available" in types and "tool-output-available" in types
    text = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    assert "not a language model" in text and 'You wrote "Hi there"' in text
    output = next(c for c in chunks if c["type"] == "tool-output-available")
    assert output["output"] == ". is empty."

    chat = await wait_until_idle(user, chat_id)
    user_id = next(c for c in chunks if c["type"] == "data-user-message")["data"]["id"]
    round_ids = [c["data"]["id"] for c in chunks if c["type"] == "data-assistant-message"]
    assert [m["id"] for m in chat["messages"]] == [user_id, *round_ids]
    first, second = chat["messages"][1:]
    assert first["status"] == second["status"] == "ok"
    assert first["model"] == "demo/scripted"
    [call] = first["tool_calls"]
    assert (call["name"], call["status"], call["result"]) == ("list_files", "done", ". is empty.")
    assert second["content"] in text
    usage = next(c for c in chunks if c["type"] == "data-usage")["data"]
    assert usage["input_tokens"] == first["usage"]["input_tokens"] + second["usage"]["input_tokens"]
    assert chat["title"] == "Hi there"


async def test_every_model_request_is_logged(user: Client, services: Services) -> None:
    chat_id = await new_chat(user)
    await user.post(f"/api/chats/{chat_id}/messages", json={"content": "log me"})
    await wait_until_idle(user, chat_id)
    async with services.sessions() as db:
        rows = (
            await db.scalars(select(LlmRequest).where(LlmRequest.chat_id == uuid.UUID(chat_id)))
        ).all()
    assert len(rows) == 2
    assert all(r.model == "demo/scripted" and r.provider == "demo" for r in rows)
    assert all(r.error is None and r.duration_ms is not None and r.output_tokens for r in rows)
    assert all(r.message_id is not None for r in rows)


@pytest.mark.slow
async def test_second_send_while_running_is_409(user: Client) -> None:
    chat_id = await new_chat(user)
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "first"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as first:
        assert first.status_code == 200
        second = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "second"})
        assert second.status_code == 409
        assert second.json()["detail"] == "a turn is already running in this chat"
        await first.aread()
    chat = await wait_until_idle(user, chat_id)
    assert [m["content"] for m in chat["messages"] if m["role"] == "user"] == ["first"]
    # Once the turn ended the chat takes messages again.
    third = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "third"})
    assert third.status_code == 200


async def test_a_lapsed_lease_of_a_dead_process_frees_the_chat(
    user: Client, services: Services
) -> None:
    chat_id = await new_chat(user)
    async with services.sessions() as db:
        await db.execute(
            update(Chat)
            .where(Chat.id == uuid.UUID(chat_id))
            .values(
                turn_owner="dead-process",
                turn_lease_until=services.clock.now() + timedelta(seconds=30),
            )
        )
        await db.commit()
    blocked = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "x"})
    assert blocked.status_code == 409
    async with services.sessions() as db:
        await db.execute(
            update(Chat)
            .where(Chat.id == uuid.UUID(chat_id))
            .values(turn_lease_until=services.clock.now() - timedelta(seconds=1))
        )
        await db.commit()
    freed = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "x"})
    assert freed.status_code == 200


async def test_client_disconnect_cancels_nothing(user: Client) -> None:
    chat_id = await new_chat(user)
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "leave early"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as response:
        async for line in response.aiter_lines():
            if "data-assistant-message" in line:
                break  # the client goes away mid-turn
    chat = await wait_until_idle(user, chat_id)
    assistant = [m for m in chat["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 2 and all(m["status"] == "ok" for m in assistant)
    assert assistant[1]["content"].startswith('You wrote "leave early"')


async def test_stop_cancels_and_keeps_partial_text(user: Client) -> None:
    chat_id = await new_chat(user)
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "stop me"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as response:
        seen: list[str] = []
        lines = response.aiter_lines()
        async for line in lines:
            if line.startswith("data: "):
                seen.append(line)
            if sum("text-delta" in s for s in seen) >= 3:
                stopped = await user.post(f"/api/chats/{chat_id}/stop")
                assert stopped.status_code == 202
                break
        rest = [line async for line in lines if line.startswith("data: ")]
    body = "\n\n".join(seen + rest)
    assert '"type":"abort"' in body
    chat = await wait_until_idle(user, chat_id)
    stopped_round = chat["messages"][-1]
    assert stopped_round["status"] == "cancelled"
    assert stopped_round["content"].startswith("Hello!")
    assert len(stopped_round["content"]) < len(DEMO_GREETING)
    assert stopped_round["tool_calls"] == []
    assert (await user.post(f"/api/chats/{chat_id}/stop")).status_code == 409


async def test_stop_without_a_turn_is_409_and_foreign_chat_404(
    user: Client, new_user: NewUser
) -> None:
    chat_id = await new_chat(user)
    assert (await user.post(f"/api/chats/{chat_id}/stop")).status_code == 409
    other = await new_user()
    assert (await other.post(f"/api/chats/{chat_id}/stop")).status_code == 404
    send = await other.post(f"/api/chats/{chat_id}/messages", json={"content": "hi"})
    assert send.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"content": ""},
        {"content": "   \n "},
        {},
        {"content": 42},
        {"content": "x", "attachments": "nope"},
        {"content": "x", "attachments": ["not-a-uuid"]},
        {"content": "x", "model": "nope/none"},
        {"content": "x", "extra": True},
    ],
)
async def test_bad_message_bodies_are_422_and_store_nothing(
    user: Client, body: dict[str, object]
) -> None:
    chat_id = await new_chat(user)
    response = await user.post(f"/api/chats/{chat_id}/messages", json=body)
    assert response.status_code == 422
    assert (await user.get(f"/api/chats/{chat_id}")).json()["messages"] == []


async def test_foreign_or_unknown_attachment_is_404_and_stores_nothing(user: Client) -> None:
    chat_id = await new_chat(user)
    response = await user.post(
        f"/api/chats/{chat_id}/messages",
        json={"content": "see file", "attachments": [str(uuid.uuid4())]},
    )
    assert response.status_code == 404
    assert (await user.get(f"/api/chats/{chat_id}")).json()["messages"] == []


async def test_deleting_a_chat_stops_its_turn(user: Client, services: Services) -> None:
    chat_id = await new_chat(user)
    async with user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": "delete me"},
        headers={"X-CSRF-Token": user.csrf or ""},
    ) as response:
        async for line in response.aiter_lines():
            if "text-delta" in line:
                break
        turn = services.turns.local_turn(uuid.UUID(chat_id))
        assert turn is not None and turn.task is not None
        assert (await user.delete(f"/api/chats/{chat_id}")).status_code == 204
        # The delete waits for the turn to stop: it has ended by the time the 204 arrives.
        assert turn.task.done()
        assert services.turns.local_turn(uuid.UUID(chat_id)) is None
    assert (await user.get(f"/api/chats/{chat_id}")).status_code == 404


async def test_attachments_are_kept_and_returned_with_the_message(
    user: Client, services: Services
) -> None:
    from app.models import Upload

    chat_id = await new_chat(user)
    upload_id = uuid.uuid4()
    async with services.sessions() as db:
        db.add(
            Upload(
                id=upload_id,
                user_id=uuid.UUID(user.user["id"]),
                filename="chart one.png",
                stored_path=f"uploads/{upload_id}/chart one.png",
                mime="image/png",
                size=20431,
                sha256="a" * 64,
                created_at=services.clock.now(),
            )
        )
        await db.commit()
    response = await user.post(
        f"/api/chats/{chat_id}/messages",
        json={"content": "see this", "attachments": [str(upload_id), str(upload_id)]},
    )
    assert response.status_code == 200
    chat = await wait_until_idle(user, chat_id)
    [attachment] = chat["messages"][0]["attachments"]
    assert attachment["id"] == str(upload_id)
    assert attachment["url"] == f"/data/{upload_id}/chart%20one.png"
    assert attachment["path"] == f"uploads/{upload_id}/chart one.png"
    assert attachment["mime"] == "image/png" and attachment["size"] == 20431


async def test_a_turn_that_fails_before_its_first_request_closes_the_round_it_was_given(
    user: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The send route stores the first round's row with the message; a turn that never reaches
    the model still closes that row, with the error, instead of leaving it `streaming`. What the
    user is told names the request, never the fault's own text (that goes to the log)."""

    async def broken(self: Turn) -> None:
        raise RuntimeError("history unreadable")

    chat_id = await new_chat(user)
    monkeypatch.setattr(Turn, "_history", broken)
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Hi"})
    chunks = parse_stream(response.text)
    [error] = [c for c in chunks if c["type"] == "error"]
    request_id = response.headers["x-request-id"]
    assert error["errorText"] == (
        f"hearth could not finish this turn because of an internal error (request {request_id})."
    )
    monkeypatch.undo()
    chat = await wait_until_idle(user, chat_id)
    user_message, answer = chat["messages"]
    assert (user_message["role"], user_message["content"]) == ("user", "Hi")
    assert answer["role"] == "assistant" and answer["status"] == "failed"
    assert answer["id"] > user_message["id"]
    assert answer["error"] == error["errorText"]
    # The chat is free again and answers the next message normally.
    again = parse_stream(
        (await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Hi"})).text
    )
    assert "error" not in [c["type"] for c in again]


@pytest.mark.slow
async def test_the_next_message_sent_on_done_finds_the_chat_free(
    user: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow release widens the moment between a turn's last event and its letting go of the
    # chat; [DONE] must come after it, so a client that sends on [DONE] is never told 409.
    release = leases.release

    async def slow_release(*args: Any, **kwargs: Any) -> None:
        await asyncio.sleep(0.3)
        await release(*args, **kwargs)

    monkeypatch.setattr(leases, "release", slow_release)
    chat_id = await new_chat(user)
    for question in ("One", "Two", "Three"):
        response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": question})
        assert response.status_code == 200, response.text
        assert parse_stream(response.text)[-1]["type"] == "[DONE]"
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    assert chat["running"] is False
    assert [m["content"] for m in chat["messages"] if m["role"] == "user"] == [
        "One",
        "Two",
        "Three",
    ]
