"""The offline demo model (crewbridge.demo): it reads the files a task names with crew:read_file,
then answers from the results it was given."""

from __future__ import annotations

import json

from crewbridge.demo import reply


def result(path: str, content: str) -> str:
    envelope = {"success": True, "data": {"path": path, "content": content}, "error": None}
    return f'Result of crew:read_file {{"path": "{path}"}}:\n```json\n{json.dumps(envelope)}\n```\n'


def test_it_asks_for_each_file_the_task_names_in_one_block():
    asked = reply("[crew tools] …\n\n[task]\ncompare a.txt and b.txt")
    block = json.loads(asked.split("```json\n")[1].split("\n```")[0])
    assert [call["input"]["path"] for call in block] == ["a.txt", "b.txt"]


def test_it_answers_from_every_result_of_a_batch():
    answer = reply("[crew tool results]\n" + result("a.txt", "first\n") + result("b.txt", "second\n"))
    assert answer == (
        "a.txt has 1 non-empty lines. It begins:\n  first\n\nb.txt has 1 non-empty lines. It begins:\n  second\n"
    )
