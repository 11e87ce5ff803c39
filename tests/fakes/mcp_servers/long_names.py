"""A server whose tool names are long enough that their exposed names must be cut."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("long_names")

LONG_A = "summarize_the_quarterly_financial_report_for_the_board_meeting_agenda"
LONG_B = "summarize_the_quarterly_financial_report_for_the_board_meeting_minutes"


@server.tool(name=LONG_A)
def long_a() -> str:
    """A tool with a very long name."""
    return "agenda"


@server.tool(name=LONG_B)
def long_b() -> str:
    """Another tool whose long name shares a long prefix with the first."""
    return "minutes"


@server.tool()
def short() -> str:
    """A tool with a short name."""
    return "short"


if __name__ == "__main__":
    server.run()
