"""crewbridge.system.beneath: a path opened beneath a directory, by openat2 and by the O_NOFOLLOW walk
(every test runs both ways; CREW_BENEATH=walk forces the walk on a kernel that has openat2)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from crewbridge.system import beneath
from crewbridge.system.beneath import Outside, below, fd_path, open_beneath, open_real, parent_beneath, printable, tree


@pytest.fixture
def tree_dir(tmp_path: Path) -> Path:
    """tmp/work/src/a.txt (the directory things are opened beneath) and tmp/outside/secret.txt."""
    (tmp_path / "work" / "src").mkdir(parents=True)
    (tmp_path / "work" / "src" / "a.txt").write_text("inside\n")
    (tmp_path / "outside" / "deep").mkdir(parents=True)
    (tmp_path / "outside" / "secret.txt").write_text("secret\n")
    return tmp_path


@pytest.fixture
def top(tree_dir: Path) -> Iterator[int]:
    fd = os.open(tree_dir / "work", os.O_RDONLY | os.O_DIRECTORY)
    yield fd
    os.close(fd)


def read(top: int, path: str, inside: Path | None = None) -> str:
    fd = open_beneath(top, os.fsencode(path), os.O_RDONLY, inside=os.fsencode(inside) if inside else None)
    with open(fd, "rb") as handle:
        return handle.read().decode()


def test_a_path_inside_opens(way: str, top: int) -> None:
    assert read(top, "src/a.txt") == "inside\n"
    assert read(top, "./src/../src//a.txt") == "inside\n"


def test_a_relative_symlink_that_stays_inside_is_followed(way: str, top: int, tree_dir: Path) -> None:
    (tree_dir / "work" / "alias").symlink_to("src/a.txt")
    (tree_dir / "work" / "src" / "up").symlink_to("..")
    assert read(top, "alias") == "inside\n"
    assert read(top, "src/up/src/a.txt") == "inside\n"


def test_an_absolute_symlink_inside_is_followed_only_when_the_real_path_is_known(
    way: str, top: int, tree_dir: Path
) -> None:
    work = tree_dir / "work"
    (work / "alias").symlink_to(work / "src" / "a.txt")
    assert read(top, "alias", inside=work) == "inside\n"
    with pytest.raises(Outside):
        read(top, "alias")


@pytest.mark.parametrize(
    "path", ["..", "../outside/secret.txt", "src/../../outside/secret.txt", "/etc/passwd", "src/../.."]
)
def test_dotdot_and_absolute_paths_are_refused(way: str, top: int, tree_dir: Path, path: str) -> None:
    with pytest.raises(Outside) as caught:
        read(top, path, inside=tree_dir / "work")
    assert caught.value.errno == errno.EXDEV


@pytest.mark.parametrize(
    "target",
    [
        "../outside/secret.txt",
        "ABS/outside/secret.txt",
        "../outside",
        "ABS/outside/nothing-here",
        "/proc/self/root/etc/passwd",
    ],
)
def test_a_symlink_leading_outside_is_refused(way: str, top: int, tree_dir: Path, target: str) -> None:
    (tree_dir / "work" / "link").symlink_to(target.replace("ABS", str(tree_dir)))
    for path in ("link", "link/secret.txt", "src/../link/secret.txt"):
        with pytest.raises(Outside):
            read(top, path, inside=tree_dir / "work")


def test_a_symlink_then_dotdot_is_judged_where_it_really_lands(way: str, top: int, tree_dir: Path) -> None:
    (tree_dir / "work" / "hop").symlink_to(tree_dir / "outside" / "deep")
    with pytest.raises(Outside):
        read(top, "hop/../secret.txt", inside=tree_dir / "work")


def test_a_symlink_loop_ends_with_eloop(way: str, top: int, tree_dir: Path) -> None:
    (tree_dir / "work" / "a").symlink_to("b")
    (tree_dir / "work" / "b").symlink_to("a")
    with pytest.raises(OSError) as caught:
        read(top, "a")
    assert caught.value.errno == errno.ELOOP


def test_without_links_any_symlink_is_refused(way: str, top: int, tree_dir: Path) -> None:
    (tree_dir / "work" / "alias").symlink_to("src")
    for path in ("alias/a.txt", "alias"):
        with pytest.raises(Outside):
            open_beneath(top, path.encode(), os.O_RDONLY, links=False)
    os.close(open_beneath(top, b"src/a.txt", os.O_RDONLY, links=False))


def test_errors_other_than_leaving_are_those_of_open(way: str, top: int) -> None:
    with pytest.raises(FileNotFoundError):
        read(top, "src/nope.txt")
    with pytest.raises(NotADirectoryError):
        read(top, "src/a.txt/x")


def test_a_folder_opens_with_o_directory_and_a_trailing_slash_needs_one(way: str, top: int) -> None:
    os.close(open_beneath(top, b"src/", os.O_RDONLY | os.O_DIRECTORY))
    os.close(open_beneath(top, b"", os.O_RDONLY | os.O_DIRECTORY))
    with pytest.raises(NotADirectoryError):
        open_beneath(top, b"src/a.txt/", os.O_RDONLY)


def test_the_parent_of_a_path_is_its_folder_and_last_name(way: str, top: int, tree_dir: Path) -> None:
    folder, name = parent_beneath(top, b"src/new.txt")
    assert (fd_path(folder), name) == (os.fsencode(tree_dir / "work" / "src"), b"new.txt")
    os.close(folder)
    folder, name = parent_beneath(top, b"src/")
    assert (fd_path(folder), name) == (os.fsencode(tree_dir / "work" / "src"), b".")
    os.close(folder)


def test_the_parent_follows_a_symlink_at_the_end_to_where_a_write_lands(way: str, top: int, tree_dir: Path) -> None:
    work = tree_dir / "work"
    (work / "alias").symlink_to(work / "src" / "a.txt")
    folder, name = parent_beneath(top, b"alias", inside=os.fsencode(work))
    assert (fd_path(folder), name) == (os.fsencode(work / "src"), b"a.txt")
    os.close(folder)
    (work / "out").symlink_to(tree_dir / "outside" / "secret.txt")
    with pytest.raises(Outside):
        parent_beneath(top, b"out", inside=os.fsencode(work))


def test_missing_folders_are_made_beneath_and_never_through_a_link_outside(way: str, top: int, tree_dir: Path) -> None:
    folder, name = parent_beneath(top, b"a/b/c.txt", make_dirs=True)
    assert (fd_path(folder), name) == (os.fsencode(tree_dir / "work" / "a" / "b"), b"c.txt")
    os.close(folder)
    (tree_dir / "work" / "out").symlink_to(tree_dir / "outside")
    with pytest.raises(Outside):
        parent_beneath(top, b"out/new/x.txt", make_dirs=True)
    assert sorted(os.listdir(tree_dir / "outside")) == ["deep", "secret.txt"]
    with pytest.raises(FileNotFoundError):
        parent_beneath(top, b"missing/x.txt")


def test_a_real_path_opens_and_one_through_a_symlink_does_not(way: str, tree_dir: Path) -> None:
    os.close(open_real(os.fsencode(tree_dir / "work" / "src"), os.O_RDONLY | os.O_DIRECTORY))
    (tree_dir / "via").symlink_to(tree_dir / "work")
    with pytest.raises(Outside):
        open_real(os.fsencode(tree_dir / "via" / "src"), os.O_RDONLY | os.O_DIRECTORY)


def test_the_openat2_way_resolves_in_the_kernel_without_walking(top: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(beneath.WALK, raising=False)
    assert beneath._syscall() is not None, "openat2 is not available here"

    def no_walk(*args: object, **kwargs: object) -> None:
        raise AssertionError("walked")

    monkeypatch.setattr(beneath, "_walk", no_walk)
    assert read(top, "src/a.txt") == "inside\n"
    with pytest.raises(AssertionError, match="walked"):  # what openat2 refuses, the walk decides
        read(top, "../outside")


def test_tree_is_breadth_first_sorted_and_enters_no_symlink(way: str, top: int, tree_dir: Path) -> None:
    work = tree_dir / "work"
    (work / "src" / "deeper").mkdir()
    (work / "src" / "deeper" / "z.txt").write_text("z")
    (work / "b.txt").write_text("b")
    (work / "skip").mkdir()
    (work / "skip" / "hidden.txt").write_text("")
    (work / "out").symlink_to(tree_dir / "outside")
    (work / "loop").symlink_to(work)
    found = []
    for path, entry, folder in tree(top, lambda e: e.name != "b.txt", lambda e: e.name != "skip"):
        if entry.is_file(follow_symlinks=False):  # the folder's descriptor opens the entry
            os.close(os.open(entry.name, os.O_RDONLY, dir_fd=folder))
        found.append(path)
    assert found == ["loop", "out", "skip", "src", "src/a.txt", "src/deeper", "src/deeper/z.txt"]


def test_names_that_are_not_utf8_go_through_a_tree_and_back(way: str, top: int, tree_dir: Path) -> None:
    (tree_dir / "work" / "src" / os.fsdecode(b"caf\xe9")).mkdir()
    (tree_dir / "work" / "src" / os.fsdecode(b"caf\xe9") / "x.txt").write_text("x")
    found = [path for path, _, _ in tree(top, lambda e: True, lambda e: True)]
    assert printable(found[-1]) == "src/caf\\xe9/x.txt"
    assert read(top, found[-1]) == "x"


def test_below_compares_names_only() -> None:
    assert below(b"/w/a/b", b"/w") == b"a/b"
    assert below(b"/w", b"/w/") == b"."
    assert below(b"/wx/a", b"/w") is None
    assert below(b"/w/../x", b"/w") == b"../x"  # left to the resolution, which refuses it
    assert below(b"/etc", b"/") == b"etc"


# --- a name another program opens: by_name ------------------------------------------------------


@pytest.fixture
def held(tree_dir: Path) -> Iterator[int]:
    """work/src/a.txt, open."""
    fd = os.open(tree_dir / "work" / "src" / "a.txt", os.O_RDONLY)
    yield fd
    os.close(fd)


def test_by_name_hands_the_real_name_of_the_file_held(way: str, held: int, tree_dir: Path) -> None:
    assert beneath.by_name(held, lambda name: Path(os.fsdecode(name)).read_text()) == "inside\n"


@pytest.mark.parametrize("moved", ["work", "work/src", "work/src/a.txt"])
def test_by_name_fails_when_a_name_on_the_way_moves_meanwhile_even_back(held: int, tree_dir: Path, moved: str) -> None:
    """Swapped for a symlink to outside while the other program reads, then back: the name leads
    where it did once more, but what was read may have been outside."""

    def swap(name: bytes) -> str:
        place = tree_dir / moved
        os.rename(place, tree_dir / "kept")
        place.symlink_to(tree_dir / "outside" / ("secret.txt" if moved.endswith(".txt") else ""))
        place.unlink()
        os.rename(tree_dir / "kept", place)
        return "read"

    with pytest.raises(beneath.Moved):
        beneath.by_name(held, swap)


def test_by_name_fails_when_the_name_leads_elsewhere_afterwards(held: int, tree_dir: Path) -> None:
    def swap(name: bytes) -> str:
        os.rename(tree_dir / "work" / "src", tree_dir / "kept")
        (tree_dir / "work" / "src").symlink_to(tree_dir / "kept")  # the same file, now through a symlink
        return "read"

    with pytest.raises(beneath.Moved):
        beneath.by_name(held, swap)


def test_by_name_leaves_names_alone_that_are_not_on_the_way(held: int, tree_dir: Path) -> None:
    def busy(name: bytes) -> str:
        (tree_dir / "work" / "other.txt").write_text("x")
        os.rename(tree_dir / "work" / "other.txt", tree_dir / "work" / "moved.txt")
        (tree_dir / "work" / "src" / "b.txt").write_text("x")
        return "read"

    assert beneath.by_name(held, busy) == "read"


def test_where_no_name_can_be_watched_by_name_is_not_used(held: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beneath, "_inotify", lambda: None)  # not Linux, or no inotify
    assert beneath.by_name(held, lambda name: pytest.fail("used without a watch")) is None


def test_a_file_removed_since_it_was_opened_is_not_handed_by_name(held: int, tree_dir: Path) -> None:
    (tree_dir / "work" / "src" / "a.txt").unlink()
    with pytest.raises(beneath.Moved):
        beneath.by_name(held, lambda name: pytest.fail("handed a name that leads nowhere"))
