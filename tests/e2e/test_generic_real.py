"""Third-party CLIs that crew drives by configuration alone (a `providers:` entry in crew.yaml, no
code): the real `llm` (PyPI) and Qwen Code (npm), installed at pinned versions, talking to the mock
model server over OpenAI Chat Completions. Each runs a whole crew round trip whose answer needs a
file only crew's read_file can read, and a conversation continued over several messages."""
from __future__ import annotations

import json

import pytest

from crewcli import tool_block
from mockserver import reply

pytestmark = pytest.mark.e2e

LLM_YAML = """\
agents:
  llm: {provider: llm}
providers:
  llm:
    command: [llm, --no-log]
    model: mock
    model_args: [-m, "{model}"]
    system_args: [-s, "{system}"]
"""


@pytest.fixture
def configured(workdir):
    """configured(yaml) → the --config arguments for a crew.yaml in the work directory."""
    def write(text: str) -> list[str]:
        (workdir / "crew.yaml").write_text(text)
        return ["--config", "crew.yaml"]
    return write


def test_llm_answers_from_a_file_only_crew_can_read(crew, configured, mock_server, notes):
    config = configured(LLM_YAML)
    mock_server.script(reply("Let me read it.\n", tool_block("crew:read_file", path="notes.txt")),
                       "The code is 7-4-1.")
    done = crew("llm", "query", *config, "@llm what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The code is 7-4-1.\n"
    first, second = mock_server.requests
    assert first.model == second.model == "mock-model"  # llm's own name for the model crew chose
    assert notes not in first.text() and "crew:read_file" in first.text()  # the catalogue
    assert notes in second.text() and "what does notes.txt say?" in second.text()


def test_llm_keeps_the_conversation_across_chat_messages(crew, configured, mock_server):
    """llm prints no conversation id, so crew replays its own transcript in each new prompt."""
    config = configured(LLM_YAML)
    mock_server.script("Noted: PAPAYA.", "It was PAPAYA.")
    done = crew("llm", "chat", *config, "@llm", input="Remember the word PAPAYA.\nWhich word?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "It was PAPAYA."
    first, second = mock_server.requests
    assert "Noted: PAPAYA." not in first.text()
    talk = second.text()
    assert talk.index("Remember the word PAPAYA.") < talk.index("Noted: PAPAYA.") < talk.rindex("Which word?")


# Qwen Code's tools that change nothing; in query mode crew's recipe leaves it only these (its own
# "default" approval mode drops the writers; --exclude-tools drops those that reach further).
QWEN_READ_ONLY = {"read_file", "glob", "grep_search", "list_directory", "get_goal", "list_agents",
                  "read_mcp_resource", "zoom_image", "cron_list"}
QWEN_WRITERS = {"write_file", "edit", "run_shell_command"}
QWEN_YAML = """\
agents:
  qwen: {provider: qwen}
providers:
  qwen:
    command: [qwen, --output-format, stream-json, --include-partial-messages]
    format: jsonl
    text_key: event.delta.text
    deltas: true
    session_key: session_id
    resume: [--resume, "{session}"]
    model_args: [--model, "{model}"]
    system_args: [--append-system-prompt, "{system}"]
    options:
      query: [--approval-mode, default, --exclude-tools, "agent,tool_call,tool_search,skill,update_goal,\
cron_create,cron_delete,loop_wakeup,enter_worktree,exit_worktree,record_artifact,send_message,\
task_stop,web_fetch,report_findings,notebook_edit"]
      execute: [--approval-mode, auto-edit]
"""


def test_qwen_answers_from_a_file_only_crew_can_read(crew, configured, mock_server, notes):
    config = configured(QWEN_YAML)
    mock_server.script(reply("Let me read it.\n```js", "on\n", '{"type": "tool_use", "name": "crew:read_file", '
                             '"input": {"path": "notes.txt"}}\n```\n'), "The code is 7-4-1.")
    done = crew("qwen", "query", "--json", *config, "@qwen what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["answer"] == "The code is 7-4-1."
    assert [(call["name"], call["success"]) for call in result["tool_calls"]] == [("crew:read_file", True)]
    first, second = mock_server.requests
    assert notes not in first.text() and notes in second.text()
    assert "what does notes.txt say?" in second.text()


def test_qwen_continues_a_chat_by_its_own_resume(crew, configured, mock_server):
    config = configured(QWEN_YAML)
    mock_server.script("Noted: PAPAYA.", "It was PAPAYA.")
    done = crew("qwen", "chat", *config, "@qwen", input="Remember the word PAPAYA.\nWhich word?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "It was PAPAYA."
    talk = mock_server.requests[1].messages()
    assert ("assistant", "Noted: PAPAYA.") in talk  # qwen's own history, not crew's replayed text
    assert talk[-1][0] == "user" and talk[-1][1].rstrip().endswith("Which word?")
    assert "[crew conversation so far" not in mock_server.requests[1].text()


@pytest.mark.parametrize("mode", ["query", "execute"])
def test_qwen_offers_its_writing_tools_only_in_execute_mode(mode, crew, configured, mock_server):
    config = configured(QWEN_YAML)
    mock_server.script("ok")
    done = crew("qwen", mode, *config, "@qwen look around")
    assert done.returncode == 0, done.stderr
    offered = set(mock_server.requests[0].tool_names())
    if mode == "query":
        assert "read_file" in offered and offered <= QWEN_READ_ONLY
    else:
        assert offered >= QWEN_WRITERS - {"run_shell_command"}  # auto-edit: files yes, shell asks
