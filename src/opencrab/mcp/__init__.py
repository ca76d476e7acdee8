"""The Model Context Protocol (official `mcp` SDK): MCP servers as tool sources
(`opencrab.mcp.client`) and OpenCrab as an MCP server (`opencrab.mcp.server`)."""
