"""Finding entry points: importlib.metadata only when some package may declare the group."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from crewbridge.base import plugins


def dist(site: Path, name: str, entry_points: str | None) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    if entry_points is not None:
        (info / "entry_points.txt").write_text(entry_points)


def test_a_group_no_package_declares_is_answered_without_importlib_metadata(tmp_path, monkeypatch):
    dist(tmp_path, "other", "[console_scripts]\nother = other:main\n")
    dist(tmp_path, "plain", None)
    monkeypatch.setattr(sys, "path", [str(tmp_path), str(tmp_path / "missing")])
    monkeypatch.delitem(sys.modules, "importlib.metadata", raising=False)
    assert plugins.entry_points("crewbridge.tools") == []
    assert "importlib.metadata" not in sys.modules


def test_a_declared_group_gives_importlib_metadata_entry_points(tmp_path, monkeypatch):
    dist(tmp_path, "crewplug", "[crewbridge.tools]\nshout = crewplug:shout\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    [point] = plugins.entry_points("crewbridge.tools")
    assert (point.name, point.value, point.group) == ("shout", "crewplug:shout", "crewbridge.tools")
    assert plugins.entry_points("crewbridge.providers") == []


@pytest.mark.parametrize(
    "entry_points, expected",
    [
        ("[crewbridge.providers]\necho = p:Echo\n", True),
        ("[crewbridge.tools]\nx = p:x\n", False),
        ("", False),
    ],
)
def test_declared_looks_for_the_group_in_each_entry_points_file(tmp_path, entry_points, expected):
    dist(tmp_path, "p", entry_points)
    assert plugins.declared("crewbridge.providers", [str(tmp_path)]) is expected


def test_an_archive_on_the_path_is_left_to_importlib_metadata(tmp_path):
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("p-1.0.dist-info/entry_points.txt", "[crewbridge.tools]\nx = p:x\n")
    assert plugins.declared("crewbridge.tools", [str(archive)])
