"""Following a running turn over HTTP in one process (SQLite and PostgreSQL): every reader gets
the POST client's events, byte for byte, from wherever it asks; a stalled reader is cut and
hurts nobody; quiet turns send keep-alives; and every bad request gets its clear answer."""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.agent import live
from app.models import User
from app.services import Services
from tests.api.test_accounts import as_key, make_key
from tests.api.test_path_reads import statements
from tests.conftest import NewUser
from tests.fakes.providers import FakeProviderServer, Reply
from tests.provider_setup import MODEL_IDS
from tests.support import Client, sse_events, wait_until, wait_until_idle

pytestmark = pytest.mark.usefixtures("services", "registry", "catalogue")

Event = tuple[int | None, str]


class Events:
    """A stream's events as they arrive, with its raw text kept whole."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.text = ""
        self.events: list[Event] = []
        self._parsed = 0
        self._chunks = response.aiter_text()
        self.ended = False

    async def until(self, count: int) -> None:
        while len(self.events) < count and not self.ended:
            try:
                self.text += await anext(self._chunks)
            except (StopAsyncIteration, httpx.HTTPError):  # the end, or a connection cut
                self.ended = True
            complete = self.text.rfind("\n\n") + 2
            if complete > self._parsed:
                self.events += sse_events(self.text[self._parsed : complete])
                self._parsed = complete

    async def rest(self) -> list[Event]:
        await self.until(10**9)
        return self.events


async def new_chat(user: Client) -> str:
    response = await user.post("/api/chats", json={"model": MODEL_IDS["openai"]})
    chat_id: str = response.json()["id"]
    return chat_id


async def follow(http: httpx.AsyncClient, chat_id: str, after: int | None = None) -> str:
    """The whole body a reader of the chat's turn gets (200 expected)."""
    headers = {} if after is None else {"Last-Event-ID": str(after)}
    async with http.stream("GET", f"/api/chats/{chat_id}/stream", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        return (await response.aread()).decode()


def posting(user: Client, chat_id: str, content: str) -> Any:
    return user.http.stream(
        "POST",
        f"/api/chats/{chat_id}/messages",
        json={"content": content},
        headers={"X-CSRF-Token": user.csrf or ""},
    )


def numbered(events: list[Event]) -> None:
    assert [number for number, _ in events] == list(range(1, len(events) + 1))
    assert events[-1][1] == "[DONE]"


async def test_every_reader_gets_the_post_clients_events_from_where_it_asks(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    fake.script(Reply(text="word " * 40, chunk_chars=5, token_interval=0.01))
    chat_id = await new_chat(user)
    readers: list[tuple[int, asyncio.Task[str]]] = []

    def reader(after: int | None) -> None:
        readers.append((after or 0, asyncio.create_task(follow(user.http, chat_id, after))))

    async with posting(user, chat_id, "Talk") as response:
        post = Events(response)
        await post.until(2)  # `start`, `data-user-message`: the model has said nothing yet
        reader(None)
        reader(2)
        await post.until(12)  # in the middle
        reader(None)
        reader(5)
        reader(12)
        reader(30)  # ahead of the turn: it waits for event 31
        events = await post.rest()
    numbered(events)
    last = len(events)
    assert last > 40
    for after, task in readers:
        body = await task
        assert sse_events(body) == events[after:], after
    # One more, for the last event only, and one after the end: 204, the stored chat is the truth.
    assert (await user.get(f"/api/chats/{chat_id}/stream")).status_code == 204
    stored = await wait_until_idle(user, chat_id)
    assert stored["messages"][-1]["content"] == "word " * 40


async def test_a_reader_at_the_last_event_gets_only_the_end(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    fake.script(Reply(text="Soon."))
    chat_id = await new_chat(user)
    async with posting(user, chat_id, "Wait") as response:
        count = len(await Events(response).rest())  # the same reply makes as many events
    held = asyncio.Event()
    fake.script(Reply(text="Soon.", hold=held))
    async with posting(user, chat_id, "Wait") as response:
        post = Events(response)
        await post.until(2)
        last = asyncio.create_task(follow(user.http, chat_id, count - 1))
        past = asyncio.create_task(follow(user.http, chat_id, count))
        await asyncio.sleep(0.1)
        held.set()
        events = await post.rest()
    numbered(events)
    assert len(events) == count
    assert sse_events(await last) == [(count, "[DONE]")]
    assert await past == ""  # nothing follows the last event; it ends with the turn
    assert (await user.get(f"/api/chats/{chat_id}/stream")).status_code == 204


async def test_twenty_readers_get_one_and_the_same_stream(
    user: Client, fakes: dict[str, FakeProviderServer], services: Services
) -> None:
    fake = fakes["openai"]
    held = asyncio.Event()
    fake.script(Reply(text="many readers " * 20, chunk_chars=3, hold=held))
    chat_id = await new_chat(user)
    async with posting(user, chat_id, "Everyone") as response:
        post = Events(response)
        await post.until(2)
        tasks = [asyncio.create_task(follow(user.http, chat_id)) for _ in range(20)]

        async def all_attached() -> bool:
            log = services.turns.live.get(uuid.UUID(chat_id))
            return log is not None and log.readers >= 21

        await wait_until(all_attached, within=5, failure="the readers did not attach")
        held.set()
        events = await post.rest()
    numbered(events)
    bodies = await asyncio.gather(*tasks)
    assert all(sse_events(body) == events for body in bodies)
    assert len(set(bodies)) == 1


@pytest.mark.slow
async def test_a_stalled_reader_is_cut_and_the_turn_and_the_others_go_on(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live, "MAX_LAG", 500)
    fake = fakes["openai"]
    held = asyncio.Event()
    # 6,000 deltas of 1,000 characters, no pauses: more than the kernel's socket buffers hold.
    text = "".join(f"{n:<999}." for n in range(6000))
    fake.script(Reply(text=text, chunk_chars=1000, hold=held))
    chat_id = await new_chat(user)
    stalled: socket.socket | None = None
    try:
        async with posting(user, chat_id, "Flood") as response:
            post = Events(response)
            await post.until(2)
            stalled = await stalled_reader(user, chat_id)
            other = asyncio.create_task(follow(user.http, chat_id))
            held.set()
            events = await post.rest()
        numbered(events)
        assert sse_events(await other) == events
        # The stalled reader's connection was closed by the server: reading it to the end ends.
        assert stalled is not None
        received = await asyncio.to_thread(drain, stalled)
        assert b"\r\nid: 1\ndata: " in received  # it had begun to read, then stopped
        assert len(received) < len(post.text) / 2
        assert not received.endswith(b"data: [DONE]\n\n")
    finally:
        if stalled is not None:
            stalled.close()
    stored = await wait_until_idle(user, chat_id)
    assert stored["messages"][-1]["content"] == text


async def stalled_reader(user: Client, chat_id: str) -> socket.socket:
    """A reader that sends its request and then reads nothing (a tiny receive buffer)."""
    url = httpx.URL(str(user.http.base_url))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((url.host, url.port or 80))
    cookies = "; ".join(f"{name}={value}" for name, value in user.http.cookies.items())
    request = (
        f"GET /api/chats/{chat_id}/stream HTTP/1.1\r\nHost: {url.host}\r\nCookie: {cookies}\r\n\r\n"
    )
    sock.sendall(request.encode())
    return sock


def drain(sock: socket.socket) -> bytes:
    sock.settimeout(20)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


async def test_a_quiet_turn_keeps_its_streams_alive(
    user: Client, fakes: dict[str, FakeProviderServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "KEEP_ALIVE_SECONDS", 0.2)
    fake = fakes["openai"]
    fake.script(Reply(text="After a pause.", first_token_delay=1.0))
    chat_id = await new_chat(user)
    async with posting(user, chat_id, "Think first") as response:
        post = Events(response)
        await post.until(2)
        reader = asyncio.create_task(follow(user.http, chat_id))
        events = await post.rest()
    body = await reader
    assert ": keep-alive\n\n" in post.text and ": keep-alive\n\n" in body
    numbered(events)
    assert sse_events(body) == events  # comments are no events: the numbers do not move


async def test_a_reader_that_leaves_cancels_nothing(
    user: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    fake = fakes["openai"]
    fake.script(Reply(text="Still here. " * 10, chunk_chars=4, token_interval=0.01))
    chat_id = await new_chat(user)
    async with posting(user, chat_id, "Go on") as response:
        post = Events(response)
        await post.until(2)
        async with user.http.stream("GET", f"/api/chats/{chat_id}/stream") as leaving:
            assert leaving.status_code == 200
            async for _ in leaving.aiter_text():
                break  # and it goes
        events = await post.rest()
    numbered(events)
    stored = await wait_until_idle(user, chat_id)
    assert stored["messages"][-1]["status"] == "ok"
    assert stored["messages"][-1]["content"] == "Still here. " * 10


async def test_the_stream_route_refuses_what_it_cannot_follow(
    user: Client, new_user: NewUser, anon: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    chat_id = await new_chat(user)
    assert (await user.get(f"/api/chats/{chat_id}/stream")).status_code == 204
    assert (await user.get(f"/api/chats/{uuid.uuid4()}/stream")).status_code == 404
    assert (await user.get("/api/chats/not-a-chat/stream")).status_code == 422
    assert (await anon.get(f"/api/chats/{chat_id}/stream")).status_code == 401
    for bad in ("x", "-1", "1.5", "١٢".encode(), "9" * 30, "1 2"):
        response = await user.get(f"/api/chats/{chat_id}/stream", headers={"Last-Event-ID": bad})
        assert response.status_code == 422, bad
        assert response.json()["detail"][0]["loc"] == ["header", "last-event-id"]
    for long in ("1" * 65, "9" * 5000, "0" * 3000 + "7"):
        too_long = await user.get(f"/api/chats/{chat_id}/stream", headers={"Last-Event-ID": long})
        assert too_long.status_code == 422
    # Whoever is not signed in learns only that, whatever else the request gets wrong.
    for bad in ("x", "1" * 65):
        refused = await anon.get(f"/api/chats/{chat_id}/stream", headers={"Last-Event-ID": bad})
        assert refused.status_code == 401, bad
    assert (await anon.get(f"/api/chats/{uuid.uuid4()}/stream")).status_code == 401
    # Someone else's chat, while its turn runs, is no chat of theirs.
    fake = fakes["openai"]
    held = asyncio.Event()
    fake.script(Reply(text="Mine.", hold=held))
    other = await new_user()
    async with posting(user, chat_id, "Private") as response:
        post = Events(response)
        await post.until(2)
        assert (await other.get(f"/api/chats/{chat_id}/stream")).status_code == 404
        held.set()
        await post.rest()


async def test_a_script_follows_a_turn_with_its_key_and_only_its_owners_chats(
    user: Client,
    new_user: NewUser,
    server: tuple[str, Services],
    fakes: dict[str, FakeProviderServer],
) -> None:
    """A key reads the chat's lease in the same statement that finds its owner: the owner's key
    follows the turn like the browser, another user's key gets a 404, and a key that stops
    being good (revoked, its owner disabled) a 401."""
    base_url, services = server
    key = (await make_key(user))["key"]
    other_key = (await make_key(await new_user()))["key"]
    chat_id = await new_chat(user)
    fake = fakes["openai"]
    fake.script(Reply(text="By key. " * 12, chunk_chars=4, token_interval=0.01))
    async with as_key(base_url, key) as script, as_key(base_url, other_key) as stranger:
        assert (await script.get(f"/api/chats/{chat_id}/stream")).status_code == 204
        async with posting(user, chat_id, "For the script") as response:
            post = Events(response)
            await post.until(3)
            followed = asyncio.create_task(follow(script.http, chat_id, 1))
            assert (await stranger.get(f"/api/chats/{chat_id}/stream")).status_code == 404
            events = await post.rest()
        numbered(events)
        assert sse_events(await followed) == events[1:]
        [mine] = (await script.get("/api/keys")).json()
        async with services.sessions() as db, db.begin():
            await db.execute(
                update(User).where(User.email == user.user["email"]).values(disabled=True)
            )
        assert (await script.get(f"/api/chats/{chat_id}/stream")).status_code == 401
        async with services.sessions() as db, db.begin():
            await db.execute(
                update(User).where(User.email == user.user["email"]).values(disabled=False)
            )
        assert (await script.get(f"/api/chats/{chat_id}/stream")).status_code == 204
        assert (await user.delete(f"/api/keys/{mine['id']}")).status_code == 204
        assert (await script.get(f"/api/chats/{chat_id}/stream")).status_code == 401


async def test_a_readers_request_is_one_statement_whoever_signs_it(
    user: Client, server: tuple[str, Services]
) -> None:
    """The session (or key), its user and the chat's lease come in one statement; the answer is
    the same as two would give: 204 for the owner's idle chat, 404 for an unknown one."""
    base_url, services = server
    chat_id = await new_chat(user)
    await user.get(f"/api/chats/{chat_id}/stream")  # the session's last-seen time is fresh now
    key = (await make_key(user))["key"]
    async with as_key(base_url, key) as script:
        await script.get(f"/api/chats/{chat_id}/stream")  # and the key's last-used time
        for client in (user, script):
            for chat, status in ((chat_id, 204), (str(uuid.uuid4()), 404)):
                with statements(services) as seen:
                    answer = await client.get(f"/api/chats/{chat}/stream")
                assert answer.status_code == status
                assert len(seen) == 1, seen
                assert "chats" in seen[0] and ("auth_sessions" in seen[0] or "api_keys" in seen[0])
