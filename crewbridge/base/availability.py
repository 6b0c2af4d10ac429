"""Whether a CLI's failure means its provider cannot serve now (rate limit, quota, overload,
authentication, a model it does not have), which a fallback agent may take over, or something else
(a bad prompt, a tool's failure), which no other agent would fix."""

from __future__ import annotations

import re

_STATUS = re.compile(r"(?<![\w.:/-])(401|403|404|429|503|529)(?![\w.:/-])")
# Checked in order: the first reason whose words or status match is the one given.
_REASONS = [
    (
        "out of quota",
        re.compile(r"insufficient[_ ]quota|quota exceeded|exceeded your current quota|credit balance", re.I),
        (),
    ),
    ("rate limited", re.compile(r"rate[_ ]limit|too many requests|resource[_ ]exhausted", re.I), (429,)),
    ("overloaded", re.compile(r"overloaded|service unavailable|\bUNAVAILABLE\b"), (503, 529)),
    (
        "not authenticated",
        re.compile(r"authenticat|unauthori[sz]ed|invalid[_ ]api[_ ]key|permission[_ ]denied", re.I),
        (401, 403),
    ),
    (
        "model unavailable",
        re.compile(
            r"model\b.{0,80}\b(not found|does not exist|not supported|no access)|issue with the selected model",
            re.I,
        ),
        (404,),
    ),
]


def status_in(message: str) -> int | None:
    """The HTTP status a CLI's message names, among those that mean unavailable."""
    match = _STATUS.search(message)
    return int(match[1]) if match else None


def unavailable(message: str, status: int | None = None) -> str | None:
    """Why the provider cannot serve (e.g. "rate limited (HTTP 429)"), or None when the failure is
    not about availability. `status` is the HTTP status the CLI reported, if it did."""
    status = status or status_in(message)
    for reason, words, statuses in _REASONS:
        if words.search(message) or status in statuses:
            return f"{reason} (HTTP {status})" if status else reason
    return None
