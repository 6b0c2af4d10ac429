"""read_file, write_file, edit_file, list_files: success and failure, called via the registry."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crewbridge.tools import builtin_registry, files
from crewbridge.tools.files import MAX_ENTRIES

from crewbridge.toolkit.registry import ToolContext
from swapping import swapped

REGISTRY = builtin_registry()


@pytest.fixture
def work(workdir: Path) -> Path:
    """The working directory with notes.txt, and ../outside/secret.txt beside it."""
    (workdir / "notes.txt").write_text("one\ntwo\nthree\n")
    (workdir.parent / "outside").mkdir()
    (workdir.parent / "outside" / "secret.txt").write_text("secret\n")
    return workdir


def call(work: Path, name: str, max_output: int = 20_000, **data: Any) -> dict[str, Any]:
    return REGISTRY.call(f"crew:{name}", data, ToolContext(work, max_output=max_output)).to_dict()


def edit(work: Path, path: str, old: str, new: str) -> dict[str, Any]:
    return call(work, "edit_file", path=path, old_string=old, new_string=new)


def ok(envelope: dict[str, Any]) -> Any:
    assert envelope["success"], envelope["error"]
    assert envelope["error"] is None
    return envelope["data"]


def failed(envelope: dict[str, Any]) -> str:
    assert envelope["success"] is False and envelope["data"] is None
    return envelope["error"]


# --- every file tool refuses paths that lead outside -----------------------------------------


def linked(work: Path, link: str, target: str, path: str) -> str:
    (work / link).symlink_to(work.parent / "outside" / target)
    return path


ESCAPES = {
    "dotdot": lambda work: "../outside/secret.txt",
    "absolute": lambda work: str(work.parent / "outside" / "secret.txt"),
    "symlink": lambda work: linked(work, "link.txt", "secret.txt", "link.txt"),
    "symlinked parent": lambda work: linked(work, "out", "", "out/secret.txt"),
}
FILE_CALLS = {
    "read_file": {},
    "write_file": {"content": "overwritten\n"},
    "edit_file": {"old_string": "secret", "new_string": "leaked"},
    "list_files": {},
}


@pytest.mark.parametrize("escape", ESCAPES)
@pytest.mark.parametrize("tool", FILE_CALLS)
def test_every_file_tool_refuses_paths_leading_outside(work: Path, tool: str, escape: str) -> None:
    path = ESCAPES[escape](work)
    error = failed(call(work, tool, path=path, **FILE_CALLS[tool]))
    assert "outside the working directory" in error
    assert (work.parent / "outside" / "secret.txt").read_text() == "secret\n"


def test_write_through_symlinked_parent_creates_nothing_outside(work: Path) -> None:
    (work / "out").symlink_to(work.parent / "outside")
    error = failed(call(work, "write_file", path="out/new/x.txt", content="x"))
    assert "through a symlink" in error
    assert sorted(os.listdir(work.parent / "outside")) == ["secret.txt"]


# --- read_file --------------------------------------------------------------------------------


def test_read_file_returns_exact_content_and_line_counts(work: Path) -> None:
    data = ok(call(work, "read_file", path="notes.txt"))
    assert data == {
        "path": "notes.txt",
        "start_line": 1,
        "end_line": 3,
        "total_lines": 3,
        "content": "one\ntwo\nthree\n",
    }


def test_read_file_keeps_crlf_and_a_missing_final_newline(work: Path) -> None:
    (work / "dos.txt").write_bytes(b"a\r\nb\r\nc")
    data = ok(call(work, "read_file", path="dos.txt"))
    assert data["content"] == "a\r\nb\r\nc" and data["total_lines"] == 3


def test_read_file_offset_and_limit_select_lines(work: Path) -> None:
    data = ok(call(work, "read_file", path="notes.txt", offset=2, limit=1))
    assert data["content"] == "two\n"
    lines = ("start_line", "end_line", "total_lines", "next_offset")
    assert [data[k] for k in lines] == [2, 2, 3, 3]
    assert "note" not in data


@pytest.mark.parametrize("chunk", [1, 3, 1 << 20])
def test_read_file_finds_its_offset_whatever_the_read_size(
    work: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(files, "CHUNK", chunk)
    (work / "f.txt").write_text("one\ntwo\n\nfour\nfive")
    data = ok(call(work, "read_file", path="f.txt", offset=3, limit=2))
    assert (data["content"], data["total_lines"], data["next_offset"]) == ("\nfour\n", 5, 5)
    assert ok(call(work, "read_file", path="f.txt", offset=5))["content"] == "five"
    assert (
        failed(call(work, "read_file", path="f.txt", offset=6))
        == "offset 6 is past the end of 'f.txt', which has 5 lines"
    )


def test_read_file_offset_past_the_end_is_an_error(work: Path) -> None:
    assert (
        failed(call(work, "read_file", path="notes.txt", offset=9))
        == "offset 9 is past the end of 'notes.txt', which has 3 lines"
    )


def test_read_file_empty_file(work: Path) -> None:
    (work / "empty").write_text("")
    data = ok(call(work, "read_file", path="empty"))
    assert (data["content"], data["total_lines"], data["end_line"]) == ("", 0, 0)


def test_read_file_large_file_stops_at_a_line_and_says_where_to_go_on(work: Path) -> None:
    (work / "big.txt").write_text("".join(f"line {n:04d}\n" for n in range(1, 1001)))  # 10 a line
    envelope = call(work, "read_file", path="big.txt", max_output=100)
    data = ok(envelope)
    assert envelope["metadata"]["truncated"] is True
    assert data["content"] == "".join(f"line {n:04d}\n" for n in range(1, 11))
    assert (data["end_line"], data["total_lines"], data["next_offset"]) == (10, 1000, 11)
    assert data["note"] == "output limit reached: lines 11-1000 were not shown; read on from next_offset"
    following = ok(call(work, "read_file", path="big.txt", offset=11, limit=5, max_output=100))
    assert following["content"].startswith("line 0011\n") and following["next_offset"] == 16


def test_read_file_single_line_longer_than_the_limit_is_cut_with_a_marker(work: Path) -> None:
    (work / "min.js").write_text("x" * 250)
    envelope = call(work, "read_file", path="min.js", max_output=100)
    assert ok(envelope)["content"] == "x" * 100 + "\n[… truncated: 150 more characters not shown]"
    assert envelope["metadata"]["truncated"] is True


def test_read_file_small_file_is_not_marked_truncated(work: Path) -> None:
    assert call(work, "read_file", path="notes.txt")["metadata"]["truncated"] is False


def test_read_file_invalid_utf8_is_replaced_not_fatal(work: Path) -> None:
    (work / "latin1.txt").write_bytes(b"caf\xe9\n")
    assert ok(call(work, "read_file", path="latin1.txt"))["content"] == "caf\ufffd\n"


def test_read_file_refuses_binary_files(work: Path) -> None:
    (work / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0")
    assert (
        failed(call(work, "read_file", path="image.png"))
        == "'image.png' is a binary file (11 bytes); only text files can be read or edited"
    )


def test_read_file_missing_file(work: Path) -> None:
    assert (
        failed(call(work, "read_file", path="nope.txt"))
        == "'nope.txt' does not exist; list its directory to see what is there"
    )


def test_read_file_on_a_directory(work: Path) -> None:
    (work / "src").mkdir()
    assert "'src' is a directory, not a file" in failed(call(work, "read_file", path="src"))


def test_read_file_refuses_a_fifo_instead_of_blocking(work: Path) -> None:
    os.mkfifo(work / "pipe")
    assert failed(call(work, "read_file", path="pipe")) == "'pipe' is not a regular file; only files can be read"


def test_read_file_path_below_a_file(work: Path) -> None:
    assert "is a file, not a directory" in failed(call(work, "read_file", path="notes.txt/x"))


def test_read_file_validates_its_input(work: Path) -> None:
    assert (
        failed(call(work, "read_file", path="notes.txt", offset=0))
        == "invalid input for crew:read_file at $.offset: 0 is less than the minimum of 1"
    )
    assert "'path' is a required property" in failed(call(work, "read_file"))


# --- write_file -------------------------------------------------------------------------------


def test_write_file_creates_a_file_and_its_parent_folders(work: Path) -> None:
    data = ok(call(work, "write_file", path="a/b/c.txt", content="héllo\n"))
    assert data == {"path": "a/b/c.txt", "bytes": 7, "created": True}
    assert (work / "a" / "b" / "c.txt").read_bytes() == "héllo\n".encode()


def test_write_file_overwrites_exactly(work: Path) -> None:
    data = ok(call(work, "write_file", path="notes.txt", content="new\r\ntext"))
    assert data["created"] is False
    assert (work / "notes.txt").read_bytes() == b"new\r\ntext"


def test_write_file_through_a_symlink_inside_writes_its_target(work: Path) -> None:
    (work / "alias").symlink_to(work / "notes.txt")
    assert ok(call(work, "write_file", path="alias", content="via alias\n"))["path"] == "notes.txt"
    assert (work / "notes.txt").read_text() == "via alias\n"


@pytest.mark.parametrize("path", ["", "folder/", "."])
def test_write_file_refuses_directory_paths(work: Path, path: str) -> None:
    (work / "folder").mkdir()
    assert "directory" in failed(call(work, "write_file", path=path, content="x"))


def test_write_file_below_a_file_says_the_parent_is_a_file(work: Path) -> None:
    assert (
        failed(call(work, "write_file", path="notes.txt/deeper/x.txt", content="x"))
        == "a parent of 'notes.txt/deeper/x.txt' is a file, not a directory; check the path"
    )


def test_write_file_refuses_a_lone_surrogate(work: Path) -> None:
    assert "cannot be written as UTF-8 (a lone surrogate at index 2)" in failed(
        call(work, "write_file", path="s.txt", content="ab\ud800")
    )
    assert not (work / "s.txt").exists()


# --- edit_file --------------------------------------------------------------------------------


def test_edit_file_replaces_the_single_occurrence(work: Path) -> None:
    assert ok(edit(work, "notes.txt", "two", "2")) == {"path": "notes.txt", "line": 2}
    assert (work / "notes.txt").read_text() == "one\n2\nthree\n"


def test_edit_file_not_found_says_so_and_changes_nothing(work: Path) -> None:
    error = failed(edit(work, "notes.txt", "four", "4"))
    assert error.startswith("old_string was not found in 'notes.txt'; read the file and copy")
    assert (work / "notes.txt").read_text() == "one\ntwo\nthree\n"


def test_edit_file_not_found_in_a_crlf_file_names_the_line_endings(work: Path) -> None:
    (work / "dos.txt").write_bytes(b"a\r\nb\r\n")
    assert "(the file has CRLF line endings)" in failed(edit(work, "dos.txt", "a\nb", "x"))


def test_edit_file_several_occurrences_says_how_many_and_where(work: Path) -> None:
    (work / "dup.txt").write_text("x = 1\ny = 2\nx = 1\n")
    assert failed(edit(work, "dup.txt", "x = 1", "x = 3")) == (
        "old_string occurs 2 times in 'dup.txt' (starting on lines 1, 3); "
        "include more surrounding text so it matches exactly once"
    )
    assert (work / "dup.txt").read_text() == "x = 1\ny = 2\nx = 1\n"


def test_edit_file_counts_overlapping_occurrences(work: Path) -> None:
    (work / "a.txt").write_text("aaa")
    assert "occurs 2 times" in failed(edit(work, "a.txt", "aa", "b"))


def test_edit_file_identical_strings_is_an_error(work: Path) -> None:
    assert (
        failed(edit(work, "notes.txt", "one", "one"))
        == "old_string and new_string are the same; there is nothing to change"
    )


def test_edit_file_empty_old_string_is_a_validation_error(work: Path) -> None:
    assert (
        failed(edit(work, "notes.txt", "", "x"))
        == "invalid input for crew:edit_file at $.old_string: '' should be non-empty"
    )


def test_edit_file_keeps_bytes_that_are_not_utf8(work: Path) -> None:
    (work / "mixed.txt").write_bytes(b"caf\xe9 = 1\nvalue = 2\n")
    ok(edit(work, "mixed.txt", "value = 2", "value = 3"))
    assert (work / "mixed.txt").read_bytes() == b"caf\xe9 = 1\nvalue = 3\n"


def test_edit_file_refuses_binary_and_missing_files(work: Path) -> None:
    (work / "blob").write_bytes(b"ab\0cd")
    assert "binary file" in failed(edit(work, "blob", "ab", "x"))
    assert "does not exist" in failed(edit(work, "nope", "a", "b"))


# --- list_files -------------------------------------------------------------------------------


def test_list_files_is_recursive_sorted_and_relative_to_the_working_directory(work: Path) -> None:
    (work / "src" / "pkg").mkdir(parents=True)
    (work / "src" / "pkg" / "m.py").write_text("")
    (work / "src" / "main.py").write_text("")
    assert ok(call(work, "list_files")) == {
        "path": ".",
        "entries": ["notes.txt", "src/", "src/main.py", "src/pkg/", "src/pkg/m.py"],
    }
    assert ok(call(work, "list_files", path="src/pkg"))["entries"] == ["src/pkg/m.py"]


def test_list_files_leaves_out_git_and_does_not_enter_dependency_folders(work: Path) -> None:
    (work / ".git" / "objects").mkdir(parents=True)
    (work / "node_modules" / "lib").mkdir(parents=True)
    data = ok(call(work, "list_files"))
    assert data["entries"] == ["node_modules/", "notes.txt"]
    assert data["not_expanded"] == ["node_modules/"]
    assert ok(call(work, "list_files", path="node_modules"))["entries"] == ["node_modules/lib/"]


def test_list_files_shows_symlinked_folders_without_entering_them(work: Path) -> None:
    (work / "loop").symlink_to(work)
    assert ok(call(work, "list_files"))["entries"] == ["loop/", "notes.txt"]


def test_list_files_caps_a_large_tree_top_levels_first(work: Path) -> None:
    (work / "deep").mkdir()
    for n in range(MAX_ENTRIES + 5):
        (work / "deep" / f"f{n:04d}").write_text("")
    envelope = call(work, "list_files")
    data = ok(envelope)
    assert envelope["metadata"]["truncated"] is True
    assert len(data["entries"]) == MAX_ENTRIES and data["entries"][:2] == ["deep/", "deep/f0000"]
    assert data["note"] == (
        f"listing stopped after {MAX_ENTRIES} entries (top levels first); list a subdirectory to see the rest"
    )


def test_list_files_stays_within_the_output_limit(work: Path) -> None:
    for n in range(50):
        (work / f"file-{n:02d}.txt").write_text("")
    envelope = call(work, "list_files", max_output=200)
    assert envelope["metadata"]["truncated"] is True
    assert 0 < len(ok(envelope)["entries"]) < 15


def test_list_files_on_a_file_or_missing_folder(work: Path) -> None:
    assert (
        failed(call(work, "list_files", path="notes.txt"))
        == "'notes.txt' is not a directory; read it as a file instead"
    )
    assert "does not exist" in failed(call(work, "list_files", path="nowhere"))


# --- the kernel resolves every path: a folder swapped for a symlink mid-call leaks nothing ---------


@pytest.fixture
def swapping(work: Path) -> Iterator[Path]:
    """work/d (a folder holding secret.txt: "inside") and work/swap (a symlink to ../outside, which
    holds secret.txt: "TOPSECRET" and only-outside.txt) exchanged by renameat2(RENAME_EXCHANGE) in a
    loop by another process, all the while the test runs. Nothing outside may change."""
    (work / "d").mkdir()
    (work / "d" / "secret.txt").write_text("inside\n")
    (work.parent / "outside" / "secret.txt").write_text("TOPSECRET\n")
    (work.parent / "outside" / "only-outside.txt").write_text("TOPSECRET\n")
    (work / "swap").symlink_to("../outside")
    with swapped(work / "d", work / "swap"):
        yield work
    assert sorted(os.listdir(work.parent / "outside")) == ["only-outside.txt", "secret.txt"]
    assert (work.parent / "outside" / "secret.txt").read_text() == "TOPSECRET\n"


RACED = {  # tool → (input, what a result inside looks like; anything else must be a refusal)
    "read_file": ({"path": "d/secret.txt"}, lambda data: data["content"] == "inside\n"),
    # the real folder may be called swap by the time the answer is made: then the path says so
    "write_file": ({"path": "d/made/new.txt", "content": "x"}, lambda data: data["path"].endswith("/made/new.txt")),
    "edit_file": ({"path": "d/secret.txt", "old_string": "TOPSECRET", "new_string": "leaked"}, None),
    "list_files": ({"path": "d"}, lambda data: data["entries"] in (["d/secret.txt"], ["swap/secret.txt"])),
    "grep": ({"pattern": "TOPSECRET", "path": "d"}, lambda data: data["matches"] == []),
}


@pytest.mark.parametrize("tool", RACED)
@pytest.mark.slow
def test_a_folder_swapped_for_a_symlink_to_outside_never_leaks(way: str, swapping: Path, tool: str) -> None:
    data, looks_inside = RACED[tool]
    seen = {"inside": 0, "refused": 0, "other error": 0}
    for _ in range(3000):
        envelope = call(swapping, tool, **data)
        assert "TOPSECRET" not in json.dumps(envelope["data"]), envelope
        if envelope["success"]:
            assert looks_inside is not None and looks_inside(envelope["data"]), envelope
            seen["inside"] += 1
        else:  # refused as outside; or, with the walk, a folder found a symlink and then not
            seen["refused" if "outside the working directory" in envelope["error"] else "other error"] += 1
        if seen["refused"] >= 20 and (looks_inside is None or seen["inside"] >= 20):
            break
    assert seen["refused"] >= 20 and (looks_inside is None or seen["inside"] >= 20), seen


# --- writes: never in git's own folder -------------------------------------------------------------


@pytest.mark.parametrize("path", [".git/hooks/pre-commit", ".git/config", "sub/.git/HEAD", ".git", "./.git/x"])
def test_write_file_refuses_git_folders_whose_contents_run_later(work: Path, path: str) -> None:
    (work / ".git" / "hooks").mkdir(parents=True)
    (work / ".git" / "config").write_text("[core]\n")
    out = call(work, "write_file", path=path, content="[core]\n\tfsmonitor = touch /tmp/owned\n")
    assert out["success"] is False and "in .git, git's own folder" in out["error"]
    assert (work / ".git" / "config").read_text() == "[core]\n"
    assert not (work / ".git" / "hooks" / "pre-commit").exists() and not (work / "sub").exists()


def test_edit_file_refuses_git_config_and_a_symlink_into_git_is_no_way_round(work: Path) -> None:
    (work / ".git").mkdir()
    (work / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (work / "g").symlink_to(".git")
    (work / "c").symlink_to(".git/config")
    assert "in .git" in edit(work, ".git/config", "bare = false", "fsmonitor = x")["error"]
    assert "in .git" in edit(work, "c", "bare = false", "fsmonitor = x")["error"]
    assert "in .git" in call(work, "write_file", path="g/hooks/post-checkout", content="x")["error"]
    assert (work / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert not (work / ".git" / "hooks" / "post-checkout").exists()  # (an empty folder may be made on the way)


def test_names_that_only_start_like_git_are_written(work: Path) -> None:
    for path in (".gitignore", ".github/workflows/ci.yml", "x.git/y", "docs/.gitkeep"):
        assert call(work, "write_file", path=path, content="x\n")["success"], path
    assert call(work, "read_file", path=".gitignore")["success"]


# --- writes: only regular files, replaced whole ----------------------------------------------------


def test_write_file_refuses_a_fifo_without_blocking_and_leaves_it(work: Path) -> None:
    os.mkfifo(work / "pipe")
    for tool, data in (("write_file", {"content": "x"}), ("edit_file", {"old_string": "a", "new_string": "b"})):
        assert "'pipe' is not a regular file" in failed(call(work, tool, path="pipe", **data))
    assert stat.S_ISFIFO(os.lstat(work / "pipe").st_mode)


def test_write_file_refuses_a_socket(work: Path) -> None:
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(work / "sock"))
        assert "not a regular file" in failed(call(work, "write_file", path="sock", content="x"))
    assert stat.S_ISSOCK(os.lstat(work / "sock").st_mode)


def test_write_and_edit_keep_the_files_mode_and_leave_no_temporary_file(work: Path) -> None:
    (work / "notes.txt").chmod(0o640)
    ok(call(work, "write_file", path="notes.txt", content="one\ntwo\n"))
    ok(edit(work, "notes.txt", "two", "2"))
    assert stat.S_IMODE((work / "notes.txt").stat().st_mode) == 0o640
    assert (work / "notes.txt").read_text() == "one\n2\n"
    assert sorted(os.listdir(work)) == ["notes.txt"]


def test_write_file_through_a_symlinked_folder_inside_writes_there(work: Path) -> None:
    (work / "real").mkdir()
    (work / "via").symlink_to("real")
    assert ok(call(work, "write_file", path="via/deeper/x.txt", content="x"))["path"] == "real/deeper/x.txt"
    assert (work / "real" / "deeper" / "x.txt").read_text() == "x"


def test_a_refused_write_makes_no_folder_first(work: Path) -> None:
    assert "outside the working directory" in failed(
        call(work, "write_file", path="new/../../outside/x.txt", content="x")
    )
    assert sorted(os.listdir(work)) == ["notes.txt"]


# --- memory bounded whatever the line length ----------------------------------------------------


def test_read_file_cuts_a_line_longer_than_the_limit_and_says_how_long_it_was(work: Path) -> None:
    (work / "min.js").write_text("x" * (files.LINE_LIMIT * 3) + "\nnext\n")
    envelope = call(work, "read_file", path="min.js", max_output=100)
    data = ok(envelope)
    assert (
        data["content"]
        == "x" * 100
        + f"\n[… line 1 cut: it is {files.LINE_LIMIT * 3 + 1:,} bytes long; its first 100 characters shown]"
    )
    assert (data["total_lines"], data["next_offset"]) == (2, 2) and envelope["metadata"]["truncated"]
    assert ok(call(work, "read_file", path="min.js", offset=2))["content"] == "next\n"


def test_a_cut_line_among_others_is_marked_where_it_was_cut(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "LINE_LIMIT", 8)
    (work / "mixed.txt").write_text("short\n" + "é" * 10 + "\nend")
    content = ok(call(work, "read_file", path="mixed.txt"))["content"]
    # the 8 bytes kept are 4 characters; a character cut in two is left out
    assert content == "short\néééé[… line 2 cut: it is 21 bytes long; its first 8 bytes shown]\nend"


def test_edit_file_streams_and_finds_matches_across_its_reads(work: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "CHUNK", 3)
    (work / "f.txt").write_text("alpha\nbeta gamma\ndelta\n")
    assert ok(edit(work, "f.txt", "beta gamma\nde", "B\nD")) == {"path": "f.txt", "line": 2}
    assert (work / "f.txt").read_text() == "alpha\nB\nDlta\n"
    (work / "a.txt").write_text("x\naaaa\n")
    assert failed(edit(work, "a.txt", "aa", "b")).startswith(
        "old_string occurs 3 times in 'a.txt' (starting on lines 2, 2, 2)"
    )
    (work / "dos.txt").write_bytes(b"ab\r\ncd\r\n")
    assert "(the file has CRLF line endings)" in failed(edit(work, "dos.txt", "ab\ncd", "x"))


def test_edit_file_on_a_single_line_larger_than_the_limit(work: Path) -> None:
    line = b"a" * (files.LINE_LIMIT * 40) + b"NEEDLE" + b"b" * files.CHUNK
    (work / "one.txt").write_bytes(line)
    assert ok(edit(work, "one.txt", "NEEDLE", "pin")) == {"path": "one.txt", "line": 1}
    assert (work / "one.txt").read_bytes() == line.replace(b"NEEDLE", b"pin")


def test_edit_file_counts_many_occurrences_up_to_a_bound(work: Path) -> None:
    (work / "many.txt").write_text("x\n" * (files.MAX_COUNTED + 5))
    assert failed(edit(work, "many.txt", "x", "y")).startswith(
        f"old_string occurs at least {files.MAX_COUNTED} times in 'many.txt' (starting on lines 1, 2, 3, 4, 5, "
        "6, 7, 8, 9, 10, …)"
    )


# --- names and text that are not UTF-8 ------------------------------------------------------------


def test_a_name_that_is_not_utf8_is_shown_escaped_and_the_escaped_name_finds_it(work: Path) -> None:
    (work / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"caf\xe9 = 1\n")
    envelope = call(work, "list_files")
    json.dumps(envelope, ensure_ascii=False).encode()  # nothing a UTF-8 encoder cannot take
    assert ok(envelope)["entries"] == ["caf\\xe9.txt", "notes.txt"]
    data = ok(call(work, "read_file", path="caf\\xe9.txt"))
    assert (data["path"], data["content"]) == ("caf\\xe9.txt", "caf\ufffd = 1\n")
    ok(edit(work, "caf\\xe9.txt", "= 1", "= 2"))
    assert (work / os.fsdecode(b"caf\xe9.txt")).read_bytes() == b"caf\xe9 = 2\n"
    assert ok(call(work, "write_file", path="caf\\xe9.txt", content="new\n"))["created"] is False
    assert (work / os.fsdecode(b"caf\xe9.txt")).read_bytes() == b"new\n"


def test_a_path_no_file_name_can_hold_is_an_error_not_a_crash(work: Path) -> None:
    for tool in ("read_file", "list_files", "write_file"):
        data = {"content": "x"} if tool == "write_file" else {}
        assert "a lone surrogate" in failed(call(work, tool, path="bad\ud800name", **data))


# --- what a write says it changed, and an editor's buffers (ToolContext.files, crew acp) -----------


class Buffers:
    """An editor's open buffers: the text it holds for some paths (the disk for others, read by
    name as an editor reads them), and what it was asked to read. crew never asks it to write."""

    def __init__(self, **texts: str) -> None:
        self.texts = texts  # by absolute path
        self.reads: list[str] = []

    def read_text(self, path: str) -> str:
        self.reads.append(path)
        return self.texts[path] if path in self.texts else Path(path).read_text()


def through(work: Path, buffers: Buffers, name: str, **data: Any) -> Any:
    return REGISTRY.call(f"crew:{name}", data, ToolContext(work, files=buffers))


def test_a_write_says_what_it_changed_on_the_disk(work: Path) -> None:
    created = REGISTRY.call("crew:write_file", {"path": "new.txt", "content": "hi\n"}, ToolContext(work))
    assert created.change == files.FileChange(str(work / "new.txt"), None, "hi\n")
    assert "change" not in created.to_dict()  # the model is not sent it
    edited = REGISTRY.call(
        "crew:edit_file", {"path": "notes.txt", "old_string": "two", "new_string": "2"}, ToolContext(work)
    )
    assert edited.change == files.FileChange(str(work / "notes.txt"), "one\ntwo\nthree\n", "one\n2\nthree\n")
    replaced = REGISTRY.call("crew:write_file", {"path": "notes.txt", "content": "x"}, ToolContext(work))
    assert replaced.change is not None and replaced.change.old == "one\n2\nthree\n"


def test_a_file_too_large_to_show_is_changed_without_a_diff(work: Path) -> None:
    (work / "big.txt").write_text("a\n" * files.SHOWN_CHANGE)
    result = REGISTRY.call("crew:write_file", {"path": "big.txt", "content": "small\n"}, ToolContext(work))
    assert result.success and result.change is None
    assert (work / "big.txt").read_text() == "small\n"


def test_reads_come_from_the_editors_buffer(work: Path) -> None:
    buffers = Buffers(**{str(work / "notes.txt"): "unsaved\nedit\n"})
    data = ok(through(work, buffers, "read_file", path="notes.txt").to_dict())
    assert data["content"] == "unsaved\nedit\n" and data["total_lines"] == 2
    assert buffers.reads == [str(work / "notes.txt")]


def test_an_edit_starts_from_the_editors_buffer_and_crew_writes_it_on_the_disk(work: Path) -> None:
    notes = str(work / "notes.txt")
    buffers = Buffers(**{notes: "one\nTWO\nthree\n"})  # unsaved in the editor
    edited = through(work, buffers, "edit_file", path="notes.txt", old_string="TWO", new_string="2")
    assert edited.success, edited.error
    assert edited.change == files.FileChange(notes, "one\nTWO\nthree\n", "one\n2\nthree\n")  # the editor's diff
    assert (work / "notes.txt").read_text() == "one\n2\nthree\n"
    written = through(work, buffers, "write_file", path="sub/new.txt", content="fresh\n")
    assert written.success and written.to_dict()["data"]["created"] is True
    assert (work / "sub" / "new.txt").read_text() == "fresh\n"
    assert buffers.reads == [notes]  # once: the text the edit is made in (a new file has none)


def test_the_editor_is_never_handed_a_path_outside(work: Path) -> None:
    (work / "link").symlink_to(work.parent / "outside")
    buffers = Buffers()
    for name, data in [
        ("read_file", {"path": "link/secret.txt"}),
        ("read_file", {"path": "../outside/secret.txt"}),
        ("write_file", {"path": "link/new.txt", "content": "x"}),
        ("edit_file", {"path": "link/secret.txt", "old_string": "secret", "new_string": "x"}),
        ("write_file", {"path": ".git/hooks/pre-commit", "content": "x"}),
    ]:
        assert "outside" in failed(through(work, buffers, name, **data).to_dict()) or ".git" in data["path"]
    assert buffers.reads == []


def test_a_path_swapped_for_a_link_while_the_editor_reads_fails_the_call(work: Path) -> None:
    class Swapping(Buffers):
        def read_text(self, path: str) -> str:
            os.rename(work / "notes.txt", work / "kept.txt")
            (work / "notes.txt").symlink_to(work.parent / "outside" / "secret.txt")
            return "what the editor read\n"

    error = failed(through(work, Swapping(), "read_file", path="notes.txt").to_dict())
    assert "moved or replaced" in error


def test_a_folder_swapped_and_swapped_back_while_the_editor_reads_fails_the_call(work: Path) -> None:
    """The swap is undone before the editor answers: the name leads where it did, but what the
    editor read may have been elsewhere (crewbridge.system.beneath.by_name saw the renames)."""
    (work / "d").mkdir()
    (work / "d" / "notes.txt").write_text("inside\n")
    (work.parent / "outside" / "notes.txt").write_text("TOPSECRET\n")

    class Swapping(Buffers):
        def read_text(self, path: str) -> str:
            os.rename(work / "d", work / "kept")
            (work / "d").symlink_to(work.parent / "outside")
            text = Path(path).read_text()
            (work / "d").unlink()
            os.rename(work / "kept", work / "d")
            return text

    for name, data in [
        ("read_file", {"path": "d/notes.txt"}),
        ("edit_file", {"path": "d/notes.txt", "old_string": "inside", "new_string": "x"}),
        ("write_file", {"path": "d/notes.txt", "content": "x"}),  # the old text, for the diff
    ]:
        assert "moved or replaced" in failed(through(work, Swapping(), name, **data).to_dict())
    assert (work / "d" / "notes.txt").read_text() == "inside\n"
    assert (work.parent / "outside" / "notes.txt").read_text() == "TOPSECRET\n"


@pytest.mark.slow
def test_with_an_editor_a_folder_swapped_in_a_loop_never_leads_a_write_or_a_read_outside(work: Path) -> None:
    """Issue 39: writes (and reads) through the editor's files while another process swaps d and a
    symlink to ../outside by renameat2(RENAME_EXCHANGE), until 40 of them came through and 40 were
    refused: each write lands in d or is refused, nothing is reported written that was not, no
    read shows what is outside."""
    (work / "d").mkdir()
    (work / "d" / "secret.txt").write_text("inside\n")
    (work.parent / "outside" / "secret.txt").write_text("TOPSECRET\n")
    (work / "swap").symlink_to("../outside")
    buffers = Buffers()
    written, refused = [], 0
    with swapped(work / "d", work / "swap"):
        for number in range(5000):  # a bound: under load one outcome can take many tries
            result = through(work, buffers, "write_file", path=f"d/f{number}.txt", content=f"{number}\n")
            if result.success:
                written.append(number)
            else:  # refused as outside; or, with the walk, a folder found a symlink and then not
                refused += 1
            read = through(work, buffers, "read_file", path="d/secret.txt").to_dict()
            assert "TOPSECRET" not in json.dumps(read), read
            if len(written) >= 40 and refused >= 40:
                break
    assert len(written) >= 40 and refused >= 40, (len(written), refused)
    assert sorted(os.listdir(work.parent / "outside")) == ["secret.txt"]
    assert sorted(p.name for p in (work / "d").iterdir()) == sorted(["secret.txt", *(f"f{n}.txt" for n in written)])
    assert all((work / "d" / f"f{n}.txt").read_text() == f"{n}\n" for n in written)
