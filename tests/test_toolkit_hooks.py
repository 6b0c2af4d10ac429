import json
import threading

import pytest
from crewbridge.providers.base import Turn
from crewbridge.tools import builtin_registry

from crewbridge.base.decoded import Done, MessageEnd, Text
from crewbridge.config import AgentSpec
from crewbridge.conversations import EXACT
from crewbridge.engine.loop import AgentLoop
from crewbridge.errors import CrewError
from crewbridge.toolkit.hooks import AFTER, BEFORE, Block, Hooks, HookSpec
from crewbridge.toolkit.registry import Tool, ToolResult
from crewbridge.work.policy import Policy
from test_toolkit_custom_tools import gone

WRITE = Tool(
    name="write_file",
    description="",
    func=lambda ctx, **kw: None,
    input_schema={
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
    },
)
INPUT = {"path": "a.txt", "content": "hello"}
OK = ToolResult(True, data={"bytes": 5}, tool="write_file", duration_ms=3.0)


def shell(script: str, event: str = BEFORE, **kw) -> HookSpec:
    return HookSpec(event=event, shell=script, **kw)


def hooks(*specs: HookSpec, **kw) -> tuple[Hooks, list[str]]:
    """Hooks with these specs, and the list their failure reports go to."""
    reports: list[str] = []
    by_event: dict[str, list[HookSpec]] = {}
    for spec in specs:
        by_event.setdefault(spec.event, []).append(spec)
    return Hooks(by_event, report=reports.append, **kw), reports


def before(*specs: HookSpec, data=INPUT, **kw):
    runner, reports = hooks(*specs, **kw)
    return (*runner.before("write_file", data, "claude", WRITE), reports)


def after(*specs: HookSpec, result=OK):
    runner, reports = hooks(*specs)
    return runner.after("write_file", INPUT, result, "claude"), reports


# --- shell and command hooks: the protocol ----------------------------------------------------------


def test_no_hooks_change_nothing():
    assert Hooks().before("write_file", INPUT, "claude") == (INPUT, None)
    assert Hooks().after("write_file", INPUT, OK, "claude") is OK


def test_exit_0_without_output_leaves_the_call_alone():
    assert before(shell("cat > /dev/null")) == (INPUT, None, [])


def test_the_hook_receives_the_call_as_json_on_stdin_and_in_its_environment(tmp_path):
    seen = tmp_path / "seen.json"
    spec = shell(f'cat > {seen}; echo "$CREW_HOOK_EVENT $CREW_TOOL $CREW_AGENT $CREW_WORKDIR" > {seen}.env')
    before(spec, workdir=tmp_path)
    assert json.loads(seen.read_text()) == {
        "event": BEFORE,
        "tool": "write_file",
        "agent": "claude",
        "input": INPUT,
        "workdir": str(tmp_path),
    }
    assert (tmp_path / "seen.json.env").read_text() == f"before_tool_call write_file claude {tmp_path}\n"


def test_exit_2_blocks_with_stdout_as_the_reason():
    data, block, reports = before(shell("echo 'no writes on Fridays'; exit 2"))
    assert data == INPUT and block == "blocked by a before_tool_call hook: no writes on Fridays"
    assert reports == []  # a block is the hook working, not failing


def test_exit_2_with_only_stderr_gives_stderr_as_the_reason():
    assert before(shell("echo 'protected path' >&2; exit 2"))[1] == "blocked by a before_tool_call hook: protected path"


def test_a_json_object_on_stdout_replaces_the_input():
    data, block, _ = before(shell('echo \'{"path": "safe/a.txt", "content": "hello"}\''))
    assert (data, block) == ({"path": "safe/a.txt", "content": "hello"}, None)


def test_a_replaced_input_is_checked_against_the_tools_schema():
    data, block, reports = before(shell("echo '{\"path\": 7}'"))
    assert data == INPUT
    assert block.startswith(
        "before_tool_call hook 'echo '{\"path\": 7}'' failed on write_file: changed the "
        "input into one the tool does not accept: at $"
    )
    assert block.endswith("; the call was not run") and reports == [block]


def test_a_replacement_that_is_not_an_object_blocks():
    assert (
        "changed the input into one the tool does not accept: it is not a JSON object"
        in before(shell("echo '[1, 2]'"))[1]
    )


def test_hooks_run_in_order_each_seeing_the_last_change(tmp_path):
    first = shell('echo \'{"path": "b.txt", "content": "hello"}\'')
    second = shell(f"cat > {tmp_path / 'second.json'}")
    assert before(first, second)[:2] == ({"path": "b.txt", "content": "hello"}, None)
    assert json.loads((tmp_path / "second.json").read_text())["input"]["path"] == "b.txt"


def test_the_first_block_stops_the_chain(tmp_path):
    marker = tmp_path / "ran"
    assert before(shell("exit 2"), shell(f"touch {marker}"))[1] == "blocked by a before_tool_call hook: no reason given"
    assert not marker.exists()


@pytest.mark.parametrize(
    "script, what",
    [
        ("echo boom >&2; exit 1", "exited with status 1: boom"),
        ("exit 3", "exited with status 3: no message on stderr"),
        ("echo not json", "printed something that is not JSON on stdout"),
        (
            "printf '%05000d' 0 | tr 0 '['; printf '%05000d' 0 | tr 0 ']'",
            "printed JSON nested more than 100 levels deep",
        ),
        ("kill -9 $$", "exited with status -9"),
    ],
)
def test_a_hook_that_fails_is_reported_and_blocks(script, what):
    data, block, reports = before(shell(script))
    assert data == INPUT and what in block and block.endswith("; the call was not run")
    assert reports == [block]


def test_a_hook_command_that_does_not_exist_blocks():
    block = before(HookSpec(event=BEFORE, command=["no-such-hook-x"]))[1]
    assert "hook 'no-such-hook-x' failed on write_file: could not start: 'no-such-hook-x' not found" in block


@pytest.mark.slow
def test_a_hook_that_hangs_is_stopped_with_its_whole_group_and_blocks(tmp_path):
    pids = tmp_path / "pids"
    spec = shell(f"sleep 60 & echo $! > {pids}; sleep 60", timeout=0.5)
    data, block, reports = before(spec)
    assert data == INPUT and "gave no answer within 0.5s and was stopped" in block and reports == [block]
    assert gone(int(pids.read_text()))


@pytest.mark.slow
def test_a_hook_that_never_reads_a_large_input_cannot_deadlock():
    big = {"path": "a.txt", "content": "x" * 1_000_000}
    assert "gave no answer within 0.5s" in before(shell("sleep 60", timeout=0.5), data=big)[1]


def test_a_relative_command_starts_at_the_config_directory(tmp_path):
    script = tmp_path / "hooks" / "deny.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho denied by script; exit 2\n")
    script.chmod(0o755)
    spec = HookSpec(event=BEFORE, command=["./hooks/deny.sh"], base=tmp_path)
    assert before(spec)[1] == "blocked by a before_tool_call hook: denied by script"


def test_hooks_apply_only_to_their_tools_and_agents():
    runner, _ = hooks(shell("exit 2", tools=["write_*"], agents=["gem*"]))
    assert runner.before("write_file", INPUT, "claude", WRITE)[1] is None
    assert runner.before("read_file", {"path": "a"}, "gemini")[1] is None
    assert runner.before("write_file", INPUT, "gemini", WRITE)[1] is not None


# --- after_tool_call --------------------------------------------------------------------------------


def test_after_receives_the_result_envelope(tmp_path):
    seen = tmp_path / "seen.json"
    after(shell(f"cat > {seen}", event=AFTER))
    assert json.loads(seen.read_text())["result"] == OK.to_dict()


def test_after_may_replace_the_result():
    result, _ = after(shell('echo \'{"success": true, "data": "[redacted by policy]"}\'', event=AFTER))
    assert (result.success, result.data, result.error, result.tool, result.duration_ms) == (
        True,
        "[redacted by policy]",
        None,
        "write_file",
        3.0,
    )


def test_after_may_turn_a_result_into_a_failure():
    result, _ = after(shell('echo \'{"success": false, "error": "output held back"}\'', event=AFTER))
    assert (result.success, result.error) == (False, "output held back")


def test_after_exit_2_withholds_the_result():
    result, _ = after(shell("echo contains a secret; exit 2", event=AFTER))
    assert (result.success, result.data) == (False, None)
    assert result.error == "the tool ran, but a after_tool_call hook withheld its result: contains a secret"


@pytest.mark.parametrize("script", ["exit 1", "echo '{\"data\": 1}'", "sleep 60"])
@pytest.mark.slow
def test_after_a_failing_hook_withholds_the_result_and_is_reported(script):
    result, reports = after(shell(script, event=AFTER, timeout=0.5))
    assert not result.success and result.data is None
    assert result.error.endswith("the tool ran but its result is withheld") and reports == [result.error]


# --- Python hooks -----------------------------------------------------------------------------------

calls: list[dict] = []


def record(event):
    calls.append(event)


def redirect(event):
    return {**event["input"], "path": "sandbox/" + event["input"]["path"]}


def refuse(event):
    raise Block("python says no")


def crash(event):
    raise ZeroDivisionError("division by zero")


release = threading.Event()


def hang(event):
    release.wait(30)


def test_a_python_hook_gets_the_event_and_may_replace_the_input():
    calls.clear()
    data, block, _ = before(
        HookSpec(event=BEFORE, python=f"{__name__}:record"), HookSpec(event=BEFORE, python=f"{__name__}:redirect")
    )
    assert calls == [{"event": BEFORE, "tool": "write_file", "agent": "claude", "input": INPUT}]
    assert (data, block) == ({"path": "sandbox/a.txt", "content": "hello"}, None)


def test_a_python_hook_blocks_by_raising_block():
    assert (
        before(HookSpec(event=BEFORE, python=f"{__name__}:refuse"))[1]
        == "blocked by a before_tool_call hook: python says no"
    )


def test_a_python_hook_that_crashes_is_reported_and_blocks():
    data, block, reports = before(HookSpec(event=BEFORE, python=f"{__name__}:crash"))
    assert (
        data == INPUT
        and "raised ZeroDivisionError: division by zero; the call was not run" in block
        and reports == [block]
    )


@pytest.mark.slow
def test_a_python_hook_that_hangs_blocks_after_its_timeout():
    release.clear()
    try:
        block = before(HookSpec(event=BEFORE, python=f"{__name__}:hang", timeout=0.3))[1]
    finally:
        release.set()
    assert "gave no answer within 0.3s" in block


def test_a_python_hook_that_cannot_be_loaded_blocks():
    block = before(HookSpec(event=BEFORE, python="no_such_module_x:f"))[1]
    assert "cannot load no_such_module_x:f: ModuleNotFoundError" in block


def test_a_python_hook_may_live_in_a_file_next_to_the_config(tmp_path):
    (tmp_path / "guard.py").write_text("def check(event):\n    return {**event['input'], 'content': 'checked'}\n")
    data, block, _ = before(HookSpec(event=BEFORE, python="guard.py:check", base=tmp_path))
    assert (data["content"], block) == ("checked", None)


def test_a_callable_can_be_given_directly():
    runner = Hooks({AFTER: [lambda event: {"success": True, "data": event["result"]["data"]["bytes"] * 2}]})
    assert runner.after("write_file", INPUT, OK, "claude").data == 10


def test_a_hook_spec_needs_exactly_one_way_to_run():
    with pytest.raises(CrewError, match="needs exactly one of command, shell, python \\(got command, shell\\)"):
        HookSpec(event=BEFORE, command=["x"], shell="y")


def test_hooks_report_to_the_log_by_default(caplog):
    Hooks({BEFORE: [shell("exit 1")]}).before("write_file", INPUT, "claude")
    assert "failed on write_file: exited with status 1" in caplog.text


# --- in the agent loop: the policy judges the input that will really run ----------------------------


class Scripted:
    """A conversation that replies from a script (one list of events per turn)."""

    session_id = None
    reported = None
    base = Turn(prompt="")

    def __init__(self, *replies):
        self.replies = list(replies)

    def serve(self, channel):
        return False

    def late_usage(self):
        return []

    def send(self, message, deadline):
        yield from self.replies.pop(0)

    def stop(self):
        pass

    def keep(self, kept, stopped):
        return EXACT

    def close(self):
        pass


def run_command_once(tmp_path, command: str, hook: HookSpec, **agent) -> ToolResult:
    call = {"type": "tool_use", "name": "crew:run_command", "input": {"command": command}}
    reply = [Text("```json\n" + json.dumps(call) + "\n```\n"), MessageEnd(), Done()]
    answer = [Text("done"), MessageEnd(), Done()]
    policy = Policy(AgentSpec(id="claude", provider="claude", **agent), "execute")
    loop = AgentLoop(
        "claude", Scripted(reply, answer), builtin_registry(), policy, workdir=tmp_path, hooks=Hooks({BEFORE: [hook]})
    )
    (record,) = loop.run("clean up").tool_calls
    return record.result


def test_a_command_a_hook_rewrites_is_checked_against_the_command_policy(tmp_path):
    (tmp_path / "data").mkdir()
    rewrite = shell('echo \'{"command": "rm -rf data"}\'')
    result = run_command_once(tmp_path, "ls", rewrite, deny_commands=["rm *"])
    assert not result.success and "the command policy forbids 'rm -rf data'" in result.error
    assert (tmp_path / "data").is_dir()


def test_hooks_never_see_a_call_the_policy_refuses(tmp_path):
    marker = tmp_path / "hook-ran"
    result = run_command_once(tmp_path, "ls", shell(f"touch {marker}"), deny=["run_command"])
    assert not result.success and not marker.exists()


# --- the scripts a hook names run as they were loaded (crewbridge.system.pinned) --------------------------


def test_a_hook_script_rewritten_after_load_is_refused_and_blocks(tmp_path):
    script = tmp_path / "hook.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    spec = HookSpec(event=BEFORE, command=["./hook.sh"], base=tmp_path)
    assert before(spec)[1] is None
    script.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\nexit 0\n")
    block = before(spec)[1]
    assert "./hook.sh changed since crew.yaml was loaded" in block and "the call was not run" in block
    assert not (tmp_path / "ran").exists()


def test_a_shell_hook_naming_a_rewritten_script_is_refused(tmp_path):
    (tmp_path / "check.sh").write_text("exit 0\n")
    spec = HookSpec(event=AFTER, shell="sh ./check.sh > log.txt", base=tmp_path)
    (tmp_path / "check.sh").write_text(f"touch {tmp_path}/ran\n")
    result, reports = after(spec)
    assert not result.success and "./check.sh changed since crew.yaml was loaded" in result.error
    assert not (tmp_path / "ran").exists() and len(reports) == 1


def test_a_python_hook_file_rewritten_before_its_first_use_is_refused(tmp_path):
    (tmp_path / "guard.py").write_text("def check(event):\n    return None\n")
    spec = HookSpec(event=BEFORE, python="guard.py:check", base=tmp_path)
    (tmp_path / "guard.py").write_text("import os\ndef check(event):\n    os.system('touch ran')\n")
    assert "guard.py changed since crew.yaml was loaded" in before(spec)[1]


@pytest.mark.slow
def test_a_run_command_that_rewrites_a_trusted_projects_hook_cannot_run_it_through_that_hook(tmp_path):
    """Issue 31: a trusted project's after_tool_call ./hook.sh; the model's sandboxed run_command
    rewrites hook.sh; the same call's hook, which runs outside the sandbox, must not run the new content."""
    import subprocess

    from crewcli import CREW, FakeModel, crew_env, run_crew, tool_block, write_config

    project, marker = tmp_path / "project", tmp_path / "ran"
    project.mkdir()
    hook = project / "hook.sh"
    hook.write_text("#!/bin/sh\ncat > /dev/null\n")
    hook.chmod(0o755)
    model = FakeModel(tmp_path / "bin")
    config = write_config(
        project / "crew.yaml",
        providers={"fake": model.provider()},
        agents={"fake": {}},
        hooks={"after_tool_call": [{"command": ["./hook.sh"]}]},
    )
    env = crew_env(tmp_path / "home")
    subprocess.run([*CREW, "config", "trust", str(config)], env=env, check=True, capture_output=True)
    rewrite = f"printf '#!/bin/sh\\ntouch {marker}\\n' > hook.sh && echo rewritten"
    model.script(tool_block("crew:run_command", command=rewrite), "Done.")
    done = run_crew(["execute", "--sandbox", "required", "@fake tidy up"], env=env, cwd=project)
    assert "touch" in hook.read_text()  # the command did rewrite it (the project is writable)
    assert not marker.exists()
    assert "after_tool_call hook './hook.sh' failed on run_command: ./hook.sh changed since crew.yaml was loaded" in (
        done.stderr
    )
    assert "the tool ran but its result is withheld" in model.prompts[1]
