"""`crew acp` driven by real ACP clients — the official TypeScript SDK's ClientSideConnection
(tests/e2e/acp_client.mjs) and acpx, both pinned in package.json — over the real claude, gemini and
codex against the mock model: streamed text, a read, a write shown as a diff, an approval allowed
and one rejected, cancel, load after a restart, the editor's MCP server reached by the model, a
review as plan entries; and `crew acp check` on gemini --acp."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clienv import REPO, require_cli
from crewcli import CREW, processes_in, tool_block, write_config
from gitrepo import make_repo
from mockserver import reply, tool_call

pytestmark = pytest.mark.e2e

CLIENT = Path(__file__).with_name("acp_client.mjs")


def acp_client(plan: dict[str, Any], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Run the TypeScript SDK's client on `plan` against `crew acp`; → what it saw."""
    node = shutil.which("node")
    assert node, "node is needed for the TypeScript SDK's client"
    require_sdk()
    plan = {"command": [*CREW, "acp"], "cwd": str(cwd), **plan}
    done = subprocess.run(
        [node, str(CLIENT), json.dumps(plan)], env=env, cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert "error" not in out, out["error"] + done.stderr
    return out


def require_sdk() -> None:
    pinned = json.loads((REPO / "package.json").read_text())["dependencies"]
    for package in ("@agentclientprotocol/sdk", "acpx"):
        installed = REPO / "node_modules" / package / "package.json"
        assert installed.exists(), f"{package} is not installed; run `npm install` in {REPO}"
        version = json.loads(installed.read_text())["version"]
        assert version == pinned[package], f"{package} {version} is installed but package.json pins {pinned[package]}"


@pytest.fixture
def project(cli: str, workdir: Path) -> Path:
    """notes.txt, and crew.yaml: the CLI's agent takes the text catalogue and asks before a write."""
    (workdir / "notes.txt").write_text("the launch code is 7-4-1\n")
    write_config(
        workdir / "crew.yaml", agents={cli: {"provider": cli, "tools_via": "text", "approval": ["write_file"]}}
    )
    return workdir


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] for u in updates]


def test_text_a_read_a_write_as_a_diff_approved_and_rejected_then_a_load_after_a_restart(
    cli: str, cli_env: Any, mock_server: Any, project: Path, tmp_path: Path
) -> None:
    mock_server.script(
        reply("Let me read it.\n", tool_block("crew:read_file", path="notes.txt")),
        reply("Writing it down.\n", tool_block("crew:write_file", path="code.txt", content="7-4-1\n")),
        "Saved the code.",
        reply(tool_block("crew:write_file", path="refused.txt", content="no\n")),
        "Understood, I wrote nothing.",
    )
    env = cli_env(cli)
    out = acp_client(
        {
            "options": {"agent": cli, "mode": "execute"},
            "prompts": [{"text": "save the launch code to code.txt"}, {"text": "now write refused.txt"}],
            "answers": ["allow_once", "reject"],
        },
        env,
        project,
    )
    assert out["stops"] == ["end_turn", "end_turn"] and out["protocolVersion"] == 1
    text = "".join(u["content"]["text"] for u in out["updates"] if u["sessionUpdate"] == "agent_message_chunk")
    assert "Let me read it." in text and "Saved the code." in text and "Understood" in text
    assert "tool_use" not in text
    started = [u for u in out["updates"] if u["sessionUpdate"] == "tool_call"]
    assert [u["kind"] for u in started] == ["read", "edit", "edit"]
    assert started[0]["locations"] == [{"path": str(project / "notes.txt")}]
    done = {u["toolCallId"]: u for u in out["updates"] if u["sessionUpdate"] == "tool_call_update"}
    assert done[started[0]["toolCallId"]]["content"][0]["content"]["text"] == "the launch code is 7-4-1\n"
    assert done[started[1]["toolCallId"]]["content"][0] == {
        "type": "diff",
        "path": str(project / "code.txt"),
        "newText": "7-4-1\n",
    }
    assert (project / "code.txt").read_text() == "7-4-1\n"
    assert done[started[2]["toolCallId"]]["status"] == "failed" and not (project / "refused.txt").exists()
    assert [a["toolCall"]["toolCallId"] for a in out["asked"]] == [started[1]["toolCallId"], started[2]["toolCallId"]]
    assert "declined" in mock_server.requests[-1].text()  # the refusal reached the model
    usage = [u for u in out["updates"] if u["sessionUpdate"] == "usage_update"]
    assert usage and usage[-1]["used"] > 0
    assert (usage[-1]["size"] > 0) == (cli != "gemini")  # the context window, where the CLI says it
    assert processes_in(tmp_path) == []

    mock_server.script("You saved 7-4-1 to code.txt.")  # crew restarted: the session is loaded
    again = acp_client({"load": out["sessionId"], "prompts": [{"text": "what did you save?"}]}, env, project)
    replayed = again["updates"][: again["replayed"]]
    assert kinds(replayed)[0] == "user_message_chunk"
    assert replayed[0]["content"]["text"] == "save the launch code to code.txt"
    assert "tool_call_update" in kinds(replayed) and again["stops"] == ["end_turn"]
    last = mock_server.requests[-1].text()
    assert "what did you save?" in last and "Saved the code." in last  # the same CLI conversation, resumed


OWN_COMMAND = {
    "claude": tool_call("Bash", {"command": "echo made > made.txt; cat notes.txt"}),
    "codex": tool_call("exec_command", {"cmd": "echo made > made.txt; cat notes.txt"}),
    "gemini": tool_call("run_shell_command", {"command": "echo made > made.txt; cat notes.txt"}, own=True),
}


def test_the_clis_own_command_is_a_tool_call_started_and_finished_with_its_output(
    cli: str, cli_env: Any, mock_server: Any, project: Path, tmp_path: Path
) -> None:
    """Whether the CLI asked crew (claude, gemini) or ran it under its own rules (codex): one
    tool_call for the command, finished by its own id with what the command printed."""
    model = {"model": "gpt-5.5"} if cli == "codex" else {}  # the model whose tools include exec_command
    write_config(project / "crew.yaml", agents={cli: {"provider": cli, "tools_via": "native", **model}})
    mock_server.script(OWN_COMMAND[cli], "Made it.")
    options = {"agent": cli, "mode": "execute"}
    out = acp_client({"options": options, "prompts": [{"text": "make made.txt"}]}, cli_env(cli), project)
    assert out["stops"] == ["end_turn"] and (project / "made.txt").read_text() == "made\n"
    [started] = [u for u in out["updates"] if u["sessionUpdate"] == "tool_call"]
    assert started["kind"] == "execute" and "echo made > made.txt" in started["title"]
    [done] = [u for u in out["updates"] if u["sessionUpdate"] == "tool_call_update"]
    assert (done["toolCallId"], done["status"]) == (started["toolCallId"], "completed")
    said = done["content"][0]["content"]["text"]
    assert said == "" if cli == "gemini" else "the launch code is 7-4-1" in said  # gemini 0.61 reports no output
    assert processes_in(tmp_path) == []


def test_cancel_ends_the_cli_within_two_seconds(
    cli: str, cli_env: Any, mock_server: Any, project: Path, tmp_path: Path
) -> None:
    mock_server.script(reply(*["thinking… "] * 40, delay=0.5))
    out = acp_client(
        {"options": {"agent": cli}, "prompts": [{"text": "think long", "cancel": True}]}, cli_env(cli), project
    )
    assert out["stops"] == ["cancelled"]
    assert out["cancelMs"] < 2000, out["cancelMs"]
    assert processes_in(tmp_path) == []


def test_an_mcp_server_the_editor_gives_reaches_the_model_under_crews_policy(
    cli: str, cli_env: Any, mock_server: Any, project: Path, tmp_path: Path
) -> None:
    """The editor's stdio MCP server (the official Python SDK's, with a value in its env) is given
    to the CLI; its tool is one of the CLI's own to crew, so crew's policy decides on it: here the
    editor is asked (approval: native glob), allows it, and its result reaches the model."""
    write_config(
        project / "crew.yaml",
        agents={cli: {"provider": cli, "tools_via": "text", "approval": ["native:mcp*launch_code"]}},
    )
    vault = {
        "name": "vault",
        "command": sys.executable,
        "args": [str(Path(__file__).with_name("vault_mcp.py"))],
        "env": [{"name": "VAULT_CODE", "value": "7-4-1"}],
    }
    if cli == "codex":  # codex offers MCP tools to the JavaScript its `exec` tool runs, not to the model
        call = tool_call("exec", {"input": "text(JSON.stringify(await tools.mcp__vault__launch_code({})))"})
    else:
        call = tool_call("launch_code")
    mock_server.script(call, "The vault says 7-4-1.")
    out = acp_client(
        {
            "mcpServers": [vault],
            "options": {"agent": cli, "mode": "execute"},
            "prompts": [{"text": "what is the launch code?"}],
            "answers": ["allow_once"],
        },
        cli_env(cli),
        project,
    )
    assert out["stops"] == ["end_turn"]
    assert out["asked"], (out, [r.text()[-3000:] for r in mock_server.requests])
    (asked,) = out["asked"]
    assert "launch_code" in asked["toolCall"]["title"]  # the editor was asked about the server's tool
    assert "the vault says 7-4-1" in mock_server.requests[-1].text()  # it ran, its env given, and answered
    assert processes_in(tmp_path) == []


def test_a_review_is_shown_as_plan_entries_one_per_round_updated_as_it_goes(
    cli: str, cli_env: Any, mock_server: Any, workdir: Path, tmp_path: Path
) -> None:
    make_repo(workdir, {"notes.txt": "deploy: Friday\n"})
    write_config(workdir / "crew.yaml", agents={cli: {"provider": cli, "tools_via": "text"}})
    typo = {"path": "notes.txt", "line": 1, "severity": "high", "message": "'Tusday' is misspelled"}
    mock_server.script(  # one CLI writes and reviews: one mock answers both, in the order the run asks
        tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\n"),
        "Set it.",  # writer, round 1
        tool_block("crew:verdict", verdict="changes", findings=[typo]),  # reviewer, round 1
        tool_block("crew:edit_file", path="notes.txt", old_string="Tusday", new_string="Tuesday"),
        "Fixed it.",  # writer, round 2
        tool_block("crew:verdict", verdict="approve"),  # reviewer, round 2
    )
    out = acp_client(
        {
            "options": {"agent": cli, "mode": "execute", "reviewer": cli},
            "prompts": [{"text": "set the deploy day in notes.txt to Tuesday"}],
        },
        cli_env(cli),
        workdir,
    )
    assert out["stops"] == ["end_turn"] and (workdir / "notes.txt").read_text() == "deploy: Tuesday\n"
    plans = [
        [(e["content"], e["status"]) for e in u["entries"]] for u in out["updates"] if u["sessionUpdate"] == "plan"
    ]
    one, two, said = f"Round 1: @{cli} writes; ", f"Round 2: @{cli} writes; ", f"@{cli}: changes, 1 finding(s)"
    assert plans == [
        [(one + f"@{cli} reviews", "in_progress")],
        [(one + said, "completed"), (two + f"@{cli} reviews", "in_progress")],
        [(one + said, "completed"), (two + f"@{cli}: approve", "completed")],
    ]
    assert processes_in(tmp_path) == []


def test_acpx_runs_a_prompt_through_crew_acp(cli: str, cli_env: Any, mock_server: Any, project: Path) -> None:
    require_sdk()
    mock_server.script("Hello from the mock.")
    write_config(project / "crew.yaml", agents={"claude": {"provider": cli, "tools_via": "text"}})
    acpx = REPO / "node_modules" / ".bin" / "acpx"
    agent = " ".join([*CREW, "acp"])
    done = subprocess.run(
        [str(acpx), "--agent", agent, "--approve-all", "exec", "say hello"],
        env=cli_env(cli),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Hello from the mock." in done.stdout


@pytest.mark.parametrize("cli", ["gemini"])
def test_crew_acp_check_reports_truthfully_on_gemini(cli: str, cli_env: Any, mock_server: Any, workdir: Path) -> None:
    """Every check exercised on the pinned gemini --acp: the mock has it ask for a permission (a
    write, answered allow then reject) and streams slowly while the cancel comes. What fails is
    gemini's, as checked against its code: its ACP SDK logs a line that is not JSON and drops it,
    answering no parse error (JSON-RPC 2.0 wants one); and it names a session's file by the minute
    the session began, so a session/load in a new process within that minute reopens the same file,
    empties it, and finds "No previous sessions found for this project" (later, the load holds)."""
    gemini = require_cli("gemini")
    write = tool_call("write_file", {"file_path": "acp-check.txt", "content": "ok\n"})
    mock_server.script(
        "Hello.",  # the streamed prompt
        write,  # asks, allowed: the file is written
        "Done.",
        write,  # asks, rejected
        "Understood.",
        reply(*["thinking "] * 30, delay=0.5),  # cancelled while it streams
    )
    done = subprocess.run(
        [*CREW, "acp", "check", "--timeout", "90", "--", gemini, "--acp", "-m", "gemini-2.5-flash"],
        env=cli_env(cli),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(done.stdout, file=sys.stderr)
    rows = {line[:58].strip(): line[58:].split("  ")[0].strip() for line in done.stdout.splitlines()[1:-1]}
    assert {name: status for name, status in rows.items() if not name.startswith("session/load")} == {
        "initialize: version negotiation (asked 999)": "held",
        "malformed frames get JSON-RPC errors": "FAILED",
        "session/new": "held",
        "session/prompt streams updates": "held",
        "a mode that may write, for the permission requests": "held",
        "a permission request answered allow_once": "held",
        "a permission request answered reject_once": "held",
        "session/cancel ends the prompt with stopReason cancelled": "held",
        "no fs or terminal call to a client that offered none": "held",
    }
    loaded = rows.pop("session/load replays a past session (a new process)")
    assert "no error answered '{not json'" in done.stdout
    if loaded == "held":
        assert done.stdout.splitlines()[-1] == "9 held, 1 failed, 0 not exercised"
    else:  # loaded within the minute the session began
        assert loaded == "FAILED" and "No previous sessions found for this project." in done.stdout
        assert done.stdout.splitlines()[-1] == "8 held, 2 failed, 0 not exercised"
    assert done.returncode == 1


# a 1x1 PNG: its bytes must reach the model's request as the CLI sends them
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_an_image_in_the_prompt_reaches_the_models_request(
    cli: str, cli_env: Any, mock_server: Any, project: Path
) -> None:
    mock_server.script("It is a single pixel.")
    out = acp_client(
        {
            "prompts": [{"text": "what is in this picture?", "images": [{"mimeType": "image/png", "data": PNG}]}],
            "options": {"agent": cli},
        },
        cli_env(cli),
        project,
    )
    assert out["stops"] == ["end_turn"] and out["initialize"]["agentCapabilities"]["promptCapabilities"]["image"]
    text = "".join(u["content"]["text"] for u in out["updates"] if u["sessionUpdate"] == "agent_message_chunk")
    assert "It is a single pixel." in text
    sent = [json.dumps(request.body) for request in mock_server.requests]
    assert any(PNG in body for body in sent), "the image's bytes reached no model request"


@pytest.mark.parametrize("cli", ["claude"])
def test_a_session_is_resumed_after_a_restart_closed_and_its_additional_directory_written(
    cli: str, cli_env: Any, mock_server: Any, project: Path, tmp_path: Path
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    mock_server.script(
        reply("Writing.\n", tool_block("crew:write_file", path=str(extra / "made.txt"), content="made\n")),
        "Wrote it.",
    )
    write_config(project / "crew.yaml", agents={cli: {"provider": cli, "tools_via": "text"}})
    env = cli_env(cli)
    out = acp_client(
        {
            "additionalDirectories": [str(extra)],
            "options": {"agent": cli, "mode": "execute"},
            "prompts": [{"text": "write made.txt in the other folder"}],
        },
        env,
        project,
    )
    assert out["stops"] == ["end_turn"] and (extra / "made.txt").read_text() == "made\n"
    mock_server.script("You wrote made.txt.")
    again = acp_client(
        {"resume": out["sessionId"], "prompts": [{"text": "what did you write?"}], "close": True}, env, project
    )
    assert again["replayed"] == 0 and again["stops"] == ["end_turn"]  # resumed: no replay
    assert "what did you write?" in mock_server.requests[-1].text()
    assert "Wrote it." in mock_server.requests[-1].text()  # the same CLI conversation, resumed
    assert "is not open" in again["afterClose"]


@pytest.mark.parametrize("cli", ["claude"])
def test_acpx_asks_once_for_a_write_and_sees_its_diff_in_the_question(
    cli: str, cli_env: Any, mock_server: Any, project: Path
) -> None:
    """acpx offers its files and asks before it writes one itself: crew never asks it to write, so
    the person is asked once, by crew's permission request, which carries the change."""
    require_sdk()
    write_config(project / "crew.yaml", agents={cli: {"provider": cli, "tools_via": "text", "approval": ["edit_file"]}})
    (project / "greet.py").write_text("print('hi')\n")
    mock_server.script(
        reply(tool_block("crew:edit_file", path="greet.py", old_string="'hi'", new_string="'hello'")), "Edited."
    )
    acpx = REPO / "node_modules" / ".bin" / "acpx"
    options = ["--config-option", f"agent={cli}", "--config-option", "mode=execute"]
    done = subprocess.run(
        [str(acpx), "--agent", " ".join([*CREW, "acp"]), "--approve-all", "--format", "json", "exec", *options, "go"],
        env=cli_env(cli),
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    frames = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    methods = [frame.get("method") for frame in frames]
    assert methods.count("session/request_permission") == 1 and "fs/write_text_file" not in methods
    (asked,) = [f["params"]["toolCall"] for f in frames if f.get("method") == "session/request_permission"]
    assert asked["title"] == "Edit greet.py"
    assert asked["content"] == [
        {"type": "diff", "path": str(project / "greet.py"), "oldText": "print('hi')\n", "newText": "print('hello')\n"}
    ]
    assert (project / "greet.py").read_text() == "print('hello')\n"
