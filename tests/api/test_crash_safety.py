"""A worker killed mid-turn, a database that drops connections: nothing left open, nothing lost.

The killed worker is a real `hearth serve` process ended with SIGKILL while its turns stream
text or wait inside a slow call of a real MCP server; the survivor is the test's own server,
whose sweep must settle the dead turns without anyone writing in their chats. Every client
records what it received and when, so each stored round can be held to what its client saw:
a prefix of it, and no shorter than what was received a second before the kill.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from app.agent.leases import INTERRUPTED_CALL, INTERRUPTED_ROUND
from app.services import Services
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS, providers_yaml
from tests.support import ROOT, Client, http_client, wait_until, wait_until_idle
from tests.workers import Worker, beside, hearth_worker, worker_env

pytestmark = pytest.mark.slow

LEASE = 2
"""The killed worker's `HEARTH_TURN_LEASE_SECONDS`."""
SETTLED_WITHIN = LEASE + 10
"""The contract: a dead turn is settled within the lease and ten seconds of the death."""
SAVED_BEHIND = 1.0
"""What a client received this long before the kill must be in the row: the supervisor writes
twice a second, and the rest is slack for a loaded machine."""
SLOW_SERVER = ROOT / "tests" / "fakes" / "mcp_servers" / "slow_start.py"
LONG_TEXT = " ".join(f"word{i}" for i in range(600))
"""About 4,000 characters: 500 deltas of 8, 25 ms apart, streaming for 12 s."""


@dataclass
class Received:
    """What one client read of its turn's stream: each round's text deltas with their time."""

    rounds: dict[int, list[tuple[float, str]]] = field(default_factory=dict)
    types: list[str] = field(default_factory=list)
    cut: bool = False

    def text(self, message_id: int, before: float | None = None) -> str:
        return "".join(
            delta for at, delta in self.rounds.get(message_id, []) if before is None or at < before
        )

    @property
    def deltas(self) -> int:
        return sum(len(deltas) for deltas in self.rounds.values())


async def follow(
    http: httpx.AsyncClient, chat_id: str, content: str, csrf: str, received: Received
) -> None:
    """Send a message and read its stream to the end, or until the connection is cut."""
    loop = asyncio.get_running_loop()
    current = 0
    try:
        async with http.stream(
            "POST",
            f"/api/chats/{chat_id}/messages",
            json={"content": content},
            headers={"X-CSRF-Token": csrf},
        ) as response:
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data: ") :])
                received.types.append(chunk["type"])
                if chunk["type"] == "data-assistant-message":
                    current = chunk["data"]["id"]
                    received.rounds.setdefault(current, [])
                elif chunk["type"] == "text-delta":
                    received.rounds.setdefault(current, []).append((loop.time(), chunk["delta"]))
    except httpx.HTTPError:
        received.cut = True


def slow_mcp_yaml(path: Path) -> Path:
    path.write_text(
        "servers:\n"
        "  - name: slow\n"
        "    description: Waits as long as it is asked\n"
        f"    command: [{sys.executable}, {SLOW_SERVER}]\n"
        "    env: {SLOW_START_SECONDS: '0'}\n"
    )
    return path


@pytest.fixture
async def victim(
    services: Services, fakes: dict[str, FakeProviderServer], tmp_path: Path
) -> AsyncIterator[Worker]:
    """A second worker on the test's database, with a short lease and a slow MCP server."""
    env = beside(
        services.settings,
        providers_yaml(fakes),
        tmp_path,
        mcp_file=str(slow_mcp_yaml(tmp_path / "mcp-victim.yaml")),
        turn_lease_seconds=str(LEASE),
    )
    async with hearth_worker(env) as worker:
        yield worker


def at(worker: Worker, user: Client) -> httpx.AsyncClient:
    """The user's browser session, pointed at `worker`."""
    return http_client(base_url=worker.base_url, cookies=user.http.cookies, timeout=60)


async def new_chat(user: Client, model: str) -> str:
    response = await user.post("/api/chats", json={"model": MODEL_IDS[model]})
    return str(response.json()["id"])


def open_rows(chat: dict[str, Any]) -> list[str]:
    """What in a chat still says it is going on."""
    found = [
        f"message {m['id']} {m['status']}" for m in chat["messages"] if m["status"] == "streaming"
    ]
    found += [
        f"call {c['tool_call_id']} {c['status']}"
        for m in chat["messages"]
        for c in m["tool_calls"]
        if c["status"] in ("running", "pending")
    ]
    return found + (["the chat says a turn runs"] if chat["running"] else [])


def outline(chat: dict[str, Any]) -> str:
    """A chat's rounds and calls a line each, for a failure to show how they ended."""
    return "\n".join(
        f"{m['id']} {m['role']} {m['status']} {m['error']!r} "
        + ", ".join(f"{c['name']} {c['status']} {c['result']!r:.80}" for c in m["tool_calls"])
        for m in chat["messages"]
    )


async def test_a_killed_workers_turns_are_settled_keeping_what_their_clients_saw(
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: Any,
    victim: Worker,
) -> None:
    csrf = user.csrf or ""
    loop = asyncio.get_running_loop()
    async with at(victim, user) as there:

        async def slow_group_ready() -> bool:
            groups = (await there.get("/api/tools")).json()
            return any(g["group"] == "slow" and g["status"] == "available" for g in groups)

        await wait_until(slow_group_ready, failure="the victim's MCP server did not start")

        # Turns inside a slow tool call, started one by one so each takes its own two replies.
        tool_chats: dict[str, Received] = {}
        tasks = []
        for n in range(2):
            fakes["openai"].script(
                Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["slow"]})]),
                Reply(
                    text="Let me wait.",
                    tool_calls=[ToolCall("mcp__slow__sleep", {"seconds": 60})],
                ),
            )
            chat_id = await new_chat(user, "openai")
            tool_chats[chat_id] = Received()
            tasks.append(
                asyncio.create_task(follow(there, chat_id, f"wait {n}", csrf, tool_chats[chat_id]))
            )

            async def in_the_call(chat_id: str = chat_id) -> bool:
                chat = (await user.get(f"/api/chats/{chat_id}")).json()
                calls = [c for m in chat["messages"] for c in m["tool_calls"]]
                return any(
                    c["name"] == "mcp__slow__sleep" and c["status"] == "running" for c in calls
                )

            await wait_until(in_the_call, failure="the slow call never started")

        # Turns streaming text, and two turns on the survivor that must not notice anything.
        text_chats: dict[str, Received] = {}
        for n in range(4):
            fakes["anthropic"].script(Reply(text=LONG_TEXT, token_interval=0.025))
            chat_id = await new_chat(user, "anthropic")
            text_chats[chat_id] = Received()
            tasks.append(
                asyncio.create_task(follow(there, chat_id, f"talk {n}", csrf, text_chats[chat_id]))
            )
        survivors: dict[str, Received] = {}
        for n in range(2):
            fakes["moonshot"].script(
                Reply(text=f"Survivor {n} answers in full.", token_interval=0.2)
            )
            chat_id = await new_chat(user, "moonshot")
            survivors[chat_id] = Received()
            tasks.append(
                asyncio.create_task(
                    follow(user.http, chat_id, f"survive {n}", csrf, survivors[chat_id])
                )
            )
        await wait_until(
            lambda: all(r.deltas >= 80 for r in text_chats.values()),  # two seconds of text
            failure="the text turns did not stream",
        )

        await victim.kill()
        killed_at = loop.time()
        stopping = next(iter(text_chats))
        while_held = await user.post(f"/api/chats/{stopping}/stop")
        assert while_held.status_code == 202, while_held.text

        chats: dict[str, dict[str, Any]] = {}

        async def all_settled() -> bool:
            for chat_id in [*tool_chats, *text_chats]:
                chats[chat_id] = chat = (await user.get(f"/api/chats/{chat_id}")).json()
                if open_rows(chat):
                    return False
            return True

        await wait_until(
            all_settled,
            within=SETTLED_WITHIN + 5,
            failure=lambda: f"left open: { {c: open_rows(chat) for c, chat in chats.items()} }",
        )
        settled_in = loop.time() - killed_at
        assert settled_in <= SETTLED_WITHIN, settled_in
        await asyncio.gather(*tasks)

    after_settling = await user.post(f"/api/chats/{stopping}/stop")
    assert after_settling.status_code == 409, after_settling.text

    for chat_id, received in text_chats.items():
        assert received.cut, "the killed worker's stream ended normally"
        chat = chats[chat_id]
        [asked, answer] = chat["messages"]
        assert asked["role"] == "user" and asked["status"] == "ok"
        assert answer["status"] == "incomplete" and answer["error"] == INTERRUPTED_ROUND
        seen = received.text(answer["id"])
        assert seen.startswith(answer["content"]), "stored text the client never received"
        assert answer["content"].startswith(received.text(answer["id"], killed_at - SAVED_BEHIND))
        assert len(answer["content"]) > 0

    for chat_id, received in tool_chats.items():
        chat = chats[chat_id]
        told = f"{outline(chat)}\nthe killed worker said:\n{victim.log_lines('WARNING', 'ERROR')}"
        [asked, activation, waiting] = chat["messages"]
        assert asked["role"] == "user"
        assert activation["status"] == "ok", told
        assert activation["tool_calls"][0]["status"] == "done", told
        assert waiting["content"] == "Let me wait." == received.text(waiting["id"])
        assert waiting["status"] == "incomplete" and waiting["error"] == INTERRUPTED_ROUND, told
        [call] = waiting["tool_calls"]
        assert call["status"] == "cancelled" and call["result"] == INTERRUPTED_CALL, told

    for chat_id, received in survivors.items():
        chat = await wait_until_idle(user, chat_id)
        answer = chat["messages"][-1]
        assert answer["status"] == "ok", answer
        assert answer["content"] == received.text(answer["id"]) != ""
        assert received.types[-1] == "finish"

    # A settled chat takes the next message at once, and the model sees the cut-off answer.
    fakes["anthropic"].script(Reply(text="Where was I?"))
    retried = await user.post(f"/api/chats/{stopping}/messages", json={"content": "go on"})
    assert retried.status_code == 200, retried.text
    chat = await wait_until_idle(user, stopping)
    assert [m["role"] for m in chat["messages"]] == ["user", "assistant", "user", "assistant"]
    assert chat["messages"][-1]["status"] == "ok"


async def test_sqlite_killed_and_restarted_settles_its_own_turns(
    fakes: dict[str, FakeProviderServer], tmp_path: Path
) -> None:
    """The embedded deployment: one process on SQLite, killed mid-turn and started again. With
    no other worker, nothing can settle the dead turns before the restart, so the bound runs from
    whichever comes later, the death or the restarted process answering."""
    providers = tmp_path / "providers.yaml"
    providers.write_text(providers_yaml(fakes))
    env = worker_env(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'hearth.db'}",
        secret_key="restart-test-secret-key-0123456789",
        data_dir=tmp_path / "data",
        providers_file=providers,
        auto_migrate="1",
        turn_lease_seconds=str(LEASE),
    )
    loop = asyncio.get_running_loop()
    received: dict[str, Received] = {}
    async with (
        hearth_worker(env) as first,
        http_client(base_url=first.base_url, timeout=60) as http,
    ):
        registered = await http.post(
            "/api/auth/register", json={"email": "r@example.com", "password": "long enough"}
        )
        assert registered.status_code in (200, 201), registered.text
        csrf = http.cookies["hearth_csrf"]
        cookies = http.cookies
        tasks = []
        for n in range(3):
            fakes["anthropic"].script(Reply(text=LONG_TEXT, token_interval=0.025))
            created = await http.post(
                "/api/chats", json={"model": MODEL_IDS["anthropic"]}, headers={"X-CSRF-Token": csrf}
            )
            chat_id = created.json()["id"]
            received[chat_id] = Received()
            tasks.append(
                asyncio.create_task(follow(http, chat_id, f"go {n}", csrf, received[chat_id]))
            )
        await wait_until(
            lambda: all(r.deltas >= 80 for r in received.values()),
            failure="the turns did not stream",
        )
        await first.kill()
        killed_at = loop.time()
        await asyncio.gather(*tasks)

    async with (
        hearth_worker(env) as second,
        http_client(base_url=second.base_url, cookies=cookies, timeout=60) as http,
    ):
        up_at = loop.time()
        chats: dict[str, dict[str, Any]] = {}

        async def all_settled() -> bool:
            for chat_id in received:
                chats[chat_id] = chat = (await http.get(f"/api/chats/{chat_id}")).json()
                if open_rows(chat):
                    return False
            return True

        await wait_until(all_settled, within=SETTLED_WITHIN + 5, failure="left open")
        assert loop.time() - max(killed_at, up_at) <= SETTLED_WITHIN
        for chat_id, seen in received.items():
            answer = chats[chat_id]["messages"][-1]
            assert answer["status"] == "incomplete" and answer["error"] == INTERRUPTED_ROUND
            assert seen.text(answer["id"]).startswith(answer["content"])
            assert answer["content"].startswith(seen.text(answer["id"], killed_at - SAVED_BEHIND))
            assert answer["content"]
        fakes["anthropic"].script(Reply(text="Back again."))
        chat_id = next(iter(received))
        again = await http.post(
            f"/api/chats/{chat_id}/messages",
            json={"content": "still there?"},
            headers={"X-CSRF-Token": http.cookies["hearth_csrf"]},
        )
        assert again.status_code == 200, again.text
        assert '"delta":"Back' in again.text or "Back again." in again.text


class Terminator:
    """Blocks hearth's writes to the turns' rows and terminates each connection that waits.

    It holds the rows of the chats and of their rounds `FOR UPDATE` in a transaction of its own,
    so every write to them (a round's partial text, its end, the lease) waits on a lock; and
    terminates every connection of the database that waits on a lock, again and again. So the
    connections are dropped in the middle of the turns' writes, not between them, until the
    rows are let go.
    """

    def __init__(self, services: Services) -> None:
        url = services.settings.database_url.replace("postgresql+asyncpg", "postgresql")
        self.url = url
        self.database = url.rsplit("/", 1)[1]
        self.terminated = 0

    @asynccontextmanager
    async def blocking(self, chat_ids: list[str]) -> AsyncIterator[None]:
        holder = await asyncpg.connect(self.url)
        killer = await asyncpg.connect(self.url)
        done = asyncio.Event()

        async def terminate() -> None:
            while not done.is_set():
                self.terminated += await killer.fetchval(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = $1 AND wait_event_type = 'Lock'",
                    self.database,
                )
                await asyncio.sleep(0.05)

        ids = [uuid.UUID(i) for i in chat_ids]
        transaction = holder.transaction()
        await transaction.start()
        await holder.execute("SELECT 1 FROM chats WHERE id = ANY($1) FOR UPDATE", ids)
        await holder.execute("SELECT 1 FROM messages WHERE chat_id = ANY($1) FOR UPDATE", ids)
        terminating = asyncio.create_task(terminate())
        try:
            yield
        finally:
            done.set()
            await terminating
            await transaction.rollback()
            await holder.close()
            await killer.close()


async def start_turns(
    user: Client, fake: FakeProviderServer, count: int
) -> tuple[dict[str, Received], list[asyncio.Task[None]]]:
    """`count` turns whose text streams after half a second, each round ending with a write."""
    received: dict[str, Received] = {}
    for n in range(count):
        fake.script(Reply(text=f"Answer {n}: " + "steady " * 8, first_token_delay=0.5))
        received[await new_chat(user, "anthropic")] = Received()
    tasks = [
        asyncio.create_task(follow(user.http, chat_id, "hello", user.csrf or "", seen))
        for chat_id, seen in received.items()
    ]
    # Once each round is stored (its id streamed), nothing the route writes is left to block.
    await wait_until(
        lambda: all(seen.rounds for seen in received.values()), failure="no round started"
    )
    return received, tasks


def postgresql_only(backend: str) -> None:
    if backend != "postgresql":
        pytest.skip("PostgreSQL terminates connections; an SQLite file has none to drop")


async def test_turns_outlive_connections_terminated_in_their_final_writes(
    backend: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: Any,
    services: Services,
) -> None:
    """Ten turns end while their connections are terminated mid-write for two seconds: each
    write is made again on a fresh connection, and every turn ends stored and told `ok`."""
    postgresql_only(backend)
    terminator = Terminator(services)
    received, tasks = await start_turns(user, fakes["anthropic"], 10)
    async with terminator.blocking(list(received)):
        await wait_until(  # every round has streamed its text and waits to store its end
            lambda: all(
                seen.text(i).endswith("steady ") for seen in received.values() for i in seen.rounds
            ),
            failure="the rounds did not stream",
        )
        await wait_until(lambda: terminator.terminated >= 20, failure="no write was terminated")
        await asyncio.sleep(1.0)
    await asyncio.gather(*tasks)

    for chat_id, seen in received.items():
        chat = await wait_until_idle(user, chat_id)
        assert not open_rows(chat), open_rows(chat)
        assert "error" not in seen.types and seen.types[-1] == "finish", seen.types
        [asked, answer] = chat["messages"]
        assert asked["content"] == "hello"
        assert answer["status"] == "ok" and answer["error"] is None, answer
        assert answer["content"] == seen.text(answer["id"])
        assert answer["usage"] is not None


async def test_a_write_that_fails_for_good_ends_the_turn_with_an_error_stored_as_told(
    backend: str,
    user: Client,
    fakes: dict[str, FakeProviderServer],
    registry: Any,
    services: Services,
) -> None:
    """Connections terminated longer than a write is retried: the turn ends with an `error`
    part, and its round is stored as not finished, never `ok`."""
    postgresql_only(backend)
    services.settings = services.settings.model_copy(update={"turn_lease_seconds": LEASE})
    terminator = Terminator(services)
    received, tasks = await start_turns(user, fakes["anthropic"], 2)
    async with terminator.blocking(list(received)):
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)  # they end while it blocks
    for chat_id, seen in received.items():
        assert seen.types[-1] == "finish" and "error" in seen.types, seen.types
        chat = await wait_until_idle(user, chat_id, within=SETTLED_WITHIN + 5)
        assert not open_rows(chat), open_rows(chat)
        answer = chat["messages"][-1]
        assert answer["status"] in ("failed", "incomplete") and answer["error"], answer
        assert seen.text(answer["id"]).startswith(answer["content"])
