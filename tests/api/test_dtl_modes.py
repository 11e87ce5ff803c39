"""The three DTL wire modes (docs/wire.md §2, §2c, §4) against the fake providers.

Each mode runs the same chat: a three-request turn (activate `weather`, call its forecast tool,
answer) and a second turn. The golden files pin every body; the tests check the properties that
keep provider caches warm: the byte-stable Anthropic tool array, the Kimi prefix that only ever
grows, the `none` array that grows by exactly the activated group, the tail after the
conversation. Every body is validated against the provider SDK's request types by the fakes.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from tests.catalogue_setup import WEATHER
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.golden import assert_golden
from tests.provider_setup import DTL_MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle
from tests.wire import TAIL_PREFIX, conversation, tail_of

pytestmark = pytest.mark.usefixtures("services", "registry", "catalogue")

ALWAYS_ON = ["read_file", "list_files", "write_file", "activate_tools"]
WEATHER_TOOLS = [tool.name for tool in WEATHER.tools]
CATALOGUE_TOOLS = [*WEATHER_TOOLS, "mcp__mail__send"]
FAKE = {"anthropic_tool_reference": "anthropic", "kimi_system_tools": "moonshot", "none": "openai"}
IDS = {
    "anthropic_tool_reference": ("toolu_01Act", "toolu_02Fc"),
    "kimi_system_tools": ("functions.activate_tools:0", "functions.mcp__weather__forecast:1"),
    "none": ("call_act", "call_fc"),
}
MODES = list(FAKE)


def script(mode: str) -> list[Reply]:
    activate, forecast = IDS[mode]
    reasoning = "Weather needs its tools." if mode == "kimi_system_tools" else ""
    return [
        Reply(
            reasoning=reasoning,
            tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]}, id=activate)],
        ),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "Oslo"}, id=forecast)]),
        Reply(text="Sunny in Oslo."),
        Reply(text="Still sunny."),
    ]


async def run_chat(
    mode: str, user: Client, fakes: dict[str, FakeProviderServer]
) -> tuple[str, list[dict[str, Any]]]:
    fake = fakes[FAKE[mode]]
    fake.script(*script(mode))
    chat_id = (await user.post("/api/chats", json={"model": DTL_MODEL_IDS[mode]})).json()["id"]
    for content in ("Weather in Oslo?", "And tomorrow?"):
        response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": content})
        chunks = parse_stream(response.text)
        assert "error" not in [c["type"] for c in chunks], chunks
        await wait_until_idle(user, chat_id)
    return chat_id, bodies(fake)


def bodies(fake: FakeProviderServer) -> list[dict[str, Any]]:
    for request in fake.model_requests:
        assert request.validation_error is None, request.validation_error
    return [request.body for request in fake.model_requests]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["name"] if "name" in t else t["function"]["name"] for t in body.get("tools", [])]


def assert_tail_last_and_alone(body: dict[str, Any]) -> None:
    """The dynamic tail is the very last thing of the request and appears nowhere before it."""
    assert tail_of(body), body["messages"][-1]
    assert canonical(body).count(TAIL_PREFIX) == 1
    assert TAIL_PREFIX not in canonical(body.get("system", ""))


def assert_each_extends_the_previous(sent: list[dict[str, Any]]) -> None:
    for earlier, later in itertools.pairwise(sent):
        before, after = conversation(earlier), conversation(later)
        assert after[: len(before)] == before


@pytest.mark.parametrize("mode", MODES)
async def test_golden_wire_per_mode(
    mode: str, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    _, sent = await run_chat(mode, user, fakes)
    assert len(sent) == 4
    assert_golden(f"wire_dtl_{mode}", sent)
    for body in sent:
        assert_tail_last_and_alone(body)
    assert_each_extends_the_previous(sent)


async def test_anthropic_tool_reference_rules(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    _, sent = await run_chat("anthropic_tool_reference", user, fakes)
    activate, _ = IDS["anthropic_tool_reference"]
    # The tools array is byte-identical on every request of the chat, every catalogue tool
    # deferred, the breakpoint on the last always-on tool, and no server-side tool search.
    assert len({canonical(body["tools"]) for body in sent}) == 1
    tools = sent[0]["tools"]
    assert tool_names(sent[0]) == [*ALWAYS_ON, *CATALOGUE_TOOLS]
    assert [t.get("defer_loading", False) for t in tools] == [False] * 4 + [True] * 3
    assert [("cache_control" in t) for t in tools] == [False] * 3 + [True] + [False] * 3
    assert tools[3]["cache_control"] == {"type": "ephemeral"}
    for body in sent:
        # The static system block carries a breakpoint; nothing dynamic sits in `system`.
        assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
        assert "| weather | Forecasts and alerts |" in body["system"][0]["text"]
        # The third breakpoint: the last block before the tail.
        last = body["messages"][-1]["content"]
        assert last[-2]["cache_control"] == {"type": "ephemeral"}
        assert canonical(body).count('"cache_control"') == 3
    # The activating call's own tool_result is made of references, and nothing is invented.
    results = [
        block
        for message in sent[1]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    [result] = results
    assert result["tool_use_id"] == activate
    assert result["content"] == [
        {"type": "tool_reference", "tool_name": name} for name in WEATHER_TOOLS
    ]
    assert "search_tools" not in canonical(sent) and "pyd_ai_" not in canonical(sent)


async def test_kimi_system_tools_rules(user: Client, fakes: dict[str, FakeProviderServer]) -> None:
    _, sent = await run_chat("kimi_system_tools", user, fakes)
    activate, forecast = IDS["kimi_system_tools"]
    for body in sent:
        assert tool_names(body) == ALWAYS_ON  # catalogue tools never at the top level
    later = sent[1]["messages"]
    index = next(i for i, m in enumerate(later) if m.get("tool_call_id") == activate)
    declared = later[index + 1]
    assert declared["role"] == "system" and "content" not in declared
    assert [t["function"]["name"] for t in declared["tools"]] == WEATHER_TOOLS
    assert declared["tools"][0]["function"]["description"] == "[weather] Forecast for a city"
    # The system-tools message stays where it was in every later request, the prefix with it.
    for body in sent[2:]:
        assert body["messages"][: index + 2] == later[: index + 2]
    # Tool call ids and reasoning go back exactly as received.
    assistant = later[index - 1]
    assert assistant["tool_calls"][0]["id"] == activate
    assert assistant["reasoning_content"] == "Weather needs its tools."
    assert any(m.get("tool_call_id") == forecast for m in sent[2]["messages"])


async def test_none_mode_array_grows_by_exactly_the_group(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    _, sent = await run_chat("none", user, fakes)
    assert tool_names(sent[0]) == ALWAYS_ON
    for body in sent[1:]:
        assert tool_names(body) == [*ALWAYS_ON, *WEATHER_TOOLS]
    assert "cache_control" not in canonical(sent)


@pytest.mark.parametrize("mode", MODES)
async def test_a_reset_removes_the_rendered_activation(
    mode: str, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    chat_id, sent = await run_chat(mode, user, fakes)
    fake = fakes[FAKE[mode]]
    assert (await user.delete(f"/api/chats/{chat_id}/activations")).status_code == 204
    fake.script(Reply(text="Reset."))
    await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Anything else?"})
    await wait_until_idle(user, chat_id)
    after = bodies(fake)[-1]
    activate, _ = IDS[mode]
    text = canonical(after)
    assert "tool_reference" not in text
    assert '"role":"system","tools"' not in text
    if mode == "none":
        assert tool_names(after) == ALWAYS_ON
    else:
        assert canonical(after.get("tools")) == canonical(sent[-1].get("tools"))
    # The activating call is answered with its plain report.
    answer = next(
        (block.get("content") if "type" in block else block["content"])
        for message in after["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [message])
        if block.get("tool_use_id") == activate or block.get("tool_call_id") == activate
    )
    assert '"status": "activated"' in canonical(answer).replace('\\"', '"')


async def test_the_serving_model_decides_the_mode(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    """Activated on Kimi, continued on Anthropic: the next request renders the activation as
    Anthropic references, and the Kimi system-tools message does not follow the chat."""
    chat_id, _ = await run_chat("kimi_system_tools", user, fakes)
    activate, _ = IDS["kimi_system_tools"]
    fakes["anthropic"].script(Reply(text="Same weather."))
    response = await user.post(
        f"/api/chats/{chat_id}/messages",
        json={"content": "Once more?", "model": DTL_MODEL_IDS["anthropic_tool_reference"]},
    )
    assert response.status_code == 200
    await wait_until_idle(user, chat_id)
    [body] = bodies(fakes["anthropic"])
    assert [t.get("defer_loading", False) for t in body["tools"]] == [False] * 4 + [True] * 3
    result = next(
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("tool_use_id") == activate
    )
    assert result["content"] == [
        {"type": "tool_reference", "tool_name": name} for name in WEATHER_TOOLS
    ]
