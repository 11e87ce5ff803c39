"""`GET /metrics` over real HTTP: who may read it, and what a scripted turn leaves in it.

The metered hearth is an app of its own beside the test's server (metrics are chosen when an app
is built), over the same database and fakes. Its answer is parsed with prometheus-client's own
parsers, the Prometheus text format and, asked for by `Accept` as Prometheus does, OpenMetrics,
whose parser is strict. Counters in one process keep counting across tests, as they do across a
process's life, so each test compares a scrape after with one before.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from sqlalchemy import update

from app.llm.registry import ModelRegistry
from app.main import create_app
from app.models import User
from app.services import Services
from app.settings import Settings
from tests.api.test_live_turns import Events, follow, posting
from tests.clock import ShiftedClock
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.fakes.script import Usage
from tests.provider_setup import MODEL_IDS
from tests.support import Client, http_client, live_server, wait_until, wait_until_idle

TOKEN = "metrics-token-" + uuid.uuid4().hex
SCRAPE = {"Authorization": f"Bearer {TOKEN}"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parsed(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over every sample whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


async def scrape(http: httpx.AsyncClient) -> Samples:
    response = await http.get("/metrics", headers=SCRAPE)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parsed(response.text)


@pytest.fixture
async def metered(
    settings: Settings, clock: ShiftedClock, registry: ModelRegistry, services: Services
) -> AsyncIterator[tuple[str, Services]]:
    app = create_app(settings.model_copy(update={"metrics_token": SecretStr(TOKEN)}), clock=clock)
    ours: Services = app.state.services
    ours.registry = registry
    async with live_server(app) as base_url:
        yield base_url, ours


@pytest.fixture
async def there(metered: tuple[str, Services], user: Client) -> AsyncIterator[Client]:
    """The user's session, at the metered hearth."""
    async with http_client(base_url=metered[0], cookies=user.http.cookies, timeout=30) as http:
        yield Client(http, user=user.user, password=user.password)


async def test_metrics_are_a_404_while_no_token_is_set(anon: Client) -> None:
    assert (await anon.get("/metrics")).status_code == 404
    assert (await anon.get("/metrics", headers=SCRAPE)).status_code == 404


BAD_AUTHORIZATIONS: list[str | bytes | None] = [
    None,
    "",
    f"Bearer {TOKEN}x",
    f"bearer{TOKEN}",
    TOKEN,
    f"Basic {TOKEN}",
    "Bearer",
    "Bearer \xe9".encode("latin-1"),  # a byte no token has
]


async def test_metrics_need_the_token(there: Client) -> None:
    for authorization in BAD_AUTHORIZATIONS:
        headers = {} if authorization is None else {"Authorization": authorization}
        response = await there.http.get("/metrics", headers=headers)
        assert response.status_code == 401, (authorization, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        assert "hearth_" not in response.text
    assert (await there.http.get("/metrics", headers=SCRAPE)).status_code == 200
    assert (await there.http.post("/metrics", headers=SCRAPE)).status_code == 405


async def test_a_turn_with_a_tool_call_is_counted_in_every_metric(
    there: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    before = await scrape(there.http)
    fakes["anthropic"].script(
        Reply(tool_calls=[ToolCall("list_files", {"path": "."})], usage=Usage(100, 10)),
        Reply(text="Done.", usage=Usage(200, 20, cache_read_tokens=50)),
    )
    chat = (await there.post("/api/chats", json={"model": MODEL_IDS["anthropic"]})).json()
    sent = await there.post(f"/api/chats/{chat['id']}/messages", json={"content": "List them"})
    assert sent.status_code == 200, sent.text
    await wait_until_idle(there, chat["id"])
    document = b"Notes for the metrics.\n" * 10
    uploaded = await there.http.post(
        "/api/uploads",
        files={"file": ("notes.txt", document, "text/plain")},
        headers={"X-CSRF-Token": there.csrf or ""},
    )
    assert uploaded.status_code == 201, uploaded.text

    response = await there.http.get("/metrics", headers=SCRAPE)
    text = response.text
    after = parsed(text)

    def grew(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    model, provider = MODEL_IDS["anthropic"], MODEL_IDS["anthropic"].split("/")[0]
    assert grew("hearth_turns_started_total") == 1
    assert grew("hearth_turns_finished_total", status="ok") == 1
    assert grew("hearth_turns_finished_total") == 1
    assert total(after, "hearth_turns_running") == 0
    of_model = {"provider": provider, "model": model}
    assert grew("hearth_model_requests_total", **of_model, outcome="ok") == 2
    assert grew("hearth_model_requests_total") == 2
    assert grew("hearth_model_request_duration_seconds_count", **of_model) == 2
    assert grew("hearth_model_time_to_first_token_seconds_count", **of_model) == 2
    first = grew("hearth_model_time_to_first_token_seconds_sum", **of_model)
    whole = grew("hearth_model_request_duration_seconds_sum", **of_model)
    assert 0 < first <= whole + 0.002  # durations are kept to the millisecond
    assert grew("hearth_model_tokens_total", model=model, kind="input") == 300
    assert grew("hearth_model_tokens_total", model=model, kind="output") == 30
    assert grew("hearth_model_tokens_total", model=model, kind="cache_read") == 50
    assert grew("hearth_model_tokens_total", model=model, kind="cache_write") == 0
    assert grew("hearth_tool_calls_total", group="core", status="done") == 1
    assert grew("hearth_tool_calls_total") == 1
    route = "/api/chats/{chat_id}/messages"
    assert grew("hearth_http_requests_total", method="POST", route=route, status="200") == 1
    assert grew("hearth_http_request_duration_seconds_count", method="POST", route=route) == 1
    assert grew("hearth_http_requests_total", method="POST", route="/api/uploads") == 1
    assert grew("hearth_uploads_total") == 1
    assert grew("hearth_upload_bytes_total") == len(document)
    assert ("hearth_ingestion_queue_length", frozenset()) in after
    for status in ("starting", "available", "unavailable"):
        assert after[("hearth_mcp_servers", frozenset({("status", status)}))] == 0
    # Bounded labels: no id of a user, chat or message, and no raw path.
    assert not UUID.search(text), UUID.search(text)
    assert chat["id"] not in text and there.user["id"] not in text
    routes = {dict(labels)["route"] for _, labels in after if "route" in dict(labels)}
    assert routes >= {route, "/api/uploads", "/metrics"}, routes
    assert all(r.startswith("/") or r == "unmatched" for r in routes), routes

    # OpenMetrics when asked, as Prometheus asks: its parser rejects anything malformed.
    strict = await there.http.get(
        "/metrics", headers={**SCRAPE, "Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert strict.headers["content-type"].startswith("application/openmetrics-text")
    families = {family.name: family for family in openmetrics_families(strict.text)}
    assert families["hearth_turns_started"].type == "counter"
    assert families["hearth_model_request_duration_seconds"].type == "histogram"
    assert families["hearth_turns_running"].type == "gauge"


async def test_a_running_turn_and_its_reader_show_while_they_last(
    there: Client, fakes: dict[str, FakeProviderServer]
) -> None:
    held = asyncio.Event()
    fakes["openai"].script(Reply(text="Held for a while.", hold=held))
    chat = (await there.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()
    async with posting(there, chat["id"], "Wait") as response:
        events = Events(response)
        await events.until(2)
        reader = asyncio.create_task(follow(there.http, chat["id"]))

        async def counted() -> bool:
            now = await scrape(there.http)
            return (
                total(now, "hearth_turns_running") == 1 and total(now, "hearth_live_readers") == 1
            )

        await wait_until(counted, failure="the running turn and its reader were not counted")
        held.set()
        await events.rest()
        await reader
    await wait_until_idle(there, chat["id"])
    now = await scrape(there.http)
    assert total(now, "hearth_turns_running") == 0
    assert total(now, "hearth_live_readers") == 0


async def test_a_quota_refusal_is_counted_by_quota(
    there: Client, services: Services, fakes: dict[str, FakeProviderServer]
) -> None:
    fakes["openai"].script(Reply(text="Spent.", usage=Usage(50, 5)))
    chat = (await there.post("/api/chats", json={"model": MODEL_IDS["openai"]})).json()
    assert (await there.post(f"/api/chats/{chat['id']}/messages", json={"content": "A"})).is_success
    await wait_until_idle(there, chat["id"])
    async with services.sessions() as db:
        await db.execute(
            update(User)
            .where(User.id == uuid.UUID(there.user["id"]))
            .values(quota={"daily_tokens": 10, "monthly_cost_usd": None})
        )
        await db.commit()
    before = await scrape(there.http)
    refused = await there.post(f"/api/chats/{chat['id']}/messages", json={"content": "B"})
    assert refused.status_code == 429
    after = await scrape(there.http)
    name = "hearth_quota_refusals_total"
    assert total(after, name, quota="daily_tokens") - total(before, name, quota="daily_tokens") == 1
    assert total(after, name, quota="monthly_cost") == total(before, name, quota="monthly_cost")
