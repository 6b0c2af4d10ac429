"""`crew ui`'s HTTP face: the pages, the API they call, and the server-sent events that keep them live.

Served by crewbridge.webserver (loopback unless --allow-remote, Host and Origin checked, bodies
bounded, requests under a deadline, strangers' connections limited). Every page and API answers 401
without the token or the session cookie: opening `/?token=TOKEN` sets the cookie (HttpOnly,
SameSite=Strict) and sends the browser to the same page without the token. A request that changes
something (an approval's answer, a cancel) needs the cookie, its session's CSRF token in
`X-CSRF-Token`, a JSON body, and an Origin that is this very server (a page on another port of the
same host is another origin, though the same site). Pages run only crew's own script and style
(Content-Security-Policy), shipped in the package: nothing is fetched from elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable
from http.cookies import CookieError, SimpleCookie
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

from crewbridge.childenv import UI_TOKEN
from crewbridge.errors import CrewError
from crewbridge.git import Checkout
from crewbridge.jsonio import dumps_bytes, loads
from crewbridge.transcript import runs_dir
from crewbridge.ui.batches import BatchSource, CrewBatches
from crewbridge.ui.desk import Desk
from crewbridge.ui.runs import STATUSES, Runs, read_events
from crewbridge.uilink import socket_path
from crewbridge.webserver import Handler, Keys, Listening, Server

TOKEN_VARIABLE = UI_TOKEN  # left out of everything crew starts (crewbridge.childenv)
FLAG = "--listen"
COOKIE = "crew_ui"
MAX_BODY = 16 << 10  # bytes of a request's body (an answer, a cancel)
TAIL = 0.05  # seconds between looks at a live run's transcript
LOOK = 0.5  # seconds between looks for new runs and changed ones (the list page)
KEEPALIVE = 15.0  # seconds between keep-alive lines on a quiet event stream
MAX_DIFF = 2 << 20  # bytes of a worktree's diff shown
PAGES = re.compile(r"^/(?:runs/[0-9]{8}-[0-9]{6}-[0-9a-f]{6}|batches|usage)?$")
STATIC = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
SECURITY = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def serve_ui(listening: Listening, say: Callable[[str], None]) -> None:
    """Serve the UI at http://ADDRESS/ until stopped (Ctrl-C, SIGTERM); `say` gets the URL to open."""
    host, port, token, _ = listening.settle(flag=FLAG, variable=TOKEN_VARIABLE, face="crew ui", say=say)
    ui = Ui(host, port, token=token, allowed_hosts=listening.allowed_hosts)
    try:
        ui.open()
        say(f"crew ui: open {ui.url}/?token={quote(token)}")
        ui.serve()
    finally:
        ui.close()


class Ui:
    """The UI's server over the runs of `directory` (default: crew's transcripts), its desk on the
    Unix socket at `socket` (default: the user's), and `batches`."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str,
        allowed_hosts: Iterable[str] = (),
        directory: Path | None = None,
        socket: Path | None = None,
        batches: BatchSource | None = None,
    ) -> None:
        directory = directory or runs_dir()
        self.runs = Runs(directory, directory.parent / "ui-index.json")
        self.desk = Desk(socket or socket_path(), self.runs)
        self.batches = batches or CrewBatches()
        self.closed = threading.Event()
        self.static = {
            name: (files("crewbridge.ui") / "static" / name).read_bytes() for name in [*STATIC, "index.html"]
        }
        self.etags = {name: hashlib.sha256(data).hexdigest()[:16] for name, data in self.static.items()}
        handler = type("Handler", (_Handler,), {"ui": self, "keys": Keys(token)})
        self.httpd = Server(host, port, handler, flag=FLAG, allowed_hosts=allowed_hosts)
        self.httpd.face = "crew ui"
        self.url = self.httpd.url

    def open(self) -> None:
        """Listen on the desk's socket, and read the runs once meanwhile (the first page lists them warm)."""
        self.desk.start()
        threading.Thread(target=self.runs.rows, name="crew-ui-read", daemon=True).start()

    def serve(self) -> None:
        """Answer HTTP until close()."""
        self.httpd.serve()

    def start(self) -> None:
        """open(), and answer HTTP from a thread of its own, until close()."""
        self.open()
        self.httpd.start("crew-ui-http")

    def close(self) -> None:
        self.closed.set()
        self.httpd.close()
        self.desk.close()
        self.batches.close()

    def runs_mark(self) -> tuple[Any, ...]:
        """What changes when a run starts, ends or writes while running (the list's cue to refresh)."""
        try:
            mark: list[Any] = [self.runs.directory.stat().st_mtime_ns]
        except OSError:
            return ()
        for run_id in self.runs.running():
            path = self.runs.directory / f"{run_id}.jsonl"
            try:
                mark.append((run_id, path.stat().st_size))
            except OSError:
                mark.append((run_id, None))
        return tuple(mark)


class _Handler(Handler):
    ui: Ui
    max_body = MAX_BODY
    _session: str | None = None  # the nonce of the request's valid session cookie
    _signing_in = False  # the request brought the token in its address

    # -- who --------------------------------------------------------------------------------------

    def authorized(self) -> bool:
        self._signing_in = False  # a handler serves every request of its connection
        self._session = self.keys.session(self._cookie())
        if self._session is not None or self.keys.bearer(self.headers):
            return True
        given = parse_qs(urlsplit(self.path).query).get("token", [])
        self._signing_in = self.command == "GET" and len(given) == 1 and self.keys.matches(given[0])
        return self._signing_in

    def unauthorized(self) -> None:
        self.refuse(401, "crew ui needs its token: open the address `crew ui` printed (it ends in ?token=…)")

    def _cookie(self) -> str | None:
        cookies: SimpleCookie = SimpleCookie()
        try:
            for header in self.headers.get_all("Cookie") or []:
                cookies.load(header)
        except CookieError:
            return None
        morsel = cookies.get(COOKIE)
        return morsel.value if morsel is not None else None

    def _may_change(self) -> bool:
        """A state-changing request: the session cookie, its CSRF token, a JSON body, from this
        very origin; False (and the refusal sent) else."""
        if self._session is None:
            self.refuse(403, "changes need the session crew ui's address opened (its cookie)")
            return False
        origin = self.headers.get("Origin")
        host = self.headers.get("Host", "")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            self.refuse(403, f"a change from origin {origin} is refused: only crew ui's own pages may make one")
            return False
        if origin is None and self.headers.get("Sec-Fetch-Site", "same-origin") != "same-origin":
            self.refuse(403, "a change from another site is refused")
            return False
        given = self.headers.get("X-CSRF-Token", "")
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self.keys.csrf(self._session).encode()):
            self.refuse(403, "the page's CSRF token is missing or wrong; reload the page")
            return False
        if self.headers.get("Content-Type", "").partition(";")[0].strip().lower() != "application/json":
            self.refuse(415, "send the change as Content-Type: application/json")
            return False
        return True

    def end_headers(self) -> None:
        for name, value in SECURITY.items():
            self.send_header(name, value)
        super().end_headers()

    # -- methods ----------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if not self.path.startswith("/"):
            return self.refuse(404, "crew ui serves paths only")
        if not self.admitted():
            return
        url = urlsplit(self.path)
        if self._signing_in:
            return self._sign_in(url.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        path = url.path
        if PAGES.match(path):
            return self._page()
        if path.startswith("/static/") and path[len("/static/") :] in STATIC:
            return self._static(path[len("/static/") :])
        if path == "/api/runs":
            status = query.get("status") or None
            if status is not None and status not in STATUSES:
                return self.refuse(400, f"status '{status}' is not one of {', '.join(STATUSES)}")
            return self.send_json(200, self.ui.runs.listed(query.get("agent") or None, status, query.get("q") or None))
        if path == "/api/live":
            return self._live()
        if path == "/api/questions":
            return self.send_json(200, self.ui.desk.questions())
        if path == "/api/usage":
            return self.send_json(200, self.ui.runs.usage())
        if path == "/api/batches":
            try:
                batches = self.ui.batches.batches()
            except Exception as exc:  # DBOS's own errors (a database busy or gone) come in many kinds
                return self.send_json(503, {"error": f"cannot read crew batch's database: {exc}"})
            return self.send_json(200, [batch.to_dict() for batch in batches])
        found = re.fullmatch(r"/api/runs/([0-9a-f-]+)(/events|/diff)?", path)
        if found and self.ui.runs.path(found[1]) is not None:
            run_id, part = found[1], found[2]
            if part == "/events":
                return self._events(run_id)
            if part == "/diff":
                return self._diff(run_id, query.get("agent", ""))
            row = self.ui.runs.row(run_id)
            return self.send_json(200, {**(row.to_dict() if row else {}), "attended": self.ui.desk.attended(run_id)})
        self.refuse(404, f"crew ui has no {path}")

    def do_POST(self) -> None:
        if not self.path.startswith("/") or not self.admitted() or not self._may_change():
            return
        length = self.body_length()
        body = self.read_body(length) if length is not None else None
        if body is None:
            return
        try:
            data = loads(body) if body else {}
        except ValueError:
            return self.send_json(400, {"error": "the body is not JSON"})
        path = urlsplit(self.path).path
        found = re.fullmatch(r"/api/questions/([0-9a-f]{16})", path)
        if found:
            verdict = data.get("verdict") if isinstance(data, dict) else None
            problem = self.ui.desk.answer(found[1], str(verdict))
            return self.send_json(409 if problem else 200, {"error": problem} if problem else {"ok": True})
        found = re.fullmatch(r"/api/runs/([0-9a-f-]+)/cancel", path)
        if found and self.ui.runs.path(found[1]) is not None:
            if self.ui.desk.cancel(found[1]):
                return self.send_json(200, {"ok": True})
            return self.send_json(409, {"error": "the run is not running in a crew process that attends this UI"})
        self.send_json(404, {"error": f"crew ui has no {path}"})

    # -- answers ----------------------------------------------------------------------------------

    def _sign_in(self, path: str) -> None:
        """Set the session cookie, and go to the same page without the token in its address."""
        cookie = f"{COOKIE}={self.keys.new_session()}; HttpOnly; SameSite=Strict; Path=/"
        self.send(303, b"", Location=path if PAGES.match(path) else "/", **{"Set-Cookie": cookie})

    def _page(self) -> None:
        csrf = self.keys.csrf(self._session) if self._session else ""
        page = self.ui.static["index.html"].replace(b"{{csrf}}", csrf.encode())
        self.send(200, page, "text/html; charset=utf-8")

    def _static(self, name: str) -> None:
        etag = f'"{self.ui.etags[name]}"'
        if self.headers.get("If-None-Match") == etag:
            return self.send(304, b"", ETag=etag)
        self.send(200, self.ui.static[name], STATIC[name], ETag=etag)

    def _diff(self, run_id: str, agent: str) -> None:
        """The whole diff of `agent`'s worktree in run `run_id` (its snapshot against the base), by
        the git folders crew recorded when it made the worktree: the worktree's `.git`, which the
        agent could have pointed at a repository of its own, is never read (crewbridge.git)."""
        path = self.ui.runs.path(run_id)
        assert path is not None
        events, _ = read_events(path, 0)
        made = [e for _, e in events if e.get("kind") == "worktree" and e.get("agent") == agent]
        if not made or not all(isinstance(made[0].get(key), str) for key in ("worktree", "base")):
            return self.send_json(404, {"error": f"run {run_id} made no worktree for @{agent}"})
        folder, apply = Path(made[0]["worktree"]), f"crew apply {run_id} {agent}"
        if not all(isinstance(made[0].get(key), str) for key in ("git_dir", "common")):
            said = f"run {run_id} did not record its worktree's git folder (an older crew made it); `{apply}` shows it"
            return self.send_json(200, {"diff": None, "error": said, "apply": apply})
        if not folder.is_dir():
            return self.send_json(200, {"diff": None, "gone": True, "apply": apply})
        try:
            checkout = Checkout(folder, Path(made[0]["git_dir"]), Path(made[0]["common"]))
            diff = checkout.diff(made[0]["base"], checkout.snapshot())
        except CrewError as exc:
            return self.send_json(200, {"diff": None, "error": str(exc), "apply": apply})
        cut = len(diff) > MAX_DIFF
        self.send_json(200, {"diff": diff[:MAX_DIFF].decode("utf-8", "replace"), "cut": cut, "apply": apply})

    def _events(self, run_id: str) -> None:
        """The run's events from the start (or from Last-Event-ID, a byte offset), then each as it
        is appended, and its reply text as it streams, until its end."""
        path = self.ui.runs.path(run_id)
        assert path is not None
        last = self.headers.get("Last-Event-ID", "0")
        offset = int(last) if last.isdigit() and last.isascii() else 0
        texts = self.ui.desk.watch(run_id)
        stream = self.event_stream()
        quiet, checked = time.monotonic(), time.monotonic()
        try:
            while not self.ui.closed.is_set():
                events, offset = read_events(path, offset)
                for after, event in events:
                    if not stream.send(dumps_bytes(event), event="event", id=str(after)):
                        return
                    if event.get("kind") == "end":
                        stream.send(b"{}", event="end")
                        return
                if events:
                    quiet = time.monotonic()
                if time.monotonic() - checked > 1.0:  # a run that died writes no end: look at its process
                    checked = time.monotonic()
                    row = self.ui.runs.row(run_id)
                    if row is not None and row.status != "running":
                        stream.send(dumps_bytes({"status": row.status}), event="end")
                        return
                try:
                    text = texts.get(timeout=TAIL)
                except queue.Empty:
                    text = None
                while text is not None:
                    if not stream.send(dumps_bytes(text), event="text"):
                        return
                    quiet = time.monotonic()
                    text = texts.get_nowait() if not texts.empty() else None
                if time.monotonic() - quiet > KEEPALIVE:
                    if not stream.comment():
                        return
                    quiet = time.monotonic()
        finally:
            self.ui.desk.unwatch(run_id, texts)

    def _live(self) -> None:
        """What every page keeps up with: the approval questions (each time they change) and a cue
        when runs start, end or write (the list fetches itself again)."""
        stream = self.event_stream()
        version, mark, quiet = -1, None, time.monotonic()
        while not self.ui.closed.is_set():
            if self.ui.desk.version != version:
                version = self.ui.desk.version
                if not stream.send(dumps_bytes(self.ui.desk.questions()), event="questions"):
                    return
                quiet = time.monotonic()
            now = self.ui.runs_mark()
            if now != mark:
                if mark is not None and not stream.send(b"{}", event="runs"):
                    return
                mark, quiet = now, time.monotonic()
            if time.monotonic() - quiet > KEEPALIVE:
                if not stream.comment():
                    return
                quiet = time.monotonic()
            self.ui.desk.wait(version, LOOK)
