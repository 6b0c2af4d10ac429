"""`crew ui`'s HTTP face: the pages, the API they call, and the server-sent events that keep them live.

Served by crewbridge.protocol.webserver (loopback unless --allow-remote, Host and Origin checked, bodies
bounded, requests under a deadline, strangers' connections limited). Every page and API answers 401
without a session's cookie or the token (`Authorization: Bearer`, for programs; never in an
address): a one-time link `/sign-in/CODE` opens a session (crewbridge.ui.signin). A request that changes
something (an approval's answer, a cancel) needs the cookie, its session's CSRF token in
`X-CSRF-Token`, a JSON body, and an Origin that is this very server (a page on another port of the
same host is another origin, though the same site). Pages run only crew's own script and style
(Content-Security-Policy), shipped in the package: nothing is fetched from elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import re
import threading
import time
from collections.abc import Callable, Iterable
from http.cookies import CookieError, SimpleCookie
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from crewbridge.base.extras import EXTRAS, missing
from crewbridge.base.jsonio import dumps_bytes, loads
from crewbridge.errors import CrewError
from crewbridge.protocol.webserver import EventStream, Handler, Keys, Listening, Server
from crewbridge.record import events as ev
from crewbridge.record.index import Runs, read_from
from crewbridge.record.transcript import Reader, read_path, runs_dir
from crewbridge.system.childenv import UI_TOKEN
from crewbridge.system.git import Checkout
from crewbridge.ui.batches import BatchSource, CrewBatches
from crewbridge.ui.desk import Desk
from crewbridge.ui.link import socket_path
from crewbridge.ui.runs import listed, usage
from crewbridge.ui.signin import CODE_LIFE, ROTATE, Seen, SignIns, new_link

TOKEN_VARIABLE = UI_TOKEN  # left out of everything crew starts (crewbridge.system.childenv)
FLAG = "--listen"
COOKIE = "crew_ui"
MAX_BODY = 16 << 10  # bytes of a request's body (an answer, a cancel)
TAIL = 0.05  # seconds between looks at a live run's transcript
LOOK = 0.5  # seconds between looks for new runs and changed ones (the list page)
KEEPALIVE = 15.0  # seconds between keep-alive lines on a quiet event stream
MAX_DIFF = 2 << 20  # bytes of a worktree's diff shown
ONCE = f"the link signs in one browser, once, within {CODE_LIFE / 60:g} minutes; `crew ui` again prints a new one"
SIGNED_OUT = {  # why → the page's title and text (crewbridge/ui/static/signin.html)
    "out": (
        "Sign in to crew ui",
        "Run crew ui in a terminal on this machine and open the link it prints. "
        "While crew ui runs, running it again prints a new link to it.",
    ),
    "used": (
        "This sign-in link is used up or expired",
        f"A link crew ui prints signs in one browser, once, within {CODE_LIFE / 60:g} minutes. "
        "Run crew ui again in a terminal on this machine: while crew ui runs, it prints a new link to it.",
    ),
}
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


def serve_ui(listening: Listening, say: Callable[[str], None], out: Callable[[str], None]) -> None:
    """Serve the UI at http://ADDRESS/ until stopped (Ctrl-C, SIGTERM); `out` gets the one-time
    sign-in link to open, `say` the rest. While a `crew ui` of this user serves already, `out` gets
    a fresh link to that one instead (crewbridge.ui.signin)."""
    link = new_link(socket_path())
    if link is None:
        host, port, token, _ = listening.settle(flag=FLAG, variable=TOKEN_VARIABLE, face="crew ui", say=say)
        ui = Ui(host, port, token=token, allowed_hosts=listening.allowed_hosts, say=say)
        try:
            ui.open()
            out(f"crew ui: open {ui.sign_in_link()}")
            say(f"crew ui: {ONCE}")
            ui.serve()
        finally:
            ui.close()
    else:
        out(f"crew ui: open {link}")
        say(f"crew ui: one serves already: a new sign-in link to it; {ONCE}")


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
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.runs = Runs(directory or runs_dir())
        self.signins = SignIns(said=(lambda line: say(f"crew ui: {line}")) if say else None)
        self.desk = Desk(socket or socket_path(), self.runs, self.sign_in_link)
        self.batches = batches or CrewBatches()
        self.closed = threading.Event()
        self.static = {
            name: (files("crewbridge.ui") / "static" / name).read_bytes()
            for name in [*STATIC, "index.html", "signin.html", "missing.html"]
        }
        self.etags = {name: hashlib.sha256(data).hexdigest()[:16] for name, data in self.static.items()}
        handler = type("Handler", (_Handler,), {"ui": self, "keys": Keys(token)})
        self.httpd = Server(host, port, handler, flag=FLAG, allowed_hosts=allowed_hosts)
        self.httpd.face = "crew ui"
        self.url = self.httpd.url

    def sign_in_link(self) -> str:
        """A new one-time sign-in link (crewbridge.ui.signin)."""
        return f"{self.url}/sign-in/{self.signins.code()}"

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
        for run_id in self.runs.live():
            path = self.runs.directory / f"{run_id}.jsonl"
            try:
                mark.append((run_id, path.stat().st_size))
            except OSError:
                mark.append((run_id, None))
        return tuple(mark)


class _Handler(Handler):
    ui: Ui
    max_body = MAX_BODY
    _seen: Seen | None = None  # the request's session, if its cookie is one's

    # -- who --------------------------------------------------------------------------------------

    def authorized(self) -> bool:
        self._seen = self.ui.signins.seen(self._cookie())  # a handler serves every request of its connection
        return self._seen is not None or self.keys.bearer(self.headers)

    def unauthorized(self) -> None:
        if self.command == "GET" and self.accepts("text/html") and not self.path.startswith("/api/"):
            return self._signed_out(401, "out")
        self.refuse(401, "crew ui needs a sign-in: run `crew ui` and open the link it prints (or send the token)")

    def _public(self) -> bool:
        """Answer what needs no sign-in (after Host and Origin): a sign-in link, and the style of
        the page that says to get one; True when answered. Such a request takes no slot of the
        signed-in connections' (crewbridge.protocol.webserver)."""
        path = urlsplit(self.path).path
        code = re.fullmatch(r"/sign-in/([A-Za-z0-9_-]{1,100})", path)
        if path != "/static/app.css" and code is None:
            return False
        if not self.addressed():
            return True
        if code is None:
            self._static("app.css")
        elif (seen := self.ui.signins.redeem(code[1])) is not None:
            self._seen = seen
            self.send(303, b"", Location="/")
        else:
            self._signed_out(410, "used")
        return True

    def _signed_out(self, status: int, why: str) -> None:
        """The page that says how to sign in (`why`: out, or a link used or expired), with the way
        back to the page asked for once signed in (one of crew ui's pages, else the runs)."""
        title, text = SIGNED_OUT[why]
        path = urlsplit(self.path).path
        back = path if why == "out" and PAGES.fullmatch(path) else "/"
        page = self.ui.static["signin.html"].replace(b"{{why}}", why.encode()).replace(b"{{back}}", back.encode())
        page = page.replace(b"{{title}}", title.encode()).replace(b"{{text}}", text.encode())
        self.discard_body()
        self.send(status, page, "text/html; charset=utf-8")

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
        if self._seen is None:
            self.refuse(403, "changes need a signed-in page (its cookie); run `crew ui` for a sign-in link")
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
        if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), self._seen.session.csrf.encode()):
            self.refuse(403, "the page's CSRF token is missing or wrong; reload the page")
            return False
        if self.headers.get("Content-Type", "").partition(";")[0].strip().lower() != "application/json":
            self.refuse(415, "send the change as Content-Type: application/json")
            return False
        return True

    def end_headers(self) -> None:
        for name, value in SECURITY.items():
            self.send_header(name, value)
        if self._seen is not None and self._seen.cookie is not None:  # a new session, or its value replaced
            self.send_header("Set-Cookie", f"{COOKIE}={self._seen.cookie}; HttpOnly; SameSite=Strict; Path=/")
        super().end_headers()

    # -- methods ----------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._seen = None
        if not self.path.startswith("/"):
            return self.refuse(404, "crew ui serves paths only")
        if self._public() or not self.admitted():
            return
        url = urlsplit(self.path)
        query = {name: values[0] for name, values in parse_qs(url.query).items()}
        path = url.path
        if PAGES.match(path):
            return self._page()
        if path.startswith("/static/") and path[len("/static/") :] in STATIC:
            return self._static(path[len("/static/") :])
        if path == "/api/runs":
            status = query.get("status") or None
            if status is not None and status not in ev.STATUSES:
                return self.refuse(400, f"status '{status}' is not one of {', '.join(ev.STATUSES)}")
            return self.send_json(200, listed(self.ui.runs, query.get("agent") or None, status, query.get("q") or None))
        if path == "/api/live":
            return self._streamed(self._live)
        if path == "/api/questions":
            return self.send_json(200, self.ui.desk.questions())
        if path == "/api/usage":
            return self.send_json(200, usage(self.ui.runs))
        if path == "/api/batches":
            try:
                batches = self.ui.batches.batches()
            except Exception as exc:  # DBOS's own errors (a database busy or gone) come in many kinds
                return self.send_json(503, {"error": f"cannot read crew batch's database: {exc}"})
            if not batches and not self.ui.batches.installed():  # the page says how to install it
                return self.send_json(200, {"batches": [], "missing": str(missing(EXTRAS["batch"], "crew batch"))})
            return self.send_json(200, {"batches": [batch.to_dict() for batch in batches]})
        found = re.fullmatch(r"/api/runs/([0-9a-f-]+)(/events|/diff)?", path)
        if found and self.ui.runs.path(found[1]) is not None:
            run_id, part = found[1], found[2]
            if part == "/events":
                return self._streamed(lambda stream: self._events(stream, run_id))
            if part == "/diff":
                return self._diff(run_id, query.get("agent", ""))
            row = self.ui.runs.row(run_id)
            return self.send_json(200, {**(row.to_dict() if row else {}), "attended": self.ui.desk.attended(run_id)})
        if self.accepts("text/html") and not path.startswith("/api/"):
            return self._missing(path)
        self.refuse(404, f"crew ui has no {path}")

    def do_POST(self) -> None:
        self._seen = None
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

    def _missing(self, path: str) -> None:
        """The page of a path crew ui has no page at, with the way back."""
        page = self.ui.static["missing.html"].replace(b"{{path}}", html.escape(path).encode("utf-8", "replace"))
        self.send(404, page, "text/html; charset=utf-8")

    def _page(self) -> None:
        csrf = self._seen.session.csrf if self._seen is not None else ""
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
        agent could have pointed at a repository of its own, is never read (crewbridge.system.git)."""
        path = self.ui.runs.path(run_id)
        assert path is not None
        made = [e for e in read_path(path) if isinstance(e, ev.Worktree) and e.agent == agent]
        if not made:
            return self.send_json(404, {"error": f"run {run_id} made no worktree for @{agent}"})
        folder, apply = Path(made[0].worktree), f"crew apply {run_id} {agent}"
        if not made[0].git_dir or not made[0].common:
            said = f"run {run_id} did not record its worktree's git folder (an older crew made it); `{apply}` shows it"
            return self.send_json(200, {"diff": None, "error": said, "apply": apply})
        if not folder.is_dir():
            return self.send_json(200, {"diff": None, "gone": True, "apply": apply})
        try:
            checkout = Checkout(folder, Path(made[0].git_dir), Path(made[0].common))
            diff = checkout.diff(made[0].base, checkout.snapshot())
        except CrewError as exc:
            return self.send_json(200, {"diff": None, "error": str(exc), "apply": apply})
        cut = len(diff) > MAX_DIFF
        self.send_json(200, {"diff": diff[:MAX_DIFF].decode("utf-8", "replace"), "cut": cut, "apply": apply})

    def _events(self, stream: EventStream, run_id: str) -> None:
        """The run's record from its start (or from Last-Event-ID, a byte offset), then each event
        as it is written (the model's text included, as it streams), until its `end` (or ROTATE:
        the page reconnects). A run whose process died writes no end: once its file is read to its
        last line and the index says it is over, the stream ends with the status it says."""
        path = self.ui.runs.path(run_id)
        assert path is not None
        last = self.headers.get("Last-Event-ID", "0")
        offset = int(last) if last.isdigit() and last.isascii() else 0
        reader = Reader()
        quiet, checked = time.monotonic(), time.monotonic()
        until = quiet + ROTATE
        while not self.ui.closed.is_set() and time.monotonic() < until and not self.hung_up():
            events, offset = read_from(path, offset, reader)
            for after, event in events:
                if not stream.send(ev.encode(event), event="event", id=str(after)):
                    return
                if isinstance(event, ev.End):
                    stream.send(dumps_bytes({"status": event.status}), event="end")
                    return
            if events:
                quiet = time.monotonic()
            elif time.monotonic() - checked > 1.0:  # read to its end, and nothing new: did its process die?
                checked = time.monotonic()
                row = self.ui.runs.row(run_id)
                if row is not None and row.status not in ("running", "waiting"):
                    events, offset = read_from(path, offset, reader)  # what it wrote as it died
                    for after, event in events:
                        stream.send(ev.encode(event), event="event", id=str(after))
                    stream.send(dumps_bytes({"status": row.status}), event="end")
                    return
            if time.monotonic() - quiet > KEEPALIVE:
                if not stream.comment():
                    return
                quiet = time.monotonic()
            self.ui.closed.wait(TAIL)

    def _streamed(self, serve: Callable[[EventStream], None]) -> None:
        """Answer with server-sent events from `serve`, which ends them within ROTATE seconds: the
        page's reconnection (within a second) is a request, which picks up its cookie's next value.
        Meanwhile the page is open: its session lives (crewbridge.ui.signin)."""
        session = self._seen.session if self._seen is not None else None
        stream = self.event_stream()
        stream.write(b"retry: 1000\n\n")
        if session is not None:
            self.ui.signins.attached(session)
        try:
            serve(stream)
        finally:
            if session is not None:
                self.ui.signins.detached(session)

    def _live(self, stream: EventStream) -> None:
        """What every page keeps up with: the approval questions (each time they change) and a cue
        when runs start, end or write (the list fetches itself again)."""
        version, mark, quiet = -1, None, time.monotonic()
        until = quiet + ROTATE
        while not self.ui.closed.is_set() and time.monotonic() < until and not self.hung_up():
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
