"""crew's JSON for programs (crewbridge/engine/outputs.py) holds to its JSON Schemas (docs/schemas/): real
output of `crew query --json` and `--jsonl` — the offline demo answering, failing, and two agents at
once; a writer in a worktree whose change is reviewed; the real claude against the mock model
server, with text and native tools — and the structured content of an ask through `crew mcp`, read
by the MCP SDK's own client."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from crewcli import CREW, FakeModel, crew_env, run_crew, tool_block, write_config
from gitrepo import make_repo
from mockserver import tool_call

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schemas"
REGISTRY = (
    Registry().with_resources(  # event.json is made by msgspec (crewbridge.record.events.schema), without $schema
        (path.name, Resource.from_contents(json.loads(path.read_text()), default_specification=DRAFT202012))
        for path in SCHEMAS.glob("*.json")
    )
)
TASK = "what is in notes.txt?"


def problems(schema: str, obj: object) -> list[str]:
    """Where `obj` breaks docs/schemas/`schema` (none when it holds to it)."""
    validator = Draft202012Validator(REGISTRY.contents(schema), registry=REGISTRY)
    return [f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(obj)]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "notes.txt").write_text("Buy milk.\nCall Ada.\n")
    return path


@pytest.fixture
def crew(tmp_path: Path, work: Path):
    """crew(*args, env=None) → the finished `crew ARGS` in the work directory."""

    def run(*args: str, env: dict[str, str] | None = None):
        return run_crew(list(args), env=env or crew_env(tmp_path / "home"), cwd=work)

    return run


def jsonl(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


@pytest.mark.slow
def test_every_schema_is_a_json_schema():
    names = sorted(path.name for path in SCHEMAS.glob("*.json"))
    assert names == ["batch.json", "event.json", "outcome.json"]
    for name in names:
        Draft202012Validator.check_schema(REGISTRY.contents(name))


def test_the_schemas_refuse_what_crew_does_not_write():
    answered = {
        "agent": "demo",
        "answer": "Hi.",
        "tool_calls": [],
        "session": None,
        "turns": 1,
        "needed_approval": [],
        "fell_back_from": None,
        "error": None,
        "usage": {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "cost_usd": None},
    }
    run = "20261124-212703-20349b"

    def record(*results: dict, **top: object) -> dict:
        return {"run": run, "results": list(results), **top}

    assert problems("outcome.json", record(answered)) == []
    assert problems("outcome.json", record(answered, answered)) == []
    assert problems("outcome.json", {**record(answered), "run": None}) == []  # transcripts off
    assert problems("outcome.json", answered)  # one agent's object alone is not the output
    assert problems("outcome.json", record())  # at least one agent
    assert problems("outcome.json", {"results": [answered]})  # the run is always named
    assert problems("outcome.json", {**record(answered), "run": "last"})
    assert problems("outcome.json", record({k: v for k, v in answered.items() if k != "answer"}))
    assert problems("outcome.json", record({**answered, "extra": 1}))
    assert problems("outcome.json", record({**answered, "turns": "1"}))
    assert problems("outcome.json", record(answered, extra=1))
    assert problems("event.json", {"kind": "turn", "agent": "demo", "turn": 1}) == []
    assert problems("event.json", {"kind": "turn", "agent": "demo"})  # which turn
    assert problems("event.json", {"type": "turn", "agent": "demo", "turn": 1})  # the shape before the record
    assert problems("event.json", {"kind": "whatever", "agent": "demo", "text": "x"})
    assert problems("event.json", {"kind": "disarmed", "agent": "demo", "text": "x"})  # what it found
    assert problems("event.json", {"kind": "call", "agent": "demo", "name": "crew:read_file"})  # the call's id
    assert problems("event.json", {"kind": "result", "call": "c1", "name": "x", "success": "yes"})
    assert problems("event.json", {"kind": "start", "run": run, "t": 0.1, "agents": ["demo"]}) == []
    assert problems("event.json", {"kind": "start", "agents": ["demo"]})  # the run is always named
    refused = {"kind": "egress", "agent": "demo", "host": "h", "port": 80, "why": "w", "process": None}
    assert problems("event.json", refused) == []
    assert problems("event.json", {**refused, "port": "80"})


@pytest.mark.slow
def test_json_of_an_agent_that_answered_one_that_failed_and_of_several(crew):
    answered = crew("query", "--json", f"@demo {TASK}")
    assert answered.returncode == 0, answered.stderr
    record = json.loads(answered.stdout)
    assert problems("outcome.json", record) == []
    [result] = record["results"]
    assert result["answer"].startswith("notes.txt has 2 non-empty lines")
    assert [call["name"] for call in result["tool_calls"]] == ["crew:read_file"]
    failed = crew("query", "--json", "--max-turns", "1", f"@demo {TASK}")  # the demo needs two turns
    assert failed.returncode == 4
    record = json.loads(failed.stdout)
    assert problems("outcome.json", record) == []
    [result] = record["results"]
    assert result["answer"] is None and result["exit_code"] == 4
    several = crew("query", "--json", f"@demo @demo {TASK}")
    record = json.loads(several.stdout)
    assert problems("outcome.json", record) == []
    assert len(record["results"]) == 2


@pytest.mark.slow
def test_the_json_names_the_run_that_resume_continues(crew):
    first = json.loads(crew("query", "--json", f"@demo {TASK}").stdout)
    shown = [json.loads(line) for line in crew("log", "show", "--json", first["run"]).stdout.splitlines()]
    assert shown[0]["kind"] == "start" and shown[0]["run"] == first["run"]
    again = crew("query", "--json", "--resume", first["run"], "@demo and again?")
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert second["run"] != first["run"]
    started = json.loads(crew("log", "show", "--json", second["run"]).stdout.splitlines()[0])
    assert started["resumed_from"] == first["run"]


@pytest.mark.slow
def test_each_jsonl_line_holds_to_the_event_schema(crew):
    answered = jsonl(crew("query", "--jsonl", f"@demo {TASK}").stdout)
    failed = jsonl(crew("query", "--jsonl", "--max-turns", "1", f"@demo {TASK}").stdout)
    for event in answered + failed:
        assert problems("event.json", event) == [], event
    assert {"turn", "text", "call", "decision", "result", "answer"} <= {event["kind"] for event in answered}
    for events in (answered, failed):  # the run's id first (what --resume takes), its end last
        assert (events[0]["kind"], events[-1]["kind"]) == ("start", "end") and events[0]["run"]
    [error] = [event for event in failed if event["kind"] == "error"]
    assert (error["agent"], error["exit_code"], failed[-1]["status"]) == ("demo", 4, "failed")


@pytest.mark.slow
def test_a_reviewed_change_in_a_worktree_holds_to_the_schemas(tmp_path):
    repo = make_repo(tmp_path / "repo", {"notes.txt": "deploy: Friday\n"})
    writer, reviewer = FakeModel(tmp_path / "bin", "writer"), FakeModel(tmp_path / "bin", "reviewer")
    finding = {"path": "notes.txt", "line": 1, "severity": "low", "message": "'Tusday' is misspelled"}
    config = write_config(
        tmp_path / "crew.yaml",
        providers={f.name: f.provider() for f in (writer, reviewer)},
        agents={f.name: {"provider": f.name} for f in (writer, reviewer)},
    )
    args = [
        "execute",
        "--config",
        str(config),
        "--worktree",
        "--review",
        "reviewer",
        "--rounds",
        "1",
        "--check",
        "true",
    ]
    for output in ("--json", "--jsonl"):
        writer.script(tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\n"), "Set.")
        reviewer.script(tool_block("crew:verdict", verdict="changes", findings=[finding]))
        done = run_crew(
            [*args, output, "@writer set the deploy day to Tuesday"], env=crew_env(tmp_path / "home"), cwd=repo
        )
        assert done.returncode == 6, done.stderr  # not approved in its one round
        if output == "--json":
            record = json.loads(done.stdout)
            assert problems("outcome.json", record) == []
            [result] = record["results"]
            assert result["review"]["findings"] == [finding] and result["changes"][0]["path"] == "notes.txt"
            assert [(check["command"], check["passed"]) for check in result["checks"]] == [("true", True)]
            assert record["run"] == result["run_id"]  # the worktrees' run
        else:
            events = jsonl(done.stdout)
            for event in events:
                assert problems("event.json", event) == [], event
            assert {"review", "worktree", "answer", "error", "check"} <= {event["kind"] for event in events}


@pytest.mark.slow
def test_a_check_that_never_passes_holds_to_the_schema_with_exit_9(tmp_path):
    repo = make_repo(tmp_path / "repo", {"notes.txt": "hi\n"})
    model = FakeModel(tmp_path / "bin")
    config = write_config(tmp_path / "crew.yaml", providers={"fake": model.provider()}, agents={"fake": {}})
    model.script("Nothing to do.")
    args = ["execute", "--config", str(config), "--json", "--check", "echo nope; exit 4", "--check-rounds", "2"]
    done = run_crew([*args, "@fake look"], env=crew_env(tmp_path / "home"), cwd=repo)
    assert done.returncode == 9, done.stderr
    record = json.loads(done.stdout)
    assert problems("outcome.json", record) == []
    [result] = record["results"]
    assert result["exit_code"] == 9 and result["answer"] == "Nothing to do."
    assert [(c["round"], c["exit_code"], c["output"]) for c in result["checks"]] == [(1, 4, "nope\n"), (2, 4, "nope\n")]
    assert "crew: @fake: check 2/2 failed, exit status 4: echo nope; exit 4" in done.stderr


@pytest.mark.slow
def test_what_crew_disarmed_for_git_holds_to_the_schemas(tmp_path):
    repo = make_repo(tmp_path / "repo", {"notes.txt": "hi\n"})
    plant = "git init -q sub && git -C sub config core.fsmonitor 'touch owned'"
    for output in ("--json", "--jsonl"):
        model = FakeModel(tmp_path / output)  # a fresh script each
        config = write_config(tmp_path / f"{output}.yaml", providers={"fake": model.provider()}, agents={"fake": {}})
        model.script(tool_block("crew:run_command", command=plant), "Done.")
        done = run_crew(
            ["execute", "--config", str(config), output, "@fake set it up"], env=crew_env(tmp_path / "home"), cwd=repo
        )
        assert done.returncode == 0, done.stderr
        records = [json.loads(done.stdout)] if output == "--json" else jsonl(done.stdout)
        for record in records:
            assert problems("outcome.json" if output == "--json" else "event.json", record) == [], record
        if output == "--json":
            records = records[0]["results"]
        disarmed = [r["disarmed"] for r in records if "disarmed" in r] or [r["found"] for r in records if "found" in r]
        assert [[d["path"] for d in found] for found in disarmed] == [["sub/.git"]], (done.stdout, done.stderr)


@pytest.mark.slow
def test_an_asks_structured_content_through_crew_mcp_holds_to_the_outcome_schema(tmp_path, work):
    server = StdioServerParameters(command=CREW[0], args=[*CREW[1:], "mcp"], env=crew_env(tmp_path / "home"), cwd=work)

    async def main():
        async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            one = await client.call_tool("ask", {"task": f"@demo {TASK}"})
            two = await client.call_tool("ask", {"task": f"@demo @demo {TASK}"})
            return one.structured_content, two.structured_content

    one, two = anyio.run(main)
    assert problems("outcome.json", one) == [] and [r["agent"] for r in one["results"]] == ["demo"]
    assert problems("outcome.json", two) == [] and len(two["results"]) == 2


def jq_examples() -> list[tuple[str, list[str], str]]:
    """Every `crew … --json … | jq FILTER` line of the README and docs/: (where, crew's arguments, filter)."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            command, bar, rest = line.removeprefix("$ ").partition("| jq ")
            if bar and command.startswith("crew ") and "--json" in command:
                args, jq = shlex.split(command)[1:], shlex.split(rest, comments=True)
                found.append((f"{page.name}:{number}", args, jq[-1]))
    return found


def test_the_readme_and_docs_show_jq_reading_crews_json():
    pages = [where.partition(":")[0] for where, _, _ in jq_examples()]  # the examples the next test runs
    assert pages.count("README.md") >= 2 and "worktrees-and-review.md" in pages


@pytest.mark.parametrize(("where", "args", "jq"), jq_examples(), ids=[e[0] for e in jq_examples()])
@pytest.mark.slow
def test_every_jq_example_of_the_readme_and_docs_prints_what_it_says(where, args, jq, tmp_path):
    """Each example run as written, its agents played by fake models (the writer answers, the
    reviewer asks for a change): jq finds every field it names, none of them null."""
    repo = make_repo(tmp_path / "repo", {"notes.txt": "deploy: Friday\n"})
    writer, reviewer = FakeModel(tmp_path / "bin", "writer"), FakeModel(tmp_path / "bin", "reviewer")
    writer.script("notes.txt now says Tuesday.")
    finding = {"path": "notes.txt", "line": 1, "severity": "high", "message": "still Friday"}
    reviewer.script(tool_block("crew:verdict", verdict="changes", findings=[finding]))
    config = write_config(
        tmp_path / "crew.yaml",
        providers={f.name: f.provider() for f in (writer, reviewer)},
        agents={"claude": {"provider": "writer"}, "gemini": {"provider": "reviewer"}},
    )
    done = run_crew([args[0], "--config", str(config), *args[1:]], env=crew_env(tmp_path / "home"), cwd=repo)
    assert done.stdout, done.stderr
    check = f'{jq} | if type == "object" then all(.[]; . != null) else . != null end'
    read = subprocess.run(["jq", "-e", check], input=done.stdout, capture_output=True, text=True)
    assert read.returncode == 0, f"{where}: jq {jq!r} on {done.stdout}: {read.stdout}{read.stderr}"


@pytest.mark.e2e
def test_the_real_claudes_json_and_jsonl_hold_to_the_schemas_with_text_and_native_tools(
    crew, cli_env, mock_server, work
):
    env = {**crew_env(work.parent / "home"), **cli_env("claude")}
    mock_server.script(tool_block("crew:read_file", path="notes.txt"), "It says buy milk.")
    text = crew("query", "--json", f"@claude {TASK}", env=env)
    assert text.returncode == 0, text.stderr
    record = json.loads(text.stdout)
    assert problems("outcome.json", record) == [] and record["results"][0]["session"]
    mock_server.script(tool_call("mcp__crew__read_file", {"path": "notes.txt"}), "It says buy milk.")
    native = crew("query", "--tools-via", "native", "--jsonl", f"@claude {TASK}", env=env)
    assert native.returncode == 0, native.stderr
    events = jsonl(native.stdout)
    for event in events:
        assert problems("event.json", event) == [], event
    assert {"turn", "text", "call", "result", "usage", "answer"} <= {event["kind"] for event in events}
    call = next(event for event in events if event["kind"] == "call")
    assert call["via"] == "native" and any(e["kind"] == "result" and e["call"] == call["call"] for e in events)
