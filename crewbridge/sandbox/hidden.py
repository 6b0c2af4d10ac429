"""What the sandbox hides of the user's files: where keys, tokens, passwords and browser profiles are
kept, crew's own state, and every CLI's login files but the running CLI's own.

Inside the sandbox these places are empty (bubblewrap: an empty, read-only folder or file over
them), unreadable (Landlock: reading is granted everywhere else) or denied (sandbox-exec). The list
is written against the process's environment: HOME and the XDG_* variables move the places, so do
SSH_AUTH_SOCK and XDG_RUNTIME_DIR. crew.yaml adds to it (`sandbox: hide: [...]`) and takes places off
it (`show: [...]`, trusted files only). What the process must still read beneath a hidden place (its
working directory in crew's state folder, its worktree's git folders, its CLI's own login file in
~/.config/gcloud, a file its command line names) stays readable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crewbridge.base.places import expand, state_dir
from crewbridge.sandbox.state import State

CONFIG = "${XDG_CONFIG_HOME:-~/.config}"
DATA = "${XDG_DATA_HOME:-~/.local/share}"
RUNTIME = "$XDG_RUNTIME_DIR"
MAC_APPS = "~/Library/Application Support"

# Keys, tokens and logins of the tools people use: ssh, gpg, clouds, clusters, registries, forges.
CREDENTIALS = (
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.yarnrc.yml",
    "~/.pypirc",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.vault-token",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    *(
        f"{CONFIG}/{name}"
        for name in ("gcloud", "gh", "hub", "glab-cli", "git/credentials", "containers/auth.json", "rclone", "doctl")
    ),
)
# Password stores, keyrings, and the agents that sign or decrypt for the user (their sockets).
KEYRINGS = (
    "~/.password-store",
    "~/Library/Keychains",
    *(f"{DATA}/{name}" for name in ("keyrings", "kwalletd", "gopass")),
    *(f"{CONFIG}/{name}" for name in ("keepassxc", "KeePass", "Bitwarden", "Bitwarden CLI", "1Password", "op")),
    *(f"{RUNTIME}/{name}" for name in ("keyring", "gnupg", "gcr")),
    "$SSH_AUTH_SOCK",
)
# Browser profiles: cookies, history (a sign-in link crew printed), saved passwords.
BROWSERS = (
    *(
        f"{CONFIG}/{name}"
        for name in (
            "chromium",
            "google-chrome",
            "google-chrome-beta",
            "google-chrome-unstable",
            "BraveSoftware",
            "microsoft-edge",
            "vivaldi",
            "opera",
        )
    ),
    "~/.mozilla",
    *(f"~/snap/{name}" for name in ("chromium", "firefox", "brave")),
    *(
        f"~/.var/app/{name}"
        for name in ("org.chromium.Chromium", "com.google.Chrome", "com.brave.Browser", "org.mozilla.firefox")
    ),
    *(f"{MAC_APPS}/{name}" for name in ("Google/Chrome", "Chromium", "BraveSoftware", "Firefox")),
    "~/Library/Cookies",
)
# Sockets through which a process acts as root or as the user elsewhere: container engines.
ENGINES = ("/run/docker.sock", "/var/run/docker.sock", f"{RUNTIME}/docker.sock", f"{RUNTIME}/podman", "/run/podman")
LISTED = (*CREDENTIALS, *KEYRINGS, *BROWSERS, *ENGINES)
_XDG = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")


@dataclass(frozen=True)
class Hidden:
    """The places hidden from one process (existing, links resolved, none beneath another), and
    what beneath them it still reads."""

    places: tuple[Path, ...] = ()
    shown: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Hiding:
    """What the sandbox hides: LISTED, crew's own state folder, every CLI's login files (from
    `logins`, each CLI's State for an environment) and crew.yaml's `hide`, less its `show`."""

    hide: tuple[str, ...] = ()
    show: tuple[str, ...] = ()
    logins: tuple[Callable[[Mapping[str, str]], State], ...] = ()

    def listed(self, env: Mapping[str, str]) -> list[Path]:
        """Every place on the list for a process run with `env` (there or not), `show` left out."""
        env = _plain(env)
        places = [*_expanded((*LISTED, *self.hide), env), state_dir(env)]
        places += [path for state in self.logins for path in state(env).login]
        shown = [Path(os.path.abspath(path)) for path in _expanded(self.show, env)]
        return [path for path in dict.fromkeys(places) if not any(_within(path, show) for show in shown)]

    def places(self, env: Mapping[str, str], own: Iterable[Path] = (), visible: Iterable[Path] = ()) -> Hidden:
        """The places to hide from a process run with `env`: those of the list that exist here,
        but its `own` login files. What of `own`, `visible` (its working directory, its git
        folders, the files its command line names) and `show` lies beneath one stays readable."""
        mine = {os.path.realpath(path) for path in own}
        here = [path for path in map(str, self.listed(env)) if os.path.lexists(path)]
        found = {real for path in here if (real := os.path.realpath(path)) not in mine}
        places: list[str] = []
        for path in sorted(found, key=lambda path: path.split("/")):  # what is beneath a place follows it
            if not places or not _beneath(path, places[-1]):
                places.append(path)
        kept = {*mine, *(os.path.realpath(path) for path in (*visible, *_expanded(self.show, _plain(env))))}
        shown = sorted(path for path in kept if any(path == place or _beneath(path, place) for place in places))
        return Hidden(tuple(Path(p) for p in places if p not in shown), tuple(map(Path, shown)))


NOTHING = Hidden()  # what a process is hidden when nothing is to be
LISTED_ONLY = Hiding()  # the list alone: no crew.yaml, no CLI's login files


def _plain(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with a relative XDG_* variable left out: the XDG spec ignores such a value."""
    return {name: value for name, value in env.items() if name not in _XDG or os.path.isabs(value)}


def _expanded(entries: Sequence[str], env: Mapping[str, str]) -> list[Path]:
    return [path for path in (expand(entry, env) for entry in entries) if path is not None]


def _within(path: Path, folder: Path) -> bool:
    """`path` is `folder` or beneath it."""
    return path == folder or _beneath(str(path), str(folder))


def _beneath(path: str, folder: str) -> bool:
    """`path` is strictly beneath `folder` (both absolute, normalised)."""
    return path.startswith(folder.rstrip("/") + "/") and path != folder
