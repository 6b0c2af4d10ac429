"""The offline demo model (crewbridge.base.demo): it reads the files a task names with crew:read_file,
reads a long one on, part by part, then answers from the results it was given — and what it says of
the README, the first thing a newcomer runs, is true."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crewbridge.base.demo import PAGES, reply
from crewcli import crew_env, run_crew

ROOT = Path(__file__).resolve().parent.parent


def result(path: str, content: str, start: int = 1, total: int | None = None, offset: int | None = None) -> str:
    data = {"path": path, "start_line": start, "content": content}
    if total is not None:
        data.update(end_line=start + len(content.splitlines()) - 1, total_lines=total)
    data.update({"next_offset": start + len(content.splitlines())} if offset else {})
    envelope = {"success": True, "data": data, "error": None}
    call = {"path": path, **({"offset": start} if start > 1 else {})}
    return f"Result of crew:read_file {json.dumps(call)}:\n```json\n{json.dumps(envelope)}\n```\n"


def calls(reply_text: str) -> list[dict]:
    block = json.loads(reply_text.split("```json\n")[1].split("\n```")[0])
    return block if isinstance(block, list) else [block]


def test_it_asks_for_each_file_the_task_names_in_one_block():
    asked = reply("[crew tools] …\n\n[task]\ncompare a.txt and b.txt")
    block = json.loads(asked.split("```json\n")[1].split("\n```")[0])
    assert [call["input"]["path"] for call in block] == ["a.txt", "b.txt"]


def test_it_answers_from_every_result_of_a_batch():
    answer = reply("[crew tool results]\n" + result("a.txt", "first\n") + result("b.txt", "second\n"))
    assert answer == (
        "a.txt has 1 non-empty line (1 line in all). It begins:\n  first\n\n"
        "b.txt has 1 non-empty line (1 line in all). It begins:\n  second\n"
    )


def test_it_reads_a_long_file_on_and_counts_every_part():
    first = result("long.txt", "a\n\nb\n", total=5, offset=True)
    asked = reply(f"[task]\nwhat is in long.txt?\n[crew tool results]\n{first}")
    assert [call["input"] for call in calls(asked)] == [{"path": "long.txt", "offset": 4}]
    second = result("long.txt", "c\n\n", start=4, total=5)
    history = f"[user]\n[crew tool results]\n{first}\n[new message]\n[crew tool results]\n{second}"
    assert reply(history) == "long.txt has 3 non-empty lines (5 lines in all). It begins:\n  a\n  b\n  c\n"


def test_past_its_parts_it_says_exactly_which_lines_it_counted():
    parts = [result("big.txt", "x\n\n", start=1 + 2 * n, total=100, offset=True) for n in range(PAGES)]
    history = "".join(f"[user]\n[crew tool results]\n{part}\n" for part in parts[:-1])
    answer = reply(f"{history}[new message]\n[crew tool results]\n{parts[-1]}")
    assert answer.startswith(
        f"I read lines 1-{2 * PAGES} of big.txt's 100: {PAGES} of them are not empty (I did not read the rest)."
    )


@pytest.mark.slow
def test_what_the_demo_says_of_the_readme_is_true(tmp_path):
    done = run_crew(["query", "@demo what is in README.md?"], env=crew_env(tmp_path / "home"), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    said = re.match(r"README\.md has (\d+) non-empty lines \((\d+) lines in all\)\.", done.stdout)
    assert said, done.stdout
    lines = (ROOT / "README.md").read_text().splitlines()
    assert (int(said[1]), int(said[2])) == (sum(1 for line in lines if line.strip()), len(lines))
    assert done.stderr.count("→ crew:read_file README.md") > 1  # the README is longer than one part
