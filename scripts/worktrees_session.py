"""The sessions of docs/worktrees-and-review.md: the real claude, gemini and codex (node_modules/.bin, pinned)
against the tests' mock model server, in a scratch git repository. Each command runs in bash as a
person types it; what it printed (stdout and stderr, in order) follows it.

    PATH="$PWD/node_modules/.bin:$PATH" .venv/bin/python scripts/worktrees_session.py
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from clienv import cli_env
from crewcli import tool_block
from gitrepo import git, make_repo
from mockserver import MockServer, reply, tool_call

base = Path(tempfile.mkdtemp(prefix="crew-docs-"))
shop = make_repo(
    base / "shop",
    {
        "notes.txt": "deploy window: Friday 14:00 UTC\nowner: dana\n",
        "README.md": "# shop\n\nWe deploy on Fridays; notes.txt has the window.\n",
    },
)


def run(env: dict, command: str) -> str:
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=shop,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    print(f"$ {command}")
    print(done.stdout, end="")
    if done.returncode:
        print(f"[exit {done.returncode}]")
    return done.stdout


def edit(path: str, old: str, new: str) -> str:
    return tool_block("crew:edit_file", path=path, old_string=old, new_string=new)


def verdict(kind: str, *findings: tuple) -> str:
    listed = [{"path": p, "line": n, "severity": s, "message": m} for p, n, s, m in findings]
    return tool_block("crew:verdict", verdict=kind, **({"findings": listed} if findings else {}))


with MockServer() as claude_mock, MockServer() as gemini_mock:
    env = {**cli_env("claude", claude_mock.url, base / "home"), **cli_env("gemini", gemini_mock.url, base / "home")}
    env["XDG_STATE_HOME"] = str(base / "state")

    print("==== worktrees")
    (shop / "todo.txt").write_text("ask dana about the window\n")  # the person's own, not committed
    claude_mock.script(
        reply("I'll change the day.\n", edit("notes.txt", "Friday", "Tuesday")),
        "notes.txt now says Tuesday 14:00 UTC.",
    )
    gemini_mock.script(
        reply(edit("notes.txt", "Friday 14:00", "Wednesday 09:00")),
        "The window is now Wednesday 09:00 UTC.",
    )
    out = run(env, 'crew execute --worktree "@claude @gemini move the deploy window in notes.txt off Friday"')
    run_id = out.split("crew apply ")[1].split()[0]
    run(env, "crew worktrees")
    run(env, f"crew apply {run_id} claude")
    run(env, "git status --short")
    run(env, f"crew apply {run_id} claude")
    run(env, f"crew apply {run_id} gemini")
    run(env, f"crew worktrees clean {run_id}")
    run(env, f"crew worktrees clean --force {run_id}")
    run(env, "git checkout -q notes.txt && rm todo.txt && git status --short")

    print("==== review")
    claude_mock.script(
        reply("I'll change the day in notes.txt.\n", edit("notes.txt", "Friday", "Tuesday")),
        "notes.txt now says the window is Tuesday 14:00 UTC.",
        reply(
            edit("README.md", "Fridays", "Tuesdays"),
            tool_block("crew:dispute", finding=2, reason="notes.txt already gives the time zone: 14:00 UTC on line 1"),
        ),
        "README.md now says Tuesdays; I disputed finding 2, since notes.txt already says UTC.",
    )
    gemini_mock.script(
        tool_block("crew:read_file", path="README.md"),
        verdict(
            "changes",
            ("README.md", 3, "high", "README.md still says we deploy on Fridays"),
            ("notes.txt", 1, "low", "name the time zone of the window"),
        ),
        verdict("approve"),
    )
    run(env, 'crew execute --review gemini "@claude move the deploy window in notes.txt to Tuesday"')
    run(env, "git diff --stat")
    git(shop, "checkout", "-q", ".")

    print("==== rounds run out")
    claude_mock.script(
        reply(edit("notes.txt", "Friday", "Tuesday")),
        "notes.txt now says Tuesday.",
    )
    gemini_mock.script(verdict("changes", ("README.md", 3, "high", "README.md still says we deploy on Fridays")))
    run(
        env,
        'crew execute --json --review gemini --rounds 1 "@claude move the deploy window in notes.txt to Tuesday" '
        "| jq '.results[0] | {answer, error, exit_code, review}'",
    )
    git(shop, "checkout", "-q", ".")

    print("==== over MCP")
    with MockServer() as codex_mock:
        env.update(cli_env("codex", codex_mock.url, base / "home"))
        task = {"task": "@codex move the deploy window in notes.txt to Tuesday", "mode": "execute"}
        claude_mock.script(
            tool_call("ask", {**task, "worktree": True, "review": "gemini"}),
            "Codex moved the window to Tuesday in its own worktree, and Gemini approved it.",
        )
        codex_mock.script(reply(edit("notes.txt", "Friday", "Tuesday")), "notes.txt now says Tuesday.")
        gemini_mock.script(verdict("approve"))
        run(env, "crew mcp install claude --execute")
        run(
            env,
            'claude -p "have codex move the deploy window to Tuesday, in a worktree, reviewed by gemini" '
            "--allowedTools mcp__crew__ask",
        )
        print("---- the ask's result, as claude passed it to its model (some of its fields):")
        told = json.loads(claude_mock.requests[-1].messages()[-1][1])
        shown = {key: told["results"][0][key] for key in ("agent", "answer", "branch", "changes", "review")}
        print(json.dumps({"run": told["run"], "results": [shown]}, indent=1))
        run(env, "crew worktrees")
        print("problems:", codex_mock.problems)
    print("problems:", claude_mock.problems, gemini_mock.problems)
shutil.rmtree(base)
