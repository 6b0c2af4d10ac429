"""What a person sees at a terminal: `crew` typed into a shell in tmux (a real pseudo-terminal,
120×40, on a private tmux server), the real claude CLI behind it talking to the mock model server,
and the screen read back with capture-pane."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from crewbridge.terminal.render import STATUS_IDLE
from crewcli import processes_in
from mockserver import reply

pytestmark = pytest.mark.e2e

WAIT = 60.0  # seconds a screen may take to show what a test waits for (a bound, not a measurement)
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def block(path: str) -> str:
    return '```json\n{"type": "tool_use", "name": "crew:read_file", "input": {"path": "' + path + '"}}\n```\n'


class Screen:
    """A shell in a tmux session of its own server: type into it, read what it shows."""

    def __init__(self, env: dict[str, str], cwd: Path, rcfile: Path) -> None:
        self.socket = f"crew-test-{uuid.uuid4().hex[:12]}"
        self.tmux(
            "new-session", "-d", "-x", "120", "-y", "40", "-c", str(cwd), f"bash --noprofile --rcfile {rcfile}", env=env
        )
        self.shell = self._pane()

    def _pane(self) -> int:
        """The shell's pid, once the server answers for a pane that has one: on a busy machine the
        server and the pane's process come up well after new-session returns."""
        deadline = time.monotonic() + WAIT
        while True:
            asked = self.run("display-message", "-p", "#{pane_pid}")
            if asked.returncode == 0 and asked.stdout.strip().isdigit():
                return int(asked.stdout)
            if time.monotonic() > deadline:
                pytest.fail(f"tmux made no pane in {WAIT:g}s: {asked.stderr.strip()}", pytrace=False)
            time.sleep(0.1)

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """`tmux ARGS` on this session's server, with no stdin (a test's own never reaches it)."""
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", os.devnull, *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=WAIT,
        )

    def tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = self.run(*args, env=env)
        assert done.returncode == 0, f"tmux {' '.join(args)}: {done.stderr.strip()}"
        return done.stdout

    def type(self, text: str) -> None:
        """Type `text` and press Enter."""
        self.tmux("send-keys", "-l", text)
        self.tmux("send-keys", "Enter")

    def press(self, key: str) -> None:
        self.tmux("send-keys", key)

    def text(self, colors: bool = False) -> str:
        """The screen and its scrollback, wrapped lines joined (with colour codes, if asked)."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-500", *(["-e"] if colors else []))

    def wait_for(self, shows: Callable[[str], bool] | str) -> str:
        """The screen, once it shows `shows` (a text, or a test on the screen's text)."""
        test = shows if callable(shows) else (lambda screen: shows in screen)
        deadline = time.monotonic() + WAIT
        while not test(screen := self.text()):
            if time.monotonic() > deadline:
                pytest.fail(f"the screen never showed {shows!r}; it shows:\n{screen}", pytrace=False)
            time.sleep(0.05)
        return screen

    def close(self) -> None:
        """End everything started in the session (each process group), then the tmux server."""
        for pgid in sorted({os.getpgid(pid) for pid in _descendants(self.shell)} - {os.getpgrp()}):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.run("kill-server")


def _descendants(root: int) -> list[int]:
    """The processes below `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@pytest.fixture
def screen(cli_env, workdir, tmp_path):
    """A shell at a terminal in `workdir`, where `crew` and the real claude (pointed at the mock) run.
    Colours on (NO_COLOR unset), UTF-8, prompt `$ `."""
    (workdir / "notes.txt").write_text("the secret is 42\n")
    env = {key: value for key, value in cli_env("claude").items() if key != "NO_COLOR"}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", LANG="C.UTF-8", LC_ALL="C.UTF-8")
    rcfile = tmp_path / "bashrc"
    rcfile.write_text("PS1='$ '\nHISTFILE=/dev/null\n")
    shown = Screen(env, workdir, rcfile)
    shown.state = Path(env["XDG_STATE_HOME"]) / "crewbridge"  # type: ignore[attr-defined]
    try:
        shown.wait_for("$")
        yield shown
    finally:
        shown.close()


def lines_of(screen: str) -> list[str]:
    return [line.rstrip() for line in screen.splitlines()]


def at_prompt(screen: str) -> bool:
    """The chat waits for a message: its last line is the prompt."""
    shown = [line for line in lines_of(screen) if line]
    return bool(shown) and shown[-1] == ">"


def test_a_query_streams_the_answer_and_shows_each_tool_call_as_one_line(screen, mock_server):
    mock_server.script(
        reply("Let me read it.\n", block("notes.txt"), "The file says 7.", delay=0.2),
        reply("It says ", "the secret is 42.", delay=0.2),
    )
    screen.type('crew query "@claude what does notes.txt say?"; echo "[exit $?]"')
    shown = lines_of(screen.wait_for("[exit 0]"))
    start = shown.index('$ crew query "@claude what does notes.txt say?"; echo "[exit $?]"')
    assert shown[start + 1 : start + 6] == [
        "Let me read it.",
        "→ crew:read_file notes.txt",
        "  ✓ 1 line",
        "It says the secret is 42.",
        "[exit 0]",
    ]
    text = "\n".join(shown)
    assert "tool_use" not in text and "```" not in text and "says 7" not in text
    assert "\x1b[36m→ crew:read_file notes.txt" in screen.text(colors=True)  # colours on a terminal


def test_with_stdout_piped_the_answer_comes_once_and_the_tool_lines_stay_on_the_terminal(screen, mock_server):
    mock_server.script(reply("Let me read it.\n", block("notes.txt")), "It says 42.")
    screen.type('crew query "@claude what does notes.txt say?" | cat; echo "[exit $?]"')
    shown = lines_of(screen.wait_for("[exit 0]"))
    start = next(i for i, line in enumerate(shown) if line.startswith("$ crew query"))
    assert shown[start + 1 : start + 5] == ["→ crew:read_file notes.txt", "  ✓ 1 line", "It says 42.", "[exit 0]"]


def test_a_status_line_shows_while_the_model_is_quiet_and_is_gone_afterwards(screen, mock_server):
    mock_server.script(reply("Line one.\n", "Line two.\n", delay=2.5))
    screen.type('crew query "@claude say two lines"; echo "[exit $?]"')
    waiting = screen.wait_for(lambda s: re.search(f"[{SPINNER}] @claude writing \\d+s", s) is not None)
    assert "Line one." in waiting and "Line two." not in waiting
    shown = lines_of(screen.wait_for("[exit 0]"))
    start = next(i for i, line in enumerate(shown) if line.startswith("$ crew query"))
    assert shown[start + 1 : start + 4] == ["Line one.", "Line two.", "[exit 0]"]  # the status line left nothing
    assert not any(re.search(f"[{SPINNER}]|@claude writing", line) for line in shown)


def test_the_status_line_shows_the_runs_tokens_so_far(screen, mock_server):
    mock_server.script(
        reply(block("notes.txt"), input_tokens=1000, output_tokens=234), reply("Line one.\n", "Line two.\n", delay=2.5)
    )
    screen.type('crew query "@claude what does notes.txt say?"; echo "[exit $?]"')
    screen.wait_for(lambda s: re.search(f"[{SPINNER}] @claude writing \\(turn 2\\) \\d+s, 1,234 tokens", s) is not None)
    shown = lines_of(screen.wait_for("[exit 0]"))
    assert not any("tokens" in line for line in shown)  # the status line left nothing


def test_crew_chat_keeps_the_context_across_two_turns(screen, mock_server):
    mock_server.script(reply("Reading.\n", block("notes.txt")), "It says 42.", "You asked what notes.txt says.")
    screen.type('crew chat @claude; echo "[exit $?]"')
    screen.wait_for(at_prompt)
    screen.type("what does notes.txt say?")
    screen.wait_for(lambda s: "It says 42." in s and at_prompt(s))
    screen.type("what did I ask first?")
    screen.wait_for(lambda s: "You asked what notes.txt says." in s and at_prompt(s))
    screen.press("C-d")
    shown = lines_of(screen.wait_for("[exit 0]"))
    start = next(i for i, line in enumerate(shown) if line.startswith("crew chat with @claude"))
    assert shown[start + 1 : start + 9] == [
        "> what does notes.txt say?",
        "Reading.",
        "→ crew:read_file notes.txt",
        "  ✓ 1 line",
        "It says 42.",
        "> what did I ask first?",
        "You asked what notes.txt says.",
        ">",
    ]
    last = mock_server.requests[-1]  # the second message went with the whole conversation before it
    assert "what does notes.txt say?" in last.text() and "the secret is 42" in last.text()
    assert last.messages()[-1] == ("user", "what did I ask first?")
    history = screen.state / "chat_history"
    assert history.read_text().splitlines()[-2:] == ["what does notes.txt say?", "what did I ask first?"]
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_crew_chat_shows_its_prompt_at_once_keeps_what_is_typed_and_leaves_no_spinner(screen, mock_server):
    mock_server.script("Hello.")
    screen.type('crew chat @claude; echo "[exit $?]"')
    screen.wait_for(at_prompt)  # while claude still boots
    # A wait, not a measurement: long past the status line's idle time, so one would be drawn by now.
    time.sleep(STATUS_IDLE * 5)
    screen.tmux("send-keys", "-l", "hi there")
    screen.wait_for(lambda s: [line for line in lines_of(s) if line][-1] == "> hi there")
    screen.press("Enter")
    screen.wait_for(lambda s: "Hello." in s and at_prompt(s))
    screen.press("C-d")
    shown = lines_of(screen.wait_for("[exit 0]"))
    start = next(i for i, line in enumerate(shown) if line.startswith("crew chat with @claude"))
    assert shown[start + 1 : start + 5] == ["> hi there", "Hello.", ">", "[exit 0]"]
    assert not any(re.search(f"[{SPINNER}]|@claude (starting|waiting|writing)", line) for line in shown)


def test_ctrl_c_stops_a_reply_and_the_chat_goes_on(screen, mock_server):
    mock_server.script(reply("Counting: one.\n", "two.\n", "three.\n", "four.\n", delay=1.5), "Still here.")
    screen.type('crew chat @claude; echo "[exit $?]"')
    screen.wait_for(at_prompt)
    screen.type("count slowly")
    screen.wait_for("Counting: one.")
    screen.press("C-c")
    screen.wait_for(lambda s: "(reply stopped)" in s and at_prompt(s))
    screen.type("are you there?")
    screen.wait_for(lambda s: "Still here." in s and at_prompt(s))
    screen.type("/exit")
    shown = "\n".join(lines_of(screen.wait_for("[exit 0]")))
    assert "four." not in shown
    role, text = mock_server.requests[-1].messages()[-1]
    assert role == "user" and text.rstrip().endswith("are you there?")
    assert "count slowly" in mock_server.requests[-1].text()  # the same conversation went on


def test_ctrl_c_withdraws_an_approval_question_and_the_chat_goes_on(screen, workdir, mock_server):
    (workdir / "crew.yaml").write_text(json.dumps({"agents": {"claude": {"approval": ["read_file"]}}}))
    mock_server.script(reply("Reading.\n", block("notes.txt")), "Still here.")
    screen.type('crew chat @claude; echo "[exit $?]"')
    screen.wait_for(at_prompt)
    screen.type("what does notes.txt say?")
    screen.wait_for("Allow? [y/N/a=always]")
    screen.press("C-c")
    screen.wait_for(lambda s: "(reply stopped)" in s and at_prompt(s))
    screen.type("are you there?")  # goes to the chat, not to the withdrawn question
    screen.wait_for(lambda s: "Still here." in s and at_prompt(s))
    screen.type("/exit")
    shown = lines_of(screen.wait_for("[exit 0]"))
    question = next(i for i, line in enumerate(shown) if line.startswith("Allow?"))
    assert shown[question].startswith("Allow? [y/N/a=always] ") and "(withdrawn)" in "\n".join(shown[question:]), shown
    assert "> are you there?" in shown and "the secret is 42" not in mock_server.requests[-1].text()


# --- an approval question nobody answers: --timeout still holds -------------------------------------


def on_a_terminal_nobody_answers(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str]:
    """Run `crew ARGS` to its end on a pseudo-terminal of its own (stdin, stdout and stderr) that
    nobody types into: → (its exit code, what it showed). Its process group must be gone then."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: crew, leading a session and process group of its own
        try:
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "crewbridge", *args], env)
        finally:
            os._exit(127)
    shown, status = b"", None
    guard = time.monotonic() + WAIT  # a hang guard, not a measurement
    try:
        while status is None and time.monotonic() < guard:
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    shown += os.read(fd, 65536)
                except OSError:  # EIO: every holder of the terminal's other side is gone
                    pass
            done, code = os.waitpid(pid, os.WNOHANG)
            status = os.waitstatus_to_exitcode(code) if done else None
    finally:
        if status is None:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)
    assert status is not None, f"crew was still running after {WAIT:g}s; it showed:\n{shown.decode(errors='replace')}"
    assert _group(pid) == [], "crew's process group outlived it"
    return status, shown.decode("utf-8", "replace")


def _group(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    members = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] not in "ZX" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


@pytest.mark.parametrize("agents", [["claude"], ["claude", "second"]], ids=["one agent", "two agents at once"])
def test_an_approval_question_nobody_answers_ends_with_the_runs_timeout(
    agents, cli_env, workdir, tmp_path, mock_server
):
    (workdir / "notes.txt").write_text("the secret is 42\n")
    (workdir / "crew.yaml").write_text(
        json.dumps(
            {
                "agents": {
                    "claude": {"approval": ["read_file"]},
                    "second": {"provider": "claude", "approval": ["read_file"]},
                }
            }
        )
    )
    mock_server.script(*[reply("Let me read it.\n", block("notes.txt")) for _ in agents])
    mentions = " ".join(f"@{agent}" for agent in agents)
    # 10 s: under load the CLIs take seconds to start, and the question must have been asked by then
    code, shown = on_a_terminal_nobody_answers(
        ["query", "--timeout", "10", f"{mentions} what does notes.txt say?"], cli_env("claude"), workdir
    )
    assert code == 124, shown
    assert "wants to run read_file" in shown and "(no answer before the run's time was up)" in shown
    assert shown.count("did not finish in 10s") == len(agents)
    assert processes_in(tmp_path) == []  # the CLIs ended too
