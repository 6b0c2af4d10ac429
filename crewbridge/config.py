"""Configuration: crew.yaml (agents, custom providers, tools, hooks, prefix), found, validated, loaded.

Where: `--config PATH`; else crew.yaml or .crew.yaml in the working directory or its nearest parent;
else $XDG_CONFIG_HOME/crewbridge/crew.yaml (default ~/.config). The first found is the configuration.
Errors name the file, the line, the key and the fix:
`crew.yaml:7: agents.claude.timeout: 'soon' is not of type 'number'; give seconds, e.g. 120`.

A project file found by the directory search that can run commands (hooks, tools, providers, CLI
options, a working directory outside the project) is used only once a person has trusted it
(`trust_config`, which remembers its content hash), or named it with --config. Otherwise cloning a
repository and running crew in it would run whatever its crew.yaml says.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.errors import AgentNotFound, ConfigError, ConfigKeyError, CrewError, UsageError
from crewbridge.globs import NATIVE, matches
from crewbridge.places import CONFIG_NAMES, xdg
from crewbridge.providers import BUILTIN, load, names, plugins
from crewbridge.registry import DEFAULT_PREFIX, ToolRegistry
from crewbridge.templates import package_text

# For start-up speed, what only a crew.yaml needs (yaml, jsonschema, command tools, hooks, custom
# providers) is imported where it is used: without a crew.yaml, none of it is.
if TYPE_CHECKING:
    import yaml
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

    from crewbridge.custom_tools import CommandTool
    from crewbridge.hooks import HookSpec
    from crewbridge.providers.base import Provider
    from crewbridge.providers.generic import GenericSpec

BUILTIN_AGENTS = ("claude", "gemini", "codex", "demo")
MAX_NODES = 100_000  # YAML aliases can make a small file expand without end
Keys = tuple[Any, ...]  # a key path: ("agents", "claude", "deny", 0)


@dataclass
class AgentSpec:
    """One agent a mention can name: which provider runs it and what it may do."""

    id: str
    provider: str
    model: str | None = None
    system_prompt: str | None = None
    options: dict[str, list[str]] = field(default_factory=dict)  # per mode: "query"/"execute" → argv
    allow: list[str] = field(default_factory=list)  # tool-name globs; empty = the profile decides
    deny: list[str] = field(default_factory=list)
    profile: str = "coding"  # read-only | coding | full
    approval: list[str] = field(default_factory=list)  # tool-name globs that need approval
    workdir: str | None = None  # absolute once loaded from a file
    timeout: float | None = None  # seconds for the whole run, tools included (replaces --timeout)
    deny_commands: list[str] = field(default_factory=list)  # run_command: globs on each command
    allow_commands: list[str] = field(default_factory=list)  # run_command: if given, only these
    skills: list[str] | None = None  # skill-name globs; None: every skill found, []: none
    fallback: list[str] = field(default_factory=list)  # agents that take over when its provider cannot serve
    max_cost: float | None = None  # dollars its run may cost (the CLI's own figure)
    max_tokens: int | None = None  # tokens (input + output) its run may use
    tools_via: str = "text"  # text: the catalogue in the prompt; native: the CLI's own tool channel (crewbridge.native)
    sandbox: str | None = None  # auto | required | off: replaces the run's, where stricter (crewbridge.sandbox.level)
    sandbox_network: bool = False  # its commands may use the network inside the sandbox


@dataclass
class Config:
    path: Path | None = None
    prefix: str = DEFAULT_PREFIX
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    providers: dict[str, GenericSpec] = field(default_factory=dict)  # by id
    hooks: dict[str, list[HookSpec]] = field(default_factory=dict)  # by event: before/after_tool_call
    compact_catalogue: bool | None = None  # None: compact when many tools
    tools: dict[str, CommandTool] = field(default_factory=dict)
    plugins: bool = True  # tools from the `crewbridge.tools` entry point group
    transcripts: bool = True
    skills: list[Path] = field(default_factory=list)  # skill folders crew.yaml names (crewbridge.skills)
    sandbox: str = "auto"  # the run's sandbox level (crewbridge.sandbox); --sandbox replaces it
    marks: dict[Keys, int] = field(default_factory=dict, repr=False)  # key path → line in `path`
    shown: str = "crew.yaml"  # how `path` is named in messages

    def agent(self, agent_id: str) -> AgentSpec:
        if agent_id not in self.agents:
            raise AgentNotFound(f"agent '{agent_id}' not found; configured agents: {', '.join(self.agents)}")
        spec = self.agents[agent_id]
        if spec.workdir is not None and not os.path.isdir(spec.workdir):
            raise self.error(
                ("agents", agent_id, "workdir"), f"'{spec.workdir}' is not a directory; create it or fix the path"
            )
        return spec

    def provider(self, name: str) -> Provider:
        """A provider by name: one configured under `providers:` first, then a built-in one."""
        if name in self.providers:
            from crewbridge.providers.generic import GenericProvider  # for start-up speed (see top)

            return GenericProvider(self.providers[name])
        if name in BUILTIN or name in plugins():
            return load(name)
        known = sorted({*names(), *self.providers})
        raise UsageError(f"provider '{name}' not found; configured providers: {', '.join(known)}")

    def provider_env(self) -> dict[str, str]:
        """The variables crew.yaml's providers add to their CLIs' environment (for redaction)."""
        return {name: value for spec in self.providers.values() for name, value in spec.env.items()}

    def registry(self) -> ToolRegistry:
        """Every tool: the built-ins, the command tools of crew.yaml, and installed plugin tools.
        Globs in allow/deny/approval and hook `tools:` must each match a tool (a typo in a deny list
        would otherwise deny nothing)."""
        # For start-up speed: the tools are built after the agents' CLIs have started.
        from crewbridge.custom_tools import plugin_tools
        from crewbridge.tools import builtin_registry

        registry = builtin_registry(self.prefix)
        for name, command_tool in self.tools.items():
            if name in registry:
                raise self.error(("tools", name), f"a built-in tool is called '{name}'; choose another name")
            registry.register(command_tool.tool())
        for tool in plugin_tools() if self.plugins else []:
            if tool.name in registry:
                raise ConfigError(
                    f"plugin tool '{tool.name}' has the name of another tool; rename the "
                    f"one in {self.shown}, or set plugins: false"
                )
            registry.register(tool)
        self._check_globs(registry)
        return registry

    def _check_globs(self, registry: ToolRegistry) -> None:
        lists: list[tuple[Keys, list[str]]] = [
            (("agents", agent.id, key), getattr(agent, key))
            for agent in self.agents.values()
            for key in ("allow", "deny", "approval")
        ]
        lists += [
            (("hooks", event, i, "tools"), spec.tools)
            for event, specs in self.hooks.items()
            for i, spec in enumerate(specs)
        ]
        names = registry.names()
        for keys, patterns in lists:
            for i, pattern in enumerate(patterns):
                if pattern.startswith(NATIVE) and keys[0] == "hooks":
                    raise self.error((*keys, i), f"'{pattern}': hooks see crew's tools only, not the CLI's own")
                if pattern.startswith(NATIVE):
                    continue  # the CLI's own tools: crew knows them only when the CLI asks
                if not any(matches(name, [pattern]) for name in names):
                    near = difflib.get_close_matches(pattern, names, n=1)
                    hint = f"did you mean '{near[0]}'?" if near else f"tools: {', '.join(names)}"
                    raise self.error((*keys, i), f"'{pattern}' matches no tool; {hint}")

    def error(self, keys: Keys, message: str) -> ConfigError:
        """A ConfigError that names this file, the line of `keys` and the key path."""
        return ConfigError(_located(self.shown, self.marks, keys, message))


def default_agents() -> dict[str, AgentSpec]:
    return {name: AgentSpec(id=name, provider=name) for name in BUILTIN_AGENTS}


def load_config(explicit: Path | None = None, cwd: Path | None = None) -> Config:
    """The configuration in force (see the module docstring for where it is looked for)."""
    cwd = Path(cwd or Path.cwd()).absolute()
    if explicit is not None:
        path = cwd / Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {explicit} not found; check the --config path")
        return read_config(path, cwd)
    found = find_project_config(cwd)
    if found is not None:
        return read_config(found, cwd, trusted=False)
    user = config_dir() / "crew.yaml"
    if user.is_file():
        return read_config(user, cwd)
    return Config(agents=default_agents())


def find_project_config(cwd: Path) -> Path | None:
    """crew.yaml or .crew.yaml in `cwd` or its nearest parent that has one."""
    for directory in (cwd, *cwd.parents):
        present = [directory / name for name in CONFIG_NAMES if (directory / name).is_file()]
        if len(present) > 1:
            raise ConfigError(f"both {present[0]} and {present[1]} exist; keep one of them")
        if present:
            return present[0]
    return None


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_CONFIG_HOME/crewbridge (default ~/.config/crewbridge)."""
    return Path(xdg("XDG_CONFIG_HOME", ".config", env), "crewbridge")


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_STATE_HOME/crewbridge (default ~/.local/state/crewbridge): transcripts, trusted configs."""
    return Path(xdg("XDG_STATE_HOME", ".local/state", env), "crewbridge")


def read_config(path: Path, cwd: Path | None = None, *, trusted: bool = True) -> Config:
    """Parse and validate one file. `trusted=False` (a file found by the directory search) refuses a
    file that can run commands unless it is owned by this user and was trusted as it is now."""
    shown = _shown(path, cwd)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    data, marks = parse_yaml(text, shown)
    _bare_off(data)
    _validate(data, marks, shown)
    if not trusted:
        _check_trust(path, raw, data, marks, shown)
    return _build(data, marks, path, shown)


def parse_yaml(text: str, shown: str) -> tuple[dict[str, Any], dict[Keys, int]]:
    """The document as plain data, and the line of every key path. Duplicate keys and keys that are
    not text are errors (YAML would quietly keep the last, or turn `no:` into False)."""
    import yaml  # for start-up speed (see top)

    loader = yaml.SafeLoader(text)
    marks: dict[Keys, int] = {}
    try:
        node = loader.get_single_node()
        data = _plain(loader, node, (), marks, shown, [MAX_NODES]) if node is not None else {}
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{mark.line + 1}:" if mark else ""
        problem = exc.problem or exc.context or "unreadable"
        raise ConfigError(f"{shown}:{where} invalid YAML: {problem}; fix the syntax near there") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{shown}: invalid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{shown}: nested too deeply, or an alias contains itself; simplify it") from None
    finally:
        loader.dispose()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{shown}:1: the file must be a mapping of settings (agents:, tools:, …), not {type(data).__name__}"
        )
    return data, marks


def _plain(
    loader: yaml.SafeLoader, node: yaml.Node, keys: Keys, marks: dict[Keys, int], shown: str, budget: list[int]
) -> Any:
    import yaml  # for start-up speed (see top)

    budget[0] -= 1
    if budget[0] < 0:
        raise ConfigError(
            f"{shown}: the document expands to more than {MAX_NODES} values (YAML aliases); write it out plainly"
        )
    marks.setdefault(keys, node.start_mark.line + 1)
    if isinstance(node, yaml.SequenceNode):
        return [_plain(loader, item, (*keys, i), marks, shown, budget) for i, item in enumerate(node.value)]
    if not isinstance(node, yaml.MappingNode):
        return loader.construct_object(node, deep=True)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:  # duplicates among the keys written here (merged ones may repeat)
        if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
            line = key_node.start_mark.line + 1
            if key_node.value in seen:
                raise ConfigError(
                    _located(
                        shown,
                        {},
                        (*keys, key_node.value),
                        f"duplicate key (first at line {seen[key_node.value]}); keep one",
                        line,
                    )
                )
            seen[key_node.value] = line
    loader.flatten_mapping(node)
    out: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise ConfigError(_located(shown, {}, keys, f"key {key!r} is not text; quote it", line))
        marks[(*keys, key)] = line
        out[key] = _plain(loader, value_node, (*keys, key), marks, shown, budget)
    return out


@functools.lru_cache(maxsize=1)
def _schema_validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator  # for start-up speed (see top)

    schema = json.loads(package_text("crewbridge", "config_schema.json"))
    return Draft202012Validator(schema)


def config_schema() -> dict[str, Any]:
    """The JSON Schema crew.yaml is checked against."""
    schema = _schema_validator().schema
    assert isinstance(schema, dict)
    return schema


def _validate(data: dict[str, Any], marks: dict[Keys, int], shown: str) -> None:
    from jsonschema.exceptions import best_match  # for start-up speed (see top)

    error = best_match(_schema_validator().iter_errors(data))
    if error is not None:
        keys, message = _explain(error)
        raise ConfigError(_located(shown, marks, keys, message))


def _explain(error: ValidationError) -> tuple[Keys, str]:
    """The key path an error is about and its message, with the fix."""
    keys: Keys = tuple(error.absolute_path)
    kind = error.validator
    instance: Any = error.instance
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    expected: Any = error.validator_value
    if "propertyNames" in error.absolute_schema_path:  # the key itself is wrong
        return (*keys, instance), "not a valid name; names start with a letter and hold letters, digits, _ and -"
    if kind == "additionalProperties":
        known = list(schema.get("properties", {}))
        unknown = min(k for k in instance if k not in known)
        near = difflib.get_close_matches(unknown, known, n=1, cutoff=0.6)
        return (*keys, unknown), "unknown key; " + (
            f"did you mean '{near[0]}'?" if near else f"known keys: {', '.join(known)}"
        )
    if kind == "enum":
        near = difflib.get_close_matches(str(instance), [str(v) for v in schema["enum"]], n=1, cutoff=0.6)
        options = ", ".join(str(v) for v in schema["enum"])
        return keys, f"{_short(instance)} is not one of {options}" + (f"; did you mean '{near[0]}'?" if near else "")
    if kind == "required":
        missing = next(k for k in expected if k not in instance)
        message = f"'{missing}' is missing"
    elif kind == "oneOf":
        given = [k for k in ("command", "shell", "python") if k in instance]
        message = f"{' and '.join(given)} given together" if given else "no command, shell or python given"
    elif kind == "pattern":
        message = f"{_short(instance)} is not in the right form"
    elif kind == "type":
        types = expected if isinstance(expected, list) else [expected]
        message = f"{_short(instance)} is not of type {' or '.join(repr(t) for t in types)}"
    else:
        message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    hint = next(
        (e.schema["x-hint"] for e in _lineage(error) if isinstance(e.schema, dict) and "x-hint" in e.schema), None
    )
    return keys, f"{message}; {hint}" if hint else message


def _lineage(error: ValidationError) -> list[ValidationError]:
    out = []
    current: ValidationError | None = error
    while current is not None:
        out.append(current)
        current = current.parent  # type: ignore[assignment]
    return out


def _short(value: Any) -> str:
    if value is None:
        return "an empty value"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _located(shown: str, marks: dict[Keys, int], keys: Keys, message: str, line: int | None = None) -> str:
    """`file:line: key.path: message`; the line of the nearest key path that has one."""
    if line is None:
        for n in range(len(keys), -1, -1):
            if keys[:n] in marks:
                line = marks[keys[:n]]
                break
    dotted = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")
    return f"{shown}{f':{line}' if line else ''}: {dotted + ': ' if dotted else ''}{message}"


def _shown(path: Path, cwd: Path | None) -> str:
    if cwd is not None:
        try:
            return str(path.relative_to(cwd))
        except ValueError:
            pass
    return str(path)


def _build(data: dict[str, Any], marks: dict[Keys, int], path: Path, shown: str) -> Config:
    # For start-up speed (see top).
    from crewbridge.custom_tools import CommandTool
    from crewbridge.hooks import HookSpec
    from crewbridge.providers.generic import GenericSpec

    base = path.parent.absolute()
    config = Config(
        path=path,
        prefix=data.get("prefix", DEFAULT_PREFIX),
        agents=default_agents(),
        compact_catalogue=data.get("compact_catalogue"),
        plugins=data.get("plugins", True),
        transcripts=data.get("transcripts", True),
        sandbox=data.get("sandbox", "auto"),
        skills=[(base / os.path.expanduser(folder)).resolve() for folder in data.get("skills", [])],
        marks=marks,
        shown=shown,
    )

    @contextlib.contextmanager
    def located(keys: Keys) -> Iterator[None]:
        try:
            yield
        except CrewError as exc:  # the object's own check: put the file and line in front
            key = (exc.key,) if isinstance(exc, ConfigKeyError) else ()
            raise config.error((*keys, *key), str(exc)) from None

    for name, entry in data.get("providers", {}).items():
        with located(("providers", name)):
            config.providers[name] = GenericSpec(name=name, **entry)
    providers = sorted({*BUILTIN, *config.providers})
    for agent_id, entry in data.get("agents", {}).items():
        fields = {**entry, "provider": entry.get("provider", agent_id)}
        if fields["provider"] not in providers and fields["provider"] not in plugins():
            providers = sorted({*providers, *plugins()})
            key = ("agents", agent_id, "provider") if "provider" in entry else ("agents", agent_id)
            raise config.error(
                key,
                f"provider '{fields['provider']}' is not known; give provider: one of "
                f"{', '.join(providers)} (or add it under providers:)",
            )
        if "workdir" in fields:
            fields["workdir"] = str((base / os.path.expanduser(fields["workdir"])).resolve())
        config.agents[agent_id] = AgentSpec(id=agent_id, **fields)
    for agent_id, entry in data.get("agents", {}).items():
        for index, name in enumerate(entry.get("fallback", [])):
            if name not in config.agents or name == agent_id:
                others = ", ".join(a for a in config.agents if a != agent_id)
                raise config.error(
                    ("agents", agent_id, "fallback", index),
                    f"'{name}' is not another agent; a fallback names agents configured here: {others}",
                )
    for name, entry in data.get("tools", {}).items():
        schema = entry.get("schema", {"type": "object", "properties": {}, "additionalProperties": False})
        with located(("tools", name)):
            config.tools[name] = CommandTool(
                name=name,
                command=entry["command"],
                schema=schema,
                description=entry.get("description", ""),
                read_only=entry.get("read_only", False),
                timeout=entry.get("timeout"),
                needs_approval=entry.get("approval", False),
                base=base,
            )
        with located(("tools", name, "schema")):
            config.tools[name].tool()  # compiles the schema
    for event, items in data.get("hooks", {}).items():
        config.hooks[event] = []
        for i, item in enumerate(items):
            with located(("hooks", event, i)):
                config.hooks[event].append(HookSpec(event=event, base=base, **item))
    return config


def _bare_off(data: dict[str, Any]) -> None:
    """`sandbox: off` as written: YAML reads a bare off as false."""
    agents = data.get("agents")
    for entry in [data, *(agents.values() if isinstance(agents, dict) else [])]:
        if isinstance(entry, dict) and entry.get("sandbox") is False:
            entry["sandbox"] = "off"


# --- trust -------------------------------------------------------------------------------------------


def trust_config(path: Path) -> Path:
    """Remember that a person has read this crew.yaml as it is now; a later change needs trust again."""
    import hashlib  # for start-up speed: it loads OpenSSL, and most runs check no trust

    path = path.resolve()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    store = state_dir() / "trusted.json"
    known = _trusted(store)
    known[str(path)] = digest
    store.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = store.with_suffix(".tmp")
    temporary.write_text(json.dumps(known, indent=1, sort_keys=True), encoding="utf-8")
    temporary.replace(store)
    return path


def _trusted(store: Path) -> dict[str, str]:
    try:
        value = json.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _check_trust(path: Path, raw: bytes, data: dict[str, Any], marks: dict[Keys, int], shown: str) -> None:
    owner = path.stat().st_uid
    if owner not in (os.getuid(), 0):
        raise ConfigError(
            f"{shown} belongs to another user (uid {owner}), so crew does not use it; "
            f"pass --config {shown} to use it anyway, or remove it"
        )
    risky = _risky(data, path.parent.absolute())
    if not risky:
        return
    import hashlib  # for start-up speed: it loads OpenSSL, and most runs check no trust

    digest = hashlib.sha256(raw).hexdigest()
    if _trusted(state_dir() / "trusted.json").get(str(path.resolve())) == digest:
        return
    raise ConfigError(
        _located(
            shown,
            marks,
            risky,
            "this project file can run commands and is not trusted "
            "yet (or changed since); read it, then run `crew config trust`, or pass "
            f"--config {shown}",
        )
    )


def _risky(data: dict[str, Any], base: Path) -> Keys | None:
    """The first setting that runs commands, reaches outside the project or loosens the sandbox, or None."""
    for key in ("hooks", "tools", "providers"):
        if data.get(key):
            return (key,)
    if data.get("sandbox") == "off":
        return ("sandbox",)
    for agent_id, entry in data.get("agents", {}).items():
        if any(entry.get("options", {}).values()):
            return ("agents", agent_id, "options")
        if entry.get("sandbox") == "off":
            return ("agents", agent_id, "sandbox")
        if entry.get("sandbox_network"):
            return ("agents", agent_id, "sandbox_network")
        if "workdir" in entry:
            workdir = (base / os.path.expanduser(entry["workdir"])).resolve()
            if not workdir.is_relative_to(base.resolve()):
                return ("agents", agent_id, "workdir")
    return None
