"""The README's session "Sessions that last, usage you can see, and a fallback": the real claude and
gemini (node_modules/.bin, pinned) against the tests' mock model server, in a scratch folder.

    PATH="$PWD/node_modules/.bin:$PATH" .venv/bin/python scripts/readme_session.py
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from clienv import cli_env
from crewcli import CREW, tool_block
from mockserver import MockServer, error, reply

base = Path(tempfile.mkdtemp(prefix="crew-readme-"))
work = base / "project"
work.mkdir()
(work / "notes.txt").write_text("deploy window: Tuesday 14:00 UTC\nowner: dana\n")
U = dict(input_tokens=1850, cached_tokens=1200, output_tokens=45)


def crew(env, *args):
    done = subprocess.run(
        [*CREW, *args],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    shown = " ".join(a if " " not in a and a else json.dumps(a) for a in args)
    print(f"$ crew {shown}")
    print(done.stdout, end="")
    if done.returncode:
        print(f"[exit {done.returncode}]")


with MockServer() as claude_mock, MockServer() as gemini_mock:
    env = {**cli_env("claude", claude_mock.url, base / "home"), **cli_env("gemini", gemini_mock.url, base / "home")}
    env["XDG_STATE_HOME"] = str(base / "state")
    claude_mock.script(
        reply("I'll read the notes.\n", tool_block("crew:read_file", path="notes.txt"), **U),
        reply("The deploy window is Tuesday 14:00 UTC.", **U),
        reply("Dana owns it (the second line of notes.txt).", **U),
    )
    crew(env, "query", "@claude when is the deploy window?")
    crew(env, "query", "--continue", "@claude and who owns it?")
    print("---- the continued request, as the mock received it:")
    for role, text in claude_mock.requests[-1].messages():
        if role != "system":
            print(f"[{role}] {text[:70]!r}")
    (work / "crew.yaml").write_text("agents:\n  claude:\n    fallback: [gemini]\n")
    claude_mock.script(error(429, "Number of request tokens has exceeded your per-minute rate limit"))
    gemini_mock.script(
        reply(tool_block("crew:read_file", path="notes.txt"), **U), reply("Tuesday 14:00 UTC; dana owns it.", **U)
    )
    print("----")
    crew(env, "query", "@claude summarise notes.txt")
    crew(env, "log")
    crew(env, "log", "--since", "7d", "--by", "agent")
    print("problems:", claude_mock.problems, gemini_mock.problems)
shutil.rmtree(base)
