"""Secrets out of anything crew writes down: values of secret-named variables and common key formats."""
from __future__ import annotations

import os
import re
from typing import Any, Mapping

# A variable whose name contains one of these holds a secret; its value is redacted wherever it appears.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
MIN_SECRET_LEN = 6  # shorter values ("1", "true", "dummy") would blank out ordinary words

# Key formats recognised without knowing the variable: (label, pattern). A group named "keep" stays.
PATTERNS = [
    ("private-key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.*?-----END [A-Z ]*PRIVATE KEY-----|.*\Z)"),
    ("sk", r"\bsk-[A-Za-z0-9_\-]{16,}"),
    ("aws", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("github", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ("slack", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("google", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("bearer", r"(?P<keep>\b[Bb]earer\s+)[A-Za-z0-9\-._~+/]{8,}=*"),
]


class Redactor:
    """Replaces secrets in strings (and in every string inside JSON-like values) with `[REDACTED:…]`."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self._names: dict[str, str] = {}
        for name, value in env.items():
            if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LEN:
                self._names.setdefault(value, name)
        values = sorted(self._names, key=len, reverse=True)  # the longest first: no partial overlaps
        alternatives = [f"(?P<p{i}>{pattern})" for i, (_, pattern) in enumerate(PATTERNS)]
        if values:
            alternatives.insert(0, "(?P<env>" + "|".join(map(re.escape, values)) + ")")
        self._regex = re.compile("|".join(alternatives), re.DOTALL)

    def text(self, text: str) -> str:
        return self._regex.sub(self._replace, text)

    def value(self, value: Any) -> Any:
        """`value` with every string in it (dict keys too) redacted; other scalars unchanged."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value

    def _replace(self, match: re.Match[str]) -> str:
        group = match.lastgroup or ""
        if group == "env":
            return f"[REDACTED:{self._names[match.group('env')]}]"
        return f"{match.group('keep') or ''}[REDACTED:{PATTERNS[int(group[1:])][0]}]"
