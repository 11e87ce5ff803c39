"""`activate_tools`: the one way a model brings a group of tools into a chat.

The tool answers per group (docs/wire.md §1) and keeps the turn's set of active groups up to date,
so a second call in the same round naming the same group answers `already_active`; it runs
alone (`sequential`), so "first in call order" is the order the model wrote the calls in. A
group still `starting` (an MCP server a second or two after start-up) is waited for, up to its
start-up time, rather than answered `unavailable`; a group each user connects with their own
account answers `needs_connection` to a user who has not. It writes nothing: the recorder, which
knows the round's message id, stores the activation rows.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai import ModelRetry, RunContext, Tool, ToolReturn

from app.llm.dtl import ACTIVATED_KEY
from app.tools.catalogue import per_user
from app.tools.deps import TurnDeps

ACTIVATE_TOOLS = "activate_tools"


async def activation_report(deps: TurnDeps, groups: list[str]) -> list[dict[str, Any]]:
    report: list[dict[str, Any]] = []
    for name in groups:
        entry = await deps.catalogue.started(name)  # the first turns after a start need it
        if entry is None:
            report.append({"group": name, "status": "unknown", "tools": [], "description": ""})
            continue
        group = entry.group
        problem = None
        if (
            entry.kind == "mcp"
            and name not in deps.active_groups
            and deps.catalogue.ready_for is not None
            and per_user(group)
        ):
            problem = await deps.catalogue.ready_for(name, deps.user_id)
            if problem is None:
                deps.catalogue.repin(name)  # a user's first session may have read its tools
                entry = deps.catalogue.find(name) or entry
                group = entry.group
        tools = [tool.name for tool in group.tools]
        if name in deps.active_groups:
            status = "already_active"
        elif problem is not None:
            report.append(
                {
                    "group": name,
                    "status": "needs_connection",
                    "tools": [],
                    "description": group.description,
                    "reason": problem,
                }
            )
            continue
        elif group.status != "available":
            status = "unavailable"
        else:
            status = "activated"
            deps.active_groups.add(name)
        report.append(
            {"group": name, "status": status, "tools": tools, "description": group.description}
        )
    return report


async def activate_tools(ctx: RunContext[TurnDeps], groups: list[str]) -> ToolReturn:
    """Activate groups of tools from the catalogue in the system prompt, by group name.

    Their tools can be called from the next step on. Answers, per group, whether it was
    activated, was already active, is unknown or is unavailable, and which tools it has.
    """
    report = await activation_report(ctx.deps, list(dict.fromkeys(groups)))
    if not any(r["status"] in ("activated", "already_active") for r in report):
        known = ", ".join(e.group.name for e in ctx.deps.catalogue.entries) or "none"
        raise ModelRetry(
            f"No group could be activated: {json.dumps(report)}. Groups in the catalogue: {known}."
        )
    activated = [r["group"] for r in report if r["status"] == "activated"]
    # The anchor of the activation, for the model classes that render it (docs/wire.md §2).
    metadata = {ACTIVATED_KEY: activated} if activated else None
    return ToolReturn(json.dumps(report), metadata=metadata)


activate_tools_tool = Tool(activate_tools, name=ACTIVATE_TOOLS, sequential=True)
