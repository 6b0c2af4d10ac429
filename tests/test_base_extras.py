"""The optional extras: installed or not, and the one line a command that needs a missing one
says (from a clone and as a package), never Python's ModuleNotFoundError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from crewbridge.providers import BUILTIN, load

from clienv import REPO
from crewbridge.base.extras import EXTRAS, MissingExtra, of_module, require
from crewcli import crew_env


def test_every_extra_of_setup_cfg_is_known_and_installed_here() -> None:
    text = (REPO / "setup.cfg").read_text()
    for extra in EXTRAS.values():
        assert f"\n{extra.name} =\n    {extra.package}==" in text
        assert extra.installed() not in (None, "unknown version")


def test_a_missing_extra_says_the_pip_command_for_a_clone_and_for_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "dbos", None)  # how Python says a module cannot be imported
    assert EXTRAS["batch"].installed() is None
    with pytest.raises(MissingExtra) as raised:
        require("batch", "crew batch list")
    assert str(raised.value) == (
        "crew batch list needs the 'batch' extra (dbos), not installed: pip install '.[batch]' in a clone of "
        "crewbridge, pip install 'crewbridge[batch]' otherwise"
    )
    assert raised.value.exit_code == 2


def test_a_module_names_its_extra() -> None:
    assert of_module("acp.schema") is EXTRAS["acp"] and of_module("dbos") is EXTRAS["batch"]
    assert of_module("yaml") is None and of_module(None) is None


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, extra",
    [
        (["acp"], "acp"),
        (["acp", "check", "--", "x"], "acp"),
        (["batch", "list"], "batch"),
        (["batch", "t", "."], "batch"),
    ],
)
def test_a_command_whose_extra_is_missing_says_so_in_one_line(args: list[str], extra: str, tmp_path: Path) -> None:
    hide = f"import sys; sys.modules[{EXTRAS[extra].module!r}] = None; sys.argv = ['crew', *{args!r}]; "
    done = subprocess.run(
        [sys.executable, "-c", hide + "from crewbridge.__main__ import run; run()"],
        cwd=tmp_path,
        env=crew_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "ModuleNotFoundError" not in done.stderr
    assert done.stderr.startswith(f"crew: error: crew {args[0]}")
    assert f"pip install '.[{extra}]'" in done.stderr and f"pip install 'crewbridge[{extra}]'" in done.stderr


def test_each_cli_crew_drives_is_tested_at_the_version_package_json_pins() -> None:
    pins = json.loads((REPO / "package.json").read_text())["dependencies"]
    for name in ("claude", "gemini", "codex"):
        provider = load(name)
        package = provider.install_hint.rsplit(" ", 1)[-1]
        assert provider.tested == pins[package], name
    assert {"claude", "gemini", "codex"} <= set(BUILTIN)
