"""A small stand-in of GitHub's and GitLab's REST APIs, started by the tests on 127.0.0.1 (no forge is
reachable from here): the endpoints crew uses, as their documentation describes them, over real git
repositories (bare ones the tests push to through `url.<base>.insteadOf`).

GitHub (API root: the server's URL, as $GITHUB_API_URL names it):
  GET/POST /repos/O/R/pulls (?state=open&head=O:BRANCH), GET/PATCH /repos/O/R/pulls/N,
  POST /repos/O/R/issues/N/labels, GET /repos/O/R/commits/SHA/check-runs and /status.
  A create whose head branch is not in the repository is 422 "Validation Failed"; a second open pull
  request for a head is 422 "A pull request already exists for O:BRANCH.".
GitLab (root: URL/api/v4, as $CI_API_V4_URL names it):
  GET/POST /projects/ID/merge_requests (?state=opened&source_branch=B), GET/PUT .../merge_requests/IID;
  a second open one for a source branch is 409.

Every request needs the token (GitHub: `Authorization: Bearer T`; GitLab: `PRIVATE-TOKEN: T`), else 401.
Rate limits: with `limit_every=N`, every Nth request is a secondary rate limit (GitHub: 403 with
`retry-after` and the message GitHub gives; GitLab: 429 with `Retry-After`); a request during the wait
is refused the same way and counted in `early` (a client that did not wait). `primary` limits the next
request as GitHub's primary limit does (403, x-ratelimit-remaining 0, x-ratelimit-reset)."""

from __future__ import annotations

import json
import math
import subprocess
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

SECONDARY = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out "
    "to GitHub Support for help, please include the request ID 0000:1111:2222."
)
DOCS = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"


@dataclass
class Seen:
    method: str
    path: str
    at: float


@dataclass
class ForgeServer:
    """The stand-in: `repos` maps a repository's path (owner/repo, group/project) to its bare repository."""

    repos: dict[str, Path] = field(default_factory=dict)
    token: str = "forge-t0ken"
    limit_every: int = 0
    retry_after: int = 1
    primary: bool = False  # the next request meets GitHub's primary limit (once)
    requests: list[Seen] = field(default_factory=list)
    limits: int = 0  # limits given (every Nth request, and the primary one)
    early: int = 0  # requests that came while a limit's wait was not over
    pulls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # repository → its pull requests
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # commit → its check runs
    pipelines: dict[str, str] = field(default_factory=dict)  # commit → its GitLab pipeline's status

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._counted = 0
        self._until = 0.0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ForgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def of(self, repo: str) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(pull) for pull in self.pulls.get(repo, [])]

    def set_state(self, repo: str, number: int, state: str) -> None:
        """Merge or close a pull request, as a person would on the forge."""
        with self._lock:
            pull = next(p for p in self.pulls[repo] if p["number"] == number)
            pull["state"], pull["merged"] = ("closed", True) if state == "merged" else (state, False)

    # -- what the handler calls, under the lock ---------------------------------------------------

    def admit(self, method: str, path: str, gitlab: bool) -> tuple[int, dict[str, str], Any] | None:
        """A rate limit's answer for this request, or None (counted, and served)."""
        now = time.time()
        with self._lock:
            self.requests.append(Seen(method, path, now))
            if now < self._until:
                self.early += 1
                return self._limited(math.ceil(self._until - now), gitlab)
            if self.primary and not gitlab:
                self.primary, self.limits = False, self.limits + 1
                self._until = now + self.retry_after
                reset = str(int(now + self.retry_after) + 1)
                headers = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
                return 403, headers, {"message": "API rate limit exceeded for user ID 1.", "documentation_url": DOCS}
            self._counted += 1
            if self.limit_every and self._counted % self.limit_every == 0:
                self.limits += 1
                self._until = now + self.retry_after
                return self._limited(self.retry_after, gitlab)
        return None

    def _limited(self, seconds: int, gitlab: bool) -> tuple[int, dict[str, str], Any]:
        if gitlab:
            headers = {"Retry-After": str(seconds), "RateLimit-Remaining": "0"}
            return 429, headers, {"message": "Retry later"}
        return 403, {"retry-after": str(seconds)}, {"message": SECONDARY, "documentation_url": DOCS}

    def head_of(self, repo: str, branch: str) -> str | None:
        bare = self.repos.get(repo)
        if bare is None:
            return None
        found = subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
            cwd=bare,
            capture_output=True,
            text=True,
        )
        return found.stdout.strip() or None

    def github(self, method: str, parts: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if len(parts) < 4 or parts[0] != "repos" or f"{parts[1]}/{parts[2]}" not in self.repos:
            return 404, {"message": "Not Found", "documentation_url": DOCS}
        repo, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        with self._lock:
            pulls = self.pulls.setdefault(repo, [])
            if rest == ["pulls"] and method == "GET":
                found = [p for p in pulls if query.get("state", "open") in ("all", p["state"])]
                if "head" in query:
                    found = [p for p in found if p["head"]["label"] == query["head"]]
                return 200, [self._shown(repo, p) for p in found[: int(query.get("per_page", 30))]]
            if rest == ["pulls"] and method == "POST":
                return self._create(repo, pulls, body)
            if len(rest) == 2 and rest[0] == "pulls" and rest[1].isdigit():
                pull = next((p for p in pulls if p["number"] == int(rest[1])), None)
                if pull is None:
                    return 404, {"message": "Not Found"}
                if method == "PATCH":
                    pull.update({k: v for k, v in (body or {}).items() if k in ("title", "body", "state")})
                return 200, self._shown(repo, pull)
            if len(rest) == 3 and rest[0] == "issues" and rest[2] == "labels" and method == "POST":
                pull = next((p for p in pulls if p["number"] == int(rest[1])), None)
                if pull is None or not isinstance((body or {}).get("labels"), list):
                    return 422 if pull else 404, {"message": "Validation Failed"}
                pull["labels"] = sorted({*pull["labels"], *body["labels"]})
                return 200, [{"name": name} for name in pull["labels"]]
            if len(rest) == 3 and rest[0] == "commits" and rest[2] == "check-runs":
                runs = self.checks.get(rest[1], [])
                return 200, {"total_count": len(runs), "check_runs": runs}
            if len(rest) == 3 and rest[0] == "commits" and rest[2] == "status":
                return 200, {"state": "pending", "statuses": [], "total_count": 0, "sha": rest[1]}
        return 404, {"message": "Not Found", "documentation_url": DOCS}

    def _create(self, repo: str, pulls: list[dict[str, Any]], body: Any) -> tuple[int, Any]:
        body = body or {}
        if not all(isinstance(body.get(key), str) and body[key] for key in ("title", "head", "base")):
            return 422, {
                "message": "Validation Failed",
                "errors": [{"resource": "PullRequest", "code": "missing_field"}],
            }
        owner = repo.split("/")[0]
        label = body["head"] if ":" in body["head"] else f"{owner}:{body['head']}"
        if any(p["head"]["label"] == label and p["state"] == "open" for p in pulls):
            errors = [
                {"resource": "PullRequest", "code": "custom", "message": f"A pull request already exists for {label}."}
            ]
            return 422, {"message": "Validation Failed", "errors": errors, "documentation_url": DOCS}
        branch = label.split(":", 1)[1]
        if self.head_of(repo, branch) is None or self.head_of(repo, body["base"]) is None:
            errors = [{"resource": "PullRequest", "field": "head", "code": "invalid"}]
            return 422, {"message": "Validation Failed", "errors": errors, "documentation_url": DOCS}
        number = 1 + max((p["number"] for ps in self.pulls.values() for p in ps), default=0)
        pull = {
            "number": number,
            "state": "open",
            "merged": False,
            "title": body["title"],
            "body": body.get("body") or "",
            "draft": bool(body.get("draft")),
            "head": {"label": label, "ref": branch},
            "base": {"ref": body["base"]},
            "labels": [],
        }
        pulls.append(pull)
        return 201, self._shown(repo, pull)

    def _shown(self, repo: str, pull: dict[str, Any]) -> dict[str, Any]:
        head = {**pull["head"], "sha": self.head_of(repo, pull["head"]["ref"])}
        return {
            **pull,
            "head": head,
            "html_url": f"https://github.com/{repo}/pull/{pull['number']}",
            "labels": [{"name": name} for name in pull["labels"]],
            "merged_at": "2026-01-01T00:00:00Z" if pull["merged"] else None,
        }

    def gitlab(self, method: str, parts: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if (
            len(parts) < 3
            or parts[0] != "projects"
            or parts[2] != "merge_requests"
            or unquote(parts[1]) not in self.repos
        ):
            return 404, {"message": "404 Project Not Found"}
        repo, rest = unquote(parts[1]), parts[3:]
        with self._lock:
            requests = self.pulls.setdefault(repo, [])
            if not rest and method == "GET":
                found = [r for r in requests if query.get("state", "all") in ("all", r["state"])]
                found = [r for r in found if r["source_branch"] == query.get("source_branch", r["source_branch"])]
                return 200, [self._request(repo, r) for r in found]
            if not rest and method == "POST":
                body = body or {}
                if any(r["source_branch"] == body.get("source_branch") and r["state"] == "opened" for r in requests):
                    return 409, {"message": ["Another open merge request already exists for this source branch: !1"]}
                if self.head_of(repo, str(body.get("source_branch"))) is None or not body.get("title"):
                    return 400, {"message": "400 Bad request"}
                labels = [label for label in str(body.get("labels") or "").split(",") if label]
                iid = 1 + max((r["number"] for r in requests), default=0)
                made = {
                    "number": iid,
                    "state": "opened",
                    "title": body["title"],
                    "description": body.get("description") or "",
                    "source_branch": body["source_branch"],
                    "target_branch": body.get("target_branch"),
                    "labels": labels,
                }
                requests.append(made)
                return 201, self._request(repo, made)
            if len(rest) == 1 and rest[0].isdigit():
                found = next((r for r in requests if r["number"] == int(rest[0])), None)
                if found is None:
                    return 404, {"message": "404 Not found"}
                if method == "PUT":
                    changes = body or {}
                    found.update({k: v for k, v in changes.items() if k in ("title", "description")})
                    found["labels"] = sorted(
                        {*found["labels"], *str(changes.get("add_labels") or "").split(",")} - {""}
                    )
                return 200, self._request(repo, found)
        return 404, {"message": "404 Not found"}

    def _request(self, repo: str, made: dict[str, Any]) -> dict[str, Any]:
        sha = self.head_of(repo, made["source_branch"])
        pipeline = {"status": self.pipelines[sha]} if sha in self.pipelines else None
        return {
            "iid": made["number"],
            "state": made["state"],
            "title": made["title"],
            "description": made["description"],
            "source_branch": made["source_branch"],
            "target_branch": made["target_branch"],
            "labels": made["labels"],
            "draft": made["title"].startswith("Draft:"),
            "sha": sha,
            "head_pipeline": pipeline,
            "web_url": f"https://gitlab.com/{repo}/-/merge_requests/{made['number']}",
        }


def _handler(forge: ForgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            url = urlsplit(self.path)
            gitlab = url.path.startswith("/api/v4/")
            given = self.headers.get("PRIVATE-TOKEN") if gitlab else None
            authorization = self.headers.get("Authorization", "")
            if not given and authorization.split(" ", 1)[0] in ("Bearer", "token"):
                given = authorization.split(" ", 1)[-1]
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(min(size, 1 << 20)) if size else b""
            if given != forge.token:
                return self._answer(401, {}, {"message": "401 Unauthorized" if gitlab else "Bad credentials"})
            limited = forge.admit(self.command, url.path, gitlab)
            if limited is not None:
                return self._answer(*limited)
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                return self._answer(400, {}, {"message": "Problems parsing JSON"})
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            path = url.path.removeprefix("/api/v4") if gitlab else url.path
            parts = [p for p in path.split("/") if p]
            serve = forge.gitlab if gitlab else forge.github
            status, data = serve(self.command, parts, query, body)
            self._answer(status, {}, data)

        def _answer(self, status: int, headers: dict[str, str], data: Any) -> None:
            payload = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PATCH = do_PUT = _serve

    return Handler
