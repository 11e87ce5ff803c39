"""Each user's own account on an MCP server behind OAuth, through a real hearth and a real flow.

The server (`tests/fakes/mcp_servers/guarded.py`) is its own authorization server: discovery,
dynamic registration, PKCE, refresh and revocation all happen over HTTP as with any provider;
the browser is an HTTP client following the redirects. The official conformance suite's
`auth/*` scenarios (tests/conformance) hold the flow to the specification; these hold what a
user sees: whose account a call runs on, what a careless or hostile callback gets, what stays
sealed in the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.main import create_app
from app.models import McpConnection
from app.services import Services
from app.settings import Settings
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.provider_setup import MODEL_IDS, providers_yaml
from tests.support import (
    ROOT,
    Client,
    http_client,
    live_server,
    parse_stream,
    wait_until,
    wait_until_idle,
)

pytestmark = pytest.mark.slow

GROUP = "guarded"


@dataclass
class Guarded:
    client: Client
    other: Client
    services: Services
    server_url: str
    settings: Settings

    async def log(self) -> list[dict[str, Any]]:
        async with http_client() as http:
            return (await http.get(f"{self.server_url}/log")).json()


def start_server(**env: str) -> tuple[subprocess.Popen[bytes], int]:
    """The guarded server and its port, on a socket bound and listening here and handed over:
    a port picked free and let go before the server binds it can be taken meanwhile by another
    test's process."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(128)
        port: int = listening.getsockname()[1]
        fd = listening.fileno()
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.mcp_servers.guarded", str(port), str(fd)],
            cwd=ROOT,
            env={**os.environ, **env},
            pass_fds=(fd,),
        )
    return process, port


async def answering(url: str) -> bool:
    try:
        async with http_client(timeout=1) as http:
            return (await http.get(f"{url}/log")).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
async def guarded(
    request: pytest.FixtureRequest,
    database_url: str,
    fakes: dict[str, FakeProviderServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    services: Services,  # not used: asked for so the shared tables are emptied afterwards
) -> AsyncIterator[Guarded]:
    env = getattr(request, "param", {})
    process, port = start_server(**env)
    server_url = f"http://127.0.0.1:{port}"
    try:
        await wait_until(lambda: answering(server_url), within=20)
        monkeypatch.setenv("HEARTH_TEST_PROVIDER_KEY", "test-key")
        (tmp_path / "providers.yaml").write_text(providers_yaml(fakes))
        server = {
            "name": GROUP,
            "description": "Weather for each user's own account",
            "url": f"{server_url}/mcp",
            "auth": "oauth",
        }
        (tmp_path / "mcp.yaml").write_text(json.dumps({"servers": [server]}))
        settings = Settings(
            _env_file=None,
            database_url=database_url,
            data_dir=tmp_path / "data",
            secret_key=secrets.token_hex(16),
            providers_file=tmp_path / "providers.yaml",
            mcp_file=tmp_path / "mcp.yaml",
        )
        app = create_app(settings)
        async with live_server(app) as base_url:
            clients = []
            for _ in range(2):
                http = http_client(base_url=base_url, timeout=30)
                registered = await http.post(
                    "/api/auth/register",
                    json={
                        "email": f"o{secrets.token_hex(4)}@example.com",
                        "password": "long enough",
                    },
                )
                clients.append(Client(http, user=registered.json()))
            try:
                yield Guarded(clients[0], clients[1], app.state.services, server_url, settings)
            finally:
                for client in clients:
                    await client.http.aclose()
    finally:
        process.terminate()
        process.wait(10)


async def authorization_url(client: Client) -> str:
    """Where hearth sends the user's browser to connect the group."""
    started = await client.get(f"/api/mcp/{GROUP}/connect", follow_redirects=False)
    assert started.status_code == 302, started.text
    return started.headers["location"]


async def come_back(url: str) -> str:
    """What the authorization server sends the browser back to (hearth's callback)."""
    async with http_client() as browser:
        signed_in = await browser.get(url, follow_redirects=False)
    assert signed_in.status_code == 302, signed_in.text
    return signed_in.headers["location"]


async def connect(client: Client) -> None:
    callback = await come_back(await authorization_url(client))
    done = await client.http.get(callback, follow_redirects=False)
    assert done.status_code == 302, done.text
    assert done.headers["location"] == f"/?connected={GROUP}"


async def status_for(client: Client) -> dict[str, Any]:
    groups = (await client.get("/api/tools")).json()
    return next(g for g in groups if g["group"] == GROUP)


async def forecast_turn(client: Client, fake: FakeProviderServer) -> dict[str, Any]:
    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": [GROUP]})]),
        Reply(tool_calls=[ToolCall("mcp__guarded__forecast", {"city": "Oslo"})]),
        Reply(text="Sunny."),
    )
    chat_id = (await client.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    sent = await client.post(f"/api/chats/{chat_id}/messages", json={"content": "Weather?"})
    assert sent.status_code == 200
    assert not [c for c in parse_stream(sent.text) if c["type"] == "error"]
    return await wait_until_idle(client, chat_id)


def calls(chat: dict[str, Any]) -> list[dict[str, Any]]:
    return [call for message in chat["messages"] for call in message["tool_calls"]]


async def test_a_user_connects_their_account_and_their_calls_run_on_it(
    guarded: Guarded, fakes: dict[str, FakeProviderServer]
) -> None:
    before = await status_for(guarded.client)
    assert before["status"] == "needs_connection" and before["connectable"] is True
    authorize = await authorization_url(guarded.client)
    asked = httpx.URL(authorize).params
    assert asked["code_challenge_method"] == "S256" and asked["code_challenge"]
    assert asked["resource"] == f"{guarded.server_url}/mcp"
    assert asked["redirect_uri"].endswith("/api/mcp/oauth/callback")
    callback = await come_back(authorize)
    done = await guarded.client.http.get(callback, follow_redirects=False)
    assert done.status_code == 302

    after = await status_for(guarded.client)
    assert after["status"] == "available"
    assert {t["name"] for t in after["tools"]} == {"mcp__guarded__forecast", "mcp__guarded__alerts"}
    assert (await status_for(guarded.other))["status"] == "needs_connection"

    chat = await forecast_turn(guarded.client, fakes["openai"])
    assert [c["status"] for c in calls(chat)] == ["done", "done"]
    assert "Oslo day 1: sunny" in calls(chat)[1]["result"]

    # The other user, not connected, is told so; the server is never asked for them.
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": [GROUP]})]),
        Reply(text="You need to connect it first."),
    )
    chat_id = (await guarded.other.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()[
        "id"
    ]
    await guarded.other.post(f"/api/chats/{chat_id}/messages", json={"content": "Weather?"})
    other = await wait_until_idle(guarded.other, chat_id)
    [activation] = calls(other)
    assert activation["status"] == "failed"
    assert "needs_connection" in activation["result"]

    # Tokens and client are sealed: nothing of them reads in the row.
    async with guarded.services.sessions() as db:
        row = await db.scalar(select(McpConnection).where(McpConnection.server == GROUP))
    assert row is not None and row.tokens is not None and row.client is not None
    assert b"at-" not in row.tokens and b"rt-" not in row.tokens and b"client-" not in row.client
    log = await guarded.log()
    assert [e["event"] for e in log if e["event"] in ("register", "authorize", "token")] == [
        "register",
        "authorize",
        "token",
    ]


async def test_a_wrong_state_or_another_users_callback_is_refused_and_stores_nothing(
    guarded: Guarded,
) -> None:
    callback = await come_back(await authorization_url(guarded.client))
    url = httpx.URL(callback)
    wrong = url.copy_set_param("state", "not-the-state")
    refused = await guarded.client.http.get(str(wrong), follow_redirects=False)
    assert refused.status_code == 404
    foreign = await guarded.other.http.get(callback, follow_redirects=False)
    assert foreign.status_code == 404  # the code was for the first user's flow
    missing = await guarded.client.http.get(
        str(url.copy_remove_param("state")), follow_redirects=False
    )
    assert missing.status_code == 422
    anonymous = await http_client().get(callback, follow_redirects=False)
    assert anonymous.status_code == 401
    for client in (guarded.client, guarded.other):
        assert (await status_for(client))["status"] == "needs_connection"
    # The right user's callback still finishes it.
    done = await guarded.client.http.get(callback, follow_redirects=False)
    assert done.status_code == 302
    assert (await status_for(guarded.client))["status"] == "available"
    assert (await status_for(guarded.other))["status"] == "needs_connection"


@pytest.mark.parametrize("guarded", [{"TOKEN_FAILS": "1"}], indirect=True)
async def test_a_token_endpoint_that_fails_is_a_502_and_nothing_is_kept(guarded: Guarded) -> None:
    callback = await come_back(await authorization_url(guarded.client))
    failed = await guarded.client.http.get(callback, follow_redirects=False)
    assert failed.status_code == 502
    assert "token" in failed.json()["detail"].lower()
    assert (await status_for(guarded.client))["status"] == "needs_connection"
    async with guarded.services.sessions() as db:
        row = await db.scalar(select(McpConnection).where(McpConnection.server == GROUP))
    assert row is None or row.tokens is None


@pytest.mark.parametrize("guarded", [{"TOKEN_SECONDS": "1"}], indirect=True)
async def test_an_expired_token_is_refreshed_after_a_restart_of_the_session(
    guarded: Guarded, fakes: dict[str, FakeProviderServer]
) -> None:
    await connect(guarded.client)
    mcp = guarded.services.mcp
    assert mcp is not None
    await mcp.disconnect(GROUP, uuid_of(guarded.client))  # as after a restart: no session
    await asyncio.sleep(1.5)  # the access token has expired
    chat = await forecast_turn(guarded.client, fakes["openai"])
    assert [c["status"] for c in calls(chat)] == ["done", "done"]
    grants = [e["grant_type"] for e in await guarded.log() if e["event"] == "token"]
    assert grants == ["authorization_code", "refresh_token"]


async def test_disconnecting_revokes_the_tokens_and_the_group_needs_connection_again(
    guarded: Guarded,
) -> None:
    await connect(guarded.client)
    gone = await guarded.client.delete(f"/api/mcp/{GROUP}/connection")
    assert gone.status_code == 204
    revoked = [e["hint"] for e in await guarded.log() if e["event"] == "revoke"]
    assert sorted(revoked) == ["access_token", "refresh_token"]
    assert (await status_for(guarded.client))["status"] == "needs_connection"
    again = await guarded.client.delete(f"/api/mcp/{GROUP}/connection")
    assert again.status_code == 404


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/mcp/nothing/connect", 404),
        ("/api/mcp/..%2Fetc/connect", 404),
        ("/api/mcp/" + "x" * 65 + "/connect", 422),
    ],
)
async def test_connecting_an_unknown_group_is_refused(
    guarded: Guarded, path: str, status: int
) -> None:
    response = await guarded.client.get(path, follow_redirects=False)
    assert response.status_code == status, response.text


def uuid_of(client: Client) -> Any:
    import uuid

    return uuid.UUID(client.user["id"])


@pytest.mark.parametrize("guarded", [{"ALERTS_SCOPE": "weather:alerts"}], indirect=True)
async def test_a_wider_scope_asked_mid_call_is_a_new_sign_in_and_the_call_goes_on(
    guarded: Guarded, fakes: dict[str, FakeProviderServer]
) -> None:
    await connect(guarded.client)
    fakes["openai"].script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": [GROUP]})]),
        Reply(tool_calls=[ToolCall("mcp__guarded__alerts", {"region": "Nordland"}, id="al")]),
        Reply(text="No alerts."),
    )
    client = guarded.client
    chat_id = (await client.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()["id"]
    sent = await client.post(f"/api/chats/{chat_id}/messages", json={"content": "Alerts?"})
    chunks = parse_stream(sent.text)
    [asked] = [c["data"] for c in chunks if c["type"] == "data-authorization"]
    assert asked["tool_call_id"] == "al" and asked["group"] == GROUP
    assert httpx.URL(asked["url"]).params["scope"] == "weather:alerts"
    assert [c["type"] for c in chunks[-2:]] == ["finish", "[DONE]"]

    # A reload shows the question on the call; it cannot be answered as a form.
    chat = (await client.get(f"/api/chats/{chat_id}")).json()
    waiting = calls(chat)[-1]
    assert waiting["status"] == "running"
    assert waiting["elicitation"]["mode"] == "url"
    assert waiting["elicitation"]["url"] == asked["url"]
    as_form = await client.post(
        f"/api/chats/{chat_id}/elicitations",
        json={"elicitation_id": waiting["elicitation"]["elicitation_id"], "action": "accept"},
    )
    assert as_form.status_code == 409

    # Another user cannot finish this user's sign-in.
    callback = await come_back(asked["url"])
    foreign = await guarded.other.http.get(callback, follow_redirects=False)
    assert foreign.status_code == 404
    done = await client.http.get(callback, follow_redirects=False)
    assert done.status_code == 302
    chat = await wait_until_idle(client, chat_id)
    alerts = calls(chat)[-1]
    assert alerts["status"] == "done", alerts
    assert alerts["result"] == "No alerts for Nordland."
    assert chat["messages"][-1]["content"] == "No alerts."
    events = [e["event"] for e in await guarded.log()]
    assert events.count("authorize") == 2 and "step-up" in events


async def test_a_callback_that_reaches_another_worker_finishes_the_connection(
    guarded: Guarded, fakes: dict[str, FakeProviderServer]
) -> None:
    """Two workers on one database: the user starts connecting on one, and the authorization
    server's redirect lands on the other, which hands the code to the first through the row."""
    other_worker = create_app(guarded.settings)
    async with live_server(other_worker) as other_url, http_client(base_url=other_url) as http:
        http.cookies = guarded.client.http.cookies  # the same browser, the same session
        authorize = await authorization_url(guarded.client)
        callback = httpx.URL(await come_back(authorize))
        elsewhere = other_url + callback.raw_path.decode()
        stranger = Client(http_client(base_url=other_url), user=guarded.other.user)
        stranger.http.cookies = guarded.other.http.cookies
        async with stranger.http:
            refused = await stranger.http.get(elsewhere, follow_redirects=False)
        assert refused.status_code == 404  # not the other user's flow, on either worker
        done = await http.get(elsewhere, follow_redirects=False)
        assert done.status_code == 302, done.text
        assert done.headers["location"] == f"/?connected={GROUP}"
        await wait_until(lambda: _available(guarded.client), within=10, failure="never connected")
        replayed = await http.get(elsewhere, follow_redirects=False)
        assert replayed.status_code == 404  # a state answers once
    chat = await forecast_turn(guarded.client, fakes["openai"])
    assert [c["status"] for c in calls(chat)] == ["done", "done"]


async def _available(client: Client) -> bool:
    return (await status_for(client))["status"] == "available"
