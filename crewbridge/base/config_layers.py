"""How configuration files combine: the user's, then the project's, then the one --config names.

Each key has one rule, declared in TOP and AGENT below (a test checks that every key of the schema
has one, so a new key cannot be forgotten):

- OVERRIDE: a later file's value replaces the earlier one (a model, a timeout, a prefix; a provider
  or a command tool by name, whole).
- ACCUMULATE: lists add up (deny, deny_commands, approval, hooks, skill folders). No file removes
  what an earlier one put there: the user's rules hold, whatever the project says.
- NARROW: each file's list must match (allow, allow_commands, an agent's skills). A later list can
  only narrow what the earlier ones let through: a name passes when it matches every list.
- Within: a mapping of fixed keys (`sandbox: {level, hide, show}`), each by its own rule.
- HOSTS (`network:`): `open`, or `allow:` lists that add up; a file that is not trusted may only
  narrow them (its list, each host of which the files before allow), never open them.
- stricter(loosest, …, strictest): a later file may only move the value toward the strict end,
  unless it is trusted (the user's file, --config, a project file after `crew config trust`).
  LIMIT is that rule for numbers: a lower limit is stricter, no limit is the loosest. A key that
  is not set (None) is the loosest for both. A new key that may only get stricter is one line
  here; its default is the dataclass default (config._baseline), so an agent-level key that
  inherits a top-level one (an agent's sandbox) must have the inherited value as its baseline, not None.

Every value keeps where it came from (`Origin`: file, line, and its key path in that file), for
error messages and `crew config show`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crewbridge.errors import ConfigError

Keys = tuple[Any, ...]  # a key path: ("agents", "claude", "deny", 0)
Doubt = tuple[Keys, str]  # why a file is not trusted: the key path it is about (or ()), and the reason


@dataclass(frozen=True)
class Rule:
    kind: str  # override | accumulate | narrow | stricter
    order: tuple[Any, ...] = ()  # stricter: the values from the loosest to the strictest; () for numbers


@dataclass(frozen=True)
class Each:
    """A mapping of names (agents, tools, hook events), each entry combined by `rule`."""

    rule: Rule | Table


@dataclass(frozen=True)
class Within:
    """A mapping of fixed keys (sandbox: level, hide, show), each combined by its rule in `table`;
    a file may give the `shorthand` key's value alone (`sandbox: required` is `sandbox: {level:
    required}`), and its messages then name the key as written."""

    table: Table
    shorthand: str = ""


Table = dict[str, "Rule | Each | Within"]

OVERRIDE = Rule("override")
ACCUMULATE = Rule("accumulate")
NARROW = Rule("narrow")
LIMIT = Rule("stricter")  # numbers: lower is stricter, none is the loosest
HOSTS = Rule("hosts")  # network: open, or allow lists that add up; narrowed only by a file not trusted


def stricter(*order: Any) -> Rule:
    """A value that a file that is not trusted may only move toward the end of `order`."""
    return Rule("stricter", order)


AGENT: Table = {
    "provider": OVERRIDE,
    "model": OVERRIDE,
    "system_prompt": OVERRIDE,
    "options": OVERRIDE,
    "profile": stricter("full", "coding", "read-only"),
    "allow": NARROW,
    "deny": ACCUMULATE,
    "approval": ACCUMULATE,
    "deny_commands": ACCUMULATE,
    "allow_commands": NARROW,
    "skills": NARROW,
    "workdir": OVERRIDE,
    "timeout": OVERRIDE,
    "fallback": OVERRIDE,
    "max_cost": LIMIT,
    "max_tokens": LIMIT,
    "tools_via": OVERRIDE,
    "sandbox": stricter("off", "auto", "required"),  # its baseline is the top level's (config._baseline)
    "sandbox_network": stricter(True, False),
    "user_mcp_servers": stricter(True, False),  # programs of the user's own, started in each run
}

TOP: Table = {
    "prefix": OVERRIDE,
    "compact_catalogue": OVERRIDE,
    "skills": ACCUMULATE,
    "transcripts": stricter(False, True),  # the user's record of what ran
    "plugins": stricter(True, False),  # tools from installed packages: their code is imported
    "sandbox": Within(
        {
            "level": stricter("off", "auto", "required"),
            "hide": ACCUMULATE,  # more places the sandbox hides (crewbridge.sandbox.hidden)
            "show": ACCUMULATE,  # places it leaves visible: a project file must be trusted (config._risky)
        },
        shorthand="level",
    ),
    "env": Within({"pass": ACCUMULATE}),  # variables the CLIs get although secret-named: trusted files only
    "network": HOSTS,
    "telemetry": Within(  # where the traces go: a project file that sets it must be trusted (config._risky)
        dict.fromkeys(
            ("enabled", "endpoint", "protocol", "headers", "service_name", "resource", "capture_content", "exit_wait"),
            OVERRIDE,
        )
    ),
    "check": OVERRIDE,  # commands: a project file must be trusted (config._risky)
    "agents": Each(AGENT),
    "providers": Each(OVERRIDE),
    "tools": Each(OVERRIDE),
    "hooks": Each(ACCUMULATE),
}


@dataclass(eq=False)
class Source:
    """One configuration file."""

    path: Path  # as crew found it (a link stays the link)
    shown: str  # how messages name it
    kind: str  # user | project | config (named by --config)
    base: Path  # the folder of the file it leads to: its relative paths start there
    vouch: Callable[[], Doubt | None] | None = None  # a project file: why it is not trusted, or None

    @functools.cached_property
    def doubt(self) -> Doubt | None:
        """Why this file is not trusted, or None (asked once: it may hash the file and its scripts)."""
        return self.vouch() if self.vouch is not None else None

    @property
    def trusted(self) -> bool:
        return self.doubt is None


@dataclass(frozen=True)
class Origin:
    """Where a value was written: the file, the line and the key path in that file."""

    source: Source
    line: int | None
    keys: Keys

    def __str__(self) -> str:
        return f"{self.source.shown}:{self.line}" if self.line else self.source.shown


@dataclass
class Layer:
    """A file's validated settings and the line of each key path."""

    source: Source
    data: dict[str, Any]
    marks: dict[Keys, int]


@dataclass
class Combined:
    data: dict[str, Any]  # shaped as one file's, except that a NARROW key holds a list of lists
    origins: dict[Keys, Origin]  # key path in `data` → where it was written


def combine(layers: list[Layer], baseline: Callable[[Keys], Any]) -> Combined:
    """The files' settings combined in order by the rules of TOP. `baseline(keys)`: the value a
    stricter key has when no file sets it. ConfigError when a file that is not trusted loosens one."""
    out = Combined({}, {})
    for layer in layers:
        _Merge(layer, out, baseline).table(TOP, out.data, layer.data, ())
    return out


class _Merge:
    def __init__(self, layer: Layer, out: Combined, baseline: Callable[[Keys], Any]) -> None:
        self.layer = layer
        self.out = out
        self.baseline = baseline
        self.children: dict[Keys, list[Keys]] = {}
        for keys in layer.marks:
            if keys:
                self.children.setdefault(keys[:-1], []).append(keys)

    def table(self, table: Table, into: dict[str, Any], data: dict[str, Any], keys: Keys) -> None:
        for key, value in data.items():
            rule, here = table[key], (*keys, key)
            if isinstance(rule, Within):
                self.within(rule, into.setdefault(key, {}), value, here)
                continue
            if not isinstance(rule, Each):
                self.apply(rule, into, key, value, here)
                continue
            self.note(here, here)
            entries = into.setdefault(key, {})
            for name, item in value.items():
                if isinstance(rule.rule, Rule):
                    self.apply(rule.rule, entries, name, item, (*here, name))
                else:
                    self.note((*here, name), (*here, name))
                    self.table(rule.rule, entries.setdefault(name, {}), item, (*here, name))

    def within(self, rule: Within, into: dict[str, Any], value: Any, here: Keys) -> None:
        """A Within's keys combined by their rules; a value given alone is its shorthand key's,
        named as written (`sandbox`, not `sandbox.level`)."""
        self.note(here, here)
        if isinstance(value, dict):
            self.table(rule.table, into, value, here)
            return
        inner = rule.table[rule.shorthand]
        assert isinstance(inner, Rule)
        self.apply(inner, into, rule.shorthand, value, here, (*here, rule.shorthand))

    def apply(self, rule: Rule, into: dict[str, Any], key: str, value: Any, here: Keys, merged: Keys = ()) -> None:
        """`value`, written at `here`, combined into `into[key]` by `rule`; its origin noted at
        `merged` (default: `here`)."""
        merged = merged or here
        if rule.kind == "accumulate":
            start = len(into.get(key, []))
            into[key] = [*into.get(key, []), *value]
            self.note(here, here)
            for i in range(len(value)):
                self.copy((*here, i), (*here, start + i))
        elif rule.kind == "hosts":
            self.hosts(into, key, value, here)
        elif rule.kind == "narrow":
            into[key] = [*into.get(key, []), value]
            self.copy(here, (*here, len(into[key]) - 1))
        else:
            if rule.kind == "stricter":
                before = into[key] if key in into else self.baseline(merged)
                if _rank(rule, value) < _rank(rule, before) and not self.layer.source.trusted:
                    self.refuse_loosening(value, before, here, merged)
            into[key] = value
            self.copy(here, merged)

    def hosts(self, into: dict[str, Any], key: str, value: Any, here: Keys) -> None:
        """`network:`: a trusted file opens it, or adds its hosts; one that is not trusted may only
        narrow it (its list alone, every host of which the files before allow)."""
        before = into.get(key)
        start = 0
        if not self.layer.source.trusted:
            wider = _wider(before, value)
            if wider is not None:
                origin = self.out.origins.get(here)
                where = f"allowed by {origin}" if origin else "allowed"
                raise ConfigError(
                    located(
                        Origin(self.layer.source, self.layer.marks.get(wider[0]), wider[0]),
                        (),
                        f"{wider[1]} is not {where}; a project file may only narrow the network until "
                        f"you trust it (it {_reason(self.layer.source)}): read it, then run `crew config trust`",
                    )
                )
            into[key] = value
        elif value == "open" or before in (None, "open"):
            into[key] = value
        else:
            start = len(before.get("allow", []))
            into[key] = {"allow": [*before.get("allow", []), *value.get("allow", [])]}
        self.note(here, here)
        if isinstance(value, dict) and "allow" in value:
            self.note((*here, "allow"), (*here, "allow"))
            for i in range(len(value["allow"])):
                self.copy((*here, "allow", i), (*here, "allow", start + i))

    def refuse_loosening(self, value: Any, before: Any, here: Keys, merged: Keys) -> None:
        origin = self.out.origins.get(merged)
        where = f"set in {origin}" if origin else "the default"
        raise ConfigError(
            located(
                Origin(self.layer.source, self.layer.marks.get(here), here),
                (),
                f"{value!r} is looser than {before!r} ({where}); a project file may only make it stricter "
                f"until you trust it (it {_reason(self.layer.source)}): read it, then run `crew config trust`",
            )
        )

    def note(self, written: Keys, merged: Keys) -> None:
        self.out.origins[merged] = Origin(self.layer.source, self.layer.marks.get(written), written)

    def copy(self, written: Keys, merged: Keys) -> None:
        """The origin of `written` and of every key path under it, at `merged`."""
        stack = [(written, merged)]
        while stack:
            source, target = stack.pop()
            self.note(source, target)
            stack += [(child, (*target, child[-1])) for child in self.children.get(source, [])]


def _wider(before: Any, value: Any) -> tuple[Keys, str] | None:
    """What of `network:` value `value` the files before (`before`) do not allow, as its key path
    and a description; None when it only narrows them."""
    if before == "open":
        return None
    if value == "open":
        return ("network",), "network: open"
    from crewbridge.sandbox.allowlist import AllowList, entry  # for start-up speed: a project's network: only

    try:
        allowed = AllowList(tuple(entry(text) for text in (before or {}).get("allow", [])))
        for i, text in enumerate(value.get("allow", [])):
            wanted = entry(text)
            if wanted in allowed.entries or (
                not wanted.wildcard and all(allowed.find(wanted.host, port) for port in wanted.ports or (443, 80))
            ):
                continue
            return ("network", "allow", i), f"'{text}'"
    except ValueError:
        return None  # the file's own check names it (config._Built)
    return None


def _reason(source: Source) -> str:
    return source.doubt[1] if source.doubt else "is trusted"


def _rank(rule: Rule, value: Any) -> float:
    """Higher is stricter; a value not set (None) is the loosest."""
    if value is None:
        return -math.inf
    return rule.order.index(value) if rule.order else -value


def located(origin: Origin, rest: Keys, message: str) -> str:
    """`file:line: key.path: message` for the key path `rest` under `origin`'s."""
    return f"{origin}: {prefixed((*origin.keys, *rest))}{message}"


def prefixed(keys: Keys) -> str:
    """`agents.claude.deny[1]: `, or "" for no keys: what goes before a message about `keys`."""
    dotted = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")
    return f"{dotted}: " if dotted else ""


def nearest(origins: dict[Keys, Origin], keys: Keys) -> tuple[Origin, Keys] | None:
    """The origin of `keys` or of the nearest key path above it, and the rest of `keys` below that."""
    for n in range(len(keys), -1, -1):
        if keys[:n] in origins:
            return origins[keys[:n]], keys[n:]
    return None


# --- what `crew config show` lists --------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    key: str  # dotted, without list indices: each entry of a rule list is a Setting of its own
    value: Any
    origin: Origin | None  # None: a default


def settings(data: dict[str, Any], origins: dict[Keys, Origin]) -> list[Setting]:
    """Every value of combined `data` with its origin; each entry of an accumulated list and each
    file's narrowing list apart."""
    return list(_settings(TOP, data, (), origins))


def _settings(table: Table, data: dict[str, Any], keys: Keys, origins: dict[Keys, Origin]) -> Iterator[Setting]:
    for key, value in data.items():
        rule, here = table[key], (*keys, key)
        if isinstance(rule, Within):
            yield from _settings(rule.table, value, here, origins)
        elif isinstance(rule, Each):
            for name, item in value.items():
                if isinstance(rule.rule, Rule):
                    yield from _values(rule.rule, item, (*here, name), origins)
                else:
                    yield from _settings(rule.rule, item, (*here, name), origins)
        else:
            yield from _values(rule, value, here, origins)


def _values(rule: Rule, value: Any, here: Keys, origins: dict[Keys, Origin]) -> Iterator[Setting]:
    dotted = ".".join(str(k) for k in here)
    if rule.kind in ("accumulate", "narrow"):
        for i, item in enumerate(value):
            yield Setting(dotted, item, origins.get((*here, i)))
    else:
        yield Setting(dotted, value, origins.get(here))


def shown_text(files: list[Source], described: list[Setting]) -> str:
    """`crew config show`: the files in order, then each setting with the file and line it came from."""
    lines = ["files, in order (rules add up or narrow; for other settings the later file wins):"]
    for source in files or []:
        trust = "" if source.kind != "project" else "  (trusted)" if source.trusted else "  (not trusted: rules only)"
        lines.append(f"  {source.kind:<8} {source.path}{trust}")
    if not files:
        lines.append("  none: the built-in agents and defaults")
    rows = []
    for setting in described:
        rows.append((f"{setting.key}: {_flow(setting.value)}", str(setting.origin) if setting.origin else "default"))
    width = min(max((len(row[0]) for row in rows), default=0), 70)
    lines += ["", *(f"{left:<{width}}  {right}" for left, right in rows)]
    return "\n".join(lines) + "\n"


def _flow(value: Any) -> str:
    """A value as YAML's flow style writes it, near enough to read: [a, b], {k: v}."""
    import json

    if isinstance(value, list):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {_flow(item)}" for key, item in value.items()) + "}"
    if isinstance(value, str) and value and value.strip() == value and value.isprintable():
        return value
    return json.dumps(value, ensure_ascii=False)


def shown_json(files: list[Source], described: list[Setting]) -> dict[str, Any]:
    """`crew config show --json`: the same as data."""
    return {
        "files": [{"path": str(s.path), "kind": s.kind, "trusted": s.trusted, "base": str(s.base)} for s in files],
        "settings": [
            {
                "key": setting.key,
                "value": setting.value,
                "file": str(setting.origin.source.path) if setting.origin else None,
                "line": setting.origin.line if setting.origin else None,
            }
            for setting in described
        ],
    }
