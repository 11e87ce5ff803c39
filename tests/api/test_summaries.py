"""Summaries: made on request or when the last request neared the context window; the model
then gets the summary instead of the covered messages, and activations survive it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import select

from app.agent.summaries import SUMMARY_PREFIX, SUMMARY_REQUEST
from app.models import ActivatedTool, ChatSummary
from app.services import Services
from tests.catalogue_setup import WEATHER
from tests.fakes.providers import Fail, FakeProviderServer, Reply, ToolCall, Usage
from tests.golden import assert_golden
from tests.provider_setup import DTL_MODEL_IDS, MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry", "catalogue")

WEATHER_TOOLS = [tool.name for tool in WEATHER.tools]
FAKE = {"anthropic_tool_reference": "anthropic", "kimi_system_tools": "moonshot", "none": "openai"}


@pytest.fixture(autouse=True)
def keep_two(services: Services) -> None:
    services.settings = services.settings.model_copy(update={"compact_keep": 2})


async def send(user: Client, chat_id: str, content: str) -> list[dict[str, Any]]:
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    chunks = parse_stream(response.text)
    assert "error" not in [c["type"] for c in chunks], chunks
    await wait_until_idle(user, chat_id)
    return chunks


def bodies(fake: FakeProviderServer) -> list[dict[str, Any]]:
    for request in fake.model_requests:
        assert request.validation_error is None, request.validation_error
    return [request.body for request in fake.model_requests]


def user_texts(body: dict[str, Any]) -> list[str]:
    out = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out.extend(b["text"] for b in content if b.get("type") == "text")
    return [t for t in out if not t.startswith("[hearth/context]")]


def system_texts(body: dict[str, Any]) -> list[str]:
    if "system" in body:
        return [block["text"] for block in body["system"]]
    return [
        m["content"]
        for m in body["messages"]
        if m["role"] == "system" and isinstance(m.get("content"), str)
    ]


async def three_questions(user: Client, fake: FakeProviderServer, model: str) -> str:
    fake.script(Reply(text="A is 1."), Reply(text="B is 2."), Reply(text="C is 3."))
    chat_id = (await user.post("/api/chats", json={"model": model})).json()["id"]
    for question in ("What is A?", "What is B?", "What is C?"):
        await send(user, chat_id, question)
    return chat_id


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_compact_on_request_then_the_summary_stands_for_the_covered_messages(
    kind: str, user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes[kind]
    chat_id = await three_questions(user, fake, MODEL_IDS[kind])
    fake.script(Reply(text="The user asked for A (1) and B (2)."), Reply(text="D is 4."))
    response = await user.post(f"/api/chats/{chat_id}/compact")
    assert response.status_code == 200, response.text
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    ids = [m["id"] for m in chat["messages"]]
    assert response.json() == {
        "summary_id": response.json()["summary_id"],
        "covers_up_to_message_id": ids[3],
    }
    [summary] = chat["summaries"]
    assert summary["content"] == "The user asked for A (1) and B (2)."
    assert len(chat["messages"]) == 6  # covered messages stay listed

    await send(user, chat_id, "What is D?")
    sent = bodies(fake)
    request = sent[3]  # the summary request: no tools, the covered messages, then the ask
    assert "tools" not in request
    assert user_texts(request) == ["What is A?", "What is B?", SUMMARY_REQUEST]
    later = sent[4]
    assert user_texts(later) == ["What is C?", "What is D?"]
    systems = system_texts(later)
    assert systems[1].startswith(SUMMARY_PREFIX) and systems[1].endswith(summary["content"])
    assert_golden(f"wire_after_summary_{kind}", later)


async def test_nothing_to_cover_and_a_failing_summary_leave_the_chat_as_it_was(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    fake.script(Reply(text="Hi."))
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    await send(user, chat_id, "Hello")
    assert (await user.post(f"/api/chats/{chat_id}/compact")).status_code == 422

    chat_id = await three_questions(user, fake, MODEL_IDS["openai"])
    fake.script(Fail(400, message="the request was refused"))
    failed = await user.post(f"/api/chats/{chat_id}/compact")
    assert failed.status_code == 502 and "summary request failed" in failed.json()["detail"]
    assert (await user.get(f"/api/chats/{chat_id}")).json()["summaries"] == []
    fake.script(Reply(text="D."))
    await send(user, chat_id, "D?")  # the chat works as before, every message sent
    assert user_texts(bodies(fake)[-1]) == ["What is A?", "What is B?", "What is C?", "D?"]
    other = await user.post(f"/api/chats/{'0' * 8}-0000-0000-0000-{'0' * 12}/compact")
    assert other.status_code == 404


async def test_a_turn_near_the_context_window_summarises_first(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    fake.script(
        Reply(text="A is 1."),
        Reply(text="B is 2."),
        Reply(
            text="C is 3.",
            usage=Usage(input_tokens=70_000, output_tokens=5, cache_read_tokens=10_000),
        ),
        Reply(text="Summary: A=1, B=2."),
        Reply(text="D is 4."),
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    for question in ("What is A?", "What is B?", "What is C?"):
        await send(user, chat_id, question)
    chunks = await send(user, chat_id, "What is D?")  # 80,000 >= 0.6 x 128,000
    [compaction] = [c for c in chunks if c["type"] == "data-compaction"]
    types = [c["type"] for c in chunks]
    assert types.index("data-compaction") < types.index("data-assistant-message")
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    assert compaction["data"] == {
        "summary_id": chat["summaries"][0]["id"],
        "covers_up_to_message_id": chat["messages"][3]["id"],
    }
    assert user_texts(bodies(fake)[-1]) == ["What is C?", "What is D?"]


async def test_a_failing_automatic_summary_lets_the_turn_go_on(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    fake.script(
        Reply(text="A."),
        Reply(text="B."),
        Reply(text="C.", usage=Usage(input_tokens=100_000, output_tokens=5)),
        Fail(400, message="the request was refused"),
        Reply(text="D."),
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    for question in ("A?", "B?", "C?"):
        await send(user, chat_id, question)
    chunks = await send(user, chat_id, "D?")
    assert "data-compaction" not in [c["type"] for c in chunks]
    assert user_texts(bodies(fake)[-1]) == ["A?", "B?", "C?", "D?"]


@pytest.mark.parametrize("mode", list(FAKE))
async def test_activations_survive_a_summary_in_every_mode(
    mode: str, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes[FAKE[mode]]
    ids = {
        "anthropic": ("toolu_01A", "toolu_02F"),
        "moonshot": ("functions.activate_tools:0", "functions.mcp__weather__forecast:1"),
        "openai": ("call_a", "call_f"),
    }[FAKE[mode]]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]}, id=ids[0])]),
        Reply(text="Weather is active."),
        Reply(text="Noted."),
        Reply(text="Sure."),
    )
    chat_id = (await user.post("/api/chats", json={"model": DTL_MODEL_IDS[mode]})).json()["id"]
    for question in ("Turn on weather", "Remember Oslo", "And Bergen"):
        await send(user, chat_id, question)
    fake.script(Reply(text="Weather was activated; Oslo and Bergen noted."))
    assert (await user.post(f"/api/chats/{chat_id}/compact")).status_code == 200
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    surviving = next(m["id"] for m in chat["messages"] if m["content"] == "And Bergen")
    activating = chat["messages"][1]["id"]
    async with services.sessions() as db:
        anchors = (await db.execute(select(ActivatedTool.message_id))).scalars().all()
        assert (await db.scalar(select(ChatSummary.covers_up_to_message_id))) < surviving
    # The row stays at the message that activated it, which the summary covers: the builder
    # renders it at the summary (docs/wire.md §2), no row is moved.
    assert anchors == [activating]

    fake.script(
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "Oslo"}, id=ids[1])]),
        Reply(text="Sunny."),
    )
    await send(user, chat_id, "Forecast for Oslo?")
    first, second = bodies(fake)[-2:]
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    call = chat["messages"][-2]["tool_calls"][0]
    assert (call["name"], call["status"], call["result"]) == (
        "mcp__weather__forecast",
        "done",
        "Sunny in Oslo",
    )
    if mode == "anthropic_tool_reference":
        declared = {t["name"]: t for t in first["tools"]}
        assert all("defer_loading" not in declared[name] for name in WEATHER_TOOLS)
        assert declared["mcp__mail__send"]["defer_loading"] is True
        assert json.dumps(first["tools"]) == json.dumps(second["tools"])
    elif mode == "kimi_system_tools":
        messages = first["messages"]
        assert messages[1]["content"].startswith(SUMMARY_PREFIX)
        assert messages[2]["role"] == "system" and "content" not in messages[2]
        assert [t["function"]["name"] for t in messages[2]["tools"]] == WEATHER_TOOLS
        assert messages[3] == {"role": "user", "content": "And Bergen"}
    else:
        names = [t["function"]["name"] for t in first["tools"]]
        assert names[-2:] == WEATHER_TOOLS
    assert_golden(f"wire_after_summary_dtl_{mode}", [first, second])
