"""MCP servers as tool groups: the config file, exposed names, start-up, calls, restarts, shutdown.

The servers are real processes speaking MCP over stdio (small ones in tests/fakes/mcp_servers and
the published `mcp-server-time`), and one over streamable HTTP. No database is involved.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.core.config_files import ConfigError
from app.tools.mcp.config import McpConfig, McpServerConfig, load_mcp_config
from app.tools.mcp.groups import McpGroup, McpGroups, McpToolError, exposed_tool_name
from tests.clock import ShiftedClock
from tests.support import wait_until

# Real MCP server processes start and stop in nearly every test here: the full run has them,
# the quick subset leaves them out.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ROOT / "tests" / "fakes" / "mcp_servers"
FAKE_MODULES = ("tests/fakes/mcp_servers", "mcp_server_time")


async def call_text(manager: McpGroups, group: str, tool: str, arguments: dict[str, Any]) -> str:
    """A call's answer as the model reads it."""
    return (await manager.call(group, tool, arguments)).text


def fake(name: str) -> list[str]:
    return [sys.executable, str(SERVERS / f"{name}.py")]


def server(name: str, command: list[str], **extra: Any) -> McpServerConfig:
    return McpServerConfig(name=name, description=f"The {name} server", command=command, **extra)


def snapshot(manager: McpGroups) -> list[McpGroup]:
    return [replace(group) for group in manager.groups()]


def children() -> set[int]:
    """Ids of this process's live children that run one of the test MCP servers."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, parent = fields[0], int(fields[1])
        if parent == os.getpid() and state != "Z" and any(m in cmdline for m in FAKE_MODULES):
            found.add(int(entry.name))
    return found


# -- the config file ---------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mcp.yaml"
    path.write_text(text)
    return path


def test_the_shipped_file_has_no_servers() -> None:
    assert load_mcp_config(ROOT / "config" / "mcp.yaml") == McpConfig(servers=[])


def test_a_full_file_is_read_with_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
servers:
  - name: time
    description: Current time
    command: [python, -m, mcp_server_time]
  - name: remote-1
    description: Over HTTP
    url: https://mcp.example.com/mcp
    requires_approval: true
    timeout_seconds: 5
""",
    )
    config = load_mcp_config(path)
    time_server, remote = config.servers
    assert time_server.command == ["python", "-m", "mcp_server_time"]
    assert (time_server.url, time_server.requires_approval, time_server.env) == (None, False, {})
    assert (time_server.timeout_seconds, time_server.init_timeout_seconds) == (30, 10)
    assert (remote.url, remote.requires_approval, remote.timeout_seconds) == (
        "https://mcp.example.com/mcp",
        True,
        5,
    )


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("command: [x]\n    url: http://h/mcp", "exactly one of 'command' (stdio) or 'url'"),
        ("requires_approval: false", "exactly one of 'command' (stdio) or 'url'"),
        ("url: ftp://h/mcp", "url: Value error, must be an http:// or https:// URL"),
        ("command: []", "command: List should have at least 1 item"),
        ("command: [x]\n    timeout: 3", "timeout: Extra inputs are not permitted"),
        ("command: [x]\n    timeout_seconds: 0", "timeout_seconds: Input should be greater than 0"),
        ("url: http://h/mcp\n    env: {A: b}", "'env' applies only to a server started with"),
        ("command: [x]\n    headers: {A: b}", "'headers' applies only to a server reached by"),
        ("url: http://h/mcp\n    headers: {A: 1}", "headers.A: Input should be a valid string"),
        ("command: [x]\n    auth: oauth", "'auth' applies only to a server reached by 'url'"),
        ("url: http://h/mcp\n    auth: basic", "auth: Input should be 'oauth'"),
        ("url: http://h/mcp\n    client_id: c", "need 'auth: oauth'"),
        ("url: http://h/mcp\n    auth: oauth\n    client_secret: s", "'client_secret' needs"),
        (
            "url: http://h/mcp\n    auth: oauth\n    client_metadata_url: http://h/c.json",
            "'client_metadata_url' must be an https:// URL with a path",
        ),
        (
            "url: http://h/mcp\n    auth: oauth\n    client_metadata_url: https://h/",
            "'client_metadata_url' must be an https:// URL with a path",
        ),
        ("command: [x]\n    allow_sampling: maybe", "allow_sampling: Input should be a valid"),
    ],
)
def test_a_bad_entry_is_named_with_its_problem(tmp_path: Path, entry: str, problem: str) -> None:
    path = write(
        tmp_path,
        f"""
servers:
  - name: fine
    description: d
    command: [x]
  - name: broken
    description: d
    {entry}
""",
    )
    with pytest.raises(ConfigError) as raised:
        load_mcp_config(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: servers[1] (server 'broken'): ")
    assert problem in message
    assert "servers[0]" not in message


def test_names_must_be_safe_and_unique(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "servers:\n  - {name: 'a b', description: d, command: [x]}\n",
    )
    with pytest.raises(ConfigError, match=r"servers\[0\] \(server 'a b'\): name: String should"):
        load_mcp_config(path)
    path = write(
        tmp_path,
        "servers:\n"
        "  - {name: a, description: d, command: [x]}\n"
        "  - {name: b, description: d, command: [x]}\n"
        "  - {name: a, description: e, url: 'http://h/mcp'}\n",
    )
    with pytest.raises(ConfigError) as raised:
        load_mcp_config(path)
    assert str(raised.value) == (
        f"{path}: servers: Value error, servers[2] (server 'a') has the same name as servers[0]"
    )


def test_a_missing_or_shapeless_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"mcp\.yaml: cannot be read"):
        load_mcp_config(tmp_path / "mcp.yaml")
    with pytest.raises(ConfigError, match="expected a mapping with a 'servers' list"):
        load_mcp_config(write(tmp_path, "- name: a\n"))
    with pytest.raises(ConfigError, match=r"mcp\.yaml: servers: Field required"):
        load_mcp_config(write(tmp_path, "{}\n"))


# -- exposed names -----------------------------------------------------------------------------


def test_short_names_are_kept_whole() -> None:
    assert exposed_tool_name("time", "get_current_time") == "mcp__time__get_current_time"


def test_long_names_are_cut_to_64_with_a_stable_hash() -> None:
    tool = "summarize_the_quarterly_financial_report_for_the_board_meeting_agenda"
    full = f"mcp__docs__{tool}"
    name = exposed_tool_name("docs", tool)
    assert len(name) == 64
    assert name == full[:55] + "_" + hashlib.sha256(full.encode()).hexdigest()[:8]
    assert exposed_tool_name("docs", tool) == name
    other = exposed_tool_name("docs", tool.replace("agenda", "minutes"))
    assert len(other) == 64 and other != name and other[:55] == name[:55]
    exactly = "x" * (64 - len("mcp__docs__"))
    assert exposed_tool_name("docs", exactly) == f"mcp__docs__{exactly}"


def test_characters_providers_refuse_are_replaced() -> None:
    name = exposed_tool_name("fs", "files.read")
    assert name.startswith("mcp__fs__files_read_") and len(name) == len("mcp__fs__files_read_") + 8
    assert name != exposed_tool_name("fs", "files_read")


# -- live servers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def groups() -> AsyncIterator[McpGroups]:
    config = McpConfig(
        servers=[
            server("weather", fake("weather")),
            server("crashy", fake("crashy"), requires_approval=True),
            server("long_names", fake("long_names")),
            server("time", [sys.executable, "-m", "mcp_server_time"]),
            server("slow", fake("slow_start"), env={"SLOW_START_SECONDS": "0"}, timeout_seconds=1),
        ]
    )
    manager = McpGroups(config)
    await manager.start()
    await manager.wait_ready(20)
    yield manager
    await manager.close()


async def test_groups_follow_the_config_with_named_and_described_tools(groups: McpGroups) -> None:
    listed = groups.groups()
    assert [g.name for g in listed] == ["weather", "crashy", "long_names", "time", "slow"]
    assert all(g.status == "available" and g.error is None for g in listed)
    weather = groups.group("weather")
    assert weather is not None
    assert (weather.description, weather.requires_approval) == ("The weather server", False)
    assert groups.group("crashy").requires_approval is True  # type: ignore[union-attr]
    assert groups.group("nope") is None
    assert groups.groups()[0] is weather  # live objects: a catalogue may keep them
    tools = {tool.name: tool for tool in weather.tools}
    assert list(tools) == ["mcp__weather__forecast", "mcp__weather__alerts"]
    forecast = tools["mcp__weather__forecast"]
    assert forecast.remote_name == "forecast"
    assert forecast.description == "[weather] Forecast the weather in a city for the next few days."
    assert forecast.parameters["required"] == ["city"]
    assert set(forecast.parameters["properties"]) == {"city", "days"}


async def test_a_call_returns_the_tools_answer(groups: McpGroups) -> None:
    answer = await call_text(
        groups, "weather", "mcp__weather__forecast", {"city": "Oslo", "days": 2}
    )
    assert answer == "Oslo day 1: sunny, 19 C\nOslo day 2: sunny, 20 C"
    assert await call_text(groups, "weather", "mcp__weather__alerts", {"region": "Nord"}) == (
        "No alerts for Nord."
    )


async def test_long_tool_names_are_cut_and_still_callable(groups: McpGroups) -> None:
    group = groups.group("long_names")
    assert group is not None
    names = [tool.name for tool in group.tools]
    assert names[2] == "mcp__long_names__short"
    assert [len(n) for n in names[:2]] == [64, 64] and names[0] != names[1]
    for tool in group.tools[:2]:
        assert tool.name == exposed_tool_name("long_names", tool.remote_name)
    assert await call_text(groups, "long_names", names[1], {}) == "minutes"


async def test_the_published_time_server_answers(groups: McpGroups) -> None:
    group = groups.group("time")
    assert group is not None
    names = {tool.name for tool in group.tools}
    assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= names
    assert all(tool.description.startswith("[time] ") for tool in group.tools)
    answer = json.loads(
        await call_text(groups, "time", "mcp__time__get_current_time", {"timezone": "UTC"})
    )
    assert answer["timezone"] == "UTC"
    assert answer["datetime"].startswith(time.strftime("%Y-", time.gmtime()))


async def test_mistakes_are_tool_errors(groups: McpGroups) -> None:
    with pytest.raises(McpToolError, match="There is no MCP server named 'nope'"):
        await call_text(groups, "nope", "mcp__nope__x", {})
    with pytest.raises(McpToolError, match="MCP server 'weather' has no tool 'mcp__weather__rain'"):
        await call_text(groups, "weather", "mcp__weather__rain", {})
    with pytest.raises(McpToolError, match="The tool 'forecast' of MCP server 'weather' failed"):
        await call_text(groups, "weather", "mcp__weather__forecast", {"days": 2})
    with pytest.raises(
        McpToolError, match=r"'fail' of MCP server 'crashy' failed: .*on purpose: x"
    ):
        await call_text(groups, "crashy", "mcp__crashy__fail", {"reason": "x"})


async def test_a_slow_call_times_out_and_the_server_stays(groups: McpGroups) -> None:
    pid_before = children()
    with pytest.raises(McpToolError, match=r"'slow' did not answer 'sleep' within 1 s"):
        await call_text(groups, "slow", "mcp__slow__sleep", {"seconds": 5})
    assert await call_text(groups, "slow", "mcp__slow__ping", {}) == "pong"
    assert children() == pid_before


async def test_calls_from_many_tasks_run_together(groups: McpGroups) -> None:
    cities = [f"City{i}" for i in range(12)]
    answers = await asyncio.gather(
        *(call_text(groups, "weather", "mcp__weather__forecast", {"city": c}) for c in cities)
    )
    assert answers == [f"{c} day 1: sunny, 19 C" for c in cities]
    started = time.monotonic()
    slept = await asyncio.gather(
        *(call_text(groups, "slow", "mcp__slow__sleep", {"seconds": 0.4}) for _ in range(5))
    )
    assert slept == ["slept 0.4"] * 5
    assert time.monotonic() - started < 1.5  # not one after another


async def test_a_crash_mid_call_is_an_error_then_the_server_comes_back(groups: McpGroups) -> None:
    catalogue = snapshot(groups)
    first = await call_text(groups, "crashy", "mcp__crashy__ok", {})
    with pytest.raises(
        McpToolError, match=r"'crashy' stopped during the call to 'explode'.*restarted"
    ):
        await call_text(groups, "crashy", "mcp__crashy__explode", {})
    assert snapshot(groups) == catalogue
    # Several chats call at once: one restart serves them all.
    again = await asyncio.gather(
        *(call_text(groups, "crashy", "mcp__crashy__ok", {}) for _ in range(4))
    )
    assert len(set(again)) == 1 and again[0].startswith("ok from ") and again[0] != first
    assert snapshot(groups) == catalogue


# -- start-up, failures, restarts, shutdown ----------------------------------------------------


async def test_start_up_runs_in_the_background() -> None:
    manager = McpGroups(
        McpConfig(
            servers=[
                server("slow", fake("slow_start"), env={"SLOW_START_SECONDS": "1.5"}),
                server(
                    "too_slow",
                    fake("slow_start"),
                    env={"SLOW_START_SECONDS": "30"},
                    init_timeout_seconds=0.5,
                ),
                server("missing", ["/nonexistent/mcp-server", "--flag"]),
                server("quits", [sys.executable, "-c", "raise SystemExit(3)"]),
            ]
        )
    )
    before = children()
    try:
        started = time.monotonic()
        await manager.start()
        assert time.monotonic() - started < 0.2
        kept = manager.group("slow")
        assert kept is not None and (kept.status, kept.tools) == ("starting", ())
        with pytest.raises(McpToolError, match="'slow' is still starting"):
            await call_text(manager, "slow", "mcp__slow__ping", {})
        with pytest.raises(TimeoutError, match="still starting"):
            await manager.wait_ready(0.1)
        await manager.wait_ready(15)
        slow, too_slow, missing, quits = manager.groups()
        assert slow is kept
        assert (slow.status, [t.name for t in slow.tools]) == (
            "available",
            ["mcp__slow__ping", "mcp__slow__sleep"],
        )
        assert await call_text(manager, "slow", "mcp__slow__ping", {}) == "pong"
        assert (too_slow.status, too_slow.error, too_slow.tools) == (
            "unavailable",
            "it did not start within 0.5 s",
            (),
        )
        assert missing.status == "unavailable" and missing.tools == ()
        assert "No such file or directory" in (missing.error or "")
        assert "--flag" not in (missing.error or "")  # a command line may carry secrets
        assert quits.status == "unavailable" and quits.error
        with pytest.raises(McpToolError, match=r"MCP server 'missing' is unavailable: .*No such"):
            await call_text(manager, "missing", "mcp__missing__anything", {})
        with pytest.raises(McpToolError, match="'too_slow' is unavailable: it did not start"):
            await call_text(manager, "too_slow", "mcp__too_slow__ping", {})
    finally:
        await manager.close()
    assert children() == before


async def test_a_failed_restart_waits_before_the_next_attempt(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    env = {"CRASHY_START_ONCE": str(marker)}
    clock = ShiftedClock()
    manager = McpGroups(McpConfig(servers=[server("crashy", fake("crashy"), env=env)]), clock)
    await manager.start()
    try:
        await manager.wait_ready(15)
        catalogue = snapshot(manager)
        with pytest.raises(McpToolError, match="stopped during the call"):
            await call_text(manager, "crashy", "mcp__crashy__explode", {})
        with pytest.raises(McpToolError, match=r"could not be restarted: .*next attempt is in 1 s"):
            await call_text(manager, "crashy", "mcp__crashy__ok", {})
        group = manager.group("crashy")
        assert group is not None and group.status == "unavailable"
        assert (group.error or "").startswith("restart failed: ")
        assert group.tools == catalogue[0].tools
        with pytest.raises(McpToolError, match=r"'crashy' is down .*next restart is tried in"):
            await call_text(manager, "crashy", "mcp__crashy__ok", {})
        marker.unlink()
        clock.advance(seconds=0.5)  # half the first backoff: still waiting
        with pytest.raises(McpToolError, match=r"'crashy' is down .*next restart is tried in 1 s"):
            await call_text(manager, "crashy", "mcp__crashy__ok", {})
        clock.advance(seconds=0.6)
        assert (await call_text(manager, "crashy", "mcp__crashy__ok", {})).startswith("ok from ")
        assert snapshot(manager) == catalogue
    finally:
        await manager.close()


async def test_close_stops_every_server_process() -> None:
    manager = McpGroups(
        McpConfig(
            servers=[
                server("weather", fake("weather")),
                server("crashy", fake("crashy")),
                server("time", [sys.executable, "-m", "mcp_server_time"]),
            ]
        )
    )
    before = children()
    await manager.start()
    await manager.wait_ready(15)
    await call_text(manager, "crashy", "mcp__crashy__ok", {})
    assert len(children() - before) == 3
    await manager.close()
    assert children() == before
    with pytest.raises(McpToolError, match="'weather' is shut down"):
        await call_text(manager, "weather", "mcp__weather__forecast", {"city": "Oslo"})


async def test_close_while_servers_still_start() -> None:
    manager = McpGroups(
        McpConfig(servers=[server("slow", fake("slow_start"), env={"SLOW_START_SECONDS": "30"})])
    )
    before = children()
    await manager.start()
    await wait_until(lambda: children() - before, within=15, failure="the server never spawned")
    await manager.close()
    assert children() == before


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def serve_http(port: int, *required_header: str) -> asyncio.subprocess.Process:
    command = [*fake("weather"), "--http", str(port), *required_header]
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )

    async def listening() -> bool:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return False
        writer.close()
        return True

    await wait_until(listening, within=10, failure="the HTTP server did not come up")
    return process


async def test_a_server_over_streamable_http_and_its_reconnection() -> None:
    port = free_port()
    process = await serve_http(port)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        manager = McpGroups(
            McpConfig(servers=[McpServerConfig(name="remote", description="d", url=url)])
        )
        await manager.start()
        try:
            await manager.wait_ready(10)
            group = manager.group("remote")
            assert group is not None and group.status == "available"
            assert [t.name for t in group.tools] == [
                "mcp__remote__forecast",
                "mcp__remote__alerts",
            ]
            answer = await call_text(manager, "remote", "mcp__remote__alerts", {"region": "West"})
            assert answer == "No alerts for West."
            catalogue = snapshot(manager)
            # Killed: a graceful stop would wait for hearth's list-change stream to end.
            process.kill()
            await process.wait()
            with pytest.raises(McpToolError, match="'remote' stopped during the call to 'alerts'"):
                await call_text(manager, "remote", "mcp__remote__alerts", {"region": "West"})
            process = await serve_http(port)
            answer = await call_text(manager, "remote", "mcp__remote__alerts", {"region": "East"})
            assert answer == "No alerts for East."
            assert snapshot(manager) == catalogue
        finally:
            await manager.close()
    finally:
        process.terminate()
        await process.wait()


async def test_env_values_name_hearths_own_variables_and_a_missing_one_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HEARTH_TEST_MCP_TOKEN", "s3cret")
    monkeypatch.delenv("HEARTH_TEST_MCP_ABSENT", raising=False)
    manager = McpGroups(
        McpConfig(
            servers=[
                server("given", fake("faults"), env={"TOKEN": "Bearer ${HEARTH_TEST_MCP_TOKEN}"}),
                server("absent", fake("faults"), env={"TOKEN": "${HEARTH_TEST_MCP_ABSENT}"}),
                server("literal", fake("faults"), env={"TOKEN": "$NOT_A_REFERENCE"}),
            ]
        )
    )
    await manager.start()
    try:
        await manager.wait_ready(15)
        assert await call_text(manager, "given", "mcp__given__env", {"name": "TOKEN"}) == (
            "Bearer s3cret"
        )
        assert await call_text(manager, "literal", "mcp__literal__env", {"name": "TOKEN"}) == (
            "$NOT_A_REFERENCE"
        )
        absent = manager.group("absent")
        assert absent is not None and absent.status == "unavailable"
        assert absent.error == "the environment variable HEARTH_TEST_MCP_ABSENT is not set"
        assert "s3cret" not in repr(manager.groups())
    finally:
        await manager.close()


async def test_headers_reach_an_http_server_and_take_hearths_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HEARTH_TEST_MCP_KEY", "k-123")
    port = free_port()
    process = await serve_http(port, "X-Api-Key=k-123")
    url = f"http://127.0.0.1:{port}/mcp"
    manager = McpGroups(
        McpConfig(
            servers=[
                McpServerConfig(
                    name="keyed",
                    description="d",
                    url=url,
                    headers={"X-Api-Key": "${HEARTH_TEST_MCP_KEY}"},
                ),
                McpServerConfig(name="keyless", description="d", url=url),
            ]
        )
    )
    await manager.start()
    try:
        await manager.wait_ready(15)
        assert await call_text(manager, "keyed", "mcp__keyed__alerts", {"region": "N"}) == (
            "No alerts for N."
        )
        keyless = manager.group("keyless")
        assert keyless is not None and keyless.status == "unavailable"
        assert keyless.error == "Server returned an error response"  # its 401, as the SDK tells it
        assert "k-123" not in repr(manager.groups())
    finally:
        await manager.close()
        process.kill()
        await process.wait()
