"""Any other CLI, described by configuration: a command template, prompt on stdin or argv, text or jsonl."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crewbridge.providers.base import Decoder, JsonLineDecoder, Provider, Turn, as_text, base_urls

from crewbridge.base.decoded import Event, Failure, MessageEnd, Session, Text
from crewbridge.base.modes import Mode
from crewbridge.base.places import expand
from crewbridge.errors import ConfigKeyError
from crewbridge.sandbox import State

if TYPE_CHECKING:
    from crewbridge.sandbox.allowlist import Entry

SAMPLE = 160  # characters of an unreadable line quoted in the error


class TextDecoder:
    """Plain text output: every line is assistant text."""

    def decode(self, line: str) -> list[Event]:
        return [Text(line if line.endswith("\n") else line + "\n")]

    def end(self) -> list[Event]:
        return []


class JsonlDecoder(JsonLineDecoder):
    """JSON lines; the assistant text is at a dotted key (`message.text`, `*` for every item of a
    list: `message.content.*.text`), the session id at another. Output in which no line has text
    there is reported with a sample line, not taken for an empty answer."""

    def __init__(self, name: str, text_key: str, session_key: str | None = None, deltas: bool = False) -> None:
        self.name = name
        self.deltas = deltas  # each text is a piece of a message streamed in parts: no message end after it
        self.text_key = text_key
        self.text_path = text_key.split(".")
        self.session_path = session_key.split(".") if session_key else None
        self.read_text = False
        self.sample: str | None = None  # the first line, if it came before any text

    def decode(self, line: str | bytes) -> list[Event]:
        events = super().decode(line)
        if not self.read_text and self.sample is None and line.strip():
            self.sample = as_text(line).strip()
        return events

    def event(self, obj: dict[str, Any]) -> list[Event]:
        out: list[Event] = []
        if self.session_path and isinstance(sid := next(iter(_dig(obj, self.session_path)), None), str):
            out.append(Session(sid))
        texts = [text for text in _dig(obj, self.text_path) if isinstance(text, str)]
        if texts:
            self.read_text = True
            out += [Text("".join(texts))] if self.deltas else [Text("".join(texts)), MessageEnd()]
        return out

    def end(self) -> list[Event]:
        if self.read_text or self.sample is None:
            return []
        sample = self.sample if len(self.sample) <= SAMPLE else self.sample[: SAMPLE - 3] + "..."
        return [
            Failure(
                f"provider '{self.name}': no line of its output has text at text_key '{self.text_key}' "
                f"(format: jsonl); a line it wrote: {sample}; fix format or text_key in crew.yaml"
            )
        ]


def _fill(part: str, values: dict[str, str]) -> str:
    """Replace the known placeholders only: other braces in an argument are the user's own."""
    for key, value in values.items():
        part = part.replace(key, value)
    return part


def _dig(obj: Any, keys: list[str]) -> list[Any]:
    """The values at a dotted key path; `*` takes every item of a list (or value of a mapping)."""
    found = [obj]
    for key in keys:
        step: list[Any] = []
        for value in found:
            if key == "*" and isinstance(value, (list, dict)):
                step += list(value.values()) if isinstance(value, dict) else value
            elif isinstance(value, dict) and key in value:
                step.append(value[key])
        found = step
    return found


@dataclass
class GenericSpec:
    """A CLI described in crew.yaml under `providers:`."""

    name: str
    command: list[str]  # may hold {model} and {prompt}; {prompt} means the prompt goes in argv
    format: str = "text"  # text | jsonl
    text_key: str = "text"  # jsonl: where the assistant text is
    session_key: str | None = None  # jsonl: where a session id is
    deltas: bool = False  # jsonl: the text at text_key streams in pieces of one message
    resume: list[str] = field(default_factory=list)  # argv added to continue, may hold {session}
    model: str | None = None
    model_args: list[str] = field(default_factory=list)  # argv added when a model is known, holds {model}
    system_args: list[str] = field(default_factory=list)  # argv added for an agent's system_prompt: {system}
    options: dict[Mode, list[str]] = field(default_factory=dict)  # argv per mode: the read-only switch
    install_hint: str = ""
    env: dict[str, str] = field(default_factory=dict)
    probe: bool = True  # crew doctor runs its --version and --help (false: a CLI that would do more)
    state_dirs: list[str] = field(default_factory=list)  # data folders it writes (~, $VAR, ${VAR:-default})
    state_read_only: list[str] = field(default_factory=list)  # inside state_dirs: kept read-only
    # its state folder, seen through a view: {variable, default, within, data, private, copies: [names]}
    state_home: dict[str, Any] = field(default_factory=dict)
    endpoints: list[str] = field(default_factory=list)  # where it reaches its model: hosts, $VARIABLES of base URLs
    # base URLs its user set in its own configuration: [{file: path (~, $VAR), key: dotted path, * for each}]
    endpoints_from: list[dict[str, str]] = field(default_factory=list)
    login_env: list[str] = field(default_factory=list)  # the variables it logs in with (Provider.login_env)
    login_files: list[str] = field(default_factory=list)  # the files it logs in with (State.login): ~, $VAR

    def __post_init__(self) -> None:
        if not self.command:
            raise ConfigKeyError("command", "it is empty; give the CLI and its arguments, e.g. [llm, prompt]")
        if self.format not in ("text", "jsonl"):
            raise ConfigKeyError("format", f"'{self.format}' is not text or jsonl")
        for key, placeholder, example in (
            ("model_args", "{model}", '[--model, "{model}"]'),
            ("system_args", "{system}", '[--system, "{system}"]'),
        ):
            argv = getattr(self, key)
            if argv and not any(placeholder in part for part in argv):
                raise ConfigKeyError(key, f"holds no {placeholder}, so it would pass nothing; e.g. {example}")
        if self.format == "text":
            given = [key for key in ("session_key", "deltas") if getattr(self, key)]
            given += ["text_key"] if self.text_key != "text" else []
            if given:
                raise ConfigKeyError(given[0], "is read only from JSON lines; set format: jsonl, or remove it")
        for key in ("state_dirs", "state_read_only", "login_files"):
            for entry in getattr(self, key):
                if not entry.startswith(("/", "~", "$")):
                    raise ConfigKeyError(key, f"'{entry}' is not absolute; start it with /, ~ or a $VARIABLE")
        self._check_state_home()
        self._check_endpoints()
        if self.resume and not self.session_key:
            raise ConfigKeyError(
                "resume",
                "is never used without session_key (where the session id is in the output); give "
                "session_key, or remove resume and crew replays the conversation",
            )

    def _check_state_home(self) -> None:
        if not self.state_home:
            return
        default = self.state_home.get("default", "")
        if default and not default.startswith(("/", "~", "$")):
            raise ConfigKeyError(
                "state_home", f"default '{default}' is not absolute; start it with /, ~ or a $VARIABLE"
            )
        within = self.state_home.get("within", "")
        if "/" in within or within in (".", ".."):
            raise ConfigKeyError("state_home", f"within '{within}' is not one folder's name; e.g. .mycli")
        for key in ("data", "private"):
            for name in self.state_home.get(key, []):
                if name.startswith("/") or ".." in Path(name).parts:
                    raise ConfigKeyError("state_home", f"{key} '{name}' is not a name inside the folder; e.g. sessions")
        for name in self.state_home.get("copies", []):
            if "/" in name or name in (".", ".."):
                raise ConfigKeyError(
                    "state_home", f"copies '{name}' is not the name of a file in the folder; e.g. projects.json"
                )

    def _check_endpoints(self) -> None:
        from crewbridge.sandbox.allowlist import entry  # for start-up speed: a crew.yaml's provider only

        for host in self.endpoints:
            if not host.startswith("$"):
                try:
                    entry(host)
                except ValueError as exc:
                    raise ConfigKeyError("endpoints", str(exc)) from None
            elif not re.fullmatch(r"\$\w+", host):
                raise ConfigKeyError("endpoints", f"'{host}' is not a $VARIABLE; e.g. $OPENAI_BASE_URL")
        for source in self.endpoints_from:
            if not source.get("file", "").startswith(("/", "~", "$")) or not source.get("key"):
                raise ConfigKeyError(
                    "endpoints_from",
                    f"{source} needs an absolute file (/, ~ or a $VARIABLE) and a key, e.g. "
                    '{file: "~/.config/mycli/config.json", key: "providers.*.base_url"}',
                )


class GenericProvider(Provider):
    def __init__(self, spec: GenericSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.binary = spec.command[0]
        self.install_hint = spec.install_hint or f"install '{spec.command[0]}' and put it on PATH"
        self.resumable = bool(spec.resume and spec.session_key)
        self.prompt_on_stdin = not any("{prompt}" in part for part in spec.command)
        self.login_env = tuple(spec.login_env)

    def argv(self, turn: Turn) -> list[str]:
        model = turn.model or self.spec.model
        values = {
            "{model}": model or "",
            "{prompt}": turn.prompt,
            "{session}": turn.session_id or "",
            "{system}": turn.system_prompt or "",
        }
        parts = [
            *self.spec.command,
            *(self.spec.model_args if model else []),
            *(self.spec.system_args if turn.system_prompt else []),
            *self.spec.options.get(turn.mode, []),
            *(self.spec.resume if turn.session_id and self.resumable else []),
        ]
        return [_fill(part, values) for part in parts] + turn.options

    def decoder(self) -> Decoder:
        if self.spec.format == "jsonl":
            return JsonlDecoder(self.name, self.spec.text_key, self.spec.session_key, self.spec.deltas)
        return TextDecoder()

    def env(self) -> dict[str, str]:
        return dict(self.spec.env)

    def commands(self) -> list[list[str]]:
        return super().commands() if self.spec.probe else []

    def endpoints(self, env: Mapping[str, str]) -> list[Entry]:
        from crewbridge.sandbox.allowlist import entry  # for start-up speed: a run with a sandbox only

        hosts = [entry(host, f"{self.name}'s endpoints") for host in self.spec.endpoints if not host.startswith("$")]
        hosts += base_urls(env, [name[1:] for name in self.spec.endpoints if name.startswith("$")])
        for source in self.spec.endpoints_from:
            path = expand(source["file"], env)
            found = {f"{path}: {source['key']}": url for url in _configured(path, source["key"])} if path else {}
            hosts += base_urls(found, list(found))
        return hosts

    def state(self, env: Mapping[str, str]) -> State:
        def places(entries: list[str]) -> tuple[Path, ...]:
            return tuple(path for path in (expand(entry, env) for entry in entries) if path is not None)

        dirs, read_only = places(self.spec.state_dirs), places(self.spec.state_read_only)
        login = places(self.spec.login_files)
        home_spec = self.spec.state_home
        variable, within = home_spec.get("variable", ""), home_spec.get("within", "")
        holder = Path(env[variable]) if env.get(variable) else expand(home_spec.get("default", ""), env)
        if not home_spec or holder is None:
            return State(data=dirs, read_only=read_only, login=login)
        home = holder / within if within else holder
        return State(
            home=home,
            variable=variable,
            within=within,
            data=(*dirs, *(home / name for name in home_spec.get("data", []))),
            private=tuple(home_spec.get("private", [])),
            copies=tuple(home_spec.get("copies", [])),
            read_only=read_only,
            login=login,
        )


MAX_CONFIG = 1 << 20  # bytes of a CLI's own configuration file read for its base URLs


def _configured(path: Path, key: str) -> list[str]:
    """The text values at dotted `key` (* for each item) of the JSON or YAML file `path`; none
    when it cannot be read."""
    import yaml  # for start-up speed: a provider of crew.yaml's, whose yaml is loaded already

    try:
        with open(path, "rb") as file:
            data = yaml.safe_load(file.read(MAX_CONFIG))
    except (OSError, yaml.YAMLError, RecursionError):
        return []
    return [value for value in _dig(data, key.split(".")) if isinstance(value, str)]
