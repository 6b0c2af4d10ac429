"""crewbridge.toolkit.native: how a tool's result reads on a native channel (the MCP server the channels
answer is crewbridge.protocol.mcp.McpTools, tested in test_protocol_mcp.py)."""

from __future__ import annotations

from crewbridge.toolkit.native import result_text
from crewbridge.toolkit.registry import ToolResult


def test_a_result_reads_as_its_text_or_its_error_and_says_when_it_was_cut():
    assert result_text(ToolResult(True, data="plain")) == "plain"
    assert result_text(ToolResult(True, data="abc", truncated=True)) == "abc\n(the output was truncated)"
    assert result_text(ToolResult(True, data={"a": 1})) == '{\n "a": 1\n}'
    assert result_text(ToolResult(False, error="bad")) == "bad"
