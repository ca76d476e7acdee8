"""The Model Context Protocol (official `mcp` SDK): MCP servers as tool sources (`client`)."""
