"""Skills: where SKILL.md folders are found, which wins a name, what a broken front matter says, what
an agent gets, and the catalogue's skills section."""

from __future__ import annotations

from pathlib import Path

import pytest
from crewbridge.tools import builtin_registry

from crewbridge.base.skills import Problem, Skill, body, chosen, discover, files, parse, roots, unknown
from crewbridge.toolkit.catalogue import SKILLS_TOKENS, offered_tools, render_catalogue, skills_section, tokens


def write_skill(
    root: Path,
    folder: str,
    text: str | None = None,
    *,
    name: str | None = None,
    description: str = "Writes release notes from the git log.",
) -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        text if text is not None else f"---\nname: {name or folder}\ndescription: {description}\n---\n# Steps\nDo it.\n"
    )
    return path


def test_skills_are_found_in_the_project_claude_configured_and_user_folders(tmp_path: Path) -> None:
    work, extra, config_home = tmp_path / "work", tmp_path / "extra", tmp_path / "xdg"
    write_skill(work / ".crew" / "skills", "notes")
    write_skill(work / ".claude" / "skills", "review")
    write_skill(extra, "deploy")
    write_skill(config_home / "crewbridge" / "skills", "style")
    found = discover(roots(work, [extra], {"XDG_CONFIG_HOME": str(config_home)}))
    assert [(s.name, s.source) for s in found.skills.values()] == [
        ("notes", "project"),
        ("review", "claude"),
        ("deploy", "config"),
        ("style", "user"),
    ]
    assert found.problems == [] and found.shadowed == []


def test_the_project_wins_a_name_over_the_user_and_the_hidden_one_is_kept_to_report(tmp_path: Path) -> None:
    work, config_home = tmp_path / "work", tmp_path / "xdg"
    mine = write_skill(work / ".crew" / "skills", "notes", description="The project's way.")
    write_skill(config_home / "crewbridge" / "skills", "notes", description="The user's way.")
    found = discover(roots(work, [], {"XDG_CONFIG_HOME": str(config_home)}))
    assert found.skills["notes"].description == "The project's way."
    assert found.skills["notes"].folder == mine.parent.resolve()
    assert [s.description for s in found.shadowed] == ["The user's way."]


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("# no front matter\n", 1, "no front matter"),
        ("---\nname: x\ndescription: [unclosed\n---\n", 3, "not valid YAML"),
        ("---\n- a list\n---\n", 2, "must be a mapping"),
        ("---\ndescription: d\nname: has space\n---\n", 3, "'name' must be letters"),
        ("---\nname: ok\n---\nbody\n", 2, "'description' must be a non-empty line"),
        ("---\nname: ok\ndescription: " + "x" * 1100 + "\n---\n", 3, "longer than 1024"),
    ],
)
def test_a_broken_front_matter_is_a_problem_with_its_file_and_line(
    tmp_path: Path, text: str, line: int, fragment: str
) -> None:
    path = write_skill(tmp_path, "broken", text)
    problem = parse(path)
    assert isinstance(problem, Problem)
    assert (problem.file, problem.line) == (path, line) and fragment in problem.message
    assert discover([("project", tmp_path)]).problems == [problem]  # reported, never silently dropped


def test_instructions_are_the_body_and_the_files_beside_them_are_listed(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "notes")
    (path.parent / "template.md").write_text("## Release\n")
    (path.parent / "examples").mkdir()
    (path.parent / "examples" / "v1.md").write_text("v1\n")
    skill = parse(path)
    assert isinstance(skill, Skill)
    assert body(skill) == "# Steps\nDo it."
    folder = path.parent.resolve()
    assert files(skill) == [str(folder / "template.md"), str(folder / "examples" / "v1.md")]  # top level first


def test_an_agent_gets_every_skill_none_or_those_its_globs_name(tmp_path: Path) -> None:
    for name in ("notes", "review", "deploy-prod"):
        write_skill(tmp_path, name)
    found = discover([("project", tmp_path)]).skills
    assert list(chosen(found, None)) == ["deploy-prod", "notes", "review"]
    assert chosen(found, []) == {}
    assert list(chosen(found, ["deploy-*", "notes"])) == ["deploy-prod", "notes"]


def test_an_unknown_name_suggests_the_nearest() -> None:
    skills = {"release-notes": Skill("release-notes", "d", Path("/x"), "project")}
    assert str(unknown("release-note", skills)) == "no skill 'release-note'; did you mean release-notes?"
    assert str(unknown("zzz", {})) == "no skill 'zzz'; available: none"


# -- the catalogue --------------------------------------------------------------------------------


def skills_of(count: int, description: str) -> list[Skill]:
    return [Skill(f"skill-{n:02d}", description, Path(f"/s/{n}"), "project") for n in range(count)]


def test_the_catalogue_lists_names_and_descriptions_and_the_rule_to_read_one_only_once_chosen() -> None:
    registry = builtin_registry()
    text = render_catalogue(registry, "query", skills=skills_of(2, "Writes release notes."))
    section = text.split("[crew skills]", 1)[1]
    assert "- skill-00: Writes release notes.\n- skill-01: Writes release notes." in section
    assert 'crew:skill {"name": "<skill>"}' in section
    assert "Never read more than one skill up front" in section


def test_without_skills_there_is_no_section_and_no_skill_tool() -> None:
    registry = offered_tools(builtin_registry(), {})
    assert "skill" not in registry
    assert "[crew skills]" not in render_catalogue(registry, "query")


def test_fifty_skills_fit_the_token_budget_and_keep_every_name() -> None:
    many = skills_of(50, "Guides the model through a long and detailed procedure for one kind of task, " * 4)
    section = skills_section(builtin_registry(), many)
    assert tokens(section) <= SKILLS_TOKENS
    assert all(f"- {skill.name}: " in section for skill in many)


def test_a_project_skill_folder_that_leads_outside_is_a_problem_not_a_skill(tmp_path: Path) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    write_skill(elsewhere, "private", description="Someone else's.")
    (work / ".crew" / "skills").mkdir(parents=True)
    (work / ".crew" / "skills" / "private").symlink_to(elsewhere / "private")
    write_skill(work / "shared", "kept")
    (work / ".claude" / "skills").mkdir(parents=True)
    (work / ".claude" / "skills" / "kept").symlink_to("../../shared/kept")  # a link that stays inside
    found = discover(roots(work, [], {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}), work)
    assert list(found.skills) == ["kept"]
    [problem] = found.problems
    assert problem.file == work / ".crew" / "skills" / "private" / "SKILL.md"
    assert problem.message.startswith(f"leads outside the working directory {work} through a symlink")


def test_a_skill_md_that_leads_out_of_its_folder_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "secret.md").write_text("---\nname: leak\ndescription: Not the skill's.\n---\n")
    (tmp_path / "skills" / "leak").mkdir(parents=True)
    (tmp_path / "skills" / "leak" / "SKILL.md").symlink_to(tmp_path / "secret.md")
    problem = parse(tmp_path / "skills" / "leak" / "SKILL.md")
    assert isinstance(problem, Problem) and "leads outside the skill's folder" in problem.message
