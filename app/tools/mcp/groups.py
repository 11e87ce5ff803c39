"""MCP servers as tool groups, shared by every chat of the process.

Each server in `config/mcp.yaml` gets one pydantic-ai `MCPToolset`, opened once and kept open:
chats share it, and the MCP session carries concurrent calls (JSON-RPC ids), so a call needs no
lock of its own. The manager talks to the toolset only through its public methods that need no
agent run, `list_tools()` and `direct_call_tool()`, so the same code serves an agent turn, the
catalogue route and the tests.

The shape follows from three promises:

- Nothing here may hold up the service. `start()` only launches a start-up task per server; a
  server that is slow to start is `starting` meanwhile, and one that fails is `unavailable`.
- The tool arrays a provider sees (and caches) stay byte-identical unless a server says its list
  changed. Each server's tool list is read at start-up and kept, even when the server dies or
  comes back with other tools; only the server saying its list changed makes it read again (in
  a task of its own), and turns work on the catalogue as it was when they began
  (`Catalogue.pinned`), so the change reaches each chat at its next turn. A server of the
  2026-07-28 protocol says so on a `subscriptions/listen` stream the group keeps open (it sends
  nothing unasked); an older one sends `notifications/tools/list_changed` on its session.
- What a server asks back while a call runs (a form for the user, a completion by the model) is
  answered by the turn of that call (`asking`): each call registers itself on its server while
  it runs, with its deadline, which stands still while the answer is awaited.
- A server with `auth: oauth` has no session shared by everyone: each user's calls run on a
  session of their own, with their own token (`oauth`), opened when they connect or at their
  first call after a restart. Its tools are read on the first such session and kept for all.
- A failing server never breaks a turn. `call()` raises only `McpToolError`, whose message is
  written for the model to read. A server that died is restarted lazily by the next call to it
  (one attempt per call, under a per-server lock so concurrent calls don't start it twice), with
  a doubling wait between failed attempts so a broken server is not respawned on every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import re
import shlex
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError
from mcp import MCPError
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import MessageHandlerFnT as MessageHandler
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    ResourcesListChanged,
    ToolsListChanged,
    listen,
)
from mcp.types import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    ResourceListChangedNotification,
    ToolListChangedNotification,
)
from pydantic_ai.mcp import MCPToolset

from app.clock import Clock
from app.tools.asks import ServerAsks
from app.tools.groups import GroupToolError, Progress
from app.tools.mcp import resources
from app.tools.mcp.asking import InFlight, current_call, elicitation_handler, sampling_handler
from app.tools.mcp.config import McpConfig, McpServerConfig, expand
from app.tools.mcp.oauth import (
    Connections,
    Connector,
    NeedsConnection,
    SignInFlow,
    provider_for,
)
from app.tools.mcp.resources import ResourceIndex
from app.tools.mcp.results import McpResult, read_resource_result, read_result

log = logging.getLogger("hearth.mcp")


NEVER_CALLED = r".*will never be called: .* negotiated a modern MCP session"
"""pydantic-ai warns that a 2026-07-28 session never calls the form and completion handlers; the
SDK's client does call them, inside the call, for the questions such a server returns as
input-required results (tests/api/test_mcp_results.py), so the warning is wrong here. A filter
for the process, since servers start concurrently and `catch_warnings` is not task-safe."""
warnings.filterwarnings("ignore", message=NEVER_CALLED, category=UserWarning)

MAX_TOOL_NAME = 64
"""Providers refuse longer tool names (Anthropic and OpenAI both stop at 64)."""
RESTART_BACKOFF_FIRST = 1.0
RESTART_BACKOFF_MAX = 30.0
SHUTDOWN_TIMEOUT = 5.0
SESSION_CALL_LIMIT = 24 * 3600.0
"""The MCP session's own limit on a call: the real one is `timeout_seconds` since the call began
or since its last progress report, which the session cannot restart."""

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9_-]")

GroupStatus = Literal["starting", "available", "unavailable"]


class McpToolError(GroupToolError):
    """A call to an MCP tool that did not produce a result; the message says why, for the model."""


def exposed_tool_name(server: str, tool: str) -> str:
    """The name a model sees for `tool` of `server`: `mcp__<server>__<tool>`.

    A name over 64 characters is cut and ends in `_` and the first 8 hex digits of the SHA-256 of
    the full name (64 characters in all), so it is stable and two long names that share a prefix
    stay apart. A name with characters providers refuse (MCP allows `.` and `/`) is treated the
    same way, with those characters turned into `_`.
    """
    full = f"mcp__{server}__{tool}"
    if len(full) <= MAX_TOOL_NAME and _SAFE_NAME.match(full):
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    safe = _UNSAFE_CHAR.sub("_", full)
    return f"{safe[: MAX_TOOL_NAME - len(digest) - 1]}_{digest}"


def tool_description(server: str, description: str) -> str:
    return f"[{server}] {description}"


@dataclass(frozen=True)
class GroupTool:
    name: str
    """The exposed name, `mcp__<server>__<tool>`."""
    remote_name: str
    """The tool's own name on its server."""
    description: str
    """Starts with `[<server>] `."""
    parameters: dict[str, Any]
    """The tool's JSON schema for its arguments, as the server gave it."""
    resources: ResourceIndex | None = None
    """Set on the group's resource reader (`resources`), which hearth adds: what it may read."""


@dataclass
class McpGroup:
    name: str
    description: str
    requires_approval: bool
    per_user: bool = False
    """Each user connects it with their own account (`auth: oauth`)."""
    status: GroupStatus = "starting"
    error: str | None = None
    tools: tuple[GroupTool, ...] = ()
    watcher: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    """Told each time `status` changes (the metrics' count of servers by status)."""

    def __setattr__(self, name: str, value: Any) -> None:
        changed = name == "status" and self.__dict__.get("status") != value
        object.__setattr__(self, name, value)
        if changed and (watcher := self.__dict__.get("watcher")) is not None:
            watcher()


@dataclass(eq=False)
class _Server:
    config: McpServerConfig
    group: McpGroup
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    toolset: MCPToolset[Any] | None = None
    by_name: dict[str, GroupTool] = field(default_factory=dict)
    start_error: str | None = None
    """Set when the server never started; it then has no tools and is never restarted."""
    failed_restarts: int = 0
    next_restart: float = 0.0
    listening: asyncio.Task[None] | None = None
    """The list-change stream of a modern server's session; it ends with the session."""
    inflight: list[InFlight] = field(default_factory=list)
    """The calls running now: whom the server's own requests go to (`asking`)."""
    users: dict[uuid.UUID, MCPToolset[Any]] = field(default_factory=dict)
    """Each connected user's own session, for a server with `auth: oauth`."""


class McpGroups:
    """The process-wide set of MCP servers, one group each, in the order of the config file."""

    def __init__(
        self,
        config: McpConfig,
        clock: Clock | None = None,
        connections: Connections | None = None,
    ) -> None:
        self._clock = clock or Clock()
        self.connections = connections
        """The users' credentials, for the servers they connect (`auth: oauth`)."""
        self.connector: Connector | None = None
        """Where a sign-in a server asks for in the middle of a call waits for its callback."""
        self.configs = {server.name: server for server in config.servers}
        """Spaces out the restarts of a server that died (its monotonic time)."""
        self._servers: dict[str, _Server] = {
            server.name: _Server(
                config=server,
                group=McpGroup(
                    name=server.name,
                    description=server.description,
                    requires_approval=server.requires_approval,
                    per_user=server.auth == "oauth",
                ),
            )
            for server in config.servers
        }
        self._startup: list[asyncio.Task[None]] = []
        self._starting: dict[str, asyncio.Task[None]] = {}
        self._shutdowns: set[asyncio.Task[None]] = set()
        self._started = False
        self._closed = False

    # -- life cycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every server in the background and return at once."""
        if self._started:
            return
        self._started = True
        for server in self._servers.values():
            task = asyncio.create_task(
                self._start_up(server), name=f"mcp-start-{server.group.name}"
            )
            self._startup.append(task)
            self._starting[server.group.name] = task

    async def wait_ready(self, timeout: float) -> None:  # noqa: ASYNC109 (a bound, not a cancel)
        """Wait until every server has started or failed; `TimeoutError` if some still start."""
        if not self._startup:
            return
        _, pending = await asyncio.wait(self._startup, timeout=timeout)
        if pending:
            names = [name for name, s in self._servers.items() if s.group.status == "starting"]
            raise TimeoutError(f"MCP servers still starting after {timeout:g} s: {names}")

    async def _read_resource(
        self,
        server: _Server,
        toolset: MCPToolset[Any],
        offered: ResourceIndex,
        arguments: dict[str, Any],
    ) -> McpResult:
        name = server.group.name
        uri = arguments.get("uri")
        if not isinstance(uri, str) or not offered.offers(uri):
            raise McpToolError(
                f"{uri!r} is not a resource of MCP server {name!r}; its tool's description "
                "lists those it offers."
            )
        try:
            async with asyncio.timeout(server.config.timeout_seconds):
                raw = await toolset.client.read_resource_mcp(uri)
        except Exception as exc:
            problem = _leaf(exc)
            if isinstance(problem, MCPError | TimeoutError):
                raise McpToolError(
                    f"MCP server {name!r} could not read {uri!r}: {_describe(problem)}"
                ) from exc
            self._retire(server, toolset, problem)
            raise McpToolError(
                f"MCP server {name!r} stopped while reading {uri!r} ({_describe(problem)}); it "
                "will be restarted on the next call."
            ) from exc
        return read_resource_result(raw)

    async def wait_started(self, name: str) -> None:
        """Wait until the group `name` has started or failed, at most its start-up time."""
        server, task = self._servers.get(name), self._starting.get(name)
        if server is None or task is None or task.done():
            return
        await asyncio.wait([task], timeout=server.config.init_timeout_seconds + 1)

    async def close(self) -> None:
        """Stop every server process; calls made afterwards fail with `McpToolError`."""
        self._closed = True
        for task in self._startup:
            task.cancel()
        await asyncio.gather(*self._startup, return_exceptions=True)
        toolsets = []
        for server in self._servers.values():
            _stop_listening(server)
            if server.toolset is not None:
                toolsets.append(server.toolset)
                server.toolset = None
            toolsets.extend(server.users.values())
            server.users.clear()
        await asyncio.gather(*(_shut(toolset) for toolset in toolsets))
        await asyncio.gather(*self._shutdowns, return_exceptions=True)

    # -- catalogue ----------------------------------------------------------------------------

    def groups(self) -> list[McpGroup]:
        """Every group, in config order.

        These are the live objects, the same for the life of the process, so a catalogue that
        keeps them sees `status` and `error` change; `tools` is set once, when start-up succeeds.
        Read them, never change them.
        """
        return [server.group for server in self._servers.values()]

    def watch(self, report: Callable[[Mapping[str, int]], None]) -> None:
        """Give `report` the number of servers in each status now and after every change."""

        def changed() -> None:
            report(Counter(server.group.status for server in self._servers.values()))

        for server in self._servers.values():
            server.group.watcher = changed
        changed()

    def group(self, name: str) -> McpGroup | None:
        server = self._servers.get(name)
        return None if server is None else server.group

    # -- calls --------------------------------------------------------------------------------

    async def call(
        self,
        group: str,
        exposed_tool_name: str,
        arguments: dict[str, Any],
        *,
        on_progress: Progress | None = None,
        asks: ServerAsks | None = None,
        user_id: uuid.UUID | None = None,
    ) -> McpResult:
        """Call a tool by its exposed name: its result (`results.read_result`), or
        `McpToolError` with the server's own words when the tool answered an error.

        The call carries a progress token; each progress report the server sends goes to
        `on_progress` and gives the call its whole `timeout_seconds` again. What the server
        asks while the call runs (a form, a completion) goes to `asks`; without it a form is
        declined and a completion refused.
        """
        server = self._servers.get(group)
        if server is None:
            raise McpToolError(f"There is no MCP server named {group!r}.")
        if self._closed:
            raise McpToolError(f"MCP server {group!r} is shut down.")
        if server.start_error is not None:
            raise McpToolError(f"MCP server {group!r} is unavailable: {server.start_error}")
        if server.group.status == "starting":
            raise McpToolError(f"MCP server {group!r} is still starting; try again shortly.")
        if server.group.per_user:
            toolset = await self._users_session(server, user_id)
        tool = server.by_name.get(exposed_tool_name)
        if tool is None:
            raise McpToolError(f"MCP server {group!r} has no tool {exposed_tool_name!r}.")
        if not server.group.per_user:
            toolset = await self._running(server)
        config = server.config
        if tool.resources is not None:
            return await self._read_resource(server, toolset, tool.resources, arguments)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(config.timeout_seconds) as deadline:

                async def report(progress: float, total: float | None, message: str | None) -> None:
                    if not flight.waiting:
                        deadline.reschedule(loop.time() + config.timeout_seconds)
                    if on_progress is not None:
                        await on_progress(progress, total, message)

                flight = InFlight(asks, deadline, config.timeout_seconds, loop, user_id)
                server.inflight.append(flight)
                calling = current_call.set(flight)
                try:
                    # The raw result: pydantic-ai's mapping would turn media into bytes in the
                    # return and fail the call on a malformed block (`results`). The deadline
                    # is this one, which progress moves; the session's own only backs it up.
                    raw = await toolset.client.call_tool_mcp(
                        name=tool.remote_name,
                        arguments=arguments,
                        timeout=SESSION_CALL_LIMIT,
                        progress_handler=report,
                    )
                finally:
                    current_call.reset(calling)
                    server.inflight.remove(flight)
        except Exception as exc:
            problem = _leaf(exc)
            if isinstance(problem, ToolError):
                raise McpToolError(
                    f"The tool {tool.remote_name!r} of MCP server {group!r} failed: "
                    f"{_describe(problem)}"
                ) from exc
            if isinstance(problem, TimeoutError) or (
                isinstance(problem, MCPError) and problem.code == REQUEST_TIMEOUT
            ):
                raise McpToolError(
                    f"MCP server {group!r} did not answer {tool.remote_name!r} within "
                    f"{config.timeout_seconds:g} s."
                ) from exc
            if isinstance(problem, MCPError) and problem.code != CONNECTION_CLOSED:
                raise McpToolError(
                    f"MCP server {group!r} refused the call to {tool.remote_name!r}: "
                    f"{_describe(problem)}"
                ) from exc
            if isinstance(problem, NeedsConnection) or _refused_credentials(problem):
                self._forget_user(server, user_id)
                raise McpToolError(needs_connection(group, again=True)) from exc
            # The connection is gone: the process died or the HTTP server went away.
            self._retire(server, toolset, problem)
            self._forget_user(server, user_id)
            if self._closed:
                raise McpToolError(f"MCP server {group!r} is shut down.") from exc
            raise McpToolError(
                f"MCP server {group!r} stopped during the call to {tool.remote_name!r} "
                f"({_describe(problem)}); it will be restarted on the next call."
            ) from exc
        result = read_result(raw)
        if result.is_error:
            raise McpToolError(
                f"The tool {tool.remote_name!r} of MCP server {group!r} failed: "
                f"{result.text or 'it gave no reason'}"
            )
        return result

    # -- each user's own sessions ---------------------------------------------------------------

    async def ready_for(self, name: str, user_id: uuid.UUID) -> str | None:
        """None when the group can serve `user_id` now (its tools read); else why not, for the
        model: a per-user group the user has not connected."""
        server = self._servers.get(name)
        if server is None or not server.group.per_user:
            return None
        try:
            await self._users_session(server, user_id)
        except McpToolError as exc:
            return str(exc)
        return None

    async def connect(self, name: str, user_id: uuid.UUID, auth: httpx2.Auth) -> None:
        """Open the user's session of server `name` with `auth` (which signs them in, sending
        them to the authorization server first when it must) and keep it as theirs."""
        server = self._servers[name]
        toolset = await self._open_for_user(server, auth)
        if isinstance(auth, OAuthClientProvider):  # from now on, a sign-in goes through a call
            signing_in = _SignIn(self, server, user_id)
            auth.context.redirect_handler = signing_in.redirect
            auth.context.callback_handler = signing_in.callback
        old = server.users.pop(user_id, None)
        server.users[user_id] = toolset
        if old is not None:
            await _shut(old)

    async def _open_for_user(self, server: _Server, auth: httpx2.Auth) -> MCPToolset[Any]:
        """A session of the server signed in by `auth`; its tools are the group's if it has none."""
        toolset, tools = await _open(
            server.config,
            read_tools=True,
            on_message=self._listener(server),
            inflight=server.inflight,
            auth=auth,
        )
        if tools and not server.by_name:
            server.by_name = {tool.name: tool for tool in tools}
            server.group.tools = tools
        return toolset

    async def disconnect(self, name: str, user_id: uuid.UUID) -> None:
        """Close the user's session of server `name`, if they have one."""
        server = self._servers.get(name)
        toolset = server.users.pop(user_id, None) if server is not None else None
        if toolset is not None:
            await _shut(toolset)

    async def _users_session(self, server: _Server, user_id: uuid.UUID | None) -> MCPToolset[Any]:
        name = server.group.name
        if user_id is None or self.connections is None:
            raise McpToolError(f"MCP server {name!r} is used with each user's own account.")
        toolset = server.users.get(user_id)
        if toolset is not None:
            return toolset
        async with server.lock:
            if (toolset := server.users.get(user_id)) is not None:
                return toolset
            if not await self.connections.connected(user_id, name):
                raise McpToolError(needs_connection(name))
            signing_in = _SignIn(self, server, user_id)
            provider = await provider_for(
                server.config,
                self.connections,
                user_id,
                redirect_handler=signing_in.redirect,
                callback_handler=signing_in.callback,
            )
            try:
                async with asyncio.timeout(server.config.init_timeout_seconds):
                    toolset = await self._open_for_user(server, provider)
            except Exception as exc:
                problem = _leaf(exc)
                if isinstance(problem, NeedsConnection) or _refused_credentials(problem):
                    raise McpToolError(needs_connection(name, again=True)) from exc
                raise McpToolError(
                    f"MCP server {name!r} could not be reached: {_describe(problem)}"
                ) from exc
            server.users[user_id] = toolset
            return toolset

    def _forget_user(self, server: _Server, user_id: uuid.UUID | None) -> None:
        toolset = server.users.pop(user_id, None) if user_id is not None else None
        if toolset is not None:
            task = asyncio.create_task(_shut(toolset))
            self._shutdowns.add(task)
            task.add_done_callback(self._shutdowns.discard)

    # -- internals ----------------------------------------------------------------------------

    async def _start_up(self, server: _Server) -> None:
        name = server.group.name
        if server.group.per_user:  # nothing to open before a user connects it
            server.group.status = "available"
            return
        async with server.lock:
            try:
                toolset, tools = await _open(
                    server.config,
                    read_tools=True,
                    on_message=self._listener(server),
                    inflight=server.inflight,
                )
            except Exception as exc:
                server.start_error = _describe_start_failure(server.config, exc)
            except asyncio.CancelledError:
                server.start_error = "shut down before it started"
                raise
            else:
                server.toolset = toolset
                server.by_name = {tool.name: tool for tool in tools}
                server.group.tools = tools
                self._follow(server, toolset)
            finally:
                if server.start_error is not None:
                    server.group.status = "unavailable"
                    server.group.error = server.start_error
                    log.warning(
                        "MCP server %r (%s) is unavailable: %s",
                        name,
                        _where(server.config),
                        server.start_error,
                    )
                elif server.toolset is not None:
                    server.group.status = "available"
                    log.info("MCP server %r started with %d tools", name, len(server.by_name))

    async def _running(self, server: _Server) -> MCPToolset[Any]:
        """The server's live toolset, restarting a server that died (one attempt per call)."""
        toolset = server.toolset
        if toolset is not None:
            return toolset
        name = server.group.name
        async with server.lock:
            if server.toolset is not None:
                return server.toolset
            if self._closed:
                raise McpToolError(f"MCP server {name!r} is shut down.")
            wait = server.next_restart - self._clock.monotonic()
            if wait > 0:
                raise McpToolError(
                    f"MCP server {name!r} is down ({server.group.error}); the next restart "
                    f"is tried in {math.ceil(wait)} s."
                )
            try:
                toolset, _ = await _open(
                    server.config,
                    read_tools=False,
                    on_message=self._listener(server),
                    inflight=server.inflight,
                )
            except Exception as exc:
                server.failed_restarts += 1
                delay = min(
                    RESTART_BACKOFF_FIRST * 2 ** (server.failed_restarts - 1), RESTART_BACKOFF_MAX
                )
                server.next_restart = self._clock.monotonic() + delay
                problem = _describe_start_failure(server.config, exc)
                server.group.status = "unavailable"
                server.group.error = f"restart failed: {problem}"
                log.warning(
                    "MCP server %r (%s) could not be restarted: %s",
                    name,
                    _where(server.config),
                    problem,
                )
                raise McpToolError(
                    f"MCP server {name!r} stopped and could not be restarted: {problem}. "
                    f"The next attempt is in {delay:g} s."
                ) from exc
            if self._closed:
                await _shut(toolset)
                raise McpToolError(f"MCP server {name!r} is shut down.")
            server.toolset = toolset
            self._follow(server, toolset)
            server.failed_restarts = 0
            server.next_restart = 0.0
            server.group.status = "available"
            server.group.error = None
            log.info("MCP server %r restarted", name)
            return toolset

    def _listener(self, server: _Server) -> MessageHandler:
        """What the server's session does with what the server sends on its own."""

        async def on_message(message: Any) -> None:
            notification = getattr(message, "root", message)
            if isinstance(
                notification, ToolListChangedNotification | ResourceListChangedNotification
            ):
                task = asyncio.create_task(self._relist(server))
                self._shutdowns.add(task)
                task.add_done_callback(self._shutdowns.discard)

        return on_message

    def _follow(self, server: _Server, toolset: MCPToolset[Any]) -> None:
        """Keep a modern server's list-change stream open while its session lives."""
        task = asyncio.create_task(self._listen(server, toolset), name="mcp-listen")
        server.listening = task

    async def _listen(self, server: _Server, toolset: MCPToolset[Any]) -> None:
        try:
            async with listen(
                toolset.client.session, tools_list_changed=True, resources_list_changed=True
            ) as subscription:
                async for event in subscription:
                    if isinstance(event, ToolsListChanged | ResourcesListChanged):
                        await self._relist(server)
        except ListenNotSupportedError:
            return  # an older session: the server notifies on it instead (`_listener`)
        except Exception as exc:  # the session ended, or the server does not offer it
            log.debug("MCP server %r: list changes not followed: %s", server.group.name, exc)

    async def _relist(self, server: _Server) -> None:
        """Read a server's tools again after it said they changed; a failure keeps the old."""
        toolset = server.toolset
        if toolset is None or self._closed:
            return
        try:
            async with asyncio.timeout(server.config.timeout_seconds):
                tools = await _read_tools(server.group.name, toolset)
        except Exception as exc:
            log.warning(
                "MCP server %r: its changed tools could not be read: %s",
                server.group.name,
                _describe(exc),
            )
            return
        server.by_name = {tool.name: tool for tool in tools}
        server.group.tools = tools
        log.info("MCP server %r changed its tools: now %d", server.group.name, len(tools))

    def _retire(self, server: _Server, toolset: MCPToolset[Any], problem: BaseException) -> None:
        """Forget a toolset whose connection broke; the first caller to notice closes it."""
        if server.toolset is not toolset:
            return
        server.toolset = None
        _stop_listening(server)
        log.warning("MCP server %r stopped: %s", server.group.name, _describe(problem))
        task = asyncio.create_task(_shut(toolset))
        self._shutdowns.add(task)
        task.add_done_callback(self._shutdowns.discard)


@dataclass(eq=False)
class _SignIn:
    """A new sign-in that a user's server asks for in the middle of one of their calls (an OAuth
    step-up, a wider scope): the call's turn tells the user where to sign in, and the call waits
    (its timeout standing still, for at most that long) for them to come back through the
    callback. Without exactly one call of theirs running there is no one to tell: the flow ends
    at once and the user is told to connect again."""

    groups: McpGroups
    server: _Server
    user_id: uuid.UUID
    flow: SignInFlow | None = None
    pause: contextlib.AsyncExitStack | None = None
    timeout: float = 0.0

    async def redirect(self, url: str) -> None:
        connector = self.groups.connector
        flights = [f for f in self.server.inflight if f.user_id == self.user_id]
        if connector is None or len(flights) != 1 or flights[0].asks is None:
            raise NeedsConnection("the server asks the user to sign in again")
        flight = flights[0]
        assert flight.asks is not None
        self.flow = await connector.expect(self.user_id, self.server.group.name, url)
        self.pause = contextlib.AsyncExitStack()
        await self.pause.enter_async_context(flight.paused())
        self.timeout = flight.timeout
        await flight.asks.authorize(self.server.group.name, url)

    async def callback(self) -> Any:
        flow, pause = self.flow, self.pause
        self.flow = self.pause = None
        if flow is None:
            raise NeedsConnection("the server asks the user to sign in again")
        try:
            return await flow.wait(self.timeout)
        finally:
            flow.forget()
            if pause is not None:
                await pause.aclose()


def _toolset(
    config: McpServerConfig,
    on_message: MessageHandler | None = None,
    inflight: list[InFlight] | None = None,
    auth: httpx2.Auth | None = None,
) -> MCPToolset[Any]:
    """The server's toolset; its session answers forms always and completions where the server
    is allowed them (`allow_sampling`), for the calls in `inflight`."""
    if config.command is not None:
        client: StdioTransport | StreamableHttpTransport = StdioTransport(
            command=config.command[0],
            args=list(config.command[1:]),
            env={name: expand(value, os.environ) for name, value in config.env.items()} or None,
            # Without keep_alive the process ends with the session, so closing stops it.
            keep_alive=False,
        )
    else:
        assert config.url is not None
        headers = {name: expand(value, os.environ) for name, value in config.headers.items()}
        client = StreamableHttpTransport(config.url, headers=headers or None, auth=auth)
    calls = inflight if inflight is not None else []
    return MCPToolset(
        client,
        id=config.name,
        elicitation_handler=elicitation_handler(config.name, calls),
        sampling_handler=sampling_handler(config.name, calls) if config.allow_sampling else None,
        tool_error_behavior="error",
        # The whole start-up is bounded by `_open`; this only backs it up, so it fires later.
        init_timeout=config.init_timeout_seconds + 1,
        read_timeout=config.timeout_seconds,
        message_handler=on_message,
        # The group keeps the lists itself and reads them only when the server says they
        # changed, which a modern server says on a stream the toolset's cache never hears.
        cache_tools=False,
        cache_resources=False,
    )


async def _open(
    config: McpServerConfig,
    *,
    read_tools: bool,
    on_message: MessageHandler | None = None,
    inflight: list[InFlight] | None = None,
    auth: httpx2.Auth | None = None,
) -> tuple[MCPToolset[Any], tuple[GroupTool, ...]]:
    """Start a server and shake hands (and read its tools), within its start-up time limit.

    With `auth` (a user signing in) the handshake may wait for the user, so only the
    OAuth flow's own limits bound it."""
    toolset = _toolset(config, on_message, inflight, auth)
    bound = None if auth is not None else config.init_timeout_seconds
    async with asyncio.timeout(bound):
        await toolset.__aenter__()
        try:
            tools = await _read_tools(config.name, toolset) if read_tools else ()
        except BaseException:
            await _shut(toolset)
            raise
    return toolset, tools


async def _read_tools(server: str, toolset: MCPToolset[Any]) -> tuple[GroupTool, ...]:
    """The group's tools: the server's own, then its resource reader when it has resources."""
    tools = _group_tools(server, await toolset.list_tools())
    if not toolset.capabilities.resources:
        return tools
    listed = await toolset.list_resources()
    templates = await toolset.list_resource_templates()
    name = exposed_tool_name(server, resources.READ_RESOURCE)
    if not (listed or templates) or any(tool.name == name for tool in tools):
        return tools  # nothing to read, or the server has a tool of that name: its own wins
    reader = GroupTool(
        name,
        resources.READ_RESOURCE,
        resources.describe(server, listed, templates),
        resources.PARAMETERS,
        resources.index(listed, templates),
    )
    return (*tools, reader)


def _stop_listening(server: _Server) -> None:
    if server.listening is not None:
        server.listening.cancel()
        server.listening = None


async def _shut(toolset: MCPToolset[Any]) -> None:
    """Leave a toolset (which stops a stdio process), never raising and never hanging."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(SHUTDOWN_TIMEOUT):
            await toolset.__aexit__(None, None, None)


def _group_tools(server: str, mcp_tools: Sequence[Any]) -> tuple[GroupTool, ...]:
    tools: list[GroupTool] = []
    seen: set[str] = set()
    for mcp_tool in mcp_tools:
        # The wire spelling (camelCase, `_meta`) reads the same on either MCP SDK generation.
        wire = mcp_tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        meta = wire.get("_meta")
        ui = meta.get("ui") if isinstance(meta, dict) else None
        visibility = ui.get("visibility") if isinstance(ui, dict) else None
        if isinstance(visibility, list) and "model" not in visibility:
            continue  # a tool only an app page may call (MCP Apps)
        execution = wire.get("execution")
        if isinstance(execution, dict) and execution.get("taskSupport") == "required":
            continue  # callable only as a task, which hearth does not run
        remote = wire["name"]
        name = exposed_tool_name(server, remote)
        if name in seen:
            continue
        seen.add(name)
        description = wire.get("description") or wire.get("title") or remote
        parameters = wire.get("inputSchema") or {"type": "object", "properties": {}}
        tools.append(GroupTool(name, remote, tool_description(server, description), parameters))
    return tuple(tools)


def needs_connection(server: str, *, again: bool = False) -> str:
    """What a user who has not (or no longer) connected a per-user server is told."""
    how = "connect it again" if again else "connect it"
    return (
        f"needs_connection: MCP server {server!r} works with each user's own account, and this "
        f"user's is not connected; they must {how} in hearth first."
    )


def _refused_credentials(problem: BaseException) -> bool:
    """Whether the server refused the user's token (no refresh could help)."""
    response = getattr(problem, "response", None)
    return getattr(response, "status_code", None) in (401, 403)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> str:
    exc = _leaf(exc)
    text = str(exc).strip()
    return text or type(exc).__name__


def _describe_start_failure(config: McpServerConfig, exc: BaseException) -> str:
    """Why a server did not start, for the model too: so it never repeats the command line,
    which may carry secrets (the log names it)."""
    if isinstance(_leaf(exc), TimeoutError):
        return f"it did not start within {config.init_timeout_seconds:g} s"
    return _describe(exc)


def _where(config: McpServerConfig) -> str:
    return shlex.join(config.command) if config.command is not None else str(config.url)
