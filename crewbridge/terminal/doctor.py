"""`crew doctor`: is the configuration valid, is each provider's CLI installed, which version, and does
it accept every option crew passes it. Each finding is one line that says what to do about it.

No model is ever asked: a CLI is run only with --version and --help (its own and its subcommands'),
and a CLI described in crew.yaml with `probe: false` is only looked for (a program that would do more
with them). The runs happen in parallel, each in its own process group ended when it finishes or
overruns.

A CLI that is not installed is a failure when an agent in crew.yaml uses it, or when it is named on
the command line (`crew doctor claude`); otherwise it is a warning, as most people use only some.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from crewbridge.base.extras import EXTRAS
from crewbridge.base.skills import discover, roots
from crewbridge.config import Config, default_agents, load_config
from crewbridge.conversations import live_enabled
from crewbridge.errors import CrewError, CrewTimeout, UsageError
from crewbridge.mcp.install import registered
from crewbridge.providers import BUILTIN, load, load_plugin, plugins
from crewbridge.providers.base import Provider, Turn
from crewbridge.sandbox import INSTALL, Detection, Mechanism, Sandboxing, State, detect, spawn
from crewbridge.sandbox.allowlist import AllowList
from crewbridge.sandbox.proxy import Upstream
from crewbridge.system.childenv import withheld_names
from crewbridge.toolkit.custom_tools import Finished, run_argv

if TYPE_CHECKING:
    from crewbridge.system.process import Child

OK, WARN, FAIL = "ok", "warn", "FAIL"
PROBE_TIMEOUT = 60.0  # seconds one --help or --version may take (gemini needs ~10 s on a busy machine)
HELP_LIMIT = 1 << 20  # characters of help text kept
_OPTION_IN_HELP = re.compile(r"(?<![\w-])--?[A-Za-z0-9][\w-]*")
_OPTION_IN_ARGV = re.compile(r"(--?[A-Za-z][\w-]*)(?:=.*)?", re.S)


@dataclass(frozen=True)
class Check:
    """One finding: `status` ok, warn or FAIL; what it is about; what was found and what to do."""

    status: str
    subject: str
    message: str

    def line(self, width: int = 10) -> str:
        return f"{self.status:<4}  {self.subject:<{width}}  {self.message}"


def option_of(token: str) -> str | None:
    """The option an argv item is (`--model=x` → `--model`), or None for a value or `-`."""
    match = _OPTION_IN_ARGV.fullmatch(token)
    return match.group(1) if match else None


def options_in_help(text: str) -> set[str]:
    """Every option a --help text mentions (`-p, --print`, `--append-system-prompt[-file]`, …)."""
    return set(_OPTION_IN_HELP.findall(text))


def help_argv(argv: list[str]) -> list[str]:
    """The command that prints the help of `argv`'s (sub)command: the program, the words before
    the first option (`codex exec …` → `codex exec --help`), then --help."""
    words = []
    for token in argv[1:]:
        if token.startswith("-"):
            break
        words.append(token)
    return [argv[0], *words, "--help"]


class Prober:
    """Runs each distinct probe command once, all of them at the same time. Closing it ends the
    process groups of the runs still going (Ctrl-C must not wait for a slow CLI)."""

    def __init__(self, env: Mapping[str, str], cwd: Path, timeout: float) -> None:
        self.env = dict(env)
        self.cwd = cwd
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="crew-doctor")
        self._runs: dict[tuple[str, ...], Future[Finished]] = {}
        self._children: list[Child] = []
        self._lock = threading.Lock()
        self._closed = False

    def start(self, argv: list[str], env: Mapping[str, str]) -> Future[Finished]:
        key = tuple(argv)
        if key not in self._runs:
            self._runs[key] = self._pool.submit(self._run, argv, {**self.env, **env})
        return self._runs[key]

    def _run(self, argv: list[str], env: dict[str, str]) -> Finished:
        try:
            return run_argv(argv, cwd=self.cwd, timeout=self.timeout, env=env, limit=HELP_LIMIT, started=self._started)
        except CrewTimeout:
            raise CrewTimeout(f"no answer within {self.timeout:g}s") from None

    def _started(self, child: Child) -> None:
        with self._lock:
            self._children.append(child)
            closed = self._closed
        if closed:
            _end(child)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            children = list(self._children)
        for child in children:
            _end(child)
        self._pool.shutdown(wait=True, cancel_futures=True)


def _end(child: Child) -> None:
    """End a probe's process group while its leader runs (once it is reaped, the id may be reused)."""
    if child.proc.poll() is None:
        try:
            os.killpg(child.pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@dataclass
class _Subject:
    """A provider to check, and what was started for it."""

    name: str
    provider: Provider | None = None
    error: str | None = None  # it could not even be loaded
    origin: str = ""  # "" built in, "crew.yaml", or "plugin from <package>"
    path: str | None = None  # the CLI, found on PATH
    version: Future[Finished] | None = None
    helps: dict[tuple[str, ...], Future[Finished]] = field(default_factory=dict)  # help argv → run
    wanted: dict[tuple[str, ...], list[str]] = field(default_factory=dict)  # help argv → options crew uses


def diagnose(
    config_path: Path | None = None,
    cwd: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    only: Sequence[str] = (),
    timeout: float = PROBE_TIMEOUT,
) -> Iterator[Check]:
    """The findings, in order: the configuration, the tools, each provider, each agent's options.
    They are yielded as they are known, so a slow CLI does not hold back the lines before it."""
    env = dict(os.environ if env is None else env)
    cwd = Path(cwd or Path.cwd())
    config, checks = _configuration(config_path, cwd)
    subjects = _subjects(config, only)  # a name that is not a provider is an error before any line
    yield from checks
    yield from _programs(config, env)
    yield from _extras()
    yield from _skills(config, cwd, env)
    yield _mcp(env, cwd)
    yield _native(config, env)
    try:
        found: Detection | CrewError = detect(env, every=True)
    except CrewError as exc:
        found = exc
    yield _sandbox(config, found)
    yield _hidden(config, env)
    yield _withheld(config, env)
    yield from _network(config, env, cwd, found)
    prober = Prober(env, cwd, timeout)
    try:
        for subject in subjects:
            _start(subject, prober, env)
        needed = _needed(config, only)
        for subject in subjects:
            yield from _provider_checks(subject, subject.name in needed, config)
            if subject.provider is not None and subject.name in config.providers:
                yield Check(OK, subject.name, _state_line(subject.provider.state(env)))
    finally:
        prober.close()


def _extras() -> Iterator[Check]:
    """Each optional extra: installed (its version), or what needs it and the pip command."""
    for extra in EXTRAS.values():
        version = extra.installed()
        if version is None:
            yield Check(WARN, "extras", f"{extra.name}: not installed; {extra.needed_by} need it: {extra.install()}")
        else:
            yield Check(OK, "extras", f"{extra.name}: {extra.package} {version} ({extra.needed_by})")


def _mcp(env: Mapping[str, str], cwd: Path) -> Check:
    where = registered(env, cwd)
    if not where:
        return Check(OK, "mcp", "crew is registered in no CLI (`crew mcp install claude|gemini|codex` does it)")
    return Check(OK, "mcp", "crew is registered in " + ", ".join(f"{cli} ({path})" for cli, path in where.items()))


def _sandbox(config: Config, found: Detection | CrewError) -> Check:
    """Which sandbox mechanism the CLIs and commands get here, and why not the others."""
    if isinstance(found, CrewError):
        return Check(FAIL, "sandbox", str(found))
    if found.mechanism is not None:
        return Check(OK, "sandbox", f"{found.mechanism.name} ({found.mechanism.detail}); {found.reasons()}")
    wanted = {config.sandbox, *(agent.sandbox for agent in config.agents.values() if agent.sandbox)}
    if wanted == {"off"}:
        return Check(OK, "sandbox", f"off in {config.shown}; none would work here ({found.reasons()})")
    status = FAIL if "required" in wanted else WARN
    return Check(status, "sandbox", f"none works here ({found.reasons()}): CLIs and commands run unconfined; {INSTALL}")


def _hidden(config: Config, env: Mapping[str, str]) -> Check:
    """What the sandbox hides from the CLIs and commands here (docs/sandbox.md), and what of its
    list this machine does not have."""
    home = env.get("HOME", "")
    listed = config.hiding.listed(env)
    here = [path for path in listed if os.path.lexists(path)]
    shown = ", ".join(_home_relative(path, home) for path in here) or "nothing of its list is here"
    text = f"hidden from the agents' CLIs and commands: {shown}; each CLI still reads its own login"
    if config.show:
        text += f"; shown by crew.yaml: {', '.join(config.show)}"
    absent = len(listed) - len(here)
    return Check(OK, "hidden", f"{text} ({absent} more places on its list are not here: docs/sandbox.md lists them)")


def _withheld(config: Config, env: Mapping[str, str]) -> Check:
    """The variables of this environment that no CLI or command crew starts gets (names only), and
    those each agent's CLI gets all the same (its logins, crew.yaml's env.pass)."""
    withheld = withheld_names(env, config.env_pass)
    if not withheld:
        return Check(OK, "env", "no variable here holds a secret by its name or value: crew withholds none")
    given = []
    for agent in config.agents.values():
        with contextlib.suppress(CrewError):
            own = sorted(set(withheld) & config.provider(agent.provider).logins(env))
            given += [f"{agent.id} {', '.join(own)}"] if own else []
    text = f"withheld from the CLIs, commands, hooks and git crew starts: {', '.join(withheld)}"
    text += f"; each CLI still gets its own login: {'; '.join(given)}" if given else ""
    text += f"; env.pass lets through {', '.join(config.env_pass)}" if config.env_pass else ""
    return Check(OK, "env", text)


def _home_relative(path: Path, home: str) -> str:
    return f"~/{path.relative_to(home)}" if home and path.is_relative_to(home) and str(path) != home else str(path)


def _network(config: Config, env: Mapping[str, str], cwd: Path, found: Detection | CrewError) -> Iterator[Check]:
    """How the sandboxes' network is held here (checked by opening one), and what each agent's CLI,
    and its commands, may reach."""
    if isinstance(found, CrewError) or found.mechanism is None:
        return  # the sandbox line says why
    wanted = {config.sandbox, *(agent.sandbox for agent in config.agents.values() if agent.sandbox)}
    if config.network == "open":
        yield Check(
            WARN, "network", f"open ({config.shown}: network: open): the CLIs and all they start reach any host"
        )
        return
    mechanism = found.mechanism
    gap = mechanism.holds_network()
    if gap:
        status = FAIL if "required" in wanted else WARN
        yield Check(status, "network", f"{gap}; --sandbox required refuses to run; {INSTALL}, or network: open")
    else:
        yield _gate(mechanism, env, cwd)
    upstream = Upstream.of(env)
    if upstream.unusable:
        yield Check(WARN, "network", f"{upstream.unusable} is not an http:// proxy: crew's proxy connects directly")
    elif upstream.https or upstream.http:
        via = upstream.https or upstream.http
        assert via is not None
        yield Check(OK, "network", f"allowed destinations go on through your proxy {via[0]}:{via[1]} (NO_PROXY kept)")
    for agent in config.agents.values():
        try:
            provider = config.provider(agent.provider)
        except CrewError:
            continue  # the provider's own line says what is wrong
        allowed = AllowList((*provider.endpoints(env), *config.allowed))
        commands = AllowList(config.allowed).shown() if agent.sandbox_network else "nothing (sandbox_network: false)"
        yield Check(OK, "network", f"@{agent.id} reaches {allowed.shown()}; its commands reach {commands}")


def _gate(mechanism: Mechanism, env: Mapping[str, str], cwd: Path) -> Check:
    """The mechanism's line, once a process has been started through a gate of crew's proxy here."""
    held = {
        "bwrap": "each sandbox in a network namespace of its own, out only through crew's proxy",
        "landlock": "TCP only to crew's proxy's port (and each carried loopback port), UDP and Unix sockets "
        "refused; any host on those ports is reachable (docs/sandbox.md)",
        "sandbox-exec": "only TCP to crew's proxy's port on localhost (and each carried one)",
    }[mechanism.name]
    sandboxing = Sandboxing(env)
    try:
        box = sandboxing.commands("required", cwd, "query", network=True, hosts=lambda env: AllowList())
        assert box is not None
        proc, launch = spawn([sys.executable, "-S", "-c", ""], sandbox=box, env=env, cwd=cwd)
        proc.wait(timeout=PROBE_TIMEOUT)
        launch.ended()
    except (CrewError, OSError) as exc:
        return Check(FAIL, "network", f"{mechanism.name}: a sandbox's way out cannot be opened here ({exc})")
    return Check(OK, "network", f"{mechanism.name}: {held}")


def _native(config: Config, env: Mapping[str, str]) -> Check:
    """Which agents can take crew's tools natively (`--tools-via native`), and which are set to."""
    able, unable = [], []
    for agent in config.agents.values():
        try:
            via = config.provider(agent.provider).native_via
        except CrewError:
            continue  # the provider's own line says what is wrong
        if via:
            able.append(f"{agent.id} ({via}{', tools_via: native' if agent.tools_via == 'native' else ''})")
        else:
            unable.append(agent.id)
    text = "crew's tools go natively (--tools-via native) to " + (", ".join(able) or "no agent")
    text += f"; as the text catalogue only to {', '.join(unable)}" if unable else ""
    if able and not live_enabled(dict(env)):
        return Check(WARN, "native", f"CREW_LIVE=0: every agent gets the text catalogue ({text})")
    return Check(OK, "native", text)


def _configuration(config_path: Path | None, cwd: Path) -> tuple[Config, list[Check]]:
    """The configuration in force and what is to be said about it; the built-in agents if it is broken."""
    try:
        config = load_config(config_path, cwd)
    except CrewError as exc:
        return Config(agents=default_agents()), [Check(FAIL, "config", str(exc))]
    if config.path is None:
        checks = [Check(OK, "config", "no crew.yaml: the built-in agents are used (`crew init` writes a starter)")]
    else:
        counts = ", ".join(
            _count(len(items), noun)
            for items, noun in (
                (config.agents, "agent"),
                (config.providers, "provider"),
                (config.tools, "tool"),
                ([hook for hooks in config.hooks.values() for hook in hooks], "hook"),
            )
        )
        checks = [Check(OK, "config", f"{config.shown} {'is' if len(config.files) == 1 else 'are'} valid: {counts}")]
    for agent_id in config.agents:
        try:
            config.agent(agent_id)  # its workdir must exist
        except CrewError as exc:
            checks.append(Check(FAIL, f"@{agent_id}", str(exc)))
    try:
        registry = config.registry()
    except CrewError as exc:
        checks.append(Check(FAIL, "tools", str(exc)))
    else:
        checks.append(Check(OK, "tools", f"{_count(len(registry), 'tool')}: {', '.join(registry.names())}"))
    return config, checks


def _programs(config: Config, env: Mapping[str, str]) -> Iterator[Check]:
    """The program of each command tool and command hook must exist (none is run)."""
    entries: list[tuple[str, tuple[str | int, ...], str, Path | None]] = [
        ("tools", ("tools", name, "command", 0), tool.command[0], tool.base) for name, tool in config.tools.items()
    ]
    entries += [
        ("hooks", ("hooks", event, i, "command", 0), hook.command[0], hook.base)
        for event, hooks in config.hooks.items()
        for i, hook in enumerate(hooks)
        if hook.command
    ]
    for subject, keys, program, base in entries:
        if "{" in program:
            continue  # the program itself comes from an argument
        local = base if "/" in program and not os.path.isabs(program) else None  # relative to the config
        if shutil.which(str(local / program) if local else program, path=env.get("PATH", os.defpath)) is None:
            where = f"not an executable file (it is looked for in {base})" if local else "not on PATH"
            yield Check(FAIL, subject, str(config.error(keys, f"'{program}' is {where}; install it or fix the path")))


def _skills(config: Config, cwd: Path, env: Mapping[str, str]) -> Iterator[Check]:
    """Every skill folder found: broken front matter (never dropped unsaid), names hidden by another."""
    found = discover(roots(cwd, config.skills, env), cwd)
    for problem in found.problems:
        yield Check(FAIL, "skills", f"{problem}; fix its front matter, or the skill is not offered")
    for hidden in found.shadowed:
        winner = found.skills[hidden.name]
        yield Check(WARN, "skills", f"'{hidden.name}' in {hidden.folder} is hidden by the one in {winner.folder}")
    if found.skills:
        names = ", ".join(found.skills)
        yield Check(OK, "skills", f"{_count(len(found.skills), 'skill')} offered to agents that allow them: {names}")


def _subjects(config: Config, only: Sequence[str]) -> list[_Subject]:
    """The providers to check: built-in, then those of crew.yaml, then plugins (a name in crew.yaml
    replaces the built-in or plugin one of that name, as it does when crew runs)."""
    installed = plugins()
    known = list(dict.fromkeys([*BUILTIN, *config.providers, *installed]))
    unknown = [name for name in only if name not in known]
    if unknown:
        raise UsageError(f"provider '{unknown[0]}' not found; known providers: {', '.join(known)}")
    subjects = []
    for name in [name for name in known if name in only] if only else known:
        subject = _Subject(name)
        try:
            if name in config.providers:
                subject.provider, subject.origin = config.provider(name), config.file_of(("providers", name))
            elif name in BUILTIN:
                subject.provider = load(name)
            else:
                point = installed[name]
                subject.origin = f"plugin from {point.dist.name}" if point.dist else "plugin"
                subject.provider = load_plugin(point)
        except CrewError as exc:
            subject.error = str(exc)
        subjects.append(subject)
    return subjects


def _needed(config: Config, only: Sequence[str]) -> set[str]:
    """Providers whose absence is a failure: named on the command line, or used by an agent that
    crew.yaml defines (the built-in agents exist whether or not their CLI does)."""
    used = {agent.provider for agent in config.agents.values() if ("agents", agent.id) in config.origins}
    return {*only, *used}


def _start(subject: _Subject, prober: Prober, env: Mapping[str, str]) -> None:
    """Look for the CLI and start its --version and --help runs."""
    provider = subject.provider
    if provider is None:
        return
    subject.path = shutil.which(provider.binary, path=env.get("PATH", os.defpath))
    try:
        commands = provider.commands()
    except Exception as exc:  # a plugin's bug: named, not a traceback
        subject.provider, subject.error = None, f"its commands cannot be built ({type(exc).__name__}: {exc})"
        return
    if subject.path is None or not commands:
        return
    extra = provider.env()
    subject.version = prober.start([subject.path, "--version"], extra)
    for argv in commands:
        helper = tuple(help_argv([subject.path, *argv[1:]]))
        subject.helps.setdefault(helper, prober.start(list(helper), extra))
        wanted = subject.wanted.setdefault(helper, [])
        wanted += [o for o in map(option_of, argv[1:]) if o is not None and o not in wanted]


def _provider_checks(subject: _Subject, needed: bool, config: Config) -> Iterator[Check]:
    name, provider = subject.name, subject.provider
    if provider is None:
        yield Check(FAIL, name, subject.error or "cannot be loaded")
        return
    origin = f" ({subject.origin})" if subject.origin else ""
    if subject.path is None:
        where = f"`{provider.binary}` is not on PATH" if "/" not in provider.binary else f"{provider.binary} is missing"
        install = provider.install_hint or f"install '{provider.binary}'"
        if provider.tested:
            install += f" (crew is tested with {provider.tested})"
        if needed:
            yield Check(FAIL, name, f"not installed{origin}: {where}; install it: {install}")
        else:
            yield Check(
                WARN, name, f"not installed: {where}; only @{name} needs it, so install it to use that: {install}"
            )
        return
    if not subject.helps:
        runs = f"runs `{shlex.join(provider.argv(Turn('PROMPT')))}`"
        why = "probe: false" if subject.name in config.providers else "the provider names no command to check"
        yield Check(OK, name, f"found{origin}; {runs} (not run here: {why})" if subject.origin else f"ready; {runs}")
        return
    problems, version, counted = _probe_results(subject, config)
    head = f"{version} at {subject.path}{origin}"
    if problems:
        yield from (Check(FAIL, name, f"{head}: {problem}") for problem in problems)
        return
    yield Check(OK, name, f"{head}; accepts the {_count(counted, 'option')} crew uses{_tested(provider, version)}")
    yield from _agent_options(subject, config)


def _probe_results(subject: _Subject, config: Config) -> tuple[list[str], str, int]:
    """What the runs said: the problems (each with what to do), the version, how many options were checked."""
    provider = subject.provider
    assert provider is not None and subject.version is not None
    if subject.name in config.providers:  # described in crew.yaml: the description may be what is wrong
        fix = f"fix providers.{subject.name} in {subject.origin}, or install a version that has it"
    elif provider.install_hint:
        fix = f"install a version that has it: {provider.install_hint}"
    else:
        fix = "install a version that has it"
    problems: list[str] = []
    version = "version unknown"
    out, trouble = _outcome(subject.version)
    if trouble:
        problems.append(f"`{_shown([subject.path or '', '--version'])}` {trouble}")
    else:
        version = next((line.strip() for line in out.splitlines() if line.strip()), version)[:80]
    counted = 0
    for helper, future in subject.helps.items():
        shown = _shown(list(helper))
        text, trouble = _outcome(future, help_text=True)
        offered = options_in_help(text)
        words = list(helper[1:-1])
        if trouble:
            problems.append(f"`{shown}` {trouble}")
        elif words and not re.search(rf"(?<![\w-]){re.escape(' '.join(words))}(?![\w-])", text):
            problems.append(f"it has no `{' '.join(words)}` command (`{shown}` does not mention it); {fix}")
        elif not offered:
            problems.append(
                f"`{shown}` lists no options, so crew cannot check the ones it uses; run it "
                "yourself to see what is wrong"
            )
        else:
            missing = [option for option in subject.wanted[helper] if option not in offered]
            counted += len(subject.wanted[helper]) - len(missing)
            if missing:
                problems.append(f"`{shown}` does not list {', '.join(missing)}, which crew uses; {fix}")
    return problems, version, counted


def _tested(provider: Provider, version: str) -> str:
    """The version against the one crew's tests drive, when crew knows it."""
    if not provider.tested:
        return ""
    found = re.search(r"\d+\.\d+\.\d+", version)
    if found is not None and found.group() == provider.tested:
        return "; the version crew is tested with"
    return f"; crew is tested with {provider.tested} ({provider.install_hint}@{provider.tested})"


def _outcome(future: Future[Finished], *, help_text: bool = False) -> tuple[str, str | None]:
    """The output of a probe run, and what went wrong with it (None: nothing). Help may come on
    stderr and with any exit status; a version must come with status 0."""
    try:
        done = future.result()
    except CrewTimeout as exc:
        return "", f"did not finish ({exc}); run it yourself to see where it hangs"
    except (CrewError, OSError) as exc:
        return "", f"could not be run ({exc}); check that the file is an executable program"
    if help_text:
        return f"{done.stdout}\n{done.stderr}", None
    if done.code != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return "", f"exited with status {done.code} ({detail[0][:200]}); run it yourself to see why"
    return done.stdout or done.stderr, None


def _state_line(state: State) -> str:
    """What a configured CLI may write of its own inside crew's sandbox (docs/sandbox.md)."""
    places = [*state.data, *state.data_files]
    view = f"; {state.home} is read-only, seen through a view" if state.home is not None and state.variable else ""
    if not places:
        return f"in crew's sandbox it writes no folder of its own{view} (give its data folders in state_dirs)"
    shown = ", ".join(str(place) for place in places)
    return (
        f"in crew's sandbox it writes only its data: {shown}{view} (state_dirs are data folders: "
        "everything in them is writable, so none may hold what it reads as settings or runs)"
    )


def _agent_options(subject: _Subject, config: Config) -> Iterator[Check]:
    """Options an agent in crew.yaml adds for this provider, checked against its main command's help."""
    helper = next(iter(subject.helps))
    offered = options_in_help(_outcome(subject.helps[helper], help_text=True)[0])
    for agent in config.agents.values():
        if agent.provider != subject.name:
            continue
        for mode, argv in agent.options.items():
            for i, token in enumerate(argv):
                option = option_of(token)
                if option is not None and option not in offered:
                    message = f"`{_shown(list(helper))}` does not list {option}; fix or remove it"
                    yield Check(
                        FAIL, f"@{agent.id}", str(config.error(("agents", agent.id, "options", mode, i), message))
                    )


def _shown(argv: list[str]) -> str:
    return shlex.join([os.path.basename(argv[0]), *argv[1:]])


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
