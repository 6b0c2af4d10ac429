"""Trust in project files: which crew.yaml a person has read, with the scripts it runs, kept where
only this user can read or change it.

A crew.yaml found by the directory search may come from a repository just cloned. crew uses such a
file to run commands, or to loosen a rule, only once a person has trusted it (`crew config trust`).
Trust belongs to the path as used: a crew.yaml that is a link is trusted through the link (its
target's trust does not carry over), and the link must still lead where it led. What is trusted is
the file's content and the content of every file it names by a relative path in a command
(`./hook.sh`, `scripts/x.py` as the program or as an argument, `hooks.py:audit`): an edit to any of
them needs trust again.

The store, $XDG_STATE_HOME/crewbridge/trusted.json, is created 0600 in a 0700 folder. One that others
can read (an older crew made it 0644) is made private; one that another user owns or that others can
write is refused, since its entries may not be the user's.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base import jsonio
from crewbridge.base.places import state_dir
from crewbridge.errors import ConfigError

if TYPE_CHECKING:
    from crewbridge.base.config_layers import Keys

STORE = "trusted.json"
_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})  # the word after one is written, not run
_OPERATORS = frozenset("();<>|&")


@dataclass
class Fingerprint:
    """What trusting a file vouches for: the file as used, where it leads, its content and the
    content of the scripts it names."""

    used: Path  # the path crew found the file by: its folder resolved, its own name kept
    target: Path  # the file it leads to (itself unless it is a link)
    sha256: str
    scripts: dict[str, str] = field(default_factory=dict)  # real path → sha256
    named: dict[str, tuple[str, Keys]] = field(default_factory=dict, repr=False)  # real path → (as written, key)

    def record(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "target": str(self.target), "scripts": self.scripts}


def used_path(path: Path) -> Path:
    """`path` as crew uses it: its folder resolved, its last part kept (a link stays the link)."""
    absolute = Path(os.path.abspath(path))
    return Path(os.path.realpath(absolute.parent)) / absolute.name


def fingerprint(path: Path, raw: bytes, data: dict[str, Any]) -> Fingerprint:
    """The fingerprint of the crew.yaml at `path` whose bytes are `raw` and whose settings are `data`."""
    import hashlib  # for start-up speed: it loads OpenSSL, and most runs check no trust

    target = path.resolve()
    out = Fingerprint(used_path(path), target, hashlib.sha256(raw).hexdigest())
    for keys, word in script_words(data):
        script = target.parent / word
        try:
            if not stat.S_ISREG(os.stat(script).st_mode):
                continue
            real = str(script.resolve())
            if real not in out.scripts:
                out.scripts[real] = digest(script)
                out.named[real] = (word, keys)
        except OSError:
            continue  # not there (a name on PATH, an option): nothing to vouch for
    return out


def digest(path: Path) -> str:
    """The sha256 of a file's content, in hex."""
    import hashlib  # for start-up speed (see above)

    hasher = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()


def script_words(data: dict[str, Any]) -> Iterator[tuple[Keys, str]]:
    """Every relative word a crew.yaml runs or passes to what it runs (the places a script can be
    named), with its key path. Words with placeholders, absolute paths and redirection targets are
    left out."""
    words: list[tuple[Keys, str]] = []

    def argv(keys: Keys, items: list[str]) -> None:
        words.extend(((*keys, i), word) for i, word in enumerate(items))

    for name, tool in data.get("tools", {}).items():
        argv(("tools", name, "command"), tool["command"])
    for event, hooks in data.get("hooks", {}).items():
        for i, hook in enumerate(hooks):
            keys = ("hooks", event, i)
            if "command" in hook:
                argv((*keys, "command"), hook["command"])
            elif "shell" in hook:
                words.extend(((*keys, "shell"), word) for word in shell_words(hook["shell"]))
            elif hook["python"].rpartition(":")[0].endswith(".py"):
                words.append(((*keys, "python"), hook["python"].rpartition(":")[0]))
    for name, provider in data.get("providers", {}).items():
        for key in ("command", "model_args", "system_args", "resume"):
            argv(("providers", name, key), provider.get(key, []))
        for mode, items in provider.get("options", {}).items():
            argv(("providers", name, "options", mode), items)
    for agent_id, agent in data.get("agents", {}).items():
        for mode, items in agent.get("options", {}).items():
            argv(("agents", agent_id, "options", mode), items)
    check = data.get("check")
    commands = check.get("run") if isinstance(check, dict) else check
    place: Keys = ("check", "run") if isinstance(check, dict) else ("check",)
    for i, line in enumerate([commands] if isinstance(commands, str) else commands or []):
        words.extend(((*place, i), word) for word in shell_words(line))
    for keys, word in words:
        if word and "{" not in word and not os.path.isabs(word):
            yield keys, word


def shell_words(line: str) -> list[str]:
    """The words of a shell line that are run or passed on (not operators, not redirection targets)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []  # unbalanced quotes: /bin/sh refuses the line too
    return [
        word
        for i, word in enumerate(tokens)
        if not set(word) <= _OPERATORS and (i == 0 or tokens[i - 1] not in _REDIRECTS)
    ]


def refusal(found: Fingerprint, env: dict[str, str] | None = None) -> tuple[Keys, str] | None:
    """Why the file is not trusted as it is now, or None when it is: the key path the reason is about
    (() for the whole file) and the reason, worded to follow "this project file"."""
    entry = read_store(env).get(str(found.used))
    if not isinstance(entry, dict):
        return (), "is not trusted yet"
    if entry.get("target") != str(found.target):
        return (), f"leads to {found.target} now, not to {entry.get('target')} as when it was trusted"
    if entry.get("sha256") != found.sha256:
        return (), "changed since it was trusted"
    scripts = entry.get("scripts")
    was: dict[str, Any] = scripts if isinstance(scripts, dict) else {}
    for real, digest in found.scripts.items():
        if was.get(real) != digest:
            word, keys = found.named[real]
            word = word if found.target.parent == found.used.parent else real  # a link: name the file run
            return keys, f"runs {word}, which {'changed' if real in was else 'is new'} since it was trusted"
    gone = next((real for real in was if real not in found.scripts), None)
    if gone is not None:
        return (), f"ran {gone}, which is gone since it was trusted"
    return None


def trust(found: Fingerprint, env: dict[str, str] | None = None) -> None:
    """Remember that a person vouches for the file as `found` describes it."""
    known = {path: entry for path, entry in read_store(env).items() if isinstance(entry, dict)}  # not an older crew's
    known[str(found.used)] = found.record()
    write_store(known, env)


# --- the store ---------------------------------------------------------------------------------------


def store_path(env: dict[str, str] | None = None) -> Path:
    return state_dir(env) / STORE


def read_store(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The trusted files by path; {} when there is no store or it is not a JSON object. A store
    others could have written is refused (ConfigError); one others can read is made private."""
    path = store_path(env)
    if not path.parent.exists():
        return {}
    _private(path.parent, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the trust store: {exc.strerror or exc}; remove it and trust again"
        ) from None
    with os.fdopen(fd, "rb") as file:
        _private(path, 0o600, fd=file.fileno())
        raw = file.read()
    try:
        value = jsonio.loads(raw)
    except ValueError:
        return {}  # a damaged store trusts nothing; `crew config trust` writes a new one
    return value if isinstance(value, dict) else {}


def write_store(known: dict[str, Any], env: dict[str, str] | None = None) -> None:
    """Replace the store with `known`: written to a new 0600 file, then renamed over it."""
    import json

    path = store_path(env)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _private(path.parent, 0o700)
    temporary = path.with_name(f".{STORE}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(json.dumps(known, indent=1, sort_keys=True))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _private(path: Path, mode: int, fd: int | None = None) -> None:
    """Make `path` (the folder 0700, the store 0600) readable by this user alone. Refuse one that
    another user owns, and a store that others may write: its entries may not be this user's."""
    info = os.fstat(fd) if fd is not None else os.stat(path)
    what = "file" if fd is not None else "folder"
    if info.st_uid != os.getuid():
        raise ConfigError(
            f"{path}: the trust store's {what} belongs to another user (uid {info.st_uid}), so crew does not "
            "rely on it; remove it (you will trust project files again), or set XDG_STATE_HOME to a folder of yours"
        )
    if fd is not None and info.st_mode & 0o022:
        raise ConfigError(
            f"{path}: the trust store is writable by others (mode {stat.S_IMODE(info.st_mode):04o}), so crew "
            f"does not rely on it; check its entries, then run chmod 600 {path}"
        )
    if info.st_mode & 0o077:
        if fd is not None:
            os.fchmod(fd, mode)
        else:
            os.chmod(path, mode)
