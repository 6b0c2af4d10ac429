"""Scripts a crew.yaml names, pinned when it is loaded: a hook or a command tool runs the bytes that
were there then (the bytes trust vouched for, for a project file), never what a command of the run
wrote over them since.

At load (`Pins.read`) each relative word of a hook's or a command tool's command that names a file
(`./hook.sh`, `scripts/check.py` as an argument, a Python hook's `hooks.py`) is hashed, with its
file's identity and change time. When it runs (`Pins.path`), the file is checked again (read again
only when its change time moved: no write leaves that as it was), and a changed file is refused
(ScriptChanged); an unchanged one runs from crew's private copy, made on first use from the file and
checked against the same hash, in a 0700 folder of crew's temp that no sandboxed process can write
(bubblewrap gives them a /tmp of their own; under Landlock /tmp is read-only to them). So a file
swapped between the check and the start runs nothing of the swap.

The copy keeps its name and its place under the configuration's folder (links resolved: a
`node_modules/.bin` script is copied where its package has it), and every other entry of the folders
on the way is a link to the original, so `$(dirname "$0")/lib.sh`, `../lib`, a Python script's
imports of its neighbours and a Node script's packages are found as before; only `..` above the
configuration's folder does not lead back. What those other files hold is not pinned (it never was
trusted either). A `shell:` hook's words are checked before it runs, not copied: crew does not
rewrite a shell line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crewbridge.errors import CrewError
from crewbridge.system.trust import digest


class ScriptChanged(CrewError):
    """A script the configuration names changed since it was loaded; it was not run."""


@dataclass(frozen=True)
class _Pin:
    path: Path  # the file, as the word names it from the configuration's folder
    sha256: str
    seen: tuple[int, int, int, int]  # device, inode, size, change time when it was hashed


@dataclass
class Pins:
    """The scripts one hook or command tool names, by the word that names them."""

    pins: dict[str, _Pin] = field(default_factory=dict)
    base: Path | None = None  # the configuration's folder, which the words start at
    _copies: dict[str, Path] = field(default_factory=dict, repr=False)
    _folder: Path | None = field(default=None, repr=False)

    @classmethod
    def read(cls, words: Iterable[str], base: Path) -> Pins:
        """The files among `words` (relative ones, without placeholders, from `base`) as they are now."""
        out = cls(base=base)
        for word in words:
            if not word or "{" in word or os.path.isabs(word) or word in out.pins:
                continue
            path = base / word
            with contextlib.suppress(OSError):
                info = os.stat(path)
                if stat.S_ISREG(info.st_mode):
                    out.pins[word] = _Pin(path, digest(path), _seen(info))
        return out

    def path(self, word: str) -> str:
        """What to run for `word`: crew's private copy of the pinned file it names (`word` itself
        when it names none). ScriptChanged when the file changed since it was pinned."""
        pin = self.pins.get(word)
        if pin is None:
            return word
        self._check(word, pin)
        copy = self._copies.get(word)
        if copy is None:
            copy = self._copies[word] = self._copy(word, pin)
        return str(copy)

    def check(self) -> None:
        """Every pinned file as it was (for what runs them without a copy: a shell line)."""
        for word, pin in self.pins.items():
            self._check(word, pin)

    def _check(self, word: str, pin: _Pin) -> None:
        try:
            info = os.stat(pin.path)
            same = _seen(info) == pin.seen or digest(pin.path) == pin.sha256
        except OSError:
            same = False
        if not same:
            raise ScriptChanged(
                f"{word} changed since crew.yaml was loaded (a command of this run may have written it), so crew "
                "does not run it; look at it, then run crew again (a project's crew.yaml needs `crew config trust` "
                "again)"
            )

    def _copy(self, word: str, pin: _Pin) -> Path:
        """The pinned file copied into a folder of its own in crew's private one, where it lies as
        it lies in the configuration's folder (links resolved), every other entry of each folder on
        the way a link to the original: `../lib`, a neighbour, a package beside it are found as the
        file found them. The copy is checked against the pin (the file may change while it is copied)."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="crew-scripts-"))  # 0700
            weakref.finalize(self, shutil.rmtree, self._folder, True)
        real = pin.path.resolve()
        top = (self.base or real.parent).resolve()
        if not real.is_relative_to(top):
            top = real.parent
        root = self._folder / str(len(self._copies))
        copy = root / real.relative_to(top)
        copy.parent.mkdir(parents=True)
        shutil.copyfile(real, copy)
        if digest(copy) != pin.sha256:
            raise ScriptChanged(f"{word} changed while crew copied it to run it, so crew does not run it; look at it")
        os.chmod(copy, 0o700 if os.access(real, os.X_OK) else 0o600)
        for level in [top, *reversed(real.parents[: len(real.relative_to(top).parts) - 1])]:
            here = root / level.relative_to(top)
            with contextlib.suppress(OSError), os.scandir(level) as entries:
                for entry in entries:
                    if not os.path.lexists(here / entry.name):  # the folders on the way are made, not linked
                        os.symlink(entry.path, here / entry.name)
        return copy


def _seen(info: os.stat_result) -> tuple[int, int, int, int]:
    return info.st_dev, info.st_ino, info.st_size, info.st_ctime_ns
