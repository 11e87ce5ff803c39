"""Following a turn that runs in another worker process, on PostgreSQL: the events travel through
the database and arrive byte for byte, in order, from wherever the reader asks; a worker killed
mid-turn ends its remote readers, and the chat shows what was stored.

The other worker is a real `hearth serve` process over the same database and secret key, as
workers behind a load balancer are; the test's own server is the first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest
from sqlalchemy import func, select

from app.agent import relay
from app.models import LiveEvent
from app.services import Services
from tests.api.test_live_turns import Events, follow, new_chat, numbered, posting
from tests.clock import ShiftedClock
from tests.fakes.providers import FakeProviderServer, Hang, Reply
from tests.provider_setup import providers_yaml
from tests.support import Client, http_client, sse_events, wait_until, wait_until_idle
from tests.workers import Worker, beside, hearth_worker

pytestmark = pytest.mark.usefixtures("services", "registry", "catalogue")


@pytest.fixture
async def other_worker(
    backend: str, services: Services, fakes: dict[str, FakeProviderServer], tmp_path: Path
) -> AsyncIterator[Worker]:
    if backend != "postgresql":
        pytest.skip("events cross worker processes on PostgreSQL; SQLite serves one process")
    env = beside(services.settings, providers_yaml(fakes), tmp_path, turn_lease_seconds="2")
    async with hearth_worker(env) as worker:
        yield worker


def there(user: Client, worker: Worker) -> httpx.AsyncClient:
    """The user's browser session, pointed at the other worker."""
    return http_client(base_url=worker.base_url, cookies=user.http.cookies, timeout=30)


@contextlib.asynccontextmanager
async def posting_there(
    user: Client, worker: Worker, chat_id: str, content: str
) -> AsyncIterator[Events]:
    """A message sent to the other worker, its stream read as it comes."""
    async with (
        there(user, worker) as remote,
        remote.stream(
            "POST",
            f"/api/chats/{chat_id}/messages",
            json={"content": content},
            headers={"X-CSRF-Token": user.csrf or ""},
        ) as response,
    ):
        yield Events(response)


async def test_a_reader_in_another_worker_gets_the_turn_byte_for_byte(
    user: Client, fakes: dict[str, FakeProviderServer], other_worker: Worker
) -> None:
    fake = fakes["openai"]
    fake.script(Reply(text="across workers " * 20, chunk_chars=5, token_interval=0.01))
    chat_id = await new_chat(user)
    async with there(user, other_worker) as remote:
        readers: list[tuple[int, asyncio.Task[str]]] = []
        async with posting(user, chat_id, "Talk") as response:
            post = Events(response)
            await post.until(2)
            readers.append((0, asyncio.create_task(follow(remote, chat_id))))
            await post.until(15)
            readers.append((0, asyncio.create_task(follow(remote, chat_id))))
            readers.append((7, asyncio.create_task(follow(remote, chat_id, 7))))
            readers.append((15, asyncio.create_task(follow(remote, chat_id, 15))))
            events = await post.rest()
        numbered(events)
        for after, task in readers:
            assert sse_events(await task) == events[after:], after
        assert (await remote.get(f"/api/chats/{chat_id}/stream")).status_code == 204


async def test_a_turn_in_the_other_worker_is_followed_here(
    user: Client, fakes: dict[str, FakeProviderServer], other_worker: Worker
) -> None:
    """The reverse: the turn runs in the other process, the readers are this one's."""
    fake = fakes["openai"]
    held = asyncio.Event()
    fake.script(Reply(text="from over there " * 10, chunk_chars=4, hold=held))
    chat_id = await new_chat(user)
    async with posting_there(user, other_worker, chat_id, "Run it there") as post:
        await post.until(2)
        tasks = [asyncio.create_task(follow(user.http, chat_id)) for _ in range(3)]
        await asyncio.sleep(0.3)  # the readers attach while the model has said nothing
        held.set()
        events = await post.rest()
    numbered(events)
    for task in tasks:
        assert sse_events(await task) == events
    assert (await user.get(f"/api/chats/{chat_id}/stream")).status_code == 204


async def test_a_followed_turns_events_come_in_the_notices_the_rows_only_to_catch_up(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    other_worker: Worker,
    services: Services,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader here, attached before the model speaks: every event the turn sends from then
    on reaches this process in a notice, with no read of the rows, and byte for byte."""
    fake = fakes["openai"]
    held = asyncio.Event()
    fake.script(Reply(text="carried along " * 12, chunk_chars=3, token_interval=0.005, hold=held))
    in_notices: set[tuple[int | None, str]] = set()
    """(event number, its `data:` line) of each event a notice brought here."""
    carried = relay.PostgresRelay._carried

    def counting(self: relay.PostgresRelay, rest: str) -> None:
        for _, first, events in orjson.loads(rest):
            in_notices.update(
                (first + offset, data.removeprefix("data: ").removesuffix("\n\n"))
                for offset, data in enumerate(events)
            )
        carried(self, rest)

    monkeypatch.setattr(relay.PostgresRelay, "_carried", counting)
    chat_id = await new_chat(user)
    async with posting_there(user, other_worker, chat_id, "Carry it") as post:
        await post.until(2)
        task = asyncio.create_task(follow(user.http, chat_id))
        relayed = services.turns.relay
        assert relayed is not None

        def caught_up() -> bool:  # the replica here holds every event the turn has sent
            replicas = list(relayed._replicas.values())
            return len(replicas) == 1 and len(replicas[0].log) >= len(post.events) >= 2

        await wait_until(caught_up, failure="the reader here never caught up")
        before = len(post.events)
        held.set()
        events = await post.rest()
    numbered(events)
    assert sse_events(await task) == events
    later = events[before:]
    assert len(later) > 40
    assert set(later) <= in_notices


async def published_rows(services: Services) -> int:
    async with services.sessions() as db:
        return int(await db.scalar(select(func.count()).select_from(LiveEvent)) or 0)


async def test_a_killed_workers_remote_readers_end_and_the_chat_keeps_what_was_stored(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    other_worker: Worker,
    services: Services,
    clock: ShiftedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = fakes["openai"]
    fake.script(Hang(after_events=6, reply=Reply(text="Said before the end. " * 4, chunk_chars=4)))
    chat_id = await new_chat(user)
    remote = there(user, other_worker)
    try:
        response = await remote.send(
            remote.build_request(
                "POST",
                f"/api/chats/{chat_id}/messages",
                json={"content": "Then it dies"},
                headers={"X-CSRF-Token": user.csrf or ""},
            ),
            stream=True,
        )
        post = Events(response)
        await fake.wait_for_request(0)
        await asyncio.wait_for(fake.model_requests[0].hanging.wait(), 10)
        await post.until(7)
        reader = asyncio.create_task(follow(user.http, chat_id))
        await asyncio.sleep(1.0)  # it has caught up with what the turn sent
        assert not reader.done()
        await other_worker.kill()
        body = await asyncio.wait_for(reader, 20)  # ends once the lease has lapsed
        await post.rest()  # what the worker's own client got before it was cut off
    finally:
        await remote.aclose()
    got = sse_events(body)
    assert got == post.events[: len(got)] and len(got) >= 7
    assert got[-1][1] != "[DONE]"
    chat = await wait_until_idle(user, chat_id, within=20)
    last = chat["messages"][-1]
    assert last["status"] == "incomplete"
    assert (await user.get(f"/api/chats/{chat_id}/stream")).status_code == 204
    # What the dead worker published is deleted by this one, once it has been left a while.
    assert await published_rows(services) >= 7
    monkeypatch.setattr(relay, "FORGET_EVERY_SECONDS", 0.2)
    clock.advance(seconds=relay.KEEP_SECONDS + 1)

    async def forgotten() -> bool:
        return await published_rows(services) == 0

    await wait_until(forgotten, within=10, failure="the dead turn's rows stayed")
