"""Skills: folders holding a SKILL.md (YAML front matter with `name` and `description`; the body is
the instructions) and whatever files sit beside it. The catalogue lists their names and
descriptions; the model reads one with crew:skill only once it has chosen it. The format is Claude
Code's, so existing skill folders work as they are.

Where they are found, the first folder to hold a name winning (project over user):
1. ./.crew/skills/ and ./.claude/skills/ in the working directory;
2. the folders crew.yaml names under `skills:` (relative to crew.yaml);
3. ~/.config/crewbridge/skills/ ($XDG_CONFIG_HOME respected).
Each skill is a folder of its own: <root>/<folder>/SKILL.md. A skill folder inside the working
directory must resolve inside it (one that leads out through a symlink is refused, as any link
is); SKILL.md and the files beside it are read beneath their folder (crewbridge.system.beneath).
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from crewbridge.base.globs import matches
from crewbridge.base.places import xdg
from crewbridge.errors import CrewError
from crewbridge.system import beneath

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


def discover(places: Iterable[tuple[str, Path]], workdir: Path | None = None) -> Found:
    """Every skill under `places` (each a folder of skill folders); broken ones as problems. A
    skill folder inside `workdir` is opened beneath it: one that leads out is a problem."""
    found = Found()
    for source, root in places:
        inside = workdir is not None and Path(os.path.abspath(root)).is_relative_to(os.path.abspath(workdir))
        try:
            folders = sorted(entry for entry in root.iterdir() if entry.is_dir())
        except OSError:
            continue  # no such folder: nothing from it
        for folder in folders:
            if not (folder / SKILL_FILE).is_file():  # by name, only to pass over other folders
                continue
            read = parse(folder / SKILL_FILE, source, workdir if inside else None)
            if isinstance(read, Problem):
                found.problems.append(read)
            elif read.name in found.skills:
                found.shadowed.append(read)
            else:
                found.skills[read.name] = read
    return found


def parse(file: Path, source: str = "project", workdir: Path | None = None) -> Skill | Problem:
    """A SKILL.md's front matter, checked. The file is read beneath its folder, and the folder
    opened beneath `workdir` when given: a symlink that leads out of either is refused."""
    import yaml  # for start-up speed: only when a skill is there to read

    try:
        with _opened(file.parent, workdir) as folder:
            text = _instructions(folder)
            real = Path(os.fsdecode(beneath.fd_path(folder) or os.fsencode(os.path.realpath(file.parent))))
    except beneath.Outside:
        where = f"the working directory {workdir}" if workdir else "the skill's folder"
        return Problem(file, 1, f"leads outside {where} through a symlink; a skill is read only from inside it")
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
    return Skill(name, " ".join(description.split()), real, source)


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
    with _opened_real(skill) as folder:
        split = front_matter(_instructions(folder))
    return split[1].strip() if split is not None else ""


def files(skill: Skill) -> list[str]:
    """The files beside SKILL.md, as absolute paths (crew:read_file reads them), at most MAX_FILES;
    hidden ones left out, symlinked folders not entered."""
    listed: list[str] = []
    with _opened_real(skill) as folder:
        for below, entry, _ in beneath.tree(folder, lambda entry: not entry.name.startswith("."), bool):
            if below != SKILL_FILE and not entry.is_dir(follow_symlinks=False):
                listed.append(f"{skill.folder}/{beneath.printable(below)}")
                if len(listed) >= MAX_FILES:
                    break
    return listed


@contextmanager
def _opened(folder: Path, workdir: Path | None) -> Iterator[int]:
    """A skill's folder, open: beneath `workdir` when given, else by its path."""
    if workdir is None:
        fd = os.open(folder, beneath.FOLDER)
    else:
        root = os.open(workdir, beneath.FOLDER)
        try:
            rel, real = os.path.relpath(folder, workdir), os.path.realpath(workdir)
            fd = beneath.open_beneath(root, os.fsencode(rel), beneath.FOLDER, inside=os.fsencode(real))
        finally:
            os.close(root)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def _opened_real(skill: Skill) -> Iterator[int]:
    """A skill's folder, found before (a real path): a symlink swapped in since is refused."""
    fd = beneath.open_real(os.fsencode(skill.folder), beneath.FOLDER)
    try:
        yield fd
    finally:
        os.close(fd)


def _instructions(folder: int) -> str:
    """SKILL.md in the open folder, opened beneath it, as text."""
    inside = beneath.fd_path(folder)
    fd = beneath.open_beneath(folder, SKILL_FILE.encode(), os.O_RDONLY | os.O_NONBLOCK, inside=inside)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(f"{SKILL_FILE} is not a regular file")
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as handle:
            return handle.read().decode("utf-8")
    finally:
        os.close(fd)


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
