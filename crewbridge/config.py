"""Configuration: crew.yaml (agents, custom providers, tools, hooks, prefix), found, validated, loaded.

The files, in order: the user's ($XDG_CONFIG_HOME/crewbridge/crew.yaml, default ~/.config), the
project's (crew.yaml or .crew.yaml in the working directory or its nearest parent), the one named by
`--config`. They combine by the rules of crewbridge.base.config_layers: rules add up or narrow, so a
project file cannot drop the user's. Errors name the file, the line, the key and the fix:
`crew.yaml:7: agents.claude.timeout: 'soon' is not of type 'number'; give seconds, e.g. 120`.

A project file that can run commands (hooks, tools, providers, checks, CLI options, a working directory
outside the project), that is a link, or that loosens a rule is used only once a person has trusted
it (crewbridge.system.trust: its path as used, its content and the scripts it runs), or named it with
--config. Otherwise cloning a repository and running crew in it would run whatever its crew.yaml says.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.base.globs import DEFAULT_PREFIX, NATIVE, matches
from crewbridge.base.places import CONFIG_NAMES as CONFIG_NAMES
from crewbridge.base.places import config_dir as config_dir
from crewbridge.base.places import find_project_config as find_project_config
from crewbridge.base.places import state_dir as state_dir
from crewbridge.errors import AgentNotFound, ConfigError, ConfigKeyError, CrewError, UsageError
from crewbridge.providers import BUILTIN, load, names, plugins
from crewbridge.sandbox.hidden import Hiding

# For start-up speed, what only a crew.yaml needs (yaml, jsonschema, the rules that combine the
# files and locate their keys, command tools, hooks, custom providers) is imported where it is used:
# without a crew.yaml, none of it is; nor are the tools (crewbridge.toolkit.registry) before crew query's
# CLIs have started.
if TYPE_CHECKING:
    import yaml
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

    from crewbridge.base.config_layers import Combined, Keys, Layer, Origin, Setting, Source
    from crewbridge.providers.base import Provider
    from crewbridge.providers.generic import GenericSpec
    from crewbridge.sandbox.allowlist import Entry
    from crewbridge.system.trust import Fingerprint
    from crewbridge.toolkit.custom_tools import CommandTool
    from crewbridge.toolkit.hooks import HookSpec
    from crewbridge.toolkit.registry import ToolRegistry

BUILTIN_AGENTS = ("claude", "gemini", "codex", "demo")
MAX_NODES = 100_000  # YAML aliases can make a small file expand without end


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
    tools_via: str = (
        "text"  # text: the catalogue in the prompt; native: the CLI's own tool channel (crewbridge.toolkit.native)
    )
    sandbox: str | None = None  # auto | required | off: replaces the run's, where stricter (crewbridge.sandbox.level)
    sandbox_network: bool = False  # its commands reach network: allow's hosts inside the sandbox (else none)
    user_mcp_servers: bool = False  # its CLI also starts the MCP servers its user registered
    # allow, allow_commands and skills lists of later files (crewbridge.base.config_layers): a name must match these too
    narrowing: dict[str, list[list[str]]] = field(default_factory=dict)

    def allow_lists(self, key: str) -> list[list[str]]:
        """Every list of `key` (allow, allow_commands, skills) that a name must match, one per file
        that gave one. An empty allow or allow_commands list lets everything through, so it is left
        out; skills: [] lets no skill through."""
        own = getattr(self, key)
        lists = [*([] if own is None else [own]), *self.narrowing.get(key, [])]
        return lists if key == "skills" else [globs for globs in lists if globs]


@dataclass
class Config:
    path: Path | None = None  # the last file read (--config's, else the project's, else the user's)
    prefix: str = DEFAULT_PREFIX
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    providers: dict[str, GenericSpec] = field(default_factory=dict)  # by id
    hooks: dict[str, list[HookSpec]] = field(default_factory=dict)  # by event: before/after_tool_call
    compact_catalogue: bool | None = None  # None: compact when many tools
    tools: dict[str, CommandTool] = field(default_factory=dict)
    plugins: bool = True  # tools from the `crewbridge.tools` entry point group
    transcripts: bool = True
    skills: list[Path] = field(default_factory=list)  # skill folders crew.yaml names (crewbridge.base.skills)
    sandbox: str = "auto"  # the run's sandbox level (crewbridge.sandbox); --sandbox replaces it
    network: str = "allow"  # "allow": the sandboxes reach only what is allowed; "open": any host (--network)
    allowed: tuple[Entry, ...] = ()  # network: allow: hosts the agents reach besides each CLI's model API
    hide: list[str] = field(default_factory=list)  # sandbox.hide: more places the sandbox hides
    show: list[str] = field(default_factory=list)  # sandbox.show: places it leaves visible (trusted files)
    env_pass: list[str] = field(default_factory=list)  # env.pass: secret-named variables the CLIs get
    telemetry: dict[str, Any] = field(default_factory=dict)  # where runs' traces go (crewbridge.telemetry)
    check: tuple[str, ...] = ()  # check: the commands an execute run's change must pass (crewbridge.engine.gate)
    check_rounds: int | None = None  # check: {rounds: N}
    files: list[Source] = field(default_factory=list)  # the files read, in order
    origins: dict[Keys, Origin] = field(default_factory=dict, repr=False)  # key path → where it was written
    settings: dict[str, Any] = field(default_factory=dict, repr=False)  # the files' settings, combined

    @property
    def shown(self) -> str:
        """How messages name the configuration: its files."""
        return ", ".join(source.shown for source in self.files) or "crew.yaml"

    def agent(self, agent_id: str) -> AgentSpec:
        if agent_id not in self.agents:
            near = _nearest(agent_id, list(self.agents))
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise AgentNotFound(f"agent '{agent_id}' not found; {hint}configured agents: {', '.join(self.agents)}")
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

    @functools.cached_property
    def hiding(self) -> Hiding:
        """What the sandbox hides from the agents' CLIs and commands (crewbridge.sandbox.hidden): its
        list with `sandbox.hide`, less `sandbox.show`, and the login files of every CLI crew knows
        here (a broken provider's are left to its own error)."""
        names = dict.fromkeys([*BUILTIN, *self.providers, *(agent.provider for agent in self.agents.values())])
        logins = []
        for name in names:
            with contextlib.suppress(CrewError):
                logins.append(self.provider(name).state)
        return Hiding(tuple(self.hide), tuple(self.show), tuple(logins))

    def provider_env(self) -> dict[str, str]:
        """The variables crew.yaml's providers add to their CLIs' environment (for redaction)."""
        return {name: value for spec in self.providers.values() for name, value in spec.env.items()}

    def registry(self) -> ToolRegistry:
        """Every tool: the built-ins, the command tools of crew.yaml, and installed plugin tools.
        Globs in allow/deny/approval and hook `tools:` must each match a tool (a typo in a deny list
        would otherwise deny nothing)."""
        # For start-up speed: the tools are built after the agents' CLIs have started.
        from crewbridge.toolkit.custom_tools import plugin_tools
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
                    f"one in {self.file_of(('tools', tool.name))}, or set plugins: false"
                )
            registry.register(tool)
        self._check_globs(registry)
        return registry

    def _check_globs(self, registry: ToolRegistry) -> None:
        lists: list[tuple[Keys, list[str]]] = [
            (("agents", agent.id, key), getattr(agent, key))
            for agent in self.agents.values()
            for key in ("deny", "approval")
        ]
        lists += [
            (("agents", agent.id, "allow", i), globs)
            for agent in self.agents.values()
            for i, globs in enumerate([agent.allow, *agent.narrowing.get("allow", [])])
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
                    near = _nearest(pattern, names)
                    hint = f"did you mean '{near[0]}'?" if near else f"tools: {', '.join(names)}"
                    raise self.error((*keys, i), f"'{pattern}' matches no tool; {hint}")

    def error(self, keys: Keys, message: str) -> ConfigError:
        """A ConfigError that names the file `keys` was written in, its line and its key path there."""
        from crewbridge.base import config_layers as layers  # for start-up speed (see top)

        found = layers.nearest(self.origins, keys)
        if found is None:
            return ConfigError(_located(self.shown, {}, keys, message))
        return ConfigError(layers.located(found[0], found[1], message))

    def file_of(self, keys: Keys) -> str:
        """The file that wrote `keys` (or the nearest key path above it)."""
        from crewbridge.base import config_layers as layers  # for start-up speed (see top)

        found = layers.nearest(self.origins, keys)
        return found[0].source.shown if found else self.shown

    def described(self) -> list[Setting]:
        """Every setting in force with the file and line it came from (`crew config show`); each
        agent's provider and profile, and the top-level switches, also when they are the defaults."""
        from crewbridge.base import config_layers as layers  # for start-up speed (see top)

        defaults = {key: getattr(self, key) for key in ("prefix", "transcripts", "plugins")}
        data = {**defaults, **self.settings}
        data["agents"] = {
            agent.id: {"provider": agent.provider, "profile": agent.profile, **data.get("agents", {}).get(agent.id, {})}
            for agent in self.agents.values()
        }
        return layers.settings(data, self.origins)


def default_agents() -> dict[str, AgentSpec]:
    return {name: AgentSpec(id=name, provider=name) for name in BUILTIN_AGENTS}


def load_config(explicit: Path | None = None, cwd: Path | None = None) -> Config:
    """The configuration in force: the user's file, the project's, --config's, combined (see the
    module docstring)."""
    cwd = Path(cwd or Path.cwd()).absolute()
    found: list[tuple[Path, str]] = []
    user = config_dir() / "crew.yaml"
    if user.is_file():
        found.append((user, "user"))
    project = find_project_config(cwd)
    if project is not None:
        found.append((project, "project"))
    if explicit is not None:
        path = cwd / Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"config file {explicit} not found; check the --config path")
        found.append((path, "config"))
    if not found:
        return Config(agents=default_agents())
    read: dict[Path, tuple[Path, str]] = {}
    for path, kind in found:  # a file found twice is read once, in its first place; named, it is trusted
        first = read.setdefault(path.resolve(), (path, kind))
        if kind != "project" and first[1] == "project":
            read[path.resolve()] = (first[0], kind)
    return _combined([_layer(path, kind, cwd) for path, kind in read.values()])


def read_config(path: Path, cwd: Path | None = None, *, trusted: bool = True) -> Config:
    """One file alone. `trusted=False` (a file found by the directory search) applies the checks of
    a project file: it must be this user's, and trusted if it runs commands or is a link."""
    return _combined([_layer(path, "config" if trusted else "project", cwd)])


def _layer(path: Path, kind: str, cwd: Path | None) -> Layer:
    """One file read and validated; a project file's trust checked."""
    from crewbridge.base.config_layers import Layer, Source  # for start-up speed (see top)

    shown = _shown(path, cwd)
    raw, data, marks = _read(path, shown)
    source = Source(path, shown, kind, path.resolve().parent)
    if kind == "project":
        source.vouch = functools.partial(_doubt, path, raw, data)
        _check_project(source, data, marks)
    return Layer(source, data, marks)


def _read(path: Path, shown: str) -> tuple[bytes, dict[str, Any], dict[Keys, int]]:
    """A file's bytes, its valid settings and the line of each key path."""
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
    return raw, data, marks


def _combined(read: list[Layer]) -> Config:
    from crewbridge.base import config_layers as layers  # for start-up speed (see top)

    combined = layers.combine(read, _baseline)
    return _build(combined, [layer.source for layer in read])


def _baseline(keys: Keys) -> Any:
    """The default of a setting no file gives: an agent's from AgentSpec, the others from Config;
    an agent's sandbox level, which inherits the top level's, from Config (so that an agent's `off`
    is looser than no setting at all)."""
    from_config = keys[0] != "agents" or keys[2] == "sandbox"
    name = "sandbox" if "sandbox" in keys else keys[-1] if from_config else keys[2]
    default = (Config if from_config else AgentSpec).__dataclass_fields__[name]
    return default.default_factory() if callable(default.default_factory) else default.default


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

    from crewbridge.base.templates import package_text  # for start-up speed (see top)

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
        near = _nearest(unknown, known)
        return (*keys, unknown), "unknown key; " + (
            f"did you mean '{near[0]}'?" if near else f"known keys: {', '.join(known)}"
        )
    if kind == "enum":
        near = _nearest(str(instance), [str(v) for v in schema["enum"]])
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
    from crewbridge.base.config_layers import prefixed  # for start-up speed (see top)

    if line is None:
        for n in range(len(keys), -1, -1):
            if keys[:n] in marks:
                line = marks[keys[:n]]
                break
    return f"{shown}{f':{line}' if line else ''}: {prefixed(keys)}{message}"


def _shown(path: Path, cwd: Path | None) -> str:
    if cwd is not None:
        try:
            return str(path.relative_to(cwd))
        except ValueError:
            pass
    return str(path)


def _build(combined: Combined, files: list[Source]) -> Config:
    data = combined.data
    config = Config(
        path=files[-1].path,
        prefix=data.get("prefix", DEFAULT_PREFIX),
        agents=default_agents(),
        compact_catalogue=data.get("compact_catalogue"),
        plugins=data.get("plugins", True),
        transcripts=data.get("transcripts", True),
        sandbox=data.get("sandbox", {}).get("level", "auto"),
        hide=data.get("sandbox", {}).get("hide", []),
        show=data.get("sandbox", {}).get("show", []),
        env_pass=data.get("env", {}).get("pass", []),
        telemetry=data.get("telemetry", {}),
        files=files,
        origins=combined.origins,
        settings=data,
    )
    built = _Built(config, combined)
    config.skills = [
        (built.base(("skills", i)) / os.path.expanduser(folder)).resolve()
        for i, folder in enumerate(data.get("skills", []))
    ]
    built.network(data.get("network"))
    config.check, config.check_rounds = _check(data.get("check"))
    built.providers(data.get("providers", {}))
    built.agents(data.get("agents", {}))
    built.tools(data.get("tools", {}))
    built.hooks(data.get("hooks", {}))
    return config


def _check(given: str | list[str] | dict[str, Any] | None) -> tuple[tuple[str, ...], int | None]:
    """`check:` as written (a command, a list, or {run, rounds}; the schema checked it): its commands
    and rounds."""
    run, rounds = (given.get("run"), given.get("rounds")) if isinstance(given, dict) else (given, None)
    return (run,) if isinstance(run, str) else tuple(run or ()), rounds


class _Built:
    """The objects of a Config, built from its merged files' data; each error names the file and
    line of the key it is about."""

    def __init__(self, config: Config, combined: Combined) -> None:
        self.config, self.combined = config, combined

    def base(self, keys: Keys) -> Path:
        """The folder relative paths at `keys` start at: that of the file they were written in."""
        return self.combined.origins[keys].source.base

    @contextlib.contextmanager
    def located(self, keys: Keys) -> Iterator[None]:
        try:
            yield
        except CrewError as exc:  # the object's own check: put the file and line in front
            key = (exc.key,) if isinstance(exc, ConfigKeyError) else ()
            raise self.config.error((*keys, *key), str(exc)) from None

    def network(self, network: str | dict[str, Any] | None) -> None:
        from crewbridge.sandbox.allowlist import entry  # for start-up speed (see top)

        if isinstance(network, str):  # the schema's one word: open
            self.config.network = network
            return
        allowed = []
        for i, text in enumerate((network or {}).get("allow", [])):
            try:
                allowed.append(entry(text, "network: allow"))
            except ValueError as exc:
                raise self.config.error(("network", "allow", i), str(exc)) from None
        self.config.allowed = tuple(dict.fromkeys(allowed))  # each once, though several files list it

    def providers(self, entries: dict[str, Any]) -> None:
        from crewbridge.providers.generic import GenericSpec  # for start-up speed (see top)

        for name, entry in entries.items():
            with self.located(("providers", name)):
                self.config.providers[name] = GenericSpec(name=name, **entry)

    def agents(self, entries: dict[str, Any]) -> None:
        from crewbridge.base.config_layers import AGENT, NARROW  # for start-up speed (see top)

        providers = sorted({*BUILTIN, *self.config.providers})
        narrowing = [key for key, rule in AGENT.items() if rule is NARROW]
        for agent_id, entry in entries.items():
            fields = {**entry, "provider": entry.get("provider", agent_id)}
            if fields["provider"] not in providers and fields["provider"] not in plugins():
                providers = sorted({*providers, *plugins()})
                key = ("agents", agent_id, "provider") if "provider" in entry else ("agents", agent_id)
                raise self.config.error(
                    key,
                    f"provider '{fields['provider']}' is not known; give provider: one of "
                    f"{', '.join(providers)} (or add it under providers:)",
                )
            if "workdir" in fields:
                folder = self.base(("agents", agent_id, "workdir")) / os.path.expanduser(fields["workdir"])
                fields["workdir"] = str(folder.resolve())
            lists = {key: fields.pop(key) for key in narrowing if key in fields}  # one list per file
            fields.update({key: globs[0] for key, globs in lists.items()})
            fields["narrowing"] = {key: globs[1:] for key, globs in lists.items() if globs[1:]}
            self.config.agents[agent_id] = AgentSpec(id=agent_id, **fields)
        for agent_id, entry in entries.items():
            for index, name in enumerate(entry.get("fallback", [])):
                if name not in self.config.agents or name == agent_id:
                    others = ", ".join(a for a in self.config.agents if a != agent_id)
                    raise self.config.error(
                        ("agents", agent_id, "fallback", index),
                        f"'{name}' is not another agent; a fallback names agents configured here: {others}",
                    )

    def tools(self, entries: dict[str, Any]) -> None:
        from crewbridge.toolkit.custom_tools import CommandTool  # for start-up speed (see top)

        for name, entry in entries.items():
            schema = entry.get("schema", {"type": "object", "properties": {}, "additionalProperties": False})
            with self.located(("tools", name)):
                self.config.tools[name] = CommandTool(
                    name=name,
                    command=entry["command"],
                    schema=schema,
                    description=entry.get("description", ""),
                    read_only=entry.get("read_only", False),
                    timeout=entry.get("timeout"),
                    needs_approval=entry.get("approval", False),
                    base=self.base(("tools", name)),
                )
            with self.located(("tools", name, "schema")):
                self.config.tools[name].tool()  # compiles the schema

    def hooks(self, entries: dict[str, Any]) -> None:
        from crewbridge.toolkit.hooks import HookSpec  # for start-up speed (see top)

        for event, items in entries.items():
            self.config.hooks[event] = []
            for i, item in enumerate(items):
                with self.located(("hooks", event, i)):
                    self.config.hooks[event].append(HookSpec(event=event, base=self.base(("hooks", event, i)), **item))


def _bare_off(data: dict[str, Any]) -> None:
    """`sandbox: off` as written: YAML reads a bare off as false."""
    agents, top = data.get("agents"), data.get("sandbox")
    for entry, key in [
        (data, "sandbox"),
        (top, "level"),
        *((agent, "sandbox") for agent in (agents.values() if isinstance(agents, dict) else [])),
    ]:
        if isinstance(entry, dict) and entry.get(key) is False:
            entry[key] = "off"


# --- trust -------------------------------------------------------------------------------------------


def trust_config(path: Path, cwd: Path | None = None) -> Fingerprint:
    """Remember that a person has read this crew.yaml, through the path given (a link stays the
    link), with the scripts it runs, as they are now; a later change needs trust again."""
    from crewbridge.system import trust  # for start-up speed: most runs check no trust

    raw, data, _ = _read(path, _shown(path, cwd))
    found = trust.fingerprint(path, raw, data)
    trust.trust(found)
    return found


def _doubt(path: Path, raw: bytes, data: dict[str, Any]) -> tuple[Keys, str] | None:
    from crewbridge.system import trust  # for start-up speed: most runs check no trust

    return trust.refusal(trust.fingerprint(path, raw, data))


def _check_project(source: Source, data: dict[str, Any], marks: dict[Keys, int]) -> None:
    """A project file must be this user's; one that is a link or can run commands, trusted."""
    path, shown = source.path, source.shown
    owner = path.stat().st_uid
    if owner not in (os.getuid(), 0):
        raise ConfigError(
            f"{shown} belongs to another user (uid {owner}), so crew does not use it; "
            f"pass --config {shown} to use it anyway, or remove it"
        )
    if path.is_symlink():
        why: tuple[Keys, str] | None = ((), f"is a link to {path.resolve()}")
    else:
        why = _risky(data, source.base, path.absolute().parent)
    if why is None or source.doubt is None:
        return
    keys, reason = source.doubt
    message = (
        f"this project file {why[1]} and {reason}; read it, then run `crew config trust`, or pass --config {shown}"
    )
    keys = keys or why[0]
    raise ConfigError(_located(shown, marks if keys else {}, keys, message))


def _risky(data: dict[str, Any], base: Path, project: Path) -> tuple[Keys, str] | None:
    """The first setting that runs commands or reaches outside the `project` folder, and which of
    the two it does; or None. `base`: the folder relative paths start at."""

    def outside(folder: str) -> bool:
        return not (base / os.path.expanduser(folder)).resolve().is_relative_to(project.resolve())

    for key in ("hooks", "tools", "providers", "check"):
        if data.get(key):
            return (key,), "can run commands"
    sandbox, env = data.get("sandbox"), data.get("env", {})
    if isinstance(sandbox, dict) and sandbox.get("show"):
        return ("sandbox", "show"), "shows the agents what the sandbox hides"
    if env.get("pass"):
        return ("env", "pass"), "hands secrets to the agents' CLIs"
    if any(value not in (None, False) for value in data.get("telemetry", {}).values()):
        return ("telemetry",), "sends the runs' traces to a collector"
    for agent_id, entry in data.get("agents", {}).items():
        if any(entry.get("options", {}).values()):
            return ("agents", agent_id, "options"), "can run commands"
        if "workdir" in entry and outside(entry["workdir"]):
            return ("agents", agent_id, "workdir"), "reaches outside its folder"
    for i, folder in enumerate(data.get("skills", [])):
        if outside(folder):
            return ("skills", i), "reaches outside its folder"
    return None


def _nearest(word: str, choices: list[str]) -> list[str]:
    """The choice closest to a misspelt `word` (at most one; difflib's cutoff)."""
    import difflib  # for start-up speed: only a name that is not known needs it

    return difflib.get_close_matches(word, choices, n=1)
