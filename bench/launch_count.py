"""The launch figure counted in instructions instead of time: from `crew query "@claude hi"`'s start
to its spawn of claude (or of bwrap, which runs claude), and on to claude's release (bwrap holds
claude back until crew's proxy has its doors in the sandbox's network: --block-fd), against the bare
launcher's (bench/launcher.py) from its start to its spawn, each counted by valgrind's callgrind
(the process's instructions, every thread's: exact and repeatable however loaded the machine is).
The same installed venvs, fake claude and folders as figure "3 launch". A third line counts the
launcher after importing the standard modules crew's start is written with (FLOOR): the least any
start in crew's style can cost, against which the launch goal's 2.0× is read.

    .venv/bin/python bench/launch_count.py [--before ../before] [--importtime]

--importtime also prints, for crew, the modules imported before the spawn and their own times
(python -X importtime, the least of 5 runs: wall clock, so only a guide)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import installed, scratch, with_bytecode
from bench.harness import claude_env
from bench.launch import FAKE

# Where a Python process starts a child: subprocess's fork and exec, os.posix_spawn(p).
SPAWNS = ("subprocess_fork_exec", "os_posix_spawn", "os_posix_spawnp")
# The standard modules every module of crew's start path is written with (the launch's floor).
FLOOR = ("dataclasses", "pathlib", "json")
# crew's first fcntl.fcntl after the spawn: crewbridge.system.process grows the CLI's stdout pipe once
# crewbridge.sandbox.spawn returned, the sandbox's gate opened and the CLI released (bwrap's --block-fd).
STARTED = "fcntl_fcntl"


def count(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[int, int]:
    """The instructions `argv` runs (every thread's) before it first spawns a child, and before its
    first fcntl.fcntl after that (crew: its CLI started and released; else the spawn's count)."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--trace-children=no",
                f"--callgrind-out-file={out}/cg.%p",
                *(f"--dump-before={name}" for name in (*SPAWNS, STARTED)),
                *argv,
            ],
            env=env,
            cwd=cwd,
            capture_output=True,
            timeout=600,
        )
        # The process's own dumps (the lowest pid: a forked child's copy dumps under its own), in order.
        pid = min(int(p.name.split(".")[1]) for p in Path(out).glob("cg.*.*"))
        parts = sorted(Path(out).glob(f"cg.{pid}.*"), key=lambda p: int(p.name.split(".")[2]))
        total, spawned = 0, None
        for part in parts:
            text = part.read_text()
            total += int(re.search(r"^totals: (\d+)", text, re.M).group(1))  # type: ignore[union-attr]
            trigger = re.search(r"^desc: Trigger: --dump-before=(\S+)", text, re.M)
            name = trigger.group(1) if trigger else ""
            if spawned is None and name in SPAWNS:
                spawned = total
            elif spawned is not None and name == STARTED:
                return spawned, total
        if spawned is None:
            raise RuntimeError(f"{' '.join(argv)} spawned nothing")
        return spawned, spawned


def imports(argv: list[str], env: dict[str, str], cwd: Path, runs: int = 5) -> list[tuple[str, float]]:
    """Each module `argv` imports (python -X importtime), with its own time in ms, least of `runs`."""
    best: dict[str, float] = {}
    for _ in range(runs):
        err = subprocess.run(argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, cwd=cwd, capture_output=True).stderr
        found = [re.match(r"import time:\s+(\d+) \|\s+\d+ \| (\s*)(\S+)", line) for line in err.decode().splitlines()]
        lines = [(int(m.group(1)) / 1000, len(m.group(2)), m.group(3)) for m in found if m]
        # Up to crewbridge.cli, which loads after the spawn: its line comes after its own imports'.
        end = next((i for i, (_, _, name) in enumerate(lines) if name == "crewbridge.cli"), len(lines))
        depth = lines[end][1] if end < len(lines) else 0
        while end > 0 and lines[end - 1][1] > depth:
            end -= 1
        for ms, _, name in lines[:end]:
            best[name] = min(best.get(name, 1e9), ms)
    return sorted(best.items(), key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench/launch_count.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, metavar="CHECKOUT", help="another checkout, counted beside this one")
    parser.add_argument("--importtime", action="store_true", help="also list crew's imports before the spawn")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("bench/launch_count.py: valgrind is not installed (apt-get install valgrind)")
    folder = scratch("launch")
    fake = folder / "bin" / "claude"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE)
    fake.chmod(0o755)
    sides = {
        "crew": Path(__file__).resolve().parent.parent,
        **({"before": args.before.resolve()} if args.before else {}),
    }
    with claude_env() as (_mock, env, work):
        stamps = Path(env["HOME"]) / ".claude" / "debug" / "launch-stamps.txt"
        stamps.parent.mkdir(parents=True, exist_ok=True)
        env = with_bytecode(
            {**env, "PATH": f"{fake.parent}{os.pathsep}{env['PATH']}", "BENCH_LAUNCH_STAMPS": str(stamps)}
        )
        launcher = Path(__file__).with_name("launcher.py")
        argvs = {
            "launcher": [str(installed() / "python"), str(launcher), "-p", "hi"],
            # The launcher after the standard modules crew's values and paths are made of: the floor of
            # any start written in crew's style (dataclasses for values, pathlib for paths, JSON records).
            "launcher + " + ", ".join(FLOOR): [
                str(installed() / "python"),
                "-c",
                f"import {', '.join(FLOOR)}; exec(compile(open({str(launcher)!r}).read(), 'launcher.py', 'exec'))",
                "-p",
                "hi",
            ],
        }
        for side, repo in sides.items():
            argvs[side] = [str(installed(repo) / "crew"), "query", "@claude hi"]
        for argv in argvs.values():  # bytecode written, caches warm
            subprocess.run(argv, env=env, cwd=work, capture_output=True)
        counts = {name: count(argv, env, work) for name, argv in argvs.items()}
        base = counts["launcher"][0]
        print(f"{'instructions (callgrind)':40} to the spawn         to the CLI's release")
        for name, (spawn, started) in counts.items():
            print(f"{name:40} {spawn / 1e6:7.1f}M {spawn / base:5.2f}×   {started / 1e6:7.1f}M {started / base:5.2f}×")
        if args.importtime:
            for name, ms in imports(argvs["crew"], env, work):
                if ms >= 0.2:
                    print(f"  {ms:6.2f} ms  {name}")


if __name__ == "__main__":
    main()
