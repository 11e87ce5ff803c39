"""A server whose tool list changes while it runs, and says so (`tools/list_changed`)."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing")


def shout(text: str) -> str:
    """Answer `text` in capitals."""
    return text.upper()


@server.tool()
async def learn(ctx: Context) -> str:
    """Add the tool `shout`, and tell the client the list changed: on its `subscriptions/listen`
    stream (2026-07-28), and as a notification on the session (what older clients hear)."""
    server.add_tool(shout)
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "learned to shout"


if __name__ == "__main__":
    server.run("stdio")
