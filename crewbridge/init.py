"""`crew init`: write a commented starter crew.yaml that loads as it is."""

from __future__ import annotations

import os
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
    path = target / CONFIG_NAMES[0] if target.is_dir() else target
    if not path.parent.is_dir():
        raise UsageError(f"{path.parent} is not a directory; create it first or give another path")
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give a file name, e.g. {path / CONFIG_NAMES[0]}")
    others = [path.with_name(name) for name in CONFIG_NAMES if name != path.name and path.name in CONFIG_NAMES]
    clash = next((other for other in others if other.exists()), None)
    if clash is not None:
        raise UsageError(f"{clash} exists already and crew would find both files; edit it, or remove it first")
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
