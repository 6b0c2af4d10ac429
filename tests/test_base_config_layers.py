"""How configuration files combine (crewbridge.base.config_layers): one rule per key, each value with the
file, line and key path it came from. Files here are Layers built by hand; test_config.py reads
real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from crewbridge.base import config_layers as layers
from crewbridge.base.config_layers import ACCUMULATE, AGENT, LIMIT, NARROW, OVERRIDE, TOP, Each, Layer, Source
from crewbridge.config import AgentSpec, Config, config_schema
from crewbridge.errors import ConfigError


def source(name: str, kind: str = "user", doubt: str | None = None) -> Source:
    return Source(Path("/x") / name, name, kind, Path("/x"), vouch=(lambda: ((), doubt)) if doubt else None)


def layer(src: Source, data: dict, first_line: int = 1) -> Layer:
    """`data` as a file writes it, each key path on a line of its own from `first_line` on."""
    marks: dict = {(): first_line}

    def walk(value, keys):
        if keys:
            marks[keys] = first_line + len(marks) - 1
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            walk(item, (*keys, key))

    walk(data, ())
    return Layer(src, data, marks)


def baseline(keys):
    return {"profile": "coding", "max_cost": None, "max_tokens": None, "transcripts": True, "plugins": True}[keys[-1]]


def combine(*files: Layer) -> layers.Combined:
    return layers.combine(list(files), baseline)


USER = source("user.yaml")
PROJECT = source("crew.yaml", "project", doubt="is not trusted yet")
TRUSTED = source("crew.yaml", "project")


# --- the table ---------------------------------------------------------------------------------------


def test_every_key_of_the_schema_has_a_rule():
    schema = config_schema()
    assert set(TOP) == set(schema["properties"])
    assert set(AGENT) == set(schema["$defs"]["agent"]["properties"])


def test_the_rules_keep_the_users_restrictions():
    assert {key for key, rule in AGENT.items() if rule is ACCUMULATE} == {"deny", "approval", "deny_commands"}
    assert {key for key, rule in AGENT.items() if rule is NARROW} == {"allow", "allow_commands", "skills"}
    assert AGENT["profile"].order == ("full", "coding", "read-only") and AGENT["max_cost"] is LIMIT
    assert TOP["hooks"] == Each(ACCUMULATE) and TOP["tools"] == Each(OVERRIDE) and TOP["agents"] == Each(AGENT)


def test_the_stricter_defaults_are_the_dataclass_defaults():
    assert (AgentSpec.profile, AgentSpec.max_cost, Config.transcripts, Config.plugins) == tuple(
        baseline((k,)) for k in ("profile", "max_cost", "transcripts", "plugins")
    )


# --- the rules ---------------------------------------------------------------------------------------


def test_rule_lists_accumulate_so_a_later_file_cannot_drop_an_earlier_files_entries():
    combined = combine(
        layer(
            USER,
            {"agents": {"claude": {"deny": ["run_command"], "approval": ["write_file"], "deny_commands": ["rm *"]}}},
        ),
        layer(PROJECT, {"agents": {"claude": {"model": "sonnet", "deny": [], "deny_commands": ["curl *"]}}}),
    )
    claude = combined.data["agents"]["claude"]
    assert claude == {
        "deny": ["run_command"],
        "approval": ["write_file"],
        "deny_commands": ["rm *", "curl *"],
        "model": "sonnet",
    }


def test_a_within_combines_each_key_by_its_rule_and_takes_its_shorthand_alone():
    """`sandbox: required` is `sandbox: {level: required}`: a message names the key as it was written."""
    user = layer(USER, {"sandbox": {"level": "required", "hide": ["~/a"]}})
    combined = layers.combine([user, layer(TRUSTED, {"sandbox": {"hide": ["~/b"], "show": ["~/c"]}})], lambda k: "auto")
    assert combined.data["sandbox"] == {"level": "required", "hide": ["~/a", "~/b"], "show": ["~/c"]}
    assert str(combined.origins[("sandbox", "level")]) == "user.yaml:2"
    shorthand = layers.combine([layer(USER, {"sandbox": "required"})], lambda k: "auto")
    assert shorthand.data["sandbox"] == {"level": "required"}
    assert combined.origins[("sandbox", "hide", 1)].source is TRUSTED
    with pytest.raises(
        ConfigError, match=r"^crew.yaml:1: sandbox: 'auto' is looser than 'required' \(set in user.yaml:1\)"
    ):
        layers.combine([layer(USER, {"sandbox": "required"}), layer(PROJECT, {"sandbox": "auto"})], lambda k: "auto")


def test_allow_lists_are_kept_one_per_file_so_each_must_match():
    combined = combine(
        layer(USER, {"agents": {"a": {"allow": ["read_file", "grep"]}}}),
        layer(PROJECT, {"agents": {"a": {"allow": ["read_*", "write_file"]}}}),
    )
    assert combined.data["agents"]["a"]["allow"] == [["read_file", "grep"], ["read_*", "write_file"]]


def test_other_keys_of_a_later_file_win():
    combined = combine(
        layer(
            USER,
            {
                "prefix": "mine",
                "agents": {"a": {"model": "m1", "timeout": 5}},
                "tools": {"t": {"command": ["a"], "read_only": True}},
            },
        ),
        layer(TRUSTED, {"agents": {"a": {"model": "m2"}}, "tools": {"t": {"command": ["b"]}}}),
    )
    assert combined.data["prefix"] == "mine"
    assert combined.data["agents"]["a"] == {"model": "m2", "timeout": 5}
    assert combined.data["tools"]["t"] == {"command": ["b"]}  # a tool is replaced whole


def test_hooks_of_every_file_run_the_users_first():
    combined = combine(
        layer(USER, {"hooks": {"before_tool_call": [{"command": ["./mine"]}]}}),
        layer(
            TRUSTED,
            {"hooks": {"before_tool_call": [{"command": ["./theirs"]}], "after_tool_call": [{"shell": "true"}]}},
        ),
    )
    assert combined.data["hooks"] == {
        "before_tool_call": [{"command": ["./mine"]}, {"command": ["./theirs"]}],
        "after_tool_call": [{"shell": "true"}],
    }


@pytest.mark.parametrize("key, value", [("profile", "read-only"), ("profile", "coding"), ("max_cost", 0.5)])
def test_a_file_that_is_not_trusted_may_make_a_value_stricter(key, value):
    combined = combine(
        layer(USER, {"agents": {"a": {"profile": "coding", "max_cost": 1.0}}}),
        layer(PROJECT, {"agents": {"a": {key: value}}}),
    )
    assert combined.data["agents"]["a"][key] == value


@pytest.mark.parametrize(
    "user, project, message",
    [
        (
            {"profile": "read-only"},
            {"profile": "coding"},
            "crew.yaml:3: agents.a.profile: 'coding' is looser than 'read-only' (set in user.yaml:3)",
        ),
        ({}, {"profile": "full"}, "crew.yaml:3: agents.a.profile: 'full' is looser than 'coding' (the default)"),
        ({"max_tokens": 1000}, {"max_tokens": 5000}, "crew.yaml:3: agents.a.max_tokens: 5000 is looser than 1000"),
        ({"max_cost": 1}, {}, None),
    ],
)
def test_a_file_that_is_not_trusted_cannot_loosen_a_value(user, project, message):
    files = [layer(USER, {"agents": {"a": user}}), layer(PROJECT, {"agents": {"a": project}})]
    if message is None:
        assert combine(*files).data["agents"]["a"] == user
        return
    with pytest.raises(ConfigError) as caught:
        combine(*files)
    assert str(caught.value).startswith(message)
    assert str(caught.value).endswith(
        "a project file may only make it stricter until you trust it (it is not "
        "trusted yet): read it, then run `crew config trust`"
    )


def test_top_level_switches_of_the_user_only_get_stricter_from_a_project():
    with pytest.raises(ConfigError, match="transcripts: False is looser than True"):
        combine(layer(PROJECT, {"transcripts": False}))
    with pytest.raises(ConfigError, match="plugins: True is looser than False"):
        combine(layer(USER, {"plugins": False}), layer(PROJECT, {"plugins": True}))
    assert combine(layer(USER, {"transcripts": False}), layer(PROJECT, {"transcripts": True})).data == {
        "transcripts": True
    }


def test_network_allow_lists_add_up_and_a_trusted_file_may_open_it():
    user = layer(USER, {"network": {"allow": ["pypi.org", "github.com"]}})
    combined = combine(user, layer(TRUSTED, {"network": {"allow": ["example.com:8443"]}}, first_line=40))
    assert combined.data["network"] == {"allow": ["pypi.org", "github.com", "example.com:8443"]}
    assert str(combined.origins[("network", "allow", 2)]) == "crew.yaml:42"
    assert combine(user, layer(TRUSTED, {"network": "open"})).data["network"] == "open"
    assert combine(layer(USER, {"network": "open"}), layer(TRUSTED, {"network": {"allow": []}})).data["network"] == {
        "allow": []
    }


def test_a_file_that_is_not_trusted_may_only_narrow_the_network():
    user = layer(USER, {"network": {"allow": ["pypi.org", "github.com", "*.example.com"]}})
    narrowed = combine(user, layer(PROJECT, {"network": {"allow": ["github.com", "api.example.com:443"]}}))
    assert narrowed.data["network"] == {"allow": ["github.com", "api.example.com:443"]}  # its list alone
    assert combine(layer(USER, {"network": "open"}), layer(PROJECT, {"network": {"allow": ["x.org"]}})).data[
        "network"
    ] == {"allow": ["x.org"]}
    with pytest.raises(
        ConfigError, match=r"crew.yaml:4: network.allow\[1\]: 'evil.org' is not allowed by user.yaml:1; a project file"
    ):
        combine(user, layer(PROJECT, {"network": {"allow": ["github.com", "evil.org"]}}))
    with pytest.raises(
        ConfigError, match=r"network.allow\[0\]: 'example.com' is not allowed; a project file may only narrow"
    ):
        combine(layer(PROJECT, {"network": {"allow": ["example.com"]}}))  # nothing was allowed before it
    with pytest.raises(ConfigError, match=r"network: open is not allowed by user.yaml.*crew config trust"):
        combine(user, layer(PROJECT, {"network": "open"}))


def test_a_trusted_file_may_loosen_a_value():
    combined = combine(
        layer(USER, {"agents": {"a": {"profile": "read-only", "max_cost": 1}}}),
        layer(TRUSTED, {"agents": {"a": {"profile": "full", "max_cost": 9}}}),
    )
    assert combined.data["agents"]["a"] == {"profile": "full", "max_cost": 9}


def test_trust_is_asked_only_when_a_file_loosens_something():
    asked = []
    lazy = Source(
        Path("/x/crew.yaml"),
        "crew.yaml",
        "project",
        Path("/x"),
        vouch=lambda: asked.append(1) or ((), "is not trusted yet"),
    )
    combine(
        layer(USER, {"agents": {"a": {"profile": "coding"}}}), layer(lazy, {"agents": {"a": {"profile": "coding"}}})
    )
    assert asked == []


# --- where each value came from ------------------------------------------------------------------------


def test_each_value_keeps_its_file_line_and_key_path_there():
    user = layer(USER, {"agents": {"claude": {"deny": ["run_command", "grep"]}}}, first_line=1)
    project = layer(PROJECT, {"agents": {"claude": {"deny": ["write_file"], "allow": ["read_file"]}}}, first_line=10)
    combined = combine(user, project)
    origin = combined.origins[("agents", "claude", "deny", 2)]
    assert (origin.source, origin.line, origin.keys) == (
        PROJECT,
        project.marks[("agents", "claude", "deny", 0)],
        ("agents", "claude", "deny", 0),
    )
    assert combined.origins[("agents", "claude", "deny", 1)].source is USER
    assert combined.origins[("agents", "claude", "allow", 0, 0)].keys == ("agents", "claude", "allow", 0)


def test_a_message_about_a_combined_key_names_the_file_and_key_it_was_written_as():
    combined = combine(
        layer(USER, {"agents": {"claude": {"deny": ["a"]}}}),
        layer(PROJECT, {"agents": {"claude": {"deny": ["b", "c"]}}}, first_line=20),
    )
    origin, rest = layers.nearest(combined.origins, ("agents", "claude", "deny", 2))
    assert (
        layers.located(origin, rest, "'c' matches no tool")
        == "crew.yaml:24: agents.claude.deny[1]: 'c' matches no tool"
    )  # line 20 is the file's start
    origin, rest = layers.nearest(combined.origins, ("agents", "claude", "deny", 2, "deeper"))
    assert rest == ("deeper",)


def test_settings_list_each_rule_entry_with_its_origin():
    combined = combine(
        layer(USER, {"agents": {"claude": {"deny": ["run_command"], "allow": ["read_file", "grep"], "model": "opus"}}}),
        layer(
            PROJECT,
            {"agents": {"claude": {"deny": ["grep"], "allow": ["read_file"], "model": "sonnet"}}},
            first_line=10,
        ),
    )
    shown = [(s.key, s.value, str(s.origin)) for s in layers.settings(combined.data, combined.origins)]
    assert shown == [
        ("agents.claude.deny", "run_command", "user.yaml:4"),
        ("agents.claude.deny", "grep", "crew.yaml:13"),
        ("agents.claude.allow", ["read_file", "grep"], "user.yaml:5"),
        ("agents.claude.allow", ["read_file"], "crew.yaml:14"),
        ("agents.claude.model", "sonnet", "crew.yaml:16"),
    ]


def test_shown_text_and_json_name_the_files_and_each_settings_source():
    combined = combine(layer(USER, {"agents": {"claude": {"deny": ["run_command"]}}}))
    described = [*layers.settings(combined.data, combined.origins), layers.Setting("prefix", "crew", None)]
    text = layers.shown_text([USER, TRUSTED], described)
    assert text.splitlines() == [
        "files, in order (rules add up or narrow; for other settings the later file wins):",
        "  user     /x/user.yaml",
        "  project  /x/crew.yaml  (trusted)",
        "",
        "agents.claude.deny: run_command  user.yaml:4",
        "prefix: crew                     default",
    ]
    data = layers.shown_json([USER], described)
    assert data["files"] == [{"path": "/x/user.yaml", "kind": "user", "trusted": True, "base": "/x"}]
    assert data["settings"] == [
        {"key": "agents.claude.deny", "value": "run_command", "file": "/x/user.yaml", "line": 4},
        {"key": "prefix", "value": "crew", "file": None, "line": None},
    ]
