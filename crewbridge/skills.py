"""Skills: folders holding a SKILL.md (YAML front matter with `name` and `description`; the body is
the instructions) and whatever files sit beside it. The catalogue lists their names and
descriptions; the model reads one with crew:skill only once it has chosen it. The format is Claude
Code's, so existing skill folders work as they are.

Where they are found, the first folder to hold a name winning (project over user):
1. ./.crew/skills/ and ./.claude/skills/ in the working directory;
2. the folders crew.yaml names under `skills:` (relative to crew.yaml);
3. ~/.config/crewbridge/skills/ ($XDG_CONFIG_HOME respected).
Each skill is a folder of its own: <root>/<folder>/SKILL.md.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from crewbridge.errors import CrewError
from crewbridge.globs import matches
from crewbridge.places import xdg

SKILL_FILE = "SKILL.md"
SKILL_TOOL = "skill"  # the built-in tool that reads one (offered only to an agent that has skills)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_DESCRIPTION = 1024  # characters, as Claude Code allows
MAX_FILES = 200  # files listed beside a skill


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path  # resolved: what crew:read_file may read from, and nothing else outside the work tree
    source: str  # where it was found: project, claude, config, user

    @property
    def file(self) -> Path:
        return self.folder / SKILL_FILE


@dataclass(frozen=True)
class Problem:
    """A SKILL.md crew could not use: the file, the line (1-based) and what is wrong."""

    file: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass
class Found:
    skills: dict[str, Skill] = field(default_factory=dict)  # by name, in precedence order
    problems: list[Problem] = field(default_factory=list)
    shadowed: list[Skill] = field(default_factory=list)  # a name an earlier folder already gave


def roots(
    workdir: Path, configured: Iterable[Path] = (), env: Mapping[str, str] | None = None
) -> list[tuple[str, Path]]:
    """The folders skills are looked for in, in precedence order, with their source."""
    user = Path(xdg("XDG_CONFIG_HOME", ".config", env), "crewbridge", "skills")
    return [
        ("project", workdir / ".crew" / "skills"),
        ("claude", workdir / ".claude" / "skills"),
        *(("config", path) for path in configured),
        ("user", user),
    ]


def discover(places: Iterable[tuple[str, Path]]) -> Found:
    """Every skill under `places` (each a folder of skill folders); broken ones as problems."""
    found = Found()
    for source, root in places:
        try:
            folders = sorted(entry for entry in root.iterdir() if entry.is_dir())
        except OSError:
            continue  # no such folder: nothing from it
        for folder in folders:
            if not (folder / SKILL_FILE).is_file():
                continue
            read = parse(folder / SKILL_FILE, source)
            if isinstance(read, Problem):
                found.problems.append(read)
            elif read.name in found.skills:
                found.shadowed.append(read)
            else:
                found.skills[read.name] = read
    return found


def parse(file: Path, source: str = "project") -> Skill | Problem:
    """A SKILL.md's front matter, checked."""
    import yaml  # for start-up speed: only when a skill is there to read

    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Problem(file, 1, f"cannot be read ({exc}); make it a UTF-8 text file")
    split = front_matter(text)
    if split is None:
        return Problem(
            file, 1, "no front matter; start the file with a '---' line, 'name:' and 'description:', and '---'"
        )
    head = split[0]
    try:
        data = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1  # +1 for the opening ---, +1 for 1-based
        return Problem(file, line, f"front matter is not valid YAML ({getattr(exc, 'problem', None) or exc})")
    if not isinstance(data, dict):
        return Problem(file, 2, "front matter must be a mapping with 'name' and 'description'")
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return Problem(file, _line_of(head, "name"), "'name' must be letters, digits, '-', '_' or '.' (at most 64)")
    if not isinstance(description, str) or not description.strip():
        return Problem(file, _line_of(head, "description"), "'description' must be a non-empty line of text")
    if len(description) > MAX_DESCRIPTION:
        return Problem(
            file, _line_of(head, "description"), f"'description' is longer than {MAX_DESCRIPTION} characters"
        )
    return Skill(name, " ".join(description.split()), file.parent.resolve(), source)


def front_matter(text: str) -> tuple[str, str] | None:
    """(the YAML between a first line '---' and the next '---' line, the text after it), or None."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None
    for index, line in enumerate(lines[1:], 1):
        if line.strip() == "---":
            return "\n".join(lines[1:index]), "\n".join(lines[index + 1 :])
    return None


def body(skill: Skill) -> str:
    """The instructions: SKILL.md after its front matter."""
    split = front_matter(skill.file.read_text(encoding="utf-8"))
    return split[1].strip() if split is not None else ""


def files(skill: Skill) -> list[str]:
    """The files beside SKILL.md, as absolute paths (crew:read_file reads them), at most MAX_FILES."""
    listed: list[str] = []
    for top, dirs, names in os.walk(skill.folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(top, name)
            if path != skill.file and not name.startswith("."):
                listed.append(str(path))
                if len(listed) >= MAX_FILES:
                    return listed
    return listed


def chosen(skills: Mapping[str, Skill], *lists: list[str] | None) -> dict[str, Skill]:
    """The skills an agent gets: those whose name matches a glob of each list (one per configuration
    file); a list that is None lets every skill through, [] none."""
    return {
        name: skill for name, skill in skills.items() if all(globs is None or matches(name, globs) for globs in lists)
    }


def unknown(name: str, skills: Mapping[str, Skill]) -> CrewError:
    """The error for a skill name that is not there, with the nearest names."""
    near = difflib.get_close_matches(name, list(skills), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(near)}?" if near else f"available: {', '.join(sorted(skills)) or 'none'}"
    return CrewError(f"no skill '{name}'; {hint}")


def _line_of(head: str, key: str) -> int:
    for index, line in enumerate(head.splitlines()):
        if line.startswith(f"{key}:"):
            return index + 2
    return 2
