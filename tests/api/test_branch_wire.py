"""What goes upstream over branches (docs/wire.md §2, §2b), in every DTL mode.

The defining property: a request built on a branch is byte-identical to the request built for a
linear chat whose messages are that branch's path (same rows, same activations, same summary),
and a branch left and come back to sends what it sent before, so provider caches stay warm. A
summary made on one branch changes nothing on another, and an activation the summary covers is
rendered at the summary, with no row moved.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import select

from app.models import Message
from app.services import Services
from tests import golden
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.golden import assert_golden
from tests.provider_setup import DTL_MODEL_IDS
from tests.support import Client, parse_stream, wait_until_idle

pytestmark = [pytest.mark.usefixtures("services", "registry", "catalogue"), pytest.mark.slow]

FAKE = {"anthropic_tool_reference": "anthropic", "kimi_system_tools": "moonshot", "none": "openai"}
ACTIVATE_IDS = {
    "anthropic_tool_reference": "toolu_01Act",
    "kimi_system_tools": "functions.activate_tools:0",
    "none": "call_act",
}
MODES = list(FAKE)


@pytest.fixture(autouse=True)
def keep_two(services: Services) -> None:
    services.settings = services.settings.model_copy(update={"compact_keep": 2})


def activation(mode: str) -> Reply:
    call = ToolCall("activate_tools", {"groups": ["weather"]}, id=ACTIVATE_IDS[mode])
    return Reply(tool_calls=[call])


def wire(body: dict[str, Any]) -> str:
    """A request as bytes to compare, the one reading of the clock masked."""
    return golden.render(body)


class Session:
    """One chat driven through the API, its requests read off the fake provider."""

    def __init__(
        self, user: Client, fake: FakeProviderServer, mode: str, services: Services
    ) -> None:
        self.user, self.fake, self.mode, self.services = user, fake, mode, services
        self.chat_id = ""

    async def open(self) -> None:
        created = await self.user.post("/api/chats", json={"model": DTL_MODEL_IDS[self.mode]})
        self.chat_id = created.json()["id"]

    async def _stream(self, route: str, body: dict[str, Any]) -> None:
        response = await self.user.post(f"/api/chats/{self.chat_id}/{route}", json=body)
        assert response.status_code == 200, response.text
        chunks = parse_stream(response.text)
        assert "error" not in [c["type"] for c in chunks], chunks
        await wait_until_idle(self.user, self.chat_id)

    async def send(self, content: str, *replies: Reply, **body: Any) -> str:
        """Send, answered by `replies`; the last request's body as bytes."""
        self.fake.script(*replies)
        await self._stream("messages", {"content": content, **body})
        return self.last()

    async def regenerate(self, content: str, *replies: Reply) -> str:
        self.fake.script(*replies)
        await self._stream("regenerate", {"message_id": await self.id_of(content)})
        return self.last()

    async def compact(self, summary: str) -> str:
        self.fake.script(Reply(text=summary))
        response = await self.user.post(f"/api/chats/{self.chat_id}/compact")
        assert response.status_code == 200, response.text
        return self.last()

    async def switch(self, content: str) -> None:
        response = await self.user.put(
            f"/api/chats/{self.chat_id}/active", json={"message_id": await self.id_of(content)}
        )
        assert response.status_code == 200, response.text

    async def detail(self) -> dict[str, Any]:
        return (await self.user.get(f"/api/chats/{self.chat_id}")).json()

    async def id_of(self, content: str) -> int:
        """The newest message of the chat with this content, on any branch."""
        async with self.services.sessions() as db:
            found = await db.scalar(
                select(Message.id)
                .where(Message.chat_id == uuid.UUID(self.chat_id), Message.content == content)
                .order_by(Message.id.desc())
                .limit(1)
            )
        assert found is not None, content
        return int(found)

    def last(self) -> str:
        request = self.fake.model_requests[-1]
        assert request.validation_error is None, request.validation_error
        return wire(request.body)


@pytest.mark.parametrize("mode", MODES)
async def test_a_branch_sends_what_a_linear_chat_of_its_path_sends(
    mode: str, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes[FAKE[mode]]
    branchy = Session(user, fake, mode, services)
    await branchy.open()
    await branchy.send("Weather in Oslo?", activation(mode), Reply(text="Weather is on."))
    await branchy.send("And tomorrow?", Reply(text="Still sunny."))
    last_of_first = (await branchy.detail())["messages"][2]["id"]
    await branchy.send("And on Sunday?", Reply(text="Rain on Sunday."), parent_id=last_of_first)
    await branchy.regenerate("And on Sunday?", Reply(text="Maybe rain."))
    on_branch = await branchy.send("Thanks", Reply(text="You're welcome."))

    linear = Session(user, fake, mode, services)
    await linear.open()
    await linear.send("Weather in Oslo?", activation(mode), Reply(text="Weather is on."))
    await linear.send("And on Sunday?", Reply(text="Maybe rain."))
    on_linear = await linear.send("Thanks", Reply(text="You're welcome."))

    assert on_branch == on_linear
    assert_golden(f"wire_branch_dtl_{mode}", fake.model_requests[-1].body)

    # Away to the first answer's branch and back: the same request again.
    await branchy.switch("Still sunny.")
    assert [m["content"] for m in (await branchy.detail())["messages"]][-1] == "Still sunny."
    await branchy.switch("And on Sunday?")
    again = await branchy.regenerate("Thanks", Reply(text="You're welcome."))
    assert again == on_branch


@pytest.mark.parametrize("mode", MODES)
async def test_a_summary_on_one_branch_changes_nothing_on_another(
    mode: str, user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes[FAKE[mode]]
    chat = Session(user, fake, mode, services)
    await chat.open()
    await chat.send("Turn on weather", activation(mode), Reply(text="Weather is on."))
    await chat.send("Two?", Reply(text="Two."))
    await chat.send("Three?", Reply(text="Three."))
    before = await chat.regenerate("Three?", Reply(text="Three again."))

    # Branch B forks at the second question, and is summarised past the fork.
    first_answer = await chat.id_of("Weather is on.")
    await chat.send("Two, again?", Reply(text="Two, again."), parent_id=first_answer)
    await chat.send("Three, again?", Reply(text="Three, again."))
    summarising = await chat.compact("Weather is on; two and three were asked again.")
    [summary] = (await chat.detail())["summaries"]
    assert summary["covers_up_to_message_id"] == await chat.id_of("Two, again.")
    on_b = await chat.send("Four?", Reply(text="Four."))
    assert "Summary of the earlier conversation" in on_b

    # Branch A never sees it: the same request as before B existed, no summary listed.
    await chat.switch("Three?")
    assert (await chat.detail())["summaries"] == []
    assert await chat.regenerate("Three?", Reply(text="Three again.")) == before

    # Branch B is byte for byte a linear chat of its path with the same summary.
    linear = Session(user, fake, mode, services)
    await linear.open()
    await linear.send("Turn on weather", activation(mode), Reply(text="Weather is on."))
    await linear.send("Two, again?", Reply(text="Two, again."))
    await linear.send("Three, again?", Reply(text="Three, again."))
    assert await linear.compact("Weather is on; two and three were asked again.") == summarising
    assert await linear.send("Four?", Reply(text="Four.")) == on_b
    assert_golden(f"wire_branch_after_summary_dtl_{mode}", fake.model_requests[-1].body)
