"""Real MCP servers over stdio behind a real hearth: the catalogue, activation and calls.

hearth starts the servers of its `mcp.yaml` in the background (one of them the published
`mcp-server-time`, one a small server of the tests, one that cannot start); a model on the fake
OpenAI server activates a group and calls its tool, which answers from the real MCP process.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.main import create_app
from app.services import Services
from app.settings import Settings
from tests.fakes.providers import FakeOpenAI, Reply, ToolCall
from tests.support import (
    ROOT,
    Client,
    http_client,
    live_server,
    parse_stream,
    wait_until_idle,
)

WEATHER = ROOT / "tests" / "fakes" / "mcp_servers" / "weather.py"


@pytest.fixture
async def hearth_with_mcp(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Client, Services, FakeOpenAI]]:
    monkeypatch.setenv("HEARTH_TEST_KEY", "k")
    async with FakeOpenAI() as fake:
        (tmp_path / "providers.yaml").write_text(
            "providers:\n"
            f"  - {{id: oai, kind: openai, base_url: {fake.base_url}, api_key_env: HEARTH_TEST_KEY,"
            " models: [{id: gpt-test}]}\n"
        )
        (tmp_path / "mcp.yaml").write_text(
            "servers:\n"
            f"  - name: weather\n    description: Forecasts and alerts\n"
            f"    command: [{sys.executable}, {WEATHER}]\n"
            f"  - name: time\n    description: Current time and time zones\n"
            f"    command: [{sys.executable}, -m, mcp_server_time]\n"
            f"  - name: broken\n    description: Never starts\n"
            f"    command: [{sys.executable}, -c, 'raise SystemExit(3)']\n"
        )
        settings = Settings(
            _env_file=None,
            database_url=database_url,
            data_dir=tmp_path / "data",
            secret_key=secrets.token_hex(16),
            providers_file=tmp_path / "providers.yaml",
            mcp_file=tmp_path / "mcp.yaml",
        )
        app = create_app(settings)
        services: Services = app.state.services
        async with live_server(app) as base_url, http_client(base_url=base_url) as http:
            assert services.mcp is not None
            await services.mcp.wait_ready(30)
            registered = await http.post(
                "/api/auth/register",
                json={"email": f"m{secrets.token_hex(3)}@example.com", "password": "long enough"},
            )
            yield Client(http, user=registered.json()), services, fake


async def test_catalogue_activation_and_a_real_mcp_call(
    hearth_with_mcp: tuple[Client, Services, FakeOpenAI],
) -> None:
    client, _, fake = hearth_with_mcp
    groups = {g["group"]: g for g in (await client.get("/api/tools")).json()}
    assert [groups[name]["status"] for name in ("weather", "time", "broken")] == [
        "available",
        "available",
        "unavailable",
    ]
    assert {t["name"] for t in groups["weather"]["tools"]} == {
        "mcp__weather__forecast",
        "mcp__weather__alerts",
    }
    assert all(t["description"].startswith("[time] ") for t in groups["time"]["tools"])

    fake.script(
        Reply(tool_calls=[ToolCall("activate_tools", {"groups": ["weather", "broken"]})]),
        Reply(tool_calls=[ToolCall("mcp__weather__forecast", {"city": "Oslo", "days": 2})]),
        Reply(text="Sunny."),
    )
    chat_id = (await client.post("/api/chats", json={"model": "oai/gpt-test"})).json()["id"]
    response = await client.post(f"/api/chats/{chat_id}/messages", json={"content": "Oslo?"})
    chunks = parse_stream(response.text)
    assert "error" not in [c["type"] for c in chunks]
    chat = await wait_until_idle(client, chat_id)
    activation, forecast = (m["tool_calls"][0] for m in chat["messages"][1:3])
    assert '"group": "broken", "status": "unavailable"' in activation["result"]
    assert forecast["status"] == "done"
    assert forecast["result"] == "Oslo day 1: sunny, 19 C\nOslo day 2: sunny, 20 C"
    system = fake.model_requests[0].body["messages"][0]["content"]
    for row in ("| weather | Forecasts and alerts |", "| time |", "| broken | Never starts |"):
        assert row in system
