"""Which CLI failures mean the provider cannot serve now (a fallback may take over), in the words the
real CLIs use (measured against the mock model server: tests/e2e)."""

from __future__ import annotations

import pytest

from crewbridge.base.availability import unavailable


@pytest.mark.parametrize(
    "message, status, reason",
    [
        ("API Error: Request rejected (429) · mock error 429", 429, "rate limited (HTTP 429)"),  # claude
        ("exceeded retry limit, last status: 429 Too Many Requests", None, "rate limited (HTTP 429)"),  # codex
        ("[API Error: Resource has been exhausted] Please wait (HTTP 429)", 429, "rate limited (HTTP 429)"),  # gemini
        ("You exceeded your current quota, please check your plan", None, "out of quota"),
        ("insufficient_quota: (HTTP 429)", 429, "out of quota (HTTP 429)"),
        ("API Error: 529 overloaded. This is a server-side issue", 529, "overloaded (HTTP 529)"),
        ("API Error 503 UNAVAILABLE: the model is overloaded", None, "overloaded (HTTP 503)"),
        ("Failed to authenticate. API Error: 401 invalid x-api-key", 401, "not authenticated (HTTP 401)"),
        (
            "unexpected status 401 Unauthorized: bad key, url: http://127.0.0.1:33157/v1/responses",
            None,
            "not authenticated (HTTP 401)",
        ),
        ("There's an issue with the selected model (claude-x). It may not exist", None, "model unavailable"),
        ("unexpected status 404 Not Found: model gpt-9 does not exist", None, "model unavailable (HTTP 404)"),
    ],
)
def test_availability_failures_name_their_reason(message, status, reason):
    assert unavailable(message, status) == reason


@pytest.mark.parametrize(
    "message, status",
    [
        ("API Error: 400 prompt is too long", 400),
        ("API Error 500 INTERNAL: mock failure 500", None),
        ("fake exited with status 1: Traceback … KeyError", None),
        ("listening on 127.0.0.1:4290 and port 8429", None),  # numbers inside others are not statuses
        ("@claude ended its reply without a word", None),
    ],
)
def test_other_failures_are_not_about_availability(message, status):
    assert unavailable(message, status) is None
