"""`crew acp` driven by real ACP clients — the official TypeScript SDK's ClientSideConnection
(tests/e2e/acp_client.mjs) and acpx, both pinned in package.json — over the real claude, gemini and
codex against the mock model: streamed text, a read, a write shown as a diff, an approval allowed
and one rejected, cancel, load after a restart; and `crew acp check` on crew acp and on gemini --acp."""

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
from mockserver import reply

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
    assert "usage_update" in kinds(out["updates"])
    assert processes_in(tmp_path) == []

    mock_server.script("You saved 7-4-1 to code.txt.")  # crew restarted: the session is loaded
    again = acp_client({"load": out["sessionId"], "prompts": [{"text": "what did you save?"}]}, env, project)
    replayed = again["updates"][: again["replayed"]]
    assert kinds(replayed)[0] == "user_message_chunk"
    assert replayed[0]["content"]["text"] == "save the launch code to code.txt"
    assert "tool_call_update" in kinds(replayed) and again["stops"] == ["end_turn"]
    last = mock_server.requests[-1].text()
    assert "what did you save?" in last and "Saved the code." in last  # the same CLI conversation, resumed


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
    gemini = require_cli("gemini")
    mock_server.script(*["Hello."] * 6)
    done = subprocess.run(
        [*CREW, "acp", "check", "--timeout", "90", "--", gemini, "--acp", "-m", "gemini-2.5-flash"],
        env=cli_env(cli),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    table = done.stdout
    assert "initialize: version negotiation" in table and "session/prompt streams updates" in table
    summary = table.splitlines()[-1]
    assert summary.endswith("not exercised") and " held, " in summary
    assert done.returncode == (0 if " 0 failed" in summary else 1)
    print(table, file=sys.stderr)
