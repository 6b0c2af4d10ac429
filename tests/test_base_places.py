"""crewbridge.base.places: where crew looks for its configuration, with pathlib (find_project_config)
and without (configured, read before crew mcp and crew acp answer initialize): the two agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from crewbridge.base.places import config_dir, configured, find_project_config
from crewbridge.errors import ConfigError


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder three deep, and a user config folder with no crew.yaml."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    return deep


def test_nothing_to_read_is_nothing_found(tree: Path) -> None:
    assert find_project_config(tree) is None and not configured(str(tree))


@pytest.mark.parametrize("name", ["crew.yaml", ".crew.yaml"])
def test_the_nearest_folder_that_has_one_holds_the_projects(tree: Path, name: str) -> None:
    (tree.parent.parent / "crew.yaml").write_text("{}")
    (tree.parent / name).write_text("{}")
    assert find_project_config(tree) == tree.parent / name and configured(str(tree))


def test_both_names_in_one_folder_are_refused_and_count_as_configured(tree: Path) -> None:
    for name in ("crew.yaml", ".crew.yaml"):
        (tree / name).write_text("{}")
    with pytest.raises(ConfigError, match="keep one of them"):
        find_project_config(tree)
    assert configured(str(tree))  # crew would read them, and refuse: no early answer


def test_the_users_own_crew_yaml_counts(tree: Path) -> None:
    config_dir().mkdir(parents=True)
    (config_dir() / "crew.yaml").write_text("{}")
    assert configured(str(tree)) and find_project_config(tree) is None
