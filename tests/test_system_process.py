import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crewbridge.errors import CLINotFound, CrewTimeout, ProviderError
from crewbridge.sandbox import State
from crewbridge.system import process
from crewbridge.system.process import MAX_LINE, Child
from crewcli import running

PY = sys.executable


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is as good as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_lines_stream_in_order_and_split_across_chunks():
    child = Child([PY, "-c", "import sys\nfor i in range(3000): sys.stdout.write(f'line {i}\\n')"])
    lines = list(child.lines())
    child.close()
    assert lines == [f"line {i}" for i in range(3000)]


def test_stdin_is_delivered_and_closed():
    child = Child([PY, "-c", "import sys; print(sys.stdin.read().upper())"], stdin="héllo " * 50_000)
    assert list(child.lines()) == ["HÉLLO " * 50_000]
    assert child.wait() == 0


def test_text_that_is_not_utf8_reaches_the_cli_escaped_never_an_error(tmp_path):
    # a lone surrogate (a model's "\\ud800") on stdin and in argv: a backslash escape, as the model wrote it
    echo = [
        PY,
        "-c",
        "import sys; sys.stdout.buffer.write(sys.argv[1].encode(errors='surrogateescape') + b'|' "
        "+ sys.stdin.buffer.read())",
    ]
    child = Child([*echo, "a\ud800b"], stdin="c\udc80d \ud83d")
    assert list(child.lines()) == ["a\\ud800b|c\\udc80d \\ud83d"]
    # a file name that is not UTF-8 ("caf\xe9" read as "caf\udce9") reaches argv as its own bytes again
    (tmp_path / os.fsdecode(b"caf\xe9")).write_text("latin-1 named")
    child = Child([PY, "-c", "import sys; print(open(sys.argv[1]).read())", os.fsdecode(b"caf\xe9")], cwd=tmp_path)
    assert list(child.lines()) == ["latin-1 named"]


def test_stdin_kept_open_takes_the_whole_input_later():
    child = Child([PY, "-c", "import sys; print(sys.stdin.read().upper())"], keep_stdin=True)
    child.feed("written once the CLI was running")
    assert list(child.lines(deadline=time.monotonic() + 20)) == ["WRITTEN ONCE THE CLI WAS RUNNING"]
    assert child.wait() == 0


def test_wait_gives_the_exit_status_and_ends_a_cli_that_outlives_it():
    assert Child([PY, "-c", "import sys; sys.exit(3)"]).wait() == 3
    child = Child([PY, "-c", "import time; time.sleep(60)"])
    assert child.wait(timeout=0.2) == -signal.SIGTERM
    assert not alive(child.proc.pid)


def test_reader_threads_leave_ctrl_c_to_the_main_thread():
    """Python acts on a signal only in its main thread; one the kernel hands to another thread does
    not wake a main thread waiting in poll(). crew's reader threads block the signals crew stops on."""
    child = Child([PY, "-c", "import sys, time; sys.stderr.write('ready'); sys.stderr.flush(); time.sleep(60)"])
    try:
        deadline = time.monotonic() + 20
        while "ready" not in child.stderr and time.monotonic() < deadline:  # the reader thread ran
            time.sleep(0.01)
        assert {signal.SIGINT, signal.SIGTERM, signal.SIGHUP} <= _blocked_signals(child._stderr_reader.native_id)
        assert signal.SIGINT not in _blocked_signals(threading.get_native_id())
    finally:
        child.close()


def _blocked_signals(tid: int) -> set[int]:
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    mask = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
    return {sig for sig in range(1, 65) if mask >> (sig - 1) & 1}


def test_a_cli_that_echoes_a_large_stdin_does_not_deadlock():
    child = Child(["cat"], stdin="x" * 1_000_000 + "\n")
    assert [len(line) for line in child.lines(deadline=time.monotonic() + 20)] == [1_000_000]


def test_the_cli_runs_in_a_process_group_of_its_own_with_a_large_stdout_pipe():
    import fcntl

    child = Child(["cat"], keep_stdin=True)
    try:
        assert os.getpgid(child.proc.pid) == child.pgid == child.proc.pid != os.getpgid(0)
        limit = int(open("/proc/sys/fs/pipe-max-size").read())
        assert fcntl.fcntl(child.out.child_fd, fcntl.F_GETPIPE_SZ) == limit
    finally:
        child.kill()


def test_a_missing_cli_names_itself_and_how_to_install():
    with pytest.raises(CLINotFound, match="'no-such-cli-x' not found on PATH; install it with: npm i x"):
        Child(["no-such-cli-x"], install_hint="npm i x")


def test_a_cli_that_is_there_but_cannot_run_says_so(tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("echo hi\n")
    with pytest.raises(ProviderError, match=r"not-executable' cannot be started \(Permission denied\)"):
        Child([str(script)])


@pytest.mark.slow
def test_deadline_kills_the_whole_group_including_grandchildren(tmp_path):
    script = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(60)'])\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    child = Child([PY, "-c", script])
    lines = child.lines(deadline=time.monotonic() + 3)
    grandchild = int(next(lines))
    with pytest.raises(CrewTimeout, match="gave no complete reply in time; it was stopped"):
        next(lines)
    assert child.proc.poll() is not None
    for _ in range(50):
        if not alive(grandchild):
            break
        time.sleep(0.05)
    assert not alive(grandchild)


def test_kill_ends_a_process_that_ignores_sigterm():
    child = Child(
        [
            PY,
            "-c",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(60)",
        ]
    )
    assert next(child.lines()) == "ready"
    child.kill(grace=0.2)
    assert child.proc.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_an_endless_line_is_cut_so_memory_stays_bounded():
    size = MAX_LINE * 3
    child = Child([PY, "-c", f"import sys; sys.stdout.write('x' * {size}); sys.stdout.write('\\nend\\n')"])
    lines = list(child.lines())
    child.close()
    assert [len(line) for line in lines] == [MAX_LINE, 3]
    assert child.cut_lines >= 1


def test_stderr_is_kept_apart_and_bounded_to_its_start_and_its_end():
    child = Child([PY, "-c", "import sys; sys.stderr.write('FIRST' + 'e' * 100000 + 'LAST'); print('out')"])
    assert list(child.lines()) == ["out"]
    child.wait()  # then stderr waits for its reader to take all the CLI wrote
    head, cut, tail = child.stderr.partition("\n[…]\n")
    assert cut and head.startswith("FIRST") and len(head) == process.STDERR_HEAD
    assert tail.endswith("LAST") and len(tail) == process.STDERR_KEEP


@pytest.mark.slow
def test_kill_from_several_threads_at_once_while_another_reads():
    for _ in range(20):
        child = Child([PY, "-c", "import time\nprint('ready', flush=True)\ntime.sleep(60)"])
        lines = child.lines()
        assert next(lines) == "ready"
        reader_saw: list[object] = []

        def read(lines=lines, reader_saw=reader_saw) -> None:
            try:
                reader_saw.append(list(lines))
            except Exception as exc:
                reader_saw.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        killers = [threading.Thread(target=child.kill, kwargs={"grace": 0}) for _ in range(4)]
        for k in killers:
            k.start()
        for k in killers:
            k.join()
        reader.join(5)
        # the killers raised nothing (a double close would); the reader ended with no lines
        assert not reader.is_alive() and child.proc.returncode is not None
        assert reader_saw == [[]], reader_saw


class Waiting:
    """A Child's poll object that tells when a reader waits in it (`now` is set)."""

    def __init__(self, poll):
        self._poll, self.now = poll, threading.Event()

    def register(self, fd, events):
        self._poll.register(fd, events)

    def poll(self, timeout):
        self.now.set()
        return self._poll.poll(timeout)


def test_kill_wakes_a_reader_even_when_an_escaped_process_keeps_the_pipe_open():
    # the grandchild leaves the group (setsid) and holds stdout: the pipe never reaches its end
    script = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(30)'])\n"
        "print(p.pid, flush=True)\ntime.sleep(60)"
    )
    child = Child([PY, "-c", script])
    lines = child.lines()
    escaped = int(next(lines))
    child._poll = waiting = Waiting(child._poll)
    reader_saw: list[object] = []
    reader = threading.Thread(target=lambda: reader_saw.append(list(lines)))
    reader.start()
    assert waiting.now.wait(10)  # the reader is waiting on the silent pipe
    child.kill(grace=0)
    reader.join(5)
    os.kill(escaped, signal.SIGKILL)
    assert not reader.is_alive() and reader_saw == [[]]


def after_end_all(tmp_path: Path, script: str) -> dict:
    """What `script` (run in a Python of its own, with crew's process module as `process` and
    SLEEP, a command that sleeps 30 s) saved as `seen`, and then `end_all()` ended: it ends every
    child of its process, which in pytest's would be the test servers too."""
    out = tmp_path / "seen.json"
    prelude = (
        "import json, subprocess, sys, threading, time\n"
        "from crewbridge.system import process\n"
        "SLEEP = [sys.executable, '-c', 'import time; time.sleep(30)']\n"
        "seen = {}\n"
    )
    coda = f"\nprocess.end_all()\nopen({str(out)!r}, 'w').write(json.dumps(seen))\n"
    with open(tmp_path / "stderr", "w+") as err:  # not a pipe: a child left running would hold it open
        done = subprocess.run([PY, "-c", prelude + script + coda], stdout=err, stderr=err, timeout=60)
        err.seek(0)
        assert done.returncode == 0, err.read()
    return json.loads(out.read_text())


def gone(pid: int) -> bool:
    """True once `pid` is dead (its parent exited: init reaps it), within 5 s."""
    end = time.monotonic() + 5
    while running(pid) and time.monotonic() < end:
        time.sleep(0.01)
    return not running(pid)


def test_end_all_returns_once_the_clis_crew_started_are_dead_and_reaped(tmp_path):
    script = (
        "child = process.Child([sys.executable, '-c', 'import subprocess, sys, time\\n"
        'p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])\\n'
        "print(p.pid, flush=True); time.sleep(30)'])\n"
        "seen['grandchild'] = int(next(child.lines()))\n"
        "seen['child'] = child.proc.pid\n"
        "process.end_all()  # crew exits right after it (Ctrl-C): its CLIs must be gone, not just told\n"
        "seen['reaped'] = not __import__('os').path.exists(f'/proc/{child.proc.pid}')\n"
        "try:\n"
        "    process.Child(SLEEP)\n"
        "except process.Interrupted as exc:  # nothing starts after end_all\n"
        "    seen['late'] = str(exc)\n"
    )
    seen = after_end_all(tmp_path, script)
    assert seen["reaped"] and gone(seen["grandchild"])  # the grandchild got the same SIGKILL
    assert seen["late"] == "crew is stopping: no process is started any more"


def test_a_process_whose_start_an_interrupt_caught_half_way_is_ended_too(tmp_path):
    # a tool's thread has forked its command and not yet tracked its group when Ctrl-C's end_all()
    # runs: end_all waits for that start, and the group is killed as it is tracked
    script = (
        "forked = threading.Event()\n"
        "real = process.spawn\n"
        "def slow(*args, **kwargs):\n"
        "    proc, launch = real(*args, **kwargs)\n"
        "    seen['pid'] = proc.pid\n"
        "    forked.set()\n"
        "    time.sleep(0.5)  # still starting\n"
        "    return proc, launch\n"
        "process.spawn = slow\n"
        "threading.Thread(target=process.Child, args=(SLEEP,), daemon=True).start()\n"
        "forked.wait(10)\n"
    )
    seen = after_end_all(tmp_path, script)
    assert gone(seen["pid"])


def test_a_process_started_and_never_tracked_is_ended_too(tmp_path):
    # the main thread's own start cut short by the signal whose handler runs end_all(), or any
    # process crew started without a Child: the kernel's list of its children has it
    seen = after_end_all(tmp_path, "seen['pid'] = subprocess.Popen(SLEEP, start_new_session=True).pid\n")
    assert gone(seen["pid"])


def test_input_that_comes_after_the_cli_was_killed_is_dropped_quietly():
    child = Child([PY, "-c", "import time; time.sleep(30)"], keep_stdin=True)
    raised, fed = [], threading.Event()
    feed = child._feed

    def feeding(text):  # the feeder thread's work, and what it raises
        try:
            feed(text)
        except BaseException as exc:
            raised.append(exc)
        finally:
            fed.set()

    child._feed = feeding
    child.kill(grace=0)  # Ctrl-C, as the run hands the CLI its prompt
    child.feed("the prompt")
    assert fed.wait(10)
    assert raised == []


@pytest.mark.slow
def test_a_line_the_cli_does_not_read_ends_it_at_the_deadline():
    child = Child([PY, "-c", "import time; time.sleep(60)"], keep_stdin=True)  # it never reads stdin
    with pytest.raises(CrewTimeout, match=r"'python.*' did not read its input in time; it was stopped"):
        child.send_line("x" * (1 << 22), deadline=time.monotonic() + 0.5)  # more than the pipe holds
    assert child.proc.poll() is not None


def test_kill_ends_a_write_the_cli_does_not_read():
    child = Child([PY, "-c", "import time; time.sleep(60)"], keep_stdin=True)
    writer = threading.Thread(target=child.send_line, args=("x" * (1 << 22),))  # no deadline
    writer.start()
    child.kill(grace=0)  # before the write, or while it waits: either way it returns
    writer.join(10)
    assert not writer.is_alive()


SAVES_ON_SIGTERM = """import pathlib, signal, sys, time
def save(*_):
    time.sleep(0.2)  # a CLI writing its session takes a moment
    pathlib.Path(sys.argv[1], "session").write_text("saved")
    sys.exit(0)
signal.signal(signal.SIGTERM, save)
print("ready", flush=True)
signal.pause()
"""


@pytest.mark.slow
def test_a_stop_reaches_a_sandboxed_cli_before_its_sandbox_ends(sandboxing, tmp_path):
    state = tmp_path / "state"
    sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State(data=(state,)))
    child = Child([PY, "-c", SAVES_ON_SIGTERM, str(state)], cwd=tmp_path, sandbox=sandbox)
    assert child.read_line(time.monotonic() + 30) == "ready"
    child.kill(grace=10)
    assert child.proc.returncode == 0, child.stderr  # it ended by itself, not by the SIGKILL after the grace
    assert (state / "session").read_text() == "saved"


def test_a_missing_cli_is_named_also_inside_the_sandbox(sandboxing, tmp_path):
    sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State())
    with pytest.raises(CLINotFound, match="'no-such-cli-x' not found on PATH"):
        Child(["no-such-cli-x"], cwd=tmp_path, sandbox=sandbox)


# --- what crew says when a CLI fails ------------------------------------------------------------------
# Each as the real CLI writes it (the paths shortened).
GEMINI_WITHOUT_KEY = (
    "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.\n"
    "Update your environment and try again (no reload needed if using .env)!\n"
)
NODE_STACK = """Ripgrep not available: spawn /x/rg EACCES. Falling back to built-in grep.
An unexpected critical error occurred:
Error: EROFS: read-only file system, open '/h/.qwen/settings.json.tmp'
    at async open (node:internal/fs/promises:637:25)
    at async file:///x/chunk-DPEB6S2R.js:141036:7
"""
PYTHON_TRACEBACK = """Traceback (most recent call last):
  File "/x/bin/llm", line 8, in <module>
    sys.exit(cli())
  File "/x/sqlite_utils/db.py", line 3, in execute
    return self.conn.execute(sql)
sqlite3.OperationalError: attempt to write a readonly database
"""
RUST_BACKTRACE = """WARNING: proceeding, even though we could not create PATH aliases
2026-11-28T17:58:22.173801Z ERROR codex_skills: failed to install system skills: io error
Error: thread/start failed: error creating thread

Stack backtrace:
   0: <unknown>
   1: <unknown>
"""
BUN_ERROR = """EROFS: read-only file system, mkdir '/h/.cache'
    path: "/h/.cache",
   errno: -30,


Bun v1.3.14 (Linux x64 baseline)
"""


@pytest.mark.parametrize(
    "stderr, line",
    [
        (GEMINI_WITHOUT_KEY, "When using Gemini API, you must specify the GEMINI_API_KEY environment variable."),
        (NODE_STACK, "Error: EROFS: read-only file system, open '/h/.qwen/settings.json.tmp'"),
        (PYTHON_TRACEBACK, "sqlite3.OperationalError: attempt to write a readonly database"),
        (RUST_BACKTRACE, "Error: thread/start failed: error creating thread"),
        (BUN_ERROR, "EROFS: read-only file system, mkdir '/h/.cache'"),
        ("it went wrong\n", "it went wrong"),
        ("", "no message on stderr"),
    ],
)
def test_the_line_shown_is_the_first_that_says_what_went_wrong_never_a_stack_frame(stderr, line):
    assert process.error_line(stderr) == line


def test_a_refused_write_is_found_with_the_path_it_tried_when_the_cli_names_one(tmp_path):
    assert process.refused_write(NODE_STACK) == ("read-only file system", "/h/.qwen/settings.json.tmp")
    assert process.refused_write(BUN_ERROR) == ("read-only file system", "/h/.cache")  # the path on its own line
    assert process.refused_write(PYTHON_TRACEBACK) == ("attempt to write a readonly database", None)
    made = f"Error: ENOENT: no such file or directory, mkdir '{tmp_path / 'extensions'}'"
    assert process.refused_write(made) == ("a folder could not be made", str(tmp_path / "extensions"))
    assert process.refused_write(f"ENOENT: no such file or directory, mkdir '{tmp_path}/a/b'") is None  # no parent
    assert process.refused_write(GEMINI_WITHOUT_KEY) is None
    assert process.refused_write("spawn /x/rg EACCES") is None  # a program it could not run, not a write


STATE_WRITER = """import pathlib, sys
pathlib.Path(sys.argv[1], "state.db").write_text("x")
"""


def test_a_cli_that_cannot_write_its_state_in_the_sandbox_fails_with_crews_own_line(sandboxing, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    sandbox = sandboxing.cli("required", tmp_path, "query", lambda env: State())
    child = Child([PY, "-c", STATE_WRITER, str(state)], cwd=tmp_path, sandbox=sandbox)
    message = child.failure("mine")
    child.close()
    said = (
        "Read-only file system" if sandboxing.mechanism("required").name == "bwrap" else "[Errno 13] Permission denied"
    )
    assert message == (
        f"mine could not write its own state inside crew's sandbox ({said}: it tried to write {state / 'state.db'}); "
        "if that is where it keeps sessions, logs or caches, list that folder in its provider's state_dirs in "
        "crew.yaml (never one holding its settings: docs/sandbox.md), or pass --sandbox off"
    )
    unconfined = Child([PY, "-c", STATE_WRITER, str(tmp_path / "missing")], cwd=tmp_path)
    assert unconfined.failure("mine").startswith("mine exited with status 1: FileNotFoundError: [Errno 2]")
    unconfined.close()
