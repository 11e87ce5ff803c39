"""The client the MCP conformance suite runs: a real hearth pointed at the suite's test server.

`conformance client --command "<python> -m tests.conformance.adapter" --scenario <name>` starts a
test server and runs the command with the server's URL as its last argument; the scenario's
verdict comes from what the server saw, and the command's exit status says whether the client
thinks it did its part. So this is hearth end to end, driven the way a user and a model drive it:

1. hearth starts (its own migrated SQLite database, data dir and config files in a temporary
   directory) with the URL as the one streamable HTTP group of its `mcp.yaml`, and a fake
   OpenAI-compatible provider as its only model;
2. a user signs up over HTTP and waits until `GET /api/tools` shows the group started;
3. the fake model is scripted from the group's tools: `activate_tools`, then one call of every
   tool, with arguments made from its input schema (defaults, enums, a value per type), then a
   closing text;
4. the user asks one question; every `data-elicitation` part the stream ends with is answered
   with `accept` and empty content (hearth fills in the schema's defaults), and its stream read
   in turn, until the turn ends.

The exit status is 0 when the group started and every tool call ended `done`, 1 otherwise, 2 on
a bad command line; what happened is printed, which the suite shows when the status is not 0.
The scenario does not change what the client does: the same generic user fits each of them, as
a client that passes only by knowing the test would prove nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from app.core.db.engine import create_engine
from app.core.db.migrate import upgrade
from app.main import create_app
from app.settings import Settings
from app.tools.mcp.groups import GroupTool
from tests.conformance.arguments import example
from tests.fakes.providers import FakeOpenAI, Reply, ToolCall
from tests.support import (
    Client,
    http_client,
    live_server,
    parse_stream,
    wait_until,
    wait_until_idle,
)

GROUP = "conformance"
MODEL = "fake/conformance-model"
KEY_VARIABLE = "HEARTH_CONFORMANCE_PROVIDER_KEY"
DEADLINE_SECONDS = 15.0
"""The whole run once hearth is imported (a few seconds); the suite's own limit (the tests give
25 s) is longer, so a client that hangs still says where, rather than being killed without a
word."""
MAX_ELICITATIONS = 10
STARTED = time.monotonic()


def say(line: str) -> None:
    """One line of the log the suite shows when the client fails, with the time since start."""
    print(f"[{time.monotonic() - STARTED:6.2f} s] {line}", flush=True)


class AdapterFailure(Exception):
    """The client could not do its part; the message says where it stopped."""


def providers_yaml(base_url: str) -> str:
    return json.dumps(  # JSON is YAML
        {
            "providers": [
                {
                    "id": "fake",
                    "kind": "openai",
                    "base_url": base_url,
                    "api_key_env": KEY_VARIABLE,
                    "models": [{"id": "conformance-model", "max_output_tokens": 1024}],
                }
            ]
        }
    )


SECRET_VARIABLE = "HEARTH_CONFORMANCE_CLIENT_SECRET"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
"""Where hearth's client metadata document would be published (the suite's CIMD scenarios
expect this URL; an authorization server that takes no such documents gets a registration)."""
MAX_CONNECTS = 3


def scenario_context() -> dict[str, Any]:
    """What the suite tells its client about the scenario (`MCP_CONFORMANCE_CONTEXT`)."""
    try:
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    except ValueError:
        return {}
    return context if isinstance(context, dict) else {}


def signs_in() -> bool:
    return os.environ.get("MCP_CONFORMANCE_SCENARIO", "").startswith("auth/")


def mcp_yaml(url: str) -> str:
    server: dict[str, Any] = {
        "name": GROUP,
        "description": "The conformance suite's test server",
        "url": url,
    }
    if signs_in():
        server["auth"] = "oauth"
        server["client_metadata_url"] = CLIENT_METADATA_URL
        context = scenario_context()
        if context.get("client_id"):  # a client registered beforehand, as an operator would
            server["client_id"] = context["client_id"]
            if context.get("client_secret"):
                os.environ[SECRET_VARIABLE] = context["client_secret"]
                server["client_secret"] = "${" + SECRET_VARIABLE + "}"
    return json.dumps({"servers": [server]})


async def connect(client: Client) -> None:
    """Connect the user's account as a browser would: hearth's redirect to the authorization
    server, its redirect back to hearth's callback, and hearth's redirect home."""
    response = await client.get(f"/api/mcp/{GROUP}/connect", follow_redirects=False)
    await follow_redirects(client, response)


async def follow(client: Client, url: str) -> None:
    """Visit `url` (the authorization server) as a browser would, redirects and all."""
    async with http_client(timeout=10) as outside:
        response = await outside.get(url, follow_redirects=False)
    await follow_redirects(client, response)


async def follow_redirects(client: Client, response: Any) -> None:
    for _ in range(5):
        if response.status_code != 302:
            raise AdapterFailure(f"connecting got {response.status_code}: {response.text}")
        location = response.headers["location"]
        if location.startswith("/?connected="):
            say("connected")
            return
        say(f"redirected to {location}")
        if location.startswith(str(client.http.base_url)):
            response = await client.http.get(location, follow_redirects=False)
        else:
            async with http_client(timeout=10) as outside:
                response = await outside.get(location, follow_redirects=False)
    raise AdapterFailure("connecting went round in circles")


async def started_group(client: Client) -> dict[str, Any]:
    """The group as `GET /api/tools` shows it once it has started or failed."""

    async def settled() -> dict[str, Any] | None:
        groups = (await client.get("/api/tools")).json()
        group = next((g for g in groups if g["group"] == GROUP), None)
        return group if group is not None and group["status"] != "starting" else None

    group = await wait_until(settled, within=12, failure=f"the group {GROUP!r} never started")
    if group["status"] != "available" and not (
        signs_in() and group["status"] == "needs_connection"
    ):
        raise AdapterFailure(f"the group is {group['status']}: {group.get('error')}")
    return group


async def read_turn(client: Client, chat_id: str, first: str) -> list[dict[str, Any]]:
    """Every chunk of the turn, answering each form the stream stops at with `accept`."""
    chunks: list[dict[str, Any]] = []
    body = first
    for _ in range(MAX_ELICITATIONS + 1):
        part = parse_stream(body)
        chunks.extend(part)
        for signing_in in [c for c in part if c["type"] == "data-authorization"]:
            # The server wants a wider scope mid-call: the user signs in again, as asked.
            say(f"asked to sign in again at {signing_in['data']['url']}")
            await follow(client, signing_in["data"]["url"])
        asked = [c for c in part if c["type"] == "data-elicitation"]
        if not asked:
            return chunks
        for elicitation in asked:
            data = elicitation["data"]
            say(f"form asked: {data['message']!r}, schema {json.dumps(data['requested_schema'])}")
            answer = await client.post(
                f"/api/chats/{chat_id}/elicitations",
                json={"elicitation_id": data["elicitation_id"], "action": "accept", "content": {}},
            )
            if answer.status_code != 200:
                raise AdapterFailure(f"answering a form got {answer.status_code}: {answer.text}")
            body = answer.text
    raise AdapterFailure(f"more than {MAX_ELICITATIONS} forms in one turn")


async def drive(url: str, work: Path) -> None:
    os.environ[KEY_VARIABLE] = "conformance-key"
    database_url = f"sqlite+aiosqlite:///{work / 'hearth.db'}"
    engine = create_engine(database_url)
    await upgrade(engine)
    await engine.dispose()
    say("database migrated")
    async with FakeOpenAI(flavour="openai") as fake:
        (work / "providers.yaml").write_text(providers_yaml(fake.base_url))
        (work / "mcp.yaml").write_text(mcp_yaml(url))
        settings = Settings(
            _env_file=None,
            database_url=database_url,
            data_dir=work / "data",
            secret_key=secrets.token_hex(16),
            providers_file=work / "providers.yaml",
            mcp_file=work / "mcp.yaml",
        )
        app = create_app(settings)
        async with live_server(app) as base_url, http_client(base_url=base_url, timeout=30) as http:
            registered = await http.post(
                "/api/auth/register",
                json={"email": "conformance@example.com", "password": "long enough"},
            )
            if registered.status_code != 201:
                raise AdapterFailure(f"sign-up got {registered.status_code}: {registered.text}")
            client = Client(http, user=registered.json())
            say("hearth is up; a user signed up")
            await started_group(client)
            say(f"the group {GROUP!r} is there")
            if signs_in():
                await connect(client)
            mcp = app.state.services.mcp
            group = mcp.group(GROUP) if mcp is not None else None
            tools: tuple[GroupTool, ...] = group.tools if group is not None else ()
            calls = [ToolCall(tool.name, example(tool.parameters)) for tool in tools]
            say(f"tools: {[(call.name, call.arguments) for call in calls]}")
            fake.script(
                Reply(tool_calls=[ToolCall("activate_tools", {"groups": [GROUP]})]),
                *([Reply(tool_calls=calls)] if calls else []),
                Reply(text="Done."),
            )
            chat = await client.post("/api/chats", json={"model": MODEL})
            if chat.status_code != 201:
                raise AdapterFailure(f"creating a chat got {chat.status_code}: {chat.text}")
            chat_id = chat.json()["id"]
            sent = await client.post(
                f"/api/chats/{chat_id}/messages", json={"content": "Use every tool you have."}
            )
            if sent.status_code != 200:
                raise AdapterFailure(f"the message got {sent.status_code}: {sent.text}")
            chunks = await read_turn(client, chat_id, sent.text)
            errors = [c for c in chunks if c["type"] == "error"]
            if errors:
                raise AdapterFailure(f"the turn failed: {errors}")
            done = await wait_until_idle(client, chat_id, within=10)
            made = [c for m in done["messages"] for c in m["tool_calls"]]
            for call in made:
                say(f"{call['name']}: {call['status']}: {call['result']}")
            mcp_calls = [c for c in made if c["name"] != "activate_tools"]
            if len(mcp_calls) != len(calls) or any(c["status"] != "done" for c in made):
                raise AdapterFailure("not every tool call ended done")


async def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.conformance.adapter <server url>", file=sys.stderr)
        return 2
    say(f"scenario {os.environ.get('MCP_CONFORMANCE_SCENARIO', '?')} at {argv[0]}")
    with tempfile.TemporaryDirectory(prefix="hearth-conformance-") as work:
        try:
            async with asyncio.timeout(DEADLINE_SECONDS):
                await drive(argv[0], Path(work))
        except (AdapterFailure, AssertionError, TimeoutError) as exc:
            say(f"FAILED: {exc or type(exc).__name__}")
            return 1
    say("OK")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
