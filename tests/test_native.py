"""crewbridge.native: the tools-only MCP server crew's native channels answer (claude's SDK MCP
server, the server gemini reaches over ACP), over a small fake channel."""
from __future__ import annotations

from crewbridge.native import McpTools, result_text, tool_content
from crewbridge.registry import Tool, ToolResult


class Channel:
    def __init__(self):
        self.calls = []

    def tools(self):
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        return [Tool("read_file", "Read a file.\nMore.", schema, lambda ctx, path: path, read_only=True)]

    def call(self, name, arguments):
        self.calls.append((name, arguments))
        return ToolResult(True, data={"content": "hi"}) if name == "read_file" else ToolResult(False, error="no tool")

    def permit(self, tool, arguments, read_only):
        return None


def ask(server, method, params=None, rid=1):
    return server.answer({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})


def test_it_initializes_in_the_clients_protocol_version_and_lists_the_channels_tools():
    server = McpTools(Channel())
    init = ask(server, "initialize", {"protocolVersion": "2025-03-26"})["result"]
    assert init["protocolVersion"] == "2025-03-26" and init["serverInfo"]["name"] == "crew"
    [listed] = ask(server, "tools/list")["result"]["tools"]
    assert listed["name"] == "read_file" and listed["annotations"] == {"readOnlyHint": True}
    assert listed["inputSchema"]["properties"] == {"path": {"type": "string"}}


def test_a_call_goes_to_the_channel_and_its_result_comes_back_as_text():
    channel = Channel()
    server = McpTools(channel)
    answer = ask(server, "tools/call", {"name": "read_file", "arguments": {"path": "a"}}, rid=7)
    assert answer["id"] == 7 and answer["result"]["isError"] is False
    assert answer["result"]["content"] == [{"type": "text", "text": '{\n "content": "hi"\n}'}]
    failed = ask(server, "tools/call", {"name": "nope"})["result"]
    assert failed == {"content": [{"type": "text", "text": "no tool"}], "isError": True}
    assert channel.calls == [("read_file", {"path": "a"}), ("nope", {})]


def test_notifications_get_no_answer_and_other_methods_an_error():
    server = McpTools(Channel())
    assert server.answer({"jsonrpc": "2.0", "method": "notifications/initialized"}) is None
    assert ask(server, "resources/list")["error"]["code"] == -32601
    assert ask(server, "tools/call", {"arguments": {}})["error"]["code"] == -32602


def test_a_result_reads_as_its_text_or_its_error_and_says_when_it_was_cut():
    assert result_text(ToolResult(True, data="plain")) == "plain"
    assert result_text(ToolResult(True, data="abc", truncated=True)) == "abc\n(the output was truncated)"
    assert tool_content(ToolResult(False, error="bad"))["isError"] is True
