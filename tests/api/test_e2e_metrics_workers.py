"""Metrics of `hearth serve --workers 2` on PostgreSQL: whichever worker answers `/metrics`, it
answers the totals of both.

The two workers are uvicorn's, started by one real `hearth serve` with a metrics directory the
test chooses, so the test can also read each worker's own file and check that the scrape is
their sum, not one worker's view: requests are sent over fresh connections until both workers
have answered some; one scripted turn with a tool call runs in whichever worker takes it; and
each worker runs its own MCP server (`mcp-server-time`), counted once per worker.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

import pytest
from prometheus_client.multiprocess import MultiProcessCollector

from app.services import Services
from tests.api.test_metrics import parsed, total
from tests.fakes.providers import FakeProviderServer, Reply, ToolCall
from tests.fakes.script import Usage
from tests.provider_setup import MODEL_IDS, providers_yaml
from tests.support import Client, http_client, wait_until, wait_until_idle
from tests.workers import beside, hearth_worker

pytestmark = pytest.mark.usefixtures("services", "registry")

TOKEN = "workers-token-" + uuid.uuid4().hex


def per_worker(directory: Path, name: str, **labels: str) -> dict[str, float]:
    """`name` summed over matching labels, in each worker's own counter file (by pid)."""
    wanted = set(labels.items())
    found: dict[str, float] = {}
    for path in sorted(directory.glob("counter_*.db")):
        pid = path.stem.rsplit("_", 1)[1]
        found[pid] = sum(
            sample.value
            for family in MultiProcessCollector.merge([str(path)], accumulate=True)
            for sample in family.samples
            if sample.name == name and wanted <= set(sample.labels.items())
        )
    return found


async def test_two_workers_answer_one_set_of_totals(
    backend: str,
    user: Client,
    services: Services,
    fakes: dict[str, FakeProviderServer],
    tmp_path: Path,
) -> None:
    if backend != "postgresql":
        pytest.skip("several workers serve one PostgreSQL database; SQLite serves one process")
    directory = tmp_path / "metrics"
    (tmp_path / "mcp.yaml").write_text(
        "servers:\n"
        "  - name: time\n    description: Current time and time zones\n"
        f"    command: [{sys.executable}, -m, mcp_server_time]\n"
    )
    env = beside(
        services.settings,
        providers_yaml(fakes),
        tmp_path,
        metrics_token=TOKEN,
        mcp_file=str(tmp_path / "mcp.yaml"),
    )
    env["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    scrape_headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        hearth_worker(env, args=["--workers", "2"], within=60) as worker,
        http_client(base_url=worker.base_url, cookies=user.http.cookies, timeout=30) as http,
    ):
        there = Client(http, user=user.user)

        async def both_started() -> bool:
            return len(list(directory.glob("counter_*.db"))) == 2

        await wait_until(both_started, within=60, failure="the two workers did not both start")

        # Requests over fresh connections, until each worker has answered some of them.
        sent = 0

        async def both_answered() -> bool:
            nonlocal sent

            async def one() -> None:
                async with http_client(
                    base_url=worker.base_url, cookies=user.http.cookies, timeout=30
                ) as fresh:
                    assert (await fresh.get("/api/auth/me")).status_code == 200

            await asyncio.gather(*(one() for _ in range(10)))
            sent += 10
            counts = per_worker(directory, "hearth_http_requests_total", route="/api/auth/me")
            return len(counts) == 2 and all(counts.values())

        await wait_until(both_answered, within=60, failure="one worker answered every request")

        fakes["anthropic"].script(
            Reply(tool_calls=[ToolCall("list_files", {"path": "."})], usage=Usage(120, 12)),
            Reply(text="Done.", usage=Usage(130, 13)),
        )
        chat = (await there.post("/api/chats", json={"model": MODEL_IDS["anthropic"]})).json()
        sent_turn = await there.post(f"/api/chats/{chat['id']}/messages", json={"content": "Ls"})
        assert sent_turn.status_code == 200, sent_turn.text
        await wait_until_idle(there, chat["id"])

        async def servers_up() -> bool:
            response = await http.get("/metrics", headers=scrape_headers)
            scraped = parsed(response.text)
            return total(scraped, "hearth_mcp_servers", status="available") == 2

        await wait_until(servers_up, within=60, failure="the MCP server of each worker")

        # Several scrapes, so both workers are likely to answer one: each answers the totals.
        for _ in range(6):
            async with http_client(base_url=worker.base_url, timeout=30) as fresh:
                response = await fresh.get("/metrics", headers=scrape_headers)
            assert response.status_code == 200
            scraped = parsed(response.text)
            me = per_worker(directory, "hearth_http_requests_total", route="/api/auth/me")
            assert total(scraped, "hearth_http_requests_total", route="/api/auth/me") == sent
            assert sum(me.values()) == sent and min(me.values()) > 0, me
            messages = "/api/chats/{chat_id}/messages"
            assert total(scraped, "hearth_http_requests_total", route=messages) == 1
            assert total(scraped, "hearth_turns_started_total") == 1
            assert total(scraped, "hearth_turns_finished_total", status="ok") == 1
            assert total(scraped, "hearth_turns_running") == 0
            assert total(scraped, "hearth_model_requests_total", outcome="ok") == 2
            assert total(scraped, "hearth_model_tokens_total", kind="input") == 250
            assert total(scraped, "hearth_model_tokens_total", kind="output") == 25
            assert total(scraped, "hearth_tool_calls_total", group="core", status="done") == 1
            assert total(scraped, "hearth_mcp_servers", status="available") == 2
            assert total(scraped, "hearth_mcp_servers", status="unavailable") == 0
