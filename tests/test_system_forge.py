"""crewbridge.system.forge against the stand-in of GitHub's and GitLab's REST APIs (tests/forgeserver.py;
no forge is reachable here) over real bare repositories: which forge and repository a remote's URL
names, where the token comes from, one pull request per branch (updated, never a duplicate, also when
several create at once), labels and drafts, rate limits waited out once each and paced across
threads, refusals that are no limit, no redirect followed, and a pull request's state and checks."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crewbridge.errors import ForgeError, UsageError
from crewbridge.system.forge import (
    FIRST_WAIT,
    Answer,
    Client,
    Forge,
    LocalPace,
    Proposal,
    forge_of,
    limit,
    propose,
    remote_of,
    state_of,
)
from crewcli import executable
from forgeserver import ForgeServer
from gitrepo import git, make_repo

TOKEN = "forge-t0ken"


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """A bare repository with main and the branch crew/run/claude."""
    work = make_repo(tmp_path / "work", {"a.txt": "a\n"})
    git(work, "checkout", "-q", "-b", "crew/run/claude")
    (work / "a.txt").write_text("b\n")
    git(work, "commit", "-qam", "change")
    bare = tmp_path / "r.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    return bare


@pytest.fixture
def forge(bare: Path):
    with ForgeServer({"o/r": bare, "g/sub/p": bare}, token=TOKEN) as server:
        yield server


def github(server: ForgeServer) -> Forge:
    return Forge("github", "github.com", server.url, TOKEN)


def gitlab(server: ForgeServer) -> Forge:
    return Forge("gitlab", "gitlab.com", server.url + "/api/v4", TOKEN)


ASKED = Proposal("crew/run/claude", "main", "Bump ruff", "The body.", labels=("bot",))


@pytest.mark.parametrize(
    "url, host, path",
    [
        ("https://github.com/o/r.git", "github.com", "o/r"),
        ("https://github.com/o/r", "github.com", "o/r"),
        ("https://user@ghe.example.com:8443/o/r.git/", "ghe.example.com:8443", "o/r"),
        ("git@github.com:o/r.git", "github.com", "o/r"),
        ("ssh://git@gitlab.com/g/sub/p.git", "gitlab.com", "g/sub/p"),
        ("ssh://git@GitLab.com:2222/g/p", "gitlab.com", "g/p"),
    ],
)
def test_a_remote_names_its_host_and_repository(url, host, path):
    remote = remote_of(url)
    assert (remote.url, remote.host, remote.path) == (url, host, path)


@pytest.mark.parametrize(
    "url",
    [
        "file:///srv/r.git",
        "/srv/r.git",
        "../r",
        "https://github.com/r.git",
        "https://github.com/o/../r",
        "git@h:o/r;rm",
    ],
)
def test_a_remote_that_names_no_repository_on_a_forge_is_one_line_saying_what_to_give(url):
    with pytest.raises(UsageError, match=r"names no repository on a forge crew can open a pull request on; give"):
        remote_of(url)


def test_the_forge_and_its_api_come_from_the_host_and_the_ci_variables():
    env = {"GH_TOKEN": "g"}
    assert forge_of(remote_of("https://github.com/o/r.git"), env) == Forge(
        "github", "github.com", "https://api.github.com", "g"
    )
    actions = {"GITHUB_TOKEN": "a", "GITHUB_API_URL": "http://127.0.0.1:9/"}
    assert forge_of(remote_of("https://github.com/o/r"), actions).api == "http://127.0.0.1:9"
    enterprise = {"GITHUB_SERVER_URL": "https://ghe.corp", "GH_ENTERPRISE_TOKEN": "e", "GH_TOKEN": "g"}
    found = forge_of(remote_of("git@ghe.corp:o/r.git"), enterprise)
    assert (found.kind, found.api, found.token) == ("github", "https://ghe.corp/api/v3", "e")
    assert forge_of(remote_of("https://gitlab.com/g/p.git"), {"GITLAB_TOKEN": "l"}).api == "https://gitlab.com/api/v4"
    ci = {"CI_SERVER_URL": "https://git.corp", "CI_API_V4_URL": "https://git.corp/api/v4", "GITLAB_TOKEN": "l"}
    assert forge_of(remote_of("https://git.corp/g/p.git"), ci).kind == "gitlab"
    assert "t0ken" not in repr(Forge("github", "h", "https://h", "t0ken"))


def test_a_forge_crew_cannot_tell_or_reach_safely_or_without_a_token_is_refused_with_the_fix(monkeypatch, tmp_path):
    with pytest.raises(
        UsageError, match=r"cannot tell which forge git.corp is .* set GITHUB_SERVER_URL=https://git.corp"
    ):
        forge_of(remote_of("https://git.corp/o/r.git"), {"GH_TOKEN": "g"})
    with pytest.raises(
        UsageError, match=r"API http://api.example.com is not https; crew sends its token over https only"
    ):
        forge_of(remote_of("https://github.com/o/r"), {"GH_TOKEN": "g", "GITHUB_API_URL": "http://api.example.com"})
    monkeypatch.setenv("PATH", str(tmp_path))  # no gh here
    with pytest.raises(
        UsageError, match=r"^no token for github at github.com .* set \$GH_TOKEN, \$GITHUB_TOKEN or `gh auth login`$"
    ):
        forge_of(remote_of("https://github.com/o/r"), {"PATH": str(tmp_path)})
    with pytest.raises(UsageError, match=r"set \$GITLAB_TOKEN, \$GITLAB_ACCESS_TOKEN$"):
        forge_of(remote_of("https://gitlab.com/g/p"), {})
    assert forge_of(remote_of("https://gitlab.com/g/p"), {}, token=False).token == ""


def test_without_a_token_in_the_environment_gh_gives_it(tmp_path):
    # gh prints the token of the host it is asked about (`gh auth token --hostname HOST`)
    said = 'import sys\nif sys.argv[1:] == ["auth", "token", "--hostname", "github.com"]:\n    print("from-gh")\n'
    executable(tmp_path / "gh", said + "else:\n    sys.exit(1)\n")
    assert forge_of(remote_of("https://github.com/o/r"), {"PATH": str(tmp_path)}).token == "from-gh"


def test_a_pull_request_is_opened_once_then_updated_never_duplicated(forge, bare):
    client = Client(github(forge))
    first = propose(client, remote_of("https://github.com/o/r.git"), ASKED)
    assert (first.url, first.number, first.opened, first.draft) == ("https://github.com/o/r/pull/1", 1, True, False)
    again = propose(
        client,
        remote_of("https://github.com/o/r.git"),
        Proposal(ASKED.head, "main", "Bump ruff again", "New body.", labels=("deps",)),
    )
    assert (again.number, again.opened) == (1, False)
    [pull] = forge.of("o/r")
    assert (pull["title"], pull["body"], pull["labels"], pull["state"]) == (
        "Bump ruff again",
        "New body.",
        ["bot", "deps"],
        "open",
    )
    assert pull["head"]["label"] == "o:crew/run/claude" and pull["base"]["ref"] == "main"
    state = state_of(client, remote_of("https://github.com/o/r.git"), 1)
    assert state.to_dict() == {"state": "open", "checks": "none"}
    sha = git(bare, "rev-parse", "crew/run/claude").strip()
    forge.checks[sha] = [
        {"status": "completed", "conclusion": "success"},
        {"status": "in_progress", "conclusion": None},
    ]
    forge.set_state("o/r", 1, "merged")
    assert state_of(client, remote_of("https://github.com/o/r.git"), 1).to_dict() == {
        "state": "merged",
        "checks": "1 passed, 1 pending",
    }
    forge.set_state("o/r", 1, "closed")  # a closed one is not updated: the next is a new one
    assert propose(client, remote_of("https://github.com/o/r.git"), ASKED).number == 2


def test_several_proposing_the_same_branch_at_once_make_one_pull_request(forge):
    client = Client(github(forge))
    pulls = []

    def one() -> None:
        pulls.append(propose(client, remote_of("https://github.com/o/r.git"), ASKED))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(forge.of("o/r")) == 1 and {pull.number for pull in pulls} == {1}
    assert sum(pull.opened for pull in pulls) == 1


def test_a_draft_and_a_head_the_forge_does_not_have(forge):
    client = Client(github(forge))
    draft = propose(client, remote_of("https://github.com/o/r.git"), Proposal(ASKED.head, "main", "T", "B", draft=True))
    assert draft.draft and forge.of("o/r")[0]["draft"]
    with pytest.raises(ForgeError, match=r"github.com refused POST /repos/o/r/pulls \(HTTP 422: Validation Failed\)"):
        propose(client, remote_of("https://github.com/o/r.git"), Proposal("crew/none", "main", "T", "B"))


def test_secondary_limits_are_waited_out_once_each_and_paced_across_threads(forge):
    forge.limit_every, forge.retry_after = 4, 1
    pace = LocalPace()
    clients = [Client(github(forge), pace) for _ in range(3)]
    begun = time.monotonic()

    def work(client: Client, n: int) -> None:
        for _ in range(3):
            state_of(client, remote_of("https://github.com/o/r.git"), 1) if n < 0 else client.call(
                "GET", "/repos/o/r/pulls"
            )

    threads = [threading.Thread(target=work, args=(client, n)) for n, client in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    waits = [wait for client in clients for wait in client.waits]
    assert forge.limits >= 2 and forge.early == 0  # nobody asked again before the wait was over
    assert len(waits) == forge.limits  # each limit waited out once
    for client in clients:  # as long as it said; a request limited again on its retry waits twice as long
        before = 0.0
        for wait in client.waits:
            assert wait == 1.0 or wait == 2 * before, client.waits
            before = wait
    assert time.monotonic() - begun >= forge.limits * 0.9


def test_a_primary_limit_is_waited_out_until_its_reset(forge):
    forge.primary = True
    client = Client(github(forge))
    client.call("GET", "/repos/o/r/pulls")
    assert forge.limits == 1 and forge.early == 0 and len(client.waits) == 1 and 1 <= client.waits[0] <= 3


def test_how_long_a_limit_is_waited_out():
    now = 1000.0
    assert (
        limit(Answer(403, {"message": "You have exceeded a secondary rate limit"}, {"Retry-After": "7"}), now, 0) == 7
    )
    assert limit(Answer(429, None, {"retry-after": "7"}), now, 2) == 28  # limited again: twice as long, each time
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1030"}
    assert limit(Answer(403, {"message": "API rate limit exceeded"}, reset), now, 0) == 30
    assert limit(Answer(429, None, {"RateLimit-Remaining": "0", "RateLimit-Reset": "1010"}), now, 0) == 10
    assert limit(Answer(403, {"message": "You have exceeded a secondary rate limit."}, {}), now, 0) == FIRST_WAIT
    assert limit(Answer(403, {"message": "You have exceeded a secondary rate limit."}, {}), now, 9) == 3600  # at most
    assert limit(Answer(403, {"message": "Resource not accessible by integration"}, {}), now, 0) is None
    assert limit(Answer(404, {"message": "rate limit"}, {"Retry-After": "1"}), now, 0) is None


def test_a_refusal_names_the_status_and_message_never_the_token(forge):
    wrong = Client(Forge("github", "github.com", forge.url, "not-" + TOKEN))
    with pytest.raises(ForgeError) as raised:
        wrong.call("GET", "/repos/o/r/pulls")
    assert str(raised.value) == (
        "github.com refused GET /repos/o/r/pulls (HTTP 401: Bad credentials); check the token and its access to "
        "the repository"
    )
    assert raised.value.status == 401 and "t0ken" not in str(raised.value) and wrong.waits == []
    with pytest.raises(ForgeError, match=r"^cannot reach http://127.0.0.1:1: "):
        Client(Forge("github", "github.com", "http://127.0.0.1:1", TOKEN)).call("GET", "/")


def test_an_api_that_does_not_answer_in_http_is_one_line_not_a_traceback():
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(30)  # a client that never comes fails the test, not hangs it

    def echo() -> None:  # what a connection to itself gives: the request back as the answer
        sock, _ = listener.accept()
        with sock:
            sock.sendall(sock.recv(65536))

    thread = threading.Thread(target=echo)
    thread.start()
    api = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with listener, pytest.raises(ForgeError) as raised:
        Client(Forge("github", "github.com", api, TOKEN)).call("GET", "/repos/o/r/pulls")
    thread.join(30)
    assert str(raised.value) == f"{api} did not answer in HTTP (BadStatusLine); check that it is the forge's API"


def test_no_redirect_is_followed_so_the_token_goes_nowhere_else(forge):
    told: list[str] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            told.append(self.headers.get("Authorization", ""))
            self.send_response(200)
            self.end_headers()

    other = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    threading.Thread(target=other.serve_forever, daemon=True).start()

    class Moved(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(301)
            self.send_header("Location", f"http://127.0.0.1:{other.server_address[1]}/steal")
            self.end_headers()

    moved = ThreadingHTTPServer(("127.0.0.1", 0), Moved)
    threading.Thread(target=moved.serve_forever, daemon=True).start()
    try:
        with pytest.raises(
            ForgeError, match=r"HTTP 301: a redirect to http://127.0.0.1:\d+/steal, which crew follows nowhere"
        ):
            Client(Forge("github", "github.com", f"http://127.0.0.1:{moved.server_address[1]}", TOKEN)).call(
                "GET", "/x"
            )
        assert told == []
    finally:
        moved.shutdown()
        other.shutdown()


def test_a_gitlab_merge_request_is_opened_once_then_updated_and_its_pipeline_shown(forge, bare):
    forge.limit_every, forge.retry_after = 2, 1
    client = Client(gitlab(forge))
    remote = remote_of("git@gitlab.com:g/sub/p.git")
    made = propose(client, remote, Proposal(ASKED.head, "main", "Bump", "Body", draft=True, labels=("bot",)))
    assert (made.url, made.number, made.opened, made.draft) == (
        "https://gitlab.com/g/sub/p/-/merge_requests/1",
        1,
        True,
        True,
    )
    again = propose(client, remote, Proposal(ASKED.head, "main", "Bump again", "Body 2", labels=("deps",)))
    assert (again.number, again.opened) == (1, False)
    [request] = forge.of("g/sub/p")
    assert (request["title"], request["description"], request["labels"]) == ("Bump again", "Body 2", ["bot", "deps"])
    forge.pipelines[git(bare, "rev-parse", "crew/run/claude").strip()] = "success"
    assert state_of(client, remote, 1).to_dict() == {"state": "open", "checks": "pipeline success"}
    assert forge.limits >= 1 and forge.early == 0 and client.waits == [1.0] * forge.limits
