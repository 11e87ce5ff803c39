"""The tool catalogue: every group of tools a user may activate, and how the model learns of it.

A group is an MCP server (named as in `config/mcp.yaml`) or a built-in group. The groups are
fixed for the life of the process, and the system prompt lists every group in one table that
never changes with activations, so the cached prompt prefix survives them (docs/wire.md §1). A
group's tools change only when its server says its list changed; each turn works on the
catalogue as it was when the turn began (`pinned`), so a change reaches a chat at its next turn
and never moves the tool array of a turn's requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

GroupStatus = Literal["starting", "available", "unavailable", "needs_connection"]


# The catalogue only reads its groups and tools: read-only members, so that a frozen dataclass
# or a class whose status can only be one value fits.


class CatalogueTool(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> dict[str, Any]: ...


class CatalogueGroup(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def status(self) -> GroupStatus: ...
    @property
    def error(self) -> str | None:
        """Why an `unavailable` group is (None otherwise)."""
        ...

    @property
    def requires_approval(self) -> bool: ...
    @property
    def tools(self) -> Sequence[CatalogueTool]: ...


@dataclass(frozen=True, slots=True)
class Pinned:
    """A group with its tools as they were when pinned; the rest is read from the live group."""

    live: CatalogueGroup
    tools: tuple[CatalogueTool, ...]
    read_while_starting: bool = False
    """The tools were read before the server had started (none yet): a turn that activates the
    group must read them again, even when the live group has started since."""

    @classmethod
    def of(cls, group: CatalogueGroup) -> Pinned:
        live = group.live if isinstance(group, Pinned) else group
        return cls(live, tuple(live.tools), live.status == "starting")

    @property
    def name(self) -> str:
        return self.live.name

    @property
    def description(self) -> str:
        return self.live.description

    @property
    def status(self) -> GroupStatus:
        return self.live.status

    @property
    def requires_approval(self) -> bool:
        return self.live.requires_approval

    @property
    def error(self) -> str | None:
        return self.live.error

    @property
    def per_user(self) -> bool:
        return per_user(self.live)


def per_user(group: CatalogueGroup) -> bool:
    """Whether each user connects the group with their own account (an `auth: oauth` server)."""
    return bool(getattr(group, "per_user", False))


@dataclass(frozen=True, slots=True)
class Entry:
    """A group as the catalogue lists it: `kind` is `builtin` or `mcp`."""

    kind: Literal["builtin", "mcp"]
    group: CatalogueGroup


@dataclass
class Catalogue:
    entries: list[Entry] = field(default_factory=list)
    wait_started: Callable[[str], Awaitable[None]] | None = None
    """Waits until a group that is `starting` has started or failed (its start-up time at most)."""
    ready_for: Callable[[str, uuid.UUID], Awaitable[str | None]] | None = None
    """(group, user) -> None when the group serves the user now, else why not: a group each
    user connects with their own account, which this user has not."""

    def pinned(self) -> Catalogue:
        """This catalogue with every MCP group's tools as they are now, for one turn (a built-in
        group's tools never change)."""
        return Catalogue(
            [Entry(e.kind, Pinned.of(e.group)) if e.kind == "mcp" else e for e in self.entries],
            self.wait_started,
            self.ready_for,
        )

    async def pinned_once_started(self, names: set[str]) -> Catalogue:
        """`pinned`, once those of the groups `names` that are still starting have started or
        failed: a chat's active groups, whose tools its first request already declares."""
        if self.wait_started is not None:
            for entry in self.entries:
                if entry.group.name in names and entry.group.status == "starting":
                    await self.wait_started(entry.group.name)
        return self.pinned()

    async def started(self, name: str) -> Entry | None:
        """The group `name` once its server has started (or failed, or its start-up time ran
        out), with the tools it has then if it was pinned before its server started: a pin read
        while starting holds none, even when the live group has started since."""
        entry = self.find(name)
        if entry is None:
            return None
        if entry.group.status == "starting" and self.wait_started is not None:
            await self.wait_started(name)
        if isinstance(entry.group, Pinned) and entry.group.read_while_starting:
            self.repin(name)
            entry = self.find(name) or entry
        return entry

    def repin(self, name: str) -> None:
        """Take the group `name`'s tools as they are now (a group that has just started)."""
        self.entries = [
            Entry(e.kind, Pinned.of(e.group)) if e.group.name == name else e for e in self.entries
        ]

    def find(self, name: str) -> Entry | None:
        return next((e for e in self.entries if e.group.name == name), None)

    def tool_owner(self, tool_name: str) -> Entry | None:
        for entry in self.entries:
            if any(tool.name == tool_name for tool in entry.group.tools):
                return entry
        return None

    def system_table(self) -> str:
        """The fixed catalogue text of the system prompt ('' when there is nothing to activate)."""
        if not self.entries:
            return ""
        rows = "\n".join(
            f"| {entry.group.name} | {' '.join(entry.group.description.split())} |"
            for entry in self.entries
        )
        return (
            "More tools are available in groups. To use a group, call `activate_tools` with "
            'its name, for example `activate_tools({"groups": ["<group>"]})`; its tools can be '
            "called from then on in this chat.\n\n"
            "| Group | Description |\n| --- | --- |\n" + rows
        )
