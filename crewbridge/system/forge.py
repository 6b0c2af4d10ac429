"""The forges crew opens pull requests on: GitHub (and GitHub Enterprise) through its REST API, and
GitLab, whose merge requests crew opens through its own. `crew execute --worktree --pr` and `crew
batch --pr` use them (crewbridge.engine.pulls, crewbridge.batch.workflow).

- **Which forge, which repository**: the remote's URL as configured (`git config remote.origin.url`,
  not the URL `url.<base>.insteadOf` rewrites it to) names the host and the repository (`owner/repo`;
  GitLab's `group/subgroup/project`). github.com is GitHub, its API $GITHUB_API_URL (as GitHub
  Actions names it), else https://api.github.com; the host of $GITHUB_SERVER_URL or $GH_HOST is a
  GitHub Enterprise, its API $GITHUB_API_URL, else https://HOST/api/v3. gitlab.com, and the host of
  $CI_SERVER_URL or $GITLAB_HOST, is GitLab, its API $CI_API_V4_URL, else https://HOST/api/v4.
- **The token**: GitHub's from $GH_TOKEN or $GITHUB_TOKEN ($GH_ENTERPRISE_TOKEN or
  $GITHUB_ENTERPRISE_TOKEN first, for an Enterprise host), else `gh auth token --hostname HOST`;
  GitLab's from $GITLAB_TOKEN (or $GITLAB_ACCESS_TOKEN). It goes only into crew's own requests
  (never into what an agent runs: crewbridge.system.childenv), only over https (http only to a
  loopback address: a local stand-in), never to where a redirect points (crew follows none), and
  into no message.
- **Rate limits**: an answer 403 or 429 that says it is one (Retry-After; x-ratelimit-remaining 0
  with x-ratelimit-reset; GitLab's RateLimit-Reset; a message that names a rate limit) is waited
  out as the forges' documentation asks: Retry-After's seconds, else until the reset, else a minute;
  each time the same request is limited again, twice as long; MAX_TRIES times at most. Requests to
  a forge take turns (`Pace`): one at a time (GitHub asks for no concurrent requests), and once one is
  told to wait, every thread and process that shares the pace waits too (crew batch keeps it in the
  batch's database: one pace per forge for all of a batch's workers).
- **One pull request per branch**: crew looks for the one open from the branch and updates it (its
  title, body and labels); only when there is none does it create one, and a create the forge
  refuses because one exists (GitHub's 422, GitLab's 409) is looked up again and updated.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlsplit

from crewbridge.base import jsonio
from crewbridge.errors import ForgeError, UsageError
from crewbridge.system.childenv import without_secrets
from crewbridge.version import __version__

MAX_TRIES = 6  # sends of one request at most (the waits between them grow)
FIRST_WAIT = 60.0  # seconds waited for a limit that says nothing of how long (GitHub: "at least one minute")
MAX_WAIT = 3600.0  # seconds one wait may last (a primary limit resets within the hour)
REQUEST_TIMEOUT = 30.0  # seconds one request may take
MAX_ANSWER = 8 << 20  # bytes of an answer crew reads
GH_TIMEOUT = 10.0  # seconds `gh auth token` may take
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_SEGMENT = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*$")  # an owner, group or repository name
_SCP = re.compile(r"^(?:[^@/]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/].*)$")  # git@host:owner/repo.git
_RATE_WORDS = re.compile(r"rate limit|too many requests", re.IGNORECASE)
_TRANSIENT = (502, 503, 504)  # the forge's gateway failed: sent again after a short wait


@dataclass(frozen=True)
class Remote:
    """A repository on a forge, as a remote's URL names it."""

    url: str  # as configured
    host: str  # lower case, with its port where the URL gives one
    path: str  # owner/repo (GitLab: group/subgroup/project)

    @property
    def owner(self) -> str:
        return self.path.rsplit("/", 1)[0]


def remote_of(url: str) -> Remote:
    """The repository a git remote's URL names (https://host/owner/repo.git, ssh://git@host/owner/repo,
    git@host:owner/repo.git); a UsageError for one that names no repository on a forge."""
    scp = _SCP.match(url) if "://" not in url else None
    if scp:
        host, path = scp["host"], scp["path"]
    else:
        parts = urlsplit(url)
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port and parts.scheme in ("http", "https") else "")
        path = parts.path if parts.scheme in ("https", "http", "ssh", "git+ssh") else ""
    path = path.strip("/").removesuffix(".git")
    segments = path.split("/")
    if not host or len(segments) < 2 or not all(_SEGMENT.match(s) and s not in (".", "..") for s in segments):
        raise UsageError(
            f"the remote {url!r} names no repository on a forge crew can open a pull request on; give the "
            "repository a remote such as https://github.com/OWNER/REPO.git or git@gitlab.com:GROUP/PROJECT.git"
        )
    return Remote(url, host.lower(), path)


@dataclass(frozen=True)
class Forge:
    """A forge's API, as crew reaches it for one host."""

    kind: str  # github | gitlab
    host: str
    api: str  # its base URL, without a trailing /
    token: str = field(repr=False)

    @property
    def noun(self) -> str:
        return "merge request" if self.kind == "gitlab" else "pull request"

    @property
    def pace(self) -> str:
        """The name of its pace (one per forge, whatever the repository)."""
        return f"{self.kind} {self.api}"


def forge_of(remote: Remote, env: Mapping[str, str] | None = None, *, token: bool = True) -> Forge:
    """The forge of `remote`, with its token from `env` (this process's environment) or `gh`; a
    UsageError naming what to set when the forge or its token cannot be told (with `token` False,
    none is looked for)."""
    env = os.environ if env is None else env
    host = remote.host
    servers = {_host(env.get("GITHUB_SERVER_URL", "")), env.get("GH_HOST", "").lower()} - {""}
    labs = {_host(env.get("CI_SERVER_URL", "")), _host(env.get("CI_API_V4_URL", "")), env.get("GITLAB_HOST", "")}
    if host == "github.com" or host in servers:
        enterprise = host != "github.com"
        api = env.get("GITHUB_API_URL") or (f"https://{host}/api/v3" if enterprise else "https://api.github.com")
        names = ("GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN") if enterprise else ()
        kind, names = "github", (*names, "GH_TOKEN", "GITHUB_TOKEN")
    elif host == "gitlab.com" or host in {h.lower() for h in labs if h}:
        kind, api, names = (
            "gitlab",
            env.get("CI_API_V4_URL") or f"https://{host}/api/v4",
            ("GITLAB_TOKEN", "GITLAB_ACCESS_TOKEN"),
        )
    else:
        raise UsageError(
            f"crew cannot tell which forge {host} is (for {remote.url}); set GITHUB_SERVER_URL=https://{host} for "
            f"a GitHub Enterprise, or CI_SERVER_URL=https://{host} for a GitLab"
        )
    api = api.rstrip("/")
    parts = urlsplit(api)
    if parts.scheme != "https" and not (parts.scheme == "http" and parts.hostname in LOOPBACK):
        raise UsageError(f"the {kind} API {api} is not https; crew sends its token over https only (http to loopback)")
    found = next((env[name] for name in names if env.get(name)), "") if token else ""
    if token and not found and kind == "github":
        found = _gh_token(host, env)
    if token and not found:
        asked = ", ".join(f"${name}" for name in names) + (" or `gh auth login`" if kind == "github" else "")
        raise UsageError(
            f"no token for {kind} at {host} to open a {'merge' if kind == 'gitlab' else 'pull'} request; set {asked}"
        )
    return Forge(kind, host, api, found)


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower() if url else ""


def _gh_token(host: str, env: Mapping[str, str]) -> str:
    """The token `gh auth token` gives for `host` ("" when gh is not installed or has none)."""
    try:
        done = subprocess.run(
            ["gh", "auth", "token", "--hostname", host],
            env=without_secrets(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GH_TIMEOUT,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode("utf-8", "replace").strip() if done.returncode == 0 else ""


class Pace(Protocol):
    """When a request may go to a forge, shared by every thread and process that works with it: one
    request at a time (GitHub asks for no concurrent requests of one user), and none while a wait the
    forge asked for is not over."""

    def turn(self, forge: str) -> AbstractContextManager[None]:
        """The block is `forge`'s one request under way: entered once no other is (in any process
        sharing this pace) and every wait it was told of is over."""

    def hold(self, forge: str, until: float) -> None:
        """No request goes to `forge` before `until` (seconds since the epoch)."""


class LocalPace:
    """A Pace shared by this process's threads."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep) -> None:
        self._until: dict[str, float] = {}
        self._turns: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._sleep = sleep

    @contextmanager
    def turn(self, forge: str) -> Iterator[None]:
        with self._lock:
            turn = self._turns.setdefault(forge, threading.Lock())
        with turn:
            while (left := self.until(forge) - time.time()) > 0:
                self._sleep(left)
            yield

    def hold(self, forge: str, until: float) -> None:
        with self._lock:
            self._until[forge] = max(self._until.get(forge, 0.0), until)

    def until(self, forge: str) -> float:
        with self._lock:
            return self._until.get(forge, 0.0)


@dataclass
class Answer:
    status: int
    data: Any
    headers: Mapping[str, str]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: the token would go where it points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Client:
    """Requests to one forge, paced, with its rate limits waited out. `waits`: each wait, in seconds."""

    def __init__(self, forge: Forge, pace: Pace | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.forge = forge
        self.pace = pace or LocalPace(sleep)
        self.waits: list[float] = []
        self._sleep = sleep
        self._opener = urllib.request.build_opener(_NoRedirect)

    def call(self, method: str, path: str, body: Any = None, *, allowed: tuple[int, ...] = ()) -> Answer:
        """`method path` (relative to the API) with `body` as JSON: its answer, once it is not a limit;
        a ForgeError for an error status not in `allowed`."""
        for times in range(MAX_TRIES):
            with self.pace.turn(self.forge.pace):
                answer = self._send(method, path, body)
                wait = limit(answer, time.time(), times)
                if wait is not None:  # told before the next request's turn
                    self.waits.append(wait)
                    self.pace.hold(self.forge.pace, time.time() + wait)
                    continue
            if answer.status in _TRANSIENT and times + 1 < MAX_TRIES:
                self._sleep(2.0**times)
                continue
            if answer.status >= 300 and answer.status not in allowed:
                raise self.error(method, path, answer)
            return answer
        raise ForgeError(
            f"{self.forge.host} still limited {method} {path} after {MAX_TRIES} tries ({sum(self.waits):.0f}s "
            "waited); try again later"
        )

    def _send(self, method: str, path: str, body: Any) -> Answer:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.forge.api + path, data=data, method=method)
        request.add_header("User-Agent", f"crewbridge/{__version__}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.forge.kind == "github":
            request.add_header("Accept", "application/vnd.github+json")
            request.add_header("X-GitHub-Api-Version", "2022-11-28")
            request.add_unredirected_header("Authorization", f"Bearer {self.forge.token}")
        else:
            request.add_unredirected_header("PRIVATE-TOKEN", self.forge.token)
        try:
            with self._opener.open(request, timeout=REQUEST_TIMEOUT) as response:
                return Answer(response.status, self._read(response), dict(response.headers))
        except urllib.error.HTTPError as exc:
            with exc:
                return Answer(exc.code, self._read(exc), dict(exc.headers or {}))
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ForgeError(f"cannot reach {self.forge.api}: {self._scrub(str(reason))}") from None
        except http.client.HTTPException as exc:  # it answered, but not in HTTP
            raise ForgeError(
                f"{self.forge.api} did not answer in HTTP ({type(exc).__name__}); check that it is the forge's API"
            ) from None

    def _read(self, response: Any) -> Any:
        raw = response.read(MAX_ANSWER + 1)
        if len(raw) > MAX_ANSWER:
            raise ForgeError(f"{self.forge.api} answered more than {MAX_ANSWER >> 20} MB; crew read none of it")
        try:
            return jsonio.loads(raw) if raw.strip() else None
        except ValueError:
            return None  # not JSON (an error page): the status says enough

    def error(self, method: str, path: str, answer: Answer) -> ForgeError:
        """What crew says of an answer with an error status."""
        said = _message(answer.data) or "no message"
        if 300 <= answer.status < 400:
            where = {name.lower(): value for name, value in answer.headers.items()}.get("location", "elsewhere")
            said = f"a redirect to {where}, which crew follows nowhere: the token would go there"
        error = ForgeError(
            f"{self.forge.host} refused {method} {path} (HTTP {answer.status}: {self._scrub(said)})"
            + ("; check the token and its access to the repository" if answer.status in (401, 403, 404) else "")
        )
        error.status = answer.status
        return error

    def _scrub(self, text: str) -> str:
        return text.replace(self.forge.token, "***") if self.forge.token else text


def limit(answer: Answer, now: float, times: int) -> float | None:
    """Seconds to wait before sending a request again that `answer` (its `times`-th limit in a row,
    from 0) refused for a rate limit; None when it is no limit."""
    if answer.status not in (403, 429):
        return None
    headers = {name.lower(): value for name, value in answer.headers.items()}
    given: float | None = None
    after = headers.get("retry-after", "")
    if after.strip().isdigit():
        given = float(after)
    elif headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset", "").isdigit():
        given = max(float(headers["x-ratelimit-reset"]) - now, 1.0)
    elif headers.get("ratelimit-remaining") == "0" and headers.get("ratelimit-reset", "").isdigit():
        given = max(float(headers["ratelimit-reset"]) - now, 1.0)
    elif answer.status == 403 and not _RATE_WORDS.search(_message(answer.data)):
        return None  # a refusal, not a limit
    wait = (given if given is not None else FIRST_WAIT) * 2**times
    return min(wait, MAX_WAIT)


def _message(data: Any) -> str:
    """What an error answer says (GitHub's `message`, GitLab's `message` or `error`), in one line."""
    if not isinstance(data, dict):
        return ""
    said = data.get("message") or data.get("error") or ""
    text = json.dumps(said, ensure_ascii=False) if not isinstance(said, str) else said
    return " ".join(text.split())[:300]


@dataclass(frozen=True)
class Proposal:
    """A pull request to open (or to update, for the branch `head`)."""

    head: str  # the branch it proposes
    base: str  # the branch it goes into
    title: str
    body: str
    draft: bool = False
    labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Pull:
    """A pull request (merge request) open for a branch."""

    url: str
    number: int
    draft: bool = False
    opened: bool = True  # False: it was open already, and updated

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "number": self.number, "draft": self.draft, "opened": self.opened}


@dataclass(frozen=True)
class State:
    """Where a pull request is now: open, merged or closed, and its checks (CI) as one phrase."""

    state: str
    checks: str

    def to_dict(self) -> dict[str, str]:
        return {"state": self.state, "checks": self.checks}


def propose(client: Client, remote: Remote, proposal: Proposal) -> Pull:
    """The pull request of `proposal.head` on `remote`: the one open updated, else a new one."""
    if client.forge.kind == "gitlab":
        return _merge_request(client, remote, proposal)
    repo = "/repos/" + "/".join(quote(s, safe="") for s in remote.path.split("/"))
    found = _open_pull(client, repo, f"{remote.owner}:{proposal.head}")
    if found is None:
        made = client.call(
            "POST",
            f"{repo}/pulls",
            {
                "title": proposal.title,
                "head": proposal.head,
                "base": proposal.base,
                "body": proposal.body,
                "draft": proposal.draft,
            },
            allowed=(422,),
        )
        if made.status != 422:
            pull = _pull(made.data, opened=True)
            _label(client, repo, pull, proposal)
            return pull
        found = _open_pull(client, repo, f"{remote.owner}:{proposal.head}")  # made meanwhile
        if found is None:
            raise client.error("POST", f"{repo}/pulls", made)
    updated = client.call("PATCH", f"{repo}/pulls/{found.number}", {"title": proposal.title, "body": proposal.body})
    pull = _pull(updated.data, opened=False)
    _label(client, repo, pull, proposal)
    return pull


def _open_pull(client: Client, repo: str, head: str) -> Pull | None:
    listed = client.call("GET", f"{repo}/pulls?{urlencode({'state': 'open', 'head': head, 'per_page': 1})}").data
    return _pull(listed[0], opened=False) if isinstance(listed, list) and listed else None


def _pull(data: Any, *, opened: bool) -> Pull:
    if not isinstance(data, dict) or not isinstance(data.get("number"), int) or not data.get("html_url"):
        raise ForgeError("the forge's answer holds no pull request (no number or html_url)")
    return Pull(str(data["html_url"]), data["number"], bool(data.get("draft")), opened)


def _label(client: Client, repo: str, pull: Pull, proposal: Proposal) -> None:
    if proposal.labels:
        client.call("POST", f"{repo}/issues/{pull.number}/labels", {"labels": list(proposal.labels)})


def _merge_request(client: Client, remote: Remote, proposal: Proposal) -> Pull:
    project = f"/projects/{quote(remote.path, safe='')}/merge_requests"
    query = urlencode({"state": "opened", "source_branch": proposal.head, "per_page": 1})
    title = f"Draft: {proposal.title}" if proposal.draft else proposal.title
    labels = ",".join(proposal.labels)
    for _ in range(2):
        listed = client.call("GET", f"{project}?{query}").data
        if isinstance(listed, list) and listed:
            iid = _iid(listed[0])
            changes = {"title": title, "description": proposal.body, **({"add_labels": labels} if labels else {})}
            return _request(client.call("PUT", f"{project}/{iid}", changes).data, opened=False)
        made = client.call(
            "POST",
            project,
            {
                "source_branch": proposal.head,
                "target_branch": proposal.base,
                "title": title,
                "description": proposal.body,
                **({"labels": labels} if labels else {}),
            },
            allowed=(409,),
        )
        if made.status != 409:  # else one was opened meanwhile: found and updated
            return _request(made.data, opened=True)
    raise ForgeError(f"{client.forge.host} says a merge request from {proposal.head} exists and lists none")


def _iid(data: Any) -> int:
    if not isinstance(data, dict) or not isinstance(data.get("iid"), int):
        raise ForgeError("the forge's answer holds no merge request (no iid)")
    return int(data["iid"])


def _request(data: Any, *, opened: bool) -> Pull:
    iid = _iid(data)
    if not data.get("web_url"):
        raise ForgeError("the forge's answer holds no merge request's web_url")
    return Pull(str(data["web_url"]), iid, bool(data.get("draft")), opened)


def state_of(client: Client, remote: Remote, number: int) -> State:
    """Pull request `number` of `remote` now: open, merged or closed, and its checks."""
    if client.forge.kind == "gitlab":
        path = f"/projects/{quote(remote.path, safe='')}/merge_requests/{number}"
        data = client.call("GET", path).data or {}
        state = {"opened": "open", "locked": "open"}.get(str(data.get("state")), str(data.get("state")))
        pipeline = data.get("head_pipeline") if isinstance(data.get("head_pipeline"), dict) else None
        return State(state, f"pipeline {pipeline.get('status')}" if pipeline else "none")
    repo = "/repos/" + "/".join(quote(s, safe="") for s in remote.path.split("/"))
    data = client.call("GET", f"{repo}/pulls/{number}").data or {}
    state = "merged" if data.get("merged") or data.get("merged_at") else str(data.get("state", "unknown"))
    sha = ((data.get("head") or {}).get("sha")) if isinstance(data.get("head"), dict) else None
    if not sha:
        return State(state, "none")
    runs = (client.call("GET", f"{repo}/commits/{sha}/check-runs").data or {}).get("check_runs") or []
    statuses = (client.call("GET", f"{repo}/commits/{sha}/status").data or {}).get("statuses") or []
    counts = {"passed": 0, "failing": 0, "pending": 0}
    for run in runs:
        if run.get("status") != "completed":
            counts["pending"] += 1
        else:
            counts["passed" if run.get("conclusion") in ("success", "neutral", "skipped") else "failing"] += 1
    for status in statuses:
        word = status.get("state")
        counts["passed" if word == "success" else "pending" if word == "pending" else "failing"] += 1
    said = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    return State(state, said or "none")
