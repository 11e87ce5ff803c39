"""The catalogue's tools, as a pydantic-ai toolset.

`get_tools` runs before every model request with the serving model known, so what it declares
follows that model's DTL mode (docs/wire.md §2):

- `none`: the tools of the groups activated so far, so the array grows by exactly the activated
  groups' tools as the turn's `active_groups` grows;
- `anthropic_tool_reference` and `kimi_system_tools`: every catalogue tool, on every request,
  each marked with its group; the model class decides how they go on the wire (all deferred, or
  declared by system-tools messages) and the set never changes within a process.

Calls to a built-in group go to the group itself, with the run's context; calls to an MCP group
go through `GroupCall`. Tools keep catalogue order, so the array is byte-stable. Calls are
routed to the group that owns the tool, only once that group is active (and, for a server marked
`requires_approval`, once the user approved the call); a group that cannot answer gives the
model a clear tool error, never a failed turn. A tool may fail as often as the run allows
(`ctx.max_retries`, which the turn sets beyond reach), so only `HEARTH_MAX_ROUNDS` bounds a
model that keeps calling a failing tool. An MCP result's media become files and references
(`app.tools.media`), never bytes in the return.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.mcp import TOOL_SCHEMA_VALIDATOR
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from app.llm.dtl import GROUP_KEY, dtl_mode_of
from app.tools.asks import ServerAsks
from app.tools.deps import TurnDeps
from app.tools.events import ToolProgress
from app.tools.mcp.results import McpResult
from app.tools.media import tool_return

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
"""(progress, total, message): what a server reports while a call runs."""


class GroupCall(Protocol):
    """(group, exposed tool name, arguments) -> the tool's result; raises on a tool error.
    `on_progress` hears the progress the server reports, if it does; `asks` answers what the
    server asks while the call runs (a form for the user, a completion by the model);
    `user_id` is whose call it is (a server used with each user's own account needs it)."""

    def __call__(
        self,
        group: str,
        tool: str,
        arguments: dict[str, Any],
        /,
        *,
        on_progress: Progress | None = None,
        asks: ServerAsks | None = None,
        user_id: uuid.UUID | None = None,
    ) -> Awaitable[Any]: ...


class BuiltinGroup(Protocol):
    """A group that runs in the process: it gets the run's context with each call."""

    async def call(self, ctx: RunContext[TurnDeps], tool: str, arguments: dict[str, Any]) -> Any:
        """The tool's result; raises `ModelRetry` for an error the model may correct."""
        ...


class GroupToolError(Exception):
    """A group's tool could not answer (its server is unavailable, died or timed out)."""


async def no_group_call(
    group: str,
    tool: str,
    arguments: dict[str, Any],
    *,
    on_progress: Progress | None = None,
    asks: ServerAsks | None = None,
    user_id: uuid.UUID | None = None,
) -> Any:
    raise GroupToolError(f"group {group!r} has no implementation in this process")


class GroupToolset(AbstractToolset[TurnDeps]):
    def __init__(self, call: GroupCall) -> None:
        self._call = call

    @property
    def id(self) -> str:
        return "hearth-groups"

    async def get_tools(self, ctx: RunContext[TurnDeps]) -> dict[str, ToolsetTool[TurnDeps]]:
        tools: dict[str, ToolsetTool[TurnDeps]] = {}
        every_tool = dtl_mode_of(ctx.model) != "none"
        for entry in ctx.deps.catalogue.entries:
            if not every_tool and entry.group.name not in ctx.deps.active_groups:
                continue
            for tool in entry.group.tools:
                tools[tool.name] = ToolsetTool(
                    toolset=self,
                    tool_def=ToolDefinition(
                        name=tool.name,
                        description=tool.description,
                        parameters_json_schema=tool.parameters,
                        metadata={GROUP_KEY: entry.group.name},
                        # A server marked `requires_approval`: every call waits for the user.
                        kind="unapproved" if entry.group.requires_approval else "function",
                    ),
                    max_retries=ctx.max_retries,
                    args_validator=TOOL_SCHEMA_VALIDATOR,
                )
        return tools

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[TurnDeps],
        tool: ToolsetTool[TurnDeps],
    ) -> Any:
        entry = ctx.deps.catalogue.tool_owner(name)
        if entry is None or entry.group.name not in ctx.deps.active_groups:
            raise ModelRetry(f"{name} is not active; call activate_tools first")
        if entry.kind == "builtin":
            return await cast(BuiltinGroup, entry.group).call(ctx, name, tool_args)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            await ctx.emit(ToolProgress(progress=done, total=total, message=message))

        deps = ctx.deps
        asks = deps.asks(ctx, ctx.tool_call_id or "") if deps.asks is not None else None
        try:
            result = await self._call(
                entry.group.name,
                name,
                tool_args,
                on_progress=progress,
                asks=asks,
                user_id=deps.user_id,
            )
        except GroupToolError as exc:
            raise ModelRetry(str(exc)) from exc
        if not isinstance(result, McpResult):
            return result
        return await tool_return(
            result,
            root=deps.file_root,
            chat_id=deps.chat_id,
            row_id=deps.call_rows.get(ctx.tool_call_id or ""),
            quota=deps.storage_quota,
            largest=deps.largest_medium,
        )
