"""The `crew` command run as a person runs it (a subprocess), and small fake CLIs for it to drive.

`run_crew(args, env=…, cwd=…)` runs `python -m crewbridge ARGS` with stdin from /dev/null (or the
given input) and returns the finished process. `crew_env(home)` is a clean environment for it: a
scratch HOME and XDG directories (so no user crew.yaml is found and transcripts stay in the test's
directory). `FakeModel` is a CLI described in crew.yaml under `providers:` that answers each prompt
with the next scripted reply and records the prompts. `executable` writes any other small fake.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CREW = [sys.executable, "-m", "crewbridge"]


def crew_env(home: Path, **extra: str) -> dict[str, str]:
    """This process's environment with a scratch HOME (XDG directories under it) and `extra`."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "CREW_"))}
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        NO_COLOR="1",
        **extra,
    )
    return env


def start_crew(
    args: Sequence[str], *, env: dict[str, str], cwd: Path, stdin: int | None = subprocess.DEVNULL
) -> subprocess.Popen[str]:
    """Start `crew ARGS` in its own process group (so a test can always end all of it)."""
    return subprocess.Popen(
        [*CREW, *args],
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run_crew(
    args: Sequence[str], *, env: dict[str, str], cwd: Path, input: str | None = None, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run `crew ARGS` to its end; stdin is /dev/null unless `input` is given."""
    proc = start_crew(args, env=env, cwd=cwd, stdin=subprocess.DEVNULL if input is None else subprocess.PIPE)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    finally:
        end_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def only_result(stdout: str) -> dict[str, Any]:
    """The one agent's object in `crew query --json`'s output ({"run", "results": [...]})."""
    [result] = json.loads(stdout)["results"]
    return result


def error_line(stderr: str) -> str:
    """crew's error message: one line, the last on stderr (after any tool lines), no traceback."""
    errors = [line for line in stderr.splitlines() if line.startswith("crew: ")]
    assert len(errors) == 1 and stderr.endswith(errors[0] + "\n"), stderr
    return errors[0]


def end_group(proc: subprocess.Popen[str]) -> None:
    """Kill what is left of `proc`'s process group and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def running(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (dead, waiting to be reaped)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status and "\nState:\tX" not in status


def processes_in(directory: Path, within: float = 3.0) -> list[str]:
    """Live processes that work in `directory` or below it, or have their HOME there, as "pid command"
    (what a test's CLIs leave running: they get a scratch HOME and work directory under tmp_path).
    Those still there `within` seconds from now: a process a CLI started in a session of its own
    (codex's shell snapshot `bash -lc`) is out of crew's reach and may take a moment to end."""
    deadline = time.monotonic() + within
    while (found := _processes_in(directory)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def _processes_in(directory: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not running(int(entry.name)):
            continue
        try:
            places = [Path(os.readlink(entry / "cwd"))]
            places += [
                Path(os.fsdecode(var[5:]))
                for var in (entry / "environ").read_bytes().split(b"\0")
                if var.startswith(b"HOME=/")
            ]
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(place == directory or directory in place.parents for place in places):
            found.append(f"{entry.name} {command.strip()}")
    return found


def executable(path: Path, source: str) -> Path:
    """A Python program at `path`, runnable as a command (its interpreter is this one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{source}")
    path.chmod(0o755)
    return path


def write_config(path: Path, **sections: Any) -> Path:
    """A crew.yaml holding `sections` (JSON is YAML)."""
    path.write_text(json.dumps(sections, indent=2))
    return path


_FAKE_MODEL = """\
import json, sys
from pathlib import Path

base = Path(__file__)
prompt = sys.stdin.read()
with open(f"{base}.prompts.jsonl", "a") as log:
    log.write(json.dumps({"prompt": prompt, "argv": sys.argv[1:]}) + "\\n")
turn = len(Path(f"{base}.prompts.jsonl").read_text().splitlines())
replies = json.loads(Path(f"{base}.replies.json").read_text())
sys.stdout.write(replies[min(turn, len(replies)) - 1])
"""


class FakeModel:
    """A CLI that plays a model: each run reads its prompt on stdin, records it, and prints the next
    scripted reply (the last one again once the script runs out). Configured as a generic provider
    and agent `name` (plain text output, no resume: crew replays the conversation each turn)."""

    def __init__(self, directory: Path, name: str = "fake") -> None:
        self.name = name
        self.path = executable(directory / name, _FAKE_MODEL)
        self.script("(no reply scripted)")

    def script(self, *replies: str) -> None:
        Path(f"{self.path}.replies.json").write_text(json.dumps(list(replies)))

    def restart(self, *replies: str) -> None:
        """Script `replies` and start over: the next prompt gets the first of them."""
        Path(f"{self.path}.prompts.jsonl").unlink(missing_ok=True)
        self.script(*replies)

    @property
    def prompts(self) -> list[str]:
        log = Path(f"{self.path}.prompts.jsonl")
        return [json.loads(line)["prompt"] for line in log.read_text().splitlines()] if log.exists() else []

    @property
    def argvs(self) -> list[list[str]]:
        log = Path(f"{self.path}.prompts.jsonl")
        return [json.loads(line)["argv"] for line in log.read_text().splitlines()] if log.exists() else []

    def provider(self, *args: str) -> dict[str, Any]:
        """Its `providers:` entry in crew.yaml: it keeps its state (the prompts) beside itself."""
        return {"command": [str(self.path), *args], "state_dirs": [str(self.path.parent)]}


def tool_block(name: str, **data: Any) -> str:
    """A fenced crew tool call, as a model writes it."""
    return "```json\n" + json.dumps({"type": "tool_use", "name": name, "input": data}) + "\n```\n"
