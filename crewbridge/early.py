"""The agents' CLIs of `crew query|execute`, started before crew has loaded.

Node needs most of a second to start a CLI, and crew's own imports took ~60 ms before it could
start one (click alone ~45). So `crew` first reads its arguments with the table below and:
1. starts at once the CLIs its launch plan holds for these arguments (the mentions, not the task's
   words), configuration files and crew's settings (`plan_key`), in this working directory, with
   nothing imported but os, json and subprocess;
2. loads the configuration and starts the mentioned agents' CLIs as a run does (Bridge.start): a
   CLI of step 1 with exactly the command, environment and directory asked for is taken over
   (crewbridge.spawn), any other is ended unused, and the plan remembers what was asked for.
click then parses as always, and the run takes those CLIs. Only arguments the table reads with
certainty count: anything else (help, an option it does not know, another command) waits for
click, which then starts the CLIs itself.

A plan whose commands came out different from what it held (a CLI given a fresh path or id each
run) is not used again until two runs in a row ask for the same: a wrong guess costs a CLI started
and ended for nothing, never a different run."""
from __future__ import annotations

import json
import os

from crewbridge import __version__, spawn
from crewbridge.places import CONFIG_NAMES, xdg

TYPE_CHECKING = False  # typing itself is ~5 ms to import; type checkers read this name as True
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

COMMANDS = ("query", "execute")
# The options of `crew query` and `crew execute`: name → whether it takes a value. A test holds this
# to click's own definition of the commands.
OPTIONS = {"--timeout": True, "--max-turns": True, "--config": True, "--json": False, "--jsonl": False,
           "--yes": False, "-y": False, "--verbose": False, "-v": False}
MAX_PLANS = 32  # the plans of the most recently used keys are kept


def read_args(argv: list[str]) -> tuple[str, str, str | None] | None:
    """(mode, task, --config) of `crew query|execute …`, or None when the table cannot tell."""
    if not argv or argv[0] not in COMMANDS:
        return None
    words: list[str] = []
    config: str | None = None
    rest = iter(argv[1:])
    for arg in rest:
        if arg == "--":
            words.extend(rest)
            break
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, equals, value = arg.partition("=")
        takes_value = OPTIONS.get(name)
        if takes_value is None or (equals and not takes_value):
            return None
        if takes_value and not equals:
            value = next(rest, "")
        if name == "--config":
            config = value
    return (argv[0], " ".join(words), config) if words else None


def start(argv: list[str]) -> None:
    """Start the CLIs of the agents that `crew query|execute` arguments mention (else nothing)."""
    read = read_args(argv)
    if read is None:
        return
    mode, task, config = read
    key = plan_key(mode, task, config, os.getcwd(), os.environ)
    plans = _read_plans()
    plan = plans.get(key)
    specs = _replayed(plan)
    if specs is None:
        plan = None  # damaged: as if there were none
    elif plan["stable"] is True:
        spawn.ahead(specs)
    asked = _start_agents(mode, task, config)
    spawn.end_ahead()  # the plan's CLIs no agent asked for
    if asked is not None:
        _remember(plans, key, plan, [_stored(spec) for spec in asked])


def plan_key(mode: str, task: str, config: str | None, cwd: str, env: Mapping[str, str]) -> str:
    """What the commands crew starts for a task depend on: its mentions (the task's leading @words),
    the mode, the configuration files crew could read from `cwd` that exist (with their stat: any
    write changes ctime) and crew's settings in the environment. Not the directory itself: the plan
    holds it as "" where it is the working directory, so a plan made in one place serves every
    other place with the same configuration."""
    mentions = []
    for word in task.split():
        if not word.startswith("@"):
            break
        mentions.append(word)
    if config is not None:
        files = [os.path.join(cwd, os.path.expanduser(config))]
    else:
        files, directory = [], cwd
        while True:
            files += [os.path.join(directory, name) for name in CONFIG_NAMES]
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
    files += [os.path.join(xdg("XDG_CONFIG_HOME", ".config", env), "crewbridge", "crew.yaml"),
              os.path.join(xdg("XDG_STATE_HOME", ".local/state", env), "crewbridge", "trusted.json")]
    settings = sorted((k, v) for k, v in env.items() if k.startswith(("CREW_", "XDG_")) or k == "HOME")
    present = [[path, stat] for path in files if (stat := _stat(path)) is not None]
    return json.dumps([__version__, os.path.dirname(__file__), mode, mentions, present, settings])


def plans_file(env: Mapping[str, str] | None = None) -> str:
    """$XDG_CACHE_HOME/crewbridge/launch.json (default ~/.cache/crewbridge/launch.json)."""
    return os.path.join(xdg("XDG_CACHE_HOME", ".cache", env), "crewbridge", "launch.json")


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _start_agents(mode: str, task: str, config: str | None) -> list[spawn.Spec] | None:
    """What Bridge.start asked spawn for, or None when the configuration or task is in error."""
    from pathlib import Path

    from crewbridge.bridge import Bridge
    from crewbridge.config import load_config
    from crewbridge.errors import CrewError

    spawn.record()
    try:
        Bridge(load_config(None if config is None else Path(config), Path.cwd())).start(task, mode)
    except CrewError:
        return None  # click's run reports it
    finally:
        asked = spawn.recorded()
    return asked


def _stored(spec: spawn.Spec) -> dict[str, Any]:
    """A command as the plan keeps it: its environment as changes to crew's own, its directory as
    "" where it is the working directory."""
    argv, env, cwd = spec
    return {"argv": list(argv), "cwd": "" if cwd == os.getcwd() else cwd,
            "env": {k: v for k, v in env.items() if os.environ.get(k) != v},
            "unset": sorted(k for k in os.environ if k not in env)}


def _replayed(plan: Any) -> list[spawn.Spec] | None:
    """The plan's commands in this environment; None if there is no plan or it is not as written."""
    specs = []
    try:
        if not isinstance(plan["stable"], bool):
            return None
        for stored in plan["specs"]:
            argv, cwd, changes, unset = stored["argv"], stored["cwd"], stored["env"], stored["unset"]
            if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
                    and isinstance(cwd, (str, type(None)))
                    and all(isinstance(k, str) and isinstance(v, str) for k, v in changes.items())
                    and isinstance(unset, list)):
                return None
            env = {k: v for k, v in os.environ.items() if k not in unset}
            env.update(changes)
            specs.append((tuple(argv), env, os.getcwd() if cwd == "" else cwd))
    except (AttributeError, KeyError, TypeError):
        return None
    return specs


def _read_plans() -> dict[str, Any]:
    """The plans file, if this user owns it and only they may write it: its commands are run."""
    try:
        with open(plans_file(), "rb") as file:
            st = os.fstat(file.fileno())
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                return {}
            plans = json.load(file)
    except (OSError, ValueError):
        return {}
    return plans if isinstance(plans, dict) else {}


def _remember(plans: dict[str, Any], key: str, plan: dict[str, Any] | None, specs: list[dict[str, Any]]) -> None:
    """Keep `specs` as the plan for `key`; usable unless they differ from the plan it held."""
    same = plan is not None and plan["specs"] == specs
    if same and plan["stable"]:
        return
    plans.pop(key, None)
    plans[key] = {"specs": specs, "stable": same or plan is None}
    for old in list(plans)[:-MAX_PLANS]:
        del plans[old]
    path = plans_file()
    temporary = f"{path}.{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
            json.dump(plans, file)
        os.replace(temporary, path)
    except OSError:  # no cache directory to write (a read-only home, a full disk): no plan, as before
        try:
            os.remove(temporary)
        except OSError:
            pass
