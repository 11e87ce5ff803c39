"""Real turn streams conform to the OpenAPI document, as a schema-driven tool checks them.

Each scenario drives a turn that makes hearth send some of the chunks the document names
(approvals, denials, reasoning, tool errors, provider errors, a stop, citations, a summary),
then hands the HTTP response to schemathesis's response conformance check, which validates
every server-sent event against the media type's schema, the `contentSchema` of its JSON
`data` included. A scenario also asserts which chunk types it produced, so the table as a
whole proves that every chunk type of the contract was seen on the wire and found conforming.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
import schemathesis

from app.api.stream_schema import DATA_PARTS, UNION, chunk_schemas, standard_chunks
from app.services import Services
from app.tools.catalogue import Catalogue, Entry
from tests.catalogue_setup import WEATHER
from tests.fakes.providers import Fail, FakeProviderServer, Reply, ToolCall, Usage
from tests.knowledge.documents import add_document
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry")

MESSAGES = "/api/chats/{chat_id}/messages"
APPROVALS = "/api/chats/{chat_id}/approvals"
ELICITATIONS = "/api/chats/{chat_id}/elicitations"

# Every chunk type docs/http-api.md names for the turn stream.
CONTRACT = {
    "start",
    "start-step",
    "text-start",
    "text-delta",
    "text-end",
    "reasoning-start",
    "reasoning-delta",
    "reasoning-end",
    "tool-input-start",
    "tool-input-delta",
    "tool-input-available",
    "tool-output-available",
    "tool-output-error",
    "tool-approval-request",
    "tool-output-denied",
    "source-document",
    "finish-step",
    "finish",
    "error",
    "abort",
    "data-user-message",
    "data-assistant-message",
    "data-activation",
    "data-citations",
    "data-compaction",
    "data-usage",
    "data-tool-progress",
    "data-elicitation",
    "data-authorization",
    "[DONE]",
}
# Sent by pydantic-ai's deferred tool loading when an activation reveals tools.
PASSED_THROUGH = {"data-tool-availability-delta"}


class Turns:
    """Sends turns and checks each streamed answer against the served OpenAPI document."""

    def __init__(self, user: Client, schema: Any, chat_id: str) -> None:
        self.user = user
        self.schema = schema
        self.chat_id = chat_id
        self.seen: set[str] = set()

    def conforms(self, path: str, response: httpx.Response) -> list[dict[str, Any]]:
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        self.schema[path]["POST"].validate_response(response)  # raises on any violation
        chunks = parse_stream(response.text)
        self.seen |= {chunk["type"] for chunk in chunks}
        return chunks

    async def send(self, content: str) -> list[dict[str, Any]]:
        response = await self.user.post(
            f"/api/chats/{self.chat_id}/messages", json={"content": content}
        )
        return self.conforms(MESSAGES, response)

    async def decide(self, tool_call_id: str, approved: bool) -> list[dict[str, Any]]:
        decision = {"tool_call_id": tool_call_id, "approved": approved}
        response = await self.user.post(
            f"/api/chats/{self.chat_id}/approvals", json={"decisions": [decision]}
        )
        return self.conforms(APPROVALS, response)

    async def answer(self, elicitation_id: str, content: dict[str, Any]) -> list[dict[str, Any]]:
        answer = {"elicitation_id": elicitation_id, "action": "accept", "content": content}
        response = await self.user.post(f"/api/chats/{self.chat_id}/elicitations", json=answer)
        return self.conforms(ELICITATIONS, response)


async def tools_and_approvals(turns: Turns, fakes: dict[str, FakeProviderServer], _: Any) -> None:
    fakes["openai"].script(
        Reply(text="Looking.", tool_calls=[ToolCall("list_files", {"path": "."})]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "missing.txt"})]),
        Reply(text="Nothing there. Writing.", tool_calls=[write("w1")]),
        Reply(text="Written.", tool_calls=[write("w2")]),
        Reply(text="Left as it was."),
    )
    await turns.send("Look around and write a note")
    await turns.decide("w1", approved=True)
    await turns.decide("w2", approved=False)


def write(call_id: str) -> ToolCall:
    return ToolCall("write_file", {"path": "note.txt", "content": call_id}, id=call_id)


async def reasoning_and_failure(turns: Turns, fakes: dict[str, FakeProviderServer], _: Any) -> None:
    fakes["openai"].script(
        Reply(text="Hello.", reasoning="The user greets me."), Fail(400, "refused")
    )
    await turns.send("Hi")
    chunks = await turns.send("Again")
    assert "error" in [c["type"] for c in chunks]


async def stopped(turns: Turns, fakes: dict[str, FakeProviderServer], _: Any) -> None:
    fakes["openai"].script(Reply(text="word " * 400, token_interval=0.05, chunk_chars=5))
    sending = asyncio.create_task(
        turns.user.post(f"/api/chats/{turns.chat_id}/messages", json={"content": "Talk"})
    )

    async def running() -> bool:
        assert not sending.done(), sending.result().text
        return bool((await turns.user.get(f"/api/chats/{turns.chat_id}")).json()["running"])

    await wait_until(running)
    assert (await turns.user.post(f"/api/chats/{turns.chat_id}/stop")).status_code == 202
    turns.conforms(MESSAGES, await sending)


async def cited(turns: Turns, fakes: dict[str, FakeProviderServer], services: Services) -> None:
    document = b"# Garden\n\n## Watering\n\nTomatoes need water every evening in July.\n"
    upload_id = await add_document(services, turns.user.user["id"], "garden.md", document)
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["knowledge"]})]),
        Reply(tool_calls=[ToolCall("knowledge_search", {"query": "tomatoes water"})]),
        Reply(tool_calls=[ToolCall("knowledge_cite", {"chunk_ids": [f"{upload_id.hex[:12]}-1"]})]),
        Reply(text="Every evening in July [1]."),
    )
    await turns.send("When do tomatoes need water?")


async def summarised(
    turns: Turns, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    services.settings = services.settings.model_copy(update={"compact_keep": 2})
    fakes["openai"].script(
        Reply(text="A is 1."),
        Reply(text="B is 2."),
        Reply(text="C is 3.", usage=Usage(input_tokens=90_000, output_tokens=5)),
        Reply(text="Summary: A=1, B=2."),
        Reply(text="D is 4."),
    )
    for question in ("What is A?", "What is B?", "What is C?", "What is D?"):
        await turns.send(question)


async def progressed(
    turns: Turns, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    async def call(group: str, tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
        for step in (1, 2):
            await kwargs["on_progress"](step, 2, f"step {step}")
        return f"Sunny in {arguments['city']}"

    original = services.catalogue, services.group_call
    services.catalogue, services.group_call = Catalogue([Entry("mcp", WEATHER)]), call
    try:
        fakes["openai"].script(
            Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
            Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "Oslo"})]),
            Reply(text="Sunny."),
        )
        chunks = await turns.send("Weather in Oslo?")
    finally:
        services.catalogue, services.group_call = original
    reports = [c["data"] for c in chunks if c["type"] == "data-tool-progress"]
    assert [(r["progress"], r["total"], r["message"]) for r in reports] == [
        (1, 2, "step 1"),
        (2, 2, "step 2"),
    ]


async def elicited(turns: Turns, fakes: dict[str, FakeProviderServer], services: Services) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

    async def call(group: str, tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
        answer = await kwargs["asks"].elicit("Which city?", schema, timeout=30)
        return f"Sunny in {answer.content['city']}"

    original = services.catalogue, services.group_call
    services.catalogue, services.group_call = Catalogue([Entry("mcp", WEATHER)]), call
    try:
        fakes["openai"].script(
            Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
            Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "?"})]),
            Reply(text="Sunny."),
        )
        first = await turns.send("Weather?")
        [asked] = [c["data"] for c in first if c["type"] == "data-elicitation"]
        assert [c["type"] for c in first[-2:]] == ["finish", "[DONE]"]
        rest = await turns.answer(asked["elicitation_id"], {"city": "Oslo"})
    finally:
        services.catalogue, services.group_call = original
    assert rest[0]["type"] == "start" and rest[0]["messageId"] == first[0]["messageId"]
    [output] = [c for c in rest if c["type"] == "tool-output-available"]
    assert output["output"] == "Sunny in Oslo"


async def signing_in(
    turns: Turns, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    came_back = asyncio.Event()

    async def call(group: str, tool: str, arguments: dict[str, Any], **kwargs: Any) -> Any:
        await kwargs["asks"].authorize("weather", "https://auth.example/authorize?state=s1")
        await came_back.wait()  # as the server's flow waits for the user's callback
        return "Sunny, with the wider scope"

    original = services.catalogue, services.group_call
    services.catalogue, services.group_call = Catalogue([Entry("mcp", WEATHER)]), call
    try:
        fakes["openai"].script(
            Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
            Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "Oslo"}, id="w")]),
            Reply(text="Sunny."),
        )
        first = await turns.send("Weather?")
        [asked] = [c["data"] for c in first if c["type"] == "data-authorization"]
        assert asked == {
            "tool_call_id": "w",
            "group": "weather",
            "url": "https://auth.example/authorize?state=s1",
        }
        assert [c["type"] for c in first[-2:]] == ["finish", "[DONE]"]
        came_back.set()
        await wait_until_idle(turns.user, turns.chat_id)
    finally:
        services.catalogue, services.group_call = original


Scenario = Callable[[Turns, dict[str, FakeProviderServer], Services], Awaitable[None]]

SCENARIOS: dict[str, tuple[Scenario, set[str]]] = {
    "tools and approvals": (
        tools_and_approvals,
        {
            "start",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "tool-input-start",
            "tool-input-delta",
            "tool-input-available",
            "tool-output-available",
            "tool-output-error",
            "tool-approval-request",
            "tool-output-denied",
            "finish-step",
            "finish",
            "data-user-message",
            "data-assistant-message",
            "data-usage",
            "[DONE]",
        },
    ),
    "reasoning and a failure": (
        reasoning_and_failure,
        {"reasoning-start", "reasoning-delta", "reasoning-end", "error"},
    ),
    "a stop": (stopped, {"abort"}),
    "citations": (
        cited,
        {"data-activation", "data-tool-availability-delta", "data-citations", "source-document"},
    ),
    "a summary": (summarised, {"data-compaction"}),
    "an MCP call's progress": (progressed, {"data-tool-progress"}),
    "an MCP server's form": (elicited, {"data-elicitation"}),
    "an MCP server's new sign-in": (signing_in, {"data-authorization"}),
}


def test_the_scenarios_cover_every_chunk_of_the_contract() -> None:
    covered = set().union(*(expected for _, expected in SCENARIOS.values()))
    assert covered == CONTRACT | PASSED_THROUGH


def test_the_document_names_every_chunk_of_the_contract() -> None:
    union = chunk_schemas()[UNION]
    named = set(union["discriminator"]["mapping"]) | {"[DONE]"}
    assert named >= CONTRACT | PASSED_THROUGH
    assert len(union["oneOf"]) == len(standard_chunks()) + len(DATA_PARTS)
    assert "data-" not in {kind[:5] for kind in named - CONTRACT - PASSED_THROUGH}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_streamed_chunks_conform_to_the_openapi_document(
    name: str, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    scenario, expected = SCENARIOS[name]
    document = (await user.get("/openapi.json")).json()
    schema = schemathesis.openapi.from_dict(document)
    chat = await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})
    turns = Turns(user, schema, chat.json()["id"])
    await scenario(turns, fakes, services)
    await wait_until_idle(user, turns.chat_id)
    assert expected <= turns.seen, expected - turns.seen


async def test_a_chunk_that_does_not_fit_is_reported(user: Client) -> None:
    """The check is not vacuous: an event the document does not describe is a violation."""
    schema = schemathesis.openapi.from_dict((await user.get("/openapi.json")).json())
    operation = schema[MESSAGES]["POST"]
    request = httpx.Request("POST", "http://hearth.test/api/chats/1/messages")
    for event in (
        '{"type": "data-user-message", "data": {"id": "1"}}',
        '{"type": "data-unknown", "data": {}}',
        '{"type": "text-delta", "id": "t"}',
        "[DONE",
    ):
        response = httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=f'data: {{"type": "start"}}\n\ndata: {event}\n\ndata: [DONE]\n\n'.encode(),
            request=request,
        )
        response.read()
        response.elapsed = timedelta(0)
        with pytest.raises(Exception, match="SSE event violates schema"):
            operation.validate_response(response)
