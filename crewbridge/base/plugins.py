"""Entry points of installed packages, found without importing importlib.metadata when none
declares the group: that import costs ~30 ms of CPU (email, zipfile, csv …), more than everything
`crew query` does after its CLI starts, and almost no one has a crew plugin installed."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

INFO_SUFFIXES = (".dist-info", ".egg-info")


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points the packages on sys.path declare in `group`, as importlib.metadata gives them."""
    if not declared(group):
        return []
    from importlib import metadata

    return list(metadata.entry_points(group=group))


def declared(group: str, path: list[str] | None = None) -> bool:
    """Whether some package on `path` (sys.path) may declare entry points in `group`: its name is in
    an entry_points.txt, or a path entry is an archive this quick look does not open."""
    for entry in sys.path if path is None else path:
        try:
            names = os.listdir(entry or ".")
        except NotADirectoryError:
            return True  # a zip or an egg: importlib.metadata looks inside
        except OSError:
            continue  # missing or unreadable: importlib.metadata finds nothing there either
        for name in names:
            if name.endswith(INFO_SUFFIXES):
                try:
                    with open(
                        os.path.join(entry or ".", name, "entry_points.txt"), encoding="utf-8", errors="replace"
                    ) as file:
                        if group in file.read():
                            return True
                except OSError:
                    continue
    return False
