"""Chats over real HTTP: CRUD, keyset pagination under concurrent inserts, ownership, bad input."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from app.chats.schemas import ChatDetailOut, ChatOut, ChatPage
from app.models import ActivatedTool, Chat, ChatLlmTool, Message, Upload
from app.services import Services
from tests.chat_rows import append
from tests.conftest import NewUser
from tests.support import Client

pytestmark = pytest.mark.usefixtures("services")


async def test_create_defaults_to_first_available_model(user: Client) -> None:
    response = await user.post("/api/chats", json={})
    assert response.status_code == 201
    chat = ChatOut.model_validate(response.json())
    assert chat.model == "demo/scripted"
    assert chat.title is None
    assert chat.created_at == chat.updated_at


async def test_create_with_title_and_model(user: Client) -> None:
    response = await user.post(
        "/api/chats", json={"title": "  Trip   planning ", "model": "demo/scripted"}
    )
    assert response.status_code == 201
    assert response.json()["title"] == "Trip planning"


@pytest.mark.parametrize(
    ("model", "fragment"),
    [
        ("nope/nothing", "unknown model"),
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("lmstudio/qwen3-8b", "does not answer"),
    ],
)
async def test_create_with_unknown_or_unavailable_model_is_422(
    user: Client, model: str, fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    response = await user.post("/api/chats", json={"model": model})
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "model"]
    assert fragment in problem["msg"]


async def test_get_returns_chat_with_messages_in_order(user: Client, services: Services) -> None:
    chat_id = (await user.post("/api/chats", json={"title": "t"})).json()["id"]
    now = datetime.now(UTC)
    async with services.sessions() as db:
        await append(db, uuid.UUID(chat_id), role="user", content="hi", created_at=now)
        second = await append(
            db,
            uuid.UUID(chat_id),
            role="assistant",
            content="hello",
            status="ok",
            model="demo/scripted",
            input_tokens=10,
            output_tokens=3,
            created_at=now,
        )
        db.add(second)
        await db.flush()
        db.add(
            ChatLlmTool(
                chat_id=uuid.UUID(chat_id),
                message_id=second.id,
                tool_call_id="call_1",
                name="list_files",
                arguments={"path": "."},
                result="[]",
                status="done",
                created_at=now,
                updated_at=now,
            )
        )
        await db.commit()
    response = await user.get(f"/api/chats/{chat_id}")
    assert response.status_code == 200
    detail = ChatDetailOut.model_validate(response.json())
    assert [m.content for m in detail.messages] == ["hi", "hello"]
    assert detail.messages[0].id < detail.messages[1].id
    assert detail.messages[0].usage is None and detail.messages[0].tool_calls == []
    assert detail.messages[1].usage is not None
    assert detail.messages[1].usage.model_dump() == {
        "input_tokens": 10,
        "output_tokens": 3,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    [call] = detail.messages[1].tool_calls
    assert (call.tool_call_id, call.name, call.arguments, call.status) == (
        "call_1",
        "list_files",
        {"path": "."},
        "done",
    )
    assert detail.summaries == []


async def test_patch_renames_and_switches_model(user: Client) -> None:
    created = (await user.post("/api/chats", json={"title": "old"})).json()
    response = await user.patch(f"/api/chats/{created['id']}", json={"title": "new"})
    assert response.status_code == 200
    assert response.json()["title"] == "new"
    assert response.json()["model"] == created["model"]
    assert response.json()["updated_at"] >= created["updated_at"]
    cleared = await user.patch(f"/api/chats/{created['id']}", json={"title": None})
    assert cleared.json()["title"] is None
    same = await user.patch(f"/api/chats/{created['id']}", json={"model": "demo/scripted"})
    assert same.status_code == 200


@pytest.mark.parametrize(
    "body",
    [{"model": None}, {"model": "nope/x"}, {"model": ""}, {"title": 5}, {"colour": "red"}, []],
)
async def test_patch_rejects_bad_input_and_changes_nothing(user: Client, body: object) -> None:
    created = (await user.post("/api/chats", json={"title": "keep"})).json()
    response = await user.patch(f"/api/chats/{created['id']}", json=body)
    assert response.status_code == 422
    after = (await user.get(f"/api/chats/{created['id']}")).json()
    assert (after["title"], after["model"], after["updated_at"]) == (
        "keep",
        created["model"],
        created["updated_at"],
    )


async def test_delete_removes_messages_tools_and_activations(
    user: Client, services: Services
) -> None:
    chat_id = uuid.UUID((await user.post("/api/chats", json={})).json()["id"])
    now = datetime.now(UTC)
    async with services.sessions() as db:
        message = await append(db, chat_id, role="assistant", content="x", created_at=now)
        db.add(
            ChatLlmTool(
                chat_id=chat_id,
                message_id=message.id,
                tool_call_id="c",
                name="n",
                created_at=now,
                updated_at=now,
            )
        )
        db.add(
            ActivatedTool(
                chat_id=chat_id, message_id=message.id, kind="mcp", ref="time", created_at=now
            )
        )
        db.add(
            Upload(
                user_id=uuid.UUID(user.user["id"]),
                chat_id=chat_id,
                filename="a.txt",
                stored_path="uploads/x/a.txt",
                mime="text/plain",
                size=1,
                sha256="0" * 64,
                created_at=now,
            )
        )
        await db.commit()
    assert (await user.delete(f"/api/chats/{chat_id}")).status_code == 204
    assert (await user.get(f"/api/chats/{chat_id}")).status_code == 404
    assert (await user.delete(f"/api/chats/{chat_id}")).status_code == 404
    async with services.sessions() as db:
        for model in (Chat, Message, ChatLlmTool, ActivatedTool):
            assert await db.scalar(select(func.count()).select_from(model)) == 0, model
        # The user's upload outlives the chat it was sent in.
        assert await db.scalar(select(Upload.chat_id)) is None


async def test_list_is_newest_activity_first_and_pages(user: Client) -> None:
    ids = [(await user.post("/api/chats", json={"title": f"c{i}"})).json()["id"] for i in range(7)]
    await user.patch(f"/api/chats/{ids[0]}", json={"title": "bumped"})
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = ChatPage.model_validate((await user.get("/api/chats", params=params)).json())
        assert len(page.items) <= 3
        seen += [str(chat.id) for chat in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [ids[0], *reversed(ids[1:])]


async def test_pagination_has_no_duplicates_or_gaps_while_chats_are_added(user: Client) -> None:
    existing = [(await user.post("/api/chats", json={})).json()["id"] for _ in range(25)]
    seen: list[str] = []
    added: list[str] = []
    cursor = None
    while True:
        params = {"limit": 4} | ({"cursor": cursor} if cursor else {})
        page_task = user.get("/api/chats", params=params)
        add_tasks = [user.post("/api/chats", json={}) for _ in range(2)]
        page, *new = await asyncio.gather(page_task, *add_tasks)
        added += [response.json()["id"] for response in new]
        body = page.json()
        seen += [chat["id"] for chat in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)), "a chat was served twice"
    assert set(existing) <= set(seen), "a chat that existed before paging was skipped"
    assert set(seen) <= set(existing) | set(added)


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 201},
        {"limit": "many"},
        {"cursor": "not-a-cursor"},
        {"cursor": "W10"},
        {"cursor": "x" * 500},
    ],
)
async def test_list_rejects_bad_paging(user: Client, params: dict[str, object]) -> None:
    response = await user.get("/api/chats", params=params)
    assert response.status_code == 422


async def test_limit_defaults_to_50(user: Client) -> None:
    for _ in range(51):
        await user.post("/api/chats", json={})
    page = (await user.get("/api/chats")).json()
    assert len(page["items"]) == 50
    assert page["next_cursor"]


async def test_another_users_chat_is_404_everywhere(user: Client, new_user: NewUser) -> None:
    mine = (await user.post("/api/chats", json={"title": "private"})).json()["id"]
    other = await new_user()
    for method, kwargs in [
        ("GET", {}),
        ("PATCH", {"json": {"title": "mine now"}}),
        ("DELETE", {}),
    ]:
        response = await other.request(method, f"/api/chats/{mine}", **kwargs)
        assert response.status_code == 404, method
        assert response.json() == {"detail": "chat not found"}
    assert (await other.get("/api/chats")).json()["items"] == []
    assert (await user.get(f"/api/chats/{mine}")).json()["title"] == "private"


@pytest.mark.parametrize(
    "body",
    [
        {"title": 123},
        {"title": "x" * 201},
        {"model": ["demo/scripted"]},
        {"unknown": 1},
        "just a string",
        [1, 2],
    ],
)
async def test_create_rejects_bad_bodies(user: Client, body: object) -> None:
    response = await user.post("/api/chats", json=body)
    assert response.status_code == 422
    assert (await user.get("/api/chats")).json()["items"] == []


async def test_malformed_json_is_422(user: Client) -> None:
    response = await user.post(
        "/api/chats", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422


async def test_huge_body_is_413_and_stores_nothing(user: Client) -> None:
    response = await user.post("/api/chats", json={"title": "x" * (5 * 1024 * 1024)})
    assert response.status_code == 413
    assert "too large" in response.json()["detail"] or "over" in response.json()["detail"]
    assert (await user.get("/api/chats")).json()["items"] == []


async def test_huge_chunked_body_is_413(user: Client) -> None:
    async def chunks():  # no Content-Length: the limit is counted while the body streams
        for _ in range(6):
            yield b" " * (1024 * 1024)

    response = await user.post(
        "/api/chats", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413


@pytest.mark.parametrize("chat_id", ["not-a-uuid", "1", "0" * 33])
async def test_malformed_chat_id_is_422(user: Client, chat_id: str) -> None:
    response = await user.get(f"/api/chats/{chat_id}")
    assert response.status_code == 422
    assert [error["loc"] for error in response.json()["detail"]] == [["path", "chat_id"]]


async def test_an_encoded_slash_in_a_chat_id_is_an_unknown_path(user: Client) -> None:
    # The path decodes to more segments than any chat route has: no route, the JSON 404.
    response = await user.get("/api/chats/..%2F..%2Fetc")
    assert (response.status_code, response.json()) == (404, {"detail": "Not Found"})
