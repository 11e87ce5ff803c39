"""MCP servers as tool groups: their config file and their running connections."""
