"""A turn's pinned catalogue and `activate_tools`: groups whose servers start after the turn began.

A turn pins the catalogue when it begins. A server that was still starting then has no tools in
the pin; if it has started by the time the model activates it, the activation must read its tools
again, or the next round declares none and every call is an unknown tool.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from app.tools.activation import activation_report
from app.tools.catalogue import Catalogue, Entry
from app.tools.deps import TurnDeps
from tests.catalogue_setup import Group, Tool

PING = Tool("mcp__late__ping", "[late] Ping")


def deps_over(group: Group, waited: list[str]) -> TurnDeps:
    async def wait_started(name: str) -> None:
        waited.append(name)
        group.status, group.tools = "available", (PING,)

    live = Catalogue([Entry("mcp", group)], wait_started=wait_started)
    return TurnDeps(uuid.uuid4(), uuid.uuid4(), Path("."), catalogue=live.pinned())


async def test_a_group_that_started_after_the_pin_is_activated_with_its_tools() -> None:
    group = Group("late", "Starts late", (), status="starting")
    waited: list[str] = []
    deps = deps_over(group, waited)
    group.status, group.tools = "available", (PING,)  # started between the pin and the call

    [report] = await activation_report(deps, ["late"])

    assert report["status"] == "activated" and report["tools"] == ["mcp__late__ping"]
    assert [tool.name for tool in deps.catalogue.entries[0].group.tools] == ["mcp__late__ping"]
    assert waited == [] and deps.active_groups == {"late"}


async def test_a_group_still_starting_at_activation_is_waited_for_then_read() -> None:
    group = Group("late", "Starts late", (), status="starting")
    waited: list[str] = []
    deps = deps_over(group, waited)

    [report] = await activation_report(deps, ["late"])

    assert waited == ["late"]
    assert report["status"] == "activated" and report["tools"] == ["mcp__late__ping"]


async def test_a_group_pinned_while_available_keeps_its_pinned_tools() -> None:
    group = Group("late", "Started", (PING,))
    deps = deps_over(group, [])
    group.tools = (PING, Tool("mcp__late__new", "[late] Added mid-turn"))

    [report] = await activation_report(deps, ["late"])

    assert report["tools"] == ["mcp__late__ping"]  # a list change reaches the next turn


async def test_a_turn_waits_for_its_chats_active_groups_that_are_still_starting() -> None:
    late = Group("late", "Starts late", (), status="starting")
    other = Group("other", "Not active here", (), status="starting")
    waited: list[str] = []

    async def wait_started(name: str) -> None:
        waited.append(name)
        late.status, late.tools = "available", (PING,)

    live = Catalogue([Entry("mcp", late), Entry("mcp", other)], wait_started=wait_started)
    pinned = await live.pinned_once_started({"late"})

    assert waited == ["late"]  # a group the chat has not activated is not waited for
    found = pinned.find("late")
    assert found is not None and [tool.name for tool in found.group.tools] == ["mcp__late__ping"]
