"""Who may use `crew ui`'s pages: one-time sign-in codes, the browser sessions they open, and the
way a second `crew ui` gets a fresh link from the one that serves.

No address carries anything that signs in. `crew ui` prints a link with a code (`/sign-in/CODE`)
that is good once, within CODE_LIFE seconds: the browser's history keeps a code that is spent. It
is exchanged for a session cookie (HttpOnly, SameSite=Strict, no expiry date). A browser's cookie
store is a file others may read (Chromium writes even such a cookie there, encrypted with a key
it keeps beside it on Linux), so a session is bound to the page that uses it:

- it lives while a page of it is open (each page holds an event stream) and ends DETACHED seconds
  after its last page closed: a copy read from the store of a browser that closed signs in nothing;
- its cookie's value is replaced every ROTATE seconds (the page's streams end then, and their
  reconnection, a request, picks up the new value); the value it replaced still works for GRACE
  seconds (requests under way), and presented after that it ends the session: two holders of one
  cookie (a copy used while the page is open) are signed out together, and `crew ui` says so.

Sessions live in `crew ui`'s memory only: a restart signs every browser out.

A second `crew ui` asks the one that serves for a new link over its Unix socket (crewbridge.ui.desk),
and must prove it runs as the user outside any sandbox: it makes a file the first names in crew's
state folder, which no crew sandbox lets an agent write, and it may not be more confined than the
serving one (no_new_privs, which every crew sandbox sets). The link never crosses the network.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from crewbridge.errors import UsageError
from crewbridge.ui.link import Lines, connect, send

CODE_LIFE = 300.0  # seconds a sign-in link is good for
ROTATE = 300.0  # seconds of use after which a session's cookie value is replaced
GRACE = 60.0  # seconds the value it replaced still works (requests under way)
DETACHED = 600.0  # seconds a session lives once no page of it is open (a phone's tab in the background)
ASKING = 10.0  # seconds a second crew ui and the serving one wait for each other on the socket
CLAIM = re.compile(r"ui-claim-[0-9a-f]{32}")  # the file a second crew ui makes to prove where it runs


@dataclass
class Session:
    """A browser signed in: its CSRF token (for the pages' changes), its cookie's value and when
    it was set, the values it replaced (→ when), its pages' open event streams, and since when it
    has none."""

    csrf: str
    value: str
    since: float
    alone: float
    streams: int = 0
    retired: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Seen:
    """A request's session, and the cookie value to set on its answer (None: keep the one it has)."""

    session: Session
    cookie: str | None


class SignIns:
    """The codes handed out and the sessions opened with them (thread-safe). `said` hears about a
    session ended because a replaced cookie came back (a copy in use elsewhere)."""

    def __init__(self, said: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._codes: dict[bytes, float] = {}  # a code's hash → until when it is good
        self._values: dict[str, Session] = {}  # every cookie value still known → its session
        self.said = said

    def code(self) -> str:
        """A new one-time code, good for CODE_LIFE seconds."""
        code = secrets.token_urlsafe(32)
        now = time.monotonic()
        with self._lock:
            self._codes = {key: until for key, until in self._codes.items() if until > now}
            self._codes[_hashed(code)] = now + CODE_LIFE
        return code

    def redeem(self, code: str) -> Seen | None:
        """The session a code opens (the code is spent); None for a code spent, expired or never given."""
        with self._lock:
            until = self._codes.pop(_hashed(code), None)
            if until is None or until < time.monotonic():
                return None
            now = time.monotonic()
            session = Session(secrets.token_hex(32), secrets.token_urlsafe(32), now, now)
            self._values[session.value] = session
            for other in {id(s): s for s in self._values.values()}.values():
                if self._detached(other, now):
                    self._end(other)
        return Seen(session, session.value)

    def attached(self, session: Session) -> None:
        """A page of `session` opened an event stream."""
        with self._lock:
            session.streams += 1

    def detached(self, session: Session) -> None:
        """A page of `session` closed its event stream (or the stream ended, to be opened again)."""
        with self._lock:
            session.streams -= 1
            if not session.streams:
                session.alone = time.monotonic()

    def seen(self, value: str | None) -> Seen | None:
        """The session of a request's cookie `value` (and the value to replace it with, when due);
        None when it is no session's, no page of it was open for DETACHED seconds, or it is a value
        replaced more than GRACE seconds ago (then the session ends)."""
        if not value:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._values.get(value)
            if session is None:
                return None
            if self._detached(session, now):
                self._end(session)
                return None
            if value != session.value:
                if now - session.retired[value] > GRACE:
                    self._end(session)
                    if self.said is not None:
                        self.said("a session's replaced cookie came back: signed it out (a copy in use elsewhere?)")
                    return None
                return Seen(session, session.value)  # the new value again: its first answer may have been lost
            if now - session.since < ROTATE:
                return Seen(session, None)
            session.retired[session.value] = now
            session.value, session.since = secrets.token_urlsafe(32), now
            self._values[session.value] = session
            return Seen(session, session.value)

    def _end(self, session: Session) -> None:
        for value in [session.value, *session.retired]:
            self._values.pop(value, None)

    @staticmethod
    def _detached(session: Session, now: float) -> bool:
        return not session.streams and now - session.alone > DETACHED


def _hashed(code: str) -> bytes:
    """What a code is kept and looked up as: its hash (a lookup's time says nothing of the code)."""
    return hashlib.sha256(code.encode("utf-8", "surrogateescape")).digest()


# -- a second crew ui ------------------------------------------------------------------------------


def new_link(path: Path) -> str | None:
    """A fresh sign-in link from the `crew ui` serving at the socket `path`; None when none serves
    there. UsageError when one serves but gives no link (an older crew, or it refused)."""
    sock = connect(path)
    if sock is None:
        return None
    with sock:
        sock.settimeout(ASKING)
        lines = Lines(sock)
        send(sock, {"op": "sign-in"})
        asked = lines.next()
        name = asked.get("name") if asked is not None and asked.get("op") == "prove" else None
        if isinstance(name, str) and CLAIM.fullmatch(name):
            _claim(path.parent / name)
            send(sock, {"op": "proved"})
            asked = lines.next()
        if asked is not None and asked.get("op") == "link" and isinstance(asked.get("url"), str):
            return str(asked["url"])
    why = str(asked.get("why")) if asked is not None and asked.get("why") else "it gave none"
    raise UsageError(
        f"another crew ui serves for this user (its socket is {path}) but gave no sign-in link ({why}); "
        "stop it and start crew ui again"
    )


def _claim(path: Path) -> None:
    """Make the file a serving crew ui named: proof that this process may write crew's state folder."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(path, flags, 0o600))
    except OSError as exc:
        raise UsageError(
            f"cannot write {path.parent} ({exc.strerror or exc}), so the crew ui serving there gives no link; "
            "run crew ui in your own terminal, not inside a sandbox"
        ) from None


def claimed(folder: Path, name: str) -> bool:
    """Whether the file `name` a second crew ui was asked to make is in `folder`, made by this user
    (it is removed either way)."""
    path = folder / name
    try:
        info = os.lstat(path)
    except OSError:
        return False
    try:
        os.unlink(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()


def no_new_privs(pid: int) -> bool:
    """Whether process `pid` may never gain privileges (no_new_privs: set by bubblewrap and by crew's
    Landlock sandbox, and kept by every process either starts); False where this cannot be read."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            return any(line.split() == [b"NoNewPrivs:", b"1"] for line in status)
    except OSError:
        return False
