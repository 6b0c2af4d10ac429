"""Faults of the wrapped CLI process itself, driven through the `crew` command with small fake CLIs:
not installed, failing, hanging (with a grandchild), interrupted by Ctrl-C, flooding its output; and
faults inside the loop: a tool that hangs, a model that never stops calling tools."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crewbridge.base.jsonio import MAX_DEPTH
from crewcli import (
    CREW,
    FakeModel,
    crew_env,
    end_group,
    error_line,
    executable,
    processes_in,
    run_crew,
    start_crew,
    tool_block,
    write_config,
)
from gitrepo import make_repo

INSTALL = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "gemini": "npm install -g @google/gemini-cli",
    "codex": "npm install -g @openai/codex",
}

# A CLI that hangs: it starts a grandchild, writes both pids to a file in $FAKE_PIDS, then waits forever.
# (Inside crew's sandbox the pids are its PID namespace's: the file's name holds the CLI's name too.)
HANGS = """\
import os, subprocess, sys, time
grandchild = subprocess.Popen(["sleep", "600"])
path = os.path.join(os.environ["FAKE_PIDS"], f"{os.path.basename(sys.argv[0])}-{os.getpid()}")
with open(path + ".tmp", "w") as out:
    out.write(f"{os.getpid()} {grandchild.pid}")
os.rename(path + ".tmp", path)
time.sleep(600)
"""


@pytest.fixture
def env(tmp_path):
    """A clean environment whose PATH starts with tmp_path/bin, where fake CLIs go. They write their
    pids in tmp_path/claude/sessions, a folder they may write inside crew's sandbox: the state folder
    the generic ones declare (fake_agent), and a data folder in the claude stand-in's CLAUDE_CONFIG_DIR."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "claude" / "sessions").mkdir(parents=True)
    return crew_env(
        tmp_path / "home",
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        FAKE_PIDS=str(tmp_path / "claude" / "sessions"),
        CLAUDE_CONFIG_DIR=str(tmp_path / "claude"),
    )


@pytest.fixture
def model(tmp_path, env):
    """A scripted fake model CLI, agent `fake`, and the crew.yaml that configures it."""
    fake = FakeModel(tmp_path / "bin")
    fake.config = write_config(
        tmp_path / "crew.yaml", providers={"fake": fake.provider()}, agents={"fake": {"provider": "fake"}}
    )
    return fake


def fake_agent(tmp_path, name, source, *args):
    """A fake CLI running `source` (with `args`), configured as agent `name`; → the crew.yaml."""
    path = executable(tmp_path / "bin" / name, source)
    return write_config(
        tmp_path / "crew.yaml",
        providers={name: {"command": [str(path), *args], "state_dirs": ["$FAKE_PIDS"]}},
        agents={name: {"provider": name}},
    )


def hanging_clis(tmp_path):
    """A hanging CLI as agent `hang` (generic provider), and one as `claude` on PATH; → the crew.yaml."""
    executable(tmp_path / "bin" / "claude", HANGS)
    return fake_agent(tmp_path, "hang", HANGS)


def sleeper(tmp_path) -> str:
    """A shell command that writes its pid where `written_pids` finds it, then sleeps for 10 minutes."""
    return f"cd {tmp_path / 'claude' / 'sessions'} && echo $$ > new && mv new 1 && exec sleep 600"


def written_pids(directory: Path) -> list[int]:
    return [int(pid) for path in directory.glob("*[0-9]") for pid in path.read_text().split()]


def wait_for_pids(directory: Path, proc, writers: int) -> list[int]:
    """The pids `writers` processes wrote, once they have; fails if crew ended first."""
    while len(list(directory.glob("*[0-9]"))) < writers:
        assert proc.poll() is None, f"crew ended before its CLIs started: {proc.communicate()}"
        time.sleep(0.05)
    return written_pids(directory)


# -- the CLI is not there ----------------------------------------------------------------------------


@pytest.mark.parametrize("cli", ["claude", "gemini", "codex"])
@pytest.mark.slow
def test_a_cli_that_is_not_installed_is_named_with_how_to_install_it(cli, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_crew(["query", f"@{cli} hello"], env=crew_env(tmp_path / "home", PATH=str(empty)), cwd=tmp_path)
    assert done.returncode == 127
    message = error_line(done.stderr)
    assert f"'{cli}' not found" in message and INSTALL[cli] in message


@pytest.mark.slow
def test_a_configured_cli_that_is_missing_names_its_command_and_its_install_hint(tmp_path, env):
    config = write_config(
        tmp_path / "crew.yaml",
        providers={
            "aider": {"command": ["aider-not-here", "--message", "{prompt}"], "install_hint": "pipx install aider-chat"}
        },
        agents={"aider": {"provider": "aider"}},
    )
    done = run_crew(["query", "--config", str(config), "@aider hello"], env=env, cwd=tmp_path)
    assert done.returncode == 127
    message = error_line(done.stderr)
    assert "'aider-not-here' not found" in message and "pipx install aider-chat" in message


# -- the CLI fails -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_cli_that_exits_non_zero_shows_its_own_last_words(tmp_path, env):
    config = fake_agent(
        tmp_path,
        "broken",
        "import sys\n"
        "print('starting', file=sys.stderr)\n"
        "print('broken: quota exhausted for key …42; retry tomorrow', file=sys.stderr)\n"
        "sys.exit(2)\n",
    )
    done = run_crew(["query", "--config", str(config), "@broken hello"], env=env, cwd=tmp_path)
    assert done.returncode == 3
    message = error_line(done.stderr)
    assert "@broken" in message and "status 2" in message
    assert "broken: quota exhausted for key …42; retry tomorrow" in message


@pytest.mark.slow
def test_a_cli_killed_by_a_signal_is_a_failure_not_an_answer(tmp_path, env):
    config = fake_agent(
        tmp_path, "dies", "import os, signal\nprint('half an ans', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = run_crew(["query", "--config", str(config), "@dies hello"], env=env, cwd=tmp_path)
    assert done.returncode == 3
    assert "@dies" in error_line(done.stderr)
    assert "half an ans" not in done.stdout


# -- the CLI hangs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["hang", "claude"])
@pytest.mark.slow
def test_timeout_ends_the_clis_whole_process_group(agent, tmp_path, env):
    config = hanging_clis(tmp_path)
    done = run_crew(["query", "--config", str(config), "--timeout", "1", f"@{agent} hello"], env=env, cwd=tmp_path)
    assert done.returncode == 124
    assert "--timeout" in error_line(done.stderr)
    pids = written_pids(tmp_path / "claude" / "sessions")
    assert len(pids) == 2 and processes_in(tmp_path) == []  # the CLI and its grandchild were written, and ended


# -- Ctrl-C ------------------------------------------------------------------------------------------


def interrupt(args, tmp_path, env, writers=1, sig=signal.SIGINT, until=lambda: True, cwd=None):
    """Start crew with `args` (in `cwd`, else tmp_path), Ctrl-C it (or send `sig`) once its CLIs (or
    tool) have written their pids and `until()` holds; → (crew's exit code, its stderr, the pids written)."""
    proc = start_crew(args, env=env, cwd=cwd or tmp_path)
    try:
        pids = wait_for_pids(tmp_path / "claude" / "sessions", proc, writers)
        while not until():
            assert proc.poll() is None, f"crew ended first: {proc.communicate()}"
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        end_group(proc)
    return proc.returncode, err, pids


@pytest.mark.parametrize("agents", [["hang"], ["claude"], ["hang", "claude"]], ids=["generic", "claude", "both"])
@pytest.mark.slow
def test_ctrl_c_ends_every_cli_closes_the_transcript_and_exits_130(agents, tmp_path, env):
    config = hanging_clis(tmp_path)
    mentions = " ".join(f"@{agent}" for agent in agents)
    runs = tmp_path / "home" / ".local" / "state" / "crewbridge" / "runs"
    # the Ctrl-C waits for the run itself, once its transcript holds its first event
    code, err, pids = interrupt(
        ["query", "--config", str(config), f"{mentions} hello"],
        tmp_path,
        env,
        writers=len(agents),
        until=lambda: any(p.stat().st_size for p in runs.glob("*.jsonl")),
    )
    assert code == 130
    assert error_line(err) == "crew: interrupted"
    assert len(pids) and processes_in(tmp_path) == []
    [transcript] = runs.glob("*.jsonl")
    last = json.loads(transcript.read_text().splitlines()[-1])
    assert last["kind"] == "end", transcript.read_text()[-3000:]
    assert (last["kind"], last["status"]) == ("end", "cancelled")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.slow
def test_sigterm_or_sighup_stop_crew_as_ctrl_c_does(sig, tmp_path, env):
    config = hanging_clis(tmp_path)
    code, err, pids = interrupt(["query", "--config", str(config), "@hang hello"], tmp_path, env, sig=sig)
    assert code == 128 + sig
    assert error_line(err) == f"crew: stopped by {sig.name}"
    assert len(pids) and processes_in(tmp_path) == []


@pytest.mark.slow
def test_ctrl_c_while_a_tool_runs_ends_the_tools_command_too(model, tmp_path, env):
    model.script(tool_block("crew:run_command", command=sleeper(tmp_path)), "never asked")
    code, _, pids = interrupt(["execute", "--config", str(model.config), "@fake run it"], tmp_path, env)
    assert code == 130
    assert len(pids) and processes_in(tmp_path) == []


def test_ctrl_c_in_a_worktree_run_says_where_the_work_stays_and_never_passes_a_killed_command(model, tmp_path, env):
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    block = tool_block("crew:write_file", path="b.txt", content="b\n")
    # One reply, given to each agent's every turn: the two agents ask the fake model at once, and
    # which of them got a scripted reply's first place was a race (both could get a later one).
    model.script(block + tool_block("crew:run_command", command=sleeper(tmp_path)))
    # --sandbox off: the command writes its pid outside the worktree, where the test reads it
    args = ["execute", "--config", str(model.config), "--worktree", "--sandbox", "off", "@fake @fake write b"]
    code, err, pids = interrupt(args, tmp_path, env, cwd=repo)
    assert code == 130 and len(pids) and processes_in(tmp_path) == []
    [run] = {line.split()[0] for line in run_crew(["worktrees"], env=env, cwd=repo).stdout.splitlines()[1:]}
    assert (
        f"\ncrew: the run stopped; its worktrees stay, with what each agent changed so far: `crew worktrees` lists "
        f"them, `crew apply {run} AGENT` takes one agent's changes, `crew worktrees clean {run}` removes them\n"
    ) in err
    assert err.endswith("\ncrew: interrupted\n")
    assert "exit -9" not in err and "✓ exit" not in err  # the command crew ended did not pass


@pytest.mark.slow
def test_ctrl_c_inside_code_python_generates_still_exits_130(tmp_path, env):
    """Python runs the code it generates for a dataclass or namedtuple with exec() on a string. A
    KeyboardInterrupt raised inside one marks the interpreter, run with -m, to kill itself with
    SIGINT (-2) when it exits, however crew handled the interrupt. The agents' CLIs start before
    the tools are built, so a Ctrl-C can land there."""
    (tmp_path / "interrupted.py").write_text(
        "from crewbridge import cli\nfrom crewbridge.bridge import Bridge\n"
        "Bridge.run = lambda *args, **options: exec('raise KeyboardInterrupt')\n"
        "cli.main()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "interrupted", "query", "@claude hello"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 130
    assert error_line(proc.stderr) == "crew: interrupted"


@pytest.mark.slow
def test_arguments_click_refuses_start_no_cli(tmp_path, env):
    waiter = executable(
        tmp_path / "bin" / "waiter",
        f"import os, sys\nopen({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\nsys.stdin.read()\n",
    )
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"waiter": {"command": [str(waiter)]}},
        agents={"waiter": {"provider": "waiter"}},
    )
    done = run_crew(["query", "--config", str(config), "--timeout", "soon", "@waiter hello"], env=env, cwd=tmp_path)
    assert done.returncode == 2 and "'soon' is not a valid float" in done.stderr
    assert not (tmp_path / "pid").exists()  # nothing starts before the arguments and configuration are read


@pytest.mark.slow
def test_no_secret_from_crew_yaml_is_on_disk_after_runs(model, tmp_path, env):
    secret = "tok-7f3a9c2e1b5d"
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"fake": {**model.provider(), "env": {"FAKE_SERVICE_TOKEN": secret}}},
        agents={"fake": {"provider": "fake"}},
    )
    model.script(tool_block("crew:read_file", path="crew.yaml"), "done")
    for _ in range(3):
        done = run_crew(["query", "--config", str(config), "@fake what is configured?"], env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    # everything crew could have written (the fake model's own log of its prompts aside: a CLI's
    # history of what it was sent, as claude's sessions, is the CLI's, not crew's)
    written = [
        path
        for path in tmp_path.rglob("*")
        if path.is_file() and path != config and not path.is_relative_to(tmp_path / "bin")
    ]
    assert any("crewbridge" in path.parts for path in written)  # the runs were recorded
    assert [path for path in written if secret.encode() in path.read_bytes()] == []


def interrupted_while_loading(tmp_path: Path, env: dict[str, str], *args: str, views: Path | None = None):
    """`crew query ARGS…` with a Ctrl-C landing while the `crew` entry point imports click's CLI
    (crewbridge.terminal.early may have started a CLI by then). With `views`, the sandbox makes its views of
    state folders there, and those present as the Ctrl-C comes are listed in tmp_path/seen."""
    prelude = ""
    if views is not None:
        prelude = f"import crewbridge.sandbox.state\ncrewbridge.sandbox.state._IN_MEMORY = {str(views)!r}\n"
    (tmp_path / "early.py").write_text(
        "import os, signal, sys, time\n" + prelude + "class InterruptAtTheCli:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'crewbridge.cli':\n"
        f"            open('seen', 'w').write(' '.join(os.listdir({str(views or tmp_path)!r})))\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "            time.sleep(0.5)\n"
        "sys.meta_path.insert(0, InterruptAtTheCli())\n"
        "from crewbridge.__main__ import run\n"
        "run()\n"
    )
    return subprocess.run(
        [sys.executable, "early.py", "query", *args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_ctrl_c_while_crew_is_still_loading_exits_130_without_a_traceback(tmp_path, env):
    proc = interrupted_while_loading(tmp_path, env, "@claude hello")
    assert (proc.returncode, proc.stderr) == (130, "crew: interrupted\n")


@pytest.mark.needs("bwrap")
def test_ctrl_c_while_crew_is_still_loading_leaves_no_view_of_the_clis_state_behind(tmp_path, env):
    # crewbridge.terminal.early has started claude in bwrap, with a view of its state folder, when the Ctrl-C
    # lands; crew exits at once (os._exit): the CLI must be gone and its view removed.
    executable(tmp_path / "bin" / "claude", HANGS)
    views = tmp_path / "views"
    views.mkdir()
    proc = interrupted_while_loading(tmp_path, env, "--sandbox", "required", "@claude hello", views=views)
    assert (proc.returncode, proc.stderr) == (130, "crew: interrupted\n")
    assert (tmp_path / "seen").read_text().startswith("crew-view-")  # the CLI had started, in its view
    assert list(views.iterdir()) == []
    assert processes_in(tmp_path) == []


# -- output without end ------------------------------------------------------------------------------

# 300 MB on stdout or stderr, in 1 KB lines or as one line without end, as plain text or as claude's
# stream-json text events; then a short answer.
FLOOD = """\
import json, os, sys
how, stream = os.environ["FLOOD"].split()
text = "x" * 1000
line = (json.dumps({"type": "assistant", "message": {"id": "m1", "role": "assistant",
                    "content": [{"type": "text", "text": text}]}}) if how == "claude" else text)
out = getattr(sys, stream).buffer
chunk = (line + ("" if how == "endless" else "\\n")).encode() * 1024
for _ in range(300 * 1024 * 1024 // len(chunk)):
    out.write(chunk)
print("\\ndone")
"""


def peak_rss_mb(proc) -> float:
    """Wait for `proc` and return its peak resident set size in MB, read from the kernel's VmHWM while
    it runs. (wait4's ru_maxrss would also count the pages it shared with pytest between fork and exec:
    after a long test session that alone is hundreds of MB.)"""
    peak_kb = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as status:
                for line in status:
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.01)
    return peak_kb / 1024


@pytest.mark.parametrize(
    "how, stream", [("lines", "stdout"), ("claude", "stdout"), ("endless", "stdout"), ("lines", "stderr")]
)
@pytest.mark.slow
def test_hundreds_of_megabytes_of_output_keep_crews_memory_bounded(how, stream, tmp_path, env):
    config = fake_agent(tmp_path, "flood", FLOOD)
    executable(tmp_path / "bin" / "claude", FLOOD)
    agent = "claude" if how == "claude" else "flood"
    proc = start_crew(
        ["query", "--config", str(config), f"@{agent} hello"], cwd=tmp_path, env={**env, "FLOOD": f"{how} {stream}"}
    )
    threading.Thread(target=proc.stdout.read, daemon=True).start()  # whatever crew answers
    try:
        peak = peak_rss_mb(proc)
        err = proc.stderr.read()
    finally:
        end_group(proc)
    assert peak < 150, f"crew's peak RSS was {peak:.0f} MB for 300 MB of output on {stream} ({how})"
    if how != "endless" and stream == "stdout":  # a runaway reply is stopped, not taken as the answer
        assert proc.returncode == 3 and "MB of text" in error_line(err)


# -- faults inside the loop --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_tool_that_hangs_is_ended_by_its_own_timeout_and_the_loop_goes_on(model, tmp_path, env):
    model.script(
        tool_block("crew:run_command", command=sleeper(tmp_path), timeout=1), "The command timed out, so I cannot say."
    )
    done = run_crew(["execute", "--config", str(model.config), "@fake run it"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "The command timed out, so I cannot say." in done.stdout
    follow_up = model.prompts[1]
    assert "timed out after 1s" in follow_up and '"success": false' in follow_up
    assert len(written_pids(tmp_path / "claude" / "sessions")) == 1 and processes_in(tmp_path) == []


# --timeout bounds the whole run, tools included: past it crew ends everything the run started and
# exits 124, whatever a tool's thread is doing.
SPIN_PLUGIN = """\
from crewbridge import tool

@tool(read_only=True)
def spin() -> str:
    \"\"\"Never returns.\"\"\"
    while True:
        pass
"""


def timed_out(args: list[str], tmp_path: Path, env: dict[str, str]) -> str:
    """Run crew with --timeout 5; check it exits 124 (the timeout ended it: a run that waited for
    its tool would never exit, and run_crew gives up on it) leaving nothing running; → its error."""
    done = run_crew([args[0], "--timeout", "5", *args[1:]], env=env, cwd=tmp_path)
    assert done.returncode == 124, done.stderr
    assert processes_in(tmp_path) == []
    return error_line(done.stderr)


@pytest.mark.slow
def test_timeout_ends_a_run_command_that_sleeps_with_its_group(model, tmp_path, env):
    model.script(tool_block("crew:run_command", command=sleeper(tmp_path) + " & sleep 300"), "never seen")
    error = timed_out(["execute", "--config", str(model.config), "@fake run it"], tmp_path, env)
    assert error.startswith(
        "crew: error: @fake did not finish in 5s: crew:run_command was still running; crew ended it"
    )
    # and timed_out() found nothing left running (the pid it wrote is its sandbox's PID namespace's,
    # not one to look for here)
    assert len(written_pids(tmp_path / "claude" / "sessions")) == 1


@pytest.mark.slow
def test_timeout_abandons_a_python_tool_in_an_endless_loop(model, tmp_path, env):
    site = tmp_path / "site"
    (site / "spin-1.0.dist-info").mkdir(parents=True)
    (site / "spin-1.0.dist-info" / "entry_points.txt").write_text("[crewbridge.tools]\nspin = spinplugin:spin\n")
    (site / "spinplugin.py").write_text(SPIN_PLUGIN)
    model.script(tool_block("crew:spin"), "never seen")
    error = timed_out(
        ["query", "--config", str(model.config), "@fake spin"], tmp_path, {**env, "PYTHONPATH": str(site)}
    )
    assert error.startswith("crew: error: @fake did not finish in 5s: crew:spin was still running; crew ended it")


@pytest.mark.slow
def test_a_pattern_that_would_backtrack_for_ever_in_python_is_answered_at_once(model, tmp_path, env):
    (tmp_path / "evil.txt").write_text("a" * 48 + "!\n")
    model.script(tool_block("crew:grep", pattern="(a+)+$", path="evil.txt"), "No line ends in a.")
    done = run_crew(["query", "--timeout", "5", "--config", str(model.config), "@fake grep"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr  # within its 5 s: a backtracking search would time out (124)
    assert '"matches": []' in model.prompts[1]


@pytest.mark.slow
def test_a_custom_command_tool_that_hangs_gives_an_error_result(tmp_path, env):
    fake = FakeModel(tmp_path / "bin")
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"fake": fake.provider()},
        agents={"fake": {"provider": "fake"}},
        tools={"stall": {"command": ["sleep", "600"], "read_only": True, "timeout": 1}},
    )
    fake.script(tool_block("crew:stall"), "It stalled.")
    done = run_crew(["query", "--config", str(config), "@fake try it"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "It stalled." in done.stdout
    assert "timed out after 1s" in fake.prompts[1]
    assert processes_in(tmp_path) == []


@pytest.mark.slow
def test_a_model_that_keeps_calling_tools_stops_at_max_turns_with_exit_4(model, tmp_path, env):
    (tmp_path / "a.txt").write_text("a")
    model.script(tool_block("crew:read_file", path="a.txt"))  # every reply, however often asked
    done = run_crew(["query", "--config", str(model.config), "--max-turns", "3", "@fake loop"], env=env, cwd=tmp_path)
    assert done.returncode == 4
    assert "--max-turns" in error_line(done.stderr)
    assert len(model.prompts) == 3


# -- hostile text and JSON: from the model, the disk, hooks ------------------------------------------


def run_file(env) -> Path:
    """The transcript of the one run crew recorded in `env`."""
    [path] = (Path(env["XDG_STATE_HOME"]) / "crewbridge" / "runs").glob("*.jsonl")
    return path


def events(path: Path, kind: str) -> list[dict]:
    return [event for event in map(json.loads, path.read_bytes().splitlines()) if event["kind"] == kind]


@pytest.mark.parametrize("output", [[], ["--json"], ["--jsonl"]])
@pytest.mark.slow
def test_a_lone_surrogate_in_a_call_reaches_the_model_and_the_transcript_escaped(output, model, tmp_path, env):
    model.script(tool_block("crew:read_file", path="a\udc80b"), "No such file.")
    done = run_crew(["query", *output, "--config", str(model.config), "@fake read it"], env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "No such file." in done.stdout
    assert "'a\\udc80b' does not exist" in model.prompts[1]  # the model reads the escape
    record = run_file(env).read_bytes()
    assert b'"path": "a\\udc80b"' in record  # escaped in the JSON, so the file is UTF-8
    record.decode("utf-8")
    assert [e["input"] for e in events(run_file(env), "call")] == [{"path": "a\udc80b"}]
    if output:
        json.loads(done.stdout.splitlines()[-1])  # what --json/--jsonl print is JSON still


@pytest.mark.slow
def test_a_file_name_that_is_not_utf8_is_listed_read_and_recorded_escaped(model, tmp_path, env):
    work = tmp_path / "work"
    work.mkdir()
    (work / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 named\n")  # "caf\udce9.txt" to Python
    model.script(tool_block("crew:list_files") + tool_block("crew:read_file", path="caf\udce9.txt"), "Read it.")
    done = run_crew(["query", "--config", str(model.config), "@fake what is here?"], env=env, cwd=work)
    assert (done.returncode, done.stdout) == (0, "Read it.\n"), done.stderr
    follow_up = model.prompts[1]
    assert "caf\\udce9.txt" in follow_up and "latin-1 named" in follow_up  # the model reads the escape
    results = {e["name"]: e for e in events(run_file(env), "result")}  # in the order they ended
    listed, read = results["crew:list_files"], results["crew:read_file"]
    assert listed["success"] and read["success"] and read["data"]["content"] == "latin-1 named\n"
    assert b'"path": "caf\\udce9.txt"' in run_file(env).read_bytes()  # recorded escaped
    shown = run_crew(["log", "show", "last"], env=env, cwd=work)  # as the live tool line showed it
    assert shown.returncode == 0 and "→ crew:read_file caf\ufffd.txt" in shown.stdout, shown.stdout


@pytest.mark.slow
def test_piped_input_that_is_not_utf8_is_context_not_a_crash(model, tmp_path, env):
    model.script("Seen.")
    proc = subprocess.run(
        [*CREW, "query", "--config", str(model.config), "@fake what is this?"],
        cwd=tmp_path,
        env=env,
        input=b"bytes \xff\xfe here\n",
        capture_output=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout) == (0, b"Seen.\n"), proc.stderr
    assert "bytes \\udcff\\udcfe here" in model.prompts[0]


@pytest.mark.slow
def test_a_call_nested_past_the_limit_is_an_error_for_the_model_and_the_run_goes_on(model, tmp_path, env):
    deep = '{"type": "tool_use", "name": "crew:read_file", "input": {"path": ' + "[" * 5000 + "]" * 5000 + "}}"
    model.script("```json\n" + deep + "\n```\n", "I will send flatter JSON.")
    done = run_crew(["query", "--config", str(model.config), "@fake read"], env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "I will send flatter JSON.\n"), done.stderr
    assert f"JSON nested more than {MAX_DEPTH} levels deep" in model.prompts[1]


@pytest.mark.slow
def test_a_hook_that_prints_json_nested_past_the_limit_fails_the_call_not_the_run(model, tmp_path, env):
    (tmp_path / "deep.json").write_text("[" * 5000 + "]" * 5000)
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"fake": model.provider()},
        agents={"fake": {"provider": "fake"}},
        hooks={"before_tool_call": [{"command": ["cat", str(tmp_path / "deep.json")]}]},
    )
    (tmp_path / "notes.txt").write_text("hi\n")
    model.script(tool_block("crew:read_file", path="notes.txt"), "The hook failed.")
    done = run_crew(["query", "--config", str(config), "@fake read"], env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "The hook failed.\n"), done.stderr
    assert f"printed JSON nested more than {MAX_DEPTH} levels deep" in model.prompts[1]


@pytest.mark.slow
def test_transcripts_read_back_skip_a_record_nested_past_the_limit(model, tmp_path, env):
    model.script("Hello.")
    assert run_crew(["query", "--config", str(model.config), "@fake hi"], env=env, cwd=tmp_path).returncode == 0
    path = run_file(env)
    lines = path.read_text().splitlines()
    deep = '{"kind": "reply", "agent": "fake", "text": ' + "[" * 5000 + "]" * 5000 + "}"
    deep_end = lines[-1][:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}"  # `crew log` reads the end event
    path.write_text("\n".join([*lines[:-1], deep, deep_end]) + "\n")
    listed = run_crew(["log"], env=env, cwd=tmp_path)
    assert listed.returncode == 0 and path.stem in listed.stdout
    shown = run_crew(["log", "show", "--json", path.stem], env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    corrupt = [e for e in map(json.loads, shown.stdout.splitlines()) if e["kind"] == "unreadable"]
    assert [e["error"] for e in corrupt] == [f"JSON nested more than {MAX_DEPTH} levels deep; send flatter data"] * 2
    model.script("Again.")
    resumed = run_crew(["query", "--config", str(model.config), "--continue", "@fake go on"], env=env, cwd=tmp_path)
    assert (resumed.returncode, resumed.stdout) == (0, "Again.\n"), resumed.stderr
