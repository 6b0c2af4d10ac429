"""The protocols every face and live conversation shares (layer 2): JSON-RPC, the MCP core, the
hardened HTTP server and MCP's HTTP transport."""
