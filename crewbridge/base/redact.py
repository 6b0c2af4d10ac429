"""Secrets out of anything crew writes down: values of secret-named variables, every value a provider's
`env:` sets, and common key formats."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# A variable whose name contains one of these holds a secret; its value is redacted wherever it appears.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
MIN_SECRET_LEN = 6  # shorter values ("1", "true", "dummy") would blank out ordinary words
_WORD = re.compile(r"[a-z]+")  # a provider env value that is one plain word ("production") is not a secret
OVERLAP = 4096  # characters past a cut that are redacted with the text before it (see head())

# Key formats recognised without knowing the variable: label, literal markers (a pattern is tried
# only on text that holds one: far quicker than one big regex), pattern. A group "keep" stays.
# In order: an AWS secret key is found by the key id before it, so it goes before the id's pattern.
_BASE64_40 = r"(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
PATTERNS = [
    (
        "private-key",
        ("PRIVATE KEY-----",),
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.*?-----END [A-Z ]*PRIVATE KEY-----|.*\Z)",
    ),
    ("sk", ("sk-",), r"\bsk-[A-Za-z0-9_\-]{16,}"),
    (
        "aws-secret",
        ("ecret_access_key", "ECRET_ACCESS_KEY", "ecretAccessKey"),
        r"(?P<keep>(?i:secret_?access_?key)[\"']?\s*[:=]\s*[\"']?)" + _BASE64_40,
    ),
    ("aws-secret", ("AKIA", "ASIA"), r"(?P<keep>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b[^\n]{0,100}?)" + _BASE64_40),
    ("aws", ("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "github",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("slack", ("xox",), r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("google", ("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("bearer", ("earer",), r"(?P<keep>\b[Bb]earer\s+)[A-Za-z0-9\-._~+/]{8,}=*"),
    ("jwt", ("eyJ",), r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    # scheme://user:password@host: the password goes, the user and the host stay
    ("url-password", ("://",), r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/?#@]*:)[^\s/?#@]+(?=@)"),
]


class Redactor:
    """Replaces secrets in text with `[REDACTED:…]`: the values of `env`'s variables whose names say
    they are secrets (default: this process's environment), the values of every variable in
    `provided` whatever its name (what crew.yaml's providers add to their CLIs' environment: their
    names are the user's choice), and the key formats of PATTERNS."""

    def __init__(self, env: Mapping[str, str] | None = None, provided: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        names: dict[str, str] = {}
        for name, value in env.items():
            if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LEN:
                names.setdefault(value, name)
        for name, value in (provided or {}).items():
            if len(value) >= MIN_SECRET_LEN and not _WORD.fullmatch(value):
                names.setdefault(value, name)
        # the longest first, so a secret that contains another is replaced whole
        self._secrets = sorted(names.items(), key=lambda item: len(item[0]), reverse=True)
        # compiled at first use (re caches them): most runs never meet a marker
        self._patterns = [
            (markers, pattern, ("\\g<keep>" if "(?P<keep>" in pattern else "") + f"[REDACTED:{label}]")
            for label, markers, pattern in PATTERNS
        ]

    def text(self, text: str) -> str:
        for value, name in self._secrets:
            if value in text:
                text = text.replace(value, f"[REDACTED:{name}]")
        for markers, pattern, replacement in self._patterns:
            if any(marker in text for marker in markers):
                text = re.sub(pattern, replacement, text, flags=re.DOTALL)
        return text

    def head(self, text: str, limit: int) -> str:
        """The first `limit` characters of `text`, redacted. What follows them is redacted with
        them first (OVERLAP characters of it), so a secret across the cut is never left in part."""
        return self.text(text[: limit + OVERLAP])[:limit]
