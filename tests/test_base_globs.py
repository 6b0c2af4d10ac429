"""Tool-name globs: a tool matches when any pattern does, with or without the pattern's prefix."""

from __future__ import annotations

import pytest

from crewbridge.base.globs import matches, matches_native


@pytest.mark.parametrize(
    "patterns, expected",
    [
        (["read_file"], True),
        (["read_*"], True),
        (["crew:read_*"], True),  # the prefix the model sees is allowed in a pattern, and ignored
        (["other:read_file"], True),
        (["write_*", "grep"], False),
        (["Read_file"], False),  # case matters, on every platform
        ([], False),
    ],
)
def test_a_tool_name_matches_any_of_the_globs(patterns, expected):
    assert matches("read_file", patterns) is expected


def test_native_globs_name_the_clis_own_tools_only():
    assert matches_native("Bash", ["native:Bash"]) and matches_native("run_shell_command", ["native:run_*"])
    assert not matches_native("Bash", ["Bash", "*"])  # a glob without native: is on crew's tools
    assert not matches("read_file", ["native:read_file", "native:*"])  # gemini's read_file is not crew's
