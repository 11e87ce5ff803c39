"""Branches (API.md "Branches"): edit a message, regenerate an answer, switch between them.

A chat is a tree; the active path is what the API shows and what the model is sent. These tests
run turns against the fake OpenAI server and check both sides: the stored tree as
`GET /api/chats/{id}` shows it, and the conversation each request carried upstream.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

from app.models import ActivatedTool, Message
from app.services import Services
from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle
from tests.wire import conversation

pytestmark = pytest.mark.usefixtures("services", "registry", "catalogue")


async def new_chat(user: Client) -> str:
    return (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]


async def send(user: Client, chat_id: str, content: str, **body: Any) -> list[dict[str, Any]]:
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": content, **body})
    assert response.status_code == 200, response.text
    chunks = parse_stream(response.text)
    assert "error" not in [c["type"] for c in chunks], chunks
    await wait_until_idle(user, chat_id)
    return chunks


async def regenerate(user: Client, chat_id: str, message_id: int) -> list[dict[str, Any]]:
    response = await user.post(f"/api/chats/{chat_id}/regenerate", json={"message_id": message_id})
    assert response.status_code == 200, response.text
    chunks = parse_stream(response.text)
    assert "error" not in [c["type"] for c in chunks], chunks
    await wait_until_idle(user, chat_id)
    return chunks


async def chat(user: Client, chat_id: str) -> dict[str, Any]:
    response = await user.get(f"/api/chats/{chat_id}")
    assert response.status_code == 200, response.text
    return response.json()


def texts(detail: dict[str, Any]) -> list[str]:
    return [m["content"] for m in detail["messages"]]


def said(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation a request carried, as (role, text) pairs."""
    return [
        (m["role"], m["content"] if isinstance(m["content"], str) else "")
        for m in conversation(body)
        if m["role"] != "system"
    ]


def by_content(detail: dict[str, Any], content: str) -> dict[str, Any]:
    return next(m for m in detail["messages"] if m["content"] == content)


async def two_turns(user: Client, fake: FakeProviderServer) -> tuple[str, dict[str, Any]]:
    fake.script(Reply(text="A1."), Reply(text="A2."))
    chat_id = await new_chat(user)
    await send(user, chat_id, "Q1")
    await send(user, chat_id, "Q2")
    return chat_id, await chat(user, chat_id)


async def test_a_linear_chat_is_one_branch_with_parents_and_no_alternatives(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    _, detail = await two_turns(user, fakes["openai"])
    messages = detail["messages"]
    assert texts(detail) == ["Q1", "A1.", "Q2", "A2."]
    assert [m["parent_id"] for m in messages] == [None, *(m["id"] for m in messages[:-1])]
    assert [m["sibling_ids"] for m in messages] == [[m["id"]] for m in messages]
    assert detail["active_leaf_id"] == messages[-1]["id"]
    listed = (await user.get("/api/chats")).json()["items"]
    assert listed[0]["active_leaf_id"] == messages[-1]["id"]


async def test_an_edit_is_a_sibling_and_the_model_sees_only_its_branch(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    chat_id, before = await two_turns(user, fake)
    q2, a1 = by_content(before, "Q2"), by_content(before, "A1.")
    fake.script(Reply(text="A2 edited."))
    chunks = await send(user, chat_id, "Q2 edited", parent_id=q2["parent_id"])
    after = await chat(user, chat_id)
    assert texts(after) == ["Q1", "A1.", "Q2 edited", "A2 edited."]
    edited = by_content(after, "Q2 edited")
    announced = next(c["data"]["id"] for c in chunks if c["type"] == "data-user-message")
    assert edited["id"] == announced and edited["parent_id"] == a1["id"]
    assert edited["sibling_ids"] == [q2["id"], edited["id"]]
    assert after["active_leaf_id"] == after["messages"][-1]["id"]
    assert said(fake.model_requests[-1].body) == [
        ("user", "Q1"),
        ("assistant", "A1."),
        ("user", "Q2 edited"),
    ]


async def test_a_regenerated_answer_is_a_sibling_sent_the_same_conversation(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    chat_id, before = await two_turns(user, fake)
    q2, a2 = by_content(before, "Q2"), by_content(before, "A2.")
    fake.script(Reply(text="A2 again."))
    chunks = await regenerate(user, chat_id, q2["id"])
    assert [c["data"]["id"] for c in chunks if c["type"] == "data-user-message"] == [q2["id"]]
    after = await chat(user, chat_id)
    assert texts(after) == ["Q1", "A1.", "Q2", "A2 again."]
    again = after["messages"][-1]
    assert again["parent_id"] == q2["id"]
    assert again["sibling_ids"] == [a2["id"], again["id"]]
    first, second = fake.model_requests[-2].body, fake.model_requests[-1].body
    assert conversation(first) == conversation(second)
    assert said(second)[-1] == ("user", "Q2")


async def test_switching_branches_shows_the_newest_leaf_and_later_turns_follow_it(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    chat_id, before = await two_turns(user, fake)
    q2 = by_content(before, "Q2")
    fake.script(Reply(text="A2 edited."))
    await send(user, chat_id, "Q2 edited", parent_id=q2["parent_id"])

    response = await user.put(f"/api/chats/{chat_id}/active", json={"message_id": q2["id"]})
    assert response.status_code == 200, response.text
    switched = response.json()
    assert texts(switched) == ["Q1", "A1.", "Q2", "A2."]
    assert switched == await chat(user, chat_id)
    assert switched["active_leaf_id"] == by_content(switched, "A2.")["id"]
    assert len(by_content(switched, "Q2")["sibling_ids"]) == 2

    # From the root, at each fork the newest child: the edited branch.
    root = switched["messages"][0]["id"]
    back = (await user.put(f"/api/chats/{chat_id}/active", json={"message_id": root})).json()
    assert texts(back) == ["Q1", "A1.", "Q2 edited", "A2 edited."]

    await user.put(f"/api/chats/{chat_id}/active", json={"message_id": q2["id"]})
    fake.script(Reply(text="A3."))
    await send(user, chat_id, "Q3")
    assert texts(await chat(user, chat_id)) == ["Q1", "A1.", "Q2", "A2.", "Q3", "A3."]
    assert said(fake.model_requests[-1].body) == [
        ("user", "Q1"),
        ("assistant", "A1."),
        ("user", "Q2"),
        ("assistant", "A2."),
        ("user", "Q3"),
    ]


async def test_a_new_root_and_a_title_that_follows_the_first_message(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    chat_id, before = await two_turns(user, fake)
    assert (await user.get(f"/api/chats/{chat_id}")).json()["title"] == "Q1"
    fake.script(Reply(text="Fresh."))
    await send(user, chat_id, "Q1 rethought", parent_id=None)
    after = await chat(user, chat_id)
    assert texts(after) == ["Q1 rethought", "Fresh."]
    assert after["messages"][0]["parent_id"] is None
    assert after["messages"][0]["sibling_ids"] == [
        before["messages"][0]["id"],
        after["messages"][0]["id"],
    ]
    assert after["title"] == "Q1 rethought"
    assert said(fake.model_requests[-1].body) == [("user", "Q1 rethought")]
    await user.put(f"/api/chats/{chat_id}/active", json={"message_id": before["messages"][0]["id"]})
    assert (await chat(user, chat_id))["title"] == "Q1"

    # A title the user gave stays whatever branch is shown.
    await user.patch(f"/api/chats/{chat_id}", json={"title": "Mine"})
    await user.put(f"/api/chats/{chat_id}/active", json={"message_id": after["messages"][0]["id"]})
    assert (await chat(user, chat_id))["title"] == "Mine"


async def test_each_branch_activates_groups_of_its_own(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    activate = ToolCall("activate_tools", {"groups": ["weather"]}, id="call_act")
    fake.script(Reply(tool_calls=[activate]), Reply(text="Active."))
    chat_id = await new_chat(user)
    await send(user, chat_id, "Turn on weather")
    first = await chat(user, chat_id)
    question = first["messages"][0]
    [on_a] = (await user.get(f"/api/chats/{chat_id}/activations")).json()

    # The other branch does not have it, and may activate it again at its own anchor.
    fake.script(Reply(text="Nothing active."))
    await send(user, chat_id, "What is on?", parent_id=None)
    assert (await user.get(f"/api/chats/{chat_id}/activations")).json() == []
    assert "mcp__weather__forecast" not in str(fake.model_requests[-1].body.get("tools"))
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]}, id="call_b")]),
        Reply(text="Active here too."),
    )
    await send(user, chat_id, "Turn it on here")
    [on_b] = (await user.get(f"/api/chats/{chat_id}/activations")).json()
    assert on_b["ref"] == on_a["ref"] == "weather" and on_b["message_id"] != on_a["message_id"]

    # A reset clears the branch shown; the other keeps its activation.
    assert (await user.delete(f"/api/chats/{chat_id}/activations")).status_code == 204
    assert (await user.get(f"/api/chats/{chat_id}/activations")).json() == []
    await user.put(f"/api/chats/{chat_id}/active", json={"message_id": question["id"]})
    assert (await user.get(f"/api/chats/{chat_id}/activations")).json() == [on_a]


# -- bad input -------------------------------------------------------------------------------


WRONG_IDS: list[Any] = ["5", 1.5, True, None, [1], {"id": 1}, 0, -3, 2**64]
"""Not a message id: a string, a float, a boolean, a list or an object, or out of range."""


async def test_a_message_id_of_the_wrong_type_or_range_is_a_422(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    chat_id, before = await two_turns(user, fakes["openai"])
    sent = len(fakes["openai"].model_requests)
    for value in WRONG_IDS:
        attempts = [("PUT", "active", {"message_id": value})]
        attempts.append(("POST", "regenerate", {"message_id": value}))
        if value is not None:  # `parent_id: null` is a new root
            attempts.append(("POST", "messages", {"content": "x", "parent_id": value}))
        for method, route, body in attempts:
            response = await user.request(method, f"/api/chats/{chat_id}/{route}", json=body)
            assert response.status_code == 422, (route, body, response.text)
    assert (await user.put(f"/api/chats/{chat_id}/active", json={})).status_code == 422
    assert (await user.post(f"/api/chats/{chat_id}/regenerate", json={})).status_code == 422
    assert len(fakes["openai"].model_requests) == sent
    assert await chat(user, chat_id) == before


async def message_count(services: Services) -> int:
    async with services.sessions() as db:
        return int(await db.scalar(select(func.count()).select_from(Message)) or 0)


async def test_ids_of_other_chats_and_other_users_are_404_and_change_nothing(
    user: Client, new_user: NewUser, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    chat_id, mine = await two_turns(user, fake)
    fake.script(Reply(text="Other."))
    other_chat = await new_chat(user)
    await send(user, other_chat, "Elsewhere")
    elsewhere = (await chat(user, other_chat))["messages"]
    stranger = await new_user()
    fake.script(Reply(text="Theirs."))
    theirs_chat = await new_chat(stranger)
    await send(stranger, theirs_chat, "Theirs")
    theirs = (await chat(stranger, theirs_chat))["messages"]
    stored, sent = await message_count(services), len(fake.model_requests)

    attempts: list[tuple[Client, str, str, dict[str, Any]]] = [
        # A parent, a question or a branch in another chat of the same user.
        (
            user,
            "POST",
            f"/api/chats/{chat_id}/messages",
            {"content": "x", "parent_id": elsewhere[-1]["id"]},
        ),
        (user, "POST", f"/api/chats/{chat_id}/regenerate", {"message_id": elsewhere[0]["id"]}),
        (user, "PUT", f"/api/chats/{chat_id}/active", {"message_id": elsewhere[-1]["id"]}),
        # Another user's messages.
        (
            user,
            "POST",
            f"/api/chats/{chat_id}/messages",
            {"content": "x", "parent_id": theirs[-1]["id"]},
        ),
        (user, "POST", f"/api/chats/{chat_id}/regenerate", {"message_id": theirs[0]["id"]}),
        (user, "PUT", f"/api/chats/{chat_id}/active", {"message_id": theirs[-1]["id"]}),
        # Another user's chat, with its own ids.
        (
            user,
            "POST",
            f"/api/chats/{theirs_chat}/messages",
            {"content": "x", "parent_id": theirs[-1]["id"]},
        ),
        (user, "POST", f"/api/chats/{theirs_chat}/regenerate", {"message_id": theirs[0]["id"]}),
        (user, "PUT", f"/api/chats/{theirs_chat}/active", {"message_id": theirs[0]["id"]}),
        (
            stranger,
            "PUT",
            f"/api/chats/{chat_id}/active",
            {"message_id": mine["messages"][0]["id"]},
        ),
        # Ids nobody has, and an unknown chat.
        (user, "POST", f"/api/chats/{chat_id}/messages", {"content": "x", "parent_id": 2**62}),
        (user, "PUT", f"/api/chats/{chat_id}/active", {"message_id": 2**62}),
        (
            user,
            "POST",
            f"/api/chats/{uuid.uuid4()}/regenerate",
            {"message_id": mine["messages"][0]["id"]},
        ),
    ]
    for client, method, url, body in attempts:
        response = await client.request(method, url, json=body)
        assert response.status_code == 404, (url, body, response.text)
    assert await message_count(services) == stored
    assert len(fake.model_requests) == sent
    assert await chat(user, chat_id) == mine
    assert (await chat(stranger, theirs_chat))["messages"] == theirs


async def test_regenerating_an_answer_is_a_404(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    chat_id, detail = await two_turns(user, fakes["openai"])
    stored = await message_count(services)
    response = await user.post(
        f"/api/chats/{chat_id}/regenerate", json={"message_id": detail["messages"][1]["id"]}
    )
    assert response.status_code == 404
    assert "user message" in response.json()["detail"]
    assert await message_count(services) == stored


async def test_a_parent_that_does_not_end_its_turn_is_a_422(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    listing = ToolCall("list_files", {"path": "."}, id="call_ls")
    fake.script(Reply(text="Looking.", tool_calls=[listing]), Reply(text="Nothing there."))
    chat_id = await new_chat(user)
    await send(user, chat_id, "What files?")
    detail = await chat(user, chat_id)
    looking = by_content(detail, "Looking.")
    stored, sent = await message_count(services), len(fake.model_requests)
    response = await user.post(
        f"/api/chats/{chat_id}/messages", json={"content": "x", "parent_id": looking["id"]}
    )
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "parent_id"]
    assert await message_count(services) == stored and len(fake.model_requests) == sent
    # The turn's last message, or its user message's parent, are fine.
    fake.script(Reply(text="Still nothing."))
    await send(user, chat_id, "Again?", parent_id=detail["messages"][-1]["id"])


async def test_edits_regenerations_and_switches_wait_for_a_running_turn(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    chat_id, detail = await two_turns(user, fake)
    q2 = by_content(detail, "Q2")
    held = asyncio.Event()
    fake.script(Reply(text="Slow.", hold=held))
    running = asyncio.create_task(
        user.post(f"/api/chats/{chat_id}/messages", json={"content": "Q3"})
    )
    await fake.wait_for_request(len(fake.model_requests))
    try:
        streaming = (await chat(user, chat_id))["messages"]
        assert streaming[-1]["status"] == "streaming"
        attempts = [
            ("POST", "messages", {"content": "x", "parent_id": q2["parent_id"]}),
            ("POST", "messages", {"content": "x", "parent_id": streaming[-1]["id"]}),
            ("POST", "regenerate", {"message_id": q2["id"]}),
            ("PUT", "active", {"message_id": q2["id"]}),
        ]
        for method, route, body in attempts:
            response = await user.request(method, f"/api/chats/{chat_id}/{route}", json=body)
            assert response.status_code == 409, (route, body, response.text)
    finally:
        held.set()
    assert (await running).status_code == 200
    await wait_until_idle(user, chat_id)
    assert texts(await chat(user, chat_id)) == ["Q1", "A1.", "Q2", "A2.", "Q3", "Slow."]


async def test_edits_regenerations_and_switches_wait_for_approvals(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    chat_id, detail = await two_turns(user, fake)
    q2 = by_content(detail, "Q2")
    write = ToolCall("write_file", {"path": "a.txt", "content": "a\n"}, id="call_w")
    fake.script(Reply(text="Writing.", tool_calls=[write]))
    await send(user, chat_id, "Write a file")
    paused = await chat(user, chat_id)
    assert paused["messages"][-1]["tool_calls"][0]["status"] == "pending"
    stored, sent = await message_count(services), len(fake.model_requests)
    for method, route, body in [
        ("POST", "messages", {"content": "x", "parent_id": q2["parent_id"]}),
        ("POST", "messages", {"content": "x"}),
        ("POST", "regenerate", {"message_id": q2["id"]}),
        ("PUT", "active", {"message_id": q2["id"]}),
    ]:
        response = await user.request(method, f"/api/chats/{chat_id}/{route}", json=body)
        assert response.status_code == 409, (route, response.text)
        assert "approvals" in response.json()["detail"]
    assert await message_count(services) == stored and len(fake.model_requests) == sent
    assert await chat(user, chat_id) == paused


async def test_a_resumed_turn_keeps_building_its_branch(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    write = ToolCall("write_file", {"path": "a.txt", "content": "a\n"}, id="call_w")
    fake.script(Reply(text="Writing.", tool_calls=[write]), Reply(text="Written."))
    chat_id = await new_chat(user)
    await send(user, chat_id, "Write a file")
    response = await user.post(
        f"/api/chats/{chat_id}/approvals",
        json={"decisions": [{"tool_call_id": "call_w", "approved": True}]},
    )
    assert response.status_code == 200
    await wait_until_idle(user, chat_id)
    detail = await chat(user, chat_id)
    assert texts(detail) == ["Write a file", "Writing.", "Written."]
    messages = detail["messages"]
    assert [m["parent_id"] for m in messages] == [None, messages[0]["id"], messages[1]["id"]]
    assert detail["active_leaf_id"] == messages[-1]["id"]


async def test_deleting_a_chat_removes_every_branch(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    chat_id, detail = await two_turns(user, fake)
    fake.script(Reply(text="Again."), Reply(text="Edited."))
    await regenerate(user, chat_id, detail["messages"][2]["id"])
    await send(user, chat_id, "Q1 edited", parent_id=None)
    assert (await user.delete(f"/api/chats/{chat_id}")).status_code == 204
    async with services.sessions() as db:
        left = await db.scalar(
            select(func.count()).select_from(Message).where(Message.chat_id == uuid.UUID(chat_id))
        )
        anchors = await db.scalar(select(func.count()).select_from(ActivatedTool))
    assert left == 0 and anchors == 0


async def test_the_chat_route_reads_any_tree_in_the_same_number_of_statements(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    """A recursive CTE reads the path: forks add no statement, nor does a longer path."""
    from sqlalchemy import event

    fake = fakes["openai"]
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
        seen.append(sql)

    async def statements(chat_id: str) -> int:
        seen.clear()
        event.listen(services.engine.sync_engine, "before_cursor_execute", record)
        try:
            await chat(user, chat_id)
        finally:
            event.remove(services.engine.sync_engine, "before_cursor_execute", record)
        return len(seen)

    linear, _ = await two_turns(user, fake)
    short = await statements(linear)
    fake.script(*(Reply(text=f"A{n}.") for n in range(3, 7)))
    for n in range(3, 7):
        await send(user, linear, f"Q{n}")
    assert await statements(linear) == short

    branchy, detail = await two_turns(user, fake)
    fake.script(Reply(text="R1."), Reply(text="R2."), Reply(text="E."))
    await regenerate(user, branchy, detail["messages"][2]["id"])
    await regenerate(user, branchy, detail["messages"][0]["id"])
    await send(user, branchy, "Q1 edited", parent_id=None)
    assert await statements(branchy) == short


async def test_the_openapi_document_names_the_branch_routes(anon: Client) -> None:
    paths = (await anon.get("/openapi.json")).json()["paths"]
    assert "put" in paths["/api/chats/{chat_id}/active"]
    assert "post" in paths["/api/chats/{chat_id}/regenerate"]
    schemas = (await anon.get("/openapi.json")).json()["components"]["schemas"]
    assert "parent_id" in schemas["MessageIn"]["properties"]
    assert schemas["RegenerateIn"]["required"] == ["message_id"]
    assert schemas["ActiveIn"]["required"] == ["message_id"]
    assert {"parent_id", "sibling_ids"} <= schemas["MessageOut"]["properties"].keys()
