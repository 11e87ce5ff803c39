"""Approvals: `write_file` and the tools of servers marked `requires_approval` wait for the user.

A turn that needs a decision ends its stream with the protocol's `tool-approval-request` parts
and leaves the calls `pending` in the database; `POST /approvals` stores decisions and the one
that answers the last pending call resumes the turn with a stream of its continuation.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.files.roots import user_root
from app.llm.registry import ModelRegistry
from app.main import create_app
from app.services import Services
from app.settings import Settings
from app.tools.catalogue import Catalogue, Entry
from tests.catalogue_setup import WEATHER
from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS
from tests.support import Client, http_client, live_server, parse_stream, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry")


async def new_chat(user: Client) -> str:
    return (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]


async def send(user: Client, chat_id: str, content: str) -> list[dict[str, Any]]:
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    return parse_stream(response.text)


async def decide(user: Client, chat_id: str, *decisions: dict[str, Any]) -> httpx.Response:
    return await user.post(f"/api/chats/{chat_id}/approvals", json={"decisions": list(decisions)})


def files_of(services: Services, user: Client) -> Path:
    return user_root(services.settings.data_dir, user.user["id"])


def tool_messages(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


async def test_write_file_waits_then_runs_once_approved(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    write = ToolCall("write_file", {"path": "notes/a.txt", "content": "hello\n"}, id="call_w")
    fake.script(Reply(text="I will write it.", tool_calls=[write]), Reply(text="Written."))
    chat_id = await new_chat(user)
    (files_of(services, user) / "notes").mkdir(parents=True, exist_ok=True)

    chunks = await send(user, chat_id, "Write a note")
    types = [c["type"] for c in chunks]
    [request] = [c for c in chunks if c["type"] == "tool-approval-request"]
    assert request == {
        "type": "tool-approval-request",
        "approvalId": "call_w",
        "toolCallId": "call_w",
    }
    assert types.index("tool-approval-request") < types.index("finish")
    assert types[-1] == "[DONE]" and "error" not in types
    assert len(fake.model_requests) == 1

    chat = await wait_until_idle(user, chat_id)
    [call] = chat["messages"][1]["tool_calls"]
    assert (call["status"], call["preview_old"], call["preview_new"]) == ("pending", "", "hello\n")
    assert not (files_of(services, user) / "notes" / "a.txt").exists()
    # Nothing else may happen in the chat until the decision.
    again = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "hello?"})
    assert again.status_code == 409
    assert again.json()["detail"].startswith("the turn waits for approvals")
    stored = (await user.get(f"/api/chats/{chat_id}")).json()["messages"]
    assert [m["content"] for m in stored if m["role"] == "user"] == ["Write a note"]

    response = await decide(user, chat_id, {"tool_call_id": "call_w", "approved": True})
    assert response.status_code == 200
    resumed = parse_stream(response.text)
    types = [c["type"] for c in resumed]
    assert "data-user-message" not in types
    output = next(c for c in resumed if c["type"] == "tool-output-available")
    assert output["toolCallId"] == "call_w" and "created" in output["output"]
    assert "".join(c["delta"] for c in resumed if c["type"] == "text-delta") == "Written."
    assert (files_of(services, user) / "notes" / "a.txt").read_text() == "hello\n"
    assert tool_messages(fake.model_requests[1].body)["call_w"] == "notes/a.txt created (6 bytes)."

    chat = await wait_until_idle(user, chat_id)
    [call] = chat["messages"][1]["tool_calls"]
    assert call["status"] == "done"
    assert [m["content"] for m in chat["messages"][1:]] == ["I will write it.", "Written."]


async def test_a_rejection_reaches_the_model_with_the_note(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    existing = files_of(services, user) / "plan.md"
    existing.write_text("old plan\n")
    write = ToolCall("write_file", {"path": "plan.md", "content": "new plan\n"}, id="call_w")
    fake.script(Reply(tool_calls=[write]), Reply(text="Understood, I left it."))
    chat_id = await new_chat(user)
    await send(user, chat_id, "Rewrite my plan")
    chat = await wait_until_idle(user, chat_id)
    [call] = chat["messages"][1]["tool_calls"]
    assert (call["preview_old"], call["preview_new"]) == ("old plan\n", "new plan\n")

    response = await decide(
        user, chat_id, {"tool_call_id": "call_w", "approved": False, "note": "keep the old one"}
    )
    resumed = parse_stream(response.text)
    assert {"type": "tool-output-denied", "toolCallId": "call_w"} in resumed
    answer = tool_messages(fake.model_requests[1].body)["call_w"]
    assert answer == "The user rejected this tool call. Their note: keep the old one"
    assert existing.read_text() == "old plan\n"
    chat = await wait_until_idle(user, chat_id)
    [call] = chat["messages"][1]["tool_calls"]
    assert call["status"] == "rejected" and "keep the old one" in call["result"]

    # Later turns replay the rejection as it was.
    fake.script(Reply(text="ok"))
    await send(user, chat_id, "Fine")
    assert tool_messages(fake.model_requests[-1].body)["call_w"] == answer


async def test_decisions_in_several_requests_and_a_call_that_ran_meanwhile(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("list_files", {"path": "."}, id="call_l"),
                ToolCall("write_file", {"path": "a.txt", "content": "A"}, id="call_a"),
                ToolCall("write_file", {"path": "b.txt", "content": "B"}, id="call_b"),
            ]
        ),
        Reply(text="One written, one not."),
    )
    chat_id = await new_chat(user)
    chunks = await send(user, chat_id, "Write two files")
    approvals = [c["approvalId"] for c in chunks if c["type"] == "tool-approval-request"]
    assert approvals == ["call_a", "call_b"]
    chat = await wait_until_idle(user, chat_id)
    statuses = {c["tool_call_id"]: c["status"] for c in chat["messages"][1]["tool_calls"]}
    assert statuses == {"call_l": "done", "call_a": "pending", "call_b": "pending"}

    first = await decide(user, chat_id, {"tool_call_id": "call_a", "approved": True})
    assert first.status_code == 202 and first.json() == {"pending": ["call_b"]}
    assert not (files_of(services, user) / "a.txt").exists()  # nothing runs before the last
    second = await decide(user, chat_id, {"tool_call_id": "call_b", "approved": False})
    assert second.status_code == 200
    assert {"type": "tool-output-denied", "toolCallId": "call_b"} in parse_stream(second.text)
    assert (files_of(services, user) / "a.txt").read_text() == "A"
    assert not (files_of(services, user) / "b.txt").exists()
    answers = tool_messages(fake.model_requests[1].body)
    assert set(answers) == {"call_l", "call_a", "call_b"}
    assert answers["call_b"] == "The user rejected this tool call."
    # The decided calls are no longer pending.
    gone = await decide(user, chat_id, {"tool_call_id": "call_a", "approved": True})
    assert gone.status_code == 404


async def test_stop_ends_a_paused_turn(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    write = ToolCall("write_file", {"path": "x.txt", "content": "x"}, id="call_w")
    fake.script(Reply(tool_calls=[write]), Reply(text="Next question then."))
    chat_id = await new_chat(user)
    await send(user, chat_id, "Write x")
    await wait_until_idle(user, chat_id)
    stopped = await user.post(f"/api/chats/{chat_id}/stop")
    assert stopped.status_code == 202
    chat = await wait_until_idle(user, chat_id)
    assert chat["messages"][1]["tool_calls"][0]["status"] == "cancelled"
    assert (await user.post(f"/api/chats/{chat_id}/stop")).status_code == 409
    await send(user, chat_id, "Forget it")
    answer = tool_messages(fake.model_requests[-1].body)["call_w"]
    assert "interrupted" in answer
    assert not (files_of(services, user) / "x.txt").exists()


async def test_bad_and_foreign_decisions(
    user: Client, new_user: NewUser, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    write = ToolCall("write_file", {"path": "x.txt", "content": "x"}, id="call_w")
    fake.script(Reply(tool_calls=[write]))
    chat_id = await new_chat(user)
    await send(user, chat_id, "Write x")
    await wait_until_idle(user, chat_id)
    url = f"/api/chats/{chat_id}/approvals"
    forged = await decide(user, chat_id, {"tool_call_id": "call_forged", "approved": True})
    assert forged.status_code == 404
    other = await new_user()
    assert (
        await decide(other, chat_id, {"tool_call_id": "call_w", "approved": True})
    ).status_code == 404
    missing = await user.post(
        f"/api/chats/{'0' * 8}-0000-0000-0000-{'0' * 12}/approvals",
        json={"decisions": [{"tool_call_id": "call_w", "approved": True}]},
    )
    assert missing.status_code == 404
    for body in (
        {},
        {"decisions": []},
        {"decisions": [{"tool_call_id": "call_w"}]},
        {"decisions": [{"tool_call_id": "call_w", "approved": "yes"}]},
        {"decisions": [{"tool_call_id": "call_w", "approved": True, "extra": 1}]},
        {"decisions": [{"tool_call_id": "call_w", "approved": True}] * 2},
        {"decisions": [{"tool_call_id": "", "approved": True}]},
        {"decisions": [{"tool_call_id": "call_w", "approved": True, "note": "n" * 10_001}]},
        {"decisions": "call_w"},
    ):
        response = await user.post(url, json=body)
        assert response.status_code == 422, (body, response.text)
    no_csrf = await user.http.post(
        url, json={"decisions": [{"tool_call_id": "call_w", "approved": True}]}
    )
    assert no_csrf.status_code == 403
    chat = await wait_until_idle(user, chat_id)
    assert chat["messages"][1]["tool_calls"][0]["status"] == "pending"  # nothing was lost


async def test_a_paused_turn_survives_a_restart(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    services: Services,
    settings: Settings,
    registry: ModelRegistry,
) -> None:
    """The decision reaches a second, freshly started service on the same database."""
    fake = fakes["openai"]
    write = ToolCall("write_file", {"path": "later.txt", "content": "L"}, id="call_w")
    fake.script(Reply(tool_calls=[write]), Reply(text="Done after the restart."))
    chat_id = await new_chat(user)
    await send(user, chat_id, "Write later")
    await wait_until_idle(user, chat_id)

    restarted = create_app(settings)
    async with live_server(restarted) as base_url:
        restarted.state.services.registry = registry
        async with http_client(base_url=base_url, cookies=user.http.cookies) as http:
            client = Client(http)
            response = await decide(client, chat_id, {"tool_call_id": "call_w", "approved": True})
            assert response.status_code == 200, response.text
            text = "".join(
                c["delta"] for c in parse_stream(response.text) if c["type"] == "text-delta"
            )
            assert text == "Done after the restart."
            await wait_until_idle(client, chat_id)
    assert (files_of(services, user) / "later.txt").read_text() == "L"


async def test_a_server_marked_requires_approval_waits_too(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = []

    async def call(group: str, tool: str, arguments: dict[str, Any], **_: Any) -> Any:
        calls.append((group, tool, arguments))
        return f"Forecast for {arguments['city']}: rain"

    guarded = dataclasses.replace(WEATHER, requires_approval=True)
    original = services.catalogue, services.group_call
    services.catalogue, services.group_call = Catalogue([Entry("mcp", guarded)]), call
    try:
        fake = fakes["openai"]
        fake.script(
            Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]}, id="call_act")]),
            Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "Oslo"}, id="call_f")]),
            Reply(text="Rain in Oslo."),
        )
        chat_id = await new_chat(user)
        chunks = await send(user, chat_id, "Weather?")
        assert [c["approvalId"] for c in chunks if c["type"] == "tool-approval-request"] == [
            "call_f"
        ]
        assert calls == []  # activation needs no approval; the forecast does
        response = await decide(user, chat_id, {"tool_call_id": "call_f", "approved": True})
        assert response.status_code == 200
        assert calls == [("weather", "mcp__weather__forecast", {"city": "Oslo"})]
        chat = await wait_until_idle(user, chat_id)
        assert chat["messages"][2]["tool_calls"][0]["status"] == "done"
    finally:
        services.catalogue, services.group_call = original
