"""crewbridge.base.visible: what an approval question shows hides nothing — the attacks that hid a command's
tail (a run of spaces, a line break, an ANSI sequence, bidi and zero-width characters) each drawn."""

from __future__ import annotations

import pytest

from crewbridge.base.visible import visible, visible_strings

ATTACK = "ls -la" + " " * 220 + "; echo owned > pwned.txt"


def test_a_run_of_spaces_is_counted_so_the_tail_stays_in_sight():
    assert visible(ATTACK) == "ls -la⟨220 spaces⟩; echo owned > pwned.txt"
    assert visible("a b  c   d") == "a b  c   d"  # up to three spaces are drawn as they are


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ls\necho owned", "ls\\necho owned"),
        ("ls\r; echo owned", "ls\\r; echo owned"),
        ("ls\techo", "ls\\techo"),
        ("ls \x1b[8m; echo owned\x1b[0m", "ls \\x1b[8m; echo owned\\x1b[0m"),  # ANSI "hidden" text
        ("ls\x7f\x85\x00", "ls\\x7f\\x85\\x00"),  # DEL, C1, NUL
        ("ls # \u202etxt.exe", "ls # \\u202etxt.exe"),  # right-to-left override
        ("rm\u200b -rf\u2060 /\ufeff", "rm\\u200b -rf\\u2060 /\\ufeff"),  # zero-width characters
        ("echo\u00a0hi\u3000x\u2028y", "echo\\xa0hi\\u3000x\\u2028y"),  # spaces that are not " ", a line separator
        ("a\u3164b\u2800c", "a\\u3164b\\u2800c"),  # blank letters
        ("a\ufe0fb\U000e0041c", "a\\ufe0fb\\U000e0041c"),  # a variation selector, a tag character
    ],
)
def test_what_draws_nothing_or_moves_text_is_drawn_as_an_escape(text, shown):
    assert visible(text) == shown


def test_text_people_write_stays_as_it_is():
    assert visible('grep -n "café" 日本.txt && echo 😀') == 'grep -n "café" 日本.txt && echo 😀'
    assert visible(r"printf 'a\nb'") == r"printf 'a\nb'"  # a backslash the text holds is left alone


def test_a_cut_says_how_many_characters_of_the_text_are_left_out():
    assert visible("x" * 10, 4) == "xxxx… (6 more characters)"
    assert visible("x" * 4, 4) == "xxxx"
    assert visible("a" * 2000 + "; echo owned", 1000) == "a" * 1000 + "… (1,012 more characters)"
    # an escape or a count is never cut in two; the left-out count is of the text's own characters
    assert visible("ab\ncd", 3) == "ab… (3 more characters)"
    assert visible("ab" + " " * 40 + "cd", 8) == "ab… (42 more characters)"
    assert visible(ATTACK, 30) == "ls -la⟨220 spaces⟩; echo owned… (12 more characters)"


def test_line_by_line_keeps_line_breaks_and_indentation_only():
    text = "def f():\n\t    return 1" + " " * 30 + "; import os\n  x\u202e\r\n"
    assert visible(text, lines=True) == "def f():\n\t    return 1⟨30 spaces⟩; import os\n  x\\u202e\\r\n"


def test_every_string_of_an_input_keys_included():
    given = {"command": ATTACK, "env\u202e": ["a\nb", 3, None]}
    assert visible_strings(given) == {
        "command": "ls -la⟨220 spaces⟩; echo owned > pwned.txt",
        "env\\u202e": ["a\nb", 3, None],
    }
    assert visible_strings({"x": "a\nb"}, lines=False) == {"x": "a\\nb"}
