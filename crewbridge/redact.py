"""Secrets out of anything crew writes down: values of secret-named variables and common key formats."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# A variable whose name contains one of these holds a secret; its value is redacted wherever it appears.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
MIN_SECRET_LEN = 6  # shorter values ("1", "true", "dummy") would blank out ordinary words

# Key formats recognised without knowing the variable: label, literal markers (a pattern is tried
# only on text that holds one: far quicker than one big regex), pattern. A group "keep" stays.
PATTERNS = [
    (
        "private-key",
        ("PRIVATE KEY-----",),
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.*?-----END [A-Z ]*PRIVATE KEY-----|.*\Z)",
    ),
    ("sk", ("sk-",), r"\bsk-[A-Za-z0-9_\-]{16,}"),
    ("aws", ("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "github",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("slack", ("xox",), r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("google", ("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("bearer", ("earer",), r"(?P<keep>\b[Bb]earer\s+)[A-Za-z0-9\-._~+/]{8,}=*"),
]


class Redactor:
    """Replaces secrets in text with `[REDACTED:…]`."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        names: dict[str, str] = {}
        for name, value in env.items():
            if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LEN:
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
