"""Third-party CLIs that crew drives by configuration alone (a `providers:` entry in crew.yaml, no
code): the real `llm` (PyPI) and Qwen Code (npm), installed at pinned versions, talking to the mock
model server over OpenAI Chat Completions. Each runs a whole crew round trip whose answer needs a
file only crew's read_file can read, and a conversation continued over several messages."""
from __future__ import annotations

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
