"""kb for coding agents: an MCP server (kb/agent/mcp_server.py) whose tools answer what the CLI
answers, from the same library functions."""
