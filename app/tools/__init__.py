"""Tools the model can call: built-in file tools, activation of tool groups, MCP, knowledge."""
