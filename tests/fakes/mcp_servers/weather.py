"""A well-behaved server with two tools and fixed answers.

Over stdio by default; `--http PORT` serves streamable HTTP at `http://127.0.0.1:PORT/mcp`, and
`--http PORT NAME=VALUE` answers 401 to any request without that header, as a server behind a
token does.
"""

from __future__ import annotations

import sys
from typing import Any

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


def requiring(app: Any, name: str, value: str) -> Any:
    """`app`, answering 401 to an HTTP request whose header `name` is not `value`."""
    wanted = (name.lower().encode(), value.encode())

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and wanted not in scope["headers"]:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing credentials"})
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        port = int(sys.argv[2])
        if len(sys.argv) > 3:
            import uvicorn

            name, _, value = sys.argv[3].partition("=")
            app = requiring(server.streamable_http_app(host="127.0.0.1"), name, value)
            uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
        else:
            server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()
