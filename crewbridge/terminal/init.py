"""`crew init`: write a commented starter crew.yaml that loads as it is."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path

from crewbridge.config import CONFIG_NAMES, config_dir
from crewbridge.errors import UsageError

STARTER = "starter.yaml"


def starter_text() -> str:
    return files("crewbridge").joinpath(STARTER).read_text(encoding="utf-8")


def user_file() -> Path:
    """Your own crew.yaml (used where no project has one); its directory is made if need be."""
    path = config_dir() / CONFIG_NAMES[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def write_starter(target: Path, *, force: bool = False) -> Path:
    """Write the starter to `target` (a directory gets crew.yaml in it) and return the file's path.
    An existing file is replaced only with `force`; a directory that has the other config name
    (crew.yaml and .crew.yaml) is refused, since crew would not know which of the two to use."""
    path = target_file(target)
    text = starter_text()
    if not force:
        try:
            with open(path, "x", encoding="utf-8") as file:  # exclusive: never replaces a file
                file.write(text)
        except FileExistsError:
            raise UsageError(f"{path} exists already; edit it, or pass --force to replace it") from None
        return path
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)  # whole or not at all
    return path


def target_file(target: Path) -> Path:
    """The crew.yaml that `target` names (a directory: crew.yaml in it), checked as writable there."""
    path = target / CONFIG_NAMES[0] if target.is_dir() else target
    if not path.parent.is_dir():
        raise UsageError(f"{path.parent} is not a directory; create it first or give another path")
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give a file name, e.g. {path / CONFIG_NAMES[0]}")
    others = [path.with_name(name) for name in CONFIG_NAMES if name != path.name and path.name in CONFIG_NAMES]
    clash = next((other for other in others if other.exists()), None)
    if clash is not None:
        raise UsageError(f"{clash} exists already and crew would find both files; edit it, or remove it first")
    return path


# --- recipes: the agent and provider entries for a known CLI ------------------------------------

RECIPES = "recipes"
SECTIONS = ("agents", "providers")


def recipe_names() -> list[str]:
    """The CLIs `crew init --agent` knows (crewbridge/recipes/NAME.yaml)."""
    folder = files("crewbridge").joinpath(RECIPES)
    return sorted(item.name.removesuffix(".yaml") for item in folder.iterdir() if item.name.endswith(".yaml"))


def recipe_text(name: str) -> str:
    """The recipe for CLI `name`, as it is written (commented YAML with agents: and providers:)."""
    if name not in recipe_names():
        raise UsageError(f"no recipe for '{name}'; known: {', '.join(recipe_names())} (docs/recipes.md)")
    return files("crewbridge").joinpath(RECIPES, f"{name}.yaml").read_text(encoding="utf-8")


def add_recipes(target: Path, names: Sequence[str], *, force: bool = False) -> Path:
    """Add each recipe in `names` to the crew.yaml `target` names (with `force`, to a new starter
    that replaces it); an unknown name fails before anything is written."""
    for name in names:
        recipe_text(name)
    if force:
        write_starter(target, force=True)
    for name in names:
        add_recipe(target, name)
    return target_file(target)


def add_recipe(target: Path, name: str) -> Path:
    """Add the commented agent and provider entries of recipe `name` to the crew.yaml `target` names
    (made from the starter if there is none), each under its section; the rest of the file is kept
    as it is. An agent or provider of that name already there is refused."""
    from crewbridge.config import read_config

    path = target_file(target)
    if path.exists():
        config = read_config(path)  # the file's own errors, named with its own lines
        if name in config.agents or name in config.providers:
            raise UsageError(f"{path} has an agent or provider '{name}' already; edit it, or remove it first")
        text = path.read_text(encoding="utf-8")
    else:
        text = starter_text()
    header, sections = _split(recipe_text(name))
    sections["agents"] = "".join(f"  {line}" for line in header.splitlines(keepends=True)) + sections["agents"]
    for key in SECTIONS:
        text = _insert(text, key, sections[key], path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    try:
        read_config(temporary)  # what crew will read
        temporary.replace(path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def _split(recipe: str) -> tuple[str, dict[str, str]]:
    """A recipe's leading comment, and the indented lines under each of its sections."""
    header: list[str] = []
    sections: dict[str, list[str]] = {key: [] for key in SECTIONS}
    current: list[str] | None = None
    for line in recipe.splitlines(keepends=True):
        if line.rstrip() in (f"{key}:" for key in SECTIONS):
            current = sections[line.rstrip()[:-1]]
        elif current is None:
            header.append(line)
        else:
            current.append(line)
    return "".join(header), {key: "".join(lines) for key, lines in sections.items()}


def _insert(text: str, key: str, entries: str, path: Path) -> str:
    """`entries` (indented lines) added at the end of the block section `key:` of `text`, or in a
    new section at its end."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.split("#")[0].rstrip() == f"{key}:"), None)
    if start is None:
        if any(line.startswith(f"{key}:") for line in lines):
            raise UsageError(
                f"{path}: {key}: is written inline ({{…}}); write it as an indented block, "
                "then run crew init --agent again"
            )
        return text.rstrip("\n") + f"\n\n{key}:\n{entries.rstrip()}\n"
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    return "".join([*lines[:end], "\n" if end > start + 1 else "", entries.rstrip() + "\n", *lines[end:]])
