"""A well-behaved server with two tools and fixed answers.

Over stdio by default; `--http PORT` serves streamable HTTP at `http://127.0.0.1:PORT/mcp`.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("weather")


@server.tool()
def forecast(city: str, days: int = 1) -> str:
    """Forecast the weather in a city for the next few days."""
    lines = [f"{city} day {day}: sunny, {18 + day} C" for day in range(1, days + 1)]
    return "\n".join(lines)


@server.tool()
def alerts(region: str) -> str:
    """Weather alerts in force for a region."""
    return f"No alerts for {region}."


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
