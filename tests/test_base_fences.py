"""The fence grammar alone (crewbridge/base/fences.py): which text is a candidate block, when it closes,
what is held back while it may still turn out to be one. No tools here: a tiny scanner yields each
candidate block's text; the call rules on top of it are tested in tests/test_toolkit_extract.py."""

from __future__ import annotations

import pytest

from crewbridge.base.fences import MAX_FENCE_LINE, Block, FenceScanner


class Blocks(FenceScanner[str]):
    """Yields the text of every candidate block: as it closed, or "cut:" and its text."""

    def _closed(self, block: Block, length: int, end: int) -> list[str]:
        return [block.text(length)]

    def _cut(self, block: Block, length: int, end: int) -> list[str]:
        return ["cut:" + block.text(length)]


def blocks(*chunks: str) -> list[str]:
    scanner = Blocks()
    return [item for chunk in chunks for item in scanner.feed(chunk)] + scanner.finish()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("```json\n{}\n```\n", ["{}\n"]),
        ("```\nplain\n```\n", ["plain\n"]),
        ("~~~JSON\n[1]\n~~~\n", ["[1]\n"]),
        ("````json\na\n```\nb\n````\n", ["a\n```\nb\n"]),  # a shorter fence inside does not close it
        ("   ```json\nx\n   ```\n", ["x\n"]),  # up to 3 spaces of indent
        ("    ```json\nx\n    ```\n", []),  # 4 spaces: indented code, not a fence
        ("````python\n```json\n{}\n```\n````\n", []),  # another language's fence holds examples
        ("Write ```json {}``` inline.\n", []),  # a backtick in the info string: inline code
        ('```json\n{"a": 1}\n```   \n', ['{"a": 1}\n']),  # spaces after the closing fence
        ('```json\n{"a": 1}\n``` not a close\n```\n', ['{"a": 1}\n``` not a close\n']),
    ],
)
def test_candidate_blocks_follow_commonmark_fences(text: str, expected: list[str]) -> None:
    assert blocks(text) == expected
    assert blocks(*text) == expected  # however the text is split


def test_a_fence_line_inside_a_json_string_is_content():
    text = '```json\n{"content": "a\n```\nb"}\n```\n'
    assert blocks(text) == ['{"content": "a\n```\nb"}\n']
    assert blocks(*text) == ['{"content": "a\n```\nb"}\n']


def test_a_message_boundary_cuts_an_open_block_and_resets_the_fences():
    scanner = Blocks()
    assert scanner.feed('```json\n{"a": ') == []
    assert scanner.end_message() == ['cut:{"a": ']
    assert scanner.feed("```\nnew\n```\n") == ["new\n"]


def test_a_line_longer_than_the_limit_is_never_a_fence():
    long_open = "```json" + " " * MAX_FENCE_LINE + "\n"
    assert blocks(long_open + "{}\n```\n") == ["cut:"]  # the would-be close opens a block instead


def test_what_may_still_be_a_fence_line_or_a_block_is_held_from_a_person():
    scanner = Blocks()
    scanner.feed("Hello\n``")
    assert scanner.shown_upto == len("Hello\n")  # "``" may become a fence line
    scanner.feed("`json\n{")
    assert scanner.shown_upto == len("Hello\n")  # an open candidate block
    assert scanner.feed("}\n```\nafter") == ["{}\n"]
    assert scanner.first_call_at == len("Hello\n")  # the block yielded an item (a call)
    assert scanner.shown_upto == len("Hello\n")  # nothing from a call on is shown
    assert scanner.prose_after_calls


def test_a_block_that_yields_nothing_is_shown_once_it_closes():
    class Nothing(Blocks):
        def _closed(self, block: Block, length: int, end: int) -> list[str]:
            return []

    scanner = Nothing()
    scanner.feed("See:\n```json\n{}\n")
    assert scanner.shown_upto == len("See:\n")
    scanner.feed("```\nok")
    assert scanner.shown_upto == len("See:\n```json\n{}\n```\nok")
