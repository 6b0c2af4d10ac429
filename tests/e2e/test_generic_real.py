"""Third-party CLIs that crew drives by configuration alone: the real `llm` (PyPI), Qwen Code and
opencode (npm), installed at pinned versions, talking to the mock model server over OpenAI Chat Completions,
each set up as a person would: `crew init --agent NAME` writes its recipe into crew.yaml, `crew
config trust` accepts it. Each runs a whole crew round trip whose answer needs a file only crew's
read_file can read, and a chat continued over two messages."""

from __future__ import annotations

import pytest

from clienv import cli_env
from crewcli import error_line, only_result, processes_in, run_crew, tool_block, write_config
from mockserver import reply

pytestmark = pytest.mark.e2e

RECIPES = ("llm", "qwen", "opencode")
# The agentic CLIs' own tools that change nothing: in query mode their recipes leave them only these.
READ_ONLY = {
    "qwen": {
        "read_file",
        "glob",
        "grep_search",
        "list_directory",
        "get_goal",
        "list_agents",
        "read_mcp_resource",
        "zoom_image",
        "cron_list",
    },
    "opencode": {"glob", "grep", "read"},
}
# Their tools that write (qwen's auto-edit: files yes; a shell command would ask, so it is left out).
WRITERS = {"qwen": {"write_file", "edit"}, "opencode": {"bash", "edit", "write"}}


def set_up(crew, name: str) -> str:
    """Add CLI `name` to a new crew.yaml by its recipe, and trust the file."""
    for args in (["init", "--agent", name], ["config", "trust"]):
        done = crew(name, *args)
        assert done.returncode == 0, done.stderr
    return name


@pytest.fixture(params=RECIPES)
def recipe(request, crew):
    """Each third-party CLI in turn, set up by its recipe."""
    return set_up(crew, request.param)


def test_an_answer_that_needs_a_file_only_a_crew_tool_can_read(recipe, crew, mock_server, notes):
    # The block is split inside its opening fence: streamed text deltas must join up again.
    mock_server.script(
        reply("Let me read it.\n```js", "on\n" + tool_block("crew:read_file", path="notes.txt")[8:]),
        "The code is 7-4-1.",
    )
    done = crew(recipe, "query", "--json", f"@{recipe} what does notes.txt say?")
    assert done.returncode == 0, done.stderr
    result = only_result(done.stdout)
    assert result["answer"] == "The code is 7-4-1."
    assert [(call["name"], call["success"]) for call in result["tool_calls"]] == [("crew:read_file", True)]
    first, second = mock_server.requests
    assert first.model == second.model == "mock-model"
    assert notes not in first.text() and "crew:read_file" in first.text()  # the catalogue
    assert notes in second.text() and "what does notes.txt say?" in second.text()


def test_a_chat_keeps_the_conversation(recipe, crew, mock_server):
    """qwen and opencode resume their own sessions; llm prints no conversation id, so crew replays
    the transcript."""
    mock_server.script("Noted: PAPAYA.", "It was PAPAYA.")
    done = crew(recipe, "chat", f"@{recipe}", input="Remember the word PAPAYA.\nWhich word?\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "It was PAPAYA."
    first, second = mock_server.requests
    assert "Noted: PAPAYA." not in first.text()
    talk = second.text()
    assert talk.index("Remember the word PAPAYA.") < talk.index("Noted: PAPAYA.") < talk.rindex("Which word?")
    replayed = "[crew conversation so far" in talk
    assert replayed == (recipe == "llm")
    if recipe != "llm":
        assert ("assistant", "Noted: PAPAYA.") in second.messages()  # its own history


# A wrong format key in each recipe, and how the first line the CLI writes then starts.
MISREAD = {
    "llm": ("\n    format: text", "\n    format: jsonl\n    text_key: text", "Hello from the mock"),
    "qwen": ("\n    text_key: event.delta.text", "\n    text_key: message.text", '{"type":"system","subtype":"init"'),
    "opencode": ("\n    text_key: part.text", "\n    text_key: text", '{"type":"step_start"'),
}


def test_output_crew_cannot_read_is_an_error_quoting_it_not_an_empty_answer(recipe, crew, workdir, mock_server):
    old, new, sample = MISREAD[recipe]
    config = workdir / "crew.yaml"
    config.write_text(config.read_text().replace(old, new))
    assert crew(recipe, "config", "trust").returncode == 0
    mock_server.script("Hello from the mock")
    done = crew(recipe, "query", f"@{recipe} say hello")
    assert done.returncode != 0 and done.stdout == ""
    key = new.split("text_key: ")[1]
    assert (
        f"provider '{recipe}': no line of its output has text at text_key '{key}' (format: jsonl); "
        f"a line it wrote: {sample}" in error_line(done.stderr)
    )


@pytest.mark.parametrize("mode", ["query", "execute"])
@pytest.mark.parametrize("cli", ["qwen", "opencode"])
def test_the_clis_own_writing_tools_are_offered_only_in_execute_mode(cli, mode, crew, mock_server):
    set_up(crew, cli)
    mock_server.script("ok")
    done = crew(cli, mode, f"@{cli} look around")
    assert done.returncode == 0, done.stderr
    offered = set(mock_server.requests[0].tool_names())
    if mode == "query":
        assert offered and offered <= READ_ONLY[cli]
    else:
        assert WRITERS[cli] <= offered


# A person's own provider entries for two of them, written before they knew what the sandbox lets a
# CLI write: no state_dirs, and llm logging to its database (Qwen Code's like its recipe's).
OWN_ENTRY = {
    "llm": {"command": ["llm", "prompt", "--no-log"]},
    "qwen": {
        "command": ["qwen", "--output-format", "stream-json", "--include-partial-messages"],
        "format": "jsonl",
        "text_key": "event.delta.text",
        "deltas": True,
    },
}


@pytest.mark.parametrize("cli", OWN_ENTRY)
def test_a_configured_cli_that_cannot_write_its_state_in_the_sandbox_is_told_the_fix(
    cli, workdir, mock_server, tmp_path
):
    """On a machine where the CLI never ran (a fresh HOME), it must make its state first (where it
    ran, llm finds its database made, and with --no-log writes nothing: it answers)."""
    env = cli_env(cli, mock_server.url, tmp_path / "fresh-home")
    write_config(workdir / "crew.yaml", providers={cli: OWN_ENTRY[cli]}, agents={cli: {"provider": cli}})
    assert run_crew(["config", "trust"], env=env, cwd=workdir).returncode == 0
    mock_server.script("Hello.")
    done = run_crew(["query", "--sandbox", "required", f"@{cli} hello"], env=env, cwd=workdir)
    assert processes_in(tmp_path) == []
    assert done.returncode != 0
    message = error_line(done.stderr)
    assert f"{cli} could not write its own state inside crew's sandbox (" in message
    assert "state_dirs" in message and "--sandbox off" in message
    if cli == "qwen":  # it names the place; llm's sqlite does not
        assert "it tried to write /" in message and "/.qwen" in message
    mock_server.problems.clear()  # qwen may never reach the model
