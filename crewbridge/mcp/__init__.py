"""crew as an MCP server: the protocol (server), its transports (stdio, http) and registering it in
a CLI (install). Nothing is imported here: `crew mcp` loads only the modules it uses."""
