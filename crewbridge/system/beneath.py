"""Opening a path beneath a directory, resolved by the kernel, so that nothing leads out of it.

`openat2(2)` with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS (Linux 5.6+, called through ctypes)
resolves a whole path relative to a directory's descriptor and fails with EXDEV when `..`, an
absolute path or a symlink would leave it. Where openat2 is missing (ENOSYS, or EPERM from a
seccomp filter), and for what it refuses that crew allows (an absolute symlink pointing back
inside), a walk does the same from the directory's descriptor: one component at a time with
O_NOFOLLOW; a symlink is read and its target walked in turn (an absolute one only when it names a
place inside), `..` goes back along the walk and never past its start, at most MAX_HOPS links.

Either way the caller gets a descriptor (or a folder's descriptor and a name in it) and works on
that, never on the path again: a folder swapped for a symlink between a check and a use changes
nothing, because there is no second lookup by name.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import struct
import sys
from collections import deque
from collections.abc import Callable, Iterator
from typing import TypeVar

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
OPENAT2 = {"x86_64": 437, "aarch64": 437}  # the syscall's number, by machine
MAX_HOPS = 40  # symlinks followed in one path, the kernel's own limit
WALK = "CREW_BENEATH"  # set to "walk", the walk is used even where openat2 works (for tests)
FALL_BACK = frozenset({errno.ENOSYS, errno.EPERM, errno.EXDEV, errno.ELOOP, errno.EAGAIN})
FOLDER = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC  # a folder, held to resolve names in it
T = TypeVar("T")


class Outside(OSError):
    """A path that leads out of the directory it is resolved beneath (`..`, absolute, a symlink)."""

    def __init__(self, path: bytes) -> None:
        super().__init__(errno.EXDEV, "leads outside the directory", os.fsdecode(path))


def open_beneath(dir_fd: int, path: bytes, flags: int, *, inside: bytes | None = None, links: bool = True) -> int:
    """A new descriptor for `path` (relative), resolved beneath the directory `dir_fd` and opened with
    `flags`. Symlinks are followed while they stay beneath it (an absolute one only when it points
    into `inside`, the directory's real path); with links=False, a symlink anywhere is refused.

    Raises Outside for a path that leads out, OSError as open(2) does for anything else.
    """
    if _kernel_resolves():
        try:
            return _openat2(dir_fd, path or b".", flags | os.O_CLOEXEC, links)
        except OSError as exc:
            if exc.errno not in FALL_BACK:
                raise
    folder, name = _walk(dir_fd, path, inside, links, make_dirs=False)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    finally:
        os.close(folder)


def parent_beneath(
    dir_fd: int, path: bytes, *, inside: bytes | None = None, make_dirs: bool = False
) -> tuple[int, bytes]:
    """(a new descriptor of the folder `path` ends in, the last name in it), resolved as open_beneath
    resolves, a symlink at the end followed too: where a write to `path` lands. The name is b"."
    when `path` names a folder. With make_dirs, missing folders on the way are created (mkdirat)."""
    head, _, name = path.rpartition(b"/")
    if _kernel_resolves() and name not in (b"", b".", b".."):
        try:
            folder = _openat2(dir_fd, head or b".", FOLDER, True)
        except OSError as exc:
            if exc.errno not in FALL_BACK | {errno.ENOENT}:  # ENOENT: the walk creates or reports
                raise
        else:
            if _link(folder, name) is None:
                return folder, name
            os.close(folder)  # a symlink at the end: the walk follows it
    return _walk(dir_fd, path, inside, True, make_dirs)


def open_real(path: bytes, flags: int) -> int:
    """A descriptor for `path`, an absolute real path (one with no symlink in it), opened so that
    none can have been swapped in since it was resolved: a symlink anywhere on it is refused."""
    root = os.open("/", FOLDER)
    try:
        return open_beneath(root, path.lstrip(b"/"), flags, links=False)
    finally:
        os.close(root)


def fd_path(fd: int) -> bytes | None:
    """Where the kernel says `fd` is (/proc/self/fd); None when it cannot say."""
    try:
        where = os.readlink(b"/proc/self/fd/%d" % fd)
    except OSError:
        return None
    return where if where.startswith(b"/") else None


class Moved(OSError):
    """A name another program opened while crew watched it did not lead to the file crew held
    throughout: a folder or the file on the way was renamed, removed or made meanwhile."""

    def __init__(self, path: bytes) -> None:
        super().__init__(errno.ESTALE, "moved or replaced meanwhile", os.fsdecode(path))


def by_name(fd: int, use: Callable[[bytes], T]) -> T | None:
    """What `use(name)` gives, where `name` is the real path of the file open as `fd`, for another
    program that opens files by name (an editor); Moved when that name may not have led to this
    file throughout; None where crew cannot watch it (not Linux, no inotify here): use `fd` then.

    Holds against a concurrent swapper (renameat2 RENAME_EXCHANGE of a folder and a symlink, in a
    loop): every folder on the name, from `/` down, is watched (inotify) from before it is walked,
    each opened with no symlink followed, and the file reached must be `fd`'s. After `use`, the name
    is resolved again, then the watches are read: a rename, removal or creation of any name on the
    path fails it. The kernel queues a rename's event before it lets go of the folder it changed,
    so a swap the other program could have met is either still there (the second resolution finds
    another file) or undone by a later rename of the same folder, which came after the first's
    event was queued: nothing passes between the two looks."""
    name = fd_path(fd)
    watch = _Watch.of(name) if name is not None else None
    if watch is None or name is None:
        return None
    try:
        walked = watch.walk(os.fstat(fd))
        if walked is None:
            return None
        if not walked:
            raise Moved(name)
        used = use(name)
        try:
            held = open_real(name, os.O_PATH)
        except OSError:
            raise Moved(name) from None
        try:
            if not _same(os.fstat(held), os.fstat(fd)) or watch.moved():
                raise Moved(name)
        finally:
            os.close(held)
        return used
    finally:
        watch.close()


def _same(one: os.stat_result, other: os.stat_result) -> bool:
    return (one.st_dev, one.st_ino) == (other.st_dev, other.st_ino)


class _Watch:
    """inotify watches on each folder of a path, and the name below each on the path."""

    MASK = 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800 | 0x01000000  # moved from/to, create, delete, *_self; dirs
    GONE = 0x400 | 0x800 | 0x4000 | 0x8000  # delete_self, move_self, queue overflow, watch removed

    def __init__(self, fd: int, path: bytes, add: Callable[[int, bytes, int], int]) -> None:
        self.fd, self.path, self.add = fd, path, add
        self.below: dict[int, bytes] = {}  # watch descriptor → the name on the path in that folder

    @classmethod
    def of(cls, path: bytes) -> _Watch | None:
        calls = _inotify()
        if calls is None or not path.startswith(b"/"):
            return None
        init, add = calls
        try:
            fd = init(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # too many instances: crew cannot watch now
            return None
        return cls(fd, path, add)

    def walk(self, expected: os.stat_result) -> bool | None:
        """Watch each folder, then open the next name in it (no symlink followed); whether the path
        leads to the file `expected` describes (None: a folder cannot be watched, by its mode or
        the user's limit on watches)."""
        parts = [part for part in self.path.split(b"/") if part]
        folder = os.open("/", FOLDER)
        try:
            for number, part in enumerate(parts):
                try:
                    watched = self.add(self.fd, b"/proc/self/fd/%d" % folder, self.MASK)
                except OSError:
                    return None
                self.below[watched] = part
                if number == len(parts) - 1:
                    return _same(os.stat(part, dir_fd=folder, follow_symlinks=False), expected)
                inner = os.open(part, FOLDER | os.O_NOFOLLOW, dir_fd=folder)
                os.close(folder)
                folder = inner
            return False
        except OSError:
            return False
        finally:
            os.close(folder)

    def moved(self) -> bool:
        """Whether a name on the path was renamed, removed or made since its folder was watched."""
        while True:
            try:
                events = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return False
            at = 0
            while at + 16 <= len(events):
                watched, mask, _, size = struct.unpack_from("iIII", events, at)
                name = events[at + 16 : at + 16 + size].rstrip(b"\0")
                at += 16 + size
                if mask & self.GONE or self.below.get(watched) == name:
                    return True

    def close(self) -> None:
        os.close(self.fd)


@functools.cache
def _inotify() -> tuple[Callable[[int], int], Callable[[int, bytes, int], int]] | None:
    """inotify_init1 and inotify_add_watch through ctypes; None where this machine lacks them."""
    if sys.platform != "linux":
        return None
    import ctypes  # deferred for start-up speed: only an editor's read needs it

    libc = ctypes.CDLL(None, use_errno=True)

    def checked(result: int) -> int:
        if result < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return result

    def init(flags: int) -> int:
        return checked(libc.inotify_init1(ctypes.c_int(flags)))

    def add(fd: int, path: bytes, mask: int) -> int:
        return checked(libc.inotify_add_watch(ctypes.c_int(fd), ctypes.c_char_p(path), ctypes.c_uint32(mask)))

    return init, add


def printable(name: str | bytes) -> str:
    """A file name as text: a byte that is not UTF-8 becomes \\xNN (never an error)."""
    raw = name if isinstance(name, bytes) else os.fsencode(name)
    return raw.decode("utf-8", "backslashreplace")


def below(path: bytes, folder: bytes) -> bytes | None:
    """`path` relative to `folder` when it starts with it (b"." for the folder itself), else None;
    by the names alone ("a/../b" is left to the resolution)."""
    folder = folder.rstrip(b"/")
    if path.rstrip(b"/") == folder:
        return b"."
    rest = path[len(folder) :]
    return rest.lstrip(b"/") if path.startswith(folder) and rest.startswith(b"/") else None


def tree(
    top: int, keep: Callable[[os.DirEntry[str]], bool], expand: Callable[[os.DirEntry[str]], bool]
) -> Iterator[tuple[str, os.DirEntry[str], int]]:
    """(path below `top`, entry, descriptor of its folder) for each entry `keep` accepts below the
    directory `top`, breadth first and sorted by name, so that a capped walk shows the top levels.

    A folder is entered when it is one (not a symlink) and `expand` accepts it; each is opened
    beneath `top` with no symlink allowed on the way. The folder's descriptor is open until the
    next entry is asked for. A subfolder that cannot be opened is skipped, not fatal."""
    queue = deque([""])
    while queue:
        below_top = queue.popleft()
        try:
            folder = open_beneath(top, os.fsencode(below_top), os.O_RDONLY | os.O_DIRECTORY, links=False)
        except OSError:
            if not below_top:
                raise
            continue
        try:
            with os.scandir(folder) as scan:
                entries = sorted((entry for entry in scan if keep(entry)), key=lambda entry: entry.name)
            for entry in entries:
                path = f"{below_top}/{entry.name}" if below_top else entry.name
                yield path, entry, folder
                if entry.is_dir(follow_symlinks=False) and expand(entry):
                    queue.append(path)
        finally:
            os.close(folder)


def ready() -> None:
    """Load what opening a path beneath a folder takes (ctypes and openat2: a few ms the first time),
    ahead of the first tool that opens one (ToolRegistry.prepare)."""
    _syscall()


def _kernel_resolves() -> bool:
    return os.environ.get(WALK) != "walk" and _syscall() is not None


@functools.cache
def _syscall() -> Callable[[int, bytes, int, int], int] | None:
    """openat2(dir_fd, path, flags, resolve) through ctypes; None where this machine lacks it."""
    number = OPENAT2.get(os.uname().machine) if sys.platform == "linux" else None
    if number is None:
        return None
    import ctypes  # deferred for start-up speed: only a tool that opens a path needs it

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def openat2(dir_fd: int, path: bytes, flags: int, resolve: int) -> int:
        how = OpenHow(flags, 0, resolve)
        fd = libc.syscall(
            ctypes.c_long(number), ctypes.c_int(dir_fd), ctypes.c_char_p(path), ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )  # fmt: skip
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return int(fd)

    return openat2


def _openat2(dir_fd: int, path: bytes, flags: int, links: bool) -> int:
    call = _syscall()
    if call is None:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))
    resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (0 if links else RESOLVE_NO_SYMLINKS)
    return call(dir_fd, path, flags, resolve)


def _walk(top: int, path: bytes, inside: bytes | None, links: bool, make_dirs: bool) -> tuple[int, bytes]:
    """(a new descriptor of the folder `path`'s last name is in, that name), walked from `top`."""
    if path.startswith(b"/"):
        raise Outside(path)
    todo = deque(_parts(path))
    held: list[int] = []  # the folders walked into below `top`, the innermost last
    hops = 0
    try:
        while todo:
            part = todo.popleft()
            here = held[-1] if held else top
            if part == b"..":
                if not held:
                    raise Outside(path)
                os.close(held.pop())
                continue
            if todo:
                try:
                    held.append(os.open(part, FOLDER | os.O_NOFOLLOW, dir_fd=here))
                    continue
                except FileNotFoundError:
                    if not make_dirs or hops >= MAX_HOPS:
                        raise
                    with contextlib.suppress(FileExistsError):  # made meanwhile: use it
                        os.mkdir(part, dir_fd=here)
                    todo.appendleft(part)
                    hops += 1
                    continue
                except OSError as exc:  # ENOTDIR or ELOOP: a symlink, or really not a folder
                    target = _link(here, part)
                    if target is None:
                        raise exc from None
            else:
                target = _link(here, part)
                if target is None:
                    return (held.pop() if held else os.dup(here)), part
            hops += 1
            if not links:
                raise Outside(path)
            if hops > MAX_HOPS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fsdecode(path))
            if target.startswith(b"/"):
                rest = below(target, inside) if inside is not None else None
                if rest is None:
                    raise Outside(path)
                target = rest
                while held:
                    os.close(held.pop())
            todo.extendleft(reversed(_parts(target)))
        return (held.pop() if held else os.dup(top)), b"."
    finally:
        for fd in held:
            os.close(fd)


def _parts(path: bytes) -> list[bytes]:
    """A path's names, without empty ones and '.'; a trailing '/' kept as a last '.' (a folder)."""
    parts = [part for part in path.split(b"/") if part not in (b"", b".")]
    if parts and path.endswith((b"/", b"/.")) and parts[-1] != b"..":
        parts.append(b".")
    return parts


def _link(folder: int, name: bytes) -> bytes | None:
    """What the symlink `name` in `folder` points to; None when it is not one (or is not there)."""
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError:
        return None
