"""`reasonlog mcp`: the archive offered to agents through the Model Context Protocol (docs/mcp.md)."""
