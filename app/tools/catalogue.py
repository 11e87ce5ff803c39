"""The tool catalogue: every group of tools a user may activate, and how the model learns of it.

A group is an MCP server (named as in `config/mcp.yaml`) or a built-in group. The catalogue is
fixed for the life of the process (each server's tools are read once at start-up), and the
system prompt lists every group in one table that never changes with activations, so the cached
prompt prefix survives them (docs/wire.md §1).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

GroupStatus = Literal["starting", "available", "unavailable"]


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
class Entry:
    """A group as the catalogue lists it: `kind` is `builtin` or `mcp`."""

    kind: Literal["builtin", "mcp"]
    group: CatalogueGroup


@dataclass
class Catalogue:
    entries: list[Entry] = field(default_factory=list)
    wait_started: Callable[[str], Awaitable[None]] | None = None
    """Waits until a group that is `starting` has started or failed (its start-up time at most)."""

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
