"""`crew acp`: crew as an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains,
Neovim, Emacs, acpx), built on the official Python SDK (`agent-client-protocol`).

- crewbridge.acp.early: the answer to `initialize` before the SDK and the engine load
- crewbridge.acp.wire: stdio as the SDK's transport (a malformed frame gets a JSON-RPC error), and
  the courier that sends a run's updates and requests in order from the threads that make them
- crewbridge.acp.updates: the run's record as ACP `session/update`s
- crewbridge.acp.editor: the editor as an approval channel and as the file tools' files
- crewbridge.acp.session: one ACP session: its choices, its runs, its history
- crewbridge.acp.agent: the SDK's `acp.Agent` that serves them
- crewbridge.acp.check: `crew acp check -- COMMAND…`, a conformance check of any ACP agent
"""
