"""Activating tool groups in the `none` DTL mode: rows anchored at the activating round, the
growing tool array, the activation API and its reset."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry")


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


async def chat_on_openai(user: Client) -> str:
    return (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]


async def test_activate_then_call_grows_the_tool_array(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    catalogue: list[tuple[str, str, dict[str, Any]]],
) -> None:
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "Oslo"})]),
        Reply(text="It is sunny in Oslo."),
    )
    chat_id = await chat_on_openai(user)
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Oslo?"})
    chunks = parse_stream(response.text)
    assert "error" not in [c["type"] for c in chunks]
    [activation] = [c for c in chunks if c["type"] == "data-activation"]
    rounds = [c["data"]["id"] for c in chunks if c["type"] == "data-assistant-message"]
    assert activation["data"] == {"message_id": rounds[0], "groups": ["weather"]}

    sent = [r.body for r in fake.model_requests]
    base = ["read_file", "list_files", "write_file", "activate_tools"]
    assert tool_names(sent[0]) == base
    assert tool_names(sent[1]) == [*base, "mcp__weather__forecast", "mcp__weather__alerts"]
    assert tool_names(sent[2]) == tool_names(sent[1])
    assert "| weather | Forecasts and alerts |" in sent[0]["messages"][0]["content"]
    assert sent[0]["messages"][0] == sent[2]["messages"][0]  # the catalogue table never changes
    assert catalogue == [("weather", "mcp__weather__forecast", {"city": "Oslo"})]

    activations = (await user.get(f"/api/chats/{chat_id}/activations")).json()
    assert [(a["kind"], a["ref"], a["message_id"]) for a in activations] == [
        ("mcp", "weather", rounds[0])
    ]
    chat = await wait_until_idle(user, chat_id)
    report = chat["messages"][1]["tool_calls"][0]["result"]
    assert '"status": "activated"' in report and "mcp__weather__forecast" in report

    # The next turn starts with the group active; a reset takes it away again.
    fake.script(Reply(text="Still sunny."))
    await user.post(f"/api/chats/{chat_id}/messages", json={"content": "And now?"})
    assert "mcp__weather__forecast" in tool_names(fake.model_requests[-1].body)
    await wait_until_idle(user, chat_id)
    assert (await user.delete(f"/api/chats/{chat_id}/activations")).status_code == 204
    assert (await user.get(f"/api/chats/{chat_id}/activations")).json() == []
    fake.script(Reply(text="Reset."))
    await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Again"})
    assert tool_names(fake.model_requests[-1].body) == base


async def test_same_group_twice_in_a_round_unknown_and_unavailable(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    catalogue: list[tuple[str, str, dict[str, Any]]],
) -> None:
    fake = fakes["openai"]
    fake.script(
        Reply(
            tool_calls=[
                ToolCall("activate_tools", {"groups": ["weather", "nope", "down"]}),
                ToolCall("activate_tools", {"groups": ["weather"]}),
                ToolCall("activate_tools", {"groups": ["nope"]}),
            ]
        ),
        Reply(text="ok"),
    )
    chat_id = await chat_on_openai(user)
    await user.post(f"/api/chats/{chat_id}/messages", json={"content": "go"})
    chat = await wait_until_idle(user, chat_id)
    first, second, third = chat["messages"][1]["tool_calls"]
    assert '"group": "weather", "status": "activated"' in first["result"]
    assert '"group": "nope", "status": "unknown"' in first["result"]
    assert '"group": "down", "status": "unavailable"' in first["result"]
    assert '"status": "already_active"' in second["result"]
    assert third["status"] == "failed" and "No group could be activated" in third["result"]
    activations = (await user.get(f"/api/chats/{chat_id}/activations")).json()
    assert [a["ref"] for a in activations] == ["weather"]


async def test_a_failing_group_tool_is_a_tool_error_not_a_failed_turn(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    catalogue: list[tuple[str, str, dict[str, Any]]],
) -> None:
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["mail"]})]),
        Reply(tool_calls=[ToolCall("mcp__mail__send", {"city": "x"})]),
        Reply(text="The mail server is down."),
    )
    chat_id = await chat_on_openai(user)
    await user.post(f"/api/chats/{chat_id}/messages", json={"content": "mail"})
    chat = await wait_until_idle(user, chat_id)
    rounds = [m for m in chat["messages"] if m["role"] == "assistant"]
    assert [m["status"] for m in rounds] == ["ok", "ok", "ok"]
    failed = rounds[1]["tool_calls"][0]
    assert failed["status"] == "failed" and "died mid-call" in failed["result"]


async def test_tools_and_activation_routes_guard_ownership(
    user: Client, new_user: NewUser, catalogue: list[tuple[str, str, dict[str, Any]]]
) -> None:
    groups = (await user.get("/api/tools")).json()
    assert [(g["group"], g["kind"], g["status"]) for g in groups] == [
        ("weather", "mcp", "available"),
        ("mail", "mcp", "available"),
        ("down", "mcp", "unavailable"),
    ]
    assert groups[0]["tools"][0] == {
        "name": "mcp__weather__forecast",
        "description": "[weather] Forecast for a city",
    }
    chat_id = (await user.post("/api/chats", json={})).json()["id"]
    other = await new_user()
    assert (await other.get(f"/api/chats/{chat_id}/activations")).status_code == 404
    assert (await other.delete(f"/api/chats/{chat_id}/activations")).status_code == 404
    assert (await user.delete(f"/api/chats/{chat_id}/activations")).status_code == 204
