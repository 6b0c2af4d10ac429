"""The record of a run: one typed event stream, the one vocabulary every face projects.

Every event has its `kind` (the tag), `t` (milliseconds since the run started, on the monotonic
clock) and, where it belongs to one, the `agent`. Ids link them: the run's id (in `start`); an agent
(its name; `part` counts its parts within the run: a fallback, a review round); its `turn` (1, 2, …
within the part); a `call` id crew assigns to every tool call, crew's and the CLI's own (`c1`, `c2`,
… unique in the run), which the call's `decision`, `approval` and `result` carry. A run that is part
of something larger names it in `start.parent` (a batch and its repository, an ACP session).

The terminal, `--jsonl`, the transcript (this stream written down, one JSON object a line), `crew
log show`, the editor (ACP), the browser (`crew ui`) and the OpenTelemetry exporter all read these
types; docs/schemas/event.json is made from them (`schema()`), and VERSION says which shape a line
has. A transcript written before the record (version 0) is read through `upgraded()`.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from crewbridge.base import jsonio

VERSION = 2  # of the stream's shape (1: the --jsonl lines with `type` before the record)
STATUSES = ("running", "waiting", "done", "failed", "cancelled", "unfinished")  # a run's, everywhere
Ended = Literal["done", "failed", "cancelled"]  # what a run's `end` event says
ENDED: tuple[Ended, ...] = ("done", "failed", "cancelled")


class Event(msgspec.Struct, tag_field="kind", omit_defaults=True, kw_only=True):
    """What every event has."""

    t: float = 0.0  # milliseconds since the run started (monotonic)
    agent: str | None = None

    @property
    def kind(self) -> str:
        return str(self.__struct_config__.tag)


class Parent(msgspec.Struct, omit_defaults=True):
    """What a run is part of."""

    batch: str | None = None  # a crew batch's id …
    repo: str | None = None  # … and the repository this run works on
    session: str | None = None  # an ACP session's id
    run: str | None = None  # the run that asked for this one (an agent's MCP `ask`)
    traceparent: str | None = None  # the W3C trace context it continues (an editor's, an MCP client's, TRACEPARENT)
    tracestate: str | None = None


class Start(Event, tag="start", omit_defaults=False):
    """The run begins: its id and everything that names it, every field written (`v` among them:
    which shape the stream has)."""

    run: str
    at: str = ""  # wall-clock time, ISO 8601 (UTC)
    v: int = VERSION
    version: str = ""  # crew's
    command: str = ""  # query | execute | chat | ask | acp | batch
    mode: str = ""  # query | execute
    agents: list[str] = []
    models: dict[str, str | None] = {}
    task: str = ""
    cwd: str = ""  # the run's own working folder
    pid: int = 0
    resumed_from: str | None = None
    parent: Parent | None = None
    trace: str | None = None  # when crew exports traces: the run's trace id (crewbridge.record.trace) …
    span: str | None = None  # … and its own span's id


class Part(Event, tag="part"):
    """An agent's part of the run begins: its first one, a fallback's, a review round's."""

    part: int  # 1, 2, … per agent in the run
    provider: str = ""
    model: str | None = None
    workdir: str = ""
    via: str = "text"  # how crew's tools reach it: text | native
    role: str = ""  # "" | writer | reviewer (a review's)
    round: int | None = None  # the review round it works in
    span: str | None = None  # its span's id when the run is traced (its CLI's TRACEPARENT names it)


class Turn(Event, tag="turn"):
    """crew sends the agent a message; the model's reply begins."""

    turn: int
    prompt: str = ""  # the message, whole


class Text(Event, tag="text"):
    """A delta of the model's text as it streams; `shown`: what a person sees of it (never a tool
    call's JSON), when that is not `text` itself."""

    text: str
    shown: str | None = None

    @property
    def visible(self) -> str:
        return self.text if self.shown is None else self.shown


class Session(Event, tag="session"):
    """The CLI named its session (what resumes it) and model; `reported`: the session's usage
    totals as the CLI last reported them (what a resumed session starts from)."""

    session: str | None = None
    model: str | None = None
    reported: dict[str, Any] | None = None


class Call(Event, tag="call"):
    """A tool call starts: crew's (a text block closed, a native or MCP call) or the CLI's own tool
    (`via: own`; `ref`: the CLI's id for it)."""

    call: str
    name: str
    input: Any = None
    turn: int | None = None
    via: str = "text"  # text | native | mcp | own
    ref: str | None = None


class Decision(Event, tag="decision"):
    """crew's decision on a call: `allowed` or `refused`, and by whom (policy, hook, a person on a
    channel: terminal | editor | browser, approve_all, the CLI itself when crew was not asked)."""

    call: str
    decision: str
    by: str = "policy"
    reason: str | None = None


class Ask(Event, tag="ask"):
    """A person is asked about a call (the run waits for them until the `approval`)."""

    call: str | None
    name: str
    input: Any = None


class Approval(Event, tag="approval"):
    """The answer to an `ask` (None: nobody answered) and where it came from."""

    call: str | None
    name: str
    input: Any = None
    answer: str | None = None
    source: str | None = None


class Result(Event, tag="result"):
    """A call's result: crew's envelope (success, data, error, metadata), or what the CLI reported
    of its own tool's."""

    call: str
    name: str
    success: bool
    data: Any = None
    error: str | None = None
    metadata: dict[str, Any] = {}
    change: Change | None = None  # what a write or edit did to its file (the editor's diff, the UI's)


class Change(msgspec.Struct, omit_defaults=True):
    """A file's text before (None: the file was made) and after a write or edit."""

    path: str  # absolute
    new: str
    old: str | None = None


class Usage(Event, tag="usage"):
    """Tokens and cost the agent's CLI reported for one reply (its share, when the CLI reports
    running totals): the agent's usage in the run is the sum of its usage events."""

    turn: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = None
    priced: str | None = None  # the date of crew's price table, when crew priced the tokens (the CLI gave no cost)
    context_window: int | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Reply(Event, tag="reply"):
    """What the conversation keeps of a reply crew cut at its last tool call."""

    turn: int
    text: str


class Answer(Event, tag="answer"):
    """The agent's final answer."""

    text: str
    turns: int = 0
    session: str | None = None
    calls: list[str] = []  # the ids of its tool calls
    needed_approval: list[dict[str, Any]] = []  # calls refused because nobody could be asked


class Error(Event, tag="error"):
    """The agent's part (or, without an agent, the run) failed."""

    message: str
    exit_code: int = 1
    status: int | None = None  # the HTTP status the CLI reported, if any


class Fallback(Event, tag="fallback"):
    """The agent's provider cannot answer; `to` takes the task over."""

    to: str
    reason: str = ""
    message: str = ""


class Resume(Event, tag="resume"):
    """Continuing run `of`: the agent goes on (`continued`), starts `fresh`, or has its
    conversation replayed (`replay`)."""

    of: str
    how: str
    session: str | None = None
    text: str = ""


class Notice(Event, tag="notice"):
    """Something worth knowing. `about`: sandbox (no mechanism works here), worktree, warning (about
    the whole run: shown with --json too), tools, or "" for anything else."""

    text: str
    about: str = ""


class Disarmed(Event, tag="disarmed"):
    """What the run (or `call`) left that would run code on the user's next git command, disarmed."""

    text: str
    found: list[dict[str, str]]
    call: str | None = None


class Review(Event, tag="review"):
    """A reviewer's verdict in one round."""

    round: int
    rounds: int
    verdict: str
    findings: list[dict[str, Any]] = []
    called: bool = True  # given through the verdict tool (not read from prose)
    disputed: list[dict[str, Any]] = []


class Check(Event, tag="check"):
    """crew ran a check command (--check, crew.yaml's `check:`) on the agent's change, in round
    `round` of `rounds`: its exit status (None: it did not end on its own, or could not start), the
    end of its output (bounded), whether it passed, and how long it took."""

    command: str
    round: int
    rounds: int
    passed: bool
    exit_code: int | None = None
    output: str = ""
    ms: float = 0.0


class Pull(Event, tag="pull"):
    """The agent's branch was pushed and its pull request (a merge request on GitLab) opened, or the
    one open for the branch updated (`opened` False)."""

    url: str
    number: int
    branch: str
    forge: str  # github | gitlab
    opened: bool = True
    draft: bool = False


class Worktree(Event, tag="worktree"):
    """Where the agent worked (--worktree) and what it changed (None: it could not be told)."""

    worktree: str
    branch: str
    base: str
    git_dir: str = ""  # its git folders as crew made them (crew ui's diff trusts these, never its `.git`)
    common: str = ""
    changes: list[dict[str, Any]] | None = None


class Egress(Event, tag="egress"):
    """A connection out of the agent's sandbox that crew's proxy refused: where to, why, and which
    process asked (its pid and command line) when crew can tell."""

    host: str
    port: int
    why: str
    process: str | None = None

    @property
    def text(self) -> str:
        by = f" (by {self.process})" if self.process else ""
        return f"network: refused {self.host}:{self.port}{by}: {self.why}"


class Cancel(Event, tag="cancel"):
    """Someone cancelled the run: the terminal (Ctrl-C), the editor, the browser, a caller."""

    source: str


class End(Event, tag="end"):
    """The run ended: its status (one of ENDED), its calls and errors, each agent's usage."""

    status: Ended
    at: str = ""
    calls: int = 0
    errors: int = 0
    usage: dict[str, dict[str, Any]] = {}


class Unreadable(Event, tag="unreadable"):
    """A line of a transcript that could not be read (never written by crew)."""

    line: int
    error: str
    text: str = ""


AnyEvent = (
    Start
    | Part
    | Turn
    | Text
    | Session
    | Call
    | Decision
    | Ask
    | Approval
    | Result
    | Usage
    | Reply
    | Answer
    | Error
    | Fallback
    | Resume
    | Notice
    | Disarmed
    | Review
    | Check
    | Pull
    | Worktree
    | Egress
    | Cancel
    | End
    | Unreadable
)
_decoder = msgspec.json.Decoder(AnyEvent)
_encoder = msgspec.json.Encoder(enc_hook=str)  # what is not JSON (a Path in a tool's data) as its text


def encode(event: Event) -> bytes:
    """One event as JSON (no newline); text that cannot be UTF-8 (a lone surrogate) as \\u escapes."""
    try:
        return _encoder.encode(event)
    except UnicodeEncodeError:
        return jsonio.dumps_bytes(to_builtins(event))


def decode(data: bytes | str) -> AnyEvent:
    """One line of JSON as its event; a ValueError (msgspec.ValidationError, msgspec.DecodeError)
    when it is not one. A lone surrogate's escape, which encode() writes and msgspec refuses to
    read, is read through json."""
    try:
        return _decoder.decode(data)
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError:
        return convert(jsonio.loads(data))


def convert(obj: dict[str, Any]) -> AnyEvent:
    """An event from JSON already decoded (a version 0 record is upgraded first)."""
    return msgspec.convert(obj, AnyEvent)


def to_builtins(event: Event) -> dict[str, Any]:
    """The event as plain JSON values, `kind` first."""
    data = msgspec.to_builtins(event, enc_hook=str)
    assert isinstance(data, dict)
    return data


def schema() -> dict[str, Any]:
    """The JSON Schema of one event (docs/schemas/event.json), its version named."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"One event of a run's record, version {VERSION}",
        "description": "A line of crew query --jsonl, of a transcript (crew log show --json), and what every face "
        "reads (crewbridge/record/events.py). `kind` says which; the first event, `start`, names the run and `v`.",
        **msgspec.json.schema(AnyEvent),
    }
