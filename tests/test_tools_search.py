"""grep: an RE2 regex matched line by line, capped, binary-safe, inside the working directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from crewbridge.tools import builtin_registry, search
from crewbridge.tools.search import LINE_WIDTH, MAX_MATCHES

from crewbridge.toolkit.registry import ToolContext

REGISTRY = builtin_registry()


@pytest.fixture
def work(workdir: Path) -> Path:
    """The working directory with a small project, and ../outside/secret.txt beside it."""
    (workdir.parent / "outside").mkdir()
    (workdir.parent / "outside" / "secret.txt").write_text("password = hunter2\n")
    (workdir / "src").mkdir()
    (workdir / "src" / "app.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (workdir / "README.md").write_text("# App\nRun main() to start.\n")
    return workdir


def grep(work: Path, max_output: int = 20_000, **data: Any) -> dict[str, Any]:
    return REGISTRY.call("crew:grep", data, ToolContext(work, max_output=max_output)).to_dict()


def test_matches_come_as_path_line_text(work: Path) -> None:
    envelope = grep(work, pattern=r"main\(\)")
    assert envelope["success"] and envelope["metadata"]["truncated"] is False
    assert envelope["data"] == {
        "matches": ["README.md:2:Run main() to start.", "src/app.py:3:def main():"],
        "files_searched": 2,
    }


def test_path_may_be_a_folder_or_a_file(work: Path) -> None:
    assert grep(work, pattern="os", path="src")["data"]["matches"] == [
        "src/app.py:1:import os",
        "src/app.py:4:    return os.getcwd()",
    ]
    assert grep(work, pattern="^#", path="README.md")["data"]["matches"] == ["README.md:1:# App"]


def test_inline_flags_make_it_case_insensitive(work: Path) -> None:
    assert grep(work, pattern="(?i)^run")["data"]["matches"] == ["README.md:2:Run main() to start."]


def test_no_match_is_a_success_with_no_matches(work: Path) -> None:
    assert grep(work, pattern="zebra")["data"] == {"matches": [], "files_searched": 2}


def test_line_ends_are_not_part_of_the_line(work: Path) -> None:
    (work / "dos.txt").write_bytes(b"alpha\r\nbeta\r\n")
    assert grep(work, pattern="a$", path="dos.txt")["data"]["matches"] == ["dos.txt:1:alpha", "dos.txt:2:beta"]


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_lines_are_numbered_the_same_whatever_the_read_size(
    work: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "CHUNK", chunk)
    (work / "mixed.txt").write_bytes("alpha\r\n\nbéta\nlonger line here\ngamma".encode())
    assert grep(work, pattern="", path="mixed.txt")["data"]["matches"] == [
        "mixed.txt:1:alpha",
        "mixed.txt:2:",
        "mixed.txt:3:béta",
        "mixed.txt:4:longer line here",
        "mixed.txt:5:gamma",
    ]


def test_invalid_regex_is_reported_clearly(work: Path) -> None:
    envelope = grep(work, pattern="main(")
    assert envelope["success"] is False
    assert envelope["error"] == (
        "invalid regular expression 'main(': missing ): main(; fix it (RE2 syntax: no backreferences "
        "or lookaround; escape special characters with \\ for a literal search)"
    )


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?<=a)b", r"a(?=b)"])
def test_backreferences_and_lookaround_are_refused_with_what_re2_lacks(work: Path, pattern: str) -> None:
    envelope = grep(work, pattern=pattern)
    assert envelope["success"] is False
    assert envelope["error"].startswith(f"invalid regular expression {pattern!r}: ")
    assert "no backreferences or lookaround" in envelope["error"]


def test_a_pattern_that_backtracks_exponentially_in_pythons_re_is_linear(work: Path) -> None:
    (work / "evil.txt").write_text("a" * 48 + "!\n" + "a" * 10 + "\n")
    assert grep(work, pattern="(a+)+$", path="evil.txt")["data"]["matches"] == ["evil.txt:2:aaaaaaaaaa"]


@pytest.mark.parametrize("chunk", [1, 5, 1 << 20])
def test_matches_across_lines_in_a_block_are_not_line_matches(
    work: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "CHUNK", chunk)
    (work / "x.txt").write_text("ab\ncd\nab cd\nabXcd\n")
    # in the block, b\sc matches across the end of line 1 too
    assert grep(work, pattern=r"b\sc", path="x.txt")["data"]["matches"] == ["x.txt:3:ab cd"]
    assert grep(work, pattern=r"b.c", path="x.txt")["data"]["matches"] == ["x.txt:3:ab cd", "x.txt:4:abXcd"]
    assert grep(work, pattern=r"^cd$", path="x.txt")["data"]["matches"] == ["x.txt:2:cd"]
    assert grep(work, pattern=r"\Acd", path="x.txt")["data"]["matches"] == ["x.txt:2:cd"]  # \A: each line's start


def test_invalid_utf8_is_matched_as_the_replacement_character(work: Path) -> None:
    (work / "latin1.txt").write_bytes(b"caf\xe9 au lait\nplain\n")
    assert grep(work, pattern="caf.", path="latin1.txt")["data"]["matches"] == ["latin1.txt:1:caf\ufffd au lait"]


def test_binary_files_are_skipped_and_counted(work: Path) -> None:
    (work / "blob.bin").write_bytes(b"main()\0\1\2")
    data = grep(work, pattern="main")["data"]
    assert all(not m.startswith("blob.bin") for m in data["matches"])
    assert data["binary_files_skipped"] == 1


def test_naming_a_binary_file_is_an_error(work: Path) -> None:
    (work / "blob.bin").write_bytes(b"main()\0")
    assert "binary file" in grep(work, pattern="main", path="blob.bin")["error"]


def test_git_is_never_searched_and_dependency_folders_only_when_named(work: Path) -> None:
    for folder in (".git", "node_modules/lib"):
        (work / folder).mkdir(parents=True)
        (work / folder / "hit.txt").write_text("needle\n")
    assert grep(work, pattern="needle")["data"]["matches"] == []
    assert grep(work, pattern="needle", path="node_modules")["data"]["matches"] == ["node_modules/lib/hit.txt:1:needle"]


def test_symlinks_are_not_followed_while_walking(work: Path) -> None:
    (work / "secret-link.txt").symlink_to(work.parent / "outside" / "secret.txt")
    (work / "outdir").symlink_to(work.parent / "outside")
    assert grep(work, pattern="hunter2")["data"]["matches"] == []


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "/etc", "link", "linkdir/secret.txt"])
def test_paths_leading_outside_are_refused(work: Path, path: str) -> None:
    (work / "link").symlink_to(work.parent / "outside" / "secret.txt")
    (work / "linkdir").symlink_to(work.parent / "outside")
    envelope = grep(work, pattern="hunter2", path=path)
    assert envelope["success"] is False and "outside the working directory" in envelope["error"]


def test_missing_path(work: Path) -> None:
    assert (
        grep(work, pattern="x", path="nope")["error"]
        == "'nope' does not exist; list its directory to see what is there"
    )


def test_results_are_capped_with_a_note(work: Path) -> None:
    (work / "many.txt").write_text("hit\n" * (MAX_MATCHES + 50))
    envelope = grep(work, pattern="hit", path="many.txt")
    assert envelope["metadata"]["truncated"] is True
    assert len(envelope["data"]["matches"]) == MAX_MATCHES
    assert (
        envelope["data"]["note"]
        == f"stopped after {MAX_MATCHES} matches; narrow the pattern or the path to see the rest"
    )


def test_results_stay_within_the_output_limit(work: Path) -> None:
    (work / "many.txt").write_text("a matching line of some length\n" * 100)
    envelope = grep(work, max_output=500, pattern="matching", path="many.txt")
    assert envelope["metadata"]["truncated"] is True
    assert sum(len(m) + 4 for m in envelope["data"]["matches"]) <= 500


def test_long_lines_show_a_window_around_the_match(work: Path) -> None:
    (work / "min.js").write_text("a" * 1000 + "NEEDLE" + "b" * 1000 + "\n")
    (match,) = grep(work, pattern="NEEDLE", path="min.js")["data"]["matches"]
    text = match.removeprefix("min.js:1:")
    assert text.startswith("…") and text.endswith("…") and "NEEDLE" in text
    assert len(text) == LINE_WIDTH + 2


def test_a_line_longer_than_the_limit_is_searched_in_its_kept_part_and_says_so(work: Path) -> None:
    size = search.LINE_LIMIT * 3
    (work / "min.js").write_text("NEEDLE" + "x" * (size - 12) + "OTHER\nNEEDLE after\n")
    data = grep(work, pattern="NEEDLE", path="min.js")["data"]
    first, second = data["matches"]
    assert first.startswith("min.js:1:NEEDLExxx") and first.endswith(
        f"… [… line cut: it is {size - 1:,} bytes long; only its first {search.LINE_LIMIT:,} bytes were searched]"
    )
    assert second == "min.js:2:NEEDLE after"
    assert data["note"] == (
        f"lines longer than {search.LINE_LIMIT:,} bytes (1) were searched in their first "
        f"{search.LINE_LIMIT:,} bytes only; their matches say so"
    )
    assert grep(work, pattern="OTHER", path="min.js")["data"]["matches"] == []


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_lines_after_a_cut_line_keep_their_numbers(work: Path, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search, "CHUNK", chunk)
    monkeypatch.setattr(search, "LINE_LIMIT", 8)
    (work / "f.txt").write_text("a hit\n" + "long hit line over the limit\nshort\nhit\nlast long line, no hit")
    data = grep(work, pattern="hit", path="f.txt")["data"]
    assert data["matches"] == [
        "f.txt:1:a hit",
        "f.txt:2:long hit [… line cut: it is 28 bytes long; only its first 8 bytes were searched]",
        "f.txt:4:hit",
    ]
    assert data["note"].startswith("lines longer than 8 bytes (2) were searched")


def test_a_file_name_that_is_not_utf8_is_shown_escaped(work: Path) -> None:
    (work / "src" / os.fsdecode(b"caf\xe9.py")).write_bytes(b"needle = '\xe9'\n")
    envelope = grep(work, pattern="needle")
    json.dumps(envelope, ensure_ascii=False).encode()  # nothing a UTF-8 encoder cannot take
    assert envelope["data"]["matches"] == ["src/caf\\xe9.py:1:needle = '\ufffd'"]
