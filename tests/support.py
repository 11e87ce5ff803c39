"""Test helpers shared by the suites: databases per backend, a live server, signed-in clients.

Every run gets databases of its own: a temporary SQLite file, and on PostgreSQL a freshly
created database with a random name (dropped at the end), so concurrent runs never see each
other. Under `CI=true` an unreachable PostgreSQL fails the run instead of skipping it.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import socket
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy.engine import make_url

PG_ADMIN_URL = os.environ.get(
    "HEARTH_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() == "true"
ROOT = Path(__file__).resolve().parents[1]

TLS = ssl.create_default_context()
"""One TLS context for every test client: each client would otherwise load the CA bundle
again (about 45 ms), though the tests only speak plain HTTP on loopback."""


T = TypeVar("T")

POLL_SECONDS = 0.02
"""How often `wait_until` looks again."""


async def wait_until(
    condition: Callable[[], T | Awaitable[T]],
    *,
    within: float = 20,
    failure: str | Callable[[], str] = "the condition never held",
) -> T:
    """Wait until `condition()` (a function or a coroutine function) gives something true, and
    return that; fail with `failure` (a message, or a function that makes one) after `within`.

    The one place the tests poll, for what nothing announces: another process coming up, a row
    that a background task or the other worker writes, a child process appearing. Anything that
    has an event or a task to await is awaited instead.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() > deadline:
            raise AssertionError(failure() if callable(failure) else failure)
        await asyncio.sleep(POLL_SECONDS)


def wait_until_sync(
    condition: Callable[[], T],
    *,
    within: float = 20,
    failure: str | Callable[[], str] = "the condition never held",
) -> T:
    """`wait_until` for a test without an event loop (a blocking client, a child process)."""
    deadline = time.monotonic() + within
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(failure() if callable(failure) else failure)
        time.sleep(POLL_SECONDS)
    return value


def http_client(**kwargs: Any) -> httpx.AsyncClient:
    """An HTTP client for the tests' own servers (the app, the fakes)."""
    return httpx.AsyncClient(verify=TLS, **kwargs)


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def pg_available() -> bool:
    try:
        connection = await asyncpg.connect(asyncpg_dsn(PG_ADMIN_URL), timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError):
        return False
    await connection.close()
    return True


def skip_or_fail_without_pg() -> None:
    message = f"PostgreSQL does not answer at {PG_ADMIN_URL}"
    if IN_CI:
        pytest.fail(message + " (mandatory under CI=true)", pytrace=False)
    pytest.skip(message)


@asynccontextmanager
async def fresh_database(backend: str, tmp_dir: Path) -> AsyncIterator[str]:
    """A new, empty database on `backend`; yields its SQLAlchemy async URL, drops it after."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_dir / f'hearth-{uuid.uuid4().hex[:8]}.db'}"
        return
    if not await pg_available():
        skip_or_fail_without_pg()
    name = f"hearth_test_{os.getpid()}_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(asyncpg_dsn(PG_ADMIN_URL))
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        admin = await asyncpg.connect(asyncpg_dsn(PG_ADMIN_URL))
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _Server(uvicorn.Server):
    """A uvicorn server that says when it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.listening.set()


@asynccontextmanager
async def live_server(app: FastAPI) -> AsyncIterator[str]:
    """Serve `app` with uvicorn on a loopback port in this event loop; yields its base URL."""
    port = free_port()
    # As `hearth serve` runs it: the app, not uvicorn, decides whose forwarding headers count.
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        proxy_headers=False,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    listening = asyncio.create_task(server.listening.wait())
    await asyncio.wait({task, listening}, return_when=asyncio.FIRST_COMPLETED)
    if not server.started:  # it stopped instead: say why
        listening.cancel()
        task.result()
        raise RuntimeError("the test server stopped while starting")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass
class Client:
    """A browser-like API client: keeps cookies and sends the CSRF header like a frontend."""

    http: httpx.AsyncClient
    user: dict[str, Any] = field(default_factory=dict)
    password: str = ""

    @property
    def csrf(self) -> str | None:
        return self.http.cookies.get("hearth_csrf")

    async def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        if method.upper() not in ("GET", "HEAD", "OPTIONS") and self.csrf:
            headers.setdefault("X-CSRF-Token", self.csrf)
        return await self.http.request(method, url, headers=headers, **kwargs)

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("GET", url, **kwargs)

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("POST", url, **kwargs)

    async def patch(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PATCH", url, **kwargs)

    async def put(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("PUT", url, **kwargs)

    async def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return await self.request("DELETE", url, **kwargs)


def sse_events(text: str) -> list[tuple[int | None, str]]:
    """The events of a server-sent event stream body: (`id`, `data`), comments left out.

    Strict about what hearth sends: each event is an optional `id: n` line and one `data: `
    line; a comment is a block of its own (`: keep-alive`)."""
    events: list[tuple[int | None, str]] = []
    for block in text.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        lines = block.strip("\n").split("\n")
        event_id = None
        if lines[0].startswith("id: "):
            event_id = int(lines.pop(0)[len("id: ") :])
        assert len(lines) == 1 and lines[0].startswith("data: "), block
        events.append((event_id, lines[0][len("data: ") :]))
    return events


def parse_stream(text: str) -> list[dict[str, Any]]:
    """The chunks of a UI message stream body, in order; `[DONE]` becomes `{"type": "[DONE]"}`."""
    import json

    return [
        {"type": "[DONE]"} if payload == "[DONE]" else json.loads(payload)
        for _, payload in sse_events(text)
    ]


async def wait_until_idle(client: Client, chat_id: str, within: float = 20) -> dict[str, Any]:
    """Wait until the chat's turn has ended (as the API shows it); returns the chat."""
    seen: dict[str, Any] = {}

    async def idle() -> dict[str, Any] | None:
        seen["chat"] = chat = (await client.get(f"/api/chats/{chat_id}")).json()
        if not chat["running"] and all(m["status"] != "streaming" for m in chat["messages"]):
            return chat
        return None

    return await wait_until(
        idle, within=within, failure=lambda: f"chat {chat_id} still streaming: {seen['chat']}"
    )
