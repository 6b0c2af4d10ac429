"""`crew acp` driven by the official Python SDK's client (a real ACP client), as a process, over a
scripted CLI (crewcli.FakeModel): what the editor is shown, approvals, cancel, load after a restart,
bad frames. The real claude, gemini and codex, with the TypeScript SDK and acpx: tests/e2e/test_acp_real.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from acp import spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    HttpMcpServer,
    McpServerStdio,
    RequestPermissionResponse,
)

from crewbridge.acp.early import hello
from crewcli import CREW, FakeModel, crew_env, executable, processes_in, tool_block, write_config
from swapping import swapped


class Editor:
    """An editor's side of ACP: it records every update and answers permission requests from
    `answers` (option ids, in turn); with `buffers`, it holds files' text as an editor does."""

    def __init__(self, answers: list[str] | None = None, buffers: dict[str, str] | None = None) -> None:
        self.updates: list[dict[str, Any]] = []
        self.answers = list(answers or [])
        self.asked: list[dict[str, Any]] = []
        self.buffers = buffers

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update.model_dump(by_alias=True, exclude_none=True))

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        self.asked.append({"tool_call": tool_call.model_dump(by_alias=True, exclude_none=True), "options": options})
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.answers.pop(0)))

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> Any:
        from acp.schema import ReadTextFileResponse

        assert self.buffers is not None, "crew called fs/read_text_file though the client did not offer it"
        return ReadTextFileResponse(content=self.buffers.get(path, Path(path).read_text()))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> None:
        raise AssertionError("crew asked the editor to write: it looks the name up again, and may write elsewhere")

    def on_connect(self, conn: Any) -> None:
        pass

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [u for u in self.updates if u["sessionUpdate"] == kind]

    def text(self) -> str:
        return "".join(u["content"]["text"] for u in self.of("agent_message_chunk"))


@pytest.fixture
def fake(tmp_path: Path) -> FakeModel:
    return FakeModel(tmp_path / "bin")


@pytest.fixture
def setup(tmp_path: Path, workdir: Path, fake: FakeModel) -> dict[str, Any]:
    """crew.yaml (given with --config: trusted) with agent `fake` whose writes need approval, and
    `claude` (the default agent) played by the fake too: nothing reaches a real model; notes.txt."""
    (workdir / "notes.txt").write_text("one\ntwo\n")
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"fake": fake.provider()},
        agents={"fake": {"provider": "fake", "approval": ["write_file"]}, "claude": {"provider": "fake"}},
    )
    return {"args": ["acp", "--config", str(config)], "env": crew_env(tmp_path / "home")}


async def opened(setup: dict[str, Any], workdir: Path, editor: Editor, fs: bool = False):  # type: ignore[no-untyped-def]
    caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True)) if fs else None
    context = spawn_agent_process(editor, *CREW, *setup["args"], cwd=workdir, env=setup["env"])
    conn, proc = await context.__aenter__()
    await conn.initialize(protocol_version=1, client_capabilities=caps or ClientCapabilities())
    return context, conn, proc


async def writing_session(conn: Any, workdir: Path) -> str:
    """A new session of agent `fake` in execute mode; its id."""
    sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
    await conn.set_config_option(config_id="agent", session_id=sid, value="fake")
    await conn.set_config_option(config_id="mode", session_id=sid, value="execute")
    return sid


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 120))


@pytest.mark.slow
def test_initialize_is_answered_as_the_sdk_says_and_early(tmp_path: Path, workdir: Path) -> None:
    from acp.schema import InitializeResponse

    answer = InitializeResponse.model_validate(hello())
    assert answer.agent_capabilities.load_session and answer.agent_capabilities.prompt_capabilities.embedded_context
    sessions = answer.agent_capabilities.session_capabilities
    assert sessions.list and sessions.resume and sessions.close and sessions.additional_directories
    # as the ACP registry's launch check reads them: a terminal method runs `crew acp login CLI`
    assert [(m.id, m.type, m.args) for m in answer.auth_methods] == [
        (cli, "terminal", ["login", cli]) for cli in ("claude", "gemini", "codex")
    ]
    assert answer.agent_info.name == "crew" and answer.protocol_version == 1
    start = subprocess.Popen(
        [*CREW, "acp"], cwd=workdir, env=crew_env(tmp_path / "home"), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert start.stdin is not None and start.stdout is not None
    start.stdin.write(b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":5}}\n')
    start.stdin.flush()
    line = json.loads(start.stdout.readline())
    assert line == {"jsonrpc": "2.0", "id": 7, "result": hello()}
    start.stdin.close()  # stdin closing ends crew acp
    assert start.wait(60) == 0


def test_initialize_is_answered_having_imported_only_what_the_answer_needs(tmp_path: Path, workdir: Path) -> None:
    heavy = ("typing", "pathlib", "click", "acp", "pydantic", "crewbridge.protocol.jsonrpc", "crewbridge.protocol.mcp")
    script = (
        "import json, sys\nbefore = set(sys.modules)\nfrom crewbridge.acp.early import greet\ngreet([])\n"
        f"print(json.dumps(sorted(m for m in {heavy!r} if m in set(sys.modules) - before)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n',
        capture_output=True,
        text=True,
        cwd=workdir,
        env=crew_env(tmp_path / "home"),
        timeout=60,
    )
    assert json.loads(done.stdout)["result"] == hello()
    assert json.loads(done.stderr.splitlines()[-1]) == []


@pytest.mark.slow
def test_a_prompt_streams_text_a_read_and_a_write_as_a_diff_approved_then_rejected(
    setup: dict[str, Any], workdir: Path, fake: FakeModel
) -> None:
    fake.script(
        "Reading it.\n" + tool_block("crew:read_file", path="notes.txt"),
        "Writing.\n" + tool_block("crew:write_file", path="out.txt", content="new\n"),
        "Done.",
        tool_block("crew:write_file", path="refused.txt", content="no\n"),
        "Understood.",
    )
    editor = Editor(answers=["allow_once", "reject"])

    async def scenario() -> list[str]:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            session = await conn.new_session(cwd=str(workdir), mcp_servers=[])
            ids = [o.id for o in session.config_options]
            assert ids == ["agent", "model", "mode", "reviewer", "rounds", "worktree", "tools"]
            chosen = await conn.set_config_option(config_id="tools", session_id=session.session_id, value="text")
            assert [o.current_value for o in chosen.config_options if o.id == "tools"] == ["text"]
            await conn.set_config_option(config_id="agent", session_id=session.session_id, value="fake")
            await conn.set_session_mode(mode_id="execute", session_id=session.session_id)
            first = await conn.prompt(session_id=session.session_id, prompt=[text_block("read and write")])
            second = await conn.prompt(session_id=session.session_id, prompt=[text_block("write again")])
            return [first.stop_reason, second.stop_reason]
        finally:
            await context.__aexit__(None, None, None)

    assert run(scenario()) == ["end_turn", "end_turn"]
    text = editor.text()
    assert "Reading it." in text and "Done." in text and "Understood." in text
    assert "tool_use" not in text  # crew's calls are tool calls, never JSON in the text
    read, write, refused = editor.of("tool_call")
    assert read["kind"] == "read" and read["locations"] == [{"path": str(workdir / "notes.txt")}]
    assert write["kind"] == "edit" and refused["kind"] == "edit"
    done = {u["toolCallId"]: u for u in editor.of("tool_call_update")}
    assert done[read["toolCallId"]]["content"][0]["content"]["text"] == "one\ntwo\n"
    diff = done[write["toolCallId"]]["content"][0]
    assert diff == {"type": "diff", "path": str(workdir / "out.txt"), "newText": "new\n"}
    assert done[write["toolCallId"]]["status"] == "completed" and (workdir / "out.txt").read_text() == "new\n"
    assert done[refused["toolCallId"]]["status"] == "failed" and not (workdir / "refused.txt").exists()
    assert "declined" in fake.prompts[-1]  # the refusal reached the model
    assert [a["tool_call"]["toolCallId"] for a in editor.asked] == [write["toolCallId"], refused["toolCallId"]]
    kinds = [o.kind for o in editor.asked[0]["options"]]
    assert kinds == ["allow_once", "allow_always", "reject_once"]


@pytest.mark.slow
def test_allow_always_holds_for_the_rest_of_the_session(setup: dict[str, Any], workdir: Path, fake: FakeModel) -> None:
    fake.script(
        tool_block("crew:write_file", path="a.txt", content="a"),
        "one",
        tool_block("crew:write_file", path="b.txt", content="b"),
        "two",
    )
    editor = Editor(answers=["allow_always"])

    async def scenario() -> None:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            await conn.set_config_option(config_id="agent", session_id=sid, value="fake")
            await conn.set_config_option(config_id="mode", session_id=sid, value="execute")
            for task in ("write a", "write b"):
                await conn.prompt(session_id=sid, prompt=[text_block(task)])
        finally:
            await context.__aexit__(None, None, None)

    run(scenario())
    assert len(editor.asked) == 1 and (workdir / "a.txt").exists() and (workdir / "b.txt").exists()


@pytest.mark.slow
def test_with_fs_offered_files_are_read_in_the_editors_buffers_and_written_by_crew(
    setup: dict[str, Any], workdir: Path, fake: FakeModel
) -> None:
    notes = str(workdir / "notes.txt")
    fake.script(
        tool_block("crew:edit_file", path="notes.txt", old_string="UNSAVED", new_string="saved"),
        "edited",
    )
    editor = Editor(answers=["allow_once"], buffers={notes: "UNSAVED buffer\n"})

    async def scenario() -> None:
        context, conn, _ = await opened(setup, workdir, editor, fs=True)
        try:
            await conn.prompt(session_id=await writing_session(conn, workdir), prompt=[text_block("edit it")])
        finally:
            await context.__aexit__(None, None, None)

    run(scenario())
    assert editor.buffers == {notes: "UNSAVED buffer\n"}  # read there; never written there
    assert (workdir / "notes.txt").read_text() == "saved buffer\n"  # crew writes where it resolved
    (update,) = [u for u in editor.of("tool_call_update") if u.get("content")]
    assert update["content"][0] == {
        "type": "diff",
        "path": notes,
        "oldText": "UNSAVED buffer\n",
        "newText": "saved buffer\n",
    }


@pytest.mark.slow
def test_with_fs_offered_writes_under_a_folder_swapped_in_a_loop_never_land_outside(
    setup: dict[str, Any], workdir: Path, fake: FakeModel
) -> None:
    """Issue 39: 40 writes and reads through `crew acp` with an editor that offers its files, while
    another process swaps d and a symlink to ../outside by renameat2(RENAME_EXCHANGE) in a loop:
    nothing lands or is read outside, nothing is reported written that was not."""
    outside = workdir.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET\n")
    (workdir / "d").mkdir()
    (workdir / "d" / "secret.txt").write_text("inside\n")
    (workdir / "swap").symlink_to("../outside")
    calls = [tool_block("crew:write_file", path=f"d/f{n}.txt", content=f"{n}\n") for n in range(40)]
    reads = [tool_block("crew:read_file", path="d/secret.txt") for _ in range(10)]
    fake.script("".join(calls[:20] + reads), "".join(calls[20:]), "Done.")
    editor = Editor(answers=["allow_always"], buffers={})

    async def scenario() -> None:
        context, conn, _ = await opened(setup, workdir, editor, fs=True)
        try:
            sid = await writing_session(conn, workdir)
            with swapped(workdir / "d", workdir / "swap"):
                await conn.prompt(session_id=sid, prompt=[text_block("write forty files")])
        finally:
            await context.__aexit__(None, None, None)

    run(scenario())
    assert sorted(os.listdir(outside)) == ["secret.txt"] and (outside / "secret.txt").read_text() == "TOPSECRET\n"
    started = {u["toolCallId"]: u["rawInput"] for u in editor.of("tool_call")}
    done = [(started[u["toolCallId"]], u) for u in editor.of("tool_call_update") if u.get("status") == "completed"]
    written = sorted(raw["path"] for raw, _ in done if "content" in raw)
    assert written == sorted(f"d/{p.name}" for p in (workdir / "d").glob("f*.txt"))  # reported = on the disk
    assert len(written) < 40  # the race was on: some were refused as outside (tests/test_tools_files.py
    # runs the same writes until 40 came through and 40 were refused)
    assert all((workdir / path).read_text() == f"{path[3:-4]}\n" for path in written)
    assert "TOPSECRET" not in json.dumps(editor.updates) and "TOPSECRET" not in "".join(fake.prompts)
    assert len(editor.asked) == 1  # allowed always, once


@pytest.mark.slow
def test_cancel_ends_the_clis_process_group_and_the_prompt_says_cancelled(
    setup: dict[str, Any], workdir: Path, tmp_path: Path
) -> None:
    slow = executable(
        tmp_path / "bin" / "slow",
        "import os, sys, time\nopen(sys.argv[1], 'w').write(str(os.getpid()))\n"
        "sys.stdout.write('thinking'); sys.stdout.flush(); time.sleep(120)\n",
    )
    pid_file = tmp_path / "bin" / "slow.pid"  # in its state folder: the sandbox lets it write there
    write_config(  # in place of the setup's (crew.yaml: also found as the project's file, and named)
        tmp_path / "crew.yaml",
        providers={"slow": {"command": [str(slow), str(pid_file)], "state_dirs": [str(tmp_path / "bin")]}},
        agents={"slow": {"provider": "slow"}, "claude": {"provider": "slow"}},
    )
    editor = Editor()

    async def scenario() -> tuple[str, float]:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            await conn.set_config_option(config_id="agent", session_id=sid, value="slow")
            prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("think")]))
            while not pid_file.exists():
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            cancelled = time.monotonic()
            await conn.cancel(session_id=sid)
            reason = (await prompt).stop_reason
            return reason, time.monotonic() - cancelled
        finally:
            await context.__aexit__(None, None, None)

    reason, _ = run(scenario())
    assert reason == "cancelled"
    assert processes_in(tmp_path) == []  # (its pid file holds its pid inside the sandbox: looked for by place)


@pytest.mark.slow
def test_a_session_is_listed_and_loaded_after_a_restart_and_its_conversation_goes_on(
    setup: dict[str, Any], workdir: Path, fake: FakeModel
) -> None:
    fake.script(tool_block("crew:read_file", path="notes.txt"), "It says one and two.", "As I said: one, two.")

    async def first() -> str:
        context, conn, _ = await opened(setup, workdir, Editor())
        try:
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            await conn.set_config_option(config_id="agent", session_id=sid, value="fake")
            await conn.prompt(session_id=sid, prompt=[text_block("what do the notes say?")])
            return sid
        finally:
            await context.__aexit__(None, None, None)

    sid = run(first())
    editor = Editor()

    async def again() -> list[Any]:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            listed = (await conn.list_sessions(cwd=str(workdir))).sessions
            await conn.load_session(cwd=str(workdir), session_id=sid, mcp_servers=[])
            replayed = list(editor.updates)
            await conn.prompt(session_id=sid, prompt=[text_block("and again?")])
            return [listed, replayed]
        finally:
            await context.__aexit__(None, None, None)

    listed, replayed = run(again())
    assert [(s.session_id, s.title) for s in listed] == [(sid, "what do the notes say?")]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds == ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
    assert replayed[0]["content"]["text"] == "what do the notes say?"
    assert replayed[-1]["content"]["text"].strip() == "It says one and two."
    assert "what do the notes say?" in fake.prompts[-1] and "and again?" in fake.prompts[-1]  # the same conversation


@pytest.mark.slow
def test_a_session_not_yet_prompted_is_loaded_resumed_and_closed(setup: dict[str, Any], workdir: Path) -> None:
    editor = Editor()

    async def scenario() -> list[str]:
        context, conn, _ = await opened(setup, workdir, editor)
        refusals = []
        try:
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            loaded = await conn.load_session(cwd=str(workdir), session_id=sid, mcp_servers=[])
            assert loaded.config_options and editor.updates == []  # nothing to replay
            resumed = await conn.resume_session(cwd=str(workdir), session_id=sid, mcp_servers=[])
            assert [o.id for o in resumed.config_options][:1] == ["agent"]
            await conn.close_session(session_id=sid)
            for attempt in (
                conn.prompt(session_id=sid, prompt=[text_block("hi")]),
                conn.close_session(session_id=sid),
                conn.resume_session(cwd=str(workdir), session_id="20000101-000000-000000", mcp_servers=[]),
            ):
                try:
                    await attempt
                except Exception as exc:
                    refusals.append(str(exc))
        finally:
            await context.__aexit__(None, None, None)
        return refusals

    refusals = run(scenario())
    assert len(refusals) == 3 and "is not open" in refusals[0] and "is not open" in refusals[1]
    assert "not found" in refusals[2]


@pytest.mark.slow
def test_a_session_resumed_after_a_restart_goes_on_without_a_replay(
    setup: dict[str, Any], workdir: Path, fake: FakeModel
) -> None:
    fake.script("First answer.", "Second answer.")
    editor = Editor()

    async def first() -> str:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[text_block("remember this")])
            return str(sid)
        finally:
            await context.__aexit__(None, None, None)

    sid = run(first())
    editor = Editor()

    async def again() -> int:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            await conn.resume_session(cwd=str(workdir), session_id=sid, mcp_servers=[])
            replayed = len(editor.updates)
            await conn.prompt(session_id=sid, prompt=[text_block("and now?")])
            return replayed
        finally:
            await context.__aexit__(None, None, None)

    assert run(again()) == 0  # the editor keeps the history it showed
    assert "Second answer." in editor.text()
    assert "remember this" in fake.prompts[-1] and "and now?" in fake.prompts[-1]  # the same conversation


@pytest.mark.slow
@pytest.mark.needs("bwrap")
def test_additional_directories_are_written_as_the_folder_is_and_nothing_else(
    setup: dict[str, Any], workdir: Path, fake: FakeModel, tmp_path: Path
) -> None:
    extra, outside = tmp_path / "extra", tmp_path / "outside"
    extra.mkdir()
    outside.mkdir()
    fake.script(
        tool_block("crew:write_file", path=str(extra / "made.txt"), content="made\n")
        + tool_block("crew:write_file", path=str(outside / "no.txt"), content="no\n")
        + tool_block("crew:run_command", command=f"echo ran > {extra}/ran.txt; echo ran > {outside}/ran.txt"),
        "Done.",
    )
    editor = Editor()
    setup = {**setup, "args": [*setup["args"], "--sandbox", "required"]}

    async def scenario() -> None:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            sid = (
                await conn.new_session(cwd=str(workdir), additional_directories=[str(extra)], mcp_servers=[])
            ).session_id
            await conn.set_config_option(config_id="mode", session_id=sid, value="execute")
            await conn.prompt(session_id=sid, prompt=[text_block("write in both")])
        finally:
            await context.__aexit__(None, None, None)

    run(scenario())
    assert (extra / "made.txt").read_text() == "made\n" and (extra / "ran.txt").read_text() == "ran\n"
    assert list(outside.iterdir()) == []  # neither crew's write nor the command's reached it
    failed = [u for u in editor.of("tool_call_update") if u["status"] == "failed"]
    assert len(failed) == 1 and "is outside the working directory" in failed[0]["content"][0]["content"]["text"]


@pytest.mark.slow
def test_an_additional_directory_that_is_not_a_folder_is_refused(setup: dict[str, Any], workdir: Path) -> None:
    async def scenario() -> str:
        context, conn, _ = await opened(setup, workdir, Editor())
        try:
            await conn.new_session(cwd=str(workdir), additional_directories=["relative/dir"], mcp_servers=[])
        except Exception as exc:
            return str(exc)
        finally:
            await context.__aexit__(None, None, None)
        return ""

    assert "additional directory 'relative/dir' is not an absolute path to a folder" in run(scenario())


@pytest.mark.slow
def test_an_untrusted_project_is_refused_with_crews_message(tmp_path: Path, workdir: Path) -> None:
    (workdir / "crew.yaml").write_text("providers:\n  x:\n    command: [./run.sh]\n")
    editor = Editor()

    async def scenario() -> str:
        context, conn, _ = await opened({"args": ["acp"], "env": crew_env(tmp_path / "home")}, tmp_path, editor)
        try:
            await conn.new_session(cwd=str(workdir), mcp_servers=[])
        except Exception as exc:  # the RequestError the editor shows
            return str(exc)
        finally:
            await context.__aexit__(None, None, None)
        return ""

    assert "crew config trust" in run(scenario())


@pytest.mark.parametrize(
    ("server", "said"),
    [
        (HttpMcpServer(type="http", name="web", url="http://127.0.0.1:1/mcp", headers=[]), "not on stdio"),
        (McpServerStdio(name="crew", command="x", args=[], env=[]), "other than 'crew'"),
        (McpServerStdio(name="a.b", command="x", args=[], env=[]), "letters, digits"),
    ],
)
def test_an_mcp_server_no_cli_could_be_given_is_refused_with_the_reason(
    setup: dict[str, Any], workdir: Path, server: Any, said: str
) -> None:
    async def scenario() -> str:
        context, conn, _ = await opened(setup, workdir, Editor())
        try:
            await conn.new_session(cwd=str(workdir), mcp_servers=[server])
        except Exception as exc:  # the RequestError the editor shows
            return str(exc)
        finally:
            await context.__aexit__(None, None, None)
        return ""

    assert said in run(scenario())


@pytest.mark.slow
def test_bad_frames_get_json_rpc_errors_and_crew_reads_on(tmp_path: Path, workdir: Path) -> None:
    frames = [
        b"{not json\n",
        b"[1, 2]\n",
        b'{"id":5,"method":"initialize"}\n',  # no jsonrpc
        b'{"foo":1}\n',  # neither a request nor an answer
        b'{"id":6,"result":1}\n',  # a malformed answer: said on stderr, never answered
        b'{"jsonrpc":"2.0","id":1,"method":"nothing/here"}\n',
        b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"relative","mcpServers":[]}}\n',
        b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"none","prompt":[]}}\n',
        b'{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1}}\n',
    ]
    done = subprocess.run(
        [*CREW, "acp"],
        cwd=workdir,
        env=crew_env(tmp_path / "home"),
        input=b"".join(frames),
        capture_output=True,
        timeout=60,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    codes = [a.get("error", {}).get("code") for a in answers]
    assert codes == [-32700, -32600, -32600, -32600, -32601, -32602, -32602, None]
    assert [a["id"] for a in answers[:4]] == [None, None, 5, None]
    assert "relative" in answers[5]["error"]["message"] and answers[-1]["result"] == hello()
    assert answers[1]["error"]["message"] == "a batch: crew takes no batches; send one JSON-RPC message at a time"
    assert done.returncode == 0 and b"Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("stdin", ["empty", "devnull", "closed"])
def test_an_empty_or_closed_stdin_ends_crew_acp_at_once_and_quietly(stdin: str, tmp_path: Path, workdir: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    how = {"empty": f"< {empty}", "devnull": "< /dev/null", "closed": "<&-"}[stdin]
    command = " ".join(f"'{part}'" for part in [*CREW, "acp"])
    done = subprocess.run(
        f"exec {command} {how}",
        shell=True,
        cwd=workdir,
        env=crew_env(tmp_path / "home"),
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


@pytest.mark.slow
def test_stdin_closing_ends_every_cli_crew_started(setup: dict[str, Any], workdir: Path, tmp_path: Path) -> None:
    slow = executable(
        tmp_path / "bin" / "slow",
        "import sys, time\nsys.stdout.write('thinking\\n'); sys.stdout.flush(); time.sleep(120)\n",
    )
    write_config(
        tmp_path / "crew.yaml", providers={"slow": {"command": [str(slow)]}}, agents={"claude": {"provider": "slow"}}
    )
    editor = Editor()

    async def scenario() -> int:
        context, conn, proc = await opened(setup, workdir, editor)
        sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
        prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("think")]))
        while not editor.of("agent_message_chunk"):  # the CLI is running
            await asyncio.sleep(0.05)
        proc.stdin.close()
        code = await asyncio.wait_for(proc.wait(), 30)
        prompt.cancel()  # unanswered: crew ended
        await context.__aexit__(None, None, None)
        return code

    assert run(scenario()) == 0
    assert processes_in(tmp_path) == []


def test_a_session_starts_only_the_cli_its_prompt_runs(setup: dict[str, Any], workdir: Path, tmp_path: Path) -> None:
    fake = FakeModel(tmp_path / "bin")
    fake.script("Hello.")
    marker = tmp_path / "bin" / "claude-started"
    unused = executable(tmp_path / "bin" / "unused", f"open({str(marker)!r}, 'w').close()\n")
    write_config(
        tmp_path / "crew.yaml",
        providers={"fake": fake.provider(), "unused": {"command": [str(unused)], "state_dirs": [str(marker.parent)]}},
        agents={"fake": {"provider": "fake"}, "claude": {"provider": "unused"}},
    )
    editor = Editor()

    async def scenario() -> str:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id  # claude by default
            await asyncio.sleep(1)
            await conn.set_config_option(config_id="agent", session_id=sid, value="fake")
            return (await conn.prompt(session_id=sid, prompt=[text_block("hi")])).stop_reason
        finally:
            await context.__aexit__(None, None, None)

    assert run(scenario()) == "end_turn" and "Hello." in editor.text()
    assert not marker.exists()  # the default agent's CLI never started: the session did not use it


@pytest.mark.slow
def test_the_sandbox_required_where_none_works_is_refused_before_serving(tmp_path: Path, workdir: Path) -> None:
    env = {**crew_env(tmp_path / "home"), "CREW_SANDBOX_MECHANISM": "none"}
    done = subprocess.run(
        [*CREW, "acp", "--sandbox", "required"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("crew: error: ") and len(done.stderr.splitlines()) == 1


@pytest.mark.slow
def test_crew_acp_check_passes_on_crew_acp_and_reaches_its_permissions(
    setup: dict[str, Any], workdir: Path, fake: FakeModel, tmp_path: Path
) -> None:
    write = tool_block("crew:write_file", path="acp-check.txt", content="ok\n")
    fake.script("Hello there.", write, "Done.", write, "Understood.", "Hello there.")
    env = {**setup["env"], "PATH": os.environ["PATH"]}
    config = str(
        write_config(
            tmp_path / "crew.yaml",  # the file setup made, given with --config: trusted
            providers={"fake": fake.provider()},
            agents={"claude": {"provider": "fake", "approval": ["write_file"]}},
        )
    )
    agent = [sys.executable, "-m", "crewbridge", "acp", "--config", config]
    done = subprocess.run(
        [*CREW, "acp", "--config", config, "check", "--timeout", "60", "--", *agent],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 failed" in done.stdout.splitlines()[-1]
    rows = {line.split("  ")[0]: line for line in done.stdout.splitlines()}
    assert (
        "switched from query to execute (session/set_mode)"
        in rows["a mode that may write, for the permission requests"]
    )
    for answered in ("allow_once", "reject_once"):
        assert " held " in rows[f"a permission request answered {answered}"]


@pytest.mark.slow
def test_crew_acp_login_runs_the_clis_own_login_in_the_terminal(tmp_path: Path, workdir: Path) -> None:
    from crewbridge.providers import BUILTIN, load

    from crewbridge.acp.early import LOGINS

    assert {name for name in BUILTIN if load(name).login is not None} == set(LOGINS)
    for name in ("claude", "codex"):
        executable(tmp_path / "bin" / name, "import sys\nprint('logging in:', *sys.argv[1:])\n")
    env = {**crew_env(tmp_path / "home"), "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    said = [
        subprocess.run([*CREW, "acp", "login", cli], cwd=workdir, env=env, capture_output=True, text=True, timeout=60)
        for cli in ("claude", "codex", "demo")
    ]
    assert [s.stdout for s in said[:2]] == ["logging in: auth login\n", "logging in: login\n"]
    assert said[2].returncode == 2 and said[2].stderr == (
        "crew: error: crew knows no login for demo; log in as its documentation says\n"
    )


@pytest.mark.slow
def test_an_image_for_a_cli_that_takes_none_or_not_an_image_is_refused_in_one_line(
    setup: dict[str, Any], workdir: Path, fake: FakeModel
) -> None:
    from acp import image_block

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    fake.script("I cannot see it.")
    editor = Editor()

    async def scenario() -> list[str]:
        context, conn, _ = await opened(setup, workdir, editor)
        said = []
        try:
            sid = (await conn.new_session(cwd=str(workdir), mcp_servers=[])).session_id
            said.append(
                (
                    await conn.prompt(session_id=sid, prompt=[text_block("see"), image_block(png, "image/png")])
                ).stop_reason
            )
            for block in (image_block("not base64!", "image/png"), image_block(png, "image/tiff")):
                try:
                    await conn.prompt(session_id=sid, prompt=[text_block("see"), block])
                except Exception as exc:
                    said.append(str(exc))
        finally:
            await context.__aexit__(None, None, None)
        return said

    stop, not_base64, tiff = run(scenario())
    assert stop == "end_turn" and "fake cannot be given the prompt's images" in editor.text()
    assert fake.prompts == []  # nothing reached the model
    assert "not base64" in not_base64 and "image/tiff" in tiff


@pytest.mark.slow
def test_crew_yaml_s_check_is_a_picker_and_each_run_of_it_a_finished_command(
    tmp_path: Path, workdir: Path, fake: FakeModel
) -> None:
    check = "grep -q Tuesday notes.txt || { echo 'no Tuesday yet'; exit 1; }"
    config = write_config(
        tmp_path / "checked.yaml",
        providers={"fake": fake.provider()},
        agents={"fake": {}},
        check={"run": check, "rounds": 2},
    )
    setup = {"args": ["acp", "--config", str(config)], "env": crew_env(tmp_path / "home")}
    fake.script(
        tool_block("crew:write_file", path="notes.txt", content="Tusday\n"),
        "Set it.",
        tool_block("crew:write_file", path="notes.txt", content="Tuesday\n"),
        "Fixed.",
        tool_block("crew:write_file", path="notes.txt", content="Friday\n"),
        "Set it back.",
    )
    editor = Editor()

    async def scenario() -> list[Any]:
        context, conn, _ = await opened(setup, workdir, editor)
        try:
            sid = await writing_session(conn, workdir)
            options = (await conn.set_config_option(config_id="mode", session_id=sid, value="execute")).config_options
            [picker] = [o for o in options if o.id == "check"]
            checked = await conn.prompt(session_id=sid, prompt=[text_block("set the day")])
            await conn.set_config_option(config_id="check", session_id=sid, value="off")
            unchecked = await conn.prompt(session_id=sid, prompt=[text_block("set it back")])
            return [picker, checked.stop_reason, unchecked.stop_reason]
        finally:
            await context.__aexit__(None, None, None)

    picker, *stops = run(scenario())
    assert (picker.current_value, [o.value for o in picker.options]) == ("on", ["on", "off"])
    assert picker.options[0].name == f"on: {check}"
    assert stops == ["end_turn", "end_turn"]
    checks = [u for u in editor.of("tool_call") if u["kind"] == "execute"]
    assert [(u["title"].split(":")[0], u["status"]) for u in checks] == [
        ("check 1/2", "failed"),
        ("check 2/2", "completed"),
    ]
    assert checks[0]["content"][0]["content"]["text"] == "no Tuesday yet\n"
    assert "no Tuesday yet" in fake.prompts[2]  # the failure went back to the agent
    assert (workdir / "notes.txt").read_text() == "Friday\n" and len(fake.prompts) == 6  # off: not checked
