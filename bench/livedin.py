"""Figure 15: a lived-in home costs nothing. `crew query "@CLI hello"` (one answer, no tool, crew's
default sandbox: bubblewrap here) from a home where the CLI was already used (tests/clienv.py
`live_in`: the user's own MCP server added with the CLI's command, two plain runs in this project,
the folder trusted) vs from a fresh one, in pairs, for claude, gemini and codex (crew installed as
users install it, the real CLIs against the mock model server). Before gemini's projects.json was a
copy in crew's view, gemini's row never finished: it waited for a lock until --timeout.
"""

from __future__ import annotations

import shutil
import tempfile
from functools import partial
from pathlib import Path

from bench.common import Row, Settings, installed, paired, ratio_row, run_timed

CLIS = ("claude", "gemini", "codex")


def run(settings: Settings) -> list[Row]:
    if not settings.cli:
        return []
    from clienv import PLAIN_ANSWER, cli_env, live_in
    from mockserver import MockServer

    crew = str(installed() / "crew")
    root = Path(tempfile.mkdtemp(prefix="crew-bench-livedin-"))
    rows: list[Row] = []
    try:
        work = root / "work"
        work.mkdir()
        with MockServer() as mock:
            mock.respond(lambda request: PLAIN_ANSWER)

            def timed(env: dict[str, str], cli: str) -> float:
                done = run_timed([crew, "query", "--timeout", "60", f"@{cli} hello"], env=env, cwd=work)
                if done.returncode != 0 or PLAIN_ANSWER not in done.stdout.decode():
                    raise RuntimeError(
                        f"crew query @{cli} failed (exit {done.returncode}): {done.stderr.decode()[-300:]}"
                    )
                return done.wall

            for cli in CLIS:
                lived = cli_env(cli, mock.url, root / f"lived-{cli}" / "home")
                live_in(cli, lived, work, mock.url)
                fresh = cli_env(cli, mock.url, root / f"fresh-{cli}" / "home")
                pairs = paired(partial(timed, lived, cli), partial(timed, fresh, cli), settings.repeats(9, 3))
                what = f"crew query @{cli}: a lived-in home vs a fresh one (wall)"
                rows.append(ratio_row("15 livedin", what, *pairs, unit="s", scale=1, target=None))
            if mock.problems:
                raise RuntimeError(f"the mock model server saw: {'; '.join(mock.problems)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows
