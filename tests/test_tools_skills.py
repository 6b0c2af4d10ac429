"""crew:skill, and reading a skill's files: inside its folder only, read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from crewbridge.tools import builtin_registry

from crewbridge.base.skills import Skill, parse
from crewbridge.toolkit.registry import ToolContext

REGISTRY = builtin_registry()


@pytest.fixture
def skill(tmp_path: Path) -> Skill:
    folder = tmp_path / "skills" / "release-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Writes release notes.\n---\n"
        "Use the template in template.md. Sign with: the crew.\n"
    )
    (folder / "template.md").write_text("## What changed\n")
    (tmp_path / "work").mkdir()
    (tmp_path / "secret.txt").write_text("not for the model\n")
    found = parse(folder / "SKILL.md")
    assert isinstance(found, Skill)
    return found


def call(tmp_path: Path, skill: Skill, tool: str, **data: Any) -> dict[str, Any]:
    ctx = ToolContext(tmp_path / "work", skills={skill.name: skill})
    return REGISTRY.call(f"crew:{tool}", data, ctx).to_dict()


def test_the_skill_tool_gives_the_instructions_and_the_files_beside_them(tmp_path: Path, skill: Skill) -> None:
    out = call(tmp_path, skill, "skill", name="release-notes")
    assert out["success"], out["error"]
    assert out["data"] == {
        "name": "release-notes",
        "instructions": "Use the template in template.md. Sign with: the crew.",
        "files": [str(skill.folder / "template.md")],
    }


def test_an_unknown_skill_is_an_error_naming_the_nearest(tmp_path: Path, skill: Skill) -> None:
    out = call(tmp_path, skill, "skill", name="release-note")
    assert (out["success"], out["error"]) == (False, "no skill 'release-note'; did you mean release-notes?")


def test_read_file_reads_a_skills_file_by_its_path_and_nothing_else_outside(tmp_path: Path, skill: Skill) -> None:
    inside = call(tmp_path, skill, "read_file", path=str(skill.folder / "template.md"))
    assert inside["data"]["content"] == "## What changed\n"
    assert inside["data"]["path"] == str(skill.folder / "template.md")
    assert call(tmp_path, skill, "list_files", path=str(skill.folder))["data"]["entries"] == [
        str(skill.folder / "SKILL.md"),
        str(skill.folder / "template.md"),
    ]
    outside = call(tmp_path, skill, "read_file", path=str(tmp_path / "secret.txt"))
    assert not outside["success"] and "outside the working directory" in outside["error"]


def test_a_link_in_a_skill_folder_does_not_lead_out_of_it(tmp_path: Path, skill: Skill) -> None:
    (skill.folder / "escape.txt").symlink_to(tmp_path / "secret.txt")
    out = call(tmp_path, skill, "read_file", path=str(skill.folder / "escape.txt"))
    assert not out["success"] and "not for the model" not in str(out)


def test_no_write_tool_reaches_a_skill_folder(tmp_path: Path, skill: Skill) -> None:
    out = call(tmp_path, skill, "write_file", path=str(skill.folder / "template.md"), content="changed")
    assert not out["success"] and "outside the working directory" in out["error"]
    out = call(
        tmp_path, skill, "edit_file", path=str(skill.folder / "template.md"), old_string="What", new_string="Who"
    )
    assert not out["success"]
    assert (skill.folder / "template.md").read_text() == "## What changed\n"


def test_a_skill_folder_swapped_for_a_symlink_after_it_was_found_is_refused(tmp_path: Path, skill: Skill) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "SKILL.md").write_text("---\nname: x\ndescription: x\n---\nnot the skill\n")
    (tmp_path / "elsewhere" / "template.md").write_text("not the skill's\n")
    skill.folder.rename(tmp_path / "moved")
    skill.folder.symlink_to(tmp_path / "elsewhere")
    out = call(tmp_path, skill, "skill", name="release-notes")
    assert not out["success"] and "cannot be read now" in out["error"]
    out = call(tmp_path, skill, "read_file", path=str(skill.folder / "template.md"))
    assert not out["success"] and "now leads through a symlink" in out["error"]
