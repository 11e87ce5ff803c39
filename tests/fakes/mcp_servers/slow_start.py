"""A server that takes `SLOW_START_SECONDS` (default 2) to start serving, then has one tool."""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("slow_start")


@server.tool()
def ping() -> str:
    """Answer "pong"."""
    return "pong"


@server.tool()
async def sleep(seconds: float) -> str:
    """Wait `seconds` before answering, to run past a caller's time limit."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


async def main() -> None:
    await asyncio.sleep(float(os.environ.get("SLOW_START_SECONDS", "2")))
    await server.run_stdio_async()


if __name__ == "__main__":
    asyncio.run(main())
