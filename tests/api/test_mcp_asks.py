"""What a call's MCP server asks of the turn, through the real HTTP stack: forms and completions.

The group call here stands in for a server that asks while its call runs (the routing inside
the MCP client is tested in tests/tools/test_mcp_asking.py, and real servers ask in
tests/api/test_mcp_results.py). These tests hold what a user and a client see: the stream that
ends at the form, the answer that continues it, the form kept on the call for a reload, every
bad answer refused with nothing changed, and the answer stored by another worker.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai.messages import ModelRequest, UserPromptPart
from sqlalchemy import select

from app.models import LlmRequest
from app.services import Services
from app.tools.asks import Elicited, SamplingRequest
from app.tools.catalogue import Catalogue, Entry
from app.tools.groups import GroupToolError
from tests.catalogue_setup import WEATHER
from tests.fakes.providers import Fail, FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle

pytestmark = [pytest.mark.usefixtures("registry"), pytest.mark.slow]

FORM = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 2},
        "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 3},
        "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
    },
    "required": ["city"],
}


@dataclass
class AskingServer:
    """A group call whose server asks the user for a form (or the model for a completion)."""

    timeout: float = 30
    answers: list[Elicited] = field(default_factory=list)
    sample: SamplingRequest | None = None
    sampled: list[Any] = field(default_factory=list)

    async def __call__(self, group: str, tool: str, arguments: dict[str, Any], **kw: Any) -> Any:
        asks = kw["asks"]
        if self.sample is not None:
            try:
                result = await asks.sample(self.sample)
            except Exception as exc:  # an MCP session answers the server with an error
                raise GroupToolError(f"sampling failed: {exc}") from exc
            self.sampled.append(result)
            return f"The model said: {result.text}"
        answer = await asks.elicit("Which city, and for how long?", FORM, timeout=self.timeout)
        self.answers.append(answer)
        if answer.action != "accept":
            return f"No forecast: the user chose {answer.action}."
        return f"Sunny in {answer.content['city']} for {answer.content['days']} days"


@pytest.fixture
async def asking(services: Services) -> AsyncIterator[AskingServer]:
    server = AskingServer()
    original = services.catalogue, services.group_call
    services.catalogue, services.group_call = Catalogue([Entry("mcp", WEATHER)]), server
    yield server
    services.catalogue, services.group_call = original


def script_forecast(fake: FakeProviderServer, final: str = "Here it is.") -> None:
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "?"})]),
        Reply(text=final),
    )


async def ask(user: Client, fakes: dict[str, FakeProviderServer]) -> tuple[str, dict[str, Any]]:
    """A new chat whose turn stops at the form: (chat id, the `data-elicitation` payload)."""
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    script_forecast(fakes["openai"])
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Weather?"})
    assert response.status_code == 200, response.text
    chunks = parse_stream(response.text)
    [asked] = [c["data"] for c in chunks if c["type"] == "data-elicitation"]
    return chat_id, asked


def call_of(chat: dict[str, Any], name: str = "mcp__weather__forecast") -> dict[str, Any]:
    [call] = [c for m in chat["messages"] for c in m["tool_calls"] if c["name"] == name]
    return call


async def test_a_form_ends_the_stream_and_its_answer_streams_the_rest_with_defaults(
    user: Client, fakes: dict[str, FakeProviderServer], asking: AskingServer
) -> None:
    chat_id, asked = await ask(user, fakes)
    assert asked["message"] == "Which city, and for how long?"
    assert asked["requested_schema"] == FORM
    assert asked["elicitation_id"].startswith("eli_")

    # A reload in the pause shows the form on its call, which is still running.
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    assert chat["running"] is True
    call = call_of(chat)
    assert call["tool_call_id"] == asked["tool_call_id"]
    assert call["status"] == "running"
    assert call["elicitation"] == {
        "elicitation_id": asked["elicitation_id"],
        "mode": "form",
        "message": asked["message"],
        "requested_schema": FORM,
        "url": None,
        "action": None,
        "content": None,
    }
    # Nothing else may start meanwhile.
    busy = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "again"})
    assert busy.status_code == 409

    answered = await user.post(
        f"/api/chats/{chat_id}/elicitations",
        json={
            "elicitation_id": asked["elicitation_id"],
            "action": "accept",
            "content": {"city": "Oslo"},
        },
    )
    assert answered.status_code == 200, answered.text
    rest = parse_stream(answered.text)
    assert rest[0]["type"] == "start"
    [output] = [c for c in rest if c["type"] == "tool-output-available"]  # the form's call only
    assert output["toolCallId"] == asked["tool_call_id"]
    assert output["output"] == "Sunny in Oslo for 3 days"
    assert [c["type"] for c in rest[-2:]] == ["finish", "[DONE]"]
    assert asking.answers == [Elicited("accept", {"city": "Oslo", "days": 3, "units": "metric"})]

    chat = await wait_until_idle(user, chat_id)
    call = call_of(chat)
    assert call["status"] == "done"
    assert call["elicitation"]["action"] == "accept"
    assert call["elicitation"]["content"] == {"city": "Oslo", "days": 3, "units": "metric"}
    assert chat["messages"][-1]["content"] == "Here it is."
    # The model read the tool's result, which carries what the user answered.
    last = fakes["openai"].model_requests[-1].body
    assert "Sunny in Oslo for 3 days" in str(last["messages"])


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"action": "accept", "content": {"city": 7}}, "content"),
        ({"action": "accept", "content": {"city": "Oslo", "days": "3"}}, "content"),
        ({"action": "accept", "content": {"city": "Oslo", "days": 99}}, "content"),
        ({"action": "accept", "content": {}}, "content"),
        ({"action": "accept", "content": {"city": "Oslo", "units": "kelvin"}}, "content"),
        ({"action": "decline", "content": {"city": "Oslo"}}, "content"),
        ({"action": "maybe"}, "action"),
        ({"action": "accept", "content": ["Oslo"]}, "content"),
        ({"content": {"city": "Oslo"}}, "action"),
        ({"action": "accept", "content": {"city": "Oslo"}, "extra": 1}, "extra"),
    ],
)
async def test_a_bad_answer_is_a_422_and_the_form_still_waits(
    body: dict[str, Any],
    where: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    asking: AskingServer,
) -> None:
    chat_id, asked = await ask(user, fakes)
    refused = await user.post(
        f"/api/chats/{chat_id}/elicitations",
        json={"elicitation_id": asked["elicitation_id"], **body},
    )
    assert refused.status_code == 422, refused.text
    assert where in str(refused.json()["detail"])
    chat = (await user.get(f"/api/chats/{chat_id}")).json()
    assert call_of(chat)["elicitation"]["action"] is None
    assert asking.answers == []
    declined = await user.post(
        f"/api/chats/{chat_id}/elicitations",
        json={"elicitation_id": asked["elicitation_id"], "action": "decline"},
    )
    assert declined.status_code == 200
    [output] = [c for c in parse_stream(declined.text) if c["type"] == "tool-output-available"]
    assert output["output"] == "No forecast: the user chose decline."
    await wait_until_idle(user, chat_id)


async def test_unknown_foreign_and_finished_forms_are_404_and_change_nothing(
    user: Client,
    new_user: Callable[[], Any],
    fakes: dict[str, FakeProviderServer],
    asking: AskingServer,
) -> None:
    chat_id, asked = await ask(user, fakes)
    other = await new_user()
    answer = {
        "elicitation_id": asked["elicitation_id"],
        "action": "accept",
        "content": {"city": "Oslo"},
    }
    for client, chat, body in (
        (other, chat_id, answer),  # another user's chat
        (user, chat_id, {**answer, "elicitation_id": "eli_unknown"}),
        (user, "00000000-0000-0000-0000-000000000000", answer),
    ):
        refused = await client.post(f"/api/chats/{chat}/elicitations", json=body)
        assert refused.status_code == 404, refused.text
    not_an_id = await user.post("/api/chats/not-a-uuid/elicitations", json=answer)
    assert not_an_id.status_code == 422
    assert (
        call_of((await user.get(f"/api/chats/{chat_id}")).json())["elicitation"]["action"] is None
    )

    done = await user.post(f"/api/chats/{chat_id}/elicitations", json=answer)
    assert done.status_code == 200
    await wait_until_idle(user, chat_id)
    again = await user.post(f"/api/chats/{chat_id}/elicitations", json=answer)
    assert again.status_code == 404
    assert asking.answers == [Elicited("accept", {"city": "Oslo", "days": 3, "units": "metric"})]


async def test_an_unanswered_form_is_cancelled_at_the_calls_timeout(
    user: Client, fakes: dict[str, FakeProviderServer], asking: AskingServer
) -> None:
    asking.timeout = 0.6
    chat_id, _ = await ask(user, fakes)
    chat = await wait_until_idle(user, chat_id)
    call = call_of(chat)
    assert asking.answers == [Elicited("cancel")]
    assert call["elicitation"]["action"] == "cancel"
    assert call["result"] == "No forecast: the user chose cancel."
    assert chat["messages"][-1]["content"] == "Here it is."


async def test_a_stop_cancels_the_form_and_ends_the_turn(
    user: Client, fakes: dict[str, FakeProviderServer], asking: AskingServer
) -> None:
    chat_id, asked = await ask(user, fakes)
    stopped = await user.post(f"/api/chats/{chat_id}/stop")
    assert stopped.status_code == 202
    chat = await wait_until_idle(user, chat_id)
    assert call_of(chat)["elicitation"]["action"] == "cancel"
    late = await user.post(
        f"/api/chats/{chat_id}/elicitations",
        json={"elicitation_id": asked["elicitation_id"], "action": "decline"},
    )
    assert late.status_code == 404


async def test_an_answer_stored_by_another_worker_reaches_the_waiting_call(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    asking: AskingServer,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chat_id, asked = await ask(user, fakes)
    # This worker answers as one that does not run the turn: the row is what carries it.
    monkeypatch.setattr(services.turns, "local_turn", lambda chat_id: None)
    answered = await user.post(
        f"/api/chats/{chat_id}/elicitations",
        json={
            "elicitation_id": asked["elicitation_id"],
            "action": "accept",
            "content": {"city": "Rome", "days": 2},
        },
    )
    assert answered.status_code == 202
    assert answered.json() == {"elicitation_id": asked["elicitation_id"], "action": "accept"}
    monkeypatch.undo()
    chat = await wait_until_idle(user, chat_id)
    assert call_of(chat)["result"] == "Sunny in Rome for 2 days"
    assert asking.answers == [Elicited("accept", {"city": "Rome", "days": 2, "units": "metric"})]


async def test_a_completion_runs_with_the_chats_model_capped_and_logged(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    asking: AskingServer,
    services: Services,
) -> None:
    asking.sample = SamplingRequest(
        messages=[ModelRequest(parts=[UserPromptPart("Say hi")])],
        system_prompt="You are terse.",
        max_tokens=1_000_000,
        temperature=0.2,
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    fake = fakes["openai"]
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "?"})]),
        Reply(text="Hi."),
        Reply(text="The server's model said hi."),
    )
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Go"})
    assert response.status_code == 200
    outputs = [c for c in parse_stream(response.text) if c["type"] == "tool-output-available"]
    assert outputs[-1]["output"] == "The model said: Hi."
    [sampled] = asking.sampled
    assert sampled.model == MODEL_IDS["openai"]
    assert sampled.stop_reason == "endTurn"

    completion = fake.model_requests[2].body
    assert completion.get("max_completion_tokens", completion.get("max_tokens")) == 1024
    assert completion["temperature"] == 0.2
    assert "tools" not in completion
    assert completion["messages"][0] == {"role": "system", "content": "You are terse."}
    assert completion["messages"][-1]["content"] in ("Say hi", [{"type": "text", "text": "Say hi"}])

    await wait_until_idle(user, chat_id)
    async with services.sessions() as db:
        rows = (
            await db.execute(
                select(LlmRequest.purpose, LlmRequest.user_id, LlmRequest.output_tokens)
                .where(LlmRequest.chat_id == uuid.UUID(chat_id))
                .order_by(LlmRequest.id)
            )
        ).all()
    purposes = [purpose for purpose, _, _ in rows]
    assert purposes == ["round", "round", "sampling", "round"]
    assert all(str(owner) == user.user["id"] for _, owner, _ in rows)
    assert rows[2][2] and rows[2][2] > 0


async def test_a_provider_failure_in_a_completion_is_the_tools_error_and_logged(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    asking: AskingServer,
    services: Services,
) -> None:
    asking.sample = SamplingRequest(
        messages=[ModelRequest(parts=[UserPromptPart("Say hi")])], system_prompt=None, max_tokens=5
    )
    chat_id = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather"]})]),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "?"})]),
        Fail(status=400, message="upstream refused"),
        Reply(text="It failed."),
    )
    response = await user.post(f"/api/chats/{chat_id}/messages", json={"content": "Go"})
    assert response.status_code == 200
    chat = await wait_until_idle(user, chat_id)
    call = call_of(chat)
    assert call["status"] == "failed"
    assert "upstream refused" in call["result"]
    assert chat["messages"][-1]["content"] == "It failed."
    async with services.sessions() as db:
        errors = (
            await db.scalars(
                select(LlmRequest.error).where(
                    LlmRequest.chat_id == uuid.UUID(chat_id), LlmRequest.purpose == "sampling"
                )
            )
        ).all()
    assert len(errors) == 1 and errors[0]


async def test_waiting_forms_do_not_hold_up_other_chats(
    user: Client, fakes: dict[str, FakeProviderServer], asking: AskingServer
) -> None:
    first, _ = await ask(user, fakes)
    second = (await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    # The first chat's last scripted reply is still queued: the second chat's turn takes it.
    plain = await user.post(f"/api/chats/{second}/messages", json={"content": "Hello"})
    assert plain.status_code == 200
    said = "".join(c["delta"] for c in parse_stream(plain.text) if c["type"] == "text-delta")
    assert said == "Here it is."
    await user.post(f"/api/chats/{first}/stop")
    chat = await wait_until_idle(user, first)
    assert call_of(chat)["elicitation"]["action"] == "cancel"
