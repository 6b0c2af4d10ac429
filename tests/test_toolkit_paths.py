"""resolve_inside: every path a tool touches stays inside the working directory, symlinks too."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crewbridge.errors import CrewError
from crewbridge.toolkit.paths import PathOutside, resolve_inside, shown_path
from crewbridge.toolkit.registry import ToolFailure


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/work (the working directory) beside tmp/outside, which holds secret.txt."""
    (tmp_path / "work" / "src").mkdir(parents=True)
    (tmp_path / "work" / "src" / "a.py").write_text("a\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return tmp_path


def test_relative_path_resolves_inside(tree: Path) -> None:
    work = tree / "work"
    assert resolve_inside(work, "src/a.py") == work / "src" / "a.py"


def test_absolute_path_inside_is_accepted(tree: Path) -> None:
    work = tree / "work"
    assert resolve_inside(work, str(work / "src" / "a.py")) == work / "src" / "a.py"


def test_empty_path_and_dot_mean_the_working_directory(tree: Path) -> None:
    work = tree / "work"
    assert resolve_inside(work, "") == work
    assert resolve_inside(work, ".") == work


def test_dotdot_that_stays_inside_is_accepted(tree: Path) -> None:
    work = tree / "work"
    assert resolve_inside(work, "src/../src/a.py") == work / "src" / "a.py"


def test_missing_file_in_missing_folders_resolves_for_writing(tree: Path) -> None:
    work = tree / "work"
    assert resolve_inside(work, "new/deeper/file.txt") == work / "new" / "deeper" / "file.txt"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "..", "src/../../outside", "n/../../x"])
def test_dotdot_escape_is_refused(tree: Path, path: str) -> None:
    with pytest.raises(PathOutside, match="is outside the working directory"):
        resolve_inside(tree / "work", path)


def test_absolute_path_outside_is_refused(tree: Path) -> None:
    with pytest.raises(PathOutside, match=r"path '/etc/passwd' is outside the working directory"):
        resolve_inside(tree / "work", "/etc/passwd")


def test_symlink_to_a_file_outside_is_refused(tree: Path) -> None:
    (tree / "work" / "link.txt").symlink_to(tree / "outside" / "secret.txt")
    with pytest.raises(PathOutside, match=r"leads outside the working directory .* symlink"):
        resolve_inside(tree / "work", "link.txt")


def test_symlinked_parent_directory_outside_is_refused(tree: Path) -> None:
    (tree / "work" / "linked").symlink_to(tree / "outside")
    with pytest.raises(PathOutside, match="through a symlink"):
        resolve_inside(tree / "work", "linked/secret.txt")
    with pytest.raises(PathOutside, match="through a symlink"):
        resolve_inside(tree / "work", "linked/not-yet-written.txt")


def test_dangling_symlink_pointing_outside_is_refused(tree: Path) -> None:
    (tree / "work" / "dangling").symlink_to(tree / "outside" / "nothing-here")
    with pytest.raises(PathOutside, match="through a symlink"):
        resolve_inside(tree / "work", "dangling")


def test_symlink_then_dotdot_is_judged_by_where_it_really_lands(tree: Path) -> None:
    (tree / "outside" / "deep").mkdir()
    (tree / "work" / "hop").symlink_to(tree / "outside" / "deep")
    with pytest.raises(PathOutside):
        resolve_inside(tree / "work", "hop/../secret.txt")


def test_symlink_pointing_inside_resolves_to_its_target(tree: Path) -> None:
    work = tree / "work"
    (work / "alias.py").symlink_to(work / "src" / "a.py")
    assert resolve_inside(work, "alias.py") == work / "src" / "a.py"


def test_working_directory_reached_through_a_symlink_works(tree: Path) -> None:
    (tree / "via").symlink_to(tree / "work")
    real = tree / "work" / "src" / "a.py"
    assert resolve_inside(tree / "via", "src/a.py") == real
    assert resolve_inside(tree / "via", str(tree / "via" / "src" / "a.py")) == real


def test_nul_character_is_refused(tree: Path) -> None:
    with pytest.raises(ToolFailure, match="NUL"):
        resolve_inside(tree / "work", "a\0b")


def test_missing_working_directory_is_reported(tree: Path) -> None:
    with pytest.raises(ToolFailure, match="does not exist"):
        resolve_inside(tree / "gone", "a.txt")


def test_refusal_is_both_a_tool_failure_and_a_crew_error(tree: Path) -> None:
    with pytest.raises(PathOutside) as caught:
        resolve_inside(tree / "work", "../outside")
    assert isinstance(caught.value, ToolFailure) and isinstance(caught.value, CrewError)


def test_shown_path_is_relative_and_slash_separated(tree: Path) -> None:
    work = tree / "work"
    assert shown_path(work, work / "src" / "a.py") == "src/a.py"
    assert shown_path(work, work) == "."
    (tree / "via").symlink_to(work)
    assert shown_path(tree / "via", Path(os.path.realpath(work / "src"))) == "src"
