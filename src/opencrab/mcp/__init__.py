"""The Model Context Protocol: OpenCrab as an MCP server (`opencrab.mcp.server`)."""
