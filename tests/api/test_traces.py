"""Traces over OTLP/HTTP to a collector of the test's own, decoded from protobuf as sent.

A traced hearth is an app of its own (tracing is chosen when an app is built, from
`OTEL_EXPORTER_OTLP_ENDPOINT`), over the test's database and fakes. A message sent with a
`traceparent` continues that trace: the request's server span, the turn's span under it,
pydantic-ai's model-request and tool spans and SQLAlchemy's statements under the turn. What
the user wrote and the tool's arguments are nowhere in the export unless an operator opts in.
Without the variable, nothing of the SDK is even imported (a fresh interpreter shows it).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import pytest

from app.llm.registry import ModelRegistry
from app.main import create_app
from app.services import Services
from app.settings import Settings
from tests.clock import ShiftedClock
from tests.fakes.otlp import Collector, Span, collector
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.fakes.script import Usage
from tests.provider_setup import MODEL_IDS
from tests.support import ROOT, Client, http_client, live_server, wait_until, wait_until_idle

pytestmark = pytest.mark.usefixtures("services")

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
SECRET = "the secret words are plum and quince"
SECRET_PATH = "zebra-folder-7731"
TOOL_DESCRIPTION = "files show their size in bytes"
"""From `list_files`' description, which every model request of a turn offers the model."""

Traced = Callable[..., AbstractAsyncContextManager[tuple[Client, Services, Collector]]]


@pytest.fixture
def traced(
    settings: Settings,
    clock: ShiftedClock,
    registry: ModelRegistry,
    user: Client,
    monkeypatch: pytest.MonkeyPatch,
) -> Traced:
    """A hearth exporting to a fresh collector; the user's session pointed at it."""

    @asynccontextmanager
    async def make(**changes: object) -> AsyncIterator[tuple[Client, Services, Collector]]:
        async with collector() as found:
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", found.base_url)
            monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
            app = create_app(settings.model_copy(update=changes), clock=clock)
            ours: Services = app.state.services
            ours.registry = registry
            async with (
                live_server(app) as base_url,
                http_client(base_url=base_url, cookies=user.http.cookies, timeout=30) as http,
            ):
                yield Client(http, user=user.user), ours, found

    return make


async def traced_turn(
    client: Client, services: Services, found: Collector, fakes: dict[str, FakeProviderServer]
) -> tuple[str, list[Span]]:
    """A turn with a tool call, sent with a `traceparent`; the spans of that trace."""
    fakes["anthropic"].script(
        Reply(tool_calls=[ToolCall("list_files", {"path": SECRET_PATH})], usage=Usage(90, 9)),
        Reply(text="Nothing there.", usage=Usage(95, 5)),
    )
    chat = (await client.post("/api/chats", json={"model": MODEL_IDS["anthropic"]})).json()
    response = await client.post(
        f"/api/chats/{chat['id']}/messages",
        json={"content": SECRET},
        headers={"traceparent": TRACEPARENT},
    )
    assert response.status_code == 200, response.text
    await wait_until_idle(client, chat["id"])
    assert services.tracing is not None
    # The export posts to the collector in this event loop: flush from a thread.
    await asyncio.to_thread(services.tracing.flush)

    async def turn_exported() -> bool:
        return any(s.name == "turn" and s.trace_id == TRACE_ID for s in found.spans)

    await wait_until(turn_exported, failure="the turn's span was not exported")
    return chat["id"], [s for s in found.spans if s.trace_id == TRACE_ID]


def under(span: Span, ancestor: Span, spans: list[Span]) -> bool:
    by_id = {s.span_id: s for s in spans}
    current: Span | None = span
    while current is not None and current.parent_id:
        if current.parent_id == ancestor.span_id:
            return True
        current = by_id.get(current.parent_id)
    return False


@pytest.mark.usefixtures("registry")
async def test_a_turn_is_traced_from_the_callers_trace_down_to_sql(
    traced: Traced, fakes: dict[str, FakeProviderServer]
) -> None:
    async with traced() as (client, services, found):
        chat_id, spans = await traced_turn(client, services, found, fakes)

    (server,) = [s for s in spans if s.name == "POST /api/chats/{chat_id}/messages"]
    assert server.parent_id == PARENT_ID  # the caller's traceparent is honoured
    assert server.kind == 2  # SERVER
    assert server.attributes["http.route"] == "/api/chats/{chat_id}/messages"
    assert server.resource["service.name"] == "hearth"

    (turn,) = [s for s in spans if s.name == "turn"]
    assert turn.parent_id == server.span_id
    assert turn.attributes["hearth.chat.id"] == chat_id
    assert turn.attributes["hearth.model"] == MODEL_IDS["anthropic"]
    assert turn.attributes["hearth.turn.outcome"] == "ok"

    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 2, [s.name for s in spans]
    for span in chats:
        assert under(span, turn, spans)
        assert span.attributes["gen_ai.request.model"] == "claude-test"
        assert span.scope.startswith("pydantic-ai")
    assert sorted(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == [90, 95]
    tools = [s for s in spans if s.attributes.get("gen_ai.tool.name") == "list_files"]
    assert len(tools) == 1 and under(tools[0], turn, spans)

    statements = [
        s for s in spans if "db.system" in s.attributes or "db.system.name" in s.attributes
    ]
    assert any(under(s, turn, spans) for s in statements), [s.name for s in spans]
    assert any(under(s, server, spans) and not under(s, turn, spans) for s in statements)

    # No message content, no tool arguments, no statement values anywhere in what was sent.
    exported = b"".join(found.bodies)
    assert_no_tool_definitions(exported, spans, fakes)
    assert SECRET.encode() not in exported
    assert SECRET_PATH.encode() not in exported
    assert b"Nothing there." not in exported
    assert client.user["email"].encode() not in exported


@pytest.mark.usefixtures("registry")
async def test_message_content_is_traced_only_when_an_operator_opts_in(
    traced: Traced, fakes: dict[str, FakeProviderServer]
) -> None:
    async with traced(trace_content=True) as (client, services, found):
        await traced_turn(client, services, found, fakes)
    exported = b"".join(found.bodies)
    assert SECRET.encode() in exported
    assert SECRET_PATH.encode() in exported
    assert_no_tool_definitions(exported, found.spans, fakes)


def assert_no_tool_definitions(
    exported: bytes, spans: list[Span], fakes: dict[str, FakeProviderServer]
) -> None:
    """The model was offered tools (their descriptions went to the provider), and not one span
    carries their definitions, which pydantic-ai sets on every model request: they are opt-in
    in the GenAI conventions, and hearth leaves them out, content traced or not."""
    sent = [json.dumps(request.body) for request in fakes["anthropic"].requests]
    assert sent and all(TOOL_DESCRIPTION in body for body in sent)
    description = TOOL_DESCRIPTION.encode()
    assert not any("gen_ai.tool.definitions" in span.attributes for span in spans)
    assert b"gen_ai.tool.definitions" not in exported
    assert description not in exported


@pytest.mark.usefixtures("registry")
async def test_the_probes_and_the_scrape_leave_no_server_span(traced: Traced) -> None:
    async with traced() as (client, services, found):
        headers = {"traceparent": TRACEPARENT}
        for path in ("/healthz", "/readyz", "/metrics"):
            await client.get(path, headers=headers)
        assert (await client.get("/api/chats", headers=headers)).status_code == 200
        assert services.tracing is not None
        await asyncio.to_thread(services.tracing.flush)

        async def listed() -> bool:
            return any(s.name == "GET /api/chats" for s in found.spans)

        await wait_until(listed, failure="the listing's span was not exported")
    ours = [s for s in found.spans if s.trace_id == TRACE_ID]
    (server,) = [s for s in ours if s.kind == 2]  # SERVER
    assert server.name == "GET /api/chats"
    assert server.parent_id == PARENT_ID
    assert server.attributes["http.response.status_code"] == 200
    assert all(s is server or under(s, server, ours) for s in ours), [s.name for s in ours]
    assert not any(
        s.attributes.get("url.path") in ("/healthz", "/readyz", "/metrics") for s in found.spans
    )


def fresh_interpreter(settings: Settings, program: str, *, prelude: str = "") -> str:
    """What `program` prints, run after `prelude` and hearth's app built (`app`, its test
    `client`), in a fresh interpreter with no `OTEL_`, `HEARTH_` or `PROMETHEUS_` variable."""
    setup = (
        prelude + "import asyncio, os, sys\n"
        "from app.main import create_app\n"
        "from app.settings import Settings\n"
        "from fastapi.testclient import TestClient\n"
        f"settings = Settings(_env_file=None, database_url={settings.database_url!r},"
        f" data_dir={str(settings.data_dir)!r}, secret_key='x' * 32)\n"
        "app = create_app(settings)\n"
        "client = TestClient(app)\n"
    )
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("OTEL_", "HEARTH_", "PROMETHEUS_"))
    }
    done = subprocess.run(
        [sys.executable, "-c", setup + program],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a guard against a hang: it takes seconds
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow  # a fresh interpreter imports all of hearth: seconds, not milliseconds
def test_without_an_endpoint_nothing_of_opentelemetry_or_prometheus_is_loaded(
    settings: Settings,
) -> None:
    """In a fresh interpreter, as `hearth serve` runs: building and starting the app loads no
    SDK, exporter or instrumentation, and no metrics library."""
    program = (
        "with client:\n"
        "    assert client.get('/healthz').status_code == 200\n"
        "    assert client.get('/metrics').status_code == 404\n"
        "loaded = sorted(m for m in sys.modules if m.startswith("
        "('opentelemetry.sdk', 'opentelemetry.exporter', 'opentelemetry.instrumentation',"
        " 'prometheus_client')))\n"
        "assert app.state.services.tracing is None\n"
        "print(loaded)\n"
    )
    assert fresh_interpreter(settings, program) == "[]"


@pytest.mark.slow  # a fresh interpreter imports all of hearth: seconds, not milliseconds
def test_without_an_endpoint_no_request_is_traced_even_under_a_process_wide_provider(
    settings: Settings,
) -> None:
    """Where something else set a process-wide tracer provider (`opentelemetry-instrument`,
    say), FastAPI would trace every request through it by default; hearth without an endpoint
    traces nothing, through any provider."""
    prelude = (
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import"
        " InMemorySpanExporter\n"
        "kept = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(kept))\n"
        "trace.set_tracer_provider(provider)\n"
    )
    program = (
        "with client:\n"
        "    assert client.get('/healthz').status_code == 200\n"
        "    assert client.get('/api/chats').status_code == 401\n"
        "    assert client.post('/api/auth/login', json={}).status_code == 422\n"
        "assert app.state.services.tracing is None\n"
        "print([span.name for span in kept.get_finished_spans()])\n"
    )
    assert fresh_interpreter(settings, program, prelude=prelude) == "[]"
