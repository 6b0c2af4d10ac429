"""help: describes crew and the tools of the registry the call came through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from crewbridge.tools import builtin_registry
from crewbridge.tools.files import READ_SCHEMA
from crewbridge.tools.meta import crew_help

from crewbridge.toolkit.registry import ToolContext, ToolFailure, ToolRegistry


def help_call(registry: ToolRegistry, tmp_path: Path, **data: Any) -> dict[str, Any]:
    return registry.call(registry.qualified("help"), data, ToolContext(tmp_path)).to_dict()


def test_overview_explains_the_protocol_and_lists_every_tool(tmp_path: Path) -> None:
    data = help_call(builtin_registry(), tmp_path)["data"]
    assert '"type": "tool_use", "name": "crew:<tool>"' in data["about"]
    assert 'crew:help with {"topic": "<tool>"}' in data["about"]
    assert list(data["tools"]) == [
        "crew:read_file",
        "crew:write_file",
        "crew:edit_file",
        "crew:list_files",
        "crew:grep",
        "crew:run_command",
        "crew:help",
        "crew:skill",
    ]
    assert data["tools"]["crew:read_file"].startswith("Read a text file")


def test_topic_gives_a_tools_description_and_schema_by_any_name(tmp_path: Path) -> None:
    registry = builtin_registry()
    for topic in ("read_file", "crew:read_file", "  read_file "):
        data = help_call(registry, tmp_path, topic=topic)["data"]
        assert data["name"] == "crew:read_file" and data["read_only"] is True
        assert data["input_schema"] == READ_SCHEMA
        assert "next_offset" in data["description"]  # the full docstring, not only its summary


def test_unknown_topic_suggests_the_nearest_tool(tmp_path: Path) -> None:
    envelope = help_call(builtin_registry(), tmp_path, topic="reed_file")
    assert envelope["success"] is False
    assert envelope["error"] == "unknown tool 'reed_file'; did you mean 'crew:read_file'?"


def test_help_follows_the_prefix(tmp_path: Path) -> None:
    data = help_call(builtin_registry("tools"), tmp_path)["data"]
    assert "tools:help" in data["about"] and "crew:" not in data["about"]
    assert "tools:grep" in data["tools"]


def test_help_describes_only_the_tools_offered(tmp_path: Path) -> None:
    offered = builtin_registry().subset(lambda spec: spec.read_only)
    data = help_call(offered, tmp_path)["data"]
    assert list(data["tools"]) == ["crew:read_file", "crew:list_files", "crew:grep", "crew:help", "crew:skill"]
    refused = help_call(offered, tmp_path, topic="write_file")
    assert refused["error"].startswith("unknown tool 'write_file'")


def test_called_without_a_registry_it_says_so(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match="no tool registry"):
        crew_help(ToolContext(tmp_path))
