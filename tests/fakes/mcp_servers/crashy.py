"""A server that dies in the middle of a call, as a crashing tool process would.

With `CRASHY_START_ONCE=<path>` it starts only while that file does not exist, and creates it:
every later start fails at once, until the file is removed.
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("crashy")


@server.tool()
def explode() -> str:
    """Kill this server process before answering."""
    os._exit(1)


@server.tool()
def ok() -> str:
    """Answer, along with this process's id (so a restart shows)."""
    return f"ok from {os.getpid()}"


@server.tool()
def fail(reason: str) -> str:
    """Raise an error inside the tool; the server itself stays up."""
    raise ToolError(f"failed on purpose: {reason}")


if __name__ == "__main__":
    marker = os.environ.get("CRASHY_START_ONCE")
    if marker:
        if os.path.exists(marker):
            sys.exit("crashy: refusing to start again")
        open(marker, "w").close()
    server.run()
