"""Small stdio MCP servers for tests, each runnable as `python -m tests.fakes.mcp_servers.<name>`.

They are written with the MCP SDK's own server (`MCPServer`, called FastMCP before mcp 2) so the
client side is exercised against the real protocol, not a mock of it. Every answer is
deterministic.
"""
