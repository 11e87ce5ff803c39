"""A test catalogue of tool groups, served by an in-process group call that records each call.

`weather` answers, `mail` fails mid-call as a dead server would, `down` never started.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from app.services import Services
from app.tools.catalogue import Catalogue, Entry
from app.tools.groups import GroupToolError


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any] = field(
        default_factory=lambda: {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }
    )


@dataclass
class Group:
    name: str
    description: str
    tools: tuple[Tool, ...]
    status: str = "available"
    requires_approval: bool = False
    error: str | None = None


WEATHER = Group(
    "weather",
    "Forecasts and alerts",
    (
        Tool("mcp__weather__forecast", "[weather] Forecast for a city"),
        Tool("mcp__weather__alerts", "[weather] Weather alerts"),
    ),
)
MAIL = Group("mail", "Read and send mail", (Tool("mcp__mail__send", "[mail] Send mail"),))
DOWN = Group("down", "A server that did not start", (), status="unavailable")


@pytest.fixture
def catalogue(services: Services) -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    calls: list[tuple[str, str, dict[str, Any]]] = []

    async def call(group: str, tool: str, arguments: dict[str, Any], **_: Any) -> Any:
        calls.append((group, tool, arguments))
        if tool == "mcp__mail__send":
            raise GroupToolError("the mail server died mid-call")
        return f"Sunny in {arguments['city']}"

    original = services.catalogue, services.group_call
    services.catalogue = Catalogue([Entry("mcp", WEATHER), Entry("mcp", MAIL), Entry("mcp", DOWN)])
    services.group_call = call
    yield calls
    services.catalogue, services.group_call = original
