"""One skill folder guides the real claude, gemini and codex through crew, against the mock model
server: the catalogue lists the skill, only crew:skill delivers its instructions, and read_file
reads the file beside it, outside the working directory."""

from __future__ import annotations

import json

import pytest

from crewcli import tool_block

pytestmark = pytest.mark.e2e

INSTRUCTIONS = "Sign every release note with the words: shipped by crew 4711."


def test_a_skills_instructions_reach_the_model_only_through_crew_skill(cli, crew, mock_server, workdir):
    folder = workdir / ".crew" / "skills" / "release-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Writes release notes for a version from the changes.\n---\n"
        f"{INSTRUCTIONS}\nStart from template.md beside this file.\n"
    )
    (folder / "template.md").write_text("## Release 9.9.9-template\n")
    template = str(folder.resolve() / "template.md")
    mock_server.script(
        "```json\n"
        + json.dumps({"type": "tool_use", "name": "crew:skill", "input": {"name": "release-notes"}})
        + "\n```\n",
        tool_block("crew:read_file", path=template),
        "## Release 1.2\nFaster start.\nshipped by crew 4711.",
    )
    done = crew(cli, "query", f"@{cli} write the release notes for 1.2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("shipped by crew 4711.\n")
    first, second, third = mock_server.requests
    assert "release-notes: Writes release notes for a version from the changes." in first.text()
    assert INSTRUCTIONS not in first.text()  # listed, not read up front
    assert INSTRUCTIONS in second.text() and template in second.text()
    assert "9.9.9-template" in third.text()
