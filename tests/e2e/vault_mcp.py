"""An MCP server on stdio, on the official Python SDK, for an editor to give `crew acp`
(tests/e2e/test_acp_real.py): its one tool tells the code its environment holds (VAULT_CODE)."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("vault")


@server.tool()
def launch_code() -> str:
    """The launch code kept in the vault."""
    return "the vault says " + os.environ.get("VAULT_CODE", "nothing")


if __name__ == "__main__":
    server.run()
