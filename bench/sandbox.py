"""Figure 10: what the sandbox costs. Each row times the same thing inside the sandbox and with
`--sandbox off`, in pairs (crew installed as users install it, the real CLIs against the mock model
server), for each mechanism this machine has: bubblewrap, and Landlock forced
(CREW_SANDBOX_MECHANISM=landlock, as where user namespaces are not allowed).

- run_command: one `true`, called through crew's tool registry in this process;
- a CLI start: `crew query "@claude hello"`, one answer, no tool;
- a three-command chain: `crew execute`, claude calls crew:run_command three times in a row (each
  result goes back before the next call), then answers: the target, ≤ 1.10;
- codex's own command: `crew execute`, codex runs one command of its own (inside crew's sandbox
  with its own sandbox off, against codex's own sandbox alone with `--sandbox off`);
- hiding the credential stores: run_command `true` with HOME a lived-in one (LIVED_IN entries in
  it and its .config and .local/share, the stores of crewbridge.sandbox.hidden there, each CLI's
  login), hiding them against hiding nothing: under Landlock that is a rule for each entry beside
  the folders on the way to a hidden place.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.common import Row, Settings, installed, median, paired, ratio_row, run_timed

MECHANISMS = ("bwrap", "landlock")
CHAIN = ("ls", "wc -l notes.txt", "grep -c code notes.txt")
TARGET = 1.10  # the three-command chain, sandboxed / off


def run(settings: Settings) -> list[Row]:
    rows: list[Row] = []
    work = Path(tempfile.mkdtemp(prefix="crew-bench-sandbox-"))
    try:
        (work / "notes.txt").write_text("the launch code is 7-4-1\n")
        for mechanism in MECHANISMS:
            rows.append(_run_command(settings, mechanism, work))
        for mechanism in MECHANISMS:
            rows.append(_hiding(settings, mechanism, work))
        if settings.cli:
            rows += _with_clis(settings, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def _run_command(settings: Settings, mechanism: str, work: Path) -> Row:
    from crewbridge.tools import builtin_registry

    from crewbridge.sandbox import MECHANISM_ENV, Sandboxing
    from crewbridge.toolkit.registry import ToolContext

    registry = builtin_registry()
    sandbox = Sandboxing({**os.environ, MECHANISM_ENV: mechanism}).commands("required", work, "execute", network=False)

    def once(inside: bool) -> float:
        start = time.perf_counter()
        result = registry.call(
            "crew:run_command", {"command": "true"}, ToolContext(work, sandbox=sandbox if inside else None)
        )
        took = time.perf_counter() - start
        if not result.success or result.data["exit_code"] != 0:
            raise RuntimeError(f"run_command failed under {mechanism}: {result.error or result.data}")
        return took

    mine, theirs, ratios = paired(lambda: once(True), lambda: once(False), settings.repeats(41, 11), warmup=3)
    return _ms_row(
        f"run_command `true`, {mechanism} vs off",
        (mine, theirs, ratios),
        f"{(median(mine) - median(theirs)) * 1000:.1f} ms added a command",
    )


def _ms_row(what: str, measured: tuple[list[float], list[float], list[float]], note: str) -> Row:
    """A figure 10 row of paired times in seconds, shown in ms."""
    return ratio_row("10 sandbox", what, *measured, unit="ms", scale=1000, target=None, note=note)


# A lived-in HOME: entries in HOME, ~/.config and ~/.local/share (a desktop user's here: 60-150 each).
LIVED_IN = {"": 120, ".config": 80, ".local/share": 60}
STORES = (
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".gnupg/pubring.kbx",
    ".docker/config.json",
    ".kube/config",
    ".netrc",
    ".npmrc",
    ".git-credentials",
    ".config/gcloud/credentials.db",
    ".config/gh/hosts.yml",
    ".config/google-chrome/Default/Cookies",
    ".config/chromium/Default/History",
    ".mozilla/firefox/profiles.ini",
    ".local/share/keyrings/login.keyring",
    ".local/state/crewbridge/runs/old.jsonl",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
)


def _lived_in_home(root: Path) -> Path:
    home = root / "home"
    for folder, count in LIVED_IN.items():
        for i in range(count):
            entry = home / folder / f".entry{i}" if not folder else home / folder / f"app{i}"
            entry.mkdir(parents=True) if i % 2 else (entry.parent.mkdir(parents=True, exist_ok=True), entry.touch())
    for store in STORES:
        (home / store).parent.mkdir(parents=True, exist_ok=True)
        (home / store).write_text("secret\n")
    return home


def _hiding(settings: Settings, mechanism: str, work: Path) -> Row:
    from crewbridge.providers.claude import ClaudeProvider
    from crewbridge.providers.codex import CodexProvider
    from crewbridge.providers.gemini import GeminiProvider

    from crewbridge.sandbox import MECHANISM_ENV, Sandboxing, landlock, spawn
    from crewbridge.sandbox.hidden import Hiding

    root = Path(tempfile.mkdtemp(prefix="crew-bench-home-", dir="/var/tmp"))  # not under /tmp, as a HOME is
    try:
        home = _lived_in_home(root)
        env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")} | {"HOME": str(home)}
        hiding = Hiding(logins=tuple(p.state for p in (ClaudeProvider(), CodexProvider(), GeminiProvider())))
        sandboxing = Sandboxing({**os.environ, MECHANISM_ENV: mechanism})
        hidden, bare = (
            sandboxing.commands("required", work, "execute", network=False, hiding=h) for h in (hiding, None)
        )
        places = hiding.places(env, visible=[work])
        rules = len(landlock.readable(places.places))

        cpu: dict[bool, list[float]] = {True: [], False: []}  # crew's own CPU time to make the launch

        def once(sandbox, hiding: bool) -> float:
            start, used = time.perf_counter(), time.process_time()
            proc, launch = spawn(["true"], sandbox=sandbox, env=env, cwd=work)
            cpu[hiding].append(time.process_time() - used)
            code = proc.wait()
            launch.ended()
            if code != 0:
                raise RuntimeError(f"`true` failed under {mechanism} (exit {code})")
            return time.perf_counter() - start

        runs = settings.repeats(41, 11)
        mine, theirs, ratios = paired(lambda: once(hidden, True), lambda: once(bare, False), runs, warmup=3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    how = f"{rules} Landlock rules" if mechanism == "landlock" else f"{len(places.places)} more mounts"
    added, crew_cpu = (median(mine) - median(theirs)) * 1000, (median(cpu[True]) - median(cpu[False])) * 1000
    return _ms_row(
        f"a command in a lived-in HOME, {mechanism}: {len(places.places)} places hidden vs none",
        (mine, theirs, ratios),
        f"{added:.2f} ms added a launch, {crew_cpu:.2f} ms of it crew's CPU ({how})",
    )


def _with_clis(settings: Settings, work: Path) -> list[Row]:
    from clienv import cli_env
    from crewcli import tool_block
    from mockserver import MockServer, tool_call

    crew = str(installed() / "crew")
    rows: list[Row] = []
    home = Path(tempfile.mkdtemp(prefix="crew-bench-sandbox-home-"))
    try:
        with MockServer() as mock:

            def timed(cli: str, mechanism: str | None, args: list[str], *script) -> float:
                env = {**cli_env(cli, mock.url, home / cli)}
                if mechanism:
                    env["CREW_SANDBOX_MECHANISM"] = mechanism
                mock.script(*script)
                done = run_timed(
                    [crew, *args[:1], "--sandbox", "required" if mechanism else "off", *args[1:]], env=env, cwd=work
                )
                if done.returncode != 0 or "Done." not in done.stdout.decode():
                    raise RuntimeError(
                        f"crew {' '.join(args)} ({mechanism or 'off'}) failed "
                        f"(exit {done.returncode}): {done.stderr.decode()[-300:]}"
                    )
                return done.wall

            chain = [tool_block("crew:run_command", command=command) for command in CHAIN]
            cases = [
                ("a CLI start: claude, one answer", "claude", ["query", "@claude hello"], ("Done.",), None),
                (
                    "a three-command chain: claude, run_command ×3",
                    "claude",
                    ["execute", "@claude look"],
                    (*chain, "Done."),
                    TARGET,
                ),
                (
                    "codex's own command (exec_command)",
                    "codex",
                    ["execute", "@codex:gpt-5.5 look"],
                    (tool_call("exec_command", {"cmd": "ls"}), "Done."),
                    None,
                ),
            ]
            for mechanism in MECHANISMS:
                for what, cli, args, script, target in cases:
                    mine, theirs, ratios = paired(
                        functools.partial(timed, cli, mechanism, args, *script),
                        functools.partial(timed, cli, None, args, *script),
                        settings.repeats(9, 3),
                    )
                    rows.append(
                        ratio_row(
                            "10 sandbox",
                            f"{what}, {mechanism} vs off (wall)",
                            mine,
                            theirs,
                            ratios,
                            unit="s",
                            scale=1,
                            target=target,
                        )
                    )
            if mock.problems:
                raise RuntimeError(f"the mock model server saw: {'; '.join(mock.problems)}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return rows
